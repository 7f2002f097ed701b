// The argument layer of rowstoch_fast's pybind11 glue, shared by its two files: bindings.cpp (the module and
// most entry points) and passes.cpp (the lossy and delayed passes, about half of the compiled code, built beside
// it in parallel: setup.py). Every check raises TypeError / ValueError naming the argument, before any pointer
// is taken; messages without iostreams (below). Internal: not installed with the kernels' headers.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rowstoch/compress.hpp"
#include "rowstoch/gt.hpp"
#include "rowstoch/links.hpp"
#include "rowstoch/mix.hpp"
#include "rowstoch/network.hpp"
#include "rowstoch/numpy_random.hpp"
#include "rowstoch/objectives.hpp"
#include "rowstoch/parallel.hpp"
#include "rowstoch/samples.hpp"
#include "rowstoch/simd.hpp"
#include "rowstoch/tracker.hpp"

namespace py = pybind11;
using std::int64_t;


namespace {


// Messages are built without iostreams (STYLE.md, "Errors from C++"): an
// extension that carries its own copy of libstdc++ can share locale facet ids
// with the process's copy, and operator<< then drops numbers or crashes.
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(const char* s) { return s; }
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
std::string piece(T v) { return std::to_string(v); }
template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
std::string piece(T v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));
    return buf;
}

template <class... Args>
std::string cat(const Args&... args) {
    std::string s;
    (s += ... += piece(args));
    return s;
}

inline std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// dtypes are compared by equivalence (kind, size, native byte order), never by
// identity: an unpickled array carries an equal but distinct dtype object.
inline bool native_order(const py::dtype& t) {
    const std::uint16_t one = 1;
    const bool little = *reinterpret_cast<const unsigned char*>(&one) == 1;
    const char b = t.byteorder();
    return b == '=' || b == '|' || b == (little ? '<' : '>');
}
template <class T>
bool has_type(const py::array& a) {
    const py::dtype t = a.dtype(), want = py::dtype::of<T>();
    return t.kind() == want.kind() && t.itemsize() == want.itemsize() && native_order(t);
}
inline bool same_type(const py::array& a, const py::array& b) {
    const py::dtype s = a.dtype(), t = b.dtype();
    return s.kind() == t.kind() && s.itemsize() == t.itemsize() && native_order(s) && native_order(t);
}
inline bool is_f64(const py::array& a) { return has_type<double>(a); }
inline bool is_f32(const py::array& a) { return has_type<float>(a); }
inline bool is_i64(const py::array& a) { return has_type<int64_t>(a); }
inline bool is_i32(const py::array& a) { return has_type<std::int32_t>(a); }

inline bool c_contiguous(const py::array& a) {
    return (a.flags() & py::array::c_style) == py::array::c_style;
}

inline void check_ndim(const py::array& a, const char* name, py::ssize_t ndim) {
    if (a.ndim() != ndim)
        throw py::value_error(cat(name, " must be ", ndim, "-D, got ", a.ndim(), "-D"));
}

// C order and aligned to its item size (the kernels load whole elements).
inline void check_contiguous(const py::array& a, const char* name) {
    if (!c_contiguous(a))
        throw py::value_error(cat(name, " must be C-contiguous (use np.ascontiguousarray)"));
    if (reinterpret_cast<std::uintptr_t>(a.data()) % static_cast<std::uintptr_t>(a.itemsize()) != 0)
        throw py::value_error(cat(name, " is not aligned to its ", a.itemsize(),
                                  "-byte items (use np.require(", name, ", requirements='CA'))"));
}

inline void check_writeable(const py::array& a, const char* name) {
    if (!a.writeable()) throw py::value_error(cat(name, " must be writeable"));
}

inline void check_same_dtype(const py::array& a, const char* name, const py::array& ref,
                      const char* ref_name) {
    if (!same_type(a, ref))
        throw py::type_error(cat(name, " has dtype ", dtype_name(a), " but ", ref_name,
                                 " has dtype ", dtype_name(ref),
                                 "; mixed precision and non-native byte order are not supported"));
}

inline std::string shape_text(const py::ssize_t* shape, py::ssize_t ndim) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < ndim; ++i) s += cat(shape[i], ",");
    return s + ")";
}

inline void check_shape(const py::array& a, const char* name, std::initializer_list<int64_t> shape) {
    bool ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
    py::ssize_t k = 0;
    for (int64_t s : shape) {
        if (!ok) break;
        ok = a.shape(k++) == s;
    }
    if (!ok) {
        std::vector<py::ssize_t> want(shape.begin(), shape.end());
        throw py::value_error(cat(name, " must have shape ", shape_text(want.data(), want.size()), ", got ",
                                  shape_text(a.shape(), a.ndim())));
    }
}

// Byte ranges of two arrays overlap (in-place use would corrupt the result).
inline bool overlaps(const py::array& a, const py::array& b) {
    auto lo_a = reinterpret_cast<std::uintptr_t>(a.data());
    auto lo_b = reinterpret_cast<std::uintptr_t>(b.data());
    auto hi_a = lo_a + static_cast<std::uintptr_t>(a.nbytes());
    auto hi_b = lo_b + static_cast<std::uintptr_t>(b.nbytes());
    return a.nbytes() > 0 && b.nbytes() > 0 && lo_a < hi_b && lo_b < hi_a;
}

inline void check_no_overlap(const py::array& out, const char* out_name, const py::array& in,
                      const char* in_name) {
    if (overlaps(out, in))
        throw py::value_error(
            cat(out_name, " shares memory with ", in_name, "; pass a separate output array"));
}

// Every array a kernel writes must share no byte with any other array of the
// call (written or read): the kernels read their inputs while writing, and
// declare their pointers __restrict.
using Named = std::pair<const py::array*, const char*>;
inline void check_apart(std::initializer_list<Named> outputs, std::initializer_list<Named> inputs,
                 const std::vector<Named>& more_inputs = {}) {
    for (auto o = outputs.begin(); o != outputs.end(); ++o) {
        for (auto p = o + 1; p != outputs.end(); ++p) check_no_overlap(*o->first, o->second, *p->first, p->second);
        for (const auto& [in, name] : inputs) check_no_overlap(*o->first, o->second, *in, name);
        for (const auto& [in, name] : more_inputs) check_no_overlap(*o->first, o->second, *in, name);
    }
}

// An output that may be exactly an input (the same buffer: an element-wise kernel in place, documented) but share
// no other byte with it (a shifted view of it would be read after it was written).
inline void check_same_or_apart(const py::array& out, const char* out_name, const py::array& in, const char* in_name) {
    if (out.data() == in.data() && out.nbytes() == in.nbytes()) return;
    if (overlaps(out, in))
        throw py::value_error(cat(out_name, " partly overlaps ", in_name, " (it may be ", in_name,
                                  " itself, or share no memory with it); pass a separate output array"));
}

// The product of counts, or ValueError naming `what` when it overflows int64
// (the kernels index and count with int64).
inline int64_t checked_product(std::initializer_list<int64_t> factors, const char* what) {
    int64_t p = 1;
    for (int64_t f : factors)
        if (__builtin_mul_overflow(p, f, &p))
            throw py::value_error(cat(what, " is too large: the work count overflows 64-bit integers"));
    return p;
}

// ---------------------------------------------------------------- the shared argument layer
// Every entry point reads its optional arrays, its outputs, its tuple items and its allocations through these,
// so a 0-d array, a list given as an output, a non-integer item or an absurd size is one clear error naming the
// argument, never IndexError, pybind11's "Unable to cast" or std::vector's length_error.

// An optional array argument (anything NumPy converts; None handled by the caller), `ndim`-D, `hint` saying what
// it holds ("one flag per node"): its shape is read only after this.
inline py::array array_arg(const py::object& obj, const char* name, py::ssize_t ndim, const char* hint) {
    py::array arr = py::array::ensure(obj);
    if (!arr)
        throw py::type_error(cat(name, " must be a NumPy array (", hint, "), got ",
                                 py::str(py::type::of(obj).attr("__name__")).cast<std::string>()));
    if (arr.ndim() != ndim)
        throw py::value_error(cat(name, " must be ", ndim, "-D (", hint, "), got ", arr.ndim(), "-D"));
    return arr;
}

// An array the kernel writes, given by the caller: a NumPy array itself (a list would be converted to a
// temporary that nobody sees).
inline py::array output_arg(const py::object& obj, const char* name) {
    if (!py::isinstance<py::array>(obj)) throw py::type_error(cat(name, " must be a numpy.ndarray or None"));
    return obj.cast<py::array>();
}

inline std::string type_name(const py::handle& h) { return py::str(py::type::of(h).attr("__name__")).cast<std::string>(); }

// Item k of a tuple argument as an integer (int or NumPy integer: anything with __index__, not bool or float).
inline int64_t int_item(const py::sequence& seq, py::ssize_t k, const char* name, const char* what) {
    py::object v = seq[k];
    if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
        throw py::type_error(cat(name, "[", k, "] (", what, ") must be an integer, got ", type_name(v), " ",
                                 std::string(py::repr(v))));
    py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
    if (!i) throw py::error_already_set();
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow != 0)
        throw py::value_error(cat(name, "[", k, "] (", what, ") = ", std::string(py::repr(i)),
                                  " does not fit a 64-bit integer"));
    return static_cast<int64_t>(x);
}

// Item k of a tuple argument as a flag: True / False (Python's or NumPy's), or the integers 0 and 1.
inline bool bool_item(const py::sequence& seq, py::ssize_t k, const char* name, const char* what) {
    py::object v = seq[k];
    if (PyBool_Check(v.ptr()) || py::isinstance(v, py::module_::import("numpy").attr("bool_")))
        return v.cast<bool>();
    if (PyIndex_Check(v.ptr()) && !PyFloat_Check(v.ptr())) {
        const int64_t i = int_item(seq, k, name, what);
        if (i == 0 || i == 1) return i == 1;
    }
    throw py::type_error(cat(name, "[", k, "] (", what, ") must be True or False, got ", type_name(v), " ",
                             std::string(py::repr(v))));
}

// Bytes this process may still allocate (rowstoch_fast._checks.available_memory: ROWSTOCH_MEMORY_LIMIT, else the
// smallest of MemAvailable, the cgroup's free quota and what RLIMIT_AS leaves), or None where unknown (also the
// extension alone, without its package). A Python int: a limit of 1e30 says "no limit" (an int64 would not hold it).
// A bad ROWSTOCH_MEMORY_LIMIT is its UsageError.
inline py::object available_memory() {
    try {
        return py::module_::import("rowstoch_fast._checks").attr("available_memory")();
    } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_ImportError)) throw;
        return py::none();
    }
}

// A new array of `shape` for `what`: ValueError naming it when its size overflows, MemoryError naming it when it
// cannot be allocated (numpy's messages name neither the argument nor the entry point). A block over 64 MiB is
// first held against the memory available: where the kernel overcommits (vm.overcommit_memory = 1, as on the lent
// GPU machine) a 256 TiB request succeeds, and writing it got the process killed by the OOM killer (and, while it
// filled the machine, every other process's allocations refused).
inline py::array new_array(const py::dtype& dtype, std::vector<py::ssize_t> shape, const std::string& what) {
    int64_t bytes = dtype.itemsize();
    for (py::ssize_t s : shape)
        if (__builtin_mul_overflow(bytes, static_cast<int64_t>(s), &bytes))
            throw py::value_error(cat(what, " ", shape_text(shape.data(), static_cast<py::ssize_t>(shape.size())),
                                      " is too large: its size overflows 64-bit integers"));
    std::string why;
    const py::object avail = bytes > (int64_t(1) << 26) ? available_memory() : py::none();
    const int over = avail.is_none() ? 0 : PyObject_RichCompareBool(py::int_(bytes).ptr(), avail.ptr(), Py_GT);
    if (over < 0) throw py::error_already_set();
    if (over) {
        why = cat(": about ", std::string(py::str(avail)), " bytes are available");
    } else {
        try {
            return py::array(dtype, shape);
        } catch (py::error_already_set& e) {
            if (!e.matches(PyExc_MemoryError)) throw;
        }
    }
    const std::string message = cat(what, " ", shape_text(shape.data(), static_cast<py::ssize_t>(shape.size())), " (",
                                    bytes, " bytes) cannot be allocated", why);
    PyErr_SetString(PyExc_MemoryError, message.c_str());
    throw py::error_already_set();
}

// Ctrl-C for a long loop run without the GIL (a power A^R, the tracker's diagonals): poll(), asked once per
// step, re-takes the GIL about every 2e7 multiply-adds (~10 ms of work) to run Python's signal handlers, and
// says stop once one raised (KeyboardInterrupt); the caller then throws it with rethrow_if_raised(), the GIL
// held again.
class Interrupt {
  public:
    explicit Interrupt(int64_t work_per_step)
        : every_(std::max<int64_t>(1, 20000000 / std::max<int64_t>(work_per_step, 1))) {}
    bool poll() {
        if (++count_ % every_ != 0) return false;
        py::gil_scoped_acquire gil;
        raised_ = PyErr_CheckSignals() != 0;
        return raised_;
    }
    void rethrow_if_raised() const {
        if (raised_) throw py::error_already_set();
    }

  private:
    int64_t every_, count_ = 0;
    bool raised_ = false;
};

// A checked CSR matrix: n x n, int32/int64 indices, float32/float64 values.
struct Csr {
    py::array indptr, indices, data;
    int64_t n = 0, nnz = 0;  // n rows
    int64_t ncols = 0;       // n for a mixing matrix; more for a rank's local rows with halo columns
};

template <class I>
void check_csr_structure(const Csr& A, bool check_indices) {
    const I* Ap = static_cast<const I*>(A.indptr.data());
    if (Ap[0] != 0) throw py::value_error(cat("indptr[0] must be 0, got ", Ap[0]));
    if (static_cast<int64_t>(Ap[A.n]) != A.nnz)
        throw py::value_error(cat("indptr[-1] must equal indices.size (", A.nnz, "), got ",
                                  static_cast<int64_t>(Ap[A.n])));
    if (!check_indices) return;  // the caller validated this CSR once (MixingMatrix does)
    for (int64_t i = 0; i < A.n; ++i)
        if (Ap[i + 1] < Ap[i])
            throw py::value_error(cat("indptr must be non-decreasing; it falls at row ", i));
    const I* Aj = static_cast<const I*>(A.indices.data());
    for (int64_t p = 0; p < A.nnz; ++p) {
        const int64_t j = static_cast<int64_t>(Aj[p]);
        if (j < 0 || j >= A.ncols)
            throw py::value_error(cat("indices[", p, "] = ", j, " is out of range for ", A.ncols, " columns"));
    }
}

inline Csr check_csr(py::array indptr, py::array indices, py::array data, bool check_indices,
              int64_t ncols = -1) {
    Csr A{indptr, indices, data};
    check_ndim(indptr, "indptr", 1);
    check_ndim(indices, "indices", 1);
    check_ndim(data, "data", 1);
    check_contiguous(indptr, "indptr");
    check_contiguous(indices, "indices");
    check_contiguous(data, "data");
    if (!(is_i32(indptr) || is_i64(indptr)))
        throw py::type_error(cat("indptr must be int32 or int64, got ", dtype_name(indptr)));
    check_same_dtype(indices, "indices", indptr, "indptr");
    if (!(is_f32(data) || is_f64(data)))
        throw py::type_error(cat("data must be float32 or float64, got ", dtype_name(data)));
    if (indptr.size() < 1) throw py::value_error("indptr must have at least one entry");
    A.n = indptr.size() - 1;
    A.ncols = ncols < 0 ? A.n : ncols;
    A.nnz = indices.size();
    if (data.size() != A.nnz)
        throw py::value_error(cat("data.size (", data.size(), ") must equal indices.size (",
                                  A.nnz, ")"));
    if (is_i32(indptr)) check_csr_structure<std::int32_t>(A, check_indices);
    else check_csr_structure<int64_t>(A, check_indices);
    return A;
}

// Call f(I{}, T{}) with the CSR's index and value types.
template <class F>
void dispatch(const Csr& A, F&& f) {
    const bool i32 = is_i32(A.indptr), f32 = is_f32(A.data);
    if (i32 && f32) f(std::int32_t{}, float{});
    else if (i32) f(std::int32_t{}, double{});
    else if (f32) f(int64_t{}, float{});
    else f(int64_t{}, double{});
}

template <class T>
T* ptr(py::array& a) { return static_cast<T*>(a.mutable_data()); }
template <class T>
const T* cptr(const py::array& a) { return static_cast<const T*>(a.data()); }

// The dense block X (n x w) of a mixing call, and its output (apart from X, the CSR and the call's other arrays
// `others`: node ids, flags).
inline py::array check_block_io(const Csr& A, const py::array& X, py::object out_obj, const std::vector<Named>& others = {}) {
    if (X.ndim() != 2) throw py::value_error(cat("X must be 2-D (n, d), got ", X.ndim(), "-D"));
    check_contiguous(X, "X");
    check_same_dtype(X, "X", A.data, "A.data");
    if (X.shape(0) != A.ncols)
        throw py::value_error(cat("X has ", X.shape(0), " rows but A is ", A.n, " x ", A.ncols));
    if (out_obj.is_none()) return py::array(X.dtype(), {A.n, X.shape(1)});
    if (!py::isinstance<py::array>(out_obj))
        throw py::type_error("out must be a numpy.ndarray or None");
    py::array out = out_obj.cast<py::array>();
    check_same_dtype(out, "out", X, "X");
    check_shape(out, "out", {A.n, X.shape(1)});
    check_contiguous(out, "out");
    check_writeable(out, "out");
    check_apart({{&out, "out"}}, {{&X, "X"}, {&A.indptr, "indptr"}, {&A.indices, "indices"}, {&A.data, "data"}},
                others);
    return out;
}

// Y = f(A, X) for a one-pass kernel f(Ap, Aj, Ax, n, X, w, Y) over a checked CSR A and block X (out: Y).
template <class F>
py::array one_pass(py::array indptr, py::array indices, py::array data, py::array X, py::object out,
                   bool check_indices, int64_t ncols, F&& kernel, const std::vector<Named>& others = {},
                   int64_t x_rows = -1) {
    Csr A = check_csr(indptr, indices, data, check_indices, ncols);
    Csr B = A;  // (x_rows >= 0: X has x_rows rows, not one per column of A: a stacked block)
    if (x_rows >= 0) B.ncols = x_rows;
    py::array Y = check_block_io(B, X, out, others);
    const int64_t w = X.shape(1);
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T *Ax = cptr<T>(A.data), *Xp = cptr<T>(X);
        T* Yp = ptr<T>(Y);
        py::gil_scoped_release nogil;
        kernel(Ap, Aj, Ax, A.n, Xp, w, Yp);
    });
    return Y;
}


// An optional 1-D int64 array of global node ids (n_expected of them), each in 0..n_global-1; null if None.
inline const std::int64_t* node_ids(const py::object& obj, const char* name, int64_t n_expected, int64_t n_global,
                             py::array& keep) {
    if (obj.is_none()) return nullptr;
    keep = array_arg(obj, name, 1, "global node ids");
    check_contiguous(keep, name);
    if (!is_i64(keep)) throw py::type_error(cat(name, " must be int64, got ", dtype_name(keep)));
    if (keep.shape(0) != n_expected) throw py::value_error(cat(name, " has ", keep.shape(0), " ids, expected ", n_expected));
    const std::int64_t* ids = cptr<std::int64_t>(keep);
    for (int64_t k = 0; k < n_expected; ++k)
        if (ids[k] < 0 || ids[k] >= n_global)
            throw py::value_error(cat(name, "[", k, "] = ", ids[k], " is not a node of 0..", n_global - 1));
    return ids;
}

// An optional 1-D uint8/bool array of `size` flags, writeable if asked; null if None.
inline std::uint8_t* flags(const py::object& obj, const char* name, int64_t size, bool writeable, py::array& keep,
                    const char* hint = "one flag per stored entry") {
    if (obj.is_none()) return nullptr;
    keep = writeable ? output_arg(obj, name) : array_arg(obj, name, 1, hint);
    if (keep.ndim() != 1) throw py::value_error(cat(name, " must be 1-D (", hint, "), got ", keep.ndim(), "-D"));
    check_contiguous(keep, name);
    if (keep.dtype().kind() != 'b' && !(keep.dtype().kind() == 'u' && keep.itemsize() == 1))
        throw py::type_error(cat(name, " must be a bool (or uint8) array, got ", dtype_name(keep)));
    if (keep.shape(0) != size) throw py::value_error(cat(name, " has ", keep.shape(0), " entries, expected ", size));
    if (!writeable) return const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(keep.data()));  // read only
    check_writeable(keep, name);
    return static_cast<std::uint8_t*>(keep.mutable_data());
}

// The LossRule of renormalise / symmetric (the undirected rule's Gilbert-Elliott gates: bit 1 of bad, the state of
// each entry's other message).
inline int loss_rule(bool renormalise, bool symmetric) {
    return symmetric ? rowstoch::kSymmetricRule : renormalise ? rowstoch::kRowRule : rowstoch::kColumnRule;
}

// A lossy pass's p: one loss probability in [0, 1] for every message, or one per node (1-D, the sender's: network.Lossy
// with a p per node), checked, as the pass's threshold and (per node) the thresholds by global node id.
struct LossProbability {
    double one = 0.0;
    std::vector<std::uint64_t> per_node;
    const std::uint64_t* thresholds() const { return per_node.empty() ? nullptr : per_node.data(); }
};

inline LossProbability loss_probability(const py::object& p_obj) {
    LossProbability out;
    const bool listed = (py::isinstance<py::list>(p_obj) || py::isinstance<py::tuple>(p_obj));
    if ((py::isinstance<py::array>(p_obj) && p_obj.cast<py::array>().ndim() >= 1) || listed) {
        py::array raw = listed ? py::array(py::module_::import("numpy").attr("asarray")(p_obj)) : p_obj.cast<py::array>();
        if (raw.ndim() != 1) throw py::value_error(cat("p must be one number or 1-D (one per node), got ", raw.ndim(), "-D"));
        if (raw.dtype().kind() != 'f' && raw.dtype().kind() != 'i' && raw.dtype().kind() != 'u')
            throw py::type_error(cat("p must be real numbers, got ", dtype_name(raw)));
        if (raw.shape(0) < 1) throw py::value_error("p must have one value per node, got none");
        auto values = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(raw);
        const double* v = values.data();
        out.per_node.resize(static_cast<std::size_t>(values.shape(0)));
        for (py::ssize_t k = 0; k < values.shape(0); ++k) {
            if (!(v[k] >= 0.0 && v[k] <= 1.0)) throw py::value_error(cat("p[", k, "] must be in [0, 1], got ", v[k]));
            out.per_node[static_cast<std::size_t>(k)] = rowstoch::loss_threshold(v[k]);
        }
        return out;
    }
    try {
        out.one = p_obj.cast<double>();
    } catch (const py::cast_error&) {
        throw py::type_error(cat("p must be a number in [0, 1] or one per node, got ", type_name(p_obj)));
    }
    if (!(out.one >= 0.0 && out.one <= 1.0)) throw py::value_error(cat("p must be in [0, 1], got ", out.one));
    return out;
}

// Per-node p names every node whose messages the pass draws: each global id of the rows and columns (or 0..rows-1
// and 0..cols-1 without ids) below its length.
inline void check_loss_nodes(const LossProbability& p, const rowstoch::NodeIds& ids, int64_t rows, int64_t cols) {
    if (p.per_node.empty()) return;
    const int64_t size = static_cast<int64_t>(p.per_node.size());
    auto need = [size](int64_t g) {
        if (g >= size)
            throw py::value_error(cat("p has ", size, " values (one per node), but node ", g, " is in this pass"));
    };
    if (ids.rows) for (int64_t k = 0; k < rows; ++k) need(ids.rows[k]);
    else need(rows - 1);
    if (ids.cols) for (int64_t k = 0; k < cols; ++k) need(ids.cols[k]);
    else need(cols - 1);
}

// The global ids of a per-link pass's rows and (optionally) of the columns its indices index; `ncols` is set to
// how many columns those are (the rows' count without col_ids).
inline rowstoch::NodeIds link_ids(const py::object& row_ids_obj, const py::object& col_ids_obj, int64_t rows,
                           py::array& row_keep, py::array& col_keep, int64_t& ncols) {
    const int64_t big = std::numeric_limits<int64_t>::max();
    rowstoch::NodeIds ids{node_ids(row_ids_obj, "row_ids", rows, big, row_keep), nullptr, nullptr};
    ncols = rows;
    if (!col_ids_obj.is_none()) {
        const int64_t given = array_arg(col_ids_obj, "col_ids", 1, "global node ids").shape(0);
        ids.cols = node_ids(col_ids_obj, "col_ids", given, big, col_keep);
        ncols = given;
    }
    return ids;
}

// The first k in [0, count) where bad(k), or -1: chunks reduced without a branch (the compiler's vector lanes; a
// per-link pass checked its 5.2 million links one by one, an early exit each, in 12% of a delayed round's time
// at n = 2^18), then the chunk that holds one scanned for it.
template <class Bad>
int64_t first_where(int64_t count, Bad bad) {
    constexpr int64_t kChunk = 4096;
    for (int64_t lo = 0; lo < count; lo += kChunk) {
        const int64_t hi = std::min(count, lo + kChunk);
        unsigned any = 0;  // (an integer: a bool's |= kept GCC from the vector lanes)
        for (int64_t k = lo; k < hi; ++k) any |= static_cast<unsigned>(bad(k));
        if (any)
            for (int64_t k = lo; k < hi; ++k)
                if (bad(k)) return k;
    }
    return -1;
}

// The CSR structure a per-link pass walks, checked entry by entry (both index arrays of type I, contiguous, a
// monotone indptr from 0 to len(indices), each column index below ncols: of col_ids where `with_cols`, where it
// is read), as pointers.
template <class I>
std::pair<const I*, const I*> checked_links(const py::array& indptr, const py::array& indices, int64_t rows,
                                            int64_t ncols, bool with_cols) {
    if (!(py::isinstance<py::array_t<I>>(indptr) && py::isinstance<py::array_t<I>>(indices)))
        throw py::type_error("indptr and indices must both be int32 or both int64");
    check_contiguous(indptr, "indptr");
    check_contiguous(indices, "indices");
    const I *Ap = cptr<I>(indptr), *Aj = cptr<I>(indices);
    if (Ap[0] != 0) throw py::value_error(cat("indptr[0] must be 0, got ", static_cast<int64_t>(Ap[0])));
    const int64_t falls = first_where(rows, [Ap](int64_t k) { return Ap[k + 1] < Ap[k]; });
    if (falls >= 0) throw py::value_error(cat("indptr must be non-decreasing; it falls at row ", falls));
    if (static_cast<int64_t>(Ap[rows]) != indices.shape(0))
        throw py::value_error(cat("indptr[-1] must equal len(indices) (", indices.shape(0), "), got ",
                                  static_cast<int64_t>(Ap[rows])));
    using U = std::make_unsigned_t<I>;  // (a negative index, as U, is at least 2^(bits - 1): past every valid one)
    const U bound = ncols > static_cast<int64_t>(std::numeric_limits<I>::max())
                        ? static_cast<U>(std::numeric_limits<I>::max()) + 1 : static_cast<U>(ncols);
    const int64_t q = first_where(indices.shape(0), [Aj, bound](int64_t k) { return static_cast<U>(Aj[k]) >= bound; });
    if (q >= 0)
        throw py::value_error(cat("indices[", q, "] = ", static_cast<int64_t>(Aj[q]), " is out of range for ", ncols,
                                  with_cols ? " col_ids" : " columns"));
    return {Ap, Aj};
}

// The rows of a per-link pass's CSR share (indptr and indices 1-D, at least one row pointer), its node ids given
// together or not at all.
inline int64_t link_rows(const py::array& indptr, const py::array& indices, const py::object& row_ids_obj,
                  const py::object& col_ids_obj) {
    check_ndim(indptr, "indptr", 1);
    check_ndim(indices, "indices", 1);
    if (indptr.shape(0) < 1) throw py::value_error("indptr must have at least one entry (n + 1 for n rows)");
    if (row_ids_obj.is_none() != col_ids_obj.is_none())
        throw py::value_error("row_ids and col_ids go together (the global ids of the rows and of the columns)");
    return indptr.shape(0) - 1;
}

// The layout (n_own, n_block, rounds[, node_major]) of a delayed round's stacked block (network.hpp's
// DelayLayout), checked: it holds `rows` own rows, `ncols` nodes' messages and round r.
inline rowstoch::DelayLayout delay_layout(const py::object& layout_obj, int64_t rows, int64_t ncols,
                                          std::uint64_t r) {
    if (!(py::isinstance<py::tuple>(layout_obj) || py::isinstance<py::list>(layout_obj)))
        throw py::type_error(cat("layout must be a tuple (n_own, n_block, rounds[, node_major]), got ",
                                 type_name(layout_obj)));
    const py::sequence l = layout_obj.cast<py::sequence>();
    if (l.size() != 3 && l.size() != 4)
        throw py::value_error(cat("layout must be (n_own, n_block, rounds[, node_major]), got ", l.size(), " values"));
    const rowstoch::DelayLayout layout{int_item(l, 0, "layout", "n_own"), int_item(l, 1, "layout", "n_block"),
                                       int_item(l, 2, "layout", "rounds"),
                                       l.size() == 4 ? bool_item(l, 3, "layout", "node_major") : true};
    if (layout.n_own < rows || layout.n_block < ncols || layout.rounds < 1 ||
        r >= static_cast<std::uint64_t>(layout.rounds))
        throw py::value_error(cat("layout (n_own, n_block, rounds) = (", layout.n_own, ", ", layout.n_block, ", ",
                                  layout.rounds, ") does not hold ", rows, " rows, ", ncols, " columns and round ", r));
    return layout;
}

// The rows of a delayed round's stacked block, n_own + (max_delay + 1) rounds n_block: ValueError naming the layout
// where that overflows int64 (every row index the kernels compute is below it, so none overflows, and an index
// narrowed to int32 where it fits is never truncated).
inline int64_t stacked_rows(const rowstoch::DelayLayout& layout, int64_t max_delay) {
    int64_t slots = 0, stacked = 0;
    if (__builtin_mul_overflow(max_delay + 1, layout.rounds, &slots) ||
        __builtin_mul_overflow(slots, layout.n_block, &slots) || __builtin_add_overflow(layout.n_own, slots, &stacked))
        throw py::value_error(cat("layout (n_own, n_block, rounds) = (", layout.n_own, ", ", layout.n_block, ", ",
                                  layout.rounds, ") with max_delay = ", max_delay, ": the stacked block's rows, n_own + "
                                  "(max_delay + 1) rounds n_block, overflow 64-bit integers"));
    return stacked;
}

// A delayed round's max_delay and iteration t (the ages and the window's slots are counted in int64: a t of 2^63 or
// more made the window's last age negative, and the pass read before its tables).
inline void check_max_delay(int64_t max_delay, std::uint64_t t) {
    if (max_delay < 0 || max_delay > (int64_t(1) << 30))
        throw py::value_error(cat("max_delay must be in 0..2^30, got ", max_delay));
    if (t > static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max()))
        throw py::value_error(cat("t must be below 2^63 (an iteration), got ", t));
}

}  // namespace

// The entry points of passes.cpp, which bindings.cpp's PYBIND11_MODULE adds to the module in their place.
void bind_mix_lossy(py::module_& m);
void bind_mix_delayed(py::module_& m);
void bind_running_sums(py::module_& m);
