// Per-node stochastic gradients of the paper's synthetic problem (Appendix E.2):
//
//   f_i(x) = (1/M) sum_l ln(1 + exp(-y_il h_il^T x)) + rho sum_j x_j^2 / (1 + x_j^2)
//   grad   = -(1/B) sum_b y_b h_b / (1 + exp(y_b h_b^T x)) + rho 2 x / (1 + x^2)^2
//
// Node i owns rows [i M, (i+1) M) of H (rows of d features) and Y (+-1).  Each
// call computes every node's gradient (rows of X) in one threaded loop.  The
// mini-batch of node i is drawn without replacement from its M samples by a
// counter-based generator keyed on (seed, repetition, node, iteration, batch),
// so results do not depend on the thread count or on the order of the nodes;
// the sums run in fixed orders on W-lane vectors (simd.hpp), so they do not
// depend on the vector width either.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "hash.hpp"
#include "parallel.hpp"
#include "simd.hpp"

namespace rowstoch {

// GCC's and Clang's 128-bit integer, as numpy_random.hpp declares it (`__extension__`: no -Wpedantic warning).
__extension__ typedef unsigned __int128 u128;

// A small counter-based stream: state = key, next() = mix64(key + k * golden).
// Small bounds take small draws from a pool of bits, low bits first: 16 bits
// for bounds up to 2^12 (at most 1/16 of draws rejected), 32 bits up to 2^32;
// larger bounds take whole 64-bit outputs.  A fresh output refills the pool
// when it holds fewer bits than the draw needs (the rest is dropped).
struct Stream {
    std::uint64_t key, counter = 0, pool = 0;
    int pool_bits = 0;
    explicit Stream(std::uint64_t k) : key(k) {}
    std::uint64_t next() { return mix64(key + 0x9E3779B97F4A7C15ULL * (++counter)); }
    template <int Bits>
    std::uint64_t draw_bits() {
        if (pool_bits < Bits) {
            pool = next();
            pool_bits = 64;
        }
        const std::uint64_t r = pool & ((std::uint64_t(1) << Bits) - 1);
        pool >>= Bits;
        pool_bits -= Bits;
        return r;
    }
    // Uniform integer in [0, bound) from Bits-bit draws (Lemire's multiply-shift with rejection: unbiased).
    template <int Bits>
    std::uint64_t below_small(std::uint64_t bound) {
        const std::uint64_t mask = (std::uint64_t(1) << Bits) - 1;
        for (;;) {
            const std::uint64_t m = draw_bits<Bits>() * bound;
            const std::uint64_t lo = m & mask;  // the threshold (2^Bits - bound) % bound < bound: rarely needed
            if (lo >= bound || lo >= ((mask + 1) - bound) % bound) return m >> Bits;
        }
    }
    std::uint64_t below(std::uint64_t bound) {
        if (bound <= (std::uint64_t(1) << 12)) return below_small<16>(bound);
        if (bound <= 0xFFFFFFFFULL) return below_small<32>(bound);
        for (;;) {
            const std::uint64_t x = next();
            const u128 m = static_cast<u128>(x) * bound;
            const std::uint64_t lo = static_cast<std::uint64_t>(m);
            if (lo >= bound || lo >= (-bound) % bound) return static_cast<std::uint64_t>(m >> 64);
        }
    }
};

inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t rep, std::uint64_t node,
                                std::uint64_t iteration, std::uint64_t batch) {
    std::uint64_t k = mix64(seed);
    k = mix64(k ^ rep);
    k = mix64(k ^ node);
    k = mix64(k ^ iteration);
    return mix64(k ^ batch);
}

// h^T x in the one order every path uses: four partial sums
// s_k = sum_{j = k mod 4} h_j x_j (each in increasing j), then (s_0 + s_2) + (s_1 + s_3).
template <class T>
inline T dot4(const T* h, const T* x, std::int64_t d) {
    T s[4] = {0, 0, 0, 0};
    for (std::int64_t j = 0; j < d; ++j) s[j & 3] += h[j] * x[j];
    return (s[0] + s[2]) + (s[1] + s[3]);
}

// x (or the running sums) of a compile-time row length D in registers: full W-lane
// vectors for entries [0, kFull), then a 2-lane vector and a scalar for the
// rest (so the tail never needs single lanes of a wide vector).
template <int D, int W, int Group>
struct RowRegs {
    static constexpr int kFull = D / Group * Group, kRest = D - kFull;
    static constexpr int kVecs = kFull / W, kPair = kRest >= 2 ? 1 : 0, kSingle = kRest % 2;
    Vec<W> v[kVecs > 0 ? kVecs : 1];
    Vec<2> pair;
    double single;

    ROWSTOCH_INLINE void load(const double* p) {
        for (int q = 0; q < kVecs; ++q) v[q] = vload<W>(p + q * W);
        pair = Vec<2>{};
        if constexpr (kPair) pair = vload<2>(p + kFull);
        single = kSingle ? p[D - 1] : 0.0;
    }
    ROWSTOCH_INLINE void store(double* p) const {
        for (int q = 0; q < kVecs; ++q) vstore<W>(p + q * W, v[q]);
        if constexpr (kPair) vstore<2>(p + kFull, pair);
        if constexpr (kSingle) p[D - 1] = single;
    }
};

// dot4 for a compile-time D with W-lane vectors (the same partial sums, the same
// bits): chunks of 4 in x.v, the tail's products added last to sums 0, 1 (pair)
// and 0 or 2 (single).
template <int D, int W>
ROWSTOCH_INLINE double dot4_vec(const double* h, const RowRegs<D, W, 4>& x) {
    constexpr int G = 4 / W, Q = D / 4, R = D % 4;
    Vec<W> s[G] = {};
    for (int q = 0; q < Q; ++q)
        for (int g = 0; g < G; ++g) s[g] += vload<W>(h + 4 * q + g * W) * x.v[q * G + g];
    double p0 = s[0][0], p1 = s[1 / W][1 % W], p2 = s[2 / W][2 % W], p3 = s[3 / W][3 % W];
    if constexpr (R >= 2) {
        const Vec<2> t = vload<2>(h + 4 * Q) * x.pair;
        p0 += t[0];
        p1 += t[1];
    }
    if constexpr (R == 1) p0 += h[D - 1] * x.single;
    if constexpr (R == 3) p2 += h[D - 1] * x.single;
    return (p0 + p2) + (p1 + p3);
}

// __builtin_shufflevector: clang, GCC >= 12 (older compilers take the per-row fold below).
#ifndef ROWSTOCH_HAS_SHUFFLE
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define ROWSTOCH_HAS_SHUFFLE 1
#endif
#endif
#endif
#ifndef ROWSTOCH_HAS_SHUFFLE
#define ROWSTOCH_HAS_SHUFFLE 0
#endif

#if ROWSTOCH_HAS_SHUFFLE
// Margins of 4 samples at once with 4-lane vectors, the same bits as dot4: each
// row's partial sums s_0..s_3 in one vector (the tail's products added last, the
// lanes past the tail adding -0.0, which changes nothing), then a 4 x 4 transpose
// so that (s_0 + s_2) + (s_1 + s_3) is computed for the 4 rows lane by lane.
// xt: x's tail entries in lanes 0..D%4-1, -0.0 in the others.
template <int D>
ROWSTOCH_INLINE Vec<4> margins4(const double* H, const double* Y, const std::int64_t* l,
                                const RowRegs<D, 4, 4>& x, const Vec<4>& xt) {
    constexpr int Q = D / 4, R = D % 4;
    Vec<4> S[4];
    for (int k = 0; k < 4; ++k) {
        const double* h = H + l[k] * D;
        Vec<4> s = {};
        for (int q = 0; q < Q; ++q) s += vload<4>(h + 4 * q) * x.v[q];
        if constexpr (R != 0) {
            Vec<4> ht = {};
            for (int r = 0; r < R; ++r) ht[r] = h[4 * Q + r];
            s += ht * xt;
        }
        S[k] = s;
    }
    const Vec<4> t0 = __builtin_shufflevector(S[0], S[1], 0, 4, 2, 6), t1 = __builtin_shufflevector(S[0], S[1], 1, 5, 3, 7);
    const Vec<4> t2 = __builtin_shufflevector(S[2], S[3], 0, 4, 2, 6), t3 = __builtin_shufflevector(S[2], S[3], 1, 5, 3, 7);
    const Vec<4> p0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), p2 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    const Vec<4> p1 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5), p3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
    const Vec<4> y = {Y[l[0]], Y[l[1]], Y[l[2]], Y[l[3]]};
    return y * ((p0 + p2) + (p1 + p3));
}
#endif

// acc_j += c h_j for j < D (element by element: any grouping gives the same bits).
template <int D, int W>
ROWSTOCH_INLINE void axpy_vec(RowRegs<D, W, W>& acc, double c, const double* h) {
    using R = RowRegs<D, W, W>;
    for (int q = 0; q < R::kVecs; ++q) acc.v[q] += c * vload<W>(h + q * W);
    if constexpr (R::kPair) acc.pair += c * vload<2>(h + R::kFull);
    if constexpr (R::kSingle) acc.single += c * h[D - 1];
}

// The side job of a pass that has none (logistic_accumulate's `side`).
inline void no_side_job(std::int64_t) {}

// out[:] += weight * (logistic-loss gradient at x over the samples idx[0..count)):
//   out += sum_b c_b h_b,  c_b = -y_b weight / (1 + exp(y_b h_b^T x)),
// and with kLoss, *loss_sum += sum_b ln(1 + exp(-y_b h_b^T x)) (in sample order).
// Three passes over chunks of samples: margins, then their logistic weights W at
// a time (simd.hpp), then the accumulation.  For T = double and a compile-time
// row length D (1..16), x and the sums live in W-lane vector registers; other
// cases (D = 0: d at run time; float data) run the same sums in scalar code.
// Every path adds in the same order, so the bits do not depend on W or D.
// side(b) is called once for each b in [0, count), from the accumulation pass:
// the caller's independent work (drawing the next mini-batch) interleaves with
// this arithmetic.
template <int D, int W, bool kLoss, class T, class Side>
ROWSTOCH_INLINE void logistic_accumulate(const T* H, const T* Y, std::int64_t d_runtime, const T* x,
                                         const std::int64_t* idx, std::int64_t count, T weight, T* out,
                                         Side&& side, double* loss_sum = nullptr) {
    constexpr bool kVector = D > 0 && std::is_same<T, double>::value;
    constexpr int kD = D > 0 ? D : 1;
    const std::int64_t d = D > 0 ? D : d_runtime;
    RowRegs<kD, W, 4> xr;    // x, grouped as the dot product's partial sums
    RowRegs<kD, W, W> acc;   // the gradient sums
    if constexpr (kVector) {
        xr.load(x);
        acc.load(out);
    }
    constexpr std::int64_t kBlock = 64;
    alignas(32) double z[kBlock], e[kLoss ? kBlock : 1];
    for (std::int64_t b0 = 0; b0 < count; b0 += kBlock) {
        const std::int64_t nb = count - b0 < kBlock ? count - b0 : kBlock;
        std::int64_t b = 0;
#if ROWSTOCH_HAS_SHUFFLE
        if constexpr (kVector && W == 4) {
            Vec<4> xt = -Vec<4>{};  // -0.0 in every lane
            for (int r = 0; r < kD % 4; ++r) xt[r] = x[kD / 4 * 4 + r];
            for (; b + 4 <= nb; b += 4) vstore<4>(z + b, margins4<kD>(H, Y, idx + b0 + b, xr, xt));
        }
#endif
        for (; b < nb; ++b) {
            const std::int64_t l = idx[b0 + b];
            if constexpr (kVector) z[b] = Y[l] * dot4_vec<kD, W>(H + l * D, xr);
            else z[b] = static_cast<double>(Y[l] * dot4(H + l * d, x, d));
        }
        for (b = nb; b % W != 0; ++b) z[b] = 0.0;
        if constexpr (kLoss) {  // ln(1 + e^-m) = max(-m, 0) + ln(1 + e^-|m|), m the margin
            double sum = *loss_sum;
            for (std::int64_t b = 0; b < nb; ++b) sum += z[b] < 0.0 ? -z[b] : 0.0;
            for (std::int64_t b = 0; b < nb; b += W) logistic_weights<W, true>(z + b, e + b);
            for (std::int64_t b = 0; b < nb; b += W) log1p_unit<W>(e + b);
            for (std::int64_t b = 0; b < nb; ++b) sum += e[b];
            *loss_sum = sum;
        } else {
            for (std::int64_t b = 0; b < nb; b += W) logistic_weights<W>(z + b);
        }
        for (std::int64_t b = 0; b < nb; ++b) {
            side(b0 + b);
            const std::int64_t l = idx[b0 + b];
            const double c = -static_cast<double>(Y[l]) * z[b] * static_cast<double>(weight);
            if constexpr (kVector) {
                axpy_vec<kD, W>(acc, c, H + l * D);
            } else {
                const T* h = H + l * d;
                for (std::int64_t j = 0; j < d; ++j) out[j] += static_cast<T>(c) * h[j];
            }
        }
    }
    if constexpr (kVector) acc.store(out);
}

// logistic_accumulate for W rows at once over the same samples idx[0..count): lane r of every
// vector is row r (x_r = xs[r], its sums in outs[r]), the samples' rows read once for all W.  Each
// lane does, operation for operation, what logistic_accumulate does for its row (dot4's partial
// sums in increasing j, (s_0 + s_2) + (s_1 + s_3), the same logistic weights, c = -y z weight,
// acc_j += c h_j in sample order), so the bits are those of W calls of it.  Rows of a tuner's
// candidates, which share their mini-batches (rep_period), are differentiated this way.  side(b), as in
// logistic_accumulate, once for each b in order from the accumulation pass.
template <int D, int W, class Side>
ROWSTOCH_INLINE void logistic_accumulate_lanes(const double* H, const double* Y, const double* const* xs,
                                               const std::int64_t* idx, std::int64_t count, double weight,
                                               double* const* outs, Side&& side) {
    Vec<W> xt[D], acc[D];
    for (int j = 0; j < D; ++j) {  // (whole vectors from arrays: lane by lane, GCC -O3 warns maybe-uninitialized)
        alignas(32) double a[W], b[W];
        for (int r = 0; r < W; ++r) {
            a[r] = xs[r][j];
            b[r] = outs[r][j];
        }
        xt[j] = vload<W>(a);
        acc[j] = vload<W>(b);
    }
    constexpr std::int64_t kBlock = 64;
    alignas(32) double z[kBlock * W];
    for (std::int64_t b0 = 0; b0 < count; b0 += kBlock) {
        const std::int64_t nb = count - b0 < kBlock ? count - b0 : kBlock;
        for (std::int64_t b = 0; b < nb; ++b) {
            const std::int64_t l = idx[b0 + b];
            const double* h = H + l * D;
            Vec<W> s[4] = {};
            for (int j = 0; j < D; ++j) s[j & 3] += h[j] * xt[j];
            vstore<W>(z + b * W, Y[l] * ((s[0] + s[2]) + (s[1] + s[3])));
        }
        for (std::int64_t b = 0; b < nb; ++b) logistic_weights<W>(z + b * W);
        for (std::int64_t b = 0; b < nb; ++b) {
            side(b0 + b);
            const std::int64_t l = idx[b0 + b];
            const double* h = H + l * D;
            const Vec<W> c = -Y[l] * vload<W>(z + b * W) * weight;
            for (int j = 0; j < D; ++j) acc[j] += c * h[j];
        }
    }
    for (int j = 0; j < D; ++j) {
        alignas(32) double a[W];
        vstore<W>(a, acc[j]);
        for (int r = 0; r < W; ++r) outs[r][j] = a[r];
    }
}

#if ROWSTOCH_X86_DISPATCH
// logistic_accumulate_lanes on AVX-512 octuples: eight rows a call (one replica a lane, the same bits).
template <int D, class Side>
ROWSTOCH_TARGET_AVX512 __attribute__((noinline)) void logistic_lanes8(const double* H, const double* Y,
                                                                     const double* const* xs,
                                                                     const std::int64_t* idx, std::int64_t count,
                                                                     double weight, double* const* outs,
                                                                     Side& side) {
    logistic_accumulate_lanes<D, 8>(H, Y, xs, idx, count, weight, outs, side);
}
#endif

// Rows first, first + stride, ... (below end) of X and G (rows of D values) over the same samples idx[0..count),
// as many as fill whole groups of vector lanes: eight at a time where `wide` (AVX-512; W = 4), then W at a time.
// The first group runs side(b) (logistic_accumulate's side job; `sided` then set). Returns the first row left:
// the caller's, one by one (with the side job where no group ran).
template <int D, int W, class Side>
ROWSTOCH_INLINE std::int64_t logistic_rows_in_lanes(const double* H, const double* Y, const double* X, double* G,
                                                    std::int64_t first, std::int64_t stride, std::int64_t end,
                                                    const std::int64_t* idx, std::int64_t count, double weight,
                                                    bool wide, Side&& side, bool& sided) {
    std::int64_t row = first;

    // K rows from `row` on as lane pointers, handed to call(xs, outs)
    auto group = [&](auto lanes, auto&& call) ROWSTOCH_INLINE_LAMBDA {
        constexpr int K = decltype(lanes)::value;
        const double* xs[K];
        double* outs[K];
        for (int k = 0; k < K; ++k) {
            xs[k] = X + (row + k * stride) * D;
            outs[k] = G + (row + k * stride) * D;
        }
        call(xs, outs);
    };
    using Rows = const double* const*;
    using Sums = double* const*;
#if ROWSTOCH_X86_DISPATCH
    if constexpr (W == 4)
        if (wide)  // (a group of fewer rows padded to eight lanes was no faster than fours and ones)
            for (; row + 7 * stride < end; row += 8 * stride)
                group(std::integral_constant<int, 8>{}, [&](Rows xs, Sums outs) ROWSTOCH_INLINE_LAMBDA {
                    if (sided) {
                        logistic_lanes8<D>(H, Y, xs, idx, count, weight, outs, no_side_job);
                    } else {
                        logistic_lanes8<D>(H, Y, xs, idx, count, weight, outs, side);
                        sided = true;
                    }
                });
#else
    (void)wide;
#endif
    for (; row + (W - 1) * stride < end; row += W * stride)
        group(std::integral_constant<int, W>{}, [&](Rows xs, Sums outs) ROWSTOCH_INLINE_LAMBDA {
            if (sided) {
                logistic_accumulate_lanes<D, W>(H, Y, xs, idx, count, weight, outs, no_side_job);
            } else {
                logistic_accumulate_lanes<D, W>(H, Y, xs, idx, count, weight, outs, side);
                sided = true;
            }
        });
    return row;
}

// Calls f(std::integral_constant<int, D>{}) with D = d for 1 <= d <= 16, else D = 0.
template <class F>
inline void with_row_length(std::int64_t d, F&& f) {
    switch (d) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 3: return f(std::integral_constant<int, 3>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 5: return f(std::integral_constant<int, 5>{});
        case 6: return f(std::integral_constant<int, 6>{});
        case 7: return f(std::integral_constant<int, 7>{});
        case 8: return f(std::integral_constant<int, 8>{});
        case 9: return f(std::integral_constant<int, 9>{});
        case 10: return f(std::integral_constant<int, 10>{});
        case 11: return f(std::integral_constant<int, 11>{});
        case 12: return f(std::integral_constant<int, 12>{});
        case 13: return f(std::integral_constant<int, 13>{});
        case 14: return f(std::integral_constant<int, 14>{});
        case 15: return f(std::integral_constant<int, 15>{});
        case 16: return f(std::integral_constant<int, 16>{});
        default: return f(std::integral_constant<int, 0>{});
    }
}

// out[j] += rho * 2 x_j / (1 + x_j^2)^2
template <class T>
inline void regulariser_grad(std::int64_t d, T rho, const T* x, T* out) {
    for (std::int64_t j = 0; j < d; ++j) {
        const T q = T(1) + x[j] * x[j];
        out[j] += rho * T(2) * x[j] / (q * q);
    }
}

// A mini-batch drawn step by step: a partial Fisher-Yates shuffle of perm (the
// identity [0, M) on entry).  After step(b), perm[b] is the mini-batch's b-th
// sample (later steps only touch positions > b), and its row is prefetched so
// that it is in cache when the gradient reads it (D > 0: rows of D entries).
template <class T, int D>
struct MinibatchDraw {
    Stream s;
    std::int64_t M, d;
    std::int64_t* perm;
    std::int64_t* swaps;  // position swapped with at each step, to undo the shuffle
    const T* Hi;

    void step(std::int64_t b) {
        const std::int64_t k = b + static_cast<std::int64_t>(s.below(static_cast<std::uint64_t>(M - b)));
        swaps[b] = k;
        std::swap(perm[b], perm[k]);
        const char* row = reinterpret_cast<const char*>(Hi + perm[b] * d);
        const std::int64_t row_bytes = (D > 0 ? D : d) * static_cast<std::int64_t>(sizeof(T));
        for (std::int64_t off = 0; off < row_bytes; off += 64) prefetch(row + off);
        prefetch(row + row_bytes - 1);
    }
};

// Puts perm back to the identity after a B-step draw: rewrite it when M is small
// next to B, else undo the B swaps in reverse.
inline void restore_identity(std::int64_t* perm, const std::int64_t* swaps, std::int64_t M, std::int64_t B) {
    if (M <= 4 * B) {
        for (std::int64_t l = 0; l < M; ++l) perm[l] = l;
    } else {
        for (std::int64_t b = B - 1; b >= 0; --b) std::swap(perm[b], perm[swaps[b]]);
    }
}

// `slots` permutations of [0, M) side by side, each the identity between uses.
// Up to kKeepBelow entries the buffer is the calling thread's own and is kept
// from call to call (so a call with B << M does not pay O(M) to set it up);
// users must hand it back as the identity.  Larger ones are made per call.
class IdentityScratch {
   public:
    static constexpr std::int64_t kKeepBelow = std::int64_t(1) << 22;

    IdentityScratch(int slots, std::int64_t M) {
        thread_local std::vector<std::int64_t> kept;
        thread_local std::int64_t kept_M = -1;
        const std::int64_t size = slots * M;
        const bool keep = size <= kKeepBelow;
        std::vector<std::int64_t>& buf = keep ? kept : own_;
        if (!keep || kept_M != M || static_cast<std::int64_t>(kept.size()) < size) {
            buf.resize(static_cast<std::size_t>(size));
            for (std::int64_t l = 0; l < size; ++l) buf[static_cast<std::size_t>(l)] = l % M;
            if (keep) kept_M = M;
        }
        data_ = buf.data();
    }
    std::int64_t* data() { return data_; }

   private:
    std::vector<std::int64_t> own_;
    std::int64_t* data_ = nullptr;
};

// Stochastic gradients: X and G are (reps, m, d) for m nodes; each node averages
// `batches` independent mini-batches of B samples drawn without replacement
// (eq. 12b).  Row block r of X is repetition rep_offset + r (rep_offset + r % rep_period with a
// rep_period > 0: blocks that draw the same streams, a tuner's candidates); row i of a block is
// global node node_ids[i] (or i when node_ids is null), whose data is H[node M ..].
// The work is split into units: a node and a stream, with every row block that draws it (one
// block each without rep_period; reps / rep_period blocks with it, so that a mini-batch shared by
// several blocks is drawn once and its rows are read from cache for the others).  Each thread works
// through its (unit, mini-batch) tasks in order and draws the next task's mini-batch while it
// differentiates the current one's first block (two permutation buffers in turn): the draws and
// the random row reads overlap the arithmetic.  Every row's sums are the same whatever the
// schedule: the draws depend only on their stream key, and a row adds its mini-batches in order.
template <class T>
void logistic_stochastic_grad(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids,
                              std::int64_t M, std::int64_t d, T rho, const T X[], std::int64_t reps,
                              std::int64_t B, std::int64_t batches, std::uint64_t seed,
                              std::uint64_t iteration, std::int64_t rep_offset, T G[],
                              std::int64_t rep_period = 0) {
    const std::int64_t rows = reps * m;
    const std::int64_t streams = rep_period > 0 && rep_period < reps ? rep_period : reps;  // blocks of a unit: q + k streams
    const std::int64_t units = streams * m;
    const int threads = threads_for(rows * B * batches * d);
    with_row_length(d, [&](auto D) {
    for_range(units, threads, [&](std::int64_t lo, std::int64_t hi) {
    with_simd_width([&](auto W) ROWSTOCH_INLINE_LAMBDA {
        IdentityScratch perm(2, M);
        const bool wide = simd_width() == 8;
        std::vector<std::int64_t> swaps(static_cast<std::size_t>(2 * B));
        bool dirty[2] = {false, false};
        const std::int64_t tasks = (hi - lo) * batches;  // (unit, mini-batch) pairs, in order
        auto node_of = [&](std::int64_t unit) { return node_ids ? node_ids[unit % m] : unit % m; };
        auto draw_for = [&](std::int64_t task) {
            const int slot = static_cast<int>(task & 1);
            if (dirty[slot]) restore_identity(perm.data() + slot * M, swaps.data() + slot * B, M, B);
            dirty[slot] = true;
            const std::int64_t unit = lo + task / batches, node = node_of(unit), q = unit / m;
            const std::int64_t block = rep_period > 0 ? q % rep_period : q;
            const std::uint64_t rep = static_cast<std::uint64_t>(block + rep_offset);
            return MinibatchDraw<T, D>{Stream(stream_key(seed, rep, node, iteration, task % batches)), M, d,
                                    perm.data() + slot * M, swaps.data() + slot * B, H + node * M * d};
        };
        if (tasks > 0) {
            MinibatchDraw<T, D> first = draw_for(0);
            for (std::int64_t b = 0; b < B; ++b) first.step(b);
        }
        const T weight = T(1) / T(B * batches);
        for (std::int64_t task = 0; task < tasks; ++task) {
            const std::int64_t unit = lo + task / batches, r = task % batches, node = node_of(unit);
            const std::int64_t* idx = perm.data() + (task & 1) * M;
            const T* Hi = H + node * M * d;
            const T* Yi = Y + node * M;
            const std::int64_t stride = streams * m;  // (the unit's rows: unit, unit + stride, ...; unit = q m + i)
            if (r == 0)
                for (std::int64_t row = unit; row < rows; row += stride)
                    for (std::int64_t j = 0; j < d; ++j) G[row * d + j] = 0;
            // the rows sharing the batch: in vector lanes where they fill a group, the rest one by one; the first
            // group, or else the first row, runs `side` (drawing the next task's batch meanwhile)
            auto unit_rows = [&](auto&& side, bool sided) ROWSTOCH_INLINE_LAMBDA {
                std::int64_t row = unit;
                if constexpr (D > 0 && std::is_same<T, double>::value)
                    row = logistic_rows_in_lanes<D, W>(Hi, Yi, X, G, row, stride, rows, idx, B, weight, wide, side,
                                                       sided);
                if (!sided) {
                    logistic_accumulate<D, W, false>(Hi, Yi, d, X + row * d, idx, B, weight, G + row * d, side);
                    row += stride;
                }
                for (; row < rows; row += stride)
                    logistic_accumulate<D, W, false>(Hi, Yi, d, X + row * d, idx, B, weight, G + row * d,
                                                     no_side_job);
            };
            if (task + 1 < tasks) {
                MinibatchDraw<T, D> next = draw_for(task + 1);
                unit_rows([&](std::int64_t b) { next.step(b); }, false);
            } else {
                unit_rows(no_side_job, true);
            }
            if (r == batches - 1)
                for (std::int64_t row = unit; row < rows; row += stride) regulariser_grad(d, rho, X + row * d, G + row * d);
        }
        for (int slot = 0; slot < 2; ++slot)
            if (dirty[slot]) restore_identity(perm.data() + slot * M, swaps.data() + slot * B, M, B);
    });
    });
    });
}

// Exact local gradients grad f_i(x_i) over all M samples of node i (rows of X and G: reps * m),
// and, when L is not null, the local losses L[row] = f_i(x_i) from the same pass
// (the margins and exponentials are shared).  The work is split into units of a node and up to
// kGroup replicas, which go through the node's samples together, kChunk at a time: a chunk is
// read from memory once and from cache for the other replicas (a record of a tuning run measures
// dozens of replicas' models over the same data).  Without the losses, W replicas of a unit go
// through a chunk as the W lanes of logistic_accumulate_lanes (each sample's row read once for
// them; eight at a time where the CPU runs AVX-512: logistic_rows_in_lanes), the rest one by
// one.  Each row adds its samples in order, in the blocks logistic_accumulate uses, whatever the
// units and lanes: the same bits as one pass per row.
template <class T>
void logistic_full_grad(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids, std::int64_t M,
                        std::int64_t d, T rho, const T X[], std::int64_t reps, T G[], T L[] = nullptr) {
    constexpr std::int64_t kGroup = 8, kChunk = 256;  // (kChunk: a multiple of logistic_accumulate's block)
    const std::int64_t rows = reps * m, groups = (reps + kGroup - 1) / kGroup;
    with_row_length(d, [&](auto D) {
    for_range(m * groups, threads_for(rows * M * d), [&](std::int64_t lo, std::int64_t hi) {
    with_simd_width([&](auto W) ROWSTOCH_INLINE_LAMBDA {
        std::vector<std::int64_t> all(static_cast<std::size_t>(M));
        for (std::int64_t l = 0; l < M; ++l) all[l] = l;
        const bool wide = simd_width() == 8;
        double loss[kGroup];
        for (std::int64_t unit = lo; unit < hi; ++unit) {
            const std::int64_t i = unit % m, r0 = unit / m * kGroup;
            const std::int64_t r1 = r0 + kGroup < reps ? r0 + kGroup : reps;
            const std::int64_t node = node_ids ? node_ids[i] : i;
            const T* Hi = H + node * M * d;
            const T* Yi = Y + node * M;
            for (std::int64_t r = r0; r < r1; ++r) {
                T* g = G + (r * m + i) * d;
                for (std::int64_t j = 0; j < d; ++j) g[j] = 0;
                loss[r - r0] = 0.0;
            }
            for (std::int64_t c0 = 0; c0 < M; c0 += kChunk) {
                const std::int64_t count = M - c0 < kChunk ? M - c0 : kChunk;
                std::int64_t r = r0;
                if constexpr (D > 0 && std::is_same<T, double>::value)  // the gradient alone: a replica a lane
                    if (!L) {
                        bool sided = true;  // (no side job)
                        r = (logistic_rows_in_lanes<D, W>(Hi, Yi, X, G, r0 * m + i, m, r1 * m + i, all.data() + c0,
                                                          count, T(1) / T(M), wide, no_side_job, sided) - i) / m;
                    }
                for (; r < r1; ++r) {
                    const T* x = X + (r * m + i) * d;
                    T* g = G + (r * m + i) * d;
                    if (L)
                        logistic_accumulate<D, W, true>(Hi, Yi, d, x, all.data() + c0, count, T(1) / T(M), g,
                                                        no_side_job, &loss[r - r0]);
                    else
                        logistic_accumulate<D, W, false>(Hi, Yi, d, x, all.data() + c0, count, T(1) / T(M), g,
                                                         no_side_job);
                }
            }
            for (std::int64_t r = r0; r < r1; ++r) {
                const std::int64_t row = r * m + i;
                const T* x = X + row * d;
                if (L) {
                    T reg = 0;
                    for (std::int64_t j = 0; j < d; ++j) reg += x[j] * x[j] / (T(1) + x[j] * x[j]);
                    L[row] = static_cast<T>(loss[r - r0] / static_cast<double>(M)) + rho * reg;
                }
                regulariser_grad(d, rho, x, G + row * d);
            }
        }
    });
    });
    });
}

// Least squares (objectives.LeastSquares), f_i(x) = 1/(2M) ||H_i x - y_i||^2 over node i's M rows:
//   G[r, i] = (sum_l e_l h_l) / M,  e_l = h_l^T x_{r,i} - y_l  (h_l^T x by dot4, the sum in row order),
//   L[r, i] = (1/2) ((sum_l e_l^2) / M)  (with L).
// Node i's rows in replica r: H + (r * stride + node * M) * d, node = node_ids[i] (or i): stride 0 where every
// replica reads the same data (the full gradient), the rows of replica r's own block otherwise (mini-batches
// gathered replica by replica). A unit is a node and up to kGroup replicas; its rows are taken in chunks that
// stay in L1 while each replica goes through them, x and the running sums in registers for a compile-time
// length D. Each replica adds its rows in order however many replicas a call holds, on any thread count: the
// bits of one call per replica.
template <class T>
void least_squares_grad(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids, std::int64_t M,
                        std::int64_t d, const T X[], std::int64_t reps, std::int64_t stride, T G[], T L[] = nullptr) {
    constexpr std::int64_t kGroup = 8, kChunk = 128;  // (128 rows of d = 10 doubles: 10 KB)
    const std::int64_t groups = (reps + kGroup - 1) / kGroup;
    with_row_length(d, [&](auto Dc) {
        constexpr int D = decltype(Dc)::value;
        const std::int64_t dd = D > 0 ? D : d;
        for_range(m * groups, threads_for(reps * m * M * d), [&](std::int64_t lo, std::int64_t hi) {
            T sq[kGroup];
            for (std::int64_t unit = lo; unit < hi; ++unit) {
                const std::int64_t i = unit % m, r0 = unit / m * kGroup;
                const std::int64_t r1 = r0 + kGroup < reps ? r0 + kGroup : reps;
                const std::int64_t node = node_ids ? node_ids[i] : i;
                for (std::int64_t r = r0; r < r1; ++r) {
                    T* g = G + (r * m + i) * dd;
                    for (std::int64_t j = 0; j < dd; ++j) g[j] = T(0);
                    sq[r - r0] = T(0);
                }
                for (std::int64_t c0 = 0; c0 < M; c0 += kChunk) {
                    const std::int64_t c1 = c0 + kChunk < M ? c0 + kChunk : M;
                    for (std::int64_t r = r0; r < r1; ++r) {
                        const std::int64_t first = r * stride + node * M;
                        const T* __restrict Hr = H + first * dd;
                        const T* __restrict Yr = Y + first;
                        T* __restrict g = G + (r * m + i) * dd;
                        const T* __restrict x = X + (r * m + i) * dd;
                        T s2 = sq[r - r0];
                        if constexpr (D > 0) {  // (x and the sums in registers)
                            T xl[D], gl[D];
                            for (int j = 0; j < D; ++j) xl[j] = x[j], gl[j] = g[j];
                            for (std::int64_t l = c0; l < c1; ++l) {
                                const T* h = Hr + l * D;
                                const T e = dot4(h, xl, D) - Yr[l];
                                for (int j = 0; j < D; ++j) gl[j] += e * h[j];
                                s2 += e * e;
                            }
                            for (int j = 0; j < D; ++j) g[j] = gl[j];
                        } else {
                            for (std::int64_t l = c0; l < c1; ++l) {
                                const T* h = Hr + l * dd;
                                const T e = dot4(h, x, dd) - Yr[l];
                                for (std::int64_t j = 0; j < dd; ++j) g[j] += e * h[j];
                                s2 += e * e;
                            }
                        }
                        sq[r - r0] = s2;
                    }
                }
                for (std::int64_t r = r0; r < r1; ++r) {
                    T* g = G + (r * m + i) * dd;
                    for (std::int64_t j = 0; j < dd; ++j) g[j] /= static_cast<T>(M);
                    if (L) L[r * m + i] = T(0.5) * (sq[r - r0] / static_cast<T>(M));
                }
            }
        });
    });
}

}  // namespace rowstoch
