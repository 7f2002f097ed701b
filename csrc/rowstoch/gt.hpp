// The fused (MG-)Pull-Diag-GT communication step, eq. (8) and (14) of the paper:
//
//   x <- A^R (x - lr y)
//   y <- A^R (y + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t)
//
// with per-row scales s_new = 1/diag(D_{t+1}), s_old = 1/diag(D_t).
//
// x, y, g_new, g_old hold `reps` independent repetitions stacked as
// (reps, n, d) row-major arrays; the repetitions share A and the tracker, so
// all of them share every pass over the CSR structure.
//
// Layout: one streaming pass writes the interleaved buffer
//   B[i, :] = [ x_0i - lr y_0i | ... | x_(reps-1)i - lr y_(reps-1)i |
//               psi_0i         | ... | psi_(reps-1)i ]          (width 2 reps d)
// then R CSR passes gather 2 reps d-wide rows; the last pass scatters its rows
// straight into x and y.  Gathering x, y, g_new, g_old separately for every
// nonzero was 2-4x slower in a prototype.
#pragma once

#include <cstdint>

#include "mix.hpp"
#include "parallel.hpp"

namespace rowstoch {

// B <- [x - lr y | y + s_new g_new - s_old g_old]   (rows interleaved as above)
template <class T>
void gt_prepare(std::int64_t n, std::int64_t reps, std::int64_t d, T lr, const T* __restrict x,
                const T* __restrict y, const T* __restrict g_new, const T* __restrict g_old,
                const T* __restrict s_new, const T* __restrict s_old, T* __restrict B) {
    const std::int64_t w = 2 * reps * d;
    for_range(n, threads_for(n * w), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            const T sn = s_new[i], so = s_old[i];
            T* __restrict bi = B + i * w;
            for (std::int64_t r = 0; r < reps; ++r) {
                const std::int64_t off = (r * n + i) * d;
                T* __restrict bx = bi + r * d;
                T* __restrict by = bi + (reps + r) * d;
#pragma omp simd
                for (std::int64_t c = 0; c < d; ++c) {
                    bx[c] = x[off + c] - lr * y[off + c];
                    by[c] = y[off + c] + sn * g_new[off + c] - so * g_old[off + c];
                }
            }
        }
    });
}

// x[r, i, :] <- sum_p Ax[p] B[Aj[p], r-th x slot],  y likewise from the psi slots.
template <class I, class T>
void gt_scatter_mix(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, std::int64_t reps,
                    std::int64_t d, const T* __restrict B, T* __restrict x, T* __restrict y) {
    const std::int64_t w = 2 * reps * d;
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            for (std::int64_t r = 0; r < reps; ++r) {
                T* __restrict xo = x + (r * n + i) * d;
                T* __restrict yo = y + (r * n + i) * d;
                for (std::int64_t c = 0; c < d; ++c) xo[c] = 0;
                for (std::int64_t c = 0; c < d; ++c) yo[c] = 0;
            }
            for (I p = Ap[i]; p < Ap[i + 1]; ++p) {
                const T a = Ax[p];
                const T* __restrict bj = B + static_cast<std::int64_t>(Aj[p]) * w;
                for (std::int64_t r = 0; r < reps; ++r) {
                    T* __restrict xo = x + (r * n + i) * d;
                    T* __restrict yo = y + (r * n + i) * d;
                    const T* __restrict bx = bj + r * d;
                    const T* __restrict by = bj + (reps + r) * d;
#pragma omp simd
                    for (std::int64_t c = 0; c < d; ++c) xo[c] += a * bx[c];
#pragma omp simd
                    for (std::int64_t c = 0; c < d; ++c) yo[c] += a * by[c];
                }
            }
        }
    });
}

// One fused step.  work1 (n x 2 reps d) is always used; work2 (same size) only
// when R > 1.  Neither may alias x, y, g_new or g_old.
template <class I, class T>
void gt_step(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, std::int64_t R, T lr,
             std::int64_t reps, std::int64_t d, T x[], T y[], const T g_new[], const T g_old[],
             const T s_new[], const T s_old[], T work1[], T work2[]) {
    const std::int64_t w = 2 * reps * d;
    gt_prepare(n, reps, d, lr, x, y, g_new, g_old, s_new, s_old, work1);
    // R - 1 plain passes, ping-ponging work1 <-> work2, then the scattering pass.
    T* src = work1;
    T* dst = work2;
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    for (std::int64_t s = 1; s < R; ++s) {
        for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
            csr_mix_rows(Ap, Aj, Ax, src, w, lo, hi, dst);
        });
        T* t = src;
        src = dst;
        dst = t;
    }
    gt_scatter_mix(Ap, Aj, Ax, n, reps, d, src, x, y);
}

}  // namespace rowstoch
