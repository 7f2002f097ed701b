// Per-link running sums in one sweep over the links (robust push-sum: Hadjicostis, Dominguez-Garcia & Vaidya 2016;
// robust gradient-push, R-FAST; rowstoch_fast.backends' running_sums). For each stored entry p = (i, j) of a CSR
// matrix C (the link j -> i), a quantity X and its undelivered mass per link P (nnz x w):
//
//   Y_i        = sum_p  arrived_p C_p X_{j(p)}  +  sum_p arrived_p P_p        (CSR order, each sum from 0, added last)
//   P_out_p    = P_p + C_p X_{j(p)}   where the message p was lost,     0 where it arrived
//
// the two sums being, bit for bit, those of two csr_mix passes (weights C_p arrived_p over X, then arrived_p over
// P), and P_out what the lost links keep. `held[p]` says whether row p of P may hold anything: a row with
// held[p] == 0 is +0.0 throughout (an exact zero block stored densely) and is never read; `held_out` says the same
// of P_out and is brought up to date here. So the sweep touches a link's mass only where it exists (about the
// lost fraction of the links, twice: the rows that arrive and the rows two rounds old that it clears), never
// clears or reads the whole block, and P_out remains the exact dense block (zeros where nothing waits): the form
// the MPI backend and delayed or noisy links keep. Those rows are scattered, so the sweep asks for them kAhead links
// early. Below, compact_running_sums: the form the CPU backend keeps otherwise (the mass as a list of the links
// that hold any), whose rows are read and written as streams.
//
// Callers have checked every size and index (bindings.cpp's running_sums); nothing here throws or allocates.
#pragma once

#include <cstdint>

#include "network.hpp"
#include "parallel.hpp"

namespace rowstoch {

// One quantity of a sweep: X (ncols x w, the rows the entries read), Y (rows x w, written), P (nnz x w, read where
// held), P_out (nnz x w, written where needed), held (nnz, read), held_out (nnz, read and rewritten).
template <class T>
struct LinkSums {
    const T* X;
    std::int64_t w;
    T* Y;
    const T* P;
    T* P_out;
    const std::uint8_t* held;
    std::uint8_t* held_out;
};

// How many links ahead the sweep asks for the rows of a link's mass (prefetch: their misses overlap).
constexpr int kAhead = 16;

// Columns c0..c0+K of row i of one quantity (K a compile-time width: the accumulators in registers). A lost
// message's weight is +0 in the shares' sum (0 * X_j, as the weights C_p arrived_p of the two-pass form) and its
// mass 0 * P_p in the waited sum, so that a NaN or Inf travels exactly as it did there.
template <int K, class I, class T>
inline void link_row_chunk(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[],
                           const LinkSums<T>& b, std::int64_t i, std::int64_t c0, I limit) {
    const std::int64_t w = b.w;
    const I begin = Ap[i], end = Ap[i + 1];
    T share[K];
    for (int k = 0; k < K; ++k) share[k] = T(0);
    for (I p = begin; p < end; ++p) {
        // (the rows of a link ahead, where it has mass; the sum in 64 bits: int32 indices of a CSR with more than
        // 2^31 - 17 links had overflowed, helper 225)
        const I q = static_cast<std::int64_t>(p) + kAhead < static_cast<std::int64_t>(limit) ? p + kAhead : p;
        const T* in = b.held[q] ? b.P + static_cast<std::int64_t>(q) * w + c0 : b.X;
        const T* out = (b.held_out[q] | (arrived[q] ^ 1)) ? b.P_out + static_cast<std::int64_t>(q) * w + c0 : b.X;
        __builtin_prefetch(in);
        __builtin_prefetch(in + K - 1);
        __builtin_prefetch(out, 1);
        __builtin_prefetch(out + K - 1, 1);
        const T taken = Ax[p] * static_cast<T>(arrived[p]);
        const T* __restrict x = b.X + static_cast<std::int64_t>(Aj[p]) * w + c0;
        for (int k = 0; k < K; ++k) share[k] += taken * x[k];
    }
    T waited[K];
    for (int k = 0; k < K; ++k) waited[k] = T(0);
    for (I p = begin; p < end; ++p) {
        const bool got = arrived[p] != 0, held = b.held[p] != 0;
        if (got && !held && !b.held_out[p]) continue;
        const T* __restrict old = b.P + static_cast<std::int64_t>(p) * w + c0;
        T* __restrict keep = b.P_out + static_cast<std::int64_t>(p) * w + c0;
        if (got) {  // p_ij delivered: the receiver takes it, the link keeps nothing
            if (held)
                for (int k = 0; k < K; ++k) waited[k] += old[k];
            if (b.held_out[p])
                for (int k = 0; k < K; ++k) keep[k] = T(0);
            continue;
        }
        const T a = Ax[p];  // lost: p_ij <- p_ij + C_ij x_j
        const T* __restrict x = b.X + static_cast<std::int64_t>(Aj[p]) * w + c0;
        if (held) {
            for (int k = 0; k < K; ++k) {
                waited[k] += T(0) * old[k];
                keep[k] = old[k] + a * x[k];
            }
        } else {
            for (int k = 0; k < K; ++k) keep[k] = T(0) + a * x[k];
        }
    }
    T* __restrict y = b.Y + i * w + c0;
    for (int k = 0; k < K; ++k) y[k] = share[k] + waited[k];
}

// Widest register chunk of a row; wider quantities go in chunks of this many columns and one tail.
constexpr int kLinkChunk = 16;

template <class I, class T>
inline void link_row_tail(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[],
                          const LinkSums<T>& b, std::int64_t i, std::int64_t c0, int K, I limit) {
    switch (K) {
#define ROWSTOCH_LINK_TAIL(K) \
    case K: link_row_chunk<K>(Ap, Aj, Ax, arrived, b, i, c0, limit); break;
        ROWSTOCH_LINK_TAIL(1) ROWSTOCH_LINK_TAIL(2) ROWSTOCH_LINK_TAIL(3) ROWSTOCH_LINK_TAIL(4)
        ROWSTOCH_LINK_TAIL(5) ROWSTOCH_LINK_TAIL(6) ROWSTOCH_LINK_TAIL(7) ROWSTOCH_LINK_TAIL(8)
        ROWSTOCH_LINK_TAIL(9) ROWSTOCH_LINK_TAIL(10) ROWSTOCH_LINK_TAIL(11) ROWSTOCH_LINK_TAIL(12)
        ROWSTOCH_LINK_TAIL(13) ROWSTOCH_LINK_TAIL(14) ROWSTOCH_LINK_TAIL(15) ROWSTOCH_LINK_TAIL(16)
#undef ROWSTOCH_LINK_TAIL
        default: break;
    }
}

// Rows lo..hi-1 of one quantity, then its held_out flags: a link holds mass after the round where its message was
// lost (never a self loop: it always arrives).
template <class I, class T>
inline void link_rows(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[], const LinkSums<T>& b,
                      std::int64_t lo, std::int64_t hi) {
    const std::int64_t w = b.w, full = w - w % kLinkChunk;
    const int tail = static_cast<int>(w % kLinkChunk);
    const I limit = Ap[hi];
    for (std::int64_t i = lo; i < hi; ++i) {
        for (std::int64_t c0 = 0; c0 < full; c0 += kLinkChunk)
            link_row_chunk<kLinkChunk>(Ap, Aj, Ax, arrived, b, i, c0, limit);
        if (tail) link_row_tail(Ap, Aj, Ax, arrived, b, i, full, tail, limit);
    }
    for (I p = Ap[lo]; p < Ap[hi]; ++p) b.held_out[p] = arrived[p] ? 0 : 1;
}

// Rows handled together before the sweep moves to the next quantity: the CSR entries and the arrivals of a tile
// stay in cache while every quantity reads them.
constexpr std::int64_t kLinkTile = 128;

// One round of running sums over the `rows`-row CSR (Ap, Aj, Ax) for the `count` quantities `blocks`, the messages
// p with arrived[p] != 0 delivered (rows split over threads by their links).
template <class I, class T>
void link_running_sums(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[], std::int64_t rows,
                       const LinkSums<T> blocks[], int count) {
    std::int64_t width = 0;
    for (int q = 0; q < count; ++q) width += blocks[q].w;
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * (width + 1));
    for_rows(Ap, rows, threads, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t start = lo; start < hi; start += kLinkTile) {
            const std::int64_t stop = start + kLinkTile < hi ? start + kLinkTile : hi;
            for (int q = 0; q < count; ++q) link_rows(Ap, Aj, Ax, arrived, blocks[q], start, stop);
        }
    });
}

}  // namespace rowstoch

namespace rowstoch {

// ---------------------------------------------------------------- the mass kept by the lost links only
// The same round with the undelivered mass held compactly: only the links that hold mass have a row, in increasing
// link order (ids: their stored entries p, rows: their w values; every other link holds exactly +0.0). A round
// reads the `m_in` rows of the links that held mass and writes one row per link whose message is lost now, both
// in link order (two streams, no clears, no scattered misses). Per row: the shares over every link (a mix), then
// the held links' rows (the list's next entries), then the lost links (found 64 at a time as bits), so that the
// branches go by the events, not by the links:
//
//   Y_i          = sum_p arrived_p C_p X_{j(p)}  +  sum_{p held} arrived_p P_p      (as link_running_sums)
//   ids_out, P_out  = the lost links p in order, P_p + C_p X_{j(p)} (P_p = 0 where p held nothing)
template <class T>
struct CompactLinkSums {
    const T* X;
    std::int64_t w;
    T* Y;
    const std::int64_t* ids_in;  // m_in increasing link ids
    std::int64_t m_in;
    const T* P;                  // m_in x w
    std::int64_t* ids_out;       // room for every link
    T* P_out;
};

// Columns c0..c0+K of row i of one quantity; `in` / `out`: the positions of the next held row and of the next row
// written (advanced past row i's links when the last chunk of the row is done, `last`).
template <int K, class I, class T>
inline void compact_row_chunk(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[],
                              const CompactLinkSums<T>& b, std::int64_t i, std::int64_t c0, std::int64_t& in,
                              std::int64_t& out, bool last) {
    const std::int64_t w = b.w;
    const I begin = Ap[i], end = Ap[i + 1];
    T* __restrict y = b.Y + i * w + c0;
    {
        T share[K];
        for (int k = 0; k < K; ++k) share[k] = T(0);
        for (I p = begin; p < end; ++p) {  // the shares: a lost message's weight is 0 * C_p, as in the two-pass form
            const T taken = Ax[p] * static_cast<T>(arrived[p]);
            const T* __restrict x = b.X + static_cast<std::int64_t>(Aj[p]) * w + c0;
            for (int k = 0; k < K; ++k) share[k] += taken * x[k];
        }
        for (int k = 0; k < K; ++k) y[k] = share[k];
    }
    std::int64_t stop = in;  // the held links of this row: ids_in[in:stop]
    while (stop < b.m_in && b.ids_in[stop] < static_cast<std::int64_t>(end)) ++stop;
    if (stop != in) {  // what waited: arrived_p P_p in link order (0 * P_p where lost; a row that held nothing
        T waited[K];   // takes share + 0 = share, the shares' sum never being -0)
        for (int k = 0; k < K; ++k) waited[k] = T(0);
        for (std::int64_t h = in; h < stop; ++h) {
            const T got = static_cast<T>(arrived[b.ids_in[h]]);
            const T* __restrict old = b.P + h * w + c0;
            for (int k = 0; k < K; ++k) waited[k] += got * old[k];
        }
        for (int k = 0; k < K; ++k) y[k] = y[k] + waited[k];
    }
    std::int64_t h = in, put = out;
    const T none[K] = {};
    for (I first = begin; first < end; first += 64) {  // the lost links, 64 at a time as bits
        const int span = end - first < 64 ? static_cast<int>(end - first) : 64;
        std::uint64_t lost = 0;
        for (int j = 0; j < span; ++j) lost |= static_cast<std::uint64_t>(arrived[first + j] == 0) << j;
        while (lost) {  // lost: p_ij <- p_ij + C_ij x_j
            const I p = first + static_cast<I>(__builtin_ctzll(lost));
            lost &= lost - 1;
            while (h < stop && b.ids_in[h] < static_cast<std::int64_t>(p)) ++h;
            const T* __restrict old = h < stop && b.ids_in[h] == static_cast<std::int64_t>(p) ? b.P + h * w + c0 : none;
            const T a = Ax[p];
            const T* __restrict x = b.X + static_cast<std::int64_t>(Aj[p]) * w + c0;
            T* __restrict keep = b.P_out + put * w + c0;
            for (int k = 0; k < K; ++k) keep[k] = old[k] + a * x[k];
            if (last) b.ids_out[put] = static_cast<std::int64_t>(p);
            ++put;
        }
    }
    if (last) {
        in = stop;
        out = put;
    }
}

template <class I, class T>
inline void compact_row_tail(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[],
                             const CompactLinkSums<T>& b, std::int64_t i, std::int64_t c0, int K, std::int64_t& in,
                             std::int64_t& out) {
    switch (K) {
#define ROWSTOCH_COMPACT_TAIL(K) \
    case K: compact_row_chunk<K>(Ap, Aj, Ax, arrived, b, i, c0, in, out, true); break;
        ROWSTOCH_COMPACT_TAIL(1) ROWSTOCH_COMPACT_TAIL(2) ROWSTOCH_COMPACT_TAIL(3) ROWSTOCH_COMPACT_TAIL(4)
        ROWSTOCH_COMPACT_TAIL(5) ROWSTOCH_COMPACT_TAIL(6) ROWSTOCH_COMPACT_TAIL(7) ROWSTOCH_COMPACT_TAIL(8)
        ROWSTOCH_COMPACT_TAIL(9) ROWSTOCH_COMPACT_TAIL(10) ROWSTOCH_COMPACT_TAIL(11) ROWSTOCH_COMPACT_TAIL(12)
        ROWSTOCH_COMPACT_TAIL(13) ROWSTOCH_COMPACT_TAIL(14) ROWSTOCH_COMPACT_TAIL(15) ROWSTOCH_COMPACT_TAIL(16)
#undef ROWSTOCH_COMPACT_TAIL
        default: break;
    }
}

template <class I, class T>
inline void compact_rows(const I Ap[], const I Aj[], const T Ax[], const std::uint8_t arrived[],
                         const CompactLinkSums<T>& b, std::int64_t lo, std::int64_t hi, std::int64_t& in,
                         std::int64_t& out) {
    const std::int64_t w = b.w, full = w - w % kLinkChunk;
    const int tail = static_cast<int>(w % kLinkChunk);
    for (std::int64_t i = lo; i < hi; ++i) {
        for (std::int64_t c0 = 0; c0 < full; c0 += kLinkChunk)
            compact_row_chunk<kLinkChunk>(Ap, Aj, Ax, arrived, b, i, c0, in, out, !tail && c0 + kLinkChunk == full);
        if (tail) compact_row_tail(Ap, Aj, Ax, arrived, b, i, full, tail, in, out);
    }
}

// Rows of part `part` of `parts` (split by links, as balanced_rows does for threads).
template <class I>
inline void link_part(const I Ap[], std::int64_t rows, std::int64_t part, std::int64_t parts, std::int64_t& lo,
                      std::int64_t& hi) {
    balanced_rows(Ap, rows, static_cast<int>(part), static_cast<int>(parts), lo, hi);
}

// The round's Bernoulli losses drawn in the sweep (network.hpp's lost_links, no Gilbert-Elliott gates): arrived[p]
// = 1 where the message arrives (a self loop always), written before the part reads it.
struct LinkDraws {
    std::uint64_t seed, t, r;
    double p;
    NodeIds ids;
};

// One round for the `count` quantities `blocks` over `parts` parts of the rows (work: parts * (count + 1) int64,
// given by the caller). With `draws`, `arrived` is written first (each part's links by the thread that then reads
// them), else read. Returns how many links now hold mass (the rows written to each ids_out / P_out).
template <class I, class T>
std::int64_t compact_running_sums(const I Ap[], const I Aj[], const T Ax[], std::uint8_t arrived[],
                                  std::int64_t rows, const CompactLinkSums<T> blocks[], int count, std::int64_t parts,
                                  std::int64_t work[], const LinkDraws* draws = nullptr) {
    std::int64_t width = 0;
    for (int q = 0; q < count; ++q) width += blocks[q].w;
    const int threads = threads_for(static_cast<std::int64_t>(Ap[rows]) * (width + 1));
    std::int64_t* lost = work;              // per part: its lost links, then where its rows go
    std::int64_t* start = work + parts;     // per part and quantity: its first held row
    for_range(parts, threads, [&](std::int64_t a, std::int64_t z) {
        for (std::int64_t part = a; part < z; ++part) {
            std::int64_t lo, hi;
            link_part(Ap, rows, part, parts, lo, hi);
            if (draws) {  // uniform_hash(seed, t, r, i, j) < p loses j -> i (i != j)
                const std::uint64_t round = hash_prefix(draws->seed, draws->t, draws->r);
                const std::uint64_t threshold = loss_threshold(draws->p);
                for (std::int64_t i = lo; i < hi; ++i) {
                    const std::int64_t gi = draws->ids.row(i);
                    const std::uint64_t row = mix64(round ^ static_cast<std::uint64_t>(gi));
                    for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
                        const std::int64_t gj = draws->ids.col(static_cast<std::int64_t>(Aj[q]));
                        arrived[q] = gj == gi || (mix64(row ^ static_cast<std::uint64_t>(gj)) >> 11) >= threshold;
                    }
                }
            }
            std::int64_t c = 0;
            for (I p = Ap[lo]; p < Ap[hi]; ++p) c += arrived[p] == 0;
            lost[part] = c;
            const std::int64_t first = static_cast<std::int64_t>(Ap[lo]);
            for (int q = 0; q < count; ++q) {  // the first held row at or after the part's first link
                std::int64_t s = 0, e = blocks[q].m_in;
                while (s < e) {
                    const std::int64_t m = s + (e - s) / 2;
                    if (blocks[q].ids_in[m] < first) s = m + 1;
                    else e = m;
                }
                start[part * count + q] = s;
            }
        }
    });
    std::int64_t total = 0;
    for (std::int64_t part = 0; part < parts; ++part) {
        const std::int64_t c = lost[part];
        lost[part] = total;
        total += c;
    }
    for_range(parts, threads, [&](std::int64_t a, std::int64_t z) {
        for (std::int64_t part = a; part < z; ++part) {
            std::int64_t lo, hi;
            link_part(Ap, rows, part, parts, lo, hi);
            std::int64_t in[8], out[8];
            for (int q = 0; q < count; ++q) {
                in[q] = start[part * count + q];
                out[q] = lost[part];
            }
            for (std::int64_t s = lo; s < hi; s += kLinkTile) {
                const std::int64_t e = s + kLinkTile < hi ? s + kLinkTile : hi;
                for (int q = 0; q < count; ++q) compact_rows(Ap, Aj, Ax, arrived, blocks[q], s, e, in[q], out[q]);
            }
        }
    });
    return total;
}

}  // namespace rowstoch
