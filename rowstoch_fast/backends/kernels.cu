// CUDA kernels of the CuPy backend, compiled at run time by NVRTC (cupy.RawModule):
// the wheel needs no CUDA toolkit. Instantiated for float/double values and
// int/long long CSR indices. Compiled with --fmad=false so the float64 results
// round like the CPU kernels (same sums in the same order).
//
// Layouts match the CPU side: dense blocks are row-major n x w, node-major.
//
// (A row-per-thread mixing kernel, the row's values in registers, was measured at
// half the speed of "entry" on an H100 at n = 2^20, d = 10: bench/RESULTS.md.)

typedef long long i64;
typedef unsigned long long u64;

// ------------------------------------------------------------------ run status
// status[0] holds the id of the first *checked* launch that produced a NaN or Inf
// (0: none yet). Checked launches (the NaN/Inf checks of an optimizer) have ids
// >= 1; every other launch passes 0. A launch returns at once when an earlier
// launch failed, so the state stays at the last finite iterate while the host
// goes on queueing work: it reads status only every few steps (no per-step sync).
// A null status pointer turns both off.
// The status word is read as one volatile load; the host emulation (tests/cuda_on_host.cpp) brings atomic
// load_word / store_word of its own (ROWSTOCH_HOST_LOADS), so that ThreadSanitizer checks the kernels' own
// synchronisation.
#ifndef ROWSTOCH_HOST_LOADS
template <typename W>
__device__ __forceinline__ W load_word(const W* p) { return *(const volatile W*)p; }
#endif

__device__ __forceinline__ bool frozen(const u64* status, u64 launch) {
    if (!status) return false;
    const u64 s = load_word(status);
    return s != 0 && s != launch;
}

__device__ __forceinline__ void report(u64* status, u64 launch) {
    if (status && launch) atomicCAS(status, 0ULL, launch);
}

// A kernel's dynamic shared memory (the host emulation guards the bytes past a launch's own).
#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

// ------------------------------------------------------------------ mixing
// Y[i, c] = sum_p Ax[p] X[Aj[p], c], summed over p in CSR order starting from 0
// (the CPU kernels' order), in every variant below.

// V consecutive values, aligned to their size: one 8- or 16-byte load or store when V > 1.
template <typename T, int V>
struct alignas(V * sizeof(T)) Pack {
    T v[V];
};

// A pack at an address that is not a multiple of its size is a GPU's misaligned-address fault; the host
// emulation counts them (PACK_ALIGNED), a GPU compiles nothing for it.
#ifndef PACK_ALIGNED
#define PACK_ALIGNED(p, bytes)
#endif

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
    PACK_ALIGNED(p, sizeof(Pack<T, V>));
    return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const T* v) {
    Pack<T, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = v[k];
    PACK_ALIGNED(p, sizeof(Pack<T, V>));
    *reinterpret_cast<Pack<T, V>*>(p) = r;
}

// The row i and first column c of the V entries of an n x w block that this thread of a mixing kernel
// computes, their sums acc zeroed; false past the block's end or once an earlier check has failed (see
// "run status").
template <typename T, int V>
__device__ __forceinline__ bool mixing_thread(i64 n, i64 w, const u64* status, i64& i, i64& c, T* acc) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 groups = w / V;
    if (tid >= n * groups || frozen(status, 0)) return false;
    i = tid / groups;
    c = (tid - i * groups) * V;
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0;
    return true;
}

// "entry": one thread per V consecutive entries of a row (w % V == 0; V = 1: any w), V values as one
// 8- or 16-byte load; the threads of a row read its CSR entries together (one broadcast load), the
// gathered rows are read by consecutive threads (coalesced). U > 1: the loads of U neighbours are issued
// before their products are added (more bytes in flight; the sum keeps its order).
// ROW: every stored weight of row i equals Ax[i] (Ax then holds n per-row weights, not the CSR's values:
// the in-degree rule's matrices), so the values array is not read, 8 or 4 bytes less per nonzero; the
// products, hence the sums, are the same bits.
template <typename T, typename I, int V, int U, bool ROW = false>
__device__ void csr_mix_entry(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                              const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* status) {
    i64 i, c;
    T acc[V];
    if (!mixing_thread<T, V>(n, w, status, i, c, acc)) return;
    const T* Xc = X + c;
    const T row_weight = ROW ? Ax[i] : T(0);  // (ROW: one load per row)
    I p = Ap[i];
    const I end = Ap[i + 1];
    if (U > 1) {
        for (; p + U <= end; p += U) {
            T a[U];
            Pack<T, V> x[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                a[u] = ROW ? row_weight : Ax[p + u];
                x[u] = load_pack<T, V>(Xc + (i64)Aj[p + u] * w);
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int k = 0; k < V; ++k) acc[k] += a[u] * x[u].v[k];
        }
    }
    for (; p < end; ++p) {
        const T a = ROW ? row_weight : Ax[p];
        const Pack<T, V> x = load_pack<T, V>(Xc + (i64)Aj[p] * w);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += a * x.v[k];
    }
    store_pack<T, V>(Y + i * w + c, acc);
}

// acc += a * (the V values at base - D[q] * w) for q = q .. end - 1 in order, U loads in flight
// (own: a compressed round's own rows, read for the offset 0, the self loop; null: X's)
template <typename T, typename I, int V, int U>
__device__ __forceinline__ void circ_sum(const T* base, const I* __restrict__ D, I q, const I end, const i64 w,
                                         const T a, T* acc, const T* own = nullptr) {
    for (; q + U <= end; q += U) {
        Pack<T, V> x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = load_pack<T, V>((own && D[q + u] == 0 ? own : base) - (i64)D[q + u] * w);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] += a * x[u].v[k];
    }
    for (; q < end; ++q) {
        const Pack<T, V> x = load_pack<T, V>((own && D[q] == 0 ? own : base) - (i64)D[q] * w);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += a * x.v[k];
    }
}

// CIRC: a circulant matrix with one weight (the exponential graph, the ring, under the in-degree rule): row
// i's neighbours are i - D[k] (mod n) for the m offsets D, strictly decreasing, in Aj (Ap = {0, m}, Ax =
// {the weight}). Its CSR order (columns ascending) is the offsets <= i (columns i - D[k], no wrap), then
// those above i (columns i + n - D[k]): two runs of circ_sum. Only X is read (and Y written): neither the
// CSR's indices nor its values; the same products in the same order as "entry", hence the same bits.
// With Xown (a compressed round: X holds the messages), the offset 0 reads the node's own row there.
template <typename T, typename I, int V, int U>
__device__ void csr_mix_circ(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                             const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* status,
                             const T* __restrict__ Xown = nullptr) {
    i64 i, c;
    T acc[V];
    if (!mixing_thread<T, V>(n, w, status, i, c, acc)) return;
    const T a = Ax[0];
    const I m = Ap[1];
    I first = 0;  // the number of offsets above i
    while (first < m && (i64)Aj[first] > i) ++first;
    const T* here = X + i * w + c;
    circ_sum<T, I, V, U>(here, Aj, first, m, w, a, acc, Xown ? Xown + i * w + c : nullptr);
    circ_sum<T, I, V, U>(here + n * w, Aj, 0, first, w, a, acc);  // (offsets above i: never 0)
    store_pack<T, V>(Y + i * w + c, acc);
}

// ------------------------------------------------------------------ combine
// out[i, c] = sum_t a_t x_t[i, c] for K <= 4 terms, a_t = r_t[i] (a per-row coefficient) when r_t is not
// null, else the scalar c_t; summed left to right as the CPU's combine (gt.hpp), so with --fmad=false the
// bits are the same. A term may be out itself (each thread reads its element before writing it). A NaN or
// Inf in out is reported on status under this launch's id (see "run status").
template <typename T>
__device__ void combine_impl(const T* x0, const T* x1, const T* x2, const T* x3, const T* r0, const T* r1,
                             const T* r2, const T* r3, T c0, T c1, T c2, T c3, int K, T* out, i64 n, i64 w,
                             u64* status, u64 launch) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n * w || frozen(status, launch)) return;
    i64 i = tid / w;
    T v = (r0 ? r0[i] : c0) * x0[tid];
    if (K > 1) v = v + (r1 ? r1[i] : c1) * x1[tid];
    if (K > 2) v = v + (r2 ? r2[i] : c2) * x2[tid];
    if (K > 3) v = v + (r3 ? r3[i] : c3) * x3[tid];
    out[tid] = v;
    if (!(v - v == T(0))) report(status, launch);
}

// --------------------------------------------------------------------- objective
__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 stream_key(u64 seed, u64 rep, u64 node, u64 iteration, u64 batch) {
    u64 k = mix64(seed);
    k = mix64(k ^ rep);
    k = mix64(k ^ node);
    k = mix64(k ^ iteration);
    return mix64(k ^ batch);
}

// The CPU's Stream: next() = mix64(key + k * golden); bounds up to 2^12 take 16
// bits and bounds below 2^32 take 32 bits from a pool (low bits first, refilled
// by a fresh output when it holds too few), larger bounds whole outputs.
struct Stream {
    u64 key, counter, pool;
    int pool_bits;
};

// Output `counter` (1, 2, ...) of the stream `key`: counter-based, so any lane can take any output.
__device__ __forceinline__ u64 stream_output(u64 key, u64 counter) {
    return mix64(key + 0x9E3779B97F4A7C15ULL * counter);
}

__device__ __forceinline__ u64 stream_next(Stream* s) {
    s->counter += 1;
    return stream_output(s->key, s->counter);
}

__device__ __forceinline__ u64 stream_bits(Stream* s, int bits) {
    if (s->pool_bits < bits) {
        s->pool = stream_next(s);
        s->pool_bits = 64;
    }
    const u64 r = s->pool & ((1ULL << bits) - 1);
    s->pool >>= bits;
    s->pool_bits -= bits;
    return r;
}

// Uniform integer in [0, bound): Lemire's multiply-shift with rejection (as on the CPU).
__device__ __forceinline__ u64 below(Stream* s, u64 bound) {
    if (bound <= 0xFFFFFFFFULL) {
        const int bits = bound <= (1ULL << 12) ? 16 : 32;
        const u64 mask = (1ULL << bits) - 1;
        for (;;) {
            const u64 m = stream_bits(s, bits) * bound;
            const u64 lo = m & mask;
            if (lo >= bound || lo >= ((mask + 1) - bound) % bound) return m >> bits;
        }
    }
    for (;;) {
        u64 x = stream_next(s);
        u64 lo = x * bound;
        if (lo >= bound || lo >= (0ULL - bound) % bound) return __umul64hi(x, bound);
    }
}

// 1 / (1 + exp(z)) exactly as the CPU's rowstoch::logistic_weight (csrc/rowstoch/simd.hpp)
// computes each lane: the same IEEE operations in the same order (--fmad=false), no libm.
__device__ __forceinline__ double logistic_weight(double z) {
    const double a = -fabs(z);
    const double magic = 6755399441055744.0;  // 1.5 * 2^52
    const double t = a * 1.4426950408889634 + magic;
    const double nf = t - magic;
    const double r = (a - nf * 6.93147180369123816490e-01) - nf * 1.90821492927058770002e-10;
    double p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const u64 n = (u64)(__double_as_longlong(t) - __double_as_longlong(magic));
    const double scale = __longlong_as_double((i64)((n + 1023ULL) << 52));
    const double e = nf < -1022.0 ? 0.0 : p * scale;
    const double num = z > 0.0 ? e : 1.0;
    return num / (1.0 + e);
}

// "lossy": the entry kernel of a gossip round of rowstoch_fast.network (csrc/rowstoch/network.hpp on the
// CPU, the same operations in the same order): message j -> i (j != i) lost when its hash under the round's
// key (network.uniform_hash's chain over seed, t, r, computed on the host) is below p, or when j sleeps; a
// sleeping node keeps x_i; rows that lost something are renormalised over what arrived when `renormalise`.
// With a `bad` mask (Gilbert-Elliott) only flagged entries can be lost. A lost message adds 0 * x_j (as on
// the CPU).
// Message networks (see "message networks" below) add: `Xown` (a node's own current rows: its self loop, and
// what a sleeping or cut-off node keeps), X then holding the messages (row j: node j's); delays (`Delays`:
// X is the history, entry q reading the newest message that has arrived, delay_age); and per-link noise
// (`sent` not null: the keys of the iterations t - age): each entry's copy gets sigma z (link_noise_value),
// summed through the same weights and renormalisation as a second sum and added at the end (the CPU's second
// weighted pass and `out += noise`); with `noise_only`, X is not read and the noise is added to Y (a further
// noisy layer).
struct Delays {
    const u64* keys;        // keys[k] = hash_prefix(seed, 3 2^61 + t - k, r), k < last (null: fixed delays)
    const u64* thresholds;  // loss_threshold((k + 1) / (D + 1)), k < last
    const i64* slot;        // slot[a]: the history's slot of the message of age a, a <= last (null: no delays)
    i64 last;               // min(D, t)
    i64 slots;              // node j's message of age a is row n + j slots + slot[a]: a history node by node,
                            // slots = (D + 1) R; iteration by iteration, slots = 1 and slot[a] scaled by n
    const unsigned char* ages;  // ages[q], drawn beforehand by delay_ages_rows (null: drawn in the pass)
};

// The age of the newest message of the link j -> i that has arrived (network.hpp's delay_ages): the first k
// whose draw says the message of t - k has arrived by t, else the oldest kept.
__device__ __forceinline__ i64 delay_age(const Delays& d, i64 i, i64 j) {
    if (j == i) return 0;
    if (d.keys)
        for (i64 k = 0; k < d.last; ++k)
            if ((mix64(mix64(d.keys[k] ^ (u64)i) ^ (u64)j) >> 11) < d.thresholds[k]) return k;
    return d.last;
}

// Every stored entry's age, one thread per row (delay_age's draws once per link, instead of once per thread of
// the mixing pass: a row's w / V threads drew them each), as bytes (max_delay <= 255) for csr_mix_messages.
template <typename I>
__device__ void delay_ages_rows_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, i64 rows,
                                     const u64* __restrict__ keys, const u64* __restrict__ thresholds, i64 last,
                                     unsigned char* __restrict__ ages, const u64* status) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows || frozen(status, 0)) return;
    const Delays d = Delays{keys, thresholds, nullptr, last, 0, nullptr};
    for (I q = Ap[i]; q < Ap[i + 1]; ++q) ages[q] = (unsigned char)delay_age(d, i, (i64)Aj[q]);
}

template <typename T>
__device__ __forceinline__ T link_noise_value(u64 link, i64 c, T sigma);

template <typename T, typename I, int V>
__device__ void csr_mix_lossy_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                                   const T* __restrict__ X, T* Y, i64 n, i64 w, const u64* status,
                                   u64 round_key, double p, const double* __restrict__ ps, int renormalise,
                                   const unsigned char* __restrict__ awake,
                                   const unsigned char* __restrict__ bad, const T* __restrict__ Xown = nullptr,
                                   Delays delays = Delays{nullptr, nullptr, nullptr, 0, 0, nullptr},
                                   const u64* __restrict__ sent = nullptr, T sigma = T(0), int noise_only = 0,
                                   const double* __restrict__ sigmas = nullptr) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 groups = w / V;
    if (tid >= n * groups || frozen(status, 0)) return;
    const i64 i = tid / groups, c = (tid - i * groups) * V;
    const T* own = (Xown ? Xown : X) + i * w + c;
    T acc[V], noise[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
        acc[v] = 0;
        noise[v] = 0;
    }
    if (awake && !awake[i]) {  // asleep: keeps x_i (and gets no noise)
        const Pack<T, V> x = load_pack<T, V>(noise_only ? Y + i * w + c : own);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = x.v[v];
    } else {
        const u64 row = mix64(round_key ^ (u64)i);
        T den = 0;
        bool lost = false;
        const I end = Ap[i + 1];
        for (I q = Ap[i]; q < end; ++q) {
            const i64 j = (i64)Aj[q];
            const double p_j = ps ? ps[j] : p;  // (one per node: the sender's, as the CPU's NodeIds::thresholds)
            const bool gone = j != i && ((awake && !awake[j]) ||
                                         ((!bad || bad[q]) && p_j > 0.0 &&
                                          (double)(mix64(row ^ (u64)j) >> 11) * (1.0 / 9007199254740992.0) < p_j));
            lost |= gone;
            const T a = gone ? T(0) : Ax[q];
            const i64 age = !delays.slot ? 0 : delays.ages ? (i64)delays.ages[q] : delay_age(delays, i, j);
            if (!noise_only) {
                const T* x_j = delays.slot ? X + (n + j * delays.slots + delays.slot[age]) * w + c : X + j * w + c;
                const Pack<T, V> x = load_pack<T, V>(j == i ? own : x_j);
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] += a * x.v[v];
            }
            if (sent) {  // (a self loop reads a zero row; one sigma per node: the sender's, noisy.py's sigma_of)
                const u64 link = mix64(mix64(sent[age] ^ (u64)i) ^ (u64)j);
                const T s_j = sigmas ? (T)sigmas[j] : sigma;
#pragma unroll
                for (int v = 0; v < V; ++v) noise[v] += a * (j == i ? T(0) : link_noise_value<T>(link, c + v, s_j));
            }
            den += a;
        }
        if (lost && renormalise) {
            if (den == T(0)) {  // received nothing: keeps x_i (and its noise row is zero)
                const Pack<T, V> x = load_pack<T, V>(own);
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    acc[v] = x.v[v];
                    noise[v] = 0;
                }
            } else {
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    acc[v] /= den;
                    noise[v] /= den;
                }
            }
        }
        if (noise_only) {
            const Pack<T, V> y = load_pack<T, V>(Y + i * w + c);
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] = y.v[v];
        }
    }
    if (sent)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = acc[v] + noise[v];
    store_pack<T, V>(Y + i * w + c, acc);
}

// ------------------------------------------------------------------ message networks
// rowstoch_fast.network's Compressed, Noisy and Delayed layers on the device: the CPU's passes
// (csrc/rowstoch/compress.hpp, network.hpp's delay_ages) with the same draws and the same operations in the same
// order. The messages are encoded (compress_rows), then a round mixes them with the own rows in
// csr_mix_lossy_impl (ages and per-link noise drawn in the same pass; the sender of entry q is still Aj[q], so
// losses and sleep act as on the base network), or csr_mix_circ for a circulant matrix without losses.

// uniform_hash(seed, t, r, i, tag, c) from its row prefix: the top 53 bits as a double (compress.hpp)
__device__ __forceinline__ double message_uniform(u64 tagged_row, u64 c) {
    return (double)(i64)(mix64(tagged_row ^ c) >> 11) * (1.0 / 9007199254740992.0);
}

// (score a, column ia) comes before (b, ib): smaller score, ties to the lower column (compress.hpp's order)
__device__ __forceinline__ bool score_before(double a, i64 ia, double b, i64 ib) {
    return a < b || (a == b && ia < ib);
}

__device__ __forceinline__ double selection_score(int method, double v, u64 key, u64 col) {
    return method == 2 ? -fabs(v) : message_uniform(key, col);  // top-k: largest |v|; rand-k: smallest draw
}

// (compress.hpp's round_to_bits: a finite v that rounds past the largest gives the largest value of b bits)
__device__ __forceinline__ float round_to_bits(float v, int b) {
    int e;
    const float m = frexpf(v, &e);
    const float r = ldexpf(nearbyintf(ldexpf(m, b)), e - b);
    return !isfinite(v) ? v : isinf(r) ? copysignf(ldexpf((float)((1ULL << b) - 1), e - b), v) : r;
}
__device__ __forceinline__ double round_to_bits(double v, int b) {
    int e;
    const double m = frexp(v, &e);
    const double r = ldexp(nearbyint(ldexp(m, b)), e - b);
    return !isfinite(v) ? v : isinf(r) ? copysign(ldexp((double)((1ULL << b) - 1), e - b), v) : r;
}

// compress.hpp's saturated: an encoded value q of a finite message clamped to T's largest finite
// value (a NaN stays NaN); one of a message that is not finite as computed.
template <typename T>
__device__ __forceinline__ double saturated(double q, bool finite) {
    const double limit = sizeof(T) == 4 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    return !finite ? q : q > limit ? limit : q < -limit ? -limit : q;
}

// The largest |v_c| of a message, as a double (0 for none).
template <typename T>
__device__ __forceinline__ double largest_magnitude(const T* v, i64 L) {
    double m = 0.0;
    for (i64 c = 0; c < L; ++c) m = fmax(m, fabs((double)v[c]));
    return m;
}

// One message of L values (compress.hpp's compress_message; methods 0 qsgd, 1 sign, 2 topk, 3 randk, 4 round,
// 5 noise). Top-k and rand-k without scratch: k passes find the k-th (score, column) in order, then every
// value at or before it is kept (the same set as the CPU's selection; `out` may be `v`).
template <typename T>
__device__ void compress_message(int method, const T* v, T* out, i64 L, i64 first_col, u64 row, i64 param,
                                 double sigma, int unbiased) {
    if (method == 0) {
        double sq = 0.0;
        for (i64 c = 0; c < L; ++c) sq += (double)v[c] * (double)v[c];
        double norm = sqrt(sq), scale = 1.0;
        if (!(sq >= 1e-280 && sq <= 1.7976931348623157e308)) {  // (compress.hpp's qsgd_norm: squares that
            const double m = largest_magnitude(v, L);            // overflowed or underflowed: v / 2^(e-1))
            if (m > 0.0 && m <= 1.7976931348623157e308) {
                int e = 0;
                frexp(m, &e);
                scale = ldexp(1.0, e - 1);
                double scaled = 0.0;
                for (i64 c = 0; c < L; ++c) scaled += ((double)v[c] / scale) * ((double)v[c] / scale);
                norm = sqrt(scaled);
            }
        }
        const double s = (double)((1ULL << param) - 1);
        const double up = s / norm, down = norm / s;
        const u64 key = mix64(row ^ 1ULL);
        const bool finite = norm <= 1.7976931348623157e308;
        for (i64 c = 0; c < L; ++c) {
            if (norm == 0.0) {
                out[c] = T(0);
                continue;
            }
            const double a = fabs(scale == 1.0 ? (double)v[c] : (double)v[c] / scale) * up;
            const double u = unbiased ? message_uniform(key, (u64)(first_col + c)) : 0.5;
            const double level = fmin((double)(i64)(a + u), s);
            out[c] = (T)saturated<T>(copysign(level * down, (double)v[c]) * scale, finite);
        }
    } else if (method == 1) {
        double l1 = 0.0;
        for (i64 c = 0; c < L; ++c) l1 += fabs((double)v[c]);
        double scale = l1 / (double)L;
        if (l1 > 1.7976931348623157e308) {  // (compress.hpp's sign_magnitude: a sum that overflowed, of a finite
            const double m = largest_magnitude(v, L);  // message: the sum of v / 2^(e-1), scaled back)
            if (m <= 1.7976931348623157e308) {
                int e = 0;
                frexp(m, &e);
                const double p = ldexp(1.0, e - 1);
                double scaled = 0.0;
                for (i64 c = 0; c < L; ++c) scaled += fabs((double)v[c]) / p;
                scale = fmin(scaled / (double)L * p, m);
            }
        }
        for (i64 c = 0; c < L; ++c) out[c] = v[c] > T(0) ? (T)scale : v[c] < T(0) ? (T)(-scale) : T(0);
    } else if (method == 2 || method == 3) {
        const i64 k = param < L ? param : L;
        const u64 key = mix64(row ^ 2ULL);
        double last = 0.0;
        i64 at = -1;  // the k-th kept (score, column) so far; none yet
        for (i64 m = 0; m < k; ++m) {
            double best = 0.0;
            i64 bi = -1;
            for (i64 c = 0; c < L; ++c) {
                const double sc = selection_score(method, (double)v[c], key, (u64)(first_col + c));
                if ((at < 0 || score_before(last, at, sc, c)) && (bi < 0 || score_before(sc, c, best, bi))) {
                    best = sc;
                    bi = c;
                }
            }
            last = best;
            at = bi;
        }
        const T scale = method == 3 && unbiased ? (T)((double)L / (double)k) : T(1);
        for (i64 c = 0; c < L; ++c) {
            const double sc = selection_score(method, (double)v[c], key, (u64)(first_col + c));
            out[c] = at >= 0 && !score_before(last, at, sc, c)
                ? (T)saturated<T>((double)(v[c] * scale), isfinite(v[c])) : T(0);
        }
    } else if (method == 4) {
        for (i64 c = 0; c < L; ++c) out[c] = round_to_bits(v[c], (int)param);
    } else {
        const double two_pi = 6.283185307179586;
        const u64 key1 = mix64(row ^ 3ULL), key2 = mix64(row ^ 4ULL);
        for (i64 c = 0; c < L; ++c) {
            const double u1 = 1.0 - message_uniform(key1, (u64)(first_col + c)), u2 = message_uniform(key2, (u64)(first_col + c));
            out[c] = (T)((double)v[c] + sigma * (sqrt(-2.0 * log(u1)) * cos(two_pi * u2)));
        }
    }
}

// out <- the messages of X's n rows of w values (messages of L values; one thread per message; round_key:
// hash_prefix(seed, t, r), computed on the host); out may be X.
template <typename T>
__device__ void compress_rows_impl(const T* X, T* out, i64 n, i64 w, i64 L,
                                   int method, i64 param, double sigma, int unbiased, u64 round_key,
                                   const u64* status, const i64* __restrict__ params = nullptr,
                                   const double* __restrict__ sigmas = nullptr) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x, per_row = w / L;
    if (tid >= n * per_row || frozen(status, 0)) return;
    const i64 i = tid / per_row, c0 = (tid - i * per_row) * L;
    // (one bits-or-k / sigma per node: the sender's, compress.hpp's PerNode; a message alone gets the operations a
    // batch of the CPU's gives it, so the same bits)
    compress_message<T>(method, X + i * w + c0, out + i * w + c0, L, c0, mix64(round_key ^ (u64)i),
                        params ? params[i] : param, sigmas ? sigmas[i] : sigma, unbiased);
}

// Noise on a received copy (compress.hpp's link_noise): sigma z for the value c of the message of the link
// j -> i sent in iteration s, z the standard normal of uniform_hash(seed, s, r, i, j, 3 | 4, c) and
// link = mix64(mix64(hash_prefix(seed, s, r) ^ i) ^ j); z rounded to T before the product (the CPU's block).
template <typename T>
__device__ __forceinline__ T link_noise_value(u64 link, i64 c, T sigma) {
    const double u1 = 1.0 - message_uniform(mix64(link ^ 3ULL), (u64)c), u2 = message_uniform(mix64(link ^ 4ULL), (u64)c);
    return (T)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * sigma;
}

// Gilbert-Elliott chains on the device (csrc/rowstoch/network.hpp's ge_advance): one thread per row; the
// transition keys (network.round_key(seed, 2^61 + s, 0) for s = from .. to) are computed on the host and
// passed in `keys`; init_key (round_key(seed, 2^62, 0)) starts from the stationary draw when `init`.
template <typename I>
__device__ void ge_advance_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, i64 rows,
                                unsigned char* __restrict__ bad, const u64* __restrict__ keys, i64 steps,
                                u64 init_key, int init, double p_bad, double p_recover, double stationary) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const double unit = 1.0 / 9007199254740992.0;
    for (I q = Ap[i]; q < Ap[i + 1]; ++q) {
        const u64 j = (u64)Aj[q];
        unsigned char state = bad[q];
        if (init) state = (double)(mix64(mix64(init_key ^ (u64)i) ^ j) >> 11) * unit < stationary;
        for (i64 s = 0; s < steps; ++s) {
            const double v = (double)(mix64(mix64(keys[s] ^ (u64)i) ^ j) >> 11) * unit;
            state = state ? (v >= p_recover) : (v < p_bad);
        }
        bad[q] = state;
    }
}

// The first (B) draws of a mini-batch stream whose bounds M - b are all <= 2^12 (M <= 4096), so that each
// draw takes 16-bit chunks: chunk c is bits 16 (c mod 4) .. of the stream's output c / 4 + 1. The lanes
// test 32 draws at a time against the chunks they would take if nothing before them was rejected; the first
// rejected draw (Lemire's test: under bound / 2^16 of the draws, 0.2% at M = 400) moves every later draw one
// chunk on, and the window restarts there. draws[b] = b + below(s, M - b), the sequence lane 0 would draw.
__device__ void parallel_draws(u64 key, i64 M, i64 B, int* __restrict__ draws) {
    const int lane = threadIdx.x & 31;
    i64 start = 0, off = 0;
    while (start < B) {
        const i64 b = start + lane;
        bool rejected = false;
        int k = 0;
        if (b < B) {
            const u64 c = (u64)(b + off);
            const u64 chunk = (stream_output(key, c / 4 + 1) >> (16 * (c % 4))) & 0xFFFFULL;
            const unsigned bound = (unsigned)(M - b);
            const unsigned m = (unsigned)chunk * bound;  // < 2^28
            const unsigned lo = m & 0xFFFFu;
            rejected = lo < bound && lo < (0x10000u - bound) % bound;
            k = (int)(b + (m >> 16));
        }
        const unsigned ballot = __ballot_sync(0xFFFFFFFFu, rejected);
        const int first = ballot ? __ffs(ballot) - 1 : 32;
        if (lane < first && b < B) draws[b] = k;
        start += first;
        off += ballot ? 1 : 0;
    }
}

// One warp per (repetition, node) draws its mini-batch (the CPU's partial Fisher-Yates over the samples), then
// each lane takes one of 32 samples at a time (its margin in rowstoch::dot4's order, its coefficient), and
// lane q accumulates coordinates q, q + 32, ... over the samples in order: the same sums as
// rowstoch::logistic_stochastic_grad on the CPU, bit for bit. The draws are made by the whole warp when
// M <= 4096 (parallel_draws), by lane 0 else; lane 0 applies them to a permutation of the M samples, in shared
// memory (`layout` 1) or in the global scratch `spill` when it does not fit (`layout` 0); the warp resets the
// permutation to the identity before the next batch. The sums load 8 samples' values before adding them (in
// order), so that their loads are in flight together.
// K = ceil(d / 32) <= 4: lane q keeps coordinates q, q + 32, .., q + 32 (K - 1) in registers (one kernel per
// K, so that d <= 32, the paper's d = 10, holds 8 values in flight, not 32); K = 0: any d, the sums in G.
// Launched with (blockDim.x / 32) warps per block and (blockDim.x / 32) * shared_per_warp bytes of dynamic
// shared memory; a warp's shared area is [32 coefficients T][32 sample ids int] then, for layout 1,
// [perm: M int][draws: B int].
template <typename T, int K>
__device__ void logistic_grad_impl(const T* __restrict__ H, const T* __restrict__ Yl, const i64* __restrict__ nodes,
                                   i64 m, i64 M, i64 d, T rho, const T* __restrict__ X, i64 reps, i64 B,
                                   i64 batches, u64 seed, u64 iteration, i64 rep_offset, int layout,
                                   i64 shared_per_warp, int* __restrict__ spill, T* __restrict__ G) {
    DYNAMIC_SHARED(smem);
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + wib;
    if (row >= reps * m) return;  // the whole warp
    unsigned char* mine = smem + wib * shared_per_warp;
    T* coef = reinterpret_cast<T*>(mine);
    int* ids = reinterpret_cast<int*>(mine + 32 * sizeof(T));
    int* perm = layout == 1 ? ids + 32 : spill + row * (M + B);  // its first B: the batch's sample ids, in order
    int* swaps = perm + M;                                          // the draws b + below(s, M - b)
    const i64 rep = row / m;
    const i64 node = nodes ? nodes[row % m] : row % m;
    for (i64 l = lane; l < M; l += 32) perm[l] = (int)l;
    const T* x = X + row * d;
    T* g = G + row * d;
    const T* Hi = H + node * M * d;
    const T* Yi = Yl + node * M;
    const T weight = T(1) / T(B * batches);
    T acc[K > 0 ? K : 1] = {};  // coordinates lane + 32 k, k < K; K = 0 goes through g
    if (K == 0)
        for (i64 q = lane; q < d; q += 32) g[q] = 0;
    __syncwarp();
    for (i64 r = 0; r < batches; ++r) {
        const u64 key = stream_key(seed, (u64)(rep + rep_offset), (u64)node, iteration, (u64)r);
        if (M <= 4096) {  // the draws by the whole warp; lane 0 only swaps
            parallel_draws(key, M, B, swaps);
            __syncwarp();
            if (lane == 0)  // 8 draws loaded ahead (the swaps do not write them): one load latency per swap
                for (i64 b0 = 0; b0 < B; b0 += 8) {
                    int k8[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u) k8[u] = b0 + u < B ? swaps[b0 + u] : 0;
#pragma unroll
                    for (int u = 0; u < 8; ++u)
                        if (b0 + u < B) {
                            const int k = k8[u], t = perm[b0 + u];
                            perm[b0 + u] = perm[k];
                            perm[k] = t;
                        }
                }
        } else if (lane == 0) {
            Stream s = {key, 0, 0, 0};
            for (i64 b = 0; b < B; ++b) {
                const int k = (int)(b + (i64)below(&s, (u64)(M - b))), t = perm[b];
                perm[b] = perm[k];
                perm[k] = t;
            }
        }
        __syncwarp();
        for (i64 b0 = 0; b0 < B; b0 += 32) {
            const int nb = B - b0 < 32 ? (int)(B - b0) : 32;
            if (lane < nb) {
                const int id = perm[b0 + lane];
                const T* h = Hi + (i64)id * d;
                T s4[4] = {0, 0, 0, 0};  // rowstoch::dot4's order
                for (i64 j = 0; j < d; ++j) s4[j & 3] += h[j] * x[j];
                const T yb = Yi[id];
                const double z = (double)(yb * ((s4[0] + s4[2]) + (s4[1] + s4[3])));
                coef[lane] = (T)(-(double)yb * logistic_weight(z) * (double)weight);
                ids[lane] = id;
            }
            __syncwarp();
            if (K > 0) {
                for (int b1 = 0; b1 < nb; b1 += 8) {  // 8 samples' loads in flight, then their sums in order
                    T c[8], v[8][K > 0 ? K : 1];
#pragma unroll
                    for (int b = 0; b < 8; ++b) {
                        const bool in = b1 + b < nb;
                        c[b] = in ? coef[b1 + b] : T(0);
                        const T* h = Hi + (i64)(in ? ids[b1 + b] : 0) * d;
#pragma unroll
                        for (int k = 0; k < K; ++k) v[b][k] = in && lane + 32 * k < d ? h[lane + 32 * k] : T(0);
                    }
#pragma unroll
                    for (int b = 0; b < 8; ++b)
                        if (b1 + b < nb) {
#pragma unroll
                            for (int k = 0; k < K; ++k)
                                if (lane + 32 * k < d) acc[k] += c[b] * v[b][k];
                        }
                }
            } else {
                for (i64 q = lane; q < d; q += 32) {
                    T a = g[q];
                    for (int b = 0; b < nb; ++b) a += coef[b] * Hi[(i64)ids[b] * d + q];
                    g[q] = a;
                }
            }
            __syncwarp();
        }
        if (r + 1 < batches)  // the identity again for the next batch (the whole warp)
            for (i64 l = lane; l < M; l += 32) perm[l] = (int)l;
        __syncwarp();
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (lane + 32 * k < d) g[lane + 32 * k] = acc[k];
    for (i64 q = lane; q < d; q += 32) {
        const T qq = T(1) + x[q] * x[q];
        g[q] += rho * T(2) * x[q] / (qq * qq);
    }
}

// ------------------------------------------------------------------ per-link running sums
// Robust push-sum's round (rowstoch/links.hpp's link_running_sums, the dense form with flags; robust
// gradient-push, R-FAST; backends/cupy.py's running_sums), one thread per value (row i, column c): for each stored
// entry p = (i, j) of the CSR (Ap, Aj, Ax), X's column c and the undelivered mass P (nnz x w),
//   Y_i     = sum_p arrived_p C_p X_j  +  sum_p arrived_p P_p       (CSR order, each sum from 0, added last)
//   P_out_p = P_p + C_p X_j where the message p was lost, 0 where it arrived
// the same operations in the same order as the CPU's link_row_chunk (--fmad=false: bit for bit). held[p]: row p of
// P may hold mass (else it is +0.0 and never read); held_out[p] the same of P_out as it is before the round (rows
// two rounds old that the round must clear), brought up to date by link_held_out after the round.
template <typename T>
__device__ void link_sums_impl(const i64* __restrict__ Ap, const i64* __restrict__ Aj, const T* __restrict__ Ax,
                               const unsigned char* __restrict__ arrived, const T* __restrict__ X, T* __restrict__ Y,
                               const T* __restrict__ P, T* __restrict__ P_out, const unsigned char* __restrict__ held,
                               const unsigned char* __restrict__ held_out, i64 n, i64 w, const u64* status) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n * w || frozen(status, 0)) return;
    const i64 i = tid / w, c = tid - i * w;
    const i64 begin = Ap[i], end = Ap[i + 1];
    T share = 0;
    for (i64 p = begin; p < end; ++p) {
        const T taken = Ax[p] * (T)arrived[p];
        share += taken * X[Aj[p] * w + c];
    }
    T waited = 0;
    for (i64 p = begin; p < end; ++p) {
        const bool got = arrived[p] != 0, had = held[p] != 0, stale = held_out[p] != 0;
        if (got && !had && !stale) continue;
        const i64 at = p * w + c;
        if (got) {  // delivered: the receiver takes it, the link keeps nothing
            if (had) waited += P[at];
            if (stale) P_out[at] = T(0);
            continue;
        }
        const T x = Ax[p] * X[Aj[p] * w + c];  // lost: p_ij <- p_ij + C_ij x_j
        if (had) {
            const T old = P[at];
            waited += T(0) * old;
            P_out[at] = old + x;
        } else {
            P_out[at] = T(0) + x;
        }
    }
    Y[i * w + c] = share + waited;
}

// One value of a quantity's round in a single pass over the row's links (link_sums_impl's two loops as one, the
// same operations in the same order for each of the two sums, so the same bits): each link's index, weight,
// arrival and source value read once, the lost links' mass formed from them.
template <class T, class I>
__device__ __forceinline__ T link_value(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                                        const unsigned char* __restrict__ arrived, const T* __restrict__ X,
                                        const T* __restrict__ P, T* __restrict__ P_out,
                                        const unsigned char* __restrict__ held,
                                        const unsigned char* __restrict__ held_out, i64 i, i64 w, i64 c) {
    const i64 begin = Ap[i], end = Ap[i + 1];
    T share = 0, waited = 0;
    for (i64 p = begin; p < end; ++p) {
        const unsigned char got = arrived[p];
        const T a = Ax[p];
        const T x = X[(i64)Aj[p] * w + c];
        share += (a * (T)got) * x;
        const bool had = held[p] != 0, stale = held_out[p] != 0;
        if (got && !had && !stale) continue;
        const i64 at = p * w + c;
        if (got) {
            if (had) waited += P[at];
            if (stale) P_out[at] = T(0);
            continue;
        }
        if (had) {
            const T old = P[at];
            waited += T(0) * old;
            P_out[at] = old + a * x;
        } else {
            P_out[at] = T(0) + a * x;
        }
    }
    return share + waited;
}

// Two quantities of one round (robust gradient-push's model and weights) in one launch, a row's values of both
// side by side (threads i * (w1 + w2) + c), so the row's links are read from DRAM once for both. The same values
// as link_sums_impl, bit for bit.
template <class T, class I>
__device__ void link_sums2_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                                const unsigned char* __restrict__ arrived, const T* X1, T* Y1, const T* P1, T* P1_out,
                                const unsigned char* held1, const unsigned char* held_out1, i64 w1, const T* X2,
                                T* Y2, const T* P2, T* P2_out, const unsigned char* held2,
                                const unsigned char* held_out2, i64 w2, i64 n, const u64* status) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 w = w1 + w2;
    if (tid >= n * w || frozen(status, 0)) return;
    const i64 i = tid / w, k = tid - i * w;
    const bool second = k >= w1;  // (pointers chosen, not code: one path for the warp)
    const i64 ww = second ? w2 : w1, c = second ? k - w1 : k;
    T* Y = second ? Y2 : Y1;
    Y[i * ww + c] = link_value<T, I>(Ap, Aj, Ax, arrived, second ? X2 : X1, second ? P2 : P1, second ? P2_out : P1_out,
                                     second ? held2 : held1, second ? held_out2 : held_out1, i, ww, c);
}

// After a quantity's round: which rows of P_out may hold mass (those whose message was lost).
__device__ void link_held_out_impl(const unsigned char* __restrict__ arrived, unsigned char* __restrict__ held_out,
                                   i64 nnz, const u64* status) {
    const i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= nnz || frozen(status, 0)) return;
    held_out[p] = arrived[p] ? 0 : 1;
}

// A round's Bernoulli losses over a static matrix, one thread per row (network.hpp's lost_links, the draws of
// Lossy.arrived): arrived[q] = 1 for a self loop, else whether mix64(mix64(round_key ^ i) ^ j) >> 11 is at least
// `threshold` (loss_threshold(p) = ceil(p 2^53)).
__device__ void link_arrivals_impl(const i64* __restrict__ Ap, const i64* __restrict__ Aj, i64 rows, u64 round_key,
                                   u64 threshold, const u64* status, unsigned char* __restrict__ arrived) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows || frozen(status, 0)) return;
    const u64 row = mix64(round_key ^ (u64)i);
    const i64 end = Ap[i + 1];
    for (i64 q = Ap[i]; q < end; ++q) {
        const i64 j = Aj[q];
        arrived[q] = j == i || (mix64(row ^ (u64)j) >> 11) >= threshold;
    }
}

// One sample index per replica and node, uniform in 0..m-1 (objectives.draw_samples; rowstoch/samples.hpp's
// draw_samples, the same hash and rounding): out[r * rows + i] for replica rep_ids[r] and node node_ids[i] (null:
// node i), one thread each. The draws of GT-SAGA and the other per-sample methods on the device.
__device__ void draw_samples_impl(u64 prefix, const i64* __restrict__ rep_ids, i64 reps,
                                  const i64* __restrict__ node_ids, i64 rows, u64 key, i64 m, i64* __restrict__ out) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= reps * rows) return;
    const i64 r = e / rows, i = e - r * rows;
    const u64 node = (u64)(node_ids ? node_ids[i] : i);
    const u64 h = mix64(mix64(mix64(prefix ^ (u64)rep_ids[r]) ^ node) ^ key);
    const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
    const i64 s = (i64)(u * (double)m);
    out[e] = s < m - 1 ? s : m - 1;
}

// The per-sample table's entries (rowstoch/samples.hpp's take_samples / put_samples; the table (m, rows, reps, d)
// in C order, idx (reps, rows), block node-major (rows * reps, d)), one thread per value:
// put: table[idx[r, i], i, r] <- block[i * reps + r]; else block[i * reps + r] <- table[idx[r, i], i, r]. A draw
// outside 0..m-1 (an oracle's own sample(), unchecked on the device) writes nothing to the table and NaN to the
// block, so the step's checked combine fails instead of a write past the table.
template <class T>
__device__ void sample_rows_impl(T* __restrict__ table, i64 m, i64 rows, i64 reps, i64 d, const i64* __restrict__ idx,
                                 T* __restrict__ block, int put, const u64* status) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= rows * reps * d || frozen(status, 0)) return;
    const i64 e = tid / d, c = tid - e * d;
    const i64 i = e / reps, r = e - i * reps;
    const i64 s = idx[r * rows + i];
    if (s < 0 || s >= m) {
        if (!put) block[tid] = T(0) / T(0);  // (NaN)
        return;
    }
    T* entry = table + ((s * rows + i) * reps + r) * d + c;
    if (put) *entry = block[tid];
    else block[tid] = *entry;
}

// link_held_out_impl eight links a thread (arrived and held_out 8-byte aligned): a byte of held_out is 1 where
// arrived's is 0. A byte per thread ran at ~200 GB/s on an H200 (0.22 ms for 22M links).
__device__ void link_held_out8_impl(const u64* __restrict__ arrived, u64* __restrict__ held_out, i64 nnz,
                                    const u64* status) {
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k * 8 >= nnz || frozen(status, 0)) return;
    if (k * 8 + 8 <= nnz) {
        u64 t = arrived[k];
        t |= t >> 4;  // (bit 0 of each byte: the OR of its eight bits; the shifts stay within the byte)
        t |= t >> 2;
        t |= t >> 1;
        held_out[k] = (t & 0x0101010101010101ULL) ^ 0x0101010101010101ULL;
        return;
    }
    const unsigned char* a = reinterpret_cast<const unsigned char*>(arrived);
    unsigned char* h = reinterpret_cast<unsigned char*>(held_out);
    for (i64 p = k * 8; p < nnz; ++p) h[p] = a[p] ? 0 : 1;
}

// The mixing kernels run 256 threads per block (backends/cupy.py's _BLOCK); at most 32 registers per thread, so
// that 8 blocks, the SM's 2048 threads, are resident (the circulant kernel took 40 and 75% of them).
#define MIX_BOUNDS __launch_bounds__(256, 8)
// csr_mix_entry<V>x<U>_<value>_<index>
#define ENTRY(suffix, T, I, V, U) \
    __global__ void MIX_BOUNDS csr_mix_entry##V##x##U##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* status) { \
        csr_mix_entry<T, I, V, U>(Ap, Aj, Ax, X, Y, n, w, status); }
// csr_mix_row<V>x<U>_<value>_<index>: the same with per-row weights (ROW above; Aw of length n)
#define ROWW(suffix, T, I, V, U) \
    __global__ void MIX_BOUNDS csr_mix_row##V##x##U##_##suffix(const I* Ap, const I* Aj, const T* Aw, const T* X, T* Y, i64 n, i64 w, const u64* status) { \
        csr_mix_entry<T, I, V, U, true>(Ap, Aj, Aw, X, Y, n, w, status); }
// csr_mix_circ<V>x<U>_<value>_<index>: the same for circulant matrices (CIRC above: Ap = {0, m}, Aj the
// offsets, Ax the one weight)
#define CIRCW(suffix, T, I, V, U) \
    __global__ void MIX_BOUNDS csr_mix_circ##V##x##U##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* status) { \
        csr_mix_circ<T, I, V, U>(Ap, Aj, Ax, X, Y, n, w, status); }
#define ENTRIES(V32, U, E) \
    E(f64_i32, double, int, 1, U) E(f64_i64, double, i64, 1, U) E(f32_i32, float, int, 1, U) \
    E(f32_i64, float, i64, 1, U) E(f64_i32, double, int, 2, U) E(f64_i64, double, i64, 2, U) \
    E(f32_i32, float, int, V32, U) E(f32_i64, float, i64, V32, U)
// csr_mix_lossy<V>_<value>_<index>
#define LOSSY(suffix, T, I, V) \
    __global__ void csr_mix_lossy##V##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* status, u64 round_key, double p, const double* ps, int renormalise, const unsigned char* awake, const unsigned char* bad) { \
        csr_mix_lossy_impl<T, I, V>(Ap, Aj, Ax, X, Y, n, w, status, round_key, p, ps, renormalise, awake, bad); }
// logistic_grad<K>_<value> (K above)
#define LOGISTIC(suffix, T, K) \
    __global__ void logistic_grad##K##_##suffix(const T* H, const T* Yl, const i64* nodes, i64 m, i64 M, i64 d, T rho, const T* X, i64 reps, i64 B, i64 batches, u64 seed, u64 iteration, i64 rep_offset, int layout, i64 shared_per_warp, int* spill, T* G) { \
        logistic_grad_impl<T, K>(H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, rep_offset, layout, shared_per_warp, spill, G); }
// csr_mix_messages<V>_<value>_<index>: csr_mix_lossy over a round of messages (own rows, delays, noise)
#define MESSAGES(suffix, T, I, V) \
    __global__ void csr_mix_messages##V##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* Xown, const T* X, T* Y, i64 n, i64 w, const u64* status, u64 round_key, double p, const double* ps, int renormalise, const unsigned char* awake, const unsigned char* bad, const u64* delay_keys, const u64* delay_thresholds, const i64* delay_slot, i64 delay_last, i64 delay_slots, const unsigned char* delay_ages, const u64* sent, T sigma, int noise_only, const double* sigmas) { \
        csr_mix_lossy_impl<T, I, V>(Ap, Aj, Ax, X, Y, n, w, status, round_key, p, ps, renormalise, awake, bad, Xown, Delays{delay_keys, delay_thresholds, delay_slot, delay_last, delay_slots, delay_ages}, sent, sigma, noise_only, sigmas); }
// csr_mix_circmsg<V>x<U>_<value>_<index>: csr_mix_circ over a compressed round's messages, own rows from Xown
// (the second pointer: up to 40 registers, 6 blocks of 256 resident; under MIX_BOUNDS' 32 the vector variants
// spilled)
#define CIRCMSG(suffix, T, I, V, U) \
    __global__ void __launch_bounds__(256, 6) csr_mix_circmsg##V##x##U##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* Xown, const T* X, T* Y, i64 n, i64 w, const u64* status) { \
        csr_mix_circ<T, I, V, U>(Ap, Aj, Ax, X, Y, n, w, status, Xown); }
// delay_ages_rows_<index>: one thread per row
#define AGES(suffix, I) \
    __global__ void delay_ages_rows_##suffix(const I* Ap, const I* Aj, i64 rows, const u64* keys, const u64* thresholds, i64 last, unsigned char* ages, const u64* status) { \
        delay_ages_rows_impl<I>(Ap, Aj, rows, keys, thresholds, last, ages, status); }
#define GE(suffix, I) \
    __global__ void ge_advance_##suffix(const I* Ap, const I* Aj, i64 rows, unsigned char* bad, const u64* keys, i64 steps, u64 init_key, int init, double p_bad, double p_recover, double stationary) { \
        ge_advance_impl<I>(Ap, Aj, rows, bad, keys, steps, init_key, init, p_bad, p_recover, stationary); }
extern "C" {
GE(i32, int) GE(i64, i64)
AGES(i32, int) AGES(i64, i64)
__global__ void link_sums_f64(const i64* Ap, const i64* Aj, const double* Ax, const unsigned char* arrived, const double* X, double* Y, const double* P, double* P_out, const unsigned char* held, const unsigned char* held_out, i64 n, i64 w, const u64* status) { link_sums_impl<double>(Ap, Aj, Ax, arrived, X, Y, P, P_out, held, held_out, n, w, status); }
__global__ void link_sums_f32(const i64* Ap, const i64* Aj, const float* Ax, const unsigned char* arrived, const float* X, float* Y, const float* P, float* P_out, const unsigned char* held, const unsigned char* held_out, i64 n, i64 w, const u64* status) { link_sums_impl<float>(Ap, Aj, Ax, arrived, X, Y, P, P_out, held, held_out, n, w, status); }
#define LINKS2(suffix, T, I) \
    __global__ void link_sums2_##suffix(const I* Ap, const I* Aj, const T* Ax, const unsigned char* arrived, const T* X1, T* Y1, const T* P1, T* P1_out, const unsigned char* held1, const unsigned char* held_out1, i64 w1, const T* X2, T* Y2, const T* P2, T* P2_out, const unsigned char* held2, const unsigned char* held_out2, i64 w2, i64 n, const u64* status) { \
        link_sums2_impl<T, I>(Ap, Aj, Ax, arrived, X1, Y1, P1, P1_out, held1, held_out1, w1, X2, Y2, P2, P2_out, held2, held_out2, w2, n, status); }
LINKS2(f64_i32, double, int) LINKS2(f64_i64, double, i64) LINKS2(f32_i32, float, int) LINKS2(f32_i64, float, i64)
__global__ void link_held_out(const unsigned char* arrived, unsigned char* held_out, i64 nnz, const u64* status) { link_held_out_impl(arrived, held_out, nnz, status); }
__global__ void sample_rows_f64(double* table, i64 m, i64 rows, i64 reps, i64 d, const i64* idx, double* block, int put, const u64* status) { sample_rows_impl<double>(table, m, rows, reps, d, idx, block, put, status); }
__global__ void sample_rows_f32(float* table, i64 m, i64 rows, i64 reps, i64 d, const i64* idx, float* block, int put, const u64* status) { sample_rows_impl<float>(table, m, rows, reps, d, idx, block, put, status); }
__global__ void draw_samples(u64 prefix, const i64* rep_ids, i64 reps, const i64* node_ids, i64 rows, u64 key, i64 m, i64* out) { draw_samples_impl(prefix, rep_ids, reps, node_ids, rows, key, m, out); }
__global__ void link_held_out8(const u64* arrived, u64* held_out, i64 nnz, const u64* status) { link_held_out8_impl(arrived, held_out, nnz, status); }
__global__ void link_arrivals(const i64* Ap, const i64* Aj, i64 rows, u64 round_key, u64 threshold, const u64* status, unsigned char* arrived) { link_arrivals_impl(Ap, Aj, rows, round_key, threshold, status, arrived); }
__global__ void compress_rows_f64(const double* X, double* out, i64 n, i64 w, i64 L, int method, i64 param, double sigma, int unbiased, u64 round_key, const u64* status, const i64* params, const double* sigmas) { compress_rows_impl<double>(X, out, n, w, L, method, param, sigma, unbiased, round_key, status, params, sigmas); }
__global__ void compress_rows_f32(const float* X, float* out, i64 n, i64 w, i64 L, int method, i64 param, double sigma, int unbiased, u64 round_key, const u64* status, const i64* params, const double* sigmas) { compress_rows_impl<float>(X, out, n, w, L, method, param, sigma, unbiased, round_key, status, params, sigmas); }
ENTRIES(4, 4, CIRCMSG)
MESSAGES(f64_i32, double, int, 1) MESSAGES(f64_i64, double, i64, 1) MESSAGES(f32_i32, float, int, 1) MESSAGES(f32_i64, float, i64, 1)
MESSAGES(f64_i32, double, int, 2) MESSAGES(f64_i64, double, i64, 2) MESSAGES(f32_i32, float, int, 4) MESSAGES(f32_i64, float, i64, 4)
ENTRIES(4, 4, ENTRY)
ENTRIES(4, 4, ROWW)
ENTRIES(4, 4, CIRCW)
LOSSY(f64_i32, double, int, 1) LOSSY(f64_i64, double, i64, 1) LOSSY(f32_i32, float, int, 1) LOSSY(f32_i64, float, i64, 1)
LOSSY(f64_i32, double, int, 2) LOSSY(f64_i64, double, i64, 2) LOSSY(f32_i32, float, int, 4) LOSSY(f32_i64, float, i64, 4)
__global__ void combine_f64(const double* x0, const double* x1, const double* x2, const double* x3, const double* r0, const double* r1, const double* r2, const double* r3, double c0, double c1, double c2, double c3, int K, double* out, i64 n, i64 w, u64* status, u64 launch) { combine_impl(x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, status, launch); }
__global__ void combine_f32(const float* x0, const float* x1, const float* x2, const float* x3, const float* r0, const float* r1, const float* r2, const float* r3, float c0, float c1, float c2, float c3, int K, float* out, i64 n, i64 w, u64* status, u64 launch) { combine_impl(x0, x1, x2, x3, r0, r1, r2, r3, c0, c1, c2, c3, K, out, n, w, status, launch); }
LOGISTIC(f64, double, 0) LOGISTIC(f64, double, 1) LOGISTIC(f64, double, 2) LOGISTIC(f64, double, 3) LOGISTIC(f64, double, 4)
LOGISTIC(f32, float, 0) LOGISTIC(f32, float, 1) LOGISTIC(f32, float, 2) LOGISTIC(f32, float, 3) LOGISTIC(f32, float, 4)
}
