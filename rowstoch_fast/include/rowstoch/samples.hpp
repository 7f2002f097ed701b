// A table of per-sample gradients (GT-SAGA, LT-ADMM-VR, GT-SAGA-ATC): one entry read or written per node and
// replica, at the sample it drew.
//
// The table is (m, rows, reps, d) in C order: sample s of node i, replica r, is the d values at
// ((s * rows + i) * reps + r) * d. The draws idx are (reps, rows): replica r's draw at node i is idx[r * rows + i].
// A block of the optimizer's is node-major: its row i * reps + r holds node i, replica r.
//
// No Python here: the kernels are plain templated C++ (see STYLE.md). The caller checks that every draw is in
// 0..m-1 (first_bad_sample) before it calls a kernel.
#pragma once

#include <cstdint>
#include <cstring>

#include "hash.hpp"
#include "parallel.hpp"

namespace rowstoch {

// One sample index per replica and node, uniform in 0..m-1 (objectives.draw_samples, the NumPy transcription in
// tests/test_objectives.py): mix64 chained from `prefix` (the chain over the seed and the iteration, computed by
// the caller) over the replica's id, the node's id and `key`; its top 53 bits as a double u in [0, 1); the draw
// min(floor(u m), m - 1). out[r * rows + i] for replica rep_ids[r] and node node_ids[i] (null: node i).
inline void draw_samples(std::uint64_t prefix, const std::int64_t* rep_ids, std::int64_t reps,
                         const std::int64_t* node_ids, std::int64_t rows, std::uint64_t key, std::int64_t m,
                         std::int64_t* out) {
    if (reps <= 0 || rows <= 0) return;
    const double scale = static_cast<double>(m);
    for_range(reps * rows, threads_for(reps * rows * 16), [&](std::int64_t lo, std::int64_t hi) {
        std::int64_t r = lo / rows, i = lo - r * rows;
        std::uint64_t rep = mix64(prefix ^ static_cast<std::uint64_t>(rep_ids[r]));
        for (std::int64_t e = lo; e < hi; ++e) {
            const std::uint64_t node = static_cast<std::uint64_t>(node_ids ? node_ids[i] : i);
            const std::uint64_t h = mix64(mix64(rep ^ node) ^ key);
            const double u = static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
            const std::int64_t s = static_cast<std::int64_t>(u * scale);
            out[e] = s < m - 1 ? s : m - 1;
            if (++i == rows && e + 1 < hi) {  // the next replica
                i = 0;
                rep = mix64(prefix ^ static_cast<std::uint64_t>(rep_ids[++r]));
            }
        }
    });
}

// The position of the first draw outside 0..m-1, or -1.
template <class I>
inline std::int64_t first_bad_sample(const I* idx, std::int64_t count, std::int64_t m) {
    for (std::int64_t k = 0; k < count; ++k)
        if (static_cast<std::int64_t>(idx[k]) < 0 || static_cast<std::int64_t>(idx[k]) >= m) return k;
    return -1;
}

// out[i * reps + r] <- table[idx[r * rows + i], i, r] (whole rows of d values).
template <class T, class I>
inline void take_samples(const T* table, std::int64_t rows, std::int64_t reps, std::int64_t d, const I* idx,
                         T* out) {
    const std::int64_t entries = rows * reps;
    if (d == 0) return;  // (no values: the blocks may be null, and memcpy of null is undefined even for 0 bytes)
    for_range(entries, threads_for(entries * d), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t e = lo; e < hi; ++e) {
            const std::int64_t i = e / reps, r = e - i * reps;
            const std::int64_t s = static_cast<std::int64_t>(idx[r * rows + i]);
            std::memcpy(out + e * d, table + ((s * rows + i) * reps + r) * d, sizeof(T) * d);
        }
    });
}

// table[idx[r * rows + i], i, r] <- values[i * reps + r] (the inverse of take_samples; every (i, r) writes its
// own entry, so the writes never overlap).
template <class T, class I>
inline void put_samples(T* table, std::int64_t rows, std::int64_t reps, std::int64_t d, const I* idx,
                        const T* values) {
    const std::int64_t entries = rows * reps;
    if (d == 0) return;  // (no values: the blocks may be null, and memcpy of null is undefined even for 0 bytes)
    for_range(entries, threads_for(entries * d), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t e = lo; e < hi; ++e) {
            const std::int64_t i = e / reps, r = e - i * reps;
            const std::int64_t s = static_cast<std::int64_t>(idx[r * rows + i]);
            std::memcpy(table + ((s * rows + i) * reps + r) * d, values + e * d, sizeof(T) * d);
        }
    });
}

}  // namespace rowstoch
