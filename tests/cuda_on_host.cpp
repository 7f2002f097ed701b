// Runs the CuPy backend's CUDA kernels (rowstoch_fast/backends/kernels.cu) on the host, so that their
// logic (the sampling streams, the order of the sums, the run-status flag) is checked against the CPU
// kernels on machines without a GPU. Element-wise kernels run one emulated GPU thread after another;
// warp-cooperative kernels run each block of 32 threads as 32 host threads, __syncwarp being a barrier
// among them. Built by tests/test_backends.py with the C++ compiler and loaded by ctypes; device-only
// intrinsics get host stand-ins below. Not part of the package.
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

struct EmulatedDim {
    long long x = 0;
};
static thread_local EmulatedDim blockIdx, threadIdx;
static EmulatedDim blockDim;

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__
#define __align__(n)

struct double2 {
    double x, y;
};

// The dynamic shared memory of the one block that runs at a time.
alignas(16) unsigned char smem[1 << 16];

static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
static inline long long __double_as_longlong(double v) {
    long long r;
    std::memcpy(&r, &v, sizeof r);
    return r;
}
static inline double __longlong_as_double(long long v) {
    long long r0 = v;
    double r;
    std::memcpy(&r, &r0, sizeof r);
    return r;
}
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected,
                                           unsigned long long desired) {
    return __sync_val_compare_and_swap(p, expected, desired);
}
using std::exp;
using std::fabs;
using std::memcpy;

// A reusable barrier for the threads of one emulated block (C++11: no std::barrier).
class Barrier {
  public:
    void reset(int count) {
        count_ = count;
        waiting_ = 0;
        phase_ = 0;
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        const long long phase = phase_;
        if (++waiting_ == count_) {
            waiting_ = 0;
            ++phase_;
            cv_.notify_all();
        } else {
            cv_.wait(lock, [&] { return phase_ != phase; });
        }
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    int count_ = 1, waiting_ = 0;
    long long phase_ = 0;
};
static Barrier warp_barrier;
static inline void __syncwarp(unsigned = 0xffffffffu) { warp_barrier.wait(); }

#include KERNELS_CU

// Launches `name` over `threads` emulated threads (block size 1).
#define EMULATE(name, params, args)                            \
    extern "C" void emulate_##name(long long threads params) { \
        blockDim.x = 1;                                        \
        threadIdx.x = 0;                                       \
        for (long long t = 0; t < threads; ++t) {              \
            blockIdx.x = t;                                    \
            name args;                                         \
        }                                                      \
    }
#define P(...) , __VA_ARGS__

// Launches `name` over `warps` blocks of one warp each, its 32 threads as host threads.
#define EMULATE_WARPS(name, params, args)                                         \
    extern "C" void emulate_##name(long long warps params) {                      \
        blockDim.x = 32;                                                          \
        for (long long b = 0; b < warps; ++b) {                                   \
            warp_barrier.reset(32);                                               \
            std::vector<std::thread> lanes;                                       \
            for (int lane = 0; lane < 32; ++lane)                                 \
                lanes.emplace_back([=] {                                          \
                    blockIdx.x = b;                                               \
                    threadIdx.x = lane;                                           \
                    name args;                                                    \
                });                                                               \
            for (auto& t : lanes) t.join();                                       \
        }                                                                         \
    }

EMULATE_WARPS(logistic_grad_f64,
              P(const double* H, const double* Yl, const i64* nodes, i64 m, i64 M, i64 d, double rho,
                const double* X, i64 reps, i64 B, i64 batches, u64 seed, u64 iteration, i64 rep_offset,
                int in_shared, i64 shared_per_warp, int* spill, double* G),
              (H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, rep_offset, in_shared,
               shared_per_warp, spill, G))
EMULATE(csr_mix_entry1_f64_i32,
        P(const int* Ap, const int* Aj, const double* Ax, const double* X, double* Y, i64 n, i64 w, const u64* s),
        (Ap, Aj, Ax, X, Y, n, w, s))
EMULATE(csr_mix_entry2_f64_i64,
        P(const i64* Ap, const i64* Aj, const double* Ax, const double* X, double* Y, i64 n, i64 w, const u64* s),
        (Ap, Aj, Ax, X, Y, n, w, s))
EMULATE(csr_mix_entry4_f32_i32,
        P(const int* Ap, const int* Aj, const float* Ax, const float* X, float* Y, i64 n, i64 w, const u64* s),
        (Ap, Aj, Ax, X, Y, n, w, s))

// The row-per-thread kernels of a few widths (the package builds one module per width).
#define ROWS_AT(W)                                                                                            \
    static void rows_f64_i32_##W(const int* Ap, const int* Aj, const double* Ax, const double* X, double* Y, \
                                 i64 n, const u64* s) {                                                       \
        csr_mix_rows<double, int, W>(Ap, Aj, Ax, X, Y, n, s);                                                \
    }                                                                                                         \
    static void rows_f32_i64_##W(const i64* Ap, const i64* Aj, const float* Ax, const float* X, float* Y,    \
                                 i64 n, const u64* s) {                                                       \
        csr_mix_rows<float, i64, W>(Ap, Aj, Ax, X, Y, n, s);                                                 \
    }                                                                                                         \
    EMULATE(rows_f64_i32_##W,                                                                                 \
            P(const int* Ap, const int* Aj, const double* Ax, const double* X, double* Y, i64 n, const u64* s), \
            (Ap, Aj, Ax, X, Y, n, s))                                                                         \
    EMULATE(rows_f32_i64_##W,                                                                                 \
            P(const i64* Ap, const i64* Aj, const float* Ax, const float* X, float* Y, i64 n, const u64* s),  \
            (Ap, Aj, Ax, X, Y, n, s))
ROWS_AT(1)
ROWS_AT(3)
ROWS_AT(4)
ROWS_AT(10)
ROWS_AT(16)

EMULATE(combine_f64,
        P(const double* x0, const double* x1, const double* x2, const double* x3, const double* r0, const double* r1,
          const double* r2, const double* r3, double c0, double c1, double c2, double c3, int K, double* out, i64 n,
          i64 w, u64* status, u64 launch),
        (x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, status, launch))
