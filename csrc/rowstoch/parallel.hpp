// Threading helpers shared by the kernels: OpenMP when the build has it,
// serial otherwise, and an nnz-balanced split of CSR rows over threads.
//
// No Python here: the kernels are plain templated C++ (see STYLE.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace rowstoch {

inline bool has_openmp() {
#ifdef _OPENMP
    return true;
#else
    return false;
#endif
}

// The largest thread count set_threads accepts: 4 per processor, at least 64.
// (libgomp crashes or exits on absurd counts such as 200000 or 2^31 - 1.)
inline int thread_cap() {
#ifdef _OPENMP
    return std::max(64, 4 * omp_get_num_procs());
#else
    return 64;
#endif
}

// The thread count is process-wide: omp_set_num_threads only sets the calling
// thread's value, so the kernels pass this count to every parallel region
// whatever Python thread calls them.  It starts at OpenMP's default
// (OMP_NUM_THREADS or the processor count) as read at import.
inline std::atomic<int>& thread_setting() {
#ifdef _OPENMP
    static std::atomic<int> count{std::min(omp_get_max_threads(), thread_cap())};
#else
    static std::atomic<int> count{1};
#endif
    return count;
}

inline int max_threads() {
#ifdef _OPENMP
    return thread_setting().load(std::memory_order_relaxed);
#else
    return 1;
#endif
}

// Returns false (and changes nothing) unless 1 <= t <= thread_cap().
inline bool set_threads(int t) {
    if (t < 1 || t > thread_cap()) return false;
#ifdef _OPENMP
    thread_setting().store(t, std::memory_order_relaxed);
#endif
    return true;
}

// Run body(t, T) on T = `threads` threads.  An exception thrown by any thread
// (std::bad_alloc from a per-thread buffer, say) is carried out of the region
// and rethrown on the calling thread once every thread has finished: no C++
// exception ever crosses an OpenMP region boundary (that would abort).
template <class Body>
inline void parallel_region(int threads, Body body) {
#ifdef _OPENMP
    std::exception_ptr error;
#pragma omp parallel num_threads(threads)
    {
        try {
            body(omp_get_thread_num(), omp_get_num_threads());
        } catch (...) {
#pragma omp critical(rowstoch_parallel_error)
            if (!error) error = std::current_exception();
        }
    }
    if (error) std::rethrow_exception(error);
#else
    (void)threads;
    body(0, 1);
#endif
}

// Below this many multiply-adds a kernel runs on one thread: the fork/join
// of a parallel region costs more than it saves.
constexpr std::int64_t kSerialWork = 1 << 15;

inline int threads_for(std::int64_t work) {
    return work < kSerialWork ? 1 : max_threads();
}

// Row range [lo, hi) of part t out of T, balancing nnz + rows (so empty rows
// still count) across parts.  Ap is the CSR row pointer of an n-row matrix.
template <class I>
inline void balanced_rows(const I Ap[], std::int64_t n, int t, int T,
                          std::int64_t& lo, std::int64_t& hi) {
    const std::int64_t total = static_cast<std::int64_t>(Ap[n]) + n;
    auto first_at = [&](std::int64_t target) {
        // smallest r in [0, n] with Ap[r] + r >= target
        std::int64_t a = 0, b = n;
        while (a < b) {
            std::int64_t m = a + (b - a) / 2;
            if (static_cast<std::int64_t>(Ap[m]) + m < target) a = m + 1;
            else b = m;
        }
        return a;
    };
    lo = (t == 0) ? 0 : first_at(total * t / T);
    hi = (t == T - 1) ? n : first_at(total * (t + 1) / T);
}

// Run body(lo, hi) over an nnz-balanced row split on `threads` threads.
template <class I, class Body>
inline void for_rows(const I Ap[], std::int64_t n, int threads, Body body) {
    if (threads <= 1 || n < 2) {
        body(std::int64_t(0), n);
        return;
    }
    parallel_region(threads, [&](int t, int T) {
        std::int64_t lo, hi;
        balanced_rows(Ap, n, t, T, lo, hi);
        body(lo, hi);
    });
}

// Run body(lo, hi) over an even split of [0, n) (streaming, row-independent work).
template <class Body>
inline void for_range(std::int64_t n, int threads, Body body) {
    if (threads <= 1 || n < 2) {
        body(std::int64_t(0), n);
        return;
    }
    parallel_region(threads, [&](int t, int T) {
        body(n * t / T, n * (t + 1) / T);
    });
}

}  // namespace rowstoch
