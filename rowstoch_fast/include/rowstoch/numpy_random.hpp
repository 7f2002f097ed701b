// NumPy's `np.random.default_rng(entropy).random(size)` in C++, bit for bit: SeedSequence (a pool of four 32-bit
// words, numpy/random/bit_generator.pyx) seeds PCG64 (the 128-bit LCG with the XSL-RR output,
// numpy/random/src/pcg64/pcg64.h), whose 64-bit outputs become doubles as Generator.random makes them (the top 53
// bits times 2^-53). The least-squares objective draws its mini-batches from such generators
// (objectives.LeastSquares: the `batch` smallest of a node's uniforms); this makes the same draws without a
// Python generator per replica and step. tests/test_objectives.py checks every output against NumPy's own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "parallel.hpp"

namespace rowstoch {

// SeedSequence(entropy).generate_state(8, uint32) for entropy given as 32-bit words (each integer of the entropy
// little-endian, 0 as one word 0; no spawn key): the four 64-bit words PCG64 is seeded with.
inline void seed_sequence_state(const std::uint32_t* words, int count, std::uint64_t state[4]) {
    std::uint32_t pool[4];
    std::uint32_t hash_const = 0x43b0d7e5u;  // INIT_A
    auto hashmix = [&](std::uint32_t value) {
        value ^= hash_const;
        hash_const *= 0x931e8875u;  // MULT_A
        value *= hash_const;
        return value ^ (value >> 16);
    };
    auto mix = [](std::uint32_t x, std::uint32_t y) {
        const std::uint32_t result = 0xca01f9ddu * x - 0x4973f715u * y;  // MIX_MULT_L, MIX_MULT_R
        return result ^ (result >> 16);
    };
    for (int i = 0; i < 4; ++i) pool[i] = hashmix(i < count ? words[i] : 0u);
    for (int src = 0; src < 4; ++src)
        for (int dst = 0; dst < 4; ++dst)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    for (int src = 4; src < count; ++src)
        for (int dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(words[src]));
    std::uint32_t out[8];
    std::uint32_t b = 0x8b51f9ddu;  // INIT_B
    for (int i = 0; i < 8; ++i) {
        std::uint32_t v = pool[i % 4] ^ b;
        b *= 0x58f38dedu;  // MULT_B
        v *= b;
        out[i] = v ^ (v >> 16);
    }
    for (int k = 0; k < 4; ++k) state[k] = std::uint64_t(out[2 * k]) | (std::uint64_t(out[2 * k + 1]) << 32);
}

// GCC's and Clang's 128-bit integer (`__extension__`: no -Wpedantic warning, so that a -Werror -Wpedantic build
// includes this header, helper 225). objectives.hpp declares the same name.
__extension__ typedef unsigned __int128 u128;

// PCG64 as NumPy seeds and steps it: state and increment from a SeedSequence's four words (the high word first).
struct NumpyPcg64 {
    u128 state, inc;
    static constexpr u128 kMult =
        (static_cast<u128>(2549297995355413924ULL) << 64) + 4865540595714422341ULL;

    explicit NumpyPcg64(const std::uint64_t words[4]) {
        const u128 initstate = (static_cast<u128>(words[0]) << 64) + words[1];
        const u128 initseq = (static_cast<u128>(words[2]) << 64) + words[3];
        state = 0;
        inc = (initseq << 1) | 1;
        state = state * kMult + inc;
        state += initstate;
        state = state * kMult + inc;
    }
    std::uint64_t next64() {
        state = state * kMult + inc;
        const std::uint64_t x = static_cast<std::uint64_t>(state >> 64) ^ static_cast<std::uint64_t>(state);
        const unsigned rot = static_cast<unsigned>(state >> 122);
        return (x >> rot) | (x << ((64u - rot) & 63u));
    }
    double next_double() { return static_cast<double>(next64() >> 11) * (1.0 / 9007199254740992.0); }
};

// The 32-bit words NumPy makes of the entropy [a, b, c] (each non-negative integer: its words, low first; 0: one
// word): up to six.
inline int entropy_words(const std::uint64_t* values, int count, std::uint32_t* words) {
    int w = 0;
    for (int k = 0; k < count; ++k) {
        std::uint64_t v = values[k];
        if (v == 0) words[w++] = 0;
        while (v > 0) {
            words[w++] = static_cast<std::uint32_t>(v & 0xFFFFFFFFu);
            v >>= 32;
        }
    }
    return w;
}

// The indices of the `batch` smallest of u[0..M), smallest first, ties by index, into out: a counting sort on
// the top bits (2^kb buckets, at least M / 2: about two values a bucket, the u being uniform), then an insertion
// sort (stable) of the buckets up to the one holding the batch's last. O(M) expected, whatever the batch and M:
// a comparison sort of a batch near M took 3x this; buckets capped at 2^16 made the insertion sort O(M^2 / 2^18)
// (0.77x NumPy's argsort at M = 6.4e7, a review found). su, sl, count: scratch of M, M and 2^kb + 1 entries,
// kb = bucket_bits(M) (at most M + 1 counts).
inline int bucket_bits(std::int64_t M) {
    int kb = 1;
    while (kb < 52 && (std::int64_t(1) << (kb + 1)) < M) ++kb;
    return kb;
}

inline void smallest_first(const std::uint64_t* u, std::int64_t M, std::int64_t batch, std::uint64_t* su,
                           std::int64_t* sl, std::int64_t* count, std::int64_t* out) {
    const int kb = bucket_bits(M), shift = 53 - kb;  // (u < 2^53: its top kb bits)
    const std::int64_t buckets = std::int64_t(1) << kb;
    std::fill(count, count + buckets + 1, std::int64_t(0));
    for (std::int64_t l = 0; l < M; ++l) ++count[(u[l] >> shift) + 1];
    for (std::int64_t j = 0; j < buckets; ++j) count[j + 1] += count[j];
    for (std::int64_t l = 0; l < M; ++l) {  // (in index order within a bucket)
        const std::int64_t at = count[u[l] >> shift]++;
        su[at] = u[l];
        sl[at] = l;
    }
    std::int64_t end = batch;  // (through the bucket of the batch's last: every earlier bucket's values are smaller)
    while (end < M && (su[end] >> shift) == (su[batch - 1] >> shift)) ++end;
    for (std::int64_t p = 1; p < end; ++p) {  // (stable: equal values keep their index order)
        const std::uint64_t v = su[p];
        const std::int64_t l = sl[p];
        std::int64_t q = p;
        for (; q > 0 && su[q - 1] > v; --q) {
            su[q] = su[q - 1];
            sl[q] = sl[q - 1];
        }
        su[q] = v;
        sl[q] = l;
    }
    std::copy(sl, sl + batch, out);
}

// The least-squares mini-batches: for each of `keys` generators default_rng([seed, rep, iteration]) (entropy:
// keys x 3), `batches` times in turn, n * M uniforms (node-major, as Generator.random((n, M)) fills them), and
// for each of the m nodes own[i] the indices of its `batch` smallest uniforms, smallest first (ties, which
// 53-bit uniforms make about once in 2^53 pairs, by index): what argsort(axis=1)[own, :batch] gives for distinct
// values. out[((k * batches + t) * m + i) * batch + b]. A uniform is u 2^-53 for the top 53 bits u of an output,
// so the order of the u is the uniforms' (smallest_first). The uniforms are drawn a node's row at a time, the
// rows no node asks for discarded (a thread holds 3 M values and at most M + 1 counts).
inline void numpy_minibatches(const std::uint64_t* entropy, std::int64_t keys, std::int64_t n, std::int64_t M,
                              std::int64_t batches, std::int64_t batch, const std::int64_t* own, std::int64_t m,
                              std::int64_t* out) {
    if (keys <= 0 || batches <= 0 || m <= 0 || batch <= 0) return;
    std::vector<std::int64_t> asked(static_cast<std::size_t>(m));  // the output rows i, by node own[i]
    for (std::int64_t i = 0; i < m; ++i) asked[i] = i;
    std::stable_sort(asked.begin(), asked.end(), [own](std::int64_t a, std::int64_t b) { return own[a] < own[b]; });
    const int threads =
        keys < 2 ? 1 : static_cast<int>(std::min<std::int64_t>(threads_for(keys * batches * n * M), keys));
    for_range(keys, threads, [&](std::int64_t lo, std::int64_t hi) {
        if (lo >= hi) return;
        std::vector<std::uint64_t> row(static_cast<std::size_t>(M)), su(static_cast<std::size_t>(M));
        std::vector<std::int64_t> sl(static_cast<std::size_t>(M)),
            count(static_cast<std::size_t>((std::int64_t(1) << bucket_bits(M)) + 1));
        for (std::int64_t k = lo; k < hi; ++k) {
            std::uint32_t words[6];
            std::uint64_t seeded[4];
            seed_sequence_state(words, entropy_words(entropy + 3 * k, 3, words), seeded);
            NumpyPcg64 rng(seeded);
            for (std::int64_t t = 0; t < batches; ++t) {
                std::int64_t next = 0;  // (the next of the asked rows, in node order)
                // (the last batch's rows past the last node asked for: never drawn)
                const std::int64_t rows = t + 1 < batches ? n : own[asked[m - 1]] + 1;
                for (std::int64_t node = 0; node < rows; ++node) {
                    if (next == m || own[asked[next]] != node) {  // (no node asks for this row: drawn, not kept)
                        for (std::int64_t l = 0; l < M; ++l) rng.next64();
                        continue;
                    }
                    for (std::int64_t l = 0; l < M; ++l) row[l] = rng.next64() >> 11;
                    std::int64_t* first = out + ((k * batches + t) * m + asked[next]) * batch;
                    smallest_first(row.data(), M, batch, su.data(), sl.data(), count.data(), first);
                    for (++next; next < m && own[asked[next]] == node; ++next)  // (a node asked for twice)
                        std::copy(first, first + batch, out + ((k * batches + t) * m + asked[next]) * batch);
                }
            }
        }
    });
}

}  // namespace rowstoch
