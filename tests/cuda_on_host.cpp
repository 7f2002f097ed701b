// Runs the CuPy backend's CUDA kernels (rowstoch_fast/backends/kernels.cu) on the host, so that their
// logic (the sampling streams, the order of the sums, the run-status flag) is checked against the CPU
// kernels on machines without a GPU, and what a GPU would fault on (a misaligned pack, shared memory past a
// launch's bytes; .ci/sanitize adds ASan, UBSan and TSan). Element-wise kernels run one emulated GPU thread
// after another (every other launch from the last); the logistic kernel runs each block of 32 W threads as
// 32 W host threads, __syncwarp a barrier among a warp's 32 and __syncthreads among the block's. Built by
// tests/conftest.py with the C++ compiler and loaded
// by ctypes; device-only intrinsics get host stand-ins below. Not part of the package.
#include <atomic>
#include <cmath>
#include <math.h>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct EmulatedDim {
    long long x = 0;
};
static thread_local EmulatedDim blockIdx, threadIdx;
static EmulatedDim blockDim, gridDim;

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)

// The dynamic shared memory (kernels.cu's DYNAMIC_SHARED) of the one block that runs at a time. Each block starts with all of it holding a guard pattern, all
// bits set: a NaN in every float32 and float64 it holds, so that a value read before the block wrote it (on a
// GPU, what another block or launch left there) turns the kernel's result into NaN. Past the bytes a launch asks
// for (emulate_shared_bytes, the launch's shared_mem; all of it by default) the pattern is checked after the
// block: a kernel that writes beyond its launch's bytes (an error on a GPU) is counted in
// emulate_shared_overruns. Built under AddressSanitizer (.ci/sanitize), those bytes are poisoned too: a load or
// a store there stops the run with the kernel's stack.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROWSTOCH_ASAN 1  // (clang)
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ROWSTOCH_ASAN)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif
constexpr long long kSharedBytes = 1 << 16;
constexpr unsigned char kGuard = 0xFF;
alignas(16) unsigned char block_shared[kSharedBytes];
static thread_local unsigned char* this_shared = block_shared;
static long long launch_shared = kSharedBytes;
static std::atomic<long long> shared_overruns{0};
extern "C" void emulate_shared_bytes(long long bytes) {
    launch_shared = bytes < 0 ? 0 : bytes < kSharedBytes ? bytes : kSharedBytes;
    shared_overruns = 0;
}
extern "C" long long emulate_shared_overruns() { return shared_overruns; }
static void guard_shared(unsigned char* memory) {
    std::memset(memory, kGuard, kSharedBytes);
    ASAN_POISON_MEMORY_REGION(memory + launch_shared, kSharedBytes - launch_shared);
}
static void check_shared(const unsigned char* memory) {
    ASAN_UNPOISON_MEMORY_REGION(memory, kSharedBytes);
    for (long long k = launch_shared; k < kSharedBytes; ++k)
        if (memory[k] != kGuard) {
            ++shared_overruns;
            return;
        }
}
#define DYNAMIC_SHARED(name) unsigned char* const name = this_shared

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
static inline unsigned atomicAdd(unsigned* p, unsigned v) { return __sync_fetch_and_add(p, v); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
using std::copysign;
using std::cos;
using std::exp;
using std::fabs;
using std::fmin;
using std::frexp;
using std::isfinite;
using std::ldexp;
using std::log;
using std::memcpy;
using std::nearbyint;
using std::sqrt;
// (frexpf, ldexpf, nearbyintf: math.h's, in the global namespace)

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
// The barriers of the one block that runs at a time: one per warp, one for the block.
constexpr int kMaxWarps = 32;
static Barrier warp_barriers[kMaxWarps], block_barrier;
static thread_local Barrier* this_block = &block_barrier;
static inline void __syncwarp(unsigned = 0xffffffffu) { warp_barriers[threadIdx.x >> 5].wait(); }
static inline void __syncthreads() { this_block->wait(); }
// Every lane of the (whole) warp votes: the votes meet in memory between two barriers.
static unsigned ballot_votes[kMaxWarps][32];
static inline unsigned __ballot_sync(unsigned, bool vote) {
    unsigned* votes = ballot_votes[threadIdx.x >> 5];
    votes[threadIdx.x & 31] = vote ? 1u : 0u;
    __syncwarp();
    unsigned bits = 0;
    for (int lane = 0; lane < 32; ++lane) bits |= votes[lane] << lane;
    __syncwarp();
    return bits;
}
static inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
// A load or store of several values at once (kernels.cu's Pack) at an address that is not a multiple of its
// size, which a GPU faults on (the host does not): counted, emulated_misaligned (read and reset).
static std::atomic<long long> misaligned{0};
extern "C" long long emulated_misaligned() { return misaligned.exchange(0); }
#define PACK_ALIGNED(p, bytes)                                                                  \
    do {                                                                                        \
        if ((bytes) > sizeof(*(p)) && reinterpret_cast<std::uintptr_t>(p) % (bytes) != 0) ++misaligned; \
    } while (0)
// kernels.cu's words read and written by several threads at once (its run status): atomic
// (a GPU's volatile word accesses are single loads and stores), acquire and release, so that ThreadSanitizer
// (.ci/sanitize) checks the kernels' own synchronisation, not these.
#define ROWSTOCH_HOST_LOADS
template <typename W>
static inline W load_word(const W* p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

#include KERNELS_CU

// A GPU runs a launch's blocks in no set order; the emulation runs them one after another, every other
// launch from the last to the first: a result that depends on that order (a block reading what another
// writes in the same launch: a race on a GPU) then differs from the CPU's.
static long long emulated_launches = 0;
static inline long long block_in_order(long long k, long long blocks, bool reversed) {
    return reversed ? blocks - 1 - k : k;
}

// Launches `name` over `threads` emulated threads (block size 1).
#define EMULATE(name, params, args)                                  \
    extern "C" void emulate_##name(long long threads params) {       \
        blockDim.x = 1;                                              \
        threadIdx.x = 0;                                             \
        const bool reversed = emulated_launches++ % 2 == 1;          \
        for (long long k = 0; k < threads; ++k) {                    \
            blockIdx.x = block_in_order(k, threads, reversed);       \
            name args;                                               \
        }                                                            \
    }
#define P(...) , __VA_ARGS__

// Launches `name` over `blocks` blocks of `threads` threads each (a multiple of 32 where the kernel syncs a
// warp), as host threads.
#define EMULATE_BLOCKS(name, params, args)                                                  \
    extern "C" void emulate_##name(long long blocks, long long threads params) {            \
        blockDim.x = threads;                                                               \
        const bool reversed = emulated_launches++ % 2 == 1;                                 \
        for (long long k = 0; k < blocks; ++k) {                                            \
            const long long b = block_in_order(k, blocks, reversed);                        \
            for (long long w = 0; w < threads / 32; ++w) warp_barriers[w].reset(32);        \
            block_barrier.reset(static_cast<int>(threads));                                 \
            guard_shared(block_shared);                                                     \
            std::vector<std::thread> block;                                                 \
            for (long long t = 0; t < threads; ++t)                                         \
                block.emplace_back([=] {                                                    \
                    blockIdx.x = b;                                                         \
                    threadIdx.x = t;                                                        \
                    name args;                                                              \
                });                                                                         \
            for (auto& t : block) t.join();                                                 \
            check_shared(block_shared);                                                     \
        }                                                                                   \
    }

#define EMULATE_LOGISTIC(name, T)                                                                          \
    EMULATE_BLOCKS(name,                                                                                   \
                   P(const T* H, const T* Yl, const i64* nodes, i64 m, i64 M, i64 d, T rho, const T* X, i64 reps, \
                     i64 B, i64 batches, u64 seed, u64 iteration, i64 rep_offset, int layout,                    \
                     i64 shared_per_warp, int* spill, T* G),                                                     \
                   (H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, rep_offset, layout,       \
                    shared_per_warp, spill, G))
EMULATE_LOGISTIC(logistic_grad0_f32, float)
EMULATE_LOGISTIC(logistic_grad1_f32, float)
EMULATE_LOGISTIC(logistic_grad0_f64, double)
EMULATE_LOGISTIC(logistic_grad1_f64, double)
EMULATE_LOGISTIC(logistic_grad2_f64, double)
EMULATE_LOGISTIC(logistic_grad4_f64, double)

// The mixing kernels: csr_mix_entry<V>x4_<value>_<index> (threads = n * w / V).
#define MIX_PARAMS(T, I) P(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* s)
#define MIX_ARGS (Ap, Aj, Ax, X, Y, n, w, s)
#define EMULATE_MIX(name, T, I) EMULATE(name, MIX_PARAMS(T, I), MIX_ARGS)
EMULATE_MIX(csr_mix_entry1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_entry1x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_entry2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_entry2x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_entry4x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_entry4x4_f32_i64, float, i64)
EMULATE_MIX(csr_mix_entry1x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_entry1x4_f32_i64, float, i64)
// ... and with per-row weights (Ax holding n weights): csr_mix_row<V>x4_<value>_<index>.
EMULATE_MIX(csr_mix_row1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_row1x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_row2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_row2x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_row4x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_row4x4_f32_i64, float, i64)
EMULATE_MIX(csr_mix_row1x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_row1x4_f32_i64, float, i64)
// ... and for circulant matrices (Ap = {0, m}, Aj the offsets, Ax the one weight): csr_mix_circ<V>x4_<value>_<index>.
EMULATE_MIX(csr_mix_circ1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_circ1x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_circ2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_circ2x4_f64_i64, double, i64)
EMULATE_MIX(csr_mix_circ4x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_circ4x4_f32_i64, float, i64)
EMULATE_MIX(csr_mix_circ1x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_circ1x4_f32_i64, float, i64)

// The lossy rounds of rowstoch_fast.network: csr_mix_lossy<V>_<value>_<index>.
#define EMULATE_LOSSY(name, T, I)                                                                             \
    EMULATE(name,                                                                                             \
            P(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* s, u64 key,   \
              double p, const double* ps, int renormalise, const unsigned char* awake,                        \
              const unsigned char* bad),                                                                      \
            (Ap, Aj, Ax, X, Y, n, w, s, key, p, ps, renormalise, awake, bad))
EMULATE_LOSSY(csr_mix_lossy1_f64_i32, double, int)
EMULATE_LOSSY(csr_mix_lossy1_f64_i64, double, i64)
EMULATE_LOSSY(csr_mix_lossy2_f64_i32, double, int)
EMULATE_LOSSY(csr_mix_lossy2_f64_i64, double, i64)
EMULATE_LOSSY(csr_mix_lossy1_f32_i32, float, int)
EMULATE_LOSSY(csr_mix_lossy1_f32_i64, float, i64)
EMULATE_LOSSY(csr_mix_lossy4_f32_i32, float, int)
EMULATE_LOSSY(csr_mix_lossy4_f32_i64, float, i64)

// Per-link running sums: link_sums_<value> (threads = n * w), link_held_out (nnz), link_arrivals (rows).
#define EMULATE_LINKS(name, T)                                                                                   \
    EMULATE(name,                                                                                                \
            P(const i64* Ap, const i64* Aj, const T* Ax, const unsigned char* arrived, const T* X, T* Y, const T* Pin, \
              T* Pout, const unsigned char* held, const unsigned char* held_out, i64 n, i64 w, const u64* s),     \
            (Ap, Aj, Ax, arrived, X, Y, Pin, Pout, held, held_out, n, w, s))
EMULATE_LINKS(link_sums_f64, double)
EMULATE_LINKS(link_sums_f32, float)
// ... two quantities in one launch, one pass over a row's links: link_sums2_<value>_<index> (threads = n * (w1 + w2)).
#define EMULATE_LINKS2(name, T, I)                                                                               \
    EMULATE(name,                                                                                                \
            P(const I* Ap, const I* Aj, const T* Ax, const unsigned char* arrived, const T* X1, T* Y1, const T* P1, \
              T* P1_out, const unsigned char* held1, const unsigned char* held_out1, i64 w1, const T* X2, T* Y2,    \
              const T* P2, T* P2_out, const unsigned char* held2, const unsigned char* held_out2, i64 w2, i64 n,   \
              const u64* s),                                                                                     \
            (Ap, Aj, Ax, arrived, X1, Y1, P1, P1_out, held1, held_out1, w1, X2, Y2, P2, P2_out, held2, held_out2, w2, \
             n, s))
EMULATE_LINKS2(link_sums2_f64_i32, double, int)
EMULATE_LINKS2(link_sums2_f64_i64, double, i64)
EMULATE_LINKS2(link_sums2_f32_i32, float, int)
EMULATE_LINKS2(link_sums2_f32_i64, float, i64)
EMULATE(link_held_out, P(const unsigned char* arrived, unsigned char* held_out, i64 nnz, const u64* s),
        (arrived, held_out, nnz, s))
EMULATE(link_held_out8, P(const u64* arrived, u64* held_out, i64 nnz, const u64* s), (arrived, held_out, nnz, s))
EMULATE(link_arrivals, P(const i64* Ap, const i64* Aj, i64 rows, u64 key, u64 threshold, const u64* s,
                         unsigned char* arrived),
        (Ap, Aj, rows, key, threshold, s, arrived))

// One sample index per replica and node: draw_samples (threads = reps * rows).
EMULATE(draw_samples, P(u64 prefix, const i64* rep_ids, i64 reps, const i64* node_ids, i64 rows, u64 key, i64 m,
                        i64* out),
        (prefix, rep_ids, reps, node_ids, rows, key, m, out))

// The per-sample table's entries: sample_rows_<value> (threads = rows * reps * d).
#define EMULATE_SAMPLE_ROWS(name, T)                                                                      \
    EMULATE(name, P(T* table, i64 m, i64 rows, i64 reps, i64 d, const i64* idx, T* block, int put, const u64* s), \
            (table, m, rows, reps, d, idx, block, put, s))
EMULATE_SAMPLE_ROWS(sample_rows_f64, double)
EMULATE_SAMPLE_ROWS(sample_rows_f32, float)

// ... and over a round of messages (own rows apart, delays, per-link noise): csr_mix_messages<V>_<value>_<index>.
#define EMULATE_MESSAGES(name, T, I)                                                                           \
    EMULATE(name,                                                                                              \
            P(const I* Ap, const I* Aj, const T* Ax, const T* Xown, const T* X, T* Y, i64 n, i64 w, const u64* s, \
              u64 key, double p, const double* ps, int renormalise, const unsigned char* awake,                 \
              const unsigned char* bad,                                                                          \
              const u64* dkeys, const u64* dthr, const i64* dslot, i64 dlast, i64 dslots,                       \
              const unsigned char* dages, const u64* sent, T sigma, int noise_only, const double* sigmas),       \
            (Ap, Aj, Ax, Xown, X, Y, n, w, s, key, p, ps, renormalise, awake, bad, dkeys, dthr, dslot, dlast, dslots, \
             dages, sent, sigma, noise_only, sigmas))
EMULATE_MESSAGES(csr_mix_messages1_f64_i32, double, int)
EMULATE_MESSAGES(csr_mix_messages1_f64_i64, double, i64)
EMULATE_MESSAGES(csr_mix_messages2_f64_i32, double, int)
EMULATE_MESSAGES(csr_mix_messages2_f64_i64, double, i64)
EMULATE_MESSAGES(csr_mix_messages1_f32_i32, float, int)
EMULATE_MESSAGES(csr_mix_messages1_f32_i64, float, i64)
EMULATE_MESSAGES(csr_mix_messages4_f32_i32, float, int)
EMULATE_MESSAGES(csr_mix_messages4_f32_i64, float, i64)
// ... and the circulant kernel over a compressed round (own rows apart): csr_mix_circmsg<V>x4_<value>_<index>.
#define EMULATE_CIRCMSG(name, T, I)                                                                            \
    EMULATE(name, P(const I* Ap, const I* Aj, const T* Ax, const T* Xown, const T* X, T* Y, i64 n, i64 w, const u64* s), \
            (Ap, Aj, Ax, Xown, X, Y, n, w, s))
EMULATE_CIRCMSG(csr_mix_circmsg1x4_f64_i32, double, int)
EMULATE_CIRCMSG(csr_mix_circmsg1x4_f64_i64, double, i64)
EMULATE_CIRCMSG(csr_mix_circmsg2x4_f64_i32, double, int)
EMULATE_CIRCMSG(csr_mix_circmsg2x4_f64_i64, double, i64)
EMULATE_CIRCMSG(csr_mix_circmsg1x4_f32_i32, float, int)
EMULATE_CIRCMSG(csr_mix_circmsg1x4_f32_i64, float, i64)
EMULATE_CIRCMSG(csr_mix_circmsg4x4_f32_i32, float, int)
EMULATE_CIRCMSG(csr_mix_circmsg4x4_f32_i64, float, i64)

// The message networks' encoding: compress_rows_<value>.
#define EMULATE_COMPRESS(name, T)                                                                              \
    EMULATE(name,                                                                                              \
            P(const T* X, T* out, i64 n, i64 w, i64 L, int method, i64 param, double sigma, int unbiased, u64 key, \
              const u64* s, const i64* params, const double* sigmas),                                          \
            (X, out, n, w, L, method, param, sigma, unbiased, key, s, params, sigmas))
EMULATE_COMPRESS(compress_rows_f64, double)
EMULATE_COMPRESS(compress_rows_f32, float)

// combine_<value> (K <= 4 terms: the blocks, the per-row coefficients or null, the scalar coefficients).
#define EMULATE_COMBINE(name, T)                                                                                 \
    EMULATE(name,                                                                                                \
            P(const T* x0, const T* x1, const T* x2, const T* x3, const T* r0, const T* r1, const T* r2,         \
              const T* r3, T c0, T c1, T c2, T c3, int K, T* out, i64 n, i64 w, u64* status, u64 launch),        \
            (x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, status, launch))
EMULATE_COMBINE(combine_f64, double)
EMULATE_COMBINE(combine_f32, float)
// The ages of a delayed round's entries, one thread per row: delay_ages_rows_<index>.
#define EMULATE_AGES(name, I)                                                                                   \
    EMULATE(name,                                                                                               \
            P(const I* Ap, const I* Aj, i64 rows, const u64* keys, const u64* thresholds, i64 last,             \
              unsigned char* ages, const u64* s),                                                               \
            (Ap, Aj, rows, keys, thresholds, last, ages, s))
EMULATE_AGES(delay_ages_rows_i32, int)
EMULATE_AGES(delay_ages_rows_i64, i64)
EMULATE(ge_advance_i32,
        P(const int* Ap, const int* Aj, i64 rows, unsigned char* bad, const u64* keys, i64 steps, u64 init_key,
          int init, double p_bad, double p_recover, double stationary),
        (Ap, Aj, rows, bad, keys, steps, init_key, init, p_bad, p_recover, stationary))
EMULATE(ge_advance_i64,
        P(const i64* Ap, const i64* Aj, i64 rows, unsigned char* bad, const u64* keys, i64 steps, u64 init_key,
          int init, double p_bad, double p_recover, double stationary),
        (Ap, Aj, rows, bad, keys, steps, init_key, init, p_bad, p_recover, stationary))
