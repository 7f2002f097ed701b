// Runs the CuPy backend's CUDA kernels (rowstoch_fast/backends/kernels.cu) on the host, so that their
// logic (the sampling streams, the order of the sums, the run-status flag) is checked against the CPU
// kernels on machines without a GPU, and what a GPU would fault on (a misaligned pack, shared memory past a
// launch's bytes; .ci/sanitize adds ASan, UBSan and TSan). Element-wise kernels run one emulated GPU thread
// after another (every other launch from the last); cooperative kernels run each block of 32 W threads as
// 32 W host threads, __syncwarp a barrier among a warp's 32 and __syncthreads among the block's; a kernel with
// a grid-wide barrier runs all its blocks at once. Built by tests/conftest.py with the C++ compiler and loaded
// by ctypes; device-only intrinsics get host stand-ins below. Not part of the package.
#include <atomic>
#include <cmath>
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

// The dynamic shared memory (kernels.cu's DYNAMIC_SHARED) of the one block that runs at a time; a grid's blocks
// all at once (EMULATE_GRID) each have their own. Each block starts with all of it holding a guard pattern, all
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
// The barriers of the one block that runs at a time: one per warp, one for the block.
constexpr int kMaxWarps = 32;
static Barrier warp_barriers[kMaxWarps], block_barrier;
// (a grid's blocks run at once, EMULATE_GRID: each thread waits at its own block's barrier)
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
// The read-only and the streaming loads and the streaming stores (kernels.cu's load_nc, load_cs and
// store_cs): plain, the streaming ones counted.
#define ROWSTOCH_HOST_LOADS
static std::atomic<long long> streamed_loads{0}, streamed_stores{0};
template <typename T, class P>
static inline void load_nc(const T* p, P& r) {
    PACK_ALIGNED(p, sizeof r);
    std::memcpy(&r, p, sizeof r);
}
template <typename T, class P>
static inline void load_cs(const T* p, P& r) {
    PACK_ALIGNED(p, sizeof r);
    ++streamed_loads;
    std::memcpy(&r, p, sizeof r);
}
template <typename T, class P>
static inline void store_cs(T* p, const P& r) {
    PACK_ALIGNED(p, sizeof r);
    ++streamed_stores;
    std::memcpy(p, &r, sizeof r);
}
// A thread spinning at kernels.cu's grid barrier lets the others run.
static inline void spin_pause() { std::this_thread::yield(); }
// kernels.cu's words read and written by several threads at once (its run status, its grid barrier): atomic
// (a GPU's volatile word accesses are single loads and stores), acquire and release, so that ThreadSanitizer
// (.ci/sanitize) checks the kernels' own synchronisation, not these.
template <typename W>
static inline W load_word(const W* p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <typename W>
static inline void store_word(W* p, W v) {
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#define ROWSTOCH_ALL_KERNELS
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

// Launches `name` over `blocks` blocks of `threads` threads all at once, as host threads (a cooperative kernel:
// kernels.cu's grid barrier; no warp barriers), each block with its own shared memory.
#define EMULATE_GRID(name, params, args)                                                    \
    extern "C" void emulate_##name(long long blocks, long long threads params) {            \
        blockDim.x = threads;                                                               \
        gridDim.x = blocks;                                                                 \
        std::unique_ptr<Barrier[]> barriers(new Barrier[blocks]);                           \
        std::unique_ptr<unsigned char[]> memory(new unsigned char[blocks * kSharedBytes]);  \
        std::vector<std::thread> grid;                                                      \
        for (long long b = 0; b < blocks; ++b) {                                            \
            barriers[b].reset(static_cast<int>(threads));                                   \
            guard_shared(memory.get() + b * kSharedBytes);                                  \
            for (long long t = 0; t < threads; ++t)                                         \
                grid.emplace_back([=, &barriers, &memory] {                                 \
                    blockIdx.x = b;                                                         \
                    threadIdx.x = t;                                                        \
                    this_block = &barriers[b];                                              \
                    this_shared = memory.get() + b * kSharedBytes;                          \
                    name args;                                                              \
                });                                                                         \
        }                                                                                   \
        for (auto& t : grid) t.join();                                                      \
        for (long long b = 0; b < blocks; ++b) check_shared(memory.get() + b * kSharedBytes);  \
    }

#define EMULATE_LOGISTIC(name, T)                                                                          \
    EMULATE_BLOCKS(name,                                                                                   \
                   P(const T* H, const T* Yl, const i64* nodes, i64 m, i64 M, i64 d, T rho, const T* X, i64 reps, \
                     i64 B, i64 batches, u64 seed, u64 iteration, const u64* clock, i64 rep_offset, int layout,    \
                     int* spill, T* G),                                                                            \
                   (H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, clock, rep_offset, layout,  \
                    spill, G))
EMULATE_LOGISTIC(logistic_grad0_f32, float)
EMULATE_LOGISTIC(logistic_grad1_f32, float)
EMULATE_LOGISTIC(logistic_grad0_f64, double)
EMULATE_LOGISTIC(logistic_grad1_f64, double)
EMULATE_LOGISTIC(logistic_grad2_f64, double)
EMULATE_LOGISTIC(logistic_grad4_f64, double)

// The mixing kernels: csr_mix_entry<V>x<U>_<value>_<index> (threads = n * w / V).
#define MIX_PARAMS(T, I) P(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* s)
#define MIX_ARGS (Ap, Aj, Ax, X, Y, n, w, s)
#define EMULATE_MIX(name, T, I) EMULATE(name, MIX_PARAMS(T, I), MIX_ARGS)
EMULATE_MIX(csr_mix_entry1x1_f64_i32, double, int)
EMULATE_MIX(csr_mix_entry1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_entry2x1_f64_i64, double, i64)
EMULATE_MIX(csr_mix_entry2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_entry4x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_entry4x4_f32_i64, float, i64)
EMULATE_MIX(csr_mix_entry1x4_f32_i64, float, i64)
// ... and with per-row weights (Ax holding n weights): csr_mix_row<V>x<U>_<value>_<index>.
EMULATE_MIX(csr_mix_row1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_row2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_row4x4_f32_i64, float, i64)
// ... and for circulant matrices (Ap = {0, m, hint bytes}, Aj the offsets, Ax the one weight): csr_mix_circ<V>x<U>_<value>_i32.
EMULATE_MIX(csr_mix_circ1x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_circ2x4_f64_i32, double, int)
EMULATE_MIX(csr_mix_circ1x4_f32_i32, float, int)
EMULATE_MIX(csr_mix_circ4x4_f32_i32, float, int)
// ... and the same with a tile of the near offsets' rows in shared memory (blocks of host threads):
// csr_mix_circt<V>x4_<value>_i32 (blocks, threads per block).
#define EMULATE_TILED(name, T, I) EMULATE_BLOCKS(name, MIX_PARAMS(T, I), MIX_ARGS)
EMULATE_TILED(csr_mix_circt1x4_f64_i32, double, int)
EMULATE_TILED(csr_mix_circt2x4_f64_i32, double, int)
EMULATE_TILED(csr_mix_circt1x4_f32_i32, float, int)

// ... and the R rounds in one cooperative launch (all blocks at once): csr_rounds_<family><V>x4_<value>_<index>.
#define EMULATE_ROUNDS(name, T, I)                                                                              \
    EMULATE_GRID(name, P(const I* Ap, const I* Aj, const T* Ax, const T* X, T* out, T* work, i64 n, i64 w, i64 R, \
                         const u64* s, unsigned* arrived),                                                      \
                 (Ap, Aj, Ax, X, out, work, n, w, R, s, arrived))
EMULATE_ROUNDS(csr_rounds_entry1x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_entry2x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_row1x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_row2x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_circ1x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_circ2x4_f64_i32, double, int)
EMULATE_ROUNDS(csr_rounds_circ1x4_f32_i32, float, int)
EMULATE_ROUNDS(csr_rounds_circ4x4_f32_i32, float, int)
// ... and CIRCT's rounds, a tile per block (its rows per block and shared bytes last): csr_rounds_circt<V>x4_<value>_i32.
#define EMULATE_TILED_ROUNDS(name, T)                                                                                \
    EMULATE_GRID(name, P(const int* Ap, const int* Aj, const T* Ax, const T* X, T* out, T* work, i64 n, i64 w, i64 R, \
                         const u64* s, unsigned* arrived, i64 chunk, i64 shared),                                  \
                 (Ap, Aj, Ax, X, out, work, n, w, R, s, arrived, chunk, shared))
EMULATE_TILED_ROUNDS(csr_rounds_circt1x4_f64_i32, double)
EMULATE_TILED_ROUNDS(csr_rounds_circt2x4_f64_i32, double)
EMULATE_TILED_ROUNDS(csr_rounds_circt1x4_f32_i32, float)
// ... and Pull-Diag-GT's y phase of R rounds in one launch: gt_rounds_<family>1x2_f64_i32.
#define EMULATE_GT_ROUNDS(name)                                                                                    \
    EMULATE_GRID(name,                                                                                             \
                 P(const int* Ap, const int* Aj, const double* Ax, const double* y, const double* g_new,           \
                   const double* g_old, const double* s_new, const double* s_old, const double* x, double lr,      \
                   double* y_out, double* xw, double* work, i64 n, i64 w, i64 R, u64* s, u64 launch,               \
                   unsigned* arrived),                                                                             \
                 (Ap, Aj, Ax, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, work, n, w, R, s, launch, arrived))
EMULATE_GT_ROUNDS(gt_rounds_entry1x2_f64_i32)
EMULATE_GT_ROUNDS(gt_rounds_row1x2_f64_i32)
EMULATE_GT_ROUNDS(gt_rounds_circ1x2_f64_i32)

// The lossy rounds of rowstoch_fast.network: csr_mix_lossy<V>_<value>_<index>.
#define EMULATE_LOSSY(name, T, I)                                                                             \
    EMULATE(name,                                                                                             \
            P(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* s, u64 key,   \
              double p, int renormalise, const unsigned char* awake, const unsigned char* bad),               \
            (Ap, Aj, Ax, X, Y, n, w, s, key, p, renormalise, awake, bad))
EMULATE_LOSSY(csr_mix_lossy1_f64_i32, double, int)
EMULATE_LOSSY(csr_mix_lossy2_f64_i32, double, int)
EMULATE_LOSSY(csr_mix_lossy4_f32_i64, float, i64)

// Pull-Diag-GT's y phase: its last round (gt_descent_<family><V>x4_...) and the whole one-round phase
// (gt_phase_<family>1x2_...).
#define EMULATE_DESCENT(name, T, I)                                                                             \
    EMULATE(name,                                                                                               \
            P(const I* Ap, const I* Aj, const T* Ax, const T* X, const T* x, T lr, T* y, T* xw, i64 n, i64 w,   \
              u64* s, u64 launch),                                                                              \
            (Ap, Aj, Ax, X, x, lr, y, xw, n, w, s, launch))
#define EMULATE_PHASE(name, T, I)                                                                               \
    EMULATE(name,                                                                                               \
            P(const I* Ap, const I* Aj, const T* Ax, const T* y, const T* g_new, const T* g_old, const T* s_new,  \
              const T* s_old, const T* x, T lr, T* y_out, T* xw, i64 n, i64 w, u64* s, u64 launch),             \
            (Ap, Aj, Ax, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, n, w, s, launch))
#define EMULATE_GT(family)                                            \
    EMULATE_DESCENT(gt_descent_##family##1x4_f64_i32, double, int) \
    EMULATE_DESCENT(gt_descent_##family##2x4_f64_i32, double, int) \
    EMULATE_PHASE(gt_phase_##family##1x2_f64_i32, double, int)
EMULATE_GT(entry) EMULATE_GT(row) EMULATE_GT(circ)
EMULATE(tick, P(u64* s), (s))
EMULATE(tracker_rows_f64, P(const double* table, i64 last, i64 n, const u64* clock, double* s_new, double* s_old),
        (table, last, n, clock, s_new, s_old))
EMULATE(tracker_input_f64,
        P(const double* y, const double* g_new, const double* g_old, const double* s_new, const double* s_old,
          double* psi, i64 n, i64 w, const u64* s),
        (y, g_new, g_old, s_new, s_old, psi, n, w, s))

// combine<K>_f64 (K terms: the blocks, the per-row coefficients or null, the scalar coefficients).
#define T double
EMULATE(combine1_f64, P(const T* x0, const T* r0, T c0, T* out, i64 total, i64 w, u64* s, u64 launch),
        (x0, r0, c0, out, total, w, s, launch))
EMULATE(combine2_f64,
        P(const T* x0, const T* x1, const T* r0, const T* r1, T c0, T c1, T* out, i64 total, i64 w, u64* s,
          u64 launch),
        (x0, x1, r0, r1, c0, c1, out, total, w, s, launch))
EMULATE(combine3_f64,
        P(const T* x0, const T* x1, const T* x2, const T* r0, const T* r1, const T* r2, T c0, T c1, T c2, T* out,
          i64 total, i64 w, u64* s, u64 launch),
        (x0, x1, x2, r0, r1, r2, c0, c1, c2, out, total, w, s, launch))
EMULATE(combine4_f64,
        P(const T* x0, const T* x1, const T* x2, const T* x3, const T* r0, const T* r1, const T* r2, const T* r3,
          T c0, T c1, T c2, T c3, T* out, i64 total, i64 w, u64* s, u64 launch),
        (x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, out, total, w, s, launch))
#undef T
EMULATE(ge_advance_i32,
        P(const int* Ap, const int* Aj, i64 rows, unsigned char* bad, const u64* keys, i64 steps, u64 init_key,
          int init, double p_bad, double p_recover, double stationary),
        (Ap, Aj, rows, bad, keys, steps, init_key, init, p_bad, p_recover, stationary))

// The streaming loads and stores since the last call (counts[0], counts[1]); the counts start again.
extern "C" void emulated_streamed(long long* counts) {
    counts[0] = streamed_loads.exchange(0);
    counts[1] = streamed_stores.exchange(0);
}

// batch_id for every b < B (one emulated thread after another).
extern "C" void emulate_batch_ids(const int* draws, long long B, int* ids) {
    for (long long b = 0; b < B; ++b) ids[b] = batch_id(draws, b);
}
