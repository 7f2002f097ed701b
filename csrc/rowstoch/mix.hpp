// Sparse row-stochastic mixing: the A-protocol  z <- A z  of the paper (eq. 1)
// and its R-fold repetition  z <- A^R z  (the multi-gossip phase of eq. 14).
//
// A is n x n in CSR form (Ap: n+1 row pointers, Aj: column indices, Ax: values);
// X and Y are dense row-major n x w blocks.  Row i of the result only gathers
// the rows of X named by row i of A, so the row loop is embarrassingly parallel
// and the inner loop runs contiguously over the w columns.
//
// Callers have checked every size and index (see bindings.cpp); nothing here
// throws.
#pragma once

#include <cstdint>
#include <cstring>

#include "parallel.hpp"

namespace rowstoch {

// Y[lo:hi, :] <- (A X)[lo:hi, :]        (rows lo..hi-1 only; Y written, X read)
template <class I, class T>
inline void csr_mix_rows(const I Ap[], const I Aj[], const T Ax[], const T* __restrict X,
                         std::int64_t w, std::int64_t lo, std::int64_t hi, T* __restrict Y) {
    if (w == 1) {
        for (std::int64_t i = lo; i < hi; ++i) {
            T acc = 0;
            for (I p = Ap[i]; p < Ap[i + 1]; ++p) acc += Ax[p] * X[Aj[p]];
            Y[i] = acc;
        }
        return;
    }
    for (std::int64_t i = lo; i < hi; ++i) {
        T* __restrict yi = Y + i * w;
        for (std::int64_t c = 0; c < w; ++c) yi[c] = 0;
        for (I p = Ap[i]; p < Ap[i + 1]; ++p) {
            const T a = Ax[p];
            const T* __restrict xj = X + static_cast<std::int64_t>(Aj[p]) * w;
#pragma omp simd
            for (std::int64_t c = 0; c < w; ++c) yi[c] += a * xj[c];
        }
    }
}

// Y <- A X   for CSR A (n x n) and dense X, Y (n x w).  Y must not alias X.
template <class I, class T>
void csr_mix(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[],
             std::int64_t w, T Y[]) {
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
        csr_mix_rows(Ap, Aj, Ax, X, w, lo, hi, Y);
    });
}

// Y <- A^R X  with two ping-pong buffers (Y and work, both n x w), no
// allocation per step.  R = 0 copies X.  Neither Y nor work may alias X.
template <class I, class T>
void csr_mix_power(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[],
                   std::int64_t w, std::int64_t R, T Y[], T work[]) {
    if (R <= 0) {
        std::memcpy(Y, X, sizeof(T) * static_cast<std::size_t>(n * w));
        return;
    }
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    // Step s (1..R) writes Y when R - s is even, so the last step lands in Y.
    const T* src = X;
    for (std::int64_t s = 1; s <= R; ++s) {
        T* dst = ((R - s) % 2 == 0) ? Y : work;
        for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
            csr_mix_rows(Ap, Aj, Ax, src, w, lo, hi, dst);
        });
        src = dst;
    }
}

}  // namespace rowstoch
