// A simulator loop that mixes with rowstoch_fast's C++ kernels (header-only, no Python).
//
// Each of n agents on a directed ring with chords holds d values and, every round, averages what it hears
// from its in-neighbours with row-stochastic weights: X <- A X (rowstoch::csr_mix). Plain gossip over a
// row-stochastic A converges to the pi-weighted average (pi: A's left Perron vector), which the program
// checks against the power method, then prints the consensus error per round.
//
//   g++ -std=c++17 -O2 -ffp-contract=off -fopenmp -I"$(python -c 'import rowstoch_fast as r; print(r.get_include())')" \
//       examples/cpp/gossip_simulator.cpp -o gossip_simulator && ./gossip_simulator
//
// or with CMake: examples/cpp/CMakeLists.txt (find_package(rowstoch CONFIG), target rowstoch::kernels).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "rowstoch/mix.hpp"

int main() {
    const std::int64_t n = 64, d = 4, rounds = 500;
    // CSR of A: node i hears from itself, from i - 1 and (every other node) from i - 8; equal weights per row
    std::vector<std::int64_t> Ap{0}, Aj;
    std::vector<double> Ax;
    for (std::int64_t i = 0; i < n; ++i) {
        std::vector<std::int64_t> from{i, (i + n - 1) % n};
        if (i % 2 == 0) from.push_back((i + n - 8) % n);
        for (std::int64_t j : from) {
            Aj.push_back(j);
            Ax.push_back(1.0 / static_cast<double>(from.size()));
        }
        Ap.push_back(static_cast<std::int64_t>(Aj.size()));
    }
    std::vector<double> X(n * d), Y(n * d);
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < d; ++c) X[i * d + c] = std::sin(0.37 * static_cast<double>(i) + c);
    // the pi-weighted average the gossip must reach: pi^T A = pi^T by the power method on A^T
    std::vector<double> pi(n, 1.0 / n), next(n);
    for (int it = 0; it < 20000; ++it) {
        std::fill(next.begin(), next.end(), 0.0);
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t p = Ap[i]; p < Ap[i + 1]; ++p) next[Aj[p]] += pi[i] * Ax[p];
        pi.swap(next);
    }
    std::vector<double> target(d, 0.0);
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t c = 0; c < d; ++c) target[c] += pi[i] * X[i * d + c];
    double error = 0.0;
    for (std::int64_t t = 1; t <= rounds; ++t) {
        rowstoch::csr_mix(Ap.data(), Aj.data(), Ax.data(), n, X.data(), d, Y.data());  // Y <- A X
        X.swap(Y);
        error = 0.0;
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t c = 0; c < d; ++c) error = std::fmax(error, std::fabs(X[i * d + c] - target[c]));
        if (t % 100 == 0) std::printf("round %lld: max |x_i - pi^T x_0| = %.3e\n", static_cast<long long>(t), error);
    }
    std::printf("OpenMP: %s\n", rowstoch::has_openmp() ? "yes" : "no");
    return error < 1e-8 ? 0 : 1;
}
