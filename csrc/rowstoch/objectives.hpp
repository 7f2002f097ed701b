// Per-node stochastic gradients of the paper's synthetic problem (Appendix E.2):
//
//   f_i(x) = (1/M) sum_l ln(1 + exp(-y_il h_il^T x)) + rho sum_j x_j^2 / (1 + x_j^2)
//   grad   = -(1/B) sum_b y_b h_b / (1 + exp(y_b h_b^T x)) + rho 2 x / (1 + x^2)^2
//
// Node i owns rows [i M, (i+1) M) of H (rows of d features) and Y (+-1).  Each
// call computes every node's gradient (rows of X) in one threaded loop.  The
// mini-batch of node i is drawn without replacement from its M samples by a
// counter-based generator keyed on (seed, repetition, node, iteration, batch),
// so results do not depend on the thread count or on the order of the nodes.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "parallel.hpp"

namespace rowstoch {

// SplitMix64 finaliser: a bijective 64-bit mix.
inline std::uint64_t mix64(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// A small counter-based stream: state = key, next() = mix64(key + k * golden).
struct Stream {
    std::uint64_t key, counter = 0;
    explicit Stream(std::uint64_t k) : key(k) {}
    std::uint64_t next() { return mix64(key + 0x9E3779B97F4A7C15ULL * (++counter)); }
    // Uniform integer in [0, bound) (Lemire's multiply-shift with rejection: unbiased).
    std::uint64_t below(std::uint64_t bound) {
        for (;;) {
            const std::uint64_t x = next();
            const unsigned __int128 m = static_cast<unsigned __int128>(x) * bound;
            const std::uint64_t lo = static_cast<std::uint64_t>(m);
            if (lo >= bound || lo >= (-bound) % bound) return static_cast<std::uint64_t>(m >> 64);
        }
    }
};

inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t rep, std::uint64_t node,
                                std::uint64_t iteration, std::uint64_t batch) {
    std::uint64_t k = mix64(seed);
    k = mix64(k ^ rep);
    k = mix64(k ^ node);
    k = mix64(k ^ iteration);
    return mix64(k ^ batch);
}

// h^T x with two partial sums (even / odd j): a fixed order, half the latency chain.
template <class T>
inline T dot2(const T* h, const T* x, std::int64_t d) {
    T a = 0, b = 0;
    std::int64_t j = 0;
    for (; j + 1 < d; j += 2) {
        a += h[j] * x[j];
        b += h[j + 1] * x[j + 1];
    }
    if (j < d) a += h[j] * x[j];
    return a + b;
}

// out[:] += weight * (logistic-loss gradient at x over the samples idx[0..count)).
// Three passes over chunks of samples (margins, coefficients, accumulation), so
// the exp/divide of one sample does not wait on the dot product of the last.
template <class T>
inline void logistic_accumulate(const T* H, const T* Y, std::int64_t d, const T* x, const std::int64_t* idx,
                                std::int64_t count, T weight, T* out) {
    constexpr std::int64_t kBlock = 64;
    T coef[kBlock];
    for (std::int64_t b0 = 0; b0 < count; b0 += kBlock) {
        const std::int64_t nb = count - b0 < kBlock ? count - b0 : kBlock;
        for (std::int64_t b = 0; b < nb; ++b) coef[b] = Y[idx[b0 + b]] * dot2(H + idx[b0 + b] * d, x, d);
        for (std::int64_t b = 0; b < nb; ++b) {
            const T yb = Y[idx[b0 + b]];
            coef[b] = -yb / (T(1) + std::exp(coef[b])) * weight;  // coef held y h^T x
        }
        for (std::int64_t b = 0; b < nb; ++b) {
            const T* h = H + idx[b0 + b] * d;
            const T c = coef[b];
            for (std::int64_t j = 0; j < d; ++j) out[j] += c * h[j];
        }
    }
}

// out[j] += rho * 2 x_j / (1 + x_j^2)^2
template <class T>
inline void regulariser_grad(std::int64_t d, T rho, const T* x, T* out) {
    for (std::int64_t j = 0; j < d; ++j) {
        const T q = T(1) + x[j] * x[j];
        out[j] += rho * T(2) * x[j] / (q * q);
    }
}

// Stochastic gradients: X and G are (reps, m, d) for m nodes; each node averages
// `batches` independent mini-batches of B samples drawn without replacement
// (eq. 14b).  Row block r of X is repetition rep_offset + r; row i of a block is
// global node node_ids[i] (or i when node_ids is null), whose data is H[node M ..].
template <class T>
void logistic_stochastic_grad(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids,
                              std::int64_t M, std::int64_t d, T rho, const T X[], std::int64_t reps,
                              std::int64_t B, std::int64_t batches, std::uint64_t seed,
                              std::uint64_t iteration, std::int64_t rep_offset, T G[]) {
    const std::int64_t rows = reps * m;
    const int threads = threads_for(rows * B * batches * d);
    for_range(rows, threads, [&](std::int64_t lo, std::int64_t hi) {
        std::vector<std::int64_t> perm(static_cast<std::size_t>(M));  // identity between uses
        for (std::int64_t l = 0; l < M; ++l) perm[l] = l;
        std::vector<std::int64_t> swaps(static_cast<std::size_t>(B));
        for (std::int64_t row = lo; row < hi; ++row) {
            const std::int64_t rep = row / m;
            const std::int64_t node = node_ids ? node_ids[row % m] : row % m;
            const T* x = X + row * d;
            T* g = G + row * d;
            for (std::int64_t j = 0; j < d; ++j) g[j] = 0;
            const T* Hi = H + node * M * d;
            const T* Yi = Y + node * M;
            for (std::int64_t r = 0; r < batches; ++r) {
                Stream s(stream_key(seed, rep + rep_offset, node, iteration, r));
                // partial Fisher-Yates: perm[0..B) becomes a uniform B-subset; undone afterwards
                for (std::int64_t b = 0; b < B; ++b) {
                    const std::int64_t k = b + static_cast<std::int64_t>(s.below(M - b));
                    swaps[b] = k;
                    std::swap(perm[b], perm[k]);
                }
                logistic_accumulate(Hi, Yi, d, x, perm.data(), B, T(1) / T(B * batches), g);
                for (std::int64_t b = B - 1; b >= 0; --b) std::swap(perm[b], perm[swaps[b]]);
            }
            regulariser_grad(d, rho, x, g);
        }
    });
}

// Exact local gradients grad f_i(x_i) over all M samples of node i (rows of X and G: reps * m).
template <class T>
void logistic_full_grad(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids, std::int64_t M,
                        std::int64_t d, T rho, const T X[], std::int64_t reps, T G[]) {
    const std::int64_t rows = reps * m;
    for_range(rows, threads_for(rows * M * d), [&](std::int64_t lo, std::int64_t hi) {
        std::vector<std::int64_t> all(static_cast<std::size_t>(M));
        for (std::int64_t l = 0; l < M; ++l) all[l] = l;
        for (std::int64_t row = lo; row < hi; ++row) {
            const std::int64_t node = node_ids ? node_ids[row % m] : row % m;
            T* g = G + row * d;
            for (std::int64_t j = 0; j < d; ++j) g[j] = 0;
            logistic_accumulate(H + node * M * d, Y + node * M, d, X + row * d, all.data(), M, T(1) / T(M), g);
            regulariser_grad(d, rho, X + row * d, g);
        }
    });
}

// f_i(x_i) for every row (loss over all M local samples plus the regulariser).
template <class T>
void logistic_loss(const T H[], const T Y[], std::int64_t m, const std::int64_t* node_ids, std::int64_t M,
                   std::int64_t d, T rho, const T X[], std::int64_t reps, T out[]) {
    const std::int64_t rows = reps * m;
    for_range(rows, threads_for(rows * M * d), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t row = lo; row < hi; ++row) {
            const std::int64_t node = node_ids ? node_ids[row % m] : row % m;
            const T* x = X + row * d;
            const T* Hi = H + node * M * d;
            T acc = 0;
            for (std::int64_t l = 0; l < M; ++l) {
                T z = 0;
                for (std::int64_t j = 0; j < d; ++j) z += Hi[l * d + j] * x[j];
                const T m = -Y[node * M + l] * z;  // ln(1 + e^m), computed without overflow
                acc += m > 0 ? m + std::log1p(std::exp(-m)) : std::log1p(std::exp(m));
            }
            T reg = 0;
            for (std::int64_t j = 0; j < d; ++j) reg += x[j] * x[j] / (T(1) + x[j] * x[j]);
            out[row] = acc / T(M) + rho * reg;
        }
    });
}

}  // namespace rowstoch
