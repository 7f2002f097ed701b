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
// A check captured in a CUDA graph runs at every replay, so its id cannot change
// from one replay to the next: it has the top bit set, and the replay is told by
// status[2], the count of replays that the graph's first node (tick) advances. A
// failing graph check writes that count to status[1] before its id to status[0]
// (all its failing threads write the same count; kernels on a stream run one
// after the other), and a launch of the same id in a later replay is frozen. The
// host journals such a check as id | count << 8. status[3]: a base the host sets
// so that status[2] + status[3] is the iteration of a stochastic oracle's draws
// inside a graph (logistic_grad's clock); status[4]: likewise for the optimizer's
// own iteration (tracker_rows). (status holds five words.)
// The words that several threads of a launch read and write at once (the run status here, the grid barrier's
// below) go through these: volatile loads and stores on a GPU; the host emulation (tests/cuda_on_host.cpp,
// ROWSTOCH_HOST_LOADS) brings its own, atomic, so that ThreadSanitizer sees them as what they are.
#ifndef ROWSTOCH_HOST_LOADS
template <typename W>
__device__ __forceinline__ W load_word(const W* p) { return *(const volatile W*)p; }
template <typename W>
__device__ __forceinline__ void store_word(W* p, W v) { *(volatile W*)p = v; }
#endif

__device__ __forceinline__ bool frozen(const u64* status, u64 launch) {
    if (!status) return false;
    const u64 s = load_word(status);
    if (s == 0) return false;
    if (s != launch) return true;
    if (!(launch >> 63)) return false;
    __threadfence();  // (the count written before the id)
    return load_word(status + 1) != load_word(status + 2);
}

__device__ __forceinline__ void report(u64* status, u64 launch) {
    if (!status || !launch) return;
    if (launch >> 63) {
        store_word(status + 1, load_word(status + 2));
        __threadfence();
    }
    atomicCAS(status, 0ULL, launch);
}

// ------------------------------------------------------------------ mixing
// Y[i, c] = sum_p Ax[p] X[Aj[p], c], summed over p in CSR order starting from 0
// (the CPU kernels' order), in every variant below.

// V consecutive values, aligned to their size: one 8- or 16-byte load or store when V > 1 (a GPU faults on
// one that is not aligned; the host emulation counts them, PACK_ALIGNED).
template <typename T, int V>
struct alignas(V * sizeof(T)) Pack {
    T v[V];
};
#ifndef PACK_ALIGNED
#define PACK_ALIGNED(p, bytes)
#endif

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
    PACK_ALIGNED(p, sizeof(Pack<T, V>));
    return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> as_pack(const T* v) {
    Pack<T, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = v[k];
    return r;
}

template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const T* v) {
    PACK_ALIGNED(p, sizeof(Pack<T, V>));
    *reinterpret_cast<Pack<T, V>*>(p) = as_pack<T, V>(v);
}

// The same with the cache hint "streaming" (ld.global.cs.nc / st.global.cs: the lines go first when L2 needs
// room): for rows that will not be read again before the L2 has turned over (the circulant kernel's far
// offsets, CIRC below). The kernels that use them read their other rows with load_nc (ld.global.nc, what the
// compiler chooses for the other kernels' read-only rows but no longer can next to an asm store). The host
// emulation (tests/cuda_on_host.cpp, ROWSTOCH_HOST_LOADS) brings its own load_nc, load_cs and store_cs: plain
// loads and stores, the streaming ones counted.
#ifdef __CUDA_ARCH__
// name(p, r) for Pack<T, 1 | 2 | 4>: ld.global<cop>.nc or st.global.cs of PTX type t, register constraint c
#define LOADS_1(name, cop, T, t, c) __device__ __forceinline__ void name(const T* p, Pack<T, 1>& r) { \
    asm("ld.global" cop ".nc." t " %0, [%1];" : "=" c(r.v[0]) : "l"(p)); }
#define LOADS_2(name, cop, T, t, c) __device__ __forceinline__ void name(const T* p, Pack<T, 2>& r) { \
    asm("ld.global" cop ".nc.v2." t " {%0, %1}, [%2];" : "=" c(r.v[0]), "=" c(r.v[1]) : "l"(p)); }
#define LOADS_4(name, cop, T, t, c) __device__ __forceinline__ void name(const T* p, Pack<T, 4>& r) { \
    asm("ld.global" cop ".nc.v4." t " {%0, %1, %2, %3}, [%4];" : "=" c(r.v[0]), "=" c(r.v[1]), "=" c(r.v[2]), "=" c(r.v[3]) : "l"(p)); }
#define STORES_1(T, t, c) __device__ __forceinline__ void store_cs(T* p, const Pack<T, 1>& r) { \
    asm volatile("st.global.cs." t " [%0], %1;" : : "l"(p), c(r.v[0])); }
#define STORES_2(T, t, c) __device__ __forceinline__ void store_cs(T* p, const Pack<T, 2>& r) { \
    asm volatile("st.global.cs.v2." t " [%0], {%1, %2};" : : "l"(p), c(r.v[0]), c(r.v[1])); }
#define STORES_4(T, t, c) __device__ __forceinline__ void store_cs(T* p, const Pack<T, 4>& r) { \
    asm volatile("st.global.cs.v4." t " [%0], {%1, %2, %3, %4};" : : "l"(p), c(r.v[0]), c(r.v[1]), c(r.v[2]), c(r.v[3])); }
LOADS_1(load_nc, "", double, "f64", "d") LOADS_2(load_nc, "", double, "f64", "d")
LOADS_1(load_nc, "", float, "f32", "f") LOADS_2(load_nc, "", float, "f32", "f") LOADS_4(load_nc, "", float, "f32", "f")
LOADS_1(load_cs, ".cs", double, "f64", "d") LOADS_2(load_cs, ".cs", double, "f64", "d")
LOADS_1(load_cs, ".cs", float, "f32", "f") LOADS_2(load_cs, ".cs", float, "f32", "f") LOADS_4(load_cs, ".cs", float, "f32", "f")
STORES_1(double, "f64", "d") STORES_2(double, "f64", "d") STORES_1(float, "f32", "f") STORES_2(float, "f32", "f")
STORES_4(float, "f32", "f")
#undef LOADS_1
#undef LOADS_2
#undef LOADS_4
#undef STORES_1
#undef STORES_2
#undef STORES_4
__device__ __forceinline__ void spin_pause() {}
#elif !defined(ROWSTOCH_HOST_LOADS)  // another device compiler (no hints), unless the host emulation brings its own
template <typename T, int V>
__device__ __forceinline__ void load_nc(const T* p, Pack<T, V>& r) { r = *reinterpret_cast<const Pack<T, V>*>(p); }
template <typename T, int V>
__device__ __forceinline__ void load_cs(const T* p, Pack<T, V>& r) { r = *reinterpret_cast<const Pack<T, V>*>(p); }
template <typename T, int V>
__device__ __forceinline__ void store_cs(T* p, const Pack<T, V>& r) { *reinterpret_cast<Pack<T, V>*>(p) = r; }
__device__ __forceinline__ void spin_pause() {}
#endif

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack_nc(const T* p) {
    Pack<T, V> r;
    load_nc(p, r);
    return r;
}

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack_cs(const T* p) {
    Pack<T, V> r;
    load_cs(p, r);
    return r;
}

// store_pack, streaming when `stream`
template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const T* v, bool stream) {
    if (stream)
        store_cs(p, as_pack<T, V>(v));
    else
        store_pack<T, V>(p, v);
}

// The block's dynamic shared memory, as bytes named `name` (the host emulation gives each block of a grid its own).
#ifndef DYNAMIC_SHARED
#define DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

// This thread's index in the grid.
__device__ __forceinline__ i64 grid_thread() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }

// The row i and first column c of the V entries of an n x w block that the mixing kernel's thread `tid` (the
// grid's thread, or a step of ROUNDS' grid-stride loop) computes, their sums acc zeroed; false past the block's
// end or once an earlier check (not `launch`'s own) has failed (see "run status").
template <typename T, int V>
__device__ __forceinline__ bool mixing_thread(i64 n, i64 w, const u64* status, u64 launch, i64 tid, i64& i, i64& c,
                                              T* acc) {
    const i64 groups = w / V;
    if (tid >= n * groups || frozen(status, launch)) return false;
    i = tid / groups;
    c = (tid - i * groups) * V;
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0;
    return true;
}

// What a mixing kernel gathers, as a view at (row i, column c): load(k) is the pack of V values of row
// i + k; load_near(k) and load_far(k) the same read through the read-only path, as streaming for load_far
// (load_pack_nc, load_pack_cs). Rows: the rows of a block X (a gossip round). WRITTEN: rows written earlier
// in the same launch (ROUNDS below): plain loads only (the read-only path's cache is not kept coherent with
// the launch's own stores), no hints.
template <typename T, int V, bool WRITTEN = false>
struct Rows {
    const T* p;
    i64 w;
    __device__ __forceinline__ Rows at(i64 i, i64 c) const { return {p + i * w + c, w}; }
    __device__ __forceinline__ Pack<T, V> load(i64 k) const { return load_pack<T, V>(p + k * w); }
    __device__ __forceinline__ Pack<T, V> load_near(i64 k) const {
        return WRITTEN ? load(k) : load_pack_nc<T, V>(p + k * w);
    }
    __device__ __forceinline__ Pack<T, V> load_far(i64 k) const {
        return WRITTEN ? load(k) : load_pack_cs<T, V>(p + k * w);
    }
};

// TrackerInput: psi = y + s_new g_new - s_old g_old of the gathered rows, computed as it is read (the CPU's
// gt_tracker_input in gt.hpp, the same operations in the same order), so psi is never written.
template <typename T, int V>
struct TrackerInput {
    const T *y, *g_new, *g_old, *s_new, *s_old;
    i64 w;
    __device__ __forceinline__ TrackerInput at(i64 i, i64 c) const {
        const i64 o = i * w + c;
        return {y + o, g_new + o, g_old + o, s_new + i, s_old + i, w};
    }
    __device__ __forceinline__ Pack<T, V> load(i64 k) const {
        const i64 o = k * w;
        const Pack<T, V> a = load_pack<T, V>(y + o), b = load_pack<T, V>(g_new + o), e = load_pack<T, V>(g_old + o);
        const T sn = s_new[k], so = s_old[k];
        Pack<T, V> r;
#pragma unroll
        for (int q = 0; q < V; ++q) r.v[q] = a.v[q] + sn * b.v[q] - so * e.v[q];
        return r;
    }
    // (the one-launch phase runs on blocks far smaller than L2: no hints)
    __device__ __forceinline__ Pack<T, V> load_near(i64 k) const { return load(k); }
    __device__ __forceinline__ Pack<T, V> load_far(i64 k) const { return load(k); }
};

// Where a mixing kernel's sums go (`stream`: stores as streaming, see store_pack). Store: row i of Y (a gossip
// round).
template <typename T, int V>
struct Store {
    T* Y;
    i64 w;
    __device__ __forceinline__ void operator()(i64 i, i64 c, const T* acc, bool stream) const {
        store_pack<T, V>(Y + i * w + c, acc, stream);
    }
};

// Descent: the last round of Pull-Diag-GT's y phase: y <- the sums and xw <- x - lr y (the CPU's
// descent_rows, gt.hpp); a NaN or Inf in xw is reported under `launch` (see "run status"). Its stores stay
// plain (streaming them made the float32 circulant instance spill, for one round in R).
template <typename T, int V>
struct Descent {
    T* y;
    T* xw;
    const T* x;
    T lr;
    i64 w;
    u64* status;
    u64 launch;
    __device__ __forceinline__ void operator()(i64 i, i64 c, const T* acc, bool) const {
        const i64 o = i * w + c;
        store_pack<T, V>(y + o, acc);
        const Pack<T, V> xv = load_pack<T, V>(x + o);
        T v[V];
        bool bad = false;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            v[k] = xv.v[k] - lr * acc[k];
            bad |= !(v[k] - v[k] == T(0));
        }
        store_pack<T, V>(xw + o, v);
        if (bad) report(status, launch);
    }
};

// "entry": one thread per V consecutive entries of a row (w % V == 0; V = 1: any w), V values as one
// 8- or 16-byte load; the threads of a row read its CSR entries together (one broadcast load), the
// gathered rows are read by consecutive threads (coalesced). U > 1: the loads of U neighbours are issued
// before their products are added (more bytes in flight; the sum keeps its order).
// ROW: every stored weight of row i equals Ax[i] (Ax then holds n per-row weights, not the CSR's values:
// the in-degree rule's matrices), so the values array is not read, 8 or 4 bytes less per nonzero; the
// products, hence the sums, are the same bits.
template <typename T, typename I, int V, int U, bool ROW, class Src, class Sink>
__device__ void csr_mix_entry(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                              const Src src, const Sink sink, i64 n, i64 w, const u64* status, u64 launch, i64 tid) {
    i64 i, c;
    T acc[V];
    if (!mixing_thread<T, V>(n, w, status, launch, tid, i, c, acc)) return;
    const Src Xc = src.at(0, c);
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
                x[u] = Xc.load((i64)Aj[p + u]);
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int k = 0; k < V; ++k) acc[k] += a[u] * x[u].v[k];
        }
    }
    for (; p < end; ++p) {
        const T a = ROW ? row_weight : Ax[p];
        const Pack<T, V> x = Xc.load((i64)Aj[p]);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += a * x.v[k];
    }
    sink(i, c, acc, false);
}

// acc += a * (the V values of row -D[q] of base) for q = q .. end - 1 in order, U loads in flight, as
// streaming if FAR (load_far, else load_near)
template <typename T, typename I, int V, int U, bool FAR, class Src>
__device__ __forceinline__ void circ_sum(const Src& base, const I* __restrict__ D, I q, const I end, const T a,
                                         T* acc) {
    for (; q + U <= end; q += U) {
        Pack<T, V> x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = FAR ? base.load_far(-(i64)D[q + u]) : base.load_near(-(i64)D[q + u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] += a * x[u].v[k];
    }
    for (; q < end; ++q) {
        const Pack<T, V> x = FAR ? base.load_far(-(i64)D[q]) : base.load_near(-(i64)D[q]);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += a * x.v[k];
    }
}

// The runs of CIRC's offsets D (Aj, m of them) for row i: `first` offsets above i (those wrap), `far` offsets at
// least Ap[2] bytes of rows away (the cache hints' threshold; 0: none).
template <typename T, typename I>
__device__ __forceinline__ void circ_runs(const I* __restrict__ Ap, const I* __restrict__ Aj, const I m, i64 i,
                                          i64 w, I& first, I& far) {
    const i64 hint = Ap[2];  // (I: int, see ENTRIES_I32)
    first = 0;
    far = 0;
    while (first < m && (i64)Aj[first] > i) ++first;
    if (hint > 0)
        while (far < m && (i64)Aj[far] * w * (i64)sizeof(T) >= hint) ++far;
}

// CIRC: a circulant matrix with one weight (the exponential graph, the ring, under the in-degree rule): row
// i's neighbours are i - D[k] (mod n) for the m offsets D, strictly decreasing, in Aj (Ap = {0, m, h}, Ax =
// {the weight}). Its CSR order (columns ascending) is the offsets <= i (columns i - D[k], no wrap), then
// those above i (columns i + n - D[k]): two runs of circ_sum. Only X is read (and Y written): neither the
// CSR's indices nor its values; the same products in the same order as "entry", hence the same bits.
// Cache hints (h > 0: about a quarter of the L2's bytes, backends/cupy.py's L2_HINTS and device_circulant):
// the blocks run through the rows in order, so row j of X is read at offset D[k] when the rows reach j + D[k],
// and again D[k - 1] - D[k] >= D[k] rows later (the offsets at least double where h > 0), or never after the
// largest. Where that is h bytes of rows or more (the first `far` offsets of D), the L2 has turned over in
// between: those reads go as streaming, so do the wrapped reads (offsets above i: the rows at the end of X,
// next read when the rows get there) and the stores of Y, and the lines read again soon, the near offsets',
// stay (an LRU model of one round: bench/l2_model.cpp). Only the cache's choices change: the same loads, the
// same bits.
template <typename T, typename I, int V, int U, class Src, class Sink>
__device__ void csr_mix_circ(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                             const Src src, const Sink sink, i64 n, i64 w, const u64* status, u64 launch, i64 tid) {
    i64 i, c;
    T acc[V];
    if (!mixing_thread<T, V>(n, w, status, launch, tid, i, c, acc)) return;
    const T a = Ax[0];
    const I m = Ap[1];
    I first, far;
    circ_runs<T, I>(Ap, Aj, m, i, w, first, far);
    const Src own = src.at(i, c);
    const I split = far > first ? far : first;
    circ_sum<T, I, V, U, true>(own, Aj, first, split, a, acc);
    circ_sum<T, I, V, U, false>(own, Aj, split, m, a, acc);
    if (far > 0)  // (the wrapped offsets, all of them: see above)
        circ_sum<T, I, V, U, true>(own.at(n, 0), Aj, 0, first, a, acc);
    else
        circ_sum<T, I, V, U, false>(own.at(n, 0), Aj, 0, first, a, acc);
    sink(i, c, acc, far > 0);
}

// CIRC's sums (acc += ...) for row i, the offsets from index `near` on read from a tile: `own` is row i (at its
// column) of the round's input, `own_tile` row i's place in the tile, which holds the rows up to D[near] above it.
// CIRC's runs, each cut where its offsets reach D[near]: one load kind per run, no choice per load (which made
// ptxas 13.3+ spill at 32 registers). Returns whether CIRC's cache hints stream (far offsets: Ap[2] > 0).
template <typename T, typename I, int V, int U, class Src>
__device__ __forceinline__ bool tiled_circ_sum(const I* __restrict__ Ap, const I* __restrict__ Aj, const I m,
                                               const I near, const T a, const Src& own,
                                               const Rows<T, V, true>& own_tile, i64 i, i64 n, i64 w, T* acc) {
    I first, far;
    circ_runs<T, I>(Ap, Aj, m, i, w, first, far);
    const I split = far > first ? far : first, cut = split > near ? split : near;
    circ_sum<T, I, V, U, true>(own, Aj, first, split, a, acc);
    circ_sum<T, I, V, U, false>(own, Aj, split, cut, a, acc);
    circ_sum<T, I, V, U, false>(own_tile, Aj, cut, m, a, acc);
    if (far > 0) {  // (the wrapped offsets as streaming, as CIRC)
        circ_sum<T, I, V, U, true>(own.at(n, 0), Aj, 0, first, a, acc);
    } else {
        const I wrapped_cut = first < near ? first : near;
        circ_sum<T, I, V, U, false>(own.at(n, 0), Aj, 0, wrapped_cut, a, acc);
        circ_sum<T, I, V, U, false>(own_tile, Aj, wrapped_cut, first, a, acc);
    }
    return far > 0;
}

// CIRCT: CIRC with the near offsets' rows from shared memory. A block of rb x (w / V) threads takes rb
// consecutive rows from i0 (one thread per V values, CIRC's rows and columns for the same threads), loads the
// rows [i0 - h, i0 + rb) (mod n) into a tile, h the largest offset <= rb (the self loop, 1, 2, 4, ...: those
// rows are gathered by several of the block's rows), and gathers the offsets up to h from it, the others from
// X as CIRC does (with its cache hints). The same products in the same order, hence the same bits; the L2
// serves one tile per block instead of each near offset's rows.
template <typename T, typename I, int V, int U>
__device__ void csr_mix_circt(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                              const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* status) {
    DYNAMIC_SHARED(smem);
    T* tile = reinterpret_cast<T*>(smem);
    const int groups = (int)(w / V), rb = (int)blockDim.x / groups;  // (a block: at most 1024 threads)
    const i64 i0 = (i64)blockIdx.x * rb;
    const I m = Ap[1];
    I near = 0;  // D[near] is the largest offset <= rb
    while (near < m && Aj[near] > rb) ++near;
    const int h = near < m ? (int)Aj[near] : 0, rows = h + (int)(rb < n - i0 ? rb : n - i0);
    for (int e = threadIdx.x; e < rows * groups; e += blockDim.x) {
        const int r = e / groups, q = (e - r * groups) * V;
        const i64 row = i0 - h + r < 0 ? i0 - h + r + n : i0 - h + r;
        store_pack<T, V>(tile + (i64)r * w + q, load_pack_nc<T, V>(X + row * w + q).v);
    }
    __syncthreads();
    const int lr = (int)threadIdx.x / groups;
    const i64 i = i0 + lr, c = ((int)threadIdx.x - lr * groups) * V;
    if (i >= n || frozen(status, 0)) return;
    T acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0;
    const bool far = tiled_circ_sum<T, I, V, U>(Ap, Aj, m, near, Ax[0], Rows<T, V>{X + i * w + c, w},
                                                Rows<T, V, true>{tile + (i - i0 + h) * w + c, w}, i, n, w, acc);
    Store<T, V>{Y, w}(i, c, acc, far);
}

// The kernels' families (backends/cupy.py's _mix_arguments): "entry" (the CSR's values), "row" (one weight
// per row, ROW above) and "circ" (CIRC above).
template <typename T, typename I, int V, int U, class Src, class Sink>
__device__ __forceinline__ void mix_family_entry(const I* Ap, const I* Aj, const T* Ax, const Src& src,
                                                 const Sink& sink, i64 n, i64 w, const u64* status, u64 launch,
                                                 i64 tid) {
    csr_mix_entry<T, I, V, U, false>(Ap, Aj, Ax, src, sink, n, w, status, launch, tid);
}
template <typename T, typename I, int V, int U, class Src, class Sink>
__device__ __forceinline__ void mix_family_row(const I* Ap, const I* Aj, const T* Ax, const Src& src,
                                               const Sink& sink, i64 n, i64 w, const u64* status, u64 launch,
                                               i64 tid) {
    csr_mix_entry<T, I, V, U, true>(Ap, Aj, Ax, src, sink, n, w, status, launch, tid);
}
template <typename T, typename I, int V, int U, class Src, class Sink>
__device__ __forceinline__ void mix_family_circ(const I* Ap, const I* Aj, const T* Ax, const Src& src,
                                                const Sink& sink, i64 n, i64 w, const u64* status, u64 launch,
                                                i64 tid) {
    csr_mix_circ<T, I, V, U>(Ap, Aj, Ax, src, sink, n, w, status, launch, tid);
}

// ROUNDS: R >= 2 gossip rounds in one launch (backends/cupy.py's ROUNDS = "persistent", for small blocks, where a
// launch per round costs more than the round's work): csr_rounds, out <- A^R X (mix_power), and gt_rounds,
// Pull-Diag-GT's whole y phase (its first round gathering the tracker input as it reads, TrackerInput, as
// gt_phase does; its last the descent, Descent, checked under `launch`). Round s writes out where R - s is even,
// else work, as separate launches of the family's kernels do (the y phase: y_out and work, its tracker input
// never written), the same sums per entry, hence the same bits. The grid's threads loop over the entries
// (grid-stride) and meet at a grid-wide barrier between two rounds, so the grid is launched as a cooperative
// kernel: all its blocks resident at once, or the launch fails (a block that never starts would leave the others
// waiting). The rounds read rows that the launch itself wrote: through Rows<T, V, true> (plain loads), never
// the read-only path. A launch that finds status set (by another launch) does nothing, every block alike:
// nothing else changes status during it.

// Every thread of the grid waits here until all its blocks have arrived; what any of them stored before is then
// seen by all. `arrived`: a word of the launch's own (0 before its first launch): block 0 adds 2^31 - (blocks -
// 1), every other block 1, so its top bit flips when the last block arrives, and its low bits are 0 again for the
// next barrier or launch. (spin_pause: nothing on a GPU; the host emulation lets the other threads run.)
__device__ __forceinline__ void grid_barrier(unsigned* arrived) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned add = blockIdx.x == 0 ? 0x80000000u - ((unsigned)gridDim.x - 1u) : 1u;
        __threadfence();  // (this block's stores before its arrival)
        const unsigned before = atomicAdd(arrived, add);
        while (((before ^ load_word(arrived)) & 0x80000000u) == 0) spin_pause();
        __threadfence();  // (the other blocks' stores before this block's next loads)
    }
    __syncthreads();
}

// round(s, src, dst, e): entry e (a mixing thread's V values) of round s, which reads src (round s - 1's output;
// `in` for round 1) and writes dst
template <typename T, int V, class Round>
__device__ void rounds_impl(const T* in, T* out, T* work, i64 n, i64 w, i64 R, const u64* status, u64 launch,
                            unsigned* arrived, const Round& round) {
    if (frozen(status, launch)) return;
    const i64 entries = n * (w / V), stride = (i64)gridDim.x * blockDim.x;
    const T* src = in;
    for (i64 s = 1; s <= R; ++s) {
        T* dst = (R - s) % 2 == 0 ? out : work;
        for (i64 e = grid_thread(); e < entries; e += stride) round(s, src, dst, e);
        if (s < R) grid_barrier(arrived);
        src = dst;
    }
}

// CIRCT's rounds in one launch (csr_rounds_circt: ROUNDS = "persistent" with MIX_KERNEL = "circt"). Block b takes
// the `chunk` rows from b chunk in every round (the host sizes the grid so that its blocks cover the n rows once),
// loads those rows of the round's input and the h rows above them (mod n) into its tile (h = D[near], the largest
// offset <= chunk whose tile fits in the launch's `shared` bytes, 0 if none) and gathers as CIRCT does:
// the offsets up to h from the tile, the others from the round's input, both through plain loads (rows written by
// the launch). A block's threads loop over its entries. The grid barrier between two rounds also keeps a round's
// tile until its block is done with it.
template <typename T, typename I, int V, int U>
__device__ void rounds_circt_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                                  const T* in, T* out, T* work, i64 n, i64 w, i64 R, const u64* status,
                                  unsigned* arrived, i64 chunk, i64 shared) {
    if (frozen(status, 0)) return;
    DYNAMIC_SHARED(smem);
    T* tile = reinterpret_cast<T*>(smem);
    const I m = Ap[1];
    I near = 0;
    while (near < m && ((i64)Aj[near] > chunk || (chunk + (i64)Aj[near]) * w * (i64)sizeof(T) > shared)) ++near;
    const i64 h = near < m ? (i64)Aj[near] : 0, i0 = (i64)blockIdx.x * chunk;
    const i64 rows = i0 >= n ? 0 : chunk < n - i0 ? chunk : n - i0;
    // (a tile's entries fit in 32 bits: they fit in shared memory)
    const int groups = (int)(w / V), loads = (int)((h + rows) * groups), entries = (int)(rows * groups);
    const T a = Ax[0];
    const T* src = in;
    for (i64 s = 1; s <= R; ++s) {
        T* dst = (R - s) % 2 == 0 ? out : work;
        for (int e = threadIdx.x; e < loads; e += blockDim.x) {
            const int r = e / groups, q = (e - r * groups) * V;
            const i64 row = i0 - h + r;
            store_pack<T, V>(tile + (i64)r * w + q, load_pack<T, V>(src + (row < 0 ? row + n : row) * w + q).v);
        }
        __syncthreads();
        for (int e = threadIdx.x; e < entries; e += blockDim.x) {
            const int lr = e / groups, c = (e - lr * groups) * V;
            const i64 i = i0 + lr;
            T acc[V];
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = 0;
            tiled_circ_sum<T, I, V, U>(Ap, Aj, m, near, a, Rows<T, V, true>{src + i * w + c, w},
                                       Rows<T, V, true>{tile + (lr + h) * w + c, w}, i, n, w, acc);
            Store<T, V>{dst, w}(i, c, acc, false);
        }
        if (s < R) grid_barrier(arrived);
        src = dst;
    }
}

// psi <- y + s_new g_new - s_old g_old (gt.hpp's gt_tracker_input) element-wise, for the y phases whose
// first round does not compute it as it reads (large blocks: the gathers would read three blocks).
template <typename T>
__device__ void tracker_input_impl(const T* __restrict__ y, const T* __restrict__ g_new, const T* __restrict__ g_old,
                                   const T* __restrict__ s_new, const T* __restrict__ s_old, T* __restrict__ psi,
                                   i64 n, i64 w, const u64* status) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n * w || frozen(status, 0)) return;
    const i64 i = tid / w;
    psi[tid] = TrackerInput<T, 1>{y, g_new, g_old, s_new, s_old, w}.at(i, tid - i * w).load(0).v[0];
}

// s_new <- table[min(t + 1, last)] and s_old <- table[min(t, last)] (rows of n values), for the optimizer's
// iteration t = clock[2] + clock[4] read on the device (a replay count and the host's base, see "run status"):
// a Pull-Diag-GT step replayed as one graph while its exact tracker has not frozen (its rows change per step).
template <typename T>
__device__ void tracker_rows_impl(const T* __restrict__ table, i64 last, i64 n, const u64* __restrict__ clock,
                                  T* __restrict__ s_new, T* __restrict__ s_old) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u64 t = clock[2] + clock[4];
    const i64 a = t + 1 < (u64)last ? (i64)(t + 1) : last, b = t < (u64)last ? (i64)t : last;
    s_new[i] = table[a * n + i];
    s_old[i] = table[b * n + i];
}

// ------------------------------------------------------------------ combine
// out[i, c] = sum_t a_t x_t[i, c] for K <= 4 terms, a_t = r_t[i] (a per-row coefficient) when r_t is not
// null, else the scalar c_t; summed left to right as the CPU's combine (gt.hpp), so with --fmad=false the
// bits are the same. A term may be out itself (each thread reads its element before writing it). A NaN or
// Inf in out is reported on status under this launch's id (see "run status"). One kernel per K (combine<K>:
// K terms' arguments, no more: a launch's host cost grows with its arguments).
template <typename T, int K>
__device__ void combine_impl(const T* const* x, const T* const* r, const T* c, T* out, i64 total, i64 w,
                             u64* status, u64 launch) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= total || frozen(status, launch)) return;
    const i64 i = tid / w;
    T v = (r[0] ? r[0][i] : c[0]) * x[0][tid];
#pragma unroll
    for (int t = 1; t < K; ++t) v = v + (r[t] ? r[t][i] : c[t]) * x[t][tid];
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
template <typename T, typename I, int V>
__device__ void csr_mix_lossy_impl(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax,
                                   const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* status,
                                   u64 round_key, double p, int renormalise, const unsigned char* __restrict__ awake,
                                   const unsigned char* __restrict__ bad) {
    const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 groups = w / V;
    if (tid >= n * groups || frozen(status, 0)) return;
    const i64 i = tid / groups, c = (tid - i * groups) * V;
    if (awake && !awake[i]) {  // asleep: keeps x_i
        const Pack<T, V> x = load_pack<T, V>(X + i * w + c);
        store_pack<T, V>(Y + i * w + c, x.v);
        return;
    }
    const u64 row = mix64(round_key ^ (u64)i);
    T acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0;
    T den = 0;
    bool lost = false;
    const I end = Ap[i + 1];
    for (I q = Ap[i]; q < end; ++q) {
        const i64 j = (i64)Aj[q];
        const bool gone = j != i && ((awake && !awake[j]) ||
                                     ((!bad || bad[q]) && p > 0.0 &&
                                      (double)(mix64(row ^ (u64)j) >> 11) * (1.0 / 9007199254740992.0) < p));
        lost |= gone;
        const T a = gone ? T(0) : Ax[q];
        const Pack<T, V> x = load_pack<T, V>(X + j * w + c);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += a * x.v[k];
        den += a;
    }
    if (lost && renormalise) {
        if (den == T(0)) {
            const Pack<T, V> x = load_pack<T, V>(X + i * w + c);
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] = x.v[k];
        } else {
#pragma unroll
            for (int k = 0; k < V; ++k) acc[k] /= den;
        }
    }
    store_pack<T, V>(Y + i * w + c, acc);
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

// The b-th sample id of a partial Fisher-Yates (for b = 0, 1, ..: swap the entries b and draws[b] >= b of the
// identity) without doing the swaps: the entry at position p = draws[b] just before swap b, which is p unless an
// earlier swap t drew p, in which case it is what position t held just before swap t, and so on down. One pass
// over the earlier draws, from b - 1 down (b loads, 8 in flight: they do not depend on p; O(B^2) for the batch,
// so for batches of at most 4 draws per thread of the block).
__device__ __forceinline__ int batch_id(const int* __restrict__ draws, i64 b) {
    int p = draws[b];
    i64 t = b - 1;
    for (; t >= 7; t -= 8) {
        int k8[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) k8[u] = draws[t - u];
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (k8[u] == p) p = (int)(t - u);
    }
    for (; t >= 0; --t)
        if (draws[t] == p) p = (int)t;
    return p;
}

// One block of W = blockDim.x / 32 warps per (repetition, node) row. Warp 0 draws the row's mini-batch (the
// CPU's partial Fisher-Yates over the samples): the draws by the whole warp when M <= 4096 (parallel_draws),
// by its lane 0 else. For batches of at most 4 samples per thread, every thread reads its samples' ids off
// the draws (batch_id); for larger ones lane 0 applies the draws to a permutation of the M samples (reset to
// the identity by the block before the next batch). Draws, ids and permutation are in shared memory
// (`layout` 1) or in the global scratch `spill` when they do not fit (`layout` 0). The block then takes 32 W
// samples at a time: each thread one sample's margin (in rowstoch::dot4's order) and coefficient, all at
// once; warp 0 adds them up in order, lane q accumulating coordinates q, q + 32, ..: the same sums as
// rowstoch::logistic_stochastic_grad on the CPU, bit for bit, for any W (W = 1: one warp does it all). The
// sums load 8 samples' values before adding them (in order), so that their loads are in flight together.
// Many warps per row help where rows are few (the paper's n = 512: the margins' loads and exp of 200 samples
// in flight together instead of in 7 rounds, the ids without 200 swaps in sequence); one where rows fill
// the device.
// K = ceil(d / 32) <= 4: lane q keeps coordinates q, q + 32, .., q + 32 (K - 1) in registers (one kernel per
// K, so that d <= 32, the paper's d = 10, holds 8 values in flight, not 32); K = 0: any d, the sums in G.
// The draws are those of `iteration`, plus, where `clock` is not null (a run status, see "run status": a launch
// captured in a CUDA graph), clock[2] + clock[3]: the graph's replay count and a base the host keeps so that
// the sum is the oracle's iteration at every replay.
// `layout` bit 1 set: X and G node-major, (m, reps * d) (an optimizer's layout of its repetitions), else
// (reps, m, d).
// Launched with one block per row and dynamic shared memory [32 W coefficients T][32 W sample ids int] then,
// for layout 1, [perm: M int][draws: B int].
template <typename T, int K>
__device__ void logistic_grad_impl(const T* __restrict__ H, const T* __restrict__ Yl, const i64* __restrict__ nodes,
                                   i64 m, i64 M, i64 d, T rho, const T* __restrict__ X, i64 reps, i64 B,
                                   i64 batches, u64 seed, u64 iteration, const u64* __restrict__ clock,
                                   i64 rep_offset, int layout, int* __restrict__ spill, T* __restrict__ G) {
    DYNAMIC_SHARED(smem);
    const int tid = threadIdx.x, lane = tid & 31, width = blockDim.x;
    const bool first_warp = tid < 32;
    const i64 row = blockIdx.x;
    if (row >= reps * m) return;  // the whole block
    T* coef = reinterpret_cast<T*>(smem);
    int* ids = reinterpret_cast<int*>(smem + width * sizeof(T));
    int* perm = layout & 1 ? ids + width : spill + row * (M + B);  // its first B: the batch's sample ids, in order
    int* swaps = perm + M;                                             // the draws b + below(s, M - b)
    const i64 rep = row / m;
    const i64 node = nodes ? nodes[row % m] : row % m;
    if (clock) iteration += clock[2] + clock[3];  // inside a graph: the replay count plus the host's base
    const bool chained = B <= 4 * width;  // (the whole block) the batch's ids from the draws, else lane 0's swaps
    if (!chained)
        for (i64 l = tid; l < M; l += width) perm[l] = (int)l;
    const i64 at = layout & 2 ? (row % m) * reps + rep : row;  // the row of X and G
    const T* x = X + at * d;
    T* g = G + at * d;
    const T* Hi = H + node * M * d;
    const T* Yi = Yl + node * M;
    const T weight = T(1) / T(B * batches);
    T acc[K > 0 ? K : 1] = {};  // warp 0's coordinates lane + 32 k, k < K; K = 0 goes through g
    if (K == 0 && first_warp)
        for (i64 q = lane; q < d; q += 32) g[q] = 0;
    __syncthreads();
    for (i64 r = 0; r < batches; ++r) {
        const u64 key = stream_key(seed, (u64)(rep + rep_offset), (u64)node, iteration, (u64)r);
        if (first_warp && M <= 4096) {  // the draws by the whole warp
            parallel_draws(key, M, B, swaps);
        } else if (tid == 0) {
            Stream s = {key, 0, 0, 0};
            for (i64 b = 0; b < B; ++b) swaps[b] = (int)(b + (i64)below(&s, (u64)(M - b)));
        }
        __syncthreads();
        if (chained) {  // the swaps' outcome read off the draws, every sample at once (batch_id above)
            for (i64 b = tid; b < B; b += width) perm[b] = batch_id(swaps, b);
        } else if (tid == 0) {  // 8 draws loaded ahead (the swaps do not write them): one load latency per swap
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
        }
        __syncthreads();
        for (i64 b0 = 0; b0 < B; b0 += width) {
            const int nb = B - b0 < width ? (int)(B - b0) : width;
            if (tid < nb) {  // every thread one sample's coefficient
                const int id = perm[b0 + tid];
                const T* h = Hi + (i64)id * d;
                T s4[4] = {0, 0, 0, 0};  // rowstoch::dot4's order
                for (i64 j = 0; j < d; ++j) s4[j & 3] += h[j] * x[j];
                const T yb = Yi[id];
                const double z = (double)(yb * ((s4[0] + s4[2]) + (s4[1] + s4[3])));
                coef[tid] = (T)(-(double)yb * logistic_weight(z) * (double)weight);
                ids[tid] = id;
            }
            __syncthreads();
            if (first_warp && K > 0) {
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
            } else if (first_warp) {
                for (i64 q = lane; q < d; q += 32) {
                    T a = g[q];
                    for (int b = 0; b < nb; ++b) a += coef[b] * Hi[(i64)ids[b] * d + q];
                    g[q] = a;
                }
            }
            __syncthreads();
        }
        if (!chained && r + 1 < batches)  // the identity again for the next batch (the whole block)
            for (i64 l = tid; l < M; l += width) perm[l] = (int)l;
        __syncthreads();
    }
    if (!first_warp) return;
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (lane + 32 * k < d) g[lane + 32 * k] = acc[k];
    for (i64 q = lane; q < d; q += 32) {
        const T qq = T(1) + x[q] * x[q];
        g[q] += rho * T(2) * x[q] / (qq * qq);
    }
}

// The mixing kernels run 256 threads per block (backends/cupy.py's _BLOCK); at most 32 registers per thread, so
// that 8 blocks, the SM's 2048 threads, are resident (the circulant kernel took 40 and 75% of them).
#define MIX_BOUNDS __launch_bounds__(256, 8)
// The one-launch Pull-Diag-GT phase reads three blocks per neighbour: up to 64 registers, 4 blocks per SM (it runs
// on small blocks only, one value per thread).
#define GT_BOUNDS __launch_bounds__(256, 4)
// ROUNDS' mixing rounds: a round's registers and the grid-stride loop's, up to 48, 5 blocks per SM ((256, 8) and
// (256, 6) made the circulant instances spill).
#define ROUNDS_BOUNDS __launch_bounds__(256, 5)
// csr_mix_<family><V>x<U>_<value>_<index>: a gossip round Y <- A X of the family entry, row (Ax: n per-row
// weights) or circ (Ap = {0, m}, Aj the offsets, Ax the one weight); see csr_mix_entry and csr_mix_circ.
#define MIXK(family, suffix, T, I, V, U) \
    __global__ void MIX_BOUNDS csr_mix_##family##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* __restrict__ status) { \
        mix_family_##family<T, I, V, U>(Ap, Aj, Ax, Rows<T, V>{X, w}, Store<T, V>{Y, w}, n, w, status, 0, grid_thread()); }
// gt_descent_<family><V>x<U>_<value>_<index>: the last round of a Pull-Diag-GT y phase, y <- A X and
// xw <- x - lr y, checked under `launch` (Descent above)
#define DESCENTK(family, suffix, T, I, V, U) \
    __global__ void MIX_BOUNDS gt_descent_##family##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* __restrict__ X, const T* __restrict__ x, T lr, T* __restrict__ y, T* __restrict__ xw, i64 n, i64 w, u64* __restrict__ status, u64 launch) { \
        mix_family_##family<T, I, V, U>(Ap, Aj, Ax, Rows<T, V>{X, w}, Descent<T, V>{y, xw, x, lr, w, status, launch}, n, w, status, launch, grid_thread()); }
// gt_phase_<family><V>x<U>_<value>_<index>: a whole one-round Pull-Diag-GT y phase in one launch,
// y_out <- A (y + s_new g_new - s_old g_old) and xw <- x - lr y_out (TrackerInput and Descent above)
#define PHASEK(family, suffix, T, I, V, U) \
    __global__ void GT_BOUNDS gt_phase_##family##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* __restrict__ y, const T* __restrict__ g_new, const T* __restrict__ g_old, const T* __restrict__ s_new, const T* __restrict__ s_old, const T* __restrict__ x, T lr, T* __restrict__ y_out, T* __restrict__ xw, i64 n, i64 w, u64* __restrict__ status, u64 launch) { \
        mix_family_##family<T, I, V, U>(Ap, Aj, Ax, TrackerInput<T, V>{y, g_new, g_old, s_new, s_old, w}, Descent<T, V>{y_out, xw, x, lr, w, status, launch}, n, w, status, launch, grid_thread()); }
#define ENTRY(suffix, T, I, V, U) MIXK(entry, suffix, T, I, V, U)
#define ROWW(suffix, T, I, V, U) MIXK(row, suffix, T, I, V, U)
#define CIRCW(suffix, T, I, V, U) MIXK(circ, suffix, T, I, V, U)
// csr_mix_circt<V>x<U>_<value>_i32: a gossip round of CIRCT, blocks of up to 1024 threads (2 per SM); float32
// one value per thread only (its 16-byte packs spilled under these bounds)
#define CIRCTK(suffix, T, I, V, U) \
    __global__ void __launch_bounds__(1024, 2) csr_mix_circt##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* __restrict__ X, T* __restrict__ Y, i64 n, i64 w, const u64* __restrict__ status) { \
        csr_mix_circt<T, I, V, U>(Ap, Aj, Ax, X, Y, n, w, status); }
// csr_rounds_<family><V>x<U>_<value>_<index> and gt_rounds_<family>1x2_...: R >= 2 rounds of mix_power, and a
// whole Pull-Diag-GT y phase of R >= 2 rounds (the tracker input gathered, then the descent, checked under
// `launch`), each in one cooperative launch (ROUNDS above).
#define ROUNDSK(family, suffix, T, I, V, U) \
    __global__ void ROUNDS_BOUNDS csr_rounds_##family##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* X, T* out, T* work, i64 n, i64 w, i64 R, const u64* __restrict__ status, unsigned* arrived) { \
        rounds_impl<T, V>(X, out, work, n, w, R, status, 0, arrived, [&](i64, const T* src, T* dst, i64 e) { \
            mix_family_##family<T, I, V, U>(Ap, Aj, Ax, Rows<T, V, true>{src, w}, Store<T, V>{dst, w}, n, w, nullptr, 0, e); }); }
// csr_rounds_circt<V>x<U>_<value>_i32: R >= 2 rounds of CIRCT in one cooperative launch (rounds_circt_impl), blocks of
// 512 threads, 2 per SM at up to 64 registers (at 32, CIRCT's (1024, 2), they spilled 8-240 bytes); float32 one
// value per thread, as CIRCT
#define ROUNDS_CIRCTK(suffix, T, I, V, U) \
    __global__ void __launch_bounds__(512, 2) csr_rounds_circt##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* X, T* out, T* work, i64 n, i64 w, i64 R, const u64* __restrict__ status, unsigned* arrived, i64 chunk, i64 shared) { \
        rounds_circt_impl<T, I, V, U>(Ap, Aj, Ax, X, out, work, n, w, R, status, arrived, chunk, shared); }
#define GT_ROUNDSK(family, suffix, T, I, V, U) \
    __global__ void GT_BOUNDS gt_rounds_##family##V##x##U##_##suffix(const I* __restrict__ Ap, const I* __restrict__ Aj, const T* __restrict__ Ax, const T* y, const T* g_new, const T* g_old, const T* s_new, const T* s_old, const T* x, T lr, T* y_out, T* xw, T* work, i64 n, i64 w, i64 R, u64* __restrict__ status, u64 launch, unsigned* arrived) { \
        rounds_impl<T, V>(nullptr, y_out, work, n, w, R, status, launch, arrived, [&](i64 s, const T* src, T* dst, i64 e) { \
            if (s == 1) mix_family_##family<T, I, V, U>(Ap, Aj, Ax, TrackerInput<T, V>{y, g_new, g_old, s_new, s_old, w}, Store<T, V>{dst, w}, n, w, nullptr, 0, e); \
            else if (s < R) mix_family_##family<T, I, V, U>(Ap, Aj, Ax, Rows<T, V, true>{src, w}, Store<T, V>{dst, w}, n, w, nullptr, 0, e); \
            else mix_family_##family<T, I, V, U>(Ap, Aj, Ax, Rows<T, V, true>{src, w}, Descent<T, V>{dst, xw, x, lr, w, status, launch}, n, w, nullptr, 0, e); }); }
#define ROUNDS_ENTRY(suffix, T, I, V, U) ROUNDSK(entry, suffix, T, I, V, U)
#define ROUNDS_ROW(suffix, T, I, V, U) ROUNDSK(row, suffix, T, I, V, U)
#define ROUNDS_CIRC(suffix, T, I, V, U) ROUNDSK(circ, suffix, T, I, V, U)
#define GT_ROUNDS(suffix, T, I, V, U) GT_ROUNDSK(entry, suffix, T, I, V, U) GT_ROUNDSK(row, suffix, T, I, V, U)
#define DESCENTS(suffix, T, I, V, U) DESCENTK(entry, suffix, T, I, V, U) DESCENTK(row, suffix, T, I, V, U)
#define CIRC_DESCENTS(suffix, T, I, V, U) DESCENTK(circ, suffix, T, I, V, U)
#define PHASES(suffix, T, I, V, U) PHASEK(entry, suffix, T, I, V, U) PHASEK(row, suffix, T, I, V, U)
// (the circulant kernels take 32-bit offsets only, whatever the CSR's indices: backends/cupy.py's device_circulant)
#define ENTRIES_I32(V32, U, E) \
    E(f64_i32, double, int, 1, U) E(f32_i32, float, int, 1, U) E(f64_i32, double, int, 2, U) E(f32_i32, float, int, V32, U)
#define ENTRIES(V32, U, E) ENTRIES_I32(V32, U, E) \
    E(f64_i64, double, i64, 1, U) E(f32_i64, float, i64, 1, U) E(f64_i64, double, i64, 2, U) E(f32_i64, float, i64, V32, U)
// combine<K>_<value> (combine_impl above)
#define COMBINE1(suffix, T) \
    __global__ void combine1_##suffix(const T* x0, const T* r0, T c0, T* out, i64 total, i64 w, u64* status, u64 launch) { \
        const T* x[1] = {x0}; const T* r[1] = {r0}; const T c[1] = {c0}; combine_impl<T, 1>(x, r, c, out, total, w, status, launch); }
#define COMBINE2(suffix, T) \
    __global__ void combine2_##suffix(const T* x0, const T* x1, const T* r0, const T* r1, T c0, T c1, T* out, i64 total, i64 w, u64* status, u64 launch) { \
        const T* x[2] = {x0, x1}; const T* r[2] = {r0, r1}; const T c[2] = {c0, c1}; combine_impl<T, 2>(x, r, c, out, total, w, status, launch); }
#define COMBINE3(suffix, T) \
    __global__ void combine3_##suffix(const T* x0, const T* x1, const T* x2, const T* r0, const T* r1, const T* r2, T c0, T c1, T c2, T* out, i64 total, i64 w, u64* status, u64 launch) { \
        const T* x[3] = {x0, x1, x2}; const T* r[3] = {r0, r1, r2}; const T c[3] = {c0, c1, c2}; combine_impl<T, 3>(x, r, c, out, total, w, status, launch); }
#define COMBINE4(suffix, T) \
    __global__ void combine4_##suffix(const T* x0, const T* x1, const T* x2, const T* x3, const T* r0, const T* r1, const T* r2, const T* r3, T c0, T c1, T c2, T c3, T* out, i64 total, i64 w, u64* status, u64 launch) { \
        const T* x[4] = {x0, x1, x2, x3}; const T* r[4] = {r0, r1, r2, r3}; const T c[4] = {c0, c1, c2, c3}; combine_impl<T, 4>(x, r, c, out, total, w, status, launch); }
#define COMBINES(suffix, T) COMBINE1(suffix, T) COMBINE2(suffix, T) COMBINE3(suffix, T) COMBINE4(suffix, T)
// tick: the first node of a graph whose check tells its replays apart ("run status" above)
#define TICK __global__ void tick(u64* status) { if (blockIdx.x == 0 && threadIdx.x == 0) status[2] += 1; }
// tracker_rows_<value> (tracker_rows_impl above)
#define TRACKER_ROWS(suffix, T) \
    __global__ void tracker_rows_##suffix(const T* table, i64 last, i64 n, const u64* clock, T* s_new, T* s_old) { \
        tracker_rows_impl<T>(table, last, n, clock, s_new, s_old); }
// tracker_input_<value> (tracker_input_impl above)
#define TRACKER_INPUT(suffix, T) \
    __global__ void tracker_input_##suffix(const T* y, const T* g_new, const T* g_old, const T* s_new, const T* s_old, T* psi, i64 n, i64 w, const u64* status) { \
        tracker_input_impl<T>(y, g_new, g_old, s_new, s_old, psi, n, w, status); }
// csr_mix_lossy<V>_<value>_<index>
#define LOSSY(suffix, T, I, V) \
    __global__ void csr_mix_lossy##V##_##suffix(const I* Ap, const I* Aj, const T* Ax, const T* X, T* Y, i64 n, i64 w, const u64* status, u64 round_key, double p, int renormalise, const unsigned char* awake, const unsigned char* bad) { \
        csr_mix_lossy_impl<T, I, V>(Ap, Aj, Ax, X, Y, n, w, status, round_key, p, renormalise, awake, bad); }
// logistic_grad<K>_<value> (K above)
#define LOGISTIC(suffix, T, K) \
    __global__ void logistic_grad##K##_##suffix(const T* H, const T* Yl, const i64* nodes, i64 m, i64 M, i64 d, T rho, const T* X, i64 reps, i64 B, i64 batches, u64 seed, u64 iteration, const u64* clock, i64 rep_offset, int layout, int* spill, T* G) { \
        logistic_grad_impl<T, K>(H, Yl, nodes, m, M, d, rho, X, reps, B, batches, seed, iteration, clock, rep_offset, layout, spill, G); }
#define GE(suffix, I) \
    __global__ void ge_advance_##suffix(const I* Ap, const I* Aj, i64 rows, unsigned char* bad, const u64* keys, i64 steps, u64 init_key, int init, double p_bad, double p_recover, double stationary) { \
        ge_advance_impl<I>(Ap, Aj, rows, bad, keys, steps, init_key, init, p_bad, p_recover, stationary); }
// Which kernels a compile instantiates: all but ROUNDS', or with ROWSTOCH_COOPERATIVE only ROUNDS' (the backend's
// second module, whose launches are cooperative: compiled only where ROUNDS = "persistent" is used, so that the
// first compile stays as short as before); ROWSTOCH_ALL_KERNELS: both (the host emulation, the tools).
extern "C" {
#if defined(ROWSTOCH_COOPERATIVE) || defined(ROWSTOCH_ALL_KERNELS)
ENTRIES(4, 4, ROUNDS_ENTRY)
ENTRIES(4, 4, ROUNDS_ROW)
ENTRIES_I32(4, 4, ROUNDS_CIRC)
ROUNDS_CIRCTK(f64_i32, double, int, 1, 4) ROUNDS_CIRCTK(f64_i32, double, int, 2, 4) ROUNDS_CIRCTK(f32_i32, float, int, 1, 4)
GT_ROUNDS(f64_i32, double, int, 1, 2) GT_ROUNDS(f64_i64, double, i64, 1, 2) GT_ROUNDS(f32_i32, float, int, 1, 2)
GT_ROUNDS(f32_i64, float, i64, 1, 2) GT_ROUNDSK(circ, f64_i32, double, int, 1, 2) GT_ROUNDSK(circ, f32_i32, float, int, 1, 2)
#endif
#if !defined(ROWSTOCH_COOPERATIVE) || defined(ROWSTOCH_ALL_KERNELS)
GE(i32, int) GE(i64, i64)
ENTRIES(4, 1, ENTRY)
ENTRIES(4, 4, ENTRY)
ENTRIES(4, 4, ROWW)
ENTRIES_I32(4, 4, CIRCW)
CIRCTK(f64_i32, double, int, 1, 4) CIRCTK(f64_i32, double, int, 2, 4) CIRCTK(f32_i32, float, int, 1, 4)
ENTRIES(4, 4, DESCENTS)
ENTRIES_I32(4, 4, CIRC_DESCENTS)
PHASES(f64_i32, double, int, 1, 2) PHASES(f64_i64, double, i64, 1, 2) PHASES(f32_i32, float, int, 1, 2) PHASES(f32_i64, float, i64, 1, 2)
PHASEK(circ, f64_i32, double, int, 1, 2) PHASEK(circ, f32_i32, float, int, 1, 2)
LOSSY(f64_i32, double, int, 1) LOSSY(f64_i64, double, i64, 1) LOSSY(f32_i32, float, int, 1) LOSSY(f32_i64, float, i64, 1)
LOSSY(f64_i32, double, int, 2) LOSSY(f64_i64, double, i64, 2) LOSSY(f32_i32, float, int, 4) LOSSY(f32_i64, float, i64, 4)
COMBINES(f64, double) COMBINES(f32, float)
TRACKER_INPUT(f64, double) TRACKER_INPUT(f32, float)
TRACKER_ROWS(f64, double) TRACKER_ROWS(f32, float)
TICK
LOGISTIC(f64, double, 0) LOGISTIC(f64, double, 1) LOGISTIC(f64, double, 2) LOGISTIC(f64, double, 3) LOGISTIC(f64, double, 4)
LOGISTIC(f32, float, 0) LOGISTIC(f32, float, 1) LOGISTIC(f32, float, 2) LOGISTIC(f32, float, 3) LOGISTIC(f32, float, 4)
#endif
}
