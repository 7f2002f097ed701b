// An LRU model of the L2 cache during one gossip round of the circulant kernel (backends/kernels.cu, CIRC) on
// the exponential graph: how many times X is read from DRAM, with and without the kernel's cache hints. A
// model, not a GPU: it predicts what Nsight Compute's dram__bytes_read should show (bench/RESULTS.md 9f).
//
//   g++ -O2 -o /tmp/l2_model bench/l2_model.cpp
//   /tmp/l2_model LOG2N [L2_MB] [D] [IN_FLIGHT] [HINT_BYTES]
//
// The rows go through in order, IN_FLIGHT rows at a time (default 50,000: an H100 keeps ~270,000 threads of
// 16-byte packs, 5 per row at d = 10), each group's loads offset by offset (the threads of a group load the
// same offset at about the same time), then the group's stores of Y. The cache: L2_MB of 32-byte sectors,
// least recently used out first (default 30 MB: the capacity that reproduces the 3.5 reads of X per round
// that Nsight Compute measured at n = 2^20 without hints on an H100, whose L2 holds 50 MB). Hinted (a load
// of an offset of at least HINT_BYTES bytes of rows, and every store, when there is such an offset; default
// a quarter of 50 MiB, as backends/cupy.py's L2_HINTS): a miss goes in at the end evicted first, a hit moves
// the sector there (as st/ld .cs: evict first). Prints DRAM reads of X per round, as multiples of X, without
// and with the hints (the second of two rounds, so the cache starts as the first left it; first round in
// parentheses). The wrapped reads of the first rows are hinted like the far offsets, as in the kernel.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

namespace {

class Lru {
  public:
    Lru(int64_t lines, int64_t capacity) : prev_(lines, -1), next_(lines, -1), in_(lines, 0), capacity_(capacity) {}
    // Touch sector x; `first_out`: a miss goes in, and a hit moves, to the end evicted first. True on a hit.
    bool touch(int64_t x, bool first_out) {
        const bool hit = in_[x];
        if (hit)
            unlink(x);
        else if (size_ == capacity_)
            evict();
        if (!hit) {
            in_[x] = 1;
            ++size_;
        }
        if (first_out)
            push_back(x);
        else
            push_front(x);
        return hit;
    }

  private:
    void unlink(int64_t x) {
        (prev_[x] >= 0 ? next_[prev_[x]] : head_) = next_[x];
        (next_[x] >= 0 ? prev_[next_[x]] : tail_) = prev_[x];
    }
    void push_front(int64_t x) {
        prev_[x] = -1;
        next_[x] = head_;
        (head_ >= 0 ? prev_[head_] : tail_) = x;
        head_ = x;
    }
    void push_back(int64_t x) {
        next_[x] = -1;
        prev_[x] = tail_;
        (tail_ >= 0 ? next_[tail_] : head_) = x;
        tail_ = x;
    }
    void evict() {
        const int64_t t = tail_;
        unlink(t);
        in_[t] = 0;
        --size_;
    }
    std::vector<int64_t> prev_, next_;
    std::vector<char> in_;
    int64_t head_ = -1, tail_ = -1, size_ = 0, capacity_;
};

// DRAM reads of X (sectors) in rounds 1 and 2.
std::pair<int64_t, int64_t> rounds(int64_t n, double l2_mb, int64_t row_bytes, int64_t in_flight, int64_t hint) {
    const int64_t sector = 32, x_sectors = (n * row_bytes + sector - 1) / sector;
    Lru cache(2 * x_sectors + 2, static_cast<int64_t>(l2_mb * 1e6) / sector);
    std::vector<int64_t> offsets;  // as in circulant_offsets: decreasing, 0 last
    for (int64_t d = int64_t(1) << 62; d > 0; d >>= 1)
        if (d < n) offsets.push_back(d);
    offsets.push_back(0);
    const bool any_far = hint > 0 && offsets[0] * row_bytes >= hint;
    auto touch_row = [&](int64_t base, int64_t row, bool first_out) {
        int64_t missed = 0;
        for (int64_t s = row * row_bytes / sector; s <= (row * row_bytes + row_bytes - 1) / sector; ++s)
            missed += !cache.touch(base + s, first_out);
        return missed;
    };
    int64_t missed[2] = {0, 0};
    for (int round = 0; round < 2; ++round)
        for (int64_t g = 0; g < n; g += in_flight) {
            const int64_t end = std::min(n, g + in_flight);
            for (int64_t d : offsets)
                for (int64_t i = g; i < end; ++i) {
                    const bool far = any_far && (d * row_bytes >= hint || d > i);
                    missed[round] += touch_row(0, ((i - d) % n + n) % n, far);
                }
            for (int64_t i = g; i < end; ++i) touch_row(x_sectors + 1, i, any_far);  // Y (its misses: writes)
        }
    return {missed[0], missed[1]};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s LOG2N [L2_MB=30] [D=10] [IN_FLIGHT=50000] [HINT_BYTES=13107200]\n", argv[0]);
        return 2;
    }
    const int log2n = std::atoi(argv[1]);
    const double l2_mb = argc > 2 ? std::atof(argv[2]) : 30.0;
    const int64_t d = argc > 3 ? std::atoll(argv[3]) : 10, in_flight = argc > 4 ? std::atoll(argv[4]) : 50000;
    const int64_t hint = argc > 5 ? std::atoll(argv[5]) : 50 * 1024 * 1024 / 4;
    if (log2n < 4 || log2n > 26 || l2_mb <= 0 || d < 1 || in_flight < 1 || hint < 1) {
        std::fprintf(stderr, "LOG2N in [4, 26], L2_MB, D, IN_FLIGHT and HINT_BYTES positive\n");
        return 2;
    }
    const int64_t n = int64_t(1) << log2n, row_bytes = 8 * d;
    const double x_sectors = static_cast<double>(n * row_bytes) / 32;
    const auto plain = rounds(n, l2_mb, row_bytes, in_flight, 0), hinted = rounds(n, l2_mb, row_bytes, in_flight, hint);
    std::printf("n = 2^%d, d = %lld, L2 %g MB, %lld rows in flight: X read %.2f times per round without hints "
                "(%.2f), %.2f with hints of %lld bytes (%.2f)\n",
                log2n, static_cast<long long>(d), l2_mb, static_cast<long long>(in_flight), plain.second / x_sectors,
                plain.first / x_sectors, hinted.second / x_sectors, static_cast<long long>(hint),
                hinted.first / x_sectors);
    return 0;
}
