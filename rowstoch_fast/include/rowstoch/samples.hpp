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

#include "parallel.hpp"

namespace rowstoch {

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
    for_range(entries, threads_for(entries * d), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t e = lo; e < hi; ++e) {
            const std::int64_t i = e / reps, r = e - i * reps;
            const std::int64_t s = static_cast<std::int64_t>(idx[r * rows + i]);
            std::memcpy(table + ((s * rows + i) * reps + r) * d, values + e * d, sizeof(T) * d);
        }
    });
}

}  // namespace rowstoch
