// Message compression and message noise (rowstoch_fast.network.Compressed / Noisy): what node i sends in round r of
// iteration t, computed from its row of a block, one message of L values at a time (a row of w = reps * d values is
// w / L messages; L = w for a narrow block). Random choices are drawn from the counter-based hash of network.py,
// uniform_hash(seed, t, r, i, tag, c) with i the node's global id and c the column in its row, so every backend,
// MPI rank and thread count sends the same messages. The NumPy transcription is _reference.compress. (qsgd, top-k
// and rand-k with k <= 4 are computed four messages side by side, compress_batch: the same operations per message.)
// (The draws' keys end (..., i, tag, c): the row's prefix with the tag is mixed once, then one mix64 per value.)
//
//   qsgd   (bits b, s = 2^b - 1 levels): q_c = sign(v_c) l_c (||v||_2 / s) with l_c = floor(|v_c| (s / ||v||_2) + u_c)
//          (unbiased: u_c uniform, tag 1) or floor(... + 1/2) (biased, nearest level);
//   sign   q_c = sign(v_c) ||v||_1 / L (biased; a sum of |v_c| that overflows taken as in qsgd, v / 2^(e-1));
//   topk   the k entries of largest |v_c| (ties: the lower column), the others 0 (biased);
//   randk  the k entries of smallest uniform_hash(..., c, 2) (ties: the lower column), times L / k when unbiased;
//   round  each value rounded to the nearest float with b significant bits (ties to even; biased, deterministic);
//   noise  v_c + sigma z_c, z_c standard normal by Box-Muller from the draws of tags 3 and 4.
// A finite message is never sent as infinite: where the exact encoding of a finite message lies past the largest
// finite value of the precision (qsgd's l_c ||v||_2 / s reaches sqrt(L) max|v|, rand-k's v_c L / k, round's
// rounding of a value near the largest), the value saturates at the largest value the encoding can send: the
// precision's largest finite value (qsgd, rand-k), the largest value of b significant bits (round). A message that
// is not finite gives its values as computed (it stays non-finite: the runs' divergence checks see it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "hash.hpp"
#include "network.hpp"
#include "parallel.hpp"
#include "simd.hpp"

namespace rowstoch {

enum CompressMethod { kQsgd = 0, kSign = 1, kTopk = 2, kRandk = 3, kRound = 4, kNoise = 5 };

// uniform_hash(seed, t, r, i, tag, c) from the prefix mix64(mix64(...(seed, t, r) ^ i) ^ tag): the top 53 bits as a
// double.
inline double message_uniform(std::uint64_t tagged_row, std::uint64_t c) {
    // (through int64: below 2^53, one conversion instruction; uint64 -> double is a branchy sequence on x86-64)
    return static_cast<double>(static_cast<std::int64_t>(mix64(tagged_row ^ c) >> 11)) * 0x1.0p-53;
}

// Box-Muller's standard normals of message and link noise, drawn value by value and computed 64 at a time:
// add(key1, key2, c, s, emit) queues z = sqrt(-2 ln(1 - u)) cos(2 pi u'), u = message_uniform(key1, c),
// u' = message_uniform(key2, c), with the value's scale s; every 64 values, and at flush(emit), their normals go
// W at a time through simd.hpp's box_muller (no libm: the same bits at every width; the last group's lanes past
// the values padded) to emit(count, z, scale). (The uniforms are hashed first, then turned into normals: loads of
// uniforms stored just before stalled on the stores, 1.3x slower.)
template <int W>
struct NormalChunks {
    static constexpr std::int64_t kChunk = 64;
    alignas(64) double u1[kChunk], u2[kChunk], z[kChunk], scale[kChunk];
    std::int64_t k = 0;

    template <class Emit>
    ROWSTOCH_INLINE void add(std::uint64_t key1, std::uint64_t key2, std::uint64_t c, double s, Emit&& emit) {
        u1[k] = 1.0 - message_uniform(key1, c);
        u2[k] = message_uniform(key2, c);
        scale[k] = s;
        if (++k == kChunk) flush(emit);
    }

    template <class Emit>
    ROWSTOCH_INLINE void flush(Emit&& emit) {
        if (k == 0) return;
        const std::int64_t padded = (k + W - 1) / W * W;
        for (std::int64_t c = k; c < padded; ++c) {
            u1[c] = 1.0;
            u2[c] = 0.0;
        }
        for (std::int64_t g = 0; g < padded; g += W) box_muller<W>(u1 + g, u2 + g, z + g);
        emit(k, static_cast<const double*>(z), static_cast<const double*>(scale));
        k = 0;
    }
};

// k passes of a branch-free argmin over each of B rows of L scores (score[b L + c]), side by side (independent
// chains that overlap), each pass finding the first minimum (ties: the lower index) and taking it out: row b's
// k smallest in order[b stride + 0..k).
template <int B>
inline void argmin_passes(double* score, std::int64_t L, std::int64_t k, std::int64_t* order, std::int64_t stride) {
    for (std::int64_t m = 0; m < k; ++m) {
        double low[B];
        std::int64_t at[B];
        for (int b = 0; b < B; ++b) {
            low[b] = score[b * L];
            at[b] = 0;
        }
        for (std::int64_t c = 1; c < L; ++c)
            for (int b = 0; b < B; ++b) {
                const double x = score[b * L + c];
                const bool less = x < low[b];
                low[b] = less ? x : low[b];
                at[b] = less ? c : at[b];
            }
        for (int b = 0; b < B; ++b) {
            order[b * stride + m] = at[b];
            score[b * L + at[b]] = std::numeric_limits<double>::infinity();
        }
    }
}

// The k entries of smallest score(c), c in [0, L) (ties: the lower index), in order[0..k): an insertion into a sorted
// list of k for small k (registers, O(L k)), a partial sort of score[] otherwise.
template <class Score>
inline void smallest_k(Score score_of, double* score, std::int64_t L, std::int64_t k, std::int64_t* order) {
    if (k <= 4) {
        for (std::int64_t c = 0; c < L; ++c) score[c] = score_of(c);
        argmin_passes<1>(score, L, k, order, 0);
        return;
    }
    if (k <= 16) {  // branch-free: each score bubbles through the sorted k (selects, no mispredicted branches)
        double best[16];
        for (std::int64_t m = 0; m < k; ++m) {
            best[m] = std::numeric_limits<double>::infinity();
            order[m] = L;  // (a score below +inf, or any score while fewer than k were seen, replaces it)
        }
        for (std::int64_t c = 0; c < L; ++c) {
            double x = score_of(c);
            std::int64_t xi = c;
            for (std::int64_t m = 0; m < k; ++m) {
                const bool before = x < best[m] || (order[m] == L);  // (equal: the lower index stays first)
                const double b = best[m];
                const std::int64_t bi = order[m];
                best[m] = before ? x : b;
                order[m] = before ? xi : bi;
                x = before ? b : x;
                xi = before ? bi : xi;
            }
        }
        return;
    }
    for (std::int64_t c = 0; c < L; ++c) {
        order[c] = c;
        score[c] = score_of(c);
    }
    std::partial_sort(order, order + k, order + L, [&](std::int64_t a, std::int64_t b) {
        return score[a] < score[b] || (score[a] == score[b] && a < b);
    });
}

// An encoded value q of a finite message clamped to T's largest finite value (a NaN stays NaN).
template <class T>
inline double saturated(double q) {
    const double limit = static_cast<double>(std::numeric_limits<T>::max());
    return q > limit ? limit : q < -limit ? -limit : q;
}

// qsgd's s = 2^bits - 1 levels.
inline double qsgd_levels(std::int64_t bits) { return static_cast<double>((std::uint64_t(1) << bits) - 1); }

// The norm a qsgd message is quantized with, from the sum of squares `sq` the caller accumulated in order:
// sqrt(sq) of v itself (scale = 1), except where the squares overflowed (entries above ~1.3e154: sq = inf) or
// underflowed (sq < 1e-280: tiny entries' squares lose their bits, and s / norm overflows) in a finite message:
// there v is read as v / scale, scale = 2^(e-1) for max|v| = f 2^e (exact), its norm taken in range, and the
// values scaled back. Exact over the whole finite range; the usual messages keep their bits.
template <class T>
inline double qsgd_norm(const T* v, std::int64_t L, double sq, double* scale) {
    *scale = 1.0;
    if (sq >= 1e-280 && sq <= 1.7976931348623157e308) return std::sqrt(sq);
    double m = 0.0;
    for (std::int64_t c = 0; c < L; ++c) m = std::max(m, std::fabs(static_cast<double>(v[c])));
    if (!(m > 0.0) || !(m <= 1.7976931348623157e308)) return std::sqrt(sq);  // (zero, or not finite: as it is)
    int e = 0;
    std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1): max|v / 2^(e - 1)| in [1, 2)
    *scale = std::ldexp(1.0, e - 1);  // (2^-1074 .. 2^1023: representable, division by it exact)
    double scaled = 0.0;
    for (std::int64_t c = 0; c < L; ++c) {
        const double w = static_cast<double>(v[c]) / *scale;
        scaled += w * w;
    }
    return std::sqrt(scaled);
}

// qsgd's values of one message of norm ||v / scale||_2 = norm (up = s / norm, down = norm / s; `key` its tag-1
// key; `scale` a power of two from qsgd_norm: dividing and multiplying by it is exact); Clamped: saturated at T's
// largest. The usual messages (scale 1, their values far below T's largest) take the loop without either.
template <bool Scaled, bool Clamped, class T>
inline void qsgd_values_of(const T* v, T* out, std::int64_t L, std::int64_t first_col, double norm, double up,
                           double down, std::uint64_t key, double s, bool unbiased, double scale) {
    for (std::int64_t c = 0; c < L; ++c) {
        if (norm == 0.0) {
            out[c] = T(0);
            continue;
        }
        double x = static_cast<double>(v[c]);
        if constexpr (Scaled) x /= scale;
        const double a = std::fabs(x) * up;
        const double u = unbiased ? message_uniform(key, static_cast<std::uint64_t>(first_col + c)) : 0.5;
        // floor of a non-negative value as an integer conversion (no libm call without SSE4.1)
        const double level = std::min(static_cast<double>(static_cast<std::int64_t>(a + u)), s);
        double q = std::copysign(level * down, static_cast<double>(v[c]));
        if constexpr (Scaled) q *= scale;
        if constexpr (Clamped) q = saturated<T>(q);
        out[c] = static_cast<T>(q);
    }
}

// |q_c| <= level down scale <= norm scale (1 + 2^-51): a finite message whose norm, scaled back, is within T's
// largest (1 - 2^-50) needs no clamp; the others are clamped (a norm that is not finite: as computed).
template <class T>
inline void qsgd_values(const T* v, T* out, std::int64_t L, std::int64_t first_col, double norm, double up,
                        double down, std::uint64_t key, double s, bool unbiased, double scale) {
    const bool clamped = norm <= std::numeric_limits<double>::max() &&
                         !(norm * scale <= static_cast<double>(std::numeric_limits<T>::max()) * (1.0 - 0x1.0p-50));
    if (clamped)
        (scale == 1.0 ? qsgd_values_of<false, true, T> : qsgd_values_of<true, true, T>)(
            v, out, L, first_col, norm, up, down, key, s, unbiased, scale);
    else
        (scale == 1.0 ? qsgd_values_of<false, false, T> : qsgd_values_of<true, false, T>)(
            v, out, L, first_col, norm, up, down, key, s, unbiased, scale);
}

// sign's magnitude ||v||_1 / L from the sum `l1` the caller accumulated in order; where that sum overflowed in a
// finite message (entries near DBL_MAX: the mean, at most max|v|, is finite) the sum of v / scale, scale = 2^(e-1)
// for max|v| = f 2^e, taken in range and scaled back (at most max|v|: the rounding of the scaled sum never pushes it
// past the largest value). The usual messages keep their bits.
template <class T>
inline double sign_magnitude(const T* v, std::int64_t L, double l1) {
    if (!(l1 > 1.7976931348623157e308)) return l1 / static_cast<double>(L);  // (finite, or NaN: as it is)
    double m = 0.0;
    for (std::int64_t c = 0; c < L; ++c) m = std::max(m, std::fabs(static_cast<double>(v[c])));
    if (!(m <= 1.7976931348623157e308)) return l1 / static_cast<double>(L);  // (an infinite value: as it is)
    int e = 0;
    std::frexp(m, &e);
    const double scale = std::ldexp(1.0, e - 1);
    double scaled = 0.0;
    for (std::int64_t c = 0; c < L; ++c) scaled += std::fabs(static_cast<double>(v[c])) / scale;
    return std::min(scaled / static_cast<double>(L) * scale, m);
}

// A top-k's or rand-k's scale of the kept values (L / k for an unbiased rand-k).
template <class T>
inline T selection_scale(int method, bool unbiased, std::int64_t L, std::int64_t k) {
    return method == kRandk && unbiased ? static_cast<T>(static_cast<double>(L) / k) : T(1);
}

// out <- the values v[order[0..k)] times scale at their places, 0 elsewhere (out may be v; kept: k doubles); a
// finite value that the scale takes past T's largest is sent as the largest.
template <class T>
inline void keep_k(const T* v, T* out, std::int64_t L, std::int64_t k, const std::int64_t* order, double* kept,
                   T scale) {
    for (std::int64_t m = 0; m < k; ++m) kept[m] = static_cast<double>(v[order[m]]);
    for (std::int64_t c = 0; c < L; ++c) out[c] = T(0);
    for (std::int64_t m = 0; m < k; ++m) {
        const T x = static_cast<T>(kept[m]), y = x * scale;
        out[order[m]] = std::isinf(y) && !std::isinf(x) ? std::copysign(std::numeric_limits<T>::max(), y) : y;
    }
}

// v rounded to b significant bits (ties to even); a finite v that rounds past T's largest gives the largest value
// of b significant bits, (2^b - 1) 2^(e - b) (T's largest binade: e its exponent); an infinite or NaN v as it is.
template <class T>
inline T round_to_bits(T v, int b) {
    if (!std::isfinite(v)) return v;
    int e;
    const T m = std::frexp(v, &e);  // v = m 2^e, |m| in [0.5, 1)
    const T r = std::ldexp(std::nearbyint(std::ldexp(m, b)), e - b);
    return std::isinf(r) ? std::copysign(std::ldexp(static_cast<T>((std::uint64_t(1) << b) - 1), e - b), v) : r;
}

template <class T>
void compress_message(int method, const T* v, T* out, std::int64_t L, std::int64_t first_col, std::uint64_t row,
                      std::int64_t param, double sigma, bool unbiased, std::int64_t* order, double* score) {
    auto tagged = [&](std::uint64_t tag) { return mix64(row ^ tag); };
    switch (method) {
        case kQsgd: {
            double sq = 0.0;
            for (std::int64_t c = 0; c < L; ++c) sq += static_cast<double>(v[c]) * static_cast<double>(v[c]);
            double scale = 1.0;
            const double norm = qsgd_norm(v, L, sq, &scale), s = qsgd_levels(param);
            qsgd_values(v, out, L, first_col, norm, s / norm, norm / s, tagged(1), s, unbiased, scale);
            return;
        }
        case kSign: {
            double l1 = 0.0;
            for (std::int64_t c = 0; c < L; ++c) l1 += std::fabs(static_cast<double>(v[c]));
            const double scale = sign_magnitude(v, L, l1);
            for (std::int64_t c = 0; c < L; ++c)
                out[c] = v[c] > T(0) ? static_cast<T>(scale) : v[c] < T(0) ? static_cast<T>(-scale) : T(0);
            return;
        }
        case kTopk:
        case kRandk: {
            const std::int64_t k = std::min<std::int64_t>(param, L);
            const std::uint64_t key = tagged(2);
            if (method == kTopk)
                smallest_k([&](std::int64_t c) { return -std::fabs(static_cast<double>(v[c])); }, score, L, k, order);
            else
                smallest_k([&](std::int64_t c) { return message_uniform(key, static_cast<std::uint64_t>(first_col + c)); },
                           score, L, k, order);
            keep_k(v, out, L, k, order, score, selection_scale<T>(method, unbiased, L, k));
            return;
        }
        case kRound: {
            for (std::int64_t c = 0; c < L; ++c) out[c] = round_to_bits(v[c], static_cast<int>(param));
            return;
        }
        default: {  // kNoise (compress_rows_of draws a block's noise in noise_rows: the same values)
            const std::uint64_t key1 = tagged(3), key2 = tagged(4);
            with_simd_width([&](auto W) ROWSTOCH_INLINE_LAMBDA {
                NormalChunks<W> normals;
                std::int64_t at = 0;
                auto emit = [&](std::int64_t count, const double* z, const double*) ROWSTOCH_INLINE_LAMBDA {
                    for (std::int64_t c = 0; c < count; ++c, ++at)
                        out[at] = static_cast<T>(static_cast<double>(v[at]) + sigma * z[c]);
                };
                for (std::int64_t c = 0; c < L; ++c)
                    normals.add(key1, key2, static_cast<std::uint64_t>(first_col + c), sigma, emit);
                normals.flush(emit);
            });
        }
    }
}

// Messages batched B at a time: their chains of dependent operations (a qsgd message's norm, square root and two
// divisions; a top-k's or rand-k's k argmin passes) interleaved, so that they overlap instead of waiting in turn
// (one message at a time they were most of the encoding's time). Message b is the L values at v[b] (written to
// out[b], which may be v[b]), columns first[b] .. first[b] + L of a row whose key is row[b]; each gets the same
// operations as compress_message, so the same bits. score: B L doubles.
constexpr int kBatch = 4;

inline bool batched(int method, std::int64_t param, std::int64_t L) {
    return method == kQsgd || ((method == kTopk || method == kRandk) && std::min<std::int64_t>(param, L) <= 4);
}

template <class T>
void compress_batch(int method, const T* const* v, T* const* out, std::int64_t L, const std::int64_t* first,
                    const std::uint64_t* row, std::int64_t param, bool unbiased, double* score) {
    constexpr int B = kBatch;
    if (method == kQsgd) {
        double sq[B] = {};
        for (std::int64_t c = 0; c < L; ++c)
            for (int b = 0; b < B; ++b) sq[b] += static_cast<double>(v[b][c]) * static_cast<double>(v[b][c]);
        const double s = qsgd_levels(param);
        double norm[B], up[B], down[B], scale[B];
        for (int b = 0; b < B; ++b) {
            norm[b] = qsgd_norm(v[b], L, sq[b], &scale[b]);
            up[b] = s / norm[b];
            down[b] = norm[b] / s;
        }
        for (int b = 0; b < B; ++b)
            qsgd_values(v[b], out[b], L, first[b], norm[b], up[b], down[b], mix64(row[b] ^ 1), s, unbiased,
                        scale[b]);
        return;
    }
    const std::int64_t k = std::min<std::int64_t>(param, L);  // (<= 4: batched())
    for (int b = 0; b < B; ++b) {
        double* sc = score + b * L;
        if (method == kTopk) {
            for (std::int64_t c = 0; c < L; ++c) sc[c] = -std::fabs(static_cast<double>(v[b][c]));
        } else {
            const std::uint64_t key = mix64(row[b] ^ 2);
            for (std::int64_t c = 0; c < L; ++c) sc[c] = message_uniform(key, static_cast<std::uint64_t>(first[b] + c));
        }
    }
    std::int64_t order[B][4];
    argmin_passes<B>(score, L, k, &order[0][0], 4);
    const T scale = selection_scale<T>(method, unbiased, L, k);
    double kept[4];
    for (int b = 0; b < B; ++b) keep_k(v[b], out[b], L, k, order[b], kept, scale);
}

#if ROWSTOCH_X86_DISPATCH
// keep_k's x * 1 (top-k's scale): a signalling NaN made quiet (its quiet bit set, as the product sets it on x86),
// every other value as it is (helper 157: 394 of 765 blocks with signalling NaNs differed from the scalar path).
inline double quieted(double x) {
    std::uint64_t b;
    std::memcpy(&b, &x, sizeof b);
    if ((b & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL && (b & 0x000fffffffffffffULL)) b |= 0x0008000000000000ULL;
    std::memcpy(&x, &b, sizeof b);
    return x;
}

// compress_rows_of's top-k of the first rows - rows % W rows of X (a message of L <= 16 doubles a row, k <= 4), W
// rows at a time (8 on AVX-512, 4 on AVX2): in each lane its row's scores -|v_c|, compress_batch's argmin passes
// (the first minimum by `<`, a pass's choice then +inf) and keep_k's writes (the kept values read first: out may be
// X; zeros, then the kept values in pass order), so the same bits; `own` (or null) gets the rows before they are
// written. Returns the rows done. The scalar passes took 30 ns a row (top-2 of 10) on a Xeon: a compressed round
// over losses 2.8x the static one at n = 2^18 where the lossy round alone is 1.6x.
template <int W>
ROWSTOCH_INLINE std::int64_t topk_rows(const double* X, double* out, double* own, std::int64_t rows, std::int64_t L,
                                       std::int64_t k) {
    using V = Vec<W>;
    using M = Mask<W>;
    const V inf = V{} + std::numeric_limits<double>::infinity();
    std::int64_t r0 = 0;
    for (; r0 + W <= rows; r0 += W) {
        const double* x = X + r0 * L;
        V s[16];
        for (std::int64_t c = 0; c < L; ++c) {
            V v;
            for (int l = 0; l < W; ++l) v[l] = x[l * L + c];
            s[c] = (V)((M)v | (M{} + INT64_MIN));  // -|v|: the sign bit set (a NaN stays a NaN)
        }
        M order[4];
        for (std::int64_t m = 0; m < k; ++m) {
            V low = s[0];
            M at = M{};
            for (std::int64_t c = 1; c < L; ++c) {
                M less;  // (a NaN compares false: never taken past column 0; lane by lane, which GCC 12 compiles
                // to one compare, where the vectors' `<` at width 8 outside an AVX-512 function stops it with an
                // internal compiler error)
                for (int l = 0; l < W; ++l) less[l] = s[c][l] < low[l] ? -1 : 0;
                low = select<W>(less, s[c], low);
                at = (less & c) | (~less & at);
            }
            order[m] = at;
            for (std::int64_t c = 0; c < L; ++c) s[c] = select<W>((M)(at == c), inf, s[c]);
        }
        double kept[4][W];
        for (std::int64_t m = 0; m < k; ++m)
            for (int l = 0; l < W; ++l) kept[m][l] = x[l * L + order[m][l]];
        if (own) std::memcpy(own + r0 * L, x, sizeof(double) * static_cast<std::size_t>(W * L));
        double* o = out + r0 * L;
        for (std::int64_t c = 0; c < W * L; ++c) o[c] = 0.0;
        for (std::int64_t m = 0; m < k; ++m)
            for (int l = 0; l < W; ++l) o[l * L + order[m][l]] = quieted(kept[m][l]);
    }
    return r0;
}
ROWSTOCH_TARGET_AVX512 __attribute__((noinline)) inline std::int64_t topk_rows8(const double* X, double* out,
                                                                              double* own, std::int64_t rows,
                                                                              std::int64_t L, std::int64_t k) {
    return topk_rows<8>(X, out, own, rows, L, k);
}
ROWSTOCH_TARGET_AVX2 __attribute__((noinline)) inline std::int64_t topk_rows4(const double* X, double* out,
                                                                            double* own, std::int64_t rows,
                                                                            std::int64_t L, std::int64_t k) {
    return topk_rows<4>(X, out, own, rows, L, k);
}
#endif

// compress_rows_of's message noise: out[i, c] = T(X[i, c] + sigma_i z_ic), z_ic = NormalChunks' draw of column c
// under row i's keys (compress_message's kNoise: the same draws and operations, so the same bits, whatever L), the
// uniforms of 64 values drawn across the rows' messages, then their normals W at a time (the rows of a thread's
// range lie one after the other in X and out; X may be out: each value is read before it is written); `own` gets
// X's rows.
template <bool PerNode, class T>
void noise_rows(const T* X, T* out, std::int64_t n, std::int64_t w, NodeIds ids, double sigma, std::uint64_t round,
                T* own, const double* sigmas) {
    for_range(n, threads_for(n * w * 8), [&](std::int64_t lo, std::int64_t hi) {
    with_simd_width([&](auto W) ROWSTOCH_INLINE_LAMBDA {
        NormalChunks<W> normals;
        std::int64_t at = lo * w;  // (X[at], out[at]: the next value the normals go to)
        auto emit = [&](std::int64_t count, const double* z, const double* scale) ROWSTOCH_INLINE_LAMBDA {
            for (std::int64_t c = 0; c < count; ++c, ++at)
                out[at] = static_cast<T>(static_cast<double>(X[at]) + scale[c] * z[c]);
        };
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::int64_t g = ids.row(i);
            const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(g));
            const std::uint64_t key1 = mix64(row ^ 3), key2 = mix64(row ^ 4);
            double s = sigma;
            if constexpr (PerNode) s = sigmas ? sigmas[g] : sigma;
            if (own)  // (before any value of the row is written: out may be X)
                for (std::int64_t c = 0; c < w; ++c) own[i * w + c] = X[i * w + c];
            for (std::int64_t c = 0; c < w; ++c) normals.add(key1, key2, static_cast<std::uint64_t>(c), s, emit);
        }
        normals.flush(emit);
    });
    });
}

// out[i] = the messages of row i of X (n rows of w values, messages of L values; row i is node ids.row(i)); where
// `own` is given, X's row is copied there in the same pass (the [X; Q] block of a compressed round). PerNode:
// `params` / `sigmas` hold one bits-or-k / sigma per global node id (the sender's: heterogeneous devices), else
// param / sigma are every node's (that loop compiled without a per-row lookup). Messages are batched
// (compress_batch) only with others of the same parameter; a message compressed alone gets the same operations, so
// the same bits.
template <bool PerNode, class T>
void compress_rows_of(const T* X, T* out, std::int64_t n, std::int64_t w, std::int64_t L, NodeIds ids, int method,
                      std::int64_t param, double sigma, bool unbiased, std::uint64_t seed, std::uint64_t t,
                      std::uint64_t r, T* own, const std::int64_t* params, const double* sigmas) {
    const std::uint64_t round = hash_prefix(seed, t, r);
    if (method == kNoise) {  // (a message's draws are keyed on its row and column only: the rows' values in chunks
        // of 64 across messages and rows, as link_noise's)
        noise_rows<PerNode>(X, out, n, w, ids, sigma, round, own, sigmas);
        return;
    }
    const bool any_batch =
        PerNode ? (method == kQsgd || method == kTopk || method == kRandk) : batched(method, param, L);
    for_range(n, threads_for(n * w * 8), [&](std::int64_t lo, std::int64_t hi) {
#if ROWSTOCH_X86_DISPATCH
        if constexpr (!PerNode && std::is_same<T, double>::value)  // (top-k of a row's one message, W rows a time)
            if (method == kTopk && w == L && L <= 16 && std::min<std::int64_t>(param, L) <= 4 && simd_width() >= 4)
                lo += (simd_width() == 8 ? topk_rows8 : topk_rows4)(X + lo * w, out + lo * w,
                                                                    own ? own + lo * w : nullptr, hi - lo, L,
                                                                    std::min<std::int64_t>(param, L));
#endif
        std::vector<std::int64_t> order(static_cast<std::size_t>(L));
        std::vector<double> score(static_cast<std::size_t>(L * (any_batch ? kBatch : 1)));
        const T* vs[kBatch];
        T* outs[kBatch];
        std::int64_t first[kBatch];
        std::uint64_t rows[kBatch];
        int held = 0;  // (messages waiting for a full batch, all of parameter held_param)
        std::int64_t held_param = param;
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::int64_t g = ids.row(i);
            const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(g));
            std::int64_t p = param;
            double s = sigma;
            bool batch = any_batch;
            if constexpr (PerNode) {
                p = params ? params[g] : param;
                s = sigmas ? sigmas[g] : sigma;
                batch = batched(method, p, L);
                if (held && (!batch || p != held_param)) {  // (the batch so far, one by one: the same bits; the
                    // batched methods take no sigma)
                    for (int b = 0; b < held; ++b)
                        compress_message(method, vs[b], outs[b], L, first[b], rows[b], held_param, sigma, unbiased,
                                         order.data(), score.data());
                    held = 0;
                }
                held_param = p;
            }
            if (own)  // (before any message of the row is written: out may be X)
                for (std::int64_t c = 0; c < w; ++c) own[i * w + c] = X[i * w + c];
            for (std::int64_t c0 = 0; c0 < w; c0 += L) {
                if (!batch) {
                    compress_message(method, X + i * w + c0, out + i * w + c0, L, c0, row, p, s, unbiased,
                                     order.data(), score.data());
                    continue;
                }
                vs[held] = X + i * w + c0;
                outs[held] = out + i * w + c0;
                first[held] = c0;
                rows[held] = row;
                if (++held == kBatch) {
                    compress_batch(method, vs, outs, L, first, rows, p, unbiased, score.data());
                    held = 0;
                }
            }
        }
        for (int b = 0; b < held; ++b)
            compress_message(method, vs[b], outs[b], L, first[b], rows[b], held_param, sigma, unbiased, order.data(),
                             score.data());
    });
}

template <class T>
void compress_rows(const T* X, T* out, std::int64_t n, std::int64_t w, std::int64_t L, NodeIds ids, int method,
                   std::int64_t param, double sigma, bool unbiased, std::uint64_t seed, std::uint64_t t,
                   std::uint64_t r, T* own = nullptr, const std::int64_t* params = nullptr,
                   const double* sigmas = nullptr) {
    if (params || sigmas)
        compress_rows_of<true>(X, out, n, w, L, ids, method, param, sigma, unbiased, seed, t, r, own, params, sigmas);
    else
        compress_rows_of<false>(X, out, n, w, L, ids, method, param, sigma, unbiased, seed, t, r, own, nullptr,
                                nullptr);
}

}  // namespace rowstoch

namespace rowstoch {

// Noise on received values (rowstoch_fast.network.Noisy, per="link"): out[q, c] = z, one standard normal per stored
// entry q (the link j -> i, global ids) and value c of the message it delivers, sent in iteration s = t - ages[q]
// (ages null: s = t): z = sqrt(-2 ln(1 - u)) cos(2 pi u') with u, u' = uniform_hash(seed, s, r, i, j, 3 | 4, c).
// A receiver's copy of a message gets noise of its own; a message used again (delays) keeps its noise. The NumPy
// transcription is _reference.link_noise. Written as out[q, c] = T(z) T(sigma_j), sigma_j the sender's (global id
// j) sigmas[j], or `sigma` for every sender where sigmas is null (network.Noisy.sigma_of's product, in T; the
// default 1 leaves T(z) as it is).
template <class I, class T>
void link_noise(const I Ap[], const I Aj[], std::int64_t rows, NodeIds ids, std::uint64_t seed, std::uint64_t t,
                std::uint64_t r, const std::int32_t* ages, std::int64_t w, T out[], double sigma = 1.0,
                const double* sigmas = nullptr) {
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * w * 8);
    const std::uint64_t now = hash_prefix(seed, t, r);
    for_rows(Ap, rows, threads, [&](std::int64_t lo, std::int64_t hi) {
    with_simd_width([&](auto W) ROWSTOCH_INLINE_LAMBDA {
        NormalChunks<W> normals;  // (64 values at a time across links: a row's links lie one after the other in out)
        std::int64_t at = static_cast<std::int64_t>(Ap[lo]) * w;  // (out[at]: the next value the normals go to)
        auto emit = [&](std::int64_t count, const double* z, const double* scale) ROWSTOCH_INLINE_LAMBDA {
            for (std::int64_t c = 0; c < count; ++c, ++at) out[at] = static_cast<T>(z[c]) * static_cast<T>(scale[c]);
        };
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::uint64_t gi = static_cast<std::uint64_t>(ids.row(i));
            for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                const std::uint64_t gj = static_cast<std::uint64_t>(ids.col(static_cast<std::int64_t>(Aj[q])));
                const std::uint64_t sent = ages ? hash_prefix(seed, t - static_cast<std::uint64_t>(ages[q]), r) : now;
                const std::uint64_t link = mix64(mix64(sent ^ gi) ^ gj);
                const std::uint64_t key1 = mix64(link ^ 3), key2 = mix64(link ^ 4);
                const double s = sigmas ? sigmas[gj] : sigma;
                for (std::int64_t c = 0; c < w; ++c) normals.add(key1, key2, static_cast<std::uint64_t>(c), s, emit);
            }
        }
        normals.flush(emit);
    });
    });
}

}  // namespace rowstoch
