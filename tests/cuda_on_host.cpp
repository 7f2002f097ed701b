// Runs the CuPy backend's CUDA kernels (rowstoch_fast/backends/kernels.cu) on the host, one
// emulated GPU thread after another, so that their logic (the sampling streams,
// the order of the sums) is checked against the CPU kernels on machines without a
// GPU.  Built by tests/test_backends.py with the C++ compiler and loaded by ctypes;
// device-only intrinsics get host stand-ins below.  Not part of the package.
#include <cmath>
#include <cstdint>
#include <cstring>

struct EmulatedDim {
    long long x = 0;
};
static EmulatedDim blockIdx, blockDim, threadIdx;

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict

static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
static inline long long __double_as_longlong(double v) {
    long long r;
    std::memcpy(&r, &v, sizeof r);
    return r;
}
static inline double __longlong_as_double(long long v) {
    double r;
    std::memcpy(&r, &v, sizeof r);
    return r;
}
using std::exp;
using std::fabs;

#include KERNELS_CU

// Launches `name` over `threads` emulated threads (block size 1).
#define EMULATE(name, params, args)                          \
    extern "C" void emulate_##name(long long threads params) { \
        blockDim.x = 1;                                      \
        threadIdx.x = 0;                                     \
        for (long long t = 0; t < threads; ++t) {            \
            blockIdx.x = t;                                  \
            name args;                                       \
        }                                                    \
    }
#define P(...) , __VA_ARGS__

EMULATE(logistic_grad_f64,
        P(const double* H, const double* Yl, const i64* nodes, i64 m, i64 M, i64 d, double rho, const double* X,
          i64 reps, i64 B, i64 batches, u64 seed, u64 iteration, i64 rep_offset, i64* perm, i64* swaps, double* G),
        (H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, rep_offset, perm, swaps, G))
EMULATE(csr_mix_f64_i32, P(const int* Ap, const int* Aj, const double* Ax, const double* X, double* Y, i64 n, i64 w),
        (Ap, Aj, Ax, X, Y, n, w))
EMULATE(combine_f64,
        P(const double* x0, const double* x1, const double* x2, const double* x3, const double* r0, const double* r1,
          const double* r2, const double* r3, double c0, double c1, double c2, double c3, int K, double* out, i64 n,
          i64 w, int* bad),
        (x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, bad))
