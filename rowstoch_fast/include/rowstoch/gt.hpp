// The (MG-)Pull-Diag-GT step, eq. (7) and (12) of the paper:
//
//   x_{t+1} = A^R (x_t - lr y_t)                                   (x phase)
//   g_{t+1} = grad F(x_{t+1})                                      (caller)
//   y_{t+1} = A^R (y_t + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t)      (y phase)
//
// Every block here is n x w, row-major and node-major: row i holds node i's
// values for all `reps` independent repetitions side by side (w = reps * d),
// so the repetitions share every pass over the CSR structure.
//
// Why the x and y phases are not one CSR pass: g_{t+1} is the gradient at
// x_{t+1}, which only exists after the x phase, and the x phase of the next
// iteration reads y_{t+1}, which only exists after the y phase.  What is fused
// instead is all the element-wise work around the passes:
//   * the y phase's first pass reads psi = y + s_new g_new - s_old g_old built
//     by one streaming pass (gathering y, g_new and g_old separately for every
//     nonzero was 2-4x slower in a prototype);
//   * its last pass writes y_{t+1} and, in the same row loop, the next x
//     phase's input w = x_{t+1} - lr y_{t+1}, and reports any NaN/Inf;
//   * the x phase is then a plain A^R w.
// No step allocates: the caller owns every buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>

#include "mix.hpp"
#include "parallel.hpp"

namespace rowstoch {

// psi <- y + diag(s_new) g_new - diag(s_old) g_old     (s scales whole rows)
template <class T>
void gt_tracker_input(std::int64_t n, std::int64_t w, const T* __restrict y, const T* __restrict g_new,
                      const T* __restrict g_old, const T* __restrict s_new, const T* __restrict s_old,
                      T* __restrict psi) {
    for_range(n, threads_for(n * w), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            const T sn = s_new[i], so = s_old[i];
            const std::int64_t off = i * w;
#ifdef _OPENMP  // (without OpenMP the pragma is unknown: a warning under -Wall, an error under -Werror)
#pragma omp simd
#endif
            for (std::int64_t c = 0; c < w; ++c)
                psi[off + c] = y[off + c] + sn * g_new[off + c] - so * g_old[off + c];
        }
    });
}

// flag <- 1 from any thread (a plain store would be a data race under OpenMP).
inline void raise_flag(int& flag) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
    flag = 1;
}

// xw[lo:hi] <- x[lo:hi] - lr y[lo:hi] (rows of width w); true if any entry is NaN or Inf.
template <class T>
inline bool descent_rows(std::int64_t w, T lr, const T* __restrict x, const T* __restrict y, T* __restrict xw,
                         std::int64_t lo, std::int64_t hi) {
    int bad = 0;
    for (std::int64_t i = lo * w; i < hi * w; ++i) {
        const T v = x[i] - lr * y[i];
        xw[i] = v;
        bad |= !std::isfinite(v);
    }
    return bad != 0;
}

// y <- A^R psi, then xw <- x - lr y in the last pass's row loop.
// psi and work are ping-pong buffers (psi is clobbered when R > 1).
// Returns false if any entry of xw is NaN or Inf (i.e. x or y is not finite).
// `stop` (optional) is asked before each pass after the first, as csr_mix_power's: true abandons the phase (y and
// xw are then undefined, the return value true).
template <class I, class T>
bool gt_tracker_mix(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, std::int64_t w,
                    std::int64_t R, T lr, T psi[], T work[], const T x[], T y[], T xw[],
                    const std::function<bool()>& stop = nullptr) {
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    T* src = psi;
    T* dst = work;
    for (std::int64_t s = 1; s < R; ++s) {  // R - 1 plain passes
        if (s > 1 && stop && stop()) return true;
        for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
            csr_mix_rows(Ap, Aj, Ax, src, w, lo, hi, dst);
        });
        T* t = src;
        src = dst;
        dst = t;
    }
    if (R > 1 && stop && stop()) return true;
    int bad = 0;
    for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
        csr_mix_rows(Ap, Aj, Ax, src, w, lo, hi, y);
        if (descent_rows(w, lr, x, y, xw, lo, hi)) raise_flag(bad);
    });
    return bad == 0;
}

// Elements [b, e) of out <- sum_t c_t X_t with constant coefficients; true if one of them is NaN or Inf.
// v - v is 0 for finite v and NaN otherwise, and the flag is a T chosen by a select: a loop GCC and Clang
// vectorise (an int flag ORed with a double comparison, or std::isfinite, keeps it scalar).
template <class T>
inline bool combine_span(int K, const T* const X[], const T c[], T out[], std::int64_t b, std::int64_t e) {
    // locals: with the pointers and coefficients read through X[] and c[] in the loop, a store to out
    // could change them, and the loop would not vectorise
    const T* x0 = X[0];
    const T* x1 = K > 1 ? X[1] : nullptr;
    const T* x2 = K > 2 ? X[2] : nullptr;
    const T* x3 = K > 3 ? X[3] : nullptr;
    const T c0 = c[0], c1 = K > 1 ? c[1] : T(0), c2 = K > 2 ? c[2] : T(0), c3 = K > 3 ? c[3] : T(0);
    T flag = 0;
    switch (K) {
        case 1:
            for (std::int64_t j = b; j < e; ++j) {
                const T v = c0 * x0[j];
                out[j] = v;
                flag = (v - v == T(0)) ? flag : T(1);
            }
            break;
        case 2:
            for (std::int64_t j = b; j < e; ++j) {
                const T v = c0 * x0[j] + c1 * x1[j];
                out[j] = v;
                flag = (v - v == T(0)) ? flag : T(1);
            }
            break;
        case 3:
            for (std::int64_t j = b; j < e; ++j) {
                const T v = c0 * x0[j] + c1 * x1[j] + c2 * x2[j];
                out[j] = v;
                flag = (v - v == T(0)) ? flag : T(1);
            }
            break;
        default:
            for (std::int64_t j = b; j < e; ++j) {
                const T v = c0 * x0[j] + c1 * x1[j] + c2 * x2[j] + c3 * x3[j];
                out[j] = v;
                flag = (v - v == T(0)) ? flag : T(1);
            }
    }
    return flag != T(0);
}

// out <- sum_t c_t X_t for K <= 4 terms of n x w blocks, where c_t scales whole rows (row_coef[t][i]) or
// is the scalar coef[t] (row_coef[t] == nullptr).  A term may be `out` itself (read before written,
// element by element; no __restrict here).  Summed left to right, c_0 X_0 + c_1 X_1 + ..., the order a
// NumPy transcription writes.  Returns false if any entry of out is NaN or Inf.  The element-wise update
// of every algorithm in rowstoch_fast.algorithms is one or two of these.
template <class T>
bool combine(std::int64_t n, std::int64_t w, int K, const T* const X[], const T* const row_coef[],
             const T coef[], T out[]) {
    int bad = 0;
    bool scalar = true;
    for (int t = 0; t < K; ++t) scalar = scalar && row_coef[t] == nullptr;
    if (scalar) {  // one long stream, whatever the row width
        for_range(n * w, threads_for(n * w * K), [&](std::int64_t lo, std::int64_t hi) {
            if (combine_span(K, X, coef, out, lo, hi)) raise_flag(bad);
        });
        return bad == 0;
    }
    for_range(n, threads_for(n * w * K), [&](std::int64_t lo, std::int64_t hi) {
        int my_bad = 0;
        T c[4] = {};  // (c[K..3] unused; zeroed so that GCC sees no read of an uninitialised value)
        for (std::int64_t i = lo; i < hi; ++i) {
            for (int t = 0; t < K; ++t) c[t] = row_coef[t] ? row_coef[t][i] : coef[t];
            my_bad |= combine_span(K, X, c, out, i * w, (i + 1) * w);
        }
        if (my_bad) raise_flag(bad);
    });
    return bad == 0;
}

// out <- sum_t C_t * X_t (element-wise) for K <= 4 terms of n x w blocks, where C_t[i, j] =
// coef[t][i * row_stride[t] + j * col_stride[t]]: strides (0, 0) a scalar, (1, 0) one value per row,
// (0, 1) one value per column (per replica: a replica's d columns share its step size), (w, 1) a whole
// n x w block of coefficients.  Summed left to right as combine() sums, so a term whose coefficient is
// the same number gives the same bits either way; a term may be `out` itself.  Returns false if any entry
// of out is NaN or Inf.  (The general form, for coefficients that differ along a row; combine() is the
// vectorised one for scalars and per-row values.)
template <class T>
bool combine_general(std::int64_t n, std::int64_t w, int K, const T* const X[], const T* const coef[],
                     const std::int64_t row_stride[], const std::int64_t col_stride[], T out[]) {
    int bad = 0;
    for_range(n, threads_for(n * w * K), [&](std::int64_t lo, std::int64_t hi) {
        T flag = 0;
        const T* x[4] = {nullptr, nullptr, nullptr, nullptr};
        const T* c[4] = {nullptr, nullptr, nullptr, nullptr};
        std::int64_t cs[4] = {0, 0, 0, 0};
        for (int t = 0; t < K; ++t) cs[t] = col_stride[t];
        for (std::int64_t i = lo; i < hi; ++i) {
            for (int t = 0; t < K; ++t) {
                x[t] = X[t] + i * w;
                c[t] = coef[t] + i * row_stride[t];
            }
            T* o = out + i * w;
            for (std::int64_t j = 0; j < w; ++j) {
                T v = c[0][j * cs[0]] * x[0][j];
                for (int t = 1; t < K; ++t) v = v + c[t][j * cs[t]] * x[t][j];
                o[j] = v;
                flag = (v - v == T(0)) ? flag : T(1);
            }
        }
        if (flag != T(0)) raise_flag(bad);
    });
    return bad == 0;
}

// Row of the first NaN/Inf in an n x w block, or -1.  One branch-free pass over the whole block, threaded
// and vectorised (v - v is 0 for every finite v, NaN for NaN and +-Inf), as combine() checks its output; the
// row is looked for only where that pass found one (the rare case: a diverging run).
template <class T>
std::int64_t first_nonfinite_row(const T X[], std::int64_t n, std::int64_t w) {
    int bad = 0;
    const std::int64_t len = n * w;
    for_range(len, threads_for(len), [&](std::int64_t lo, std::int64_t hi) {
        T flag = 0;
        for (std::int64_t j = lo; j < hi; ++j) {
            const T v = X[j];
            flag = (v - v == T(0)) ? flag : T(1);
        }
        if (flag != T(0)) raise_flag(bad);
    });
    if (bad == 0) return -1;
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < w; ++c)
            if (!std::isfinite(X[i * w + c])) return i;
    return -1;
}

}  // namespace rowstoch
