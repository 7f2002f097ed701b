// Message compression and message noise (rowstoch_fast.network.Compressed / Noisy): what node i sends in round r of
// iteration t, computed from its row of a block, one message of L values at a time (a row of w = reps * d values is
// w / L messages; L = w for a narrow block). Random choices are drawn from the counter-based hash of network.py,
// uniform_hash(seed, t, r, i, tag, c) with i the node's global id and c the column in its row, so every backend,
// MPI rank and thread count sends the same messages. The NumPy transcription is _reference.compress.
// (The draws' keys end (..., i, tag, c): the row's prefix with the tag is mixed once, then one mix64 per value.)
//
//   qsgd   (bits b, s = 2^b - 1 levels): q_c = sign(v_c) l_c (||v||_2 / s) with l_c = floor(|v_c| (s / ||v||_2) + u_c)
//          (unbiased: u_c uniform, tag 1) or floor(... + 1/2) (biased, nearest level);
//   sign   q_c = sign(v_c) ||v||_1 / L (biased);
//   topk   the k entries of largest |v_c| (ties: the lower column), the others 0 (biased);
//   randk  the k entries of smallest uniform_hash(..., c, 2) (ties: the lower column), times L / k when unbiased;
//   round  each value rounded to the nearest float with b significant bits (ties to even; biased, deterministic);
//   noise  v_c + sigma z_c, z_c standard normal by Box-Muller from the draws of tags 3 and 4.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hash.hpp"
#include "network.hpp"
#include "parallel.hpp"

namespace rowstoch {

enum CompressMethod { kQsgd = 0, kSign = 1, kTopk = 2, kRandk = 3, kRound = 4, kNoise = 5 };

// uniform_hash(seed, t, r, i, tag, c) from the prefix mix64(mix64(...(seed, t, r) ^ i) ^ tag): the top 53 bits as a
// double.
inline double message_uniform(std::uint64_t tagged_row, std::uint64_t c) {
    // (through int64: below 2^53, one conversion instruction; uint64 -> double is a branchy sequence on x86-64)
    return static_cast<double>(static_cast<std::int64_t>(mix64(tagged_row ^ c) >> 11)) * 0x1.0p-53;
}

// The k entries of smallest score(c), c in [0, L) (ties: the lower index), in order[0..k): an insertion into a sorted
// list of k for small k (registers, O(L k)), a partial sort of score[] otherwise.
template <class Score>
inline void smallest_k(Score score_of, double* score, std::int64_t L, std::int64_t k, std::int64_t* order) {
    if (k <= 4) {  // k passes of a branch-free argmin (the first minimum: the lower index), each taken one excluded
        for (std::int64_t c = 0; c < L; ++c) score[c] = score_of(c);
        for (std::int64_t m = 0; m < k; ++m) {
            double low = score[0];
            std::int64_t at = 0;
            for (std::int64_t c = 1; c < L; ++c) {
                const bool less = score[c] < low;
                low = less ? score[c] : low;
                at = less ? c : at;
            }
            order[m] = at;
            score[at] = std::numeric_limits<double>::infinity();
        }
        return;
    }
    if (k <= 16) {  // branch-free: each score bubbles through the sorted k (selects, no mispredicted branches)
        double best[16];
        for (std::int64_t m = 0; m < k; ++m) {
            best[m] = std::numeric_limits<double>::infinity();
            order[m] = L;  // (a score below +inf, or any score while fewer than k were seen, replaces it)
        }
        for (std::int64_t c = 0; c < L; ++c) {
            double x = score_of(c);
            std::int64_t xi = c;
            for (std::int64_t m = 0; m < k; ++m) {
                const bool before = x < best[m] || (order[m] == L);  // (equal: the lower index stays first)
                const double b = best[m];
                const std::int64_t bi = order[m];
                best[m] = before ? x : b;
                order[m] = before ? xi : bi;
                x = before ? b : x;
                xi = before ? bi : xi;
            }
        }
        return;
    }
    for (std::int64_t c = 0; c < L; ++c) {
        order[c] = c;
        score[c] = score_of(c);
    }
    std::partial_sort(order, order + k, order + L, [&](std::int64_t a, std::int64_t b) {
        return score[a] < score[b] || (score[a] == score[b] && a < b);
    });
}

template <class T>
void compress_message(int method, const T* v, T* out, std::int64_t L, std::int64_t first_col, std::uint64_t row,
                      std::int64_t param, double sigma, bool unbiased, std::int64_t* order, double* score) {
    auto tagged = [&](std::uint64_t tag) { return mix64(row ^ tag); };
    switch (method) {
        case kQsgd: {
            double sq = 0.0;
            for (std::int64_t c = 0; c < L; ++c) sq += static_cast<double>(v[c]) * static_cast<double>(v[c]);
            const double norm = std::sqrt(sq), s = static_cast<double>((std::uint64_t(1) << param) - 1);
            const double up = s / norm, down = norm / s;
            const std::uint64_t key = tagged(1);
            for (std::int64_t c = 0; c < L; ++c) {
                if (norm == 0.0) {
                    out[c] = T(0);
                    continue;
                }
                const double a = std::fabs(static_cast<double>(v[c])) * up;
                const double u = unbiased ? message_uniform(key, static_cast<std::uint64_t>(first_col + c)) : 0.5;
                // floor of a non-negative value as an integer conversion (no libm call without SSE4.1)
                const double level = std::min(static_cast<double>(static_cast<std::int64_t>(a + u)), s);
                const double q = level * down;
                out[c] = static_cast<T>(std::copysign(q, static_cast<double>(v[c])));
            }
            return;
        }
        case kSign: {
            double l1 = 0.0;
            for (std::int64_t c = 0; c < L; ++c) l1 += std::fabs(static_cast<double>(v[c]));
            const double scale = l1 / static_cast<double>(L);
            for (std::int64_t c = 0; c < L; ++c)
                out[c] = v[c] > T(0) ? static_cast<T>(scale) : v[c] < T(0) ? static_cast<T>(-scale) : T(0);
            return;
        }
        case kTopk:
        case kRandk: {
            const std::int64_t k = std::min<std::int64_t>(param, L);
            const std::uint64_t key = tagged(2);
            if (method == kTopk)
                smallest_k([&](std::int64_t c) { return -std::fabs(static_cast<double>(v[c])); }, score, L, k, order);
            else
                smallest_k([&](std::int64_t c) { return message_uniform(key, static_cast<std::uint64_t>(first_col + c)); },
                           score, L, k, order);
            const T scale = method == kRandk && unbiased ? static_cast<T>(static_cast<double>(L) / k) : T(1);
            for (std::int64_t m = 0; m < k; ++m) score[m] = static_cast<double>(v[order[m]]);  // (out may be v)
            for (std::int64_t c = 0; c < L; ++c) out[c] = T(0);
            for (std::int64_t m = 0; m < k; ++m) out[order[m]] = static_cast<T>(score[m]) * scale;
            return;
        }
        case kRound: {
            for (std::int64_t c = 0; c < L; ++c) {
                int e;
                const T m = std::frexp(v[c], &e);  // v = m 2^e, |m| in [0.5, 1)
                out[c] = std::isfinite(v[c]) ? std::ldexp(std::nearbyint(std::ldexp(m, static_cast<int>(param))),
                                                          e - static_cast<int>(param))
                                             : v[c];
            }
            return;
        }
        default: {  // kNoise
            const double two_pi = 6.283185307179586;
            const std::uint64_t key1 = tagged(3), key2 = tagged(4);
            for (std::int64_t c = 0; c < L; ++c) {
                const std::uint64_t col = static_cast<std::uint64_t>(first_col + c);
                const double u1 = 1.0 - message_uniform(key1, col), u2 = message_uniform(key2, col);
                const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
                out[c] = static_cast<T>(static_cast<double>(v[c]) + sigma * z);
            }
        }
    }
}

// out[i] = the messages of row i of X (n rows of w values, messages of L values; row i is node ids.row(i)); where
// `own` is given, X's row is copied there in the same pass (the [X; Q] block of a compressed round).
template <class T>
void compress_rows(const T* X, T* out, std::int64_t n, std::int64_t w, std::int64_t L, NodeIds ids, int method,
                   std::int64_t param, double sigma, bool unbiased, std::uint64_t seed, std::uint64_t t,
                   std::uint64_t r, T* own = nullptr) {
    const std::uint64_t round = hash_prefix(seed, t, r);
    for_range(n, threads_for(n * w * 8), [&](std::int64_t lo, std::int64_t hi) {
        std::vector<std::int64_t> order(static_cast<std::size_t>(L));
        std::vector<double> score(static_cast<std::size_t>(L));
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(ids.row(i)));
            if (own)
                for (std::int64_t c = 0; c < w; ++c) own[i * w + c] = X[i * w + c];
            for (std::int64_t c0 = 0; c0 < w; c0 += L)
                compress_message(method, X + i * w + c0, out + i * w + c0, L, c0, row, param, sigma, unbiased,
                                 order.data(), score.data());
        }
    });
}

}  // namespace rowstoch

namespace rowstoch {

// Noise on received values (rowstoch_fast.network.Noisy, per="link"): out[q, c] = z, one standard normal per stored
// entry q (the link j -> i, global ids) and value c of the message it delivers, sent in iteration s = t - ages[q]
// (ages null: s = t): z = sqrt(-2 ln(1 - u)) cos(2 pi u') with u, u' = uniform_hash(seed, s, r, i, j, 3 | 4, c).
// A receiver's copy of a message gets noise of its own; a message used again (delays) keeps its noise. The NumPy
// transcription is _reference.link_noise.
template <class I, class T>
void link_noise(const I Ap[], const I Aj[], std::int64_t rows, NodeIds ids, std::uint64_t seed, std::uint64_t t,
                std::uint64_t r, const std::int32_t* ages, std::int64_t w, T out[]) {
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * w * 8);
    const double two_pi = 6.283185307179586;
    const std::uint64_t now = hash_prefix(seed, t, r);
    for_rows(Ap, rows, threads, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::uint64_t gi = static_cast<std::uint64_t>(ids.row(i));
            for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                const std::uint64_t gj = static_cast<std::uint64_t>(ids.col(static_cast<std::int64_t>(Aj[q])));
                const std::uint64_t sent = ages ? hash_prefix(seed, t - static_cast<std::uint64_t>(ages[q]), r) : now;
                const std::uint64_t link = mix64(mix64(sent ^ gi) ^ gj);
                const std::uint64_t key1 = mix64(link ^ 3), key2 = mix64(link ^ 4);
                for (std::int64_t c = 0; c < w; ++c) {
                    const double u1 = 1.0 - message_uniform(key1, static_cast<std::uint64_t>(c));
                    const double u2 = message_uniform(key2, static_cast<std::uint64_t>(c));
                    out[q * w + c] = static_cast<T>(std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
                }
            }
        }
    });
}

}  // namespace rowstoch
