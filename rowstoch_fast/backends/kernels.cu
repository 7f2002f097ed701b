// CUDA kernels of the CuPy backend, compiled at run time by NVRTC (cupy.RawModule):
// the wheel needs no CUDA toolkit. Instantiated for float/double values and
// int/long long CSR indices. Compiled with --fmad=false so the float64 results
// round like the CPU kernels (same sums in the same order).
//
// Layouts match the CPU side: dense blocks are row-major n x w, node-major.

typedef long long i64;
typedef unsigned long long u64;

// Y[i, c] = sum_p Ax[p] X[Aj[p], c]: one thread per output entry, threads of a
// warp sweep consecutive columns of a row (coalesced reads of the gathered rows).
template <typename T, typename I>
__device__ void csr_mix_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                             const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n * w) return;
    i64 i = tid / w, c = tid - i * w;
    T acc = 0;
    for (I p = Ap[i]; p < Ap[i + 1]; ++p) acc += Ax[p] * X[(i64)Aj[p] * w + c];
    Y[tid] = acc;
}

// out[i, c] = sum_t a_t x_t[i, c] for K <= 4 terms, a_t = r_t[i] (a per-row coefficient) when r_t is not
// null, else the scalar c_t; summed left to right as the CPU's combine (gt.hpp), so with --fmad=false the
// bits are the same. A term may be out itself (each thread reads its element before writing it). *bad is
// set to 1 by any thread whose value is NaN or Inf (they all write the same 1).
template <typename T>
__device__ void combine_impl(const T* x0, const T* x1, const T* x2, const T* x3, const T* r0, const T* r1,
                             const T* r2, const T* r3, T c0, T c1, T c2, T c3, int K, T* out, i64 n, i64 w,
                             int* bad) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n * w) return;
    i64 i = tid / w;
    T v = (r0 ? r0[i] : c0) * x0[tid];
    if (K > 1) v = v + (r1 ? r1[i] : c1) * x1[tid];
    if (K > 2) v = v + (r2 ? r2[i] : c2) * x2[tid];
    if (K > 3) v = v + (r3 ? r3[i] : c3) * x3[tid];
    out[tid] = v;
    if (!(v - v == T(0))) *bad = 1;
}

// --------------------------------------------------------------------- objective
__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 stream_key(u64 seed, u64 rep, u64 node, u64 iteration, u64 batch) {
    u64 k = mix64(seed);
    k = mix64(k ^ rep);
    k = mix64(k ^ node);
    k = mix64(k ^ iteration);
    return mix64(k ^ batch);
}

// The CPU's Stream: next() = mix64(key + k * golden); bounds up to 2^12 take 16
// bits and bounds below 2^32 take 32 bits from a pool (low bits first, refilled
// by a fresh output when it holds too few), larger bounds whole outputs.
struct Stream {
    u64 key, counter, pool;
    int pool_bits;
};

__device__ __forceinline__ u64 stream_next(Stream* s) {
    s->counter += 1;
    return mix64(s->key + 0x9E3779B97F4A7C15ULL * s->counter);
}

__device__ __forceinline__ u64 stream_bits(Stream* s, int bits) {
    if (s->pool_bits < bits) {
        s->pool = stream_next(s);
        s->pool_bits = 64;
    }
    const u64 r = s->pool & ((1ULL << bits) - 1);
    s->pool >>= bits;
    s->pool_bits -= bits;
    return r;
}

// Uniform integer in [0, bound): Lemire's multiply-shift with rejection (as on the CPU).
__device__ __forceinline__ u64 below(Stream* s, u64 bound) {
    if (bound <= 0xFFFFFFFFULL) {
        const int bits = bound <= (1ULL << 12) ? 16 : 32;
        const u64 mask = (1ULL << bits) - 1;
        for (;;) {
            const u64 m = stream_bits(s, bits) * bound;
            const u64 lo = m & mask;
            if (lo >= bound || lo >= ((mask + 1) - bound) % bound) return m >> bits;
        }
    }
    for (;;) {
        u64 x = stream_next(s);
        u64 lo = x * bound;
        if (lo >= bound || lo >= (0ULL - bound) % bound) return __umul64hi(x, bound);
    }
}

// 1 / (1 + exp(z)) exactly as the CPU's rowstoch::logistic_weight (csrc/rowstoch/simd.hpp)
// computes each lane: the same IEEE operations in the same order (--fmad=false), no libm.
__device__ __forceinline__ double logistic_weight(double z) {
    const double a = -fabs(z);
    const double magic = 6755399441055744.0;  // 1.5 * 2^52
    const double t = a * 1.4426950408889634 + magic;
    const double nf = t - magic;
    const double r = (a - nf * 6.93147180369123816490e-01) - nf * 1.90821492927058770002e-10;
    double p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0;
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
    const u64 n = (u64)(__double_as_longlong(t) - __double_as_longlong(magic));
    const double scale = __longlong_as_double((i64)((n + 1023ULL) << 52));
    const double e = nf < -1022.0 ? 0.0 : p * scale;
    const double num = z > 0.0 ? e : 1.0;
    return num / (1.0 + e);
}

// One thread per (repetition, node): the same mini-batches (partial Fisher-Yates
// on a per-thread scratch permutation, undone afterwards) and the same sums as
// rowstoch::logistic_stochastic_grad on the CPU.
template <typename T>
__device__ void logistic_grad_impl(const T* __restrict__ H, const T* __restrict__ Yl, const i64* __restrict__ nodes,
                                   i64 m, i64 M, i64 d, T rho, const T* __restrict__ X, i64 reps, i64 B,
                                   i64 batches, u64 seed, u64 iteration, i64 rep_offset, i64* __restrict__ perm_all,
                                   i64* __restrict__ swaps_all, T* __restrict__ G) {
    i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= reps * m) return;
    i64 rep = row / m;
    i64 node = nodes ? nodes[row % m] : row % m;
    i64* perm = perm_all + row * M;
    i64* swaps = swaps_all + row * B;
    for (i64 l = 0; l < M; ++l) perm[l] = l;
    const T* x = X + row * d;
    T* g = G + row * d;
    for (i64 j = 0; j < d; ++j) g[j] = 0;
    const T* Hi = H + node * M * d;
    const T* Yi = Yl + node * M;
    const T weight = T(1) / T(B * batches);
    for (i64 r = 0; r < batches; ++r) {
        Stream s = {stream_key(seed, (u64)(rep + rep_offset), (u64)node, iteration, (u64)r), 0, 0, 0};
        for (i64 b = 0; b < B; ++b) {
            i64 k = b + (i64)below(&s, (u64)(M - b));
            swaps[b] = k;
            i64 t = perm[b]; perm[b] = perm[k]; perm[k] = t;
        }
        // the CPU kernel works in chunks of 64 samples: margins, coefficients, accumulation
        for (i64 b0 = 0; b0 < B; b0 += 64) {
            i64 nb = B - b0 < 64 ? B - b0 : 64;
            for (i64 b = 0; b < nb; ++b) {
                const T* h = Hi + perm[b0 + b] * d;
                T s4[4] = {0, 0, 0, 0};  // rowstoch::dot4's order
                for (i64 j = 0; j < d; ++j) s4[j & 3] += h[j] * x[j];
                const T yb = Yi[perm[b0 + b]];
                const double z = (double)(yb * ((s4[0] + s4[2]) + (s4[1] + s4[3])));
                const T coef = (T)(-(double)yb * logistic_weight(z) * (double)weight);
                for (i64 q = 0; q < d; ++q) g[q] += coef * h[q];
            }
        }
        for (i64 b = B - 1; b >= 0; --b) { i64 t = perm[b]; perm[b] = perm[swaps[b]]; perm[swaps[b]] = t; }
    }
    for (i64 j = 0; j < d; ++j) {
        const T q = T(1) + x[j] * x[j];
        g[j] += rho * T(2) * x[j] / (q * q);
    }
}

extern "C" {
__global__ void csr_mix_f64_i32(const int* Ap, const int* Aj, const double* Ax, const double* X, double* Y, i64 n, i64 w) { csr_mix_impl(Ap, Aj, Ax, X, Y, n, w); }
__global__ void csr_mix_f64_i64(const i64* Ap, const i64* Aj, const double* Ax, const double* X, double* Y, i64 n, i64 w) { csr_mix_impl(Ap, Aj, Ax, X, Y, n, w); }
__global__ void csr_mix_f32_i32(const int* Ap, const int* Aj, const float* Ax, const float* X, float* Y, i64 n, i64 w) { csr_mix_impl(Ap, Aj, Ax, X, Y, n, w); }
__global__ void csr_mix_f32_i64(const i64* Ap, const i64* Aj, const float* Ax, const float* X, float* Y, i64 n, i64 w) { csr_mix_impl(Ap, Aj, Ax, X, Y, n, w); }
__global__ void combine_f64(const double* x0, const double* x1, const double* x2, const double* x3, const double* r0, const double* r1, const double* r2, const double* r3, double c0, double c1, double c2, double c3, int K, double* out, i64 n, i64 w, int* bad) { combine_impl(x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, bad); }
__global__ void combine_f32(const float* x0, const float* x1, const float* x2, const float* x3, const float* r0, const float* r1, const float* r2, const float* r3, float c0, float c1, float c2, float c3, int K, float* out, i64 n, i64 w, int* bad) { combine_impl(x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, bad); }
__global__ void logistic_grad_f64(const double* H, const double* Yl, const i64* nodes, i64 m, i64 M, i64 d, double rho, const double* X, i64 reps, i64 B, i64 batches, u64 seed, u64 iteration, i64 rep_offset, i64* perm, i64* swaps, double* G) {
    logistic_grad_impl(H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, rep_offset, perm, swaps, G);
}
}
