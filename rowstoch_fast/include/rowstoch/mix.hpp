// Sparse row-stochastic mixing: the A-protocol  z <- A z  of the paper (eq. 2)
// and its R-fold repetition  z <- A^R z  (the multi-gossip phase of eq. 12).
//
// A is n x n in CSR form (Ap: n+1 row pointers, Aj: column indices, Ax: values);
// X and Y are dense row-major n x w blocks.  Row i of the result only gathers
// the rows of X named by row i of A, so the row loop is embarrassingly parallel
// and the inner loop runs contiguously over the w columns.
//
// Callers have checked every size and index (see csrc/glue.hpp); nothing here
// throws.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>

#include "parallel.hpp"

namespace rowstoch {

// Which row of X each stored entry p of row i reads: `rows.row(i)` gives row i's reader, `reader(p)` the row.
// The plain mix reads Aj[p] (ColumnRows); a delayed round reads the history row of the newest message that has
// arrived (network.hpp's DelayedRows: the ages drawn in the pass).
template <class I>
struct ColumnRows {
    const I* Aj;
    const ColumnRows& row(std::int64_t) const { return *this; }
    std::int64_t operator()(I p) const { return static_cast<std::int64_t>(Aj[p]); }
};

// y_i[c0:c0+K] <- sum_p Ax[p] X[read(p), c0:c0+K], with the K accumulators in
// registers (K is a compile-time width, so the loop over k fully unrolls).
template <int K, class I, class T, class Reader>
inline void csr_row_chunk(const I Ap[], const Reader& read, const T Ax[], const T* __restrict X,
                          std::int64_t w, std::int64_t i, std::int64_t c0, T* __restrict Y) {
    T acc[K];
    for (int k = 0; k < K; ++k) acc[k] = T(0);
    const I end = Ap[i + 1];
    for (I p = Ap[i]; p < end; ++p) {
        const T a = Ax[p];
        const T* __restrict xj = X + read(p) * w + c0;
        for (int k = 0; k < K; ++k) acc[k] += a * xj[k];
    }
    T* __restrict yi = Y + i * w + c0;
    for (int k = 0; k < K; ++k) yi[k] = acc[k];
}

// Widest register chunk; wider rows are done in chunks of this many columns.
constexpr int kChunk = 16;

template <int K, class I, class T, class Rows>
inline void csr_rows_fixed(const I Ap[], const Rows& rows, const T Ax[], const T* X, std::int64_t lo,
                           std::int64_t hi, T* Y) {
    for (std::int64_t i = lo; i < hi; ++i) csr_row_chunk<K>(Ap, rows.row(i), Ax, X, K, i, 0, Y);
}

// Width 1: two rows at a time, so two independent add chains are in flight (1.25x measured
// at n = 2^18; at wider rows the pairing was slower and is not used). Each row still sums
// its nonzeros in CSR order.
template <class I, class T, class Rows>
inline void csr_rows_pairs_w1(const I Ap[], const Rows& rows, const T Ax[], const T* __restrict X, std::int64_t lo,
                              std::int64_t hi, T* __restrict Y) {
    std::int64_t i = lo;
    for (; i + 1 < hi; i += 2) {
        const auto& read0 = rows.row(i);
        const auto& read1 = rows.row(i + 1);
        T a0 = 0, a1 = 0;
        I p0 = Ap[i], p1 = Ap[i + 1];
        const I e0 = Ap[i + 1], e1 = Ap[i + 2];
        for (; p0 < e0 && p1 < e1; ++p0, ++p1) {
            a0 += Ax[p0] * X[read0(p0)];
            a1 += Ax[p1] * X[read1(p1)];
        }
        for (; p0 < e0; ++p0) a0 += Ax[p0] * X[read0(p0)];
        for (; p1 < e1; ++p1) a1 += Ax[p1] * X[read1(p1)];
        Y[i] = a0;
        Y[i + 1] = a1;
    }
    if (i < hi) csr_row_chunk<1>(Ap, rows.row(i), Ax, X, 1, i, 0, Y);
}

template <class I, class T, class Reader>
inline void csr_row_tail(const I Ap[], const Reader& read, const T Ax[], const T* X, std::int64_t w,
                         std::int64_t i, std::int64_t c0, int r, T* Y) {
    switch (r) {
#define ROWSTOCH_TAIL(K) \
    case K: csr_row_chunk<K>(Ap, read, Ax, X, w, i, c0, Y); break;
        ROWSTOCH_TAIL(1) ROWSTOCH_TAIL(2) ROWSTOCH_TAIL(3) ROWSTOCH_TAIL(4) ROWSTOCH_TAIL(5)
        ROWSTOCH_TAIL(6) ROWSTOCH_TAIL(7) ROWSTOCH_TAIL(8) ROWSTOCH_TAIL(9) ROWSTOCH_TAIL(10)
        ROWSTOCH_TAIL(11) ROWSTOCH_TAIL(12) ROWSTOCH_TAIL(13) ROWSTOCH_TAIL(14) ROWSTOCH_TAIL(15)
#undef ROWSTOCH_TAIL
        default: break;
    }
}

// Y[lo:hi, :] <- (A X)[lo:hi, :]        (rows lo..hi-1 only; Y written, X read; entry p of row i reads the
// row rows.row(i)(p) of X: Aj[p] for the plain mix)
// Widths up to 16 dispatch once to a fully unrolled row loop; wider rows go
// in 16-column chunks plus one tail chunk.  Every path sums the nonzeros of a
// row in CSR order, column by column, so a column's result does not depend on
// the width it was computed in (batched repetitions are bit-identical).
template <class I, class T, class Rows>
inline void csr_mix_rows_by(const I Ap[], const Rows& rows, const T Ax[], const T* __restrict X,
                            std::int64_t w, std::int64_t lo, std::int64_t hi, T* __restrict Y) {
    switch (w) {
#define ROWSTOCH_FIXED(K) \
    case K: csr_rows_fixed<K>(Ap, rows, Ax, X, lo, hi, Y); return;
        case 1: csr_rows_pairs_w1(Ap, rows, Ax, X, lo, hi, Y); return;
        ROWSTOCH_FIXED(2) ROWSTOCH_FIXED(3) ROWSTOCH_FIXED(4) ROWSTOCH_FIXED(5)
        ROWSTOCH_FIXED(6) ROWSTOCH_FIXED(7) ROWSTOCH_FIXED(8) ROWSTOCH_FIXED(9) ROWSTOCH_FIXED(10)
        ROWSTOCH_FIXED(11) ROWSTOCH_FIXED(12) ROWSTOCH_FIXED(13) ROWSTOCH_FIXED(14) ROWSTOCH_FIXED(15)
        ROWSTOCH_FIXED(16)
#undef ROWSTOCH_FIXED
        default: break;
    }
    const std::int64_t full = w - w % kChunk;
    const int tail = static_cast<int>(w % kChunk);
    for (std::int64_t i = lo; i < hi; ++i) {
        const auto& read = rows.row(i);
        for (std::int64_t c0 = 0; c0 < full; c0 += kChunk)
            csr_row_chunk<kChunk>(Ap, read, Ax, X, w, i, c0, Y);
        if (tail) csr_row_tail(Ap, read, Ax, X, w, i, full, tail, Y);
    }
}

template <class I, class T>
inline void csr_mix_rows(const I Ap[], const I Aj[], const T Ax[], const T* __restrict X,
                         std::int64_t w, std::int64_t lo, std::int64_t hi, T* __restrict Y) {
    csr_mix_rows_by(Ap, ColumnRows<I>{Aj}, Ax, X, w, lo, hi, Y);
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
// `stop` (optional) is asked before each step after the first; true abandons the product (Y is then
// undefined): how the bindings let Ctrl-C through a long power.
template <class I, class T>
void csr_mix_power(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[],
                   std::int64_t w, std::int64_t R, T Y[], T work[],
                   const std::function<bool()>& stop = nullptr) {
    if (R <= 0) {
        if (n * w > 0) std::memcpy(Y, X, sizeof(T) * static_cast<std::size_t>(n * w));  // (an empty block: no-op,
        // its pointers may be null)
        return;
    }
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    // Step s (1..R) writes Y when R - s is even, so the last step lands in Y.
    const T* src = X;
    for (std::int64_t s = 1; s <= R; ++s) {
        if (s > 1 && stop && stop()) return;
        T* dst = ((R - s) % 2 == 0) ? Y : work;
        for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
            csr_mix_rows(Ap, Aj, Ax, src, w, lo, hi, dst);
        });
        src = dst;
    }
}

}  // namespace rowstoch
