// What the headers promise bit for bit, checked in an embedder's own build (tests/test_embedding.py compiles it
// with the documented flags and -march=native): a column of csr_mix does not depend on the block's width, a lossy
// round that lost nothing is the static round; an empty block's power is a no-op (null pointers allowed). Without
// -ffp-contract=off GCC 12 at -O3 fuses multiply-adds there and the first breaks (at -O2 it held, and clang 14 held
// at both, with 808 fused multiply-adds: helper 133; the logistic gradients' promises too, at
// two vector widths: left out here, as their instantiation takes four times the compile; the package's own build
// checks them).
// Exit status: the number of broken promises (each printed).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rowstoch/mix.hpp"
#include "rowstoch/network.hpp"

using Block = std::vector<double>;

static bool identical(const Block& a, const Block& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

static double next_value(unsigned long long& state) {  // (a fixed sequence in [-1, 1): splitmix64's bits)
    state += 0x9E3779B97F4A7C15ULL;
    unsigned long long z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) / 4503599627370496.0 - 1.0;
}

int main() {
    unsigned long long state = 7;
    int broken = 0;
    const std::int64_t n = 150;  // a row-stochastic matrix with 4 entries per row, uneven weights
    std::vector<std::int64_t> Ap{0}, Aj;
    Block Ax;
    for (std::int64_t i = 0; i < n; ++i) {
        double total = 0.0;
        for (std::int64_t j : {i, (i + 1) % n, (i + 5) % n, (3 * i + 2) % n}) {
            Aj.push_back(j);
            Ax.push_back(0.2 + std::fabs(next_value(state)));
            total += Ax.back();
        }
        for (std::size_t q = static_cast<std::size_t>(Ap.back()); q < Ax.size(); ++q) Ax[q] /= total;
        Ap.push_back(static_cast<std::int64_t>(Aj.size()));
    }
    const std::int64_t wide = 24;
    Block X(n * wide), Y(n * wide);
    for (double& v : X) v = next_value(state);
    rowstoch::csr_mix(Ap.data(), Aj.data(), Ax.data(), n, X.data(), wide, Y.data());
    for (std::int64_t w : {1, 2, 3, 7}) {
        Block Xw(n * w), Yw(n * w), narrow(n), first(n);
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t c = 0; c < w; ++c) Xw[i * w + c] = X[i * wide + c];
        rowstoch::csr_mix(Ap.data(), Aj.data(), Ax.data(), n, Xw.data(), w, Yw.data());
        for (std::int64_t i = 0; i < n; ++i) {
            narrow[i] = Yw[i * w];
            first[i] = Y[i * wide];
        }
        if (!identical(narrow, first)) {
            ++broken;
            std::printf("csr_mix: column 0 of a %lld-wide block differs from the %lld-wide block's\n",
                        static_cast<long long>(w), static_cast<long long>(wide));
        }
    }
    for (std::int64_t w : {1, 3, 24}) {
        Block Xw(n * w), plain(n * w), lossy(n * w);
        for (double& v : Xw) v = next_value(state);
        rowstoch::csr_mix(Ap.data(), Aj.data(), Ax.data(), n, Xw.data(), w, plain.data());
        rowstoch::csr_mix_lossy(Ap.data(), Aj.data(), Ax.data(), n, Xw.data(), w, lossy.data(), 1, 0, 0, 0.0,
                                rowstoch::kRowRule);
        if (!identical(plain, lossy)) {
            ++broken;
            std::printf("csr_mix_lossy with p = 0 differs from csr_mix (w = %lld)\n", static_cast<long long>(w));
        }
    }
    rowstoch::csr_mix_power<std::int64_t, double>(Ap.data(), Aj.data(), Ax.data(), 0, nullptr, 0, 0, nullptr,
                                                  nullptr);
    // ROWSTOCH_ADAPTIVE_THREADS read as its words, as the Python package reads it (the first character alone had
    // decided: "false" and "off" left the back-off on, "01" turned it off)
    for (const char* off : {"0", "false", "no", "off", " OFF ", "False"})
        if (!rowstoch::env_says_off(off)) { ++broken; std::printf("'%s' is not read as off\n", off); }
    for (const char* on : {"1", "01", "on", "", "offf", "falsetto", "o ff", "nonsense-long-word"})
        if (rowstoch::env_says_off(on)) { ++broken; std::printf("'%s' is read as off\n", on); }
    if (rowstoch::env_says_off(nullptr)) { ++broken; std::printf("an unset variable is read as off\n"); }
    std::printf("%d promise(s) broken\n", broken);
    return broken;
}
