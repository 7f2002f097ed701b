// Message compression and message noise (rowstoch_fast.network.Compressed / Noisy): what node i sends in round r of
// iteration t, computed from its row of a block, one message of L values at a time (a row of w = reps * d values is
// w / L messages; L = w for a narrow block). Random choices are drawn from the counter-based hash of network.py,
// uniform_hash(seed, t, r, i, c, tag) with i the node's global id and c the column in its row, so every backend,
// MPI rank and thread count sends the same messages. The NumPy transcription is _reference.compress.
//
//   qsgd   (bits b, s = 2^b - 1 levels): q_c = sign(v_c) ||v||_2 l_c / s with l_c = floor(s |v_c| / ||v||_2 + u_c)
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
#include <vector>

#include "hash.hpp"
#include "network.hpp"
#include "parallel.hpp"

namespace rowstoch {

enum CompressMethod { kQsgd = 0, kSign = 1, kTopk = 2, kRandk = 3, kRound = 4, kNoise = 5 };

// uniform_hash(seed, t, r, i, c, tag) from the row's prefix mix64(...(seed, t, r) ^ i): the top 53 bits as a double.
inline double message_uniform(std::uint64_t row, std::uint64_t c, std::uint64_t tag) {
    return static_cast<double>(mix64(mix64(row ^ c) ^ tag) >> 11) * 0x1.0p-53;
}

template <class T>
void compress_message(int method, const T* v, T* out, std::int64_t L, std::int64_t first_col, std::uint64_t row,
                      std::int64_t param, double sigma, bool unbiased, std::int64_t* order, double* score) {
    switch (method) {
        case kQsgd: {
            double sq = 0.0;
            for (std::int64_t c = 0; c < L; ++c) sq += static_cast<double>(v[c]) * static_cast<double>(v[c]);
            const double norm = std::sqrt(sq), s = std::ldexp(1.0, static_cast<int>(param)) - 1.0;
            for (std::int64_t c = 0; c < L; ++c) {
                if (norm == 0.0) {
                    out[c] = T(0);
                    continue;
                }
                const double a = std::fabs(static_cast<double>(v[c])) / norm * s;
                const double u = unbiased ? message_uniform(row, static_cast<std::uint64_t>(first_col + c), 1) : 0.5;
                const double level = std::min(std::floor(a + u), s);
                const double q = norm * level / s;
                out[c] = static_cast<T>(v[c] < T(0) ? -q : q);
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
            for (std::int64_t c = 0; c < L; ++c) {
                order[c] = c;
                score[c] = method == kTopk ? -std::fabs(static_cast<double>(v[c]))
                                           : message_uniform(row, static_cast<std::uint64_t>(first_col + c), 2);
            }
            std::partial_sort(order, order + k, order + L, [&](std::int64_t a, std::int64_t b) {
                return score[a] < score[b] || (score[a] == score[b] && a < b);
            });
            const T scale = method == kRandk && unbiased ? static_cast<T>(static_cast<double>(L) / k) : T(1);
            T kept[64];
            std::vector<T> many;
            T* keep = k <= 64 ? kept : (many.resize(static_cast<std::size_t>(k)), many.data());
            for (std::int64_t m = 0; m < k; ++m) keep[m] = v[order[m]];  // (out may be v)
            for (std::int64_t c = 0; c < L; ++c) out[c] = T(0);
            for (std::int64_t m = 0; m < k; ++m) out[order[m]] = scale == T(1) ? keep[m] : keep[m] * scale;
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
            for (std::int64_t c = 0; c < L; ++c) {
                const std::uint64_t col = static_cast<std::uint64_t>(first_col + c);
                const double u1 = 1.0 - message_uniform(row, col, 3), u2 = message_uniform(row, col, 4);
                const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
                out[c] = static_cast<T>(static_cast<double>(v[c]) + sigma * z);
            }
        }
    }
}

// out[i] = the messages of row i of X (n rows of w values, messages of L values; row i is node ids.row(i)).
template <class T>
void compress_rows(const T* X, T* out, std::int64_t n, std::int64_t w, std::int64_t L, NodeIds ids, int method,
                   std::int64_t param, double sigma, bool unbiased, std::uint64_t seed, std::uint64_t t,
                   std::uint64_t r) {
    const std::uint64_t round = hash_prefix(seed, t, r);
    for_range(n, threads_for(n * w * 8), [&](std::int64_t lo, std::int64_t hi) {
        std::vector<std::int64_t> order(static_cast<std::size_t>(L));
        std::vector<double> score(static_cast<std::size_t>(L));
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(ids.row(i)));
            for (std::int64_t c0 = 0; c0 < w; c0 += L)
                compress_message(method, X + i * w + c0, out + i * w + c0, L, c0, row, param, sigma, unbiased,
                                 order.data(), score.data());
        }
    });
}

}  // namespace rowstoch
