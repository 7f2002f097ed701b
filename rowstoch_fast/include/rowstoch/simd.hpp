// Short vectors of doubles (GCC/Clang vector extensions) and the run-time choice
// of their width.
//
// Kernels written on Vec<W> compile to SSE2/NEON pairs for W = 2, inside a
// function marked ROWSTOCH_TARGET_AVX2 to AVX2 quadruples for W = 4, and inside
// one marked ROWSTOCH_TARGET_AVX512 to AVX-512 octuples for W = 8.  Every
// operation here is lane-wise IEEE arithmetic (no FMA: the build passes
// -ffp-contract=off; no libm), so a result does not depend on W: the AVX2 and
// AVX-512 paths and the baseline path give the same bits (tested).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#if !defined(__GNUC__)
#error "rowstoch_fast's kernels use GCC/Clang vector extensions: build with GCC or Clang"
#endif

// Vector helpers are always inlined into their caller, so a 32-byte vector passed
// by value never crosses a call: GCC's ABI note (-Wpsabi) does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#define ROWSTOCH_INLINE __attribute__((always_inline)) inline
// On a lambda, between its parameter list and its body.
#define ROWSTOCH_INLINE_LAMBDA __attribute__((always_inline))

#if defined(__x86_64__) || defined(__i386__)
#define ROWSTOCH_X86_DISPATCH 1
#define ROWSTOCH_TARGET_AVX2 __attribute__((target("avx2")))
#define ROWSTOCH_TARGET_AVX512 __attribute__((target("avx512f")))
#else
#define ROWSTOCH_X86_DISPATCH 0
#endif

namespace rowstoch {

template <int W>
struct Lanes {
    typedef double f __attribute__((vector_size(8 * W)));
    typedef std::int64_t i __attribute__((vector_size(8 * W)));
    typedef std::uint64_t u __attribute__((vector_size(8 * W)));      // (hashes: network.hpp's delayed rounds)
    typedef std::int32_t narrow __attribute__((vector_size(4 * W)));  // (int32 indices, widened to i)
};
template <int W>
using Vec = typename Lanes<W>::f;
template <int W>
using Mask = typename Lanes<W>::i;  // lanes of all ones (true) or all zeros

template <int W>
ROWSTOCH_INLINE Vec<W> vload(const double* p) {
    Vec<W> v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <int W>
ROWSTOCH_INLINE void vstore(double* p, const Vec<W>& v) {
    std::memcpy(p, &v, sizeof v);
}

// Lane by lane: a where m is set, b elsewhere.
template <int W>
ROWSTOCH_INLINE Vec<W> select(const Mask<W>& m, const Vec<W>& a, const Vec<W>& b) {
    return (Vec<W>)(((Mask<W>)a & m) | ((Mask<W>)b & ~m));
}

// c[0] x^(N-1) + ... + c[N-1] by Horner's rule: (c[0] x + c[1]) x + ...
template <int W, int N>
ROWSTOCH_INLINE Vec<W> horner(const Vec<W>& x, const double (&c)[N]) {
    Vec<W> p = x * c[0] + c[1];
    for (int i = 2; i < N; ++i) p = p * x + c[i];
    return p;
}

// 1 / (1 + exp(z)) in every lane.  exp(-|z|) <= 1 never overflows: Cody-Waite
// reduction a = n ln2 + r (|r| <= ln2 / 2, n rounded by the 1.5 * 2^52 trick),
// exp(r) by its degree-13 Taylor polynomial (truncation < 4e-18), times 2^n built
// in the exponent bits; 2^n below 2^-1022 flushes to 0 (an absolute error below
// 2.3e-308).  Then 1 / (1 + e^z) = e / (1 + e) for z > 0, 1 / (1 + e) otherwise.
// Within 1.5 ulp of the exact value; NaN in, NaN out.  In place on z[0..W);
// with kExp, exp(-|z|) is also stored to e[0..W) (for ln(1 + e^-z), the loss).
template <int W, bool kExp = false>
ROWSTOCH_INLINE void logistic_weights(double* zp, double* ep = nullptr) {
    const Vec<W> z = vload<W>(zp);
    const Vec<W> zero = {}, one = zero + 1.0;
    const Vec<W> a = (Vec<W>)((Mask<W>)z | (Mask<W>{} + INT64_MIN));  // -|z|: set the sign bit
    const double magic = 6755399441055744.0;                        // 1.5 * 2^52
    const Vec<W> t = a * 1.4426950408889634 + magic;                // log2(e)
    const Vec<W> nf = t - magic;                                    // round(a / ln 2)
    const Vec<W> r = (a - nf * 6.93147180369123816490e-01) - nf * 1.90821492927058770002e-10;
    // Taylor: 1/13!, ..., 1/0!, written out: horner() over an array costs a broadcast per step here (1.5%)
    Vec<W> p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const Mask<W> n = (Mask<W>)t - (Mask<W>)(zero + magic);
    const Vec<W> scale = (Vec<W>)((n + 1023) << 52);
    const Vec<W> e = select<W>((Mask<W>)(nf < -1022.0), zero, p * scale);  // NaN compares false: kept
    const Vec<W> num = select<W>((Mask<W>)(z > 0.0), e, one);
    if constexpr (kExp) vstore<W>(ep, e);
    vstore<W>(zp, num / (one + e));
}

// ln(1 + e) in every lane for e in [0, 1] (the loss's ln(1 + e^-|m|)), in place on
// ep[0..W).  1 + e = 2^k (1 + f) with f exact: f = e (k = 0) for e < 1/2, else
// f = (e - 1) / 2 (k = 1; exact by Sterbenz).  ln(1 + f) = 2 atanh(s), s = f / (2 + f),
// |s| < 0.2, by its odd series to s^23 (truncation < 1e-17).  Within 2 ulp; NaN kept.
template <int W>
ROWSTOCH_INLINE void log1p_unit(double* ep) {
    const Vec<W> e = vload<W>(ep);
    const Vec<W> zero = {}, one = zero + 1.0;
    const Mask<W> high = (Mask<W>)(e >= 0.5);
    const Vec<W> f = select<W>(high, (e - 1.0) * 0.5, e);
    const Vec<W> k = select<W>(high, one, zero);
    const Vec<W> sv = f / (f + 2.0), s2 = sv * sv;
    static constexpr double kOdd[] = {1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0,
                                      1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,
                                      1.0 / 3.0};
    const Vec<W> p = horner<W>(s2, kOdd);
    const Vec<W> atanh2 = (sv + sv) + (sv + sv) * (s2 * p);  // 2 s + 2 s^3 / 3 + ...
    vstore<W>(ep, k * 6.93147180559945286227e-01 + atanh2);
}

// ln(u) in every lane for u in [2^-1022, 1] (the uniforms of a Box-Muller pair: no zero, no subnormal).
// u = 2^e m with m in [sqrt(1/2), sqrt(2)] (from the exponent bits); ln m = ln(1 + f), f = m - 1 exact (Sterbenz),
// by 2 atanh(s), s = f / (2 + f), |s| < 0.172, its odd series to s^23 (truncation < 1e-18, as log1p_unit); then
// e ln 2 in two parts (e ln2_hi exact). Within 2.1 ulp of the exact value (2.01 just below sqrt(1/2), where the
// sum cancels: a sweep of 11M values, helper 154).
template <int W>
ROWSTOCH_INLINE Vec<W> log_unit(const Vec<W>& u) {
    const Vec<W> zero = {};
    const Mask<W> bits = (Mask<W>)u;
    const Mask<W> mbits = (bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000;
    const Vec<W> m1 = (Vec<W>)mbits;  // [1, 2)
    const Mask<W> big = (Mask<W>)(m1 > 1.4142135623730951);
    const Vec<W> m = select<W>(big, m1 * 0.5, m1);
    const Mask<W> e = ((bits >> 52) - 1023) - big;  // (big lanes are -1: e + 1)
    const double magic = 6755399441055744.0;        // 1.5 * 2^52: e as a double from its bits
    const Vec<W> ef = (Vec<W>)((Mask<W>)(zero + magic) + e) - magic;
    const Vec<W> f = m - 1.0;
    const Vec<W> sv = f / (f + 2.0), s2 = sv * sv;
    static constexpr double kOdd[] = {1.0 / 23.0, 1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0,
                                      1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,
                                      1.0 / 3.0};
    const Vec<W> p = horner<W>(s2, kOdd);
    const Vec<W> lnm = (sv + sv) + (sv + sv) * (s2 * p);
    return ef * 6.93147180369123816490e-01 + (ef * 1.90821492927058770002e-10 + lnm);
}

// cos(x) in every lane for x in [0, 8): x = k pi/2 + r, k = round(x 2/pi), r by Cody-Waite with pi/2 in three
// parts (p1, p2 of 33 bits: k p1, k p2 and x - k p1 exact for k <= 5, so r keeps its relative accuracy even where
// x is the double nearest a multiple of pi/2), |r| <= pi/4; then +-cos r or +-sin r by their Taylor polynomials
// (to r^18 and r^17: truncation < 4e-21 and 1.1e-19 relatively). Within 2 ulp of cos of the double x.
template <int W>
ROWSTOCH_INLINE Vec<W> cos_small(const Vec<W>& x) {
    const Vec<W> zero = {};
    const double magic = 6755399441055744.0;
    const Vec<W> t = x * 0.6366197723675814 + magic;  // 2/pi
    const Vec<W> kf = t - magic;
    const Mask<W> k = (Mask<W>)t - (Mask<W>)(zero + magic);
    const Vec<W> r = ((x - kf * 1.5707963267341256) - kf * 6.077100506303966e-11) - kf * 2.0222662487959506e-21;
    const Vec<W> r2 = r * r;
    static constexpr double kCos[] = {1.0 / 6402373705728000.0, -1.0 / 20922789888000.0, 1.0 / 87178291200.0,
                                      -1.0 / 479001600.0,       1.0 / 3628800.0,         -1.0 / 40320.0,
                                      1.0 / 720.0,              -1.0 / 24.0,             0.5};
    static constexpr double kSin[] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0,
                                      -1.0 / 39916800.0,       1.0 / 362880.0,         -1.0 / 5040.0,
                                      1.0 / 120.0,             -1.0 / 6.0};
    const Vec<W> c = 1.0 - r2 * horner<W>(r2, kCos);  // 1 - r^2/2 + r^4/24 - ... (the signs of kCos alternate)
    const Vec<W> s = r + r * (r2 * horner<W>(r2, kSin));
    const Mask<W> odd = (k & 1) != 0, negative = ((k + 1) & 2) != 0;  // k mod 4: 0 cos, 1 -sin, 2 -cos, 3 sin
    const Vec<W> v = select<W>(odd, s, c);
    return select<W>(negative, -v, v);
}

// Box-Muller's standard normals, W at a time: z[l] = sqrt(-2 ln u1[l]) cos(2 pi u2[l]) for u1 in [2^-1022, 1] and
// u2 in [0, 1) (the uniforms of compress.hpp's NormalChunks), by log_unit and cos_small: no libm, so the same
// bits at every width; within 3.5 ulp of the exact value of the same expression (3.43 the worst of 11M pairs).
template <int W>
ROWSTOCH_INLINE void box_muller(const double* u1, const double* u2, double* z) {
    Vec<W> a = -2.0 * log_unit<W>(vload<W>(u1));
    for (int l = 0; l < W; ++l) a[l] = __builtin_sqrt(a[l]);  // (IEEE square roots: one instruction a lane)
    vstore<W>(z, a * cos_small<W>(vload<W>(u2) * 6.283185307179586));
}

// Vector width of the kernels: 8 where the CPU (and its OS) runs AVX-512F, 4 where it has AVX2 (x86-64),
// else 2. Width 8 is taken only by the kernels that put one replica in each lane, a delayed round's age draws
// (network.hpp's delayed_rows8) and top-k's messages of eight rows (compress.hpp's topk_rows8; four rows at
// width 4) (the other lanes of their kernels run at 4). set_simd_width(2) forces the baseline path (tests,
// benchmarks); 0 = automatic.
inline std::atomic<int>& simd_width_setting() {
    static std::atomic<int> w{0};
    return w;
}

inline int simd_width_available() {
#if ROWSTOCH_X86_DISPATCH
    static const int w = __builtin_cpu_supports("avx512f") ? 8 : __builtin_cpu_supports("avx2") ? 4 : 2;
    return w;
#else
    return 2;
#endif
}

inline int simd_width() {
    const int w = simd_width_setting().load(std::memory_order_relaxed);
    return w == 0 ? simd_width_available() : w;
}

// Returns false (and changes nothing) for a width this CPU cannot run.
inline bool set_simd_width(int w) {
    if (w != 0 && w != 2 && !((w == 4 || w == 8) && w <= simd_width_available())) return false;
    simd_width_setting().store(w, std::memory_order_relaxed);
    return true;
}

// f(std::integral_constant<int, W>{}) compiled for the widest vectors this CPU
// runs: the AVX2 instance is a separate function with the target attribute, and
// f (marked ROWSTOCH_INLINE_LAMBDA) with everything it calls on vectors is
// inlined into it.
template <class F>
void simd_call_w2(F& f) {
    f(std::integral_constant<int, 2>{});
}
#if ROWSTOCH_X86_DISPATCH
template <class F>
ROWSTOCH_TARGET_AVX2 void simd_call_w4(F& f) {
    f(std::integral_constant<int, 4>{});
}
#endif
template <class F>
inline void with_simd_width(F&& f) {
#if ROWSTOCH_X86_DISPATCH
    if (simd_width() >= 4) return simd_call_w4(f);  // (width 8: logistic_rows_in_lanes' groups of eight)
#endif
    simd_call_w2(f);
}

}  // namespace rowstoch
