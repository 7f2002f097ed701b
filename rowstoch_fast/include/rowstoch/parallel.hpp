// Threading helpers shared by the kernels: OpenMP when the build has it,
// serial otherwise, and an nnz-balanced split of CSR rows over threads.
//
// No Python here: the kernels are plain templated C++ (see STYLE.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>

#if defined(__linux__)
#include <time.h>
#endif

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

// ---------------------------------------------------------------- contention
// On a machine shared with a busy process, a team of as many threads as cores
// waits at every barrier for the thread the scheduler preempted: 2 threads on
// 2 cores ran 1.6-2.7x slower than 1 (bench/busy_machine.py).  Each region
// measures its wall time and the CPU time its threads spent in the body; the
// sum of the latter is what one thread would have needed.  When, over a window
// of kWindow of parallel time, the team took longer than that (it lost to a
// single thread) in two windows in a row (one alone is a transient, e.g.
// OpenBLAS threads still spinning after a LAPACK call), regions run on one
// thread for a back-off that starts at kBackoff and doubles while the team
// keeps losing (to kMaxBackoff); then the team is tried again, and a good
// window resets it.  The first window (thread start-up) is not judged.
// Results do not depend on the thread count, so this
// changes only the time.  ROWSTOCH_ADAPTIVE_THREADS=0 turns it off (Linux only).
struct Contention {
    static constexpr std::int64_t kWindow = 20'000'000;    // ns of parallel regions judged together
    static constexpr std::int64_t kBackoff = 50'000'000;   // ns on one thread before trying the team again
    static constexpr std::int64_t kMaxBackoff = 800'000'000;
    std::atomic<bool> enabled{true};
    std::atomic<std::int64_t> serial_until{0};
    std::atomic<std::int64_t> wall{0}, serial{0};          // the current window: team time, one-thread estimate
    std::atomic<std::int64_t> serial_episodes{0}, windows{0};
    std::atomic<std::int64_t> backoff{kBackoff};
    std::atomic<int> strikes{0};                           // bad windows in a row
};

// Whether an on/off environment value says off: 0, false, no or off, in any case, blanks around it allowed (what
// the Python package reads too; "01" is not off, and "false" or "off" are, where the first character alone had
// decided).
inline bool env_says_off(const char* value) {
    if (!value) return false;
    while (*value == ' ' || *value == '\t') ++value;
    std::size_t n = 0;
    char word[8] = {};
    for (; value[n] && value[n] != ' ' && value[n] != '\t'; ++n) {
        if (n == sizeof(word) - 1) return false;
        word[n] = static_cast<char>(value[n] >= 'A' && value[n] <= 'Z' ? value[n] - 'A' + 'a' : value[n]);
    }
    for (const char* rest = value + n; *rest; ++rest)
        if (*rest != ' ' && *rest != '\t') return false;
    for (const char* off : {"0", "false", "no", "off"})
        if (std::strcmp(word, off) == 0) return true;
    return false;
}

inline Contention& contention() {
    static Contention c;
    static const bool init = [] {
        if (env_says_off(std::getenv("ROWSTOCH_ADAPTIVE_THREADS"))) c.enabled = false;
        return true;
    }();
    (void)init;
    return c;
}

inline bool contention_supported() {
#if defined(__linux__) && defined(_OPENMP)
    return true;
#else
    return false;
#endif
}

inline std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread (ns; 0 where unknown).
inline std::int64_t thread_cpu_ns() {
#if defined(__linux__)
    timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
#endif
    return 0;
}

// The threads a region gets: `threads`, or 1 while backing off from contention.
inline int contended_threads(int threads) {
    Contention& c = contention();
    if (threads > 1 && c.enabled.load(std::memory_order_relaxed) &&
        now_ns() < c.serial_until.load(std::memory_order_relaxed))
        return 1;
    return threads;
}

inline void record_region(std::int64_t wall, std::int64_t cpu_sum) {
    Contention& c = contention();
    const std::int64_t w = c.wall += wall;
    const std::int64_t one = c.serial += cpu_sum;
    if (w < Contention::kWindow) return;
    c.wall = 0;
    c.serial = 0;
    if (c.windows++ == 0) return;  // the first window pays for starting the threads (ms in a VM): not judged
    if (w <= one) {  // the team beat one thread
        c.strikes = 0;
        c.backoff = Contention::kBackoff;
    } else if (++c.strikes >= 2) {
        const std::int64_t b = c.backoff.load();
        c.serial_until = now_ns() + b;
        c.backoff = std::min(2 * b, Contention::kMaxBackoff);
        c.strikes = 1;  // a bad probe window after the back-off goes straight back (for twice as long)
        ++c.serial_episodes;
    }
}

// Run body(t, T) on T = `threads` threads.  An exception thrown by any thread
// (std::bad_alloc from a per-thread buffer, say) is carried out of the region
// and rethrown on the calling thread once every thread has finished: no C++
// exception ever crosses an OpenMP region boundary (that would abort).
template <class Body>
inline void parallel_region(int threads, Body body) {
#ifdef _OPENMP
    threads = contended_threads(threads);
    if (threads <= 1) {
        body(0, 1);
        return;
    }
    const bool watch = contention_supported() && contention().enabled.load(std::memory_order_relaxed);
    const std::int64_t t0 = watch ? now_ns() : 0;
    std::exception_ptr error;
    std::atomic<std::int64_t> cpu_sum{0};
#pragma omp parallel num_threads(threads)
    {
        const std::int64_t cpu0 = watch ? thread_cpu_ns() : 0;
        try {
            body(omp_get_thread_num(), omp_get_num_threads());
        } catch (...) {
#pragma omp critical(rowstoch_parallel_error)
            if (!error) error = std::current_exception();
        }
        if (watch) cpu_sum += thread_cpu_ns() - cpu0;
    }
    if (watch) record_region(now_ns() - t0, cpu_sum.load());
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
