// The Pull-Diag diagonal tracker, eq. (5) and Appendix B of the paper:
//
//   V_0 = I,   V_{k+1} = A V_k,   D_k = Diag(V_k) = Diag(A^k).
//
// Only the diagonal is kept.  V is advanced in column blocks J (n x |J| at a
// time), since column j of V_k only ever contributes [V_k]_jj: memory is
// O(n * block) rather than n^2, and the row-parallel mixing kernel does the
// work.  A block whose V stops changing bit for bit has reached the
// floating-point fixed point, so all later diagonals equal the current ones
// and the block stops early.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "mix.hpp"

namespace rowstoch {

// diags[m, j] <- [A^(m * stride)]_jj   for m = 0 .. n_rec-1 (diags is n_rec x n).
// Steps k = 1 .. (n_rec-1)*stride are taken unless a block reaches its fixed
// point first.  Returns the largest step any block had to take.
template <class I, class T>
std::int64_t csr_diag_powers(const I Ap[], const I Aj[], const T Ax[], std::int64_t n,
                             std::int64_t stride, std::int64_t n_rec, std::int64_t block,
                             T diags[], const std::function<bool()>& stop = nullptr) {
    const std::int64_t kmax = (n_rec - 1) * stride;
    std::int64_t taken_max = 0;
    std::vector<T> W0, W1;
    for (std::int64_t j0 = 0; j0 < n; j0 += block) {
        const std::int64_t b = std::min(block, n - j0);
        W0.assign(static_cast<std::size_t>(n * b), T(0));
        W1.assign(static_cast<std::size_t>(n * b), T(0));
        for (std::int64_t c = 0; c < b; ++c) W0[(j0 + c) * b + c] = T(1);  // V_0 = I[:, J]
        for (std::int64_t c = 0; c < b; ++c) diags[j0 + c] = T(1);
        T* cur = W0.data();
        T* nxt = W1.data();
        std::int64_t k = 0;
        bool fixed = false;
        while (k < kmax && !fixed) {
            if (stop && stop()) return -1;        // the caller was interrupted (Ctrl-C): nothing to keep
            csr_mix(Ap, Aj, Ax, n, cur, b, nxt);  // V_{k+1}[:, J] = A V_k[:, J]
            ++k;
            fixed = std::memcmp(cur, nxt, sizeof(T) * static_cast<std::size_t>(n * b)) == 0;
            std::swap(cur, nxt);
            if (k % stride == 0) {
                T* row = diags + (k / stride) * n + j0;
                for (std::int64_t c = 0; c < b; ++c) row[c] = cur[(j0 + c) * b + c];
            }
        }
        // Fixed point: every later record equals the current diagonal.
        for (std::int64_t m = k / stride + 1; m < n_rec; ++m) {
            T* row = diags + m * n + j0;
            for (std::int64_t c = 0; c < b; ++c) row[c] = cur[(j0 + c) * b + c];
        }
        taken_max = std::max(taken_max, k);
    }
    return taken_max;
}

}  // namespace rowstoch
