// SplitMix64's finaliser, the counter-based hash behind every random draw of the kernels (the mini-batch
// streams of objectives.hpp, the message losses of network.hpp); network.py and _reference.py write it out
// in NumPy / Python.
#pragma once

#include <cstdint>

namespace rowstoch {

// SplitMix64 finaliser: a bijective 64-bit mix.
inline std::uint64_t mix64(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// A hint to bring the cache line holding p into cache (no effect on results): for the kernels that know their
// next gathers ahead (objectives.hpp's samples, network.hpp's delayed rounds).
inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

}  // namespace rowstoch
