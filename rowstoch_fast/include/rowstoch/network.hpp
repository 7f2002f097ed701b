// Lossy gossip in one CSR pass (rowstoch_fast.network.Lossy): each message j -> i (j != i) of round r
// of iteration t is lost when the counter-based draw uniform_hash(seed, t, r, i, j) < p, with the hash of
// network.py (splitmix64's finaliser chained over the keys, the top 53 bits as a double), so the losses
// are the same here, in NumPy and on any thread count.
//
// Row-stochastic receivers renormalise over what arrived: y_i = (sum_arrived a_ij x_j) / (sum_arrived a_ij),
// numerator and denominator summed in CSR order in the same pass (all-ones in give exactly ones out); a row
// that lost nothing is the static row's sum, bit for bit (the same additions in the same order as
// csr_row_chunk); a row that received nothing keeps x_i. Column-stochastic senders' lost mass is lost
// (kColumnRule). A lost message adds 0 * x_j (branch-free; what the NumPy path's zero weights do).
// With an awake mask (rowstoch_fast.network.Sleepy): a sleeping node keeps x_i (its row is e_i; with push-sum
// weights its column is e_j too: it keeps its mass), and its messages count as lost for the others.
// The undirected rule (a symmetric doubly stochastic W, network.Network.undirected: what an undirected method's
// rounds keep), rule = kSymmetricRule: the link i - j is used only when both of its messages, j -> i and i -> j,
// arrived and both ends are awake, and an unused link's weight stays with the receiver:
// y_i = sum_used w_ij x_j + (sum_unused w_ij) x_i (CSR order, the second sum added last), so every round is
// symmetric and doubly stochastic again. Gilbert-Elliott gates: bit 0 of bad[q] gates the message j -> i, bit 1
// (the undirected rule) the message i -> j.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "hash.hpp"
#include "mix.hpp"
#include "parallel.hpp"
#include "simd.hpp"

namespace rowstoch {

// The chain of network.uniform_hash over (seed, t, r): what every entry of the round shares.
inline std::uint64_t hash_prefix(std::uint64_t seed, std::uint64_t t, std::uint64_t r) {
    std::uint64_t h = 0x243F6A8885A308D3ULL;
    h = mix64(h ^ seed);
    h = mix64(h ^ t);
    return mix64(h ^ r);
}

// One row, its K values in registers (K = w, a compile-time width up to 16; K = 0: any w, summed in Y).
// u = (h >> 11) 2^-53 < p  <=>  (h >> 11) < ceil(p 2^53): network.py's draws, compared as integers (p = 1: all).
inline std::uint64_t loss_threshold(double p) { return static_cast<std::uint64_t>(std::ceil(p * 0x1.0p53)); }

// Global node ids of the local rows and columns (an MPI rank's share: rows are its nodes, columns its nodes
// then its halo); null ids: row i is node i, column j node j.
// `thresholds`: a loss threshold per global node id, the sender's (network.Lossy with one p per node: loss_threshold
// of each), or null: the pass's one threshold for every message.
struct NodeIds {
    const std::int64_t* rows;
    const std::int64_t* cols;
    const std::uint64_t* thresholds = nullptr;
    std::int64_t row(std::int64_t i) const { return rows ? rows[i] : i; }
    std::int64_t col(std::int64_t j) const { return cols ? cols[j] : j; }
    std::uint64_t threshold_of(std::int64_t g, std::uint64_t one) const { return thresholds ? thresholds[g] : one; }
};

// The cases of one pass, each compiled on its own so that the common ones carry no checks of the others:
// kLosses (Bernoulli losses in one process: no awake mask, no Gilbert-Elliott states, local ids; 1.8x -> 1.4x the
// static pass at n = 2^18, d = 10, with keep_unless), kAsleep (an awake mask, no losses, local ids: no hash) and
// kAny (everything else: MPI ids, Gilbert-Elliott gates, losses and sleep together).
enum LossyCase { kAny, kLosses, kAsleep };

// What a receiver does with what did not arrive: column-stochastic weights lose it, row-stochastic ones
// renormalise over what arrived, the undirected rule keeps the unused weight on x_i (above).
enum LossRule { kColumnRule = 0, kRowRule = 1, kSymmetricRule = 2 };

// w, or +0 where `drop` (w >= 0): a mask, not a select, so that the compiler cannot turn the draw into a branch
// (mispredicted on a tenth of the weights at p = 0.1).
template <class T>
inline T keep_unless(T w, std::uint64_t drop) {
    using U = typename std::conditional<sizeof(T) == 8, std::uint64_t, std::uint32_t>::type;
    static_assert(sizeof(T) == sizeof(U), "float or double");
    U bits;
    std::memcpy(&bits, &w, sizeof bits);
    bits &= static_cast<U>(drop) - U(1);
    std::memcpy(&w, &bits, sizeof bits);
    return w;
}

// Where entry q of a row reads its values: `read.pointer(q)` where the Reader gives pointers (SplitRows: two
// blocks), else X's row read(q).
template <class Reader, class = void>
struct ReadsPointers : std::false_type {};
template <class Reader>
struct ReadsPointers<Reader, std::void_t<decltype(&Reader::pointer)>> : std::true_type {};

template <class Reader, class I, class T>
inline const T* entry_row(const Reader& read, I q, const T* X, std::int64_t width) {
    if constexpr (ReadsPointers<Reader>::value)
        return read.pointer(q);
    else
        return X + read(q) * width;
}

// (`read(q)`: the row of X entry q reads, mix.hpp's Rows policy: Aj[q] for the lossy round, the history row of the
// newest arrived message for a delayed one, or a pointer into one of two blocks (SplitRows); Aj[q] names the
// sender, whose id the draws take)
template <int K, int Case, class I, class T, class Reader>
inline void lossy_row(const I Ap[], const I Aj[], const Reader& read, const T Ax[], const T* __restrict X,
                      std::int64_t w, std::int64_t i, std::uint64_t round, std::uint64_t threshold, int rule,
                      const std::uint8_t* awake_in, const std::uint8_t* bad_in, NodeIds ids_in, T* __restrict Y) {
    const std::uint8_t* awake = Case == kLosses ? nullptr : awake_in;
    const std::uint8_t* bad = Case == kAny ? bad_in : nullptr;
    const NodeIds ids = Case == kAny ? ids_in : NodeIds{nullptr, nullptr, nullptr};
    constexpr bool kRegs = K > 0;
    const std::int64_t width = kRegs ? K : w;
    const std::int64_t gi = ids.row(i);
    if (awake && !awake[gi]) {  // asleep: keeps x_i
        for (std::int64_t c = 0; c < width; ++c) Y[i * width + c] = X[i * width + c];
        return;
    }
    T regs[kRegs ? K : 1];
    T* __restrict acc = kRegs ? regs : Y + i * w;
    for (std::int64_t c = 0; c < width; ++c) acc[c] = T(0);
    const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(gi));
    T den = T(0), unused = T(0);
    std::uint64_t lost = 0;
    const bool symmetric = Case == kAny && rule == kSymmetricRule;
    const std::uint64_t own_threshold = ids.threshold_of(gi, threshold);  // (the message i -> j: i's)
    const I end = Ap[i + 1];
    for (I q = Ap[i]; q < end; ++q) {  // branch-free: a lost message adds 0 * x (as the NumPy path does)
        const std::int64_t j = static_cast<std::int64_t>(Aj[q]);
        const std::int64_t gj = ids.col(j);
        std::uint64_t gone;  // 0 or 1
        if (Case == kLosses)
            gone = static_cast<std::uint64_t>((mix64(row ^ static_cast<std::uint64_t>(gj)) >> 11) < threshold) &
                   static_cast<std::uint64_t>(gj != gi);
        else if (Case == kAsleep)
            gone = static_cast<std::uint64_t>(!awake[gj]) & static_cast<std::uint64_t>(gj != gi);
        else {
            const std::uint64_t sent = ids.threshold_of(gj, threshold);  // (the message j -> i: j's)
            gone = gj != gi && ((awake && !awake[gj]) ||
                                ((!bad || (bad[q] & 1)) && sent &&
                                 (mix64(row ^ static_cast<std::uint64_t>(gj)) >> 11) < sent) ||
                                (symmetric && (!bad || (bad[q] & 2)) && own_threshold &&  // (the message i -> j)
                                 (mix64(mix64(round ^ static_cast<std::uint64_t>(gj)) ^ static_cast<std::uint64_t>(gi))
                                  >> 11) < own_threshold));
        }
        lost |= gone;
        const T a = keep_unless(Ax[q], gone);
        const T* __restrict x = entry_row(read, q, X, width);
        for (std::int64_t c = 0; c < width; ++c) acc[c] += a * x[c];
        den += a;
        if (symmetric) unused += Ax[q] - a;  // (exact: Ax[q] - Ax[q] or Ax[q] - 0)
    }
    T* __restrict y = Y + i * width;
    if (lost && symmetric) {
        for (std::int64_t c = 0; c < width; ++c) acc[c] += unused * X[i * width + c];
    } else if (lost && rule == kRowRule) {
        if (den == T(0)) {
            for (std::int64_t c = 0; c < width; ++c) acc[c] = X[i * width + c];  // received nothing: keeps x_i
        } else {
            for (std::int64_t c = 0; c < width; ++c) acc[c] /= den;
        }
    }
    if (kRegs)
        for (std::int64_t c = 0; c < width; ++c) y[c] = acc[c];
}

// The rows lo..hi-1 in one case: a function of its own (not inlined into the dispatch below, where GCC 12
// vectorised the K accumulators as 4 pairs and 2 singles instead of 5 pairs: 1.5x -> 1.4x the static pass).
template <int K, int Case, class I, class T, class Rows>
__attribute__((noinline)) void lossy_rows_in(const I Ap[], const I Aj[], const Rows& rows, const T Ax[], const T* X,
                                             std::int64_t w, std::int64_t lo, std::int64_t hi, std::uint64_t round,
                                             std::uint64_t threshold, int rule, const std::uint8_t* awake,
                                             const std::uint8_t* bad, NodeIds ids, T* Y) {
    for (std::int64_t i = lo; i < hi; ++i)
        lossy_row<K, Case>(Ap, Aj, rows.row(i), Ax, X, w, i, round, threshold, rule, awake, bad, ids, Y);
}

template <int K, class I, class T, class Rows>
inline void lossy_rows(const I Ap[], const I Aj[], const Rows& by, const T Ax[], const T* X, std::int64_t w,
                       std::int64_t lo, std::int64_t hi, std::uint64_t round, std::uint64_t threshold,
                       int rule, const std::uint8_t* awake, const std::uint8_t* bad, NodeIds ids, T* Y) {
    const bool local = !bad && !ids.rows && !ids.cols && !ids.thresholds && rule != kSymmetricRule;
    auto rows = local && !awake && threshold ? lossy_rows_in<K, kLosses, I, T, Rows>
                : local && awake && !threshold ? lossy_rows_in<K, kAsleep, I, T, Rows>
                                               : lossy_rows_in<K, kAny, I, T, Rows>;
    rows(Ap, Aj, by, Ax, X, w, lo, hi, round, threshold, rule, awake, bad, ids, Y);
}

// Y <- the lossy round; `make_rows()` (called once per thread) gives the Rows policy naming the row of X each
// entry reads (default: Aj's).
template <class I, class T, class MakeRows>
void csr_mix_lossy_by(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[], std::int64_t w, T Y[],
                      std::uint64_t seed, std::uint64_t t, std::uint64_t r, double p, int rule,
                      const std::uint8_t* awake, NodeIds ids, const std::uint8_t* bad, MakeRows&& make_rows) {
    const std::uint64_t round = hash_prefix(seed, t, r);
    // u = (h >> 11) 2^-53 < p  <=>  (h >> 11) < ceil(p 2^53): the same draws, compared as integers
    const std::uint64_t threshold = loss_threshold(p);
    const int threads = threads_for(static_cast<std::int64_t>(Ap[n]) * w);
    for_rows(Ap, n, threads, [&](std::int64_t lo, std::int64_t hi) {
        const auto by = make_rows();
        switch (w) {
#define ROWSTOCH_LOSSY(K) \
    case K: lossy_rows<K>(Ap, Aj, by, Ax, X, w, lo, hi, round, threshold, rule, awake, bad, ids, Y); return;
            ROWSTOCH_LOSSY(1) ROWSTOCH_LOSSY(2) ROWSTOCH_LOSSY(3) ROWSTOCH_LOSSY(4) ROWSTOCH_LOSSY(5)
            ROWSTOCH_LOSSY(6) ROWSTOCH_LOSSY(7) ROWSTOCH_LOSSY(8) ROWSTOCH_LOSSY(9) ROWSTOCH_LOSSY(10)
            ROWSTOCH_LOSSY(11) ROWSTOCH_LOSSY(12) ROWSTOCH_LOSSY(13) ROWSTOCH_LOSSY(14) ROWSTOCH_LOSSY(15)
            ROWSTOCH_LOSSY(16)
#undef ROWSTOCH_LOSSY
            default: lossy_rows<0>(Ap, Aj, by, Ax, X, w, lo, hi, round, threshold, rule, awake, bad, ids, Y);
        }
    });
}

template <class I, class T>
void csr_mix_lossy(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[], std::int64_t w, T Y[],
                   std::uint64_t seed, std::uint64_t t, std::uint64_t r, double p, int rule,
                   const std::uint8_t* awake = nullptr, NodeIds ids = {nullptr, nullptr, nullptr},
                   const std::uint8_t* bad = nullptr) {
    csr_mix_lossy_by(Ap, Aj, Ax, n, X, w, Y, seed, t, r, p, rule, awake, ids, bad,
                     [Aj] { return ColumnRows<I>{Aj}; });
}

// The rows a round of messages reads in the stacked block [own rows; messages] (n_own own rows, then node j's
// message at n_own + j): a self loop (Aj[q] = i) its own row i, every other entry its sender's message. Computed
// from Aj, so the draws keep the node ids (Aj[q]) and the pass needs no index (network.messages.own_and_messages
// writes the same rows).
template <class I>
struct StackedRows {
    const I* Aj;
    std::int64_t n_own;

    struct Reader {
        const I* Aj;
        std::int64_t i, n_own;
        std::int64_t operator()(I q) const {
            const std::int64_t j = static_cast<std::int64_t>(Aj[q]);
            return j == i ? i : n_own + j;
        }
    };

    Reader row(std::int64_t i) const { return Reader{Aj, i, n_own}; }
};

// Y <- one lossy round of messages (Compressed(Lossy(A, p), ...)): csr_mix_lossy over X = [own rows (n); Q(X)
// (n)], a self loop reading its own row, the others their sender's message (StackedRows), the draws on the node
// ids Aj names. The same sums as csr_mix_lossy over own_and_messages' index with the stacked block's node ids
// (row_ids = 0..n-1, col_ids = [0..n-1, 0..n-1]), but through the pass's fast cases (local ids; the ids sent such a
// pass down the general case: 2.5x the static mix at n = 2^18, d = 10, 1.5x now; bench/RESULTS.md section 16).
template <class I, class T>
void csr_mix_lossy_stacked(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[], std::int64_t w,
                           T Y[], std::uint64_t seed, std::uint64_t t, std::uint64_t r, double p, int rule,
                           const std::uint8_t* awake = nullptr, const std::uint8_t* bad = nullptr,
                           const std::uint64_t* thresholds = nullptr) {
    csr_mix_lossy_by(Ap, Aj, Ax, n, X, w, Y, seed, t, r, p, rule, awake, NodeIds{nullptr, nullptr, thresholds}, bad,
                     [Aj, n] { return StackedRows<I>{Aj, n}; });
}

// The rows a round of messages reads from two blocks: a self loop (Aj[q] = i) node i's own row of X, every other
// entry its sender's message, row Aj[q] of Q. What StackedRows reads from [X; Q], without the copy of X into the
// stacked block.
template <class I, class T>
struct SplitRows {
    const I* Aj;
    const T* X;
    const T* Q;
    std::int64_t w;

    struct Reader {
        const I* Aj;
        const T* own;
        const T* Q;
        std::int64_t i, w;
        const T* pointer(I q) const {
            const std::int64_t j = static_cast<std::int64_t>(Aj[q]);
            return j == i ? own : Q + j * w;
        }
    };

    Reader row(std::int64_t i) const { return Reader{Aj, X + i * w, Q, i, w}; }
};

// Y <- one lossy round of messages over X (the own rows) and Q (the messages, one row per node): the same sums in
// the same order as csr_mix_lossy_stacked over [X; Q] (SplitRows), the draws on the node ids Aj names.
template <class I, class T>
void csr_mix_lossy_split(const I Ap[], const I Aj[], const T Ax[], std::int64_t n, const T X[], const T Q[],
                         std::int64_t w, T Y[], std::uint64_t seed, std::uint64_t t, std::uint64_t r, double p,
                         int rule, const std::uint8_t* awake = nullptr, const std::uint8_t* bad = nullptr,
                         const std::uint64_t* thresholds = nullptr) {
    csr_mix_lossy_by(Ap, Aj, Ax, n, X, w, Y, seed, t, r, p, rule, awake, NodeIds{nullptr, nullptr, thresholds}, bad,
                     [Aj, X, Q, w] { return SplitRows<I, T>{Aj, X, Q, w}; });
}

// Gilbert-Elliott chains (network.Lossy(model="gilbert-elliott")): one good/bad state per stored entry,
// bad[q] for entry q (row i -> column j, global ids), advanced over iterations from .. to - 1 -> to:
// state_{s} from state_{s-1} with the draw v = uniform_hash(seed, 2^61 + s, 0, i, j) (bad -> good when
// v < p_recover, good -> bad when v < p_bad); `init` starts from the stationary draw
// (uniform_hash(seed, 2^62, 0, i, j) < p_bad / (p_bad + p_recover)) and applies the transitions 0 .. to.
// The same states as NumPy's, for any partition of the entries (the draws are keyed on global ids).
// The transitions are read from `to` backwards: one that sends both states to the same one (probability
// |p_bad - p_recover|) fixes the state, the swaps after it applied, and ends the entry's scan; an entry that meets
// none starts from its state before (the stationary draw when `init`). The same bits as the walk forward, in about
// 1 / |p_bad - p_recover| iterations an entry whatever to - from (all of them where p_bad = p_recover).
template <class I, class Stop>
void ge_advance(const I Ap[], const I Aj[], std::int64_t rows, NodeIds ids, std::uint8_t bad[], std::uint64_t seed,
                std::int64_t from, std::int64_t to, double p_bad, double p_recover, bool init, Stop&& should_stop) {
    const std::uint64_t to_bad = loss_threshold(p_bad), to_good = loss_threshold(p_recover);
    const std::uint64_t stationary = loss_threshold(p_bad / (p_bad + p_recover));
    const std::uint64_t init_key = hash_prefix(seed, 1ULL << 62, 0);
    const std::int64_t nnz = static_cast<std::int64_t>(Ap[rows]), first = init ? 0 : from;
    // per entry: still scanning, the swaps seen, the state where fixed (bad[] written at the end only: an
    // interrupted call leaves it as it was)
    std::vector<std::uint8_t> open(static_cast<std::size_t>(nnz), 1), flip(static_cast<std::size_t>(nnz), 0),
        fixed(static_cast<std::size_t>(nnz), 0);
    // the iterations in chunks of about 2e7 chain steps, Ctrl-C polled between them (each entry's chain is
    // independent of the others': the same bits as one pass over all iterations)
    const std::int64_t chunk = std::max<std::int64_t>(1, 20000000 / std::max<std::int64_t>(nnz, 1));
    std::int64_t left = nnz;  // entries still scanning
    for (std::int64_t s1 = to; s1 >= first && left > 0; s1 -= chunk) {
        const std::int64_t s0 = std::max(first, s1 - chunk + 1);  // (s0 .. s1, inclusive, read from s1 down)
        for_rows(Ap, rows, threads_for(left * (s1 - s0 + 1)), [&](std::int64_t lo, std::int64_t hi) {
            for (std::int64_t i = lo; i < hi; ++i) {
                const std::uint64_t gi = static_cast<std::uint64_t>(ids.row(i));
                for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                    if (!open[q]) continue;
                    const std::uint64_t gj = static_cast<std::uint64_t>(ids.col(static_cast<std::int64_t>(Aj[q])));
                    std::uint8_t swaps = flip[q];
                    for (std::int64_t s = s1; s >= s0; --s) {
                        const std::uint64_t key = hash_prefix(seed, (1ULL << 61) + static_cast<std::uint64_t>(s), 0);
                        const std::uint64_t v = mix64(mix64(key ^ gi) ^ gj) >> 11;
                        const std::uint8_t stay = v >= to_good, turn = v < to_bad;  // (bad -> bad, good -> bad)
                        if (stay == turn) {  // (both states go to `stay`)
                            fixed[q] = stay ^ swaps;
                            open[q] = 0;
                            break;
                        }
                        swaps ^= turn;  // (a swap: bad -> good, good -> bad)
                    }
                    flip[q] = swaps;
                }
            }
        });
        left = std::count(open.begin(), open.end(), std::uint8_t{1});
        if (s0 > first && left > 0 && should_stop()) return;
    }
    for (std::int64_t i = 0; i < rows; ++i) {  // (no fixing transition: the state before, the swaps applied)
        const std::uint64_t gi = static_cast<std::uint64_t>(ids.row(i));
        for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
            const std::uint64_t gj = static_cast<std::uint64_t>(ids.col(static_cast<std::int64_t>(Aj[q])));
            const std::uint8_t before = init ? (mix64(mix64(init_key ^ gi) ^ gj) >> 11) < stationary : bad[q];
            bad[q] = open[q] ? before ^ flip[q] : fixed[q];
        }
    }
}

// Which messages of round r of iteration t are lost, one flag per stored entry q (row i <- column j, global ids):
// lost[q] = 1 when uniform_hash(seed, t, r, i, j) < p (the sender j's p with ids.thresholds) (and, with Gilbert-Elliott states, bad[q]), never for a self
// loop: the draws of every lossy pass, for algorithms that follow messages one by one (running sums per link).
template <class I>
void lost_links(const I Ap[], const I Aj[], std::int64_t rows, NodeIds ids, std::uint64_t seed, std::uint64_t t,
                std::uint64_t r, double p, const std::uint8_t* bad, std::uint8_t lost[]) {
    const std::uint64_t round = hash_prefix(seed, t, r), threshold = loss_threshold(p);
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]));
    for_rows(Ap, rows, threads, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::int64_t gi = ids.row(i);
            const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(gi));
            for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                const std::int64_t gj = ids.col(static_cast<std::int64_t>(Aj[q]));
                lost[q] = gj != gi && (!bad || bad[q]) &&
                          (mix64(row ^ static_cast<std::uint64_t>(gj)) >> 11) < ids.threshold_of(gj, threshold);
            }
        }
    });
}

}  // namespace rowstoch

namespace rowstoch {

// Delayed messages (rowstoch_fast.network.Delayed): the message of link q (row i <- column j, global ids) sent in round
// r of iteration s arrives tau(s) iterations later, tau(s) = floor(u (D + 1)) with u = uniform_hash(seed, 3 2^61 + s,
// r, i, j) (uniform over 0..D; fixed: tau = D). A receiver uses the newest message that has arrived by t:
// ages[q] = the smallest k in 0..min(D, t) with tau(t - k) <= k, i.e. u(t - k) < (k + 1) / (D + 1); t when none has
// (before iteration D the initial message counts as known). A self loop is 0. The NumPy transcription is
// _reference.delay_ages.
//
// With `index` (the layout of a delayed round: n_own own rows, then n_block nodes' (D + 1) R messages each, node
// by node, the message of iteration s and round r at slot (s mod (D + 1)) R + r): index[q] = i for a self loop, else
// the row of the message that arrived, n_own + Aj[q] (D + 1) R + slot(t - ages[q], r); with the layout iteration by
// iteration (node_major false: every link of a fixed delay reads one contiguous block), n_own + slot n_block + Aj[q].
struct DelayLayout {
    std::int64_t n_own, n_block, rounds;
    bool node_major = true;  // false: iteration by iteration, node j's message of slot b at n_own + b n_block + j
};

// What the ages of one round share: the draws' prefixes and thresholds of the window (computed once per call),
// and per row (`row(gi)`) the keys mixed with the receiver's id; `age(gi, gj)` of a row's reader is the age of
// the newest message of the link gj -> gi that has arrived.
class DelayDraws {
  public:
    static constexpr std::int64_t kCached = 64;  // ages below this: prefixes and thresholds computed once per call
    static constexpr std::int64_t kRowKeys = 16;  // ages below this: keys mixed once per row

    DelayDraws(std::uint64_t seed, std::uint64_t t, std::uint64_t r, std::int64_t D, bool fixed)
        : seed_(seed), t_(t), r_(r), D_(D), fixed_(fixed), last_(std::min<std::int64_t>(D, static_cast<std::int64_t>(t))),
          cached_(std::min<std::int64_t>(last_, kCached)), masked_(!fixed && last_ <= 16) {
        for (std::int64_t k = 0; k < cached_; ++k) {
            prefix_[k] = hash_prefix(seed, (3ULL << 61) + (t - static_cast<std::uint64_t>(k)), r);
            threshold_[k] = loss_threshold(static_cast<double>(k + 1) / static_cast<double>(D + 1));
        }
    }

    std::int64_t last() const { return last_; }
    // Whether Row::age takes the masked draws (uniform delays, a window of 16 ages or fewer), and their thresholds.
    bool masked() const { return masked_; }
    const std::uint64_t* thresholds() const { return threshold_; }

    struct Row {
        const DelayDraws* draws;
        std::int64_t gi;
        std::uint64_t key[kRowKeys];

        std::int64_t age(std::int64_t gj) const {
            const DelayDraws& d = *draws;
            const std::int64_t last = d.last_;
            if (gj == gi) return 0;
            std::int64_t age = last;
            if (d.masked_) {  // the newest arrival: selects from the oldest draw to the newest (branch-free,
                // portable: no count-trailing-zeros builtin)
                for (std::int64_t k = last - 1; k >= 0; --k)
                    age = (mix64(key[k] ^ static_cast<std::uint64_t>(gj)) >> 11) < d.threshold_[k] ? k : age;
            } else if (!d.fixed_) {
                for (std::int64_t k = 0; k < last; ++k) {
                    const std::uint64_t kk = k < kRowKeys ? key[k]
                        : mix64((k < d.cached_ ? d.prefix_[k]
                                 : hash_prefix(d.seed_, (3ULL << 61) + (d.t_ - static_cast<std::uint64_t>(k)), d.r_)) ^
                                static_cast<std::uint64_t>(gi));
                    const std::uint64_t thr = k < d.cached_ ? d.threshold_[k]
                        : loss_threshold(static_cast<double>(k + 1) / static_cast<double>(d.D_ + 1));
                    if ((mix64(kk ^ static_cast<std::uint64_t>(gj)) >> 11) < thr) return k;
                }
            }
            return age;
        }
    };

    Row row(std::int64_t gi) const {
        Row out;
        out.draws = this;
        out.gi = gi;
        if (!fixed_)
            for (std::int64_t k = 0; k < std::min(cached_, kRowKeys); ++k)
                out.key[k] = mix64(prefix_[k] ^ static_cast<std::uint64_t>(gi));
        return out;
    }

  private:
    std::uint64_t seed_, t_, r_;
    std::int64_t D_;
    bool fixed_;
    std::int64_t last_, cached_;
    bool masked_;  // branch-free: every draw of the window, the first arrival's bit
    std::uint64_t prefix_[kCached], threshold_[kCached];
};

// Where the stacked block [own rows; history] keeps the message of each age a <= last of a round: node j's
// message at offset(a) + j stride (DelayLayout's orders), a self loop at its own row i. Tabled for windows up to
// kTabled ages (a long window's table would cost more than it saves), computed otherwise.
struct DelayOffsets {
    static constexpr std::int64_t kTabled = 4096;
    DelayLayout layout;
    std::int64_t t, r, D, stride;
    std::vector<std::int64_t> table;

    DelayOffsets(const DelayLayout& layout_, std::uint64_t t_, std::uint64_t r_, std::int64_t D_, std::int64_t last)
        : layout(layout_), t(static_cast<std::int64_t>(t_)), r(static_cast<std::int64_t>(r_)), D(D_),
          stride(layout_.node_major ? (D_ + 1) * layout_.rounds : 1) {
        if (last < kTabled)
            for (std::int64_t a = 0; a <= last; ++a) table.push_back(computed(a));
    }

    std::int64_t computed(std::int64_t a) const {
        const std::int64_t block = ((t - a) % (D + 1)) * layout.rounds + r;
        return layout.n_own + (layout.node_major ? block : block * layout.n_block);
    }

    std::int64_t offset(std::int64_t a) const {
        return a < static_cast<std::int64_t>(table.size()) ? table[static_cast<std::size_t>(a)] : computed(a);
    }
};

template <class I, class J>
void delay_ages(const I Ap[], const I Aj[], std::int64_t rows, NodeIds ids, std::uint64_t seed, std::uint64_t t,
                std::uint64_t r, std::int64_t D, bool fixed, std::int32_t ages[], J* index = nullptr,
                DelayLayout layout = {0, 0, 1}) {
    const DelayDraws draws(seed, t, r, D, fixed);
    const DelayOffsets at(layout, t, r, D, index ? draws.last() : 0);
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * (fixed ? 1 : 4));
    for_rows(Ap, rows, threads, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
            const std::int64_t gi = ids.row(i);
            const DelayDraws::Row row = draws.row(gi);
            for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                const std::int64_t gj = ids.col(static_cast<std::int64_t>(Aj[q]));
                const std::int64_t age = row.age(gj);
                if (ages) ages[q] = static_cast<std::int32_t>(age);
                if (index)
                    index[q] = static_cast<J>(gj == gi ? i : at.offset(age) + static_cast<std::int64_t>(Aj[q]) *
                                                                                   at.stride);
            }
        }
    });
}

#if ROWSTOCH_X86_DISPATCH
// DelayedRows::draw's entries of row i (AgeRow: node gi; Aj its `count` columns, cols their global ids or null) L at
// a time in vector lanes (eight on AVX-512, four on AVX2: delayed_rows8, delayed_rows4), for the masked draws
// (DelayDraws::masked: `key` the row's keys, `threshold` the window's, `last` its last age): each lane the hashes,
// comparisons and selects of Row::age, and the row DelayOffsets gives the age it drew, c0 + c1 slot with slot =
// (t - age) mod (D + 1) = tm - age (+ D + 1 where age > tm = t mod (D + 1)), plus j stride: the same rows. All
// `count` (L or more) of them: a tail short of L is the last L entries, drawn again. The scalar loop drew a link in
// 6.2 ns on a Xeon (its three SplitMix64 hashes: 38% of a uniform-delay round at n = 2^18; 42% on an AVX2 EPYC, where
// the compiler makes the 64-bit products of three 32-bit ones: bench/RESULTS.md 71b).
template <class I>
struct AgeRow {
    const I* Aj;
    const std::int64_t* cols;
    std::int64_t count, i, gi;
    const std::uint64_t* key;
    const std::uint64_t* threshold;
    std::int64_t last, c0, c1, tm, D1, stride;
    std::int64_t* out;
};

template <int L, class I>
ROWSTOCH_INLINE void delayed_rows_lanes(const AgeRow<I>& row_of) {
    const I* const Aj = row_of.Aj;
    const std::int64_t* const cols = row_of.cols;
    const std::uint64_t* const key = row_of.key;
    const std::uint64_t* const threshold = row_of.threshold;
    const std::int64_t count = row_of.count, i = row_of.i, gi = row_of.gi, last = row_of.last, c0 = row_of.c0,
                       c1 = row_of.c1, tm = row_of.tm, D1 = row_of.D1, stride = row_of.stride;
    std::int64_t* const out = row_of.out;
    using U = typename Lanes<L>::u;
    using S = typename Lanes<L>::i;
    auto group = [&](std::int64_t q) ROWSTOCH_INLINE_LAMBDA {
        S j;
        if constexpr (sizeof(I) == 4) {
            typename Lanes<L>::narrow narrow;
            std::memcpy(&narrow, Aj + q, sizeof narrow);
            j = __builtin_convertvector(narrow, S);
        } else {
            std::memcpy(&j, Aj + q, sizeof j);
        }
        S g = j;
        if (cols)
            for (int l = 0; l < L; ++l) g[l] = cols[j[l]];
        S age = S{} + last;
        for (std::int64_t k = last - 1; k >= 0; --k) {  // (mix64 of key[k] ^ gj, lane by lane)
            U z = ((U)g ^ key[k]) + 0x9E3779B97F4A7C15ULL;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
            z ^= z >> 31;
            const S hit = (S)((z >> 11) < threshold[k]);
            age = (hit & k) | (~hit & age);
        }
        const S slot = (tm - age) + ((S)(age > tm) & D1);
        S row = c0 + slot * c1 + j * stride;
        const S self = (S)(g == gi);  // (a self loop reads its own row i)
        row = (self & i) | (~self & row);
        std::memcpy(out + q, &row, sizeof row);
    };
    std::int64_t q = 0;
    for (; q + L <= count; q += L) group(q);
    if (q < count) group(count - L);  // (the last L: the entries before the tail drawn again, the same rows)
}

template <class I>
ROWSTOCH_TARGET_AVX512 __attribute__((noinline)) void delayed_rows8(const AgeRow<I>& row) {
    delayed_rows_lanes<8>(row);
}

template <class I>
ROWSTOCH_TARGET_AVX2 __attribute__((noinline)) void delayed_rows4(const AgeRow<I>& row) {
    delayed_rows_lanes<4>(row);
}
#endif

// The row of the stacked block each entry of a delayed round reads, drawn in the mixing pass (mix.hpp's Rows
// policy, csr_mix_rows_by; one per thread, rows asked for in order): what delay_ages' index holds, without
// writing it. Row i + 1's entries are drawn while row i is gathered (three rows' buffers: the width-1 pass holds
// two readers) and the rows they read
// prefetched: drawn inside the gather loop, or just before a row's gathers, the pass took as long as
// delay_ages and the mix over its index (bench/RESULTS.md section 16).
template <class I>
struct DelayedRows {
    const I* Ap;
    const I* Aj;
    NodeIds ids;
    const DelayDraws* draws;
    const DelayOffsets* at;
    std::int64_t rows;
    const char* H;
    std::int64_t row_bytes;
    mutable std::vector<std::int64_t> buffers[3];
    mutable std::int64_t next = -1;  // the row drawn ahead (in buffers[next % 3]), -1 before the first

    struct Reader {
        const std::int64_t* rows;
        I first;
        std::int64_t operator()(I q) const { return rows[q - first]; }
    };

    void draw(std::int64_t i) const {
        std::vector<std::int64_t>& buffer = buffers[i % 3];
        const I first = Ap[i], end = Ap[i + 1];
        if (buffer.size() < static_cast<std::size_t>(end - first)) buffer.resize(static_cast<std::size_t>(end - first));
        const std::int64_t gi = ids.row(i);
        const DelayDraws::Row keys = draws->row(gi);
        std::int64_t* out = buffer.data();
        I begin = first;
#if ROWSTOCH_X86_DISPATCH
        const int lanes = simd_width();  // (2: the scalar loop below)
        if (draws->masked() && lanes >= 4 && end - first >= 4) {
            const DelayLayout& l = at->layout;
            const AgeRow<I> row{Aj + first, ids.cols, end - first, i, gi, keys.key, draws->thresholds(), draws->last(),
                                l.n_own + (l.node_major ? at->r : at->r * l.n_block),
                                l.node_major ? l.rounds : l.rounds * l.n_block, at->t % (at->D + 1), at->D + 1,
                                at->stride, out};
            (lanes == 8 && end - first >= 8 ? delayed_rows8<I> : delayed_rows4<I>)(row);  // (rows of 4-7 in fours)
            begin = end;
        }
#endif
        for (I q = begin; q < end; ++q) {
            const std::int64_t j = static_cast<std::int64_t>(Aj[q]), gj = ids.col(j);
            out[q - first] = gj == gi ? i : at->offset(keys.age(gj)) + j * at->stride;
        }
        for (I q = 0; q < end - first; ++q) {
            const char* p = H + out[q] * row_bytes;
            prefetch(p);
            prefetch(p + row_bytes - 1);
        }
    }

    Reader row(std::int64_t i) const {
        if (next != i) draw(i);  // (the first row, or rows out of order)
        next = i + 1;
        if (next < rows) draw(next);
        return Reader{buffers[i % 3].data(), Ap[i]};
    }
};

// The losses and sleep of a round (Lossy, Sleepy: csr_mix_lossy's arguments) under a delayed one.
struct LossyRound {
    std::uint64_t seed;
    double p;
    int rule;  // (LossRule)
    const std::uint8_t* awake;
    const std::uint8_t* bad;
};

// Y <- one delayed round (Delayed: each entry reads the newest message of its link that has arrived) over the
// stacked block H = [own rows; the last D + 1 iterations' messages] laid out as `layout` says: the static mix
// (with `lossy`, the lossy round) with the ages drawn in its pass (DelayedRows; the same sums as csr_mix or
// csr_mix_lossy over delay_ages' index, without writing and reading that index: uniform delays' rounds 1.3x
// faster at n = 2^18; a fixed delay's index, the same every D + 1 iterations, is better kept).
template <class I, class T>
void csr_mix_delayed(const I Ap[], const I Aj[], const T Ax[], std::int64_t rows, NodeIds ids, const T H[],
                     std::int64_t w, T Y[], std::uint64_t seed, std::uint64_t t, std::uint64_t r, std::int64_t D,
                     bool fixed, DelayLayout layout, const LossyRound* lossy = nullptr) {
    const DelayDraws draws(seed, t, r, D, fixed);
    const DelayOffsets at(layout, t, r, D, draws.last());
    auto make_rows = [&] {
        return DelayedRows<I>{Ap, Aj, ids, &draws, &at, rows, reinterpret_cast<const char*>(H),
                              w * static_cast<std::int64_t>(sizeof(T)), {}, -1};
    };
    if (lossy) {
        csr_mix_lossy_by(Ap, Aj, Ax, rows, H, w, Y, lossy->seed, t, r, lossy->p, lossy->rule, lossy->awake,
                         ids, lossy->bad, make_rows);
        return;
    }
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * std::max<std::int64_t>(w, fixed ? 1 : 4));
    for_rows(Ap, rows, threads,
             [&](std::int64_t lo, std::int64_t hi) { csr_mix_rows_by(Ap, make_rows(), Ax, H, w, lo, hi, Y); });
}

}  // namespace rowstoch
