// Threading helpers shared by the kernels: OpenMP when the build has it,
// serial otherwise, and an nnz-balanced split of CSR rows over threads.
//
// No Python here: the kernels are plain templated C++ (see STYLE.md).
#pragma once

#include <algorithm>
#include <cstdint>

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

inline int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline void set_threads(int t) {
#ifdef _OPENMP
    if (t > 0) omp_set_num_threads(t);
#else
    (void)t;
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
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        const int T = omp_get_num_threads();
        const int t = omp_get_thread_num();
        std::int64_t lo, hi;
        balanced_rows(Ap, n, t, T, lo, hi);
        body(lo, hi);
    }
#else
    body(std::int64_t(0), n);
#endif
}

// Run body(lo, hi) over an even split of [0, n) (streaming, row-independent work).
template <class Body>
inline void for_range(std::int64_t n, int threads, Body body) {
    if (threads <= 1 || n < 2) {
        body(std::int64_t(0), n);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        const std::int64_t T = omp_get_num_threads();
        const std::int64_t t = omp_get_thread_num();
        body(n * t / T, n * (t + 1) / T);
    }
#else
    body(std::int64_t(0), n);
#endif
}

}  // namespace rowstoch
