// The pybind11 module of rowstoch_fast (its argument layer in glue.hpp, the lossy and delayed passes in passes.cpp,
// compiled beside this file): every entry point follows
//   accept arrays -> check ndim/shape/dtype/contiguity/indices -> take raw
//   pointers -> release the GIL in an inner scope -> run the kernel.
// Bad input raises TypeError/ValueError naming the argument; nothing past the
// checks can throw, so no C++ exception ever crosses an OpenMP region (a long
// loop's Ctrl-C is raised after the kernel returns, see Interrupt).
#include "glue.hpp"

#ifndef ROWSTOCH_BUILD_FLAGS
#define ROWSTOCH_BUILD_FLAGS ""
#endif

namespace {

py::array mix(py::array indptr, py::array indices, py::array data, py::array X,
              py::object out, bool check_indices, int64_t ncols) {
    if (ncols < -1) throw py::value_error(cat("ncols must be >= 0 (or -1 for square), got ", ncols));
    return one_pass(indptr, indices, data, X, out, check_indices, ncols,
                    [](auto Ap, auto Aj, auto Ax, int64_t n, auto Xp, int64_t w, auto Yp) {
                        rowstoch::csr_mix(Ap, Aj, Ax, n, Xp, w, Yp);
                    });
}


void ge_advance(py::array indptr, py::array indices, py::array bad, std::uint64_t seed, int64_t from, int64_t to,
                double p_bad, double p_recover, bool init, py::object row_ids_obj, py::object col_ids_obj) {
    if (!(p_bad > 0.0 && p_bad <= 1.0 && p_recover > 0.0 && p_recover <= 1.0))
        throw py::value_error(cat("p_bad and p_recover must be in (0, 1], got ", p_bad, " and ", p_recover));
    if (from < 0 || to < from - 1) throw py::value_error(cat("need 0 <= from <= to + 1, got ", from, " and ", to));
    check_ndim(indptr, "indptr", 1);
    check_ndim(indices, "indices", 1);
    if (indptr.shape(0) < 1) throw py::value_error("indptr must have at least one entry (n + 1 for n rows)");
    const int64_t rows = indptr.shape(0) - 1;
    py::array bad_keep, row_keep, col_keep;
    std::uint8_t* state = flags(bad, "bad", indices.shape(0), true, bad_keep);
    int64_t ncols;
    const rowstoch::NodeIds ids = link_ids(row_ids_obj, col_ids_obj, rows, row_keep, col_keep, ncols);
    check_apart({{&bad_keep, "bad"}},
                {{&indptr, "indptr"}, {&indices, "indices"}, {&row_keep, "row_ids"}, {&col_keep, "col_ids"}});
    Interrupt interrupt(20000000);  // polled between chunks of ~2e7 chain steps
    auto run = [&](auto i) {
        using I = decltype(i);
        // every entry the kernel dereferences, checked
        const auto links = checked_links<I>(indptr, indices, rows, ncols, !col_ids_obj.is_none());
        const I *Ap = links.first, *Aj = links.second;
        {
            py::gil_scoped_release nogil;
            rowstoch::ge_advance(Ap, Aj, rows, ids, state, seed, from, to, p_bad, p_recover, init,
                                 [&] { return interrupt.poll(); });
        }
        interrupt.rethrow_if_raised();
    };
    if (is_i64(indptr)) run(int64_t{});
    else run(int32_t{});
}


py::array lost_links(py::array indptr, py::array indices, std::uint64_t seed, std::uint64_t t, std::uint64_t r,
                     py::object p_obj, py::object row_ids_obj, py::object col_ids_obj, py::object bad_obj) {
    const LossProbability loss = loss_probability(p_obj);
    const double p = loss.one;
    const int64_t rows = link_rows(indptr, indices, row_ids_obj, col_ids_obj);
    py::array row_keep, col_keep, bad_keep;
    int64_t ncols;
    rowstoch::NodeIds ids = link_ids(row_ids_obj, col_ids_obj, rows, row_keep, col_keep, ncols);
    ids.thresholds = loss.thresholds();
    check_loss_nodes(loss, ids, rows, ncols);
    const std::uint8_t* bad = flags(bad_obj, "bad", indices.shape(0), false, bad_keep);
    py::array_t<std::uint8_t> out(indices.shape(0));
    auto run = [&](auto i) {
        using I = decltype(i);
        const auto links = checked_links<I>(indptr, indices, rows, ncols, !col_ids_obj.is_none());
        const I *Ap = links.first, *Aj = links.second;
        std::uint8_t* lost = out.mutable_data();
        py::gil_scoped_release nogil;
        rowstoch::lost_links(Ap, Aj, rows, ids, seed, t, r, p, bad, lost);
    };
    if (is_i64(indptr)) run(int64_t{});
    else run(int32_t{});
    return out;
}

// compress's param or sigma: one value for every node, or one per global node id (1-D, the sender's:
// network.Compressed's bits or k, network.Noisy's sigma, per node), each checked by `valid` (`what` says it in words).
template <class V>
struct PerNodeValue {
    V one{};
    std::vector<V> per_node;
    const V* values() const { return per_node.empty() ? nullptr : per_node.data(); }
};

template <class V, class Valid>
PerNodeValue<V> per_node_value(const py::object& obj, const char* name, Valid valid, const char* what) {
    PerNodeValue<V> out;
    const bool listed = py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj);
    if ((py::isinstance<py::array>(obj) && obj.cast<py::array>().ndim() >= 1) || listed) {
        py::array raw = listed ? py::array(py::module_::import("numpy").attr("asarray")(obj)) : obj.cast<py::array>();
        if (raw.ndim() != 1)
            throw py::value_error(cat(name, " must be one number or 1-D (one per node), got ", raw.ndim(), "-D"));
        const char kind = raw.dtype().kind();
        if (kind != 'i' && kind != 'u' && (kind != 'f' || std::is_integral<V>::value))
            throw py::type_error(cat(name, " must be ", std::is_integral<V>::value ? "integers" : "real numbers",
                                     ", got ", dtype_name(raw)));
        if (raw.shape(0) < 1) throw py::value_error(cat(name, " must have one value per node, got none"));
        const auto numpy = py::module_::import("numpy");
        if (kind == 'u' && raw.itemsize() == 8 && std::is_integral<V>::value &&
            numpy.attr("any")(raw.attr("__gt__")(std::numeric_limits<V>::max())).template cast<bool>())
            throw py::value_error(cat(name, " has a value past ", std::numeric_limits<V>::max()));
        auto values = py::array_t<V, py::array::c_style | py::array::forcecast>::ensure(raw);
        out.per_node.assign(values.data(), values.data() + values.shape(0));
        for (std::size_t k = 0; k < out.per_node.size(); ++k)
            if (!valid(out.per_node[k]))
                throw py::value_error(cat(name, "[", k, "] must be ", what, ", got ", out.per_node[k]));
        return out;
    }
    try {
        out.one = obj.cast<V>();
    } catch (const py::cast_error&) {
        throw py::type_error(cat(name, " must be a number (", what, ") or one per node, got ", type_name(obj)));
    }
    if (!valid(out.one)) throw py::value_error(cat(name, " must be ", what, ", got ", out.one));
    return out;
}

// out <- the messages of X's rows (compress.hpp): messages of L values, row i being node row_ids[i] (or i); param
// and sigma one value or one per node (the sender's, by global id).
py::array compress(py::array X, py::array out, int method, int64_t L, py::object param_obj, py::object sigma_obj,
                   bool unbiased, std::uint64_t seed, std::uint64_t t, std::uint64_t r, py::object row_ids_obj,
                   py::object own_obj) {
    if (method < rowstoch::kQsgd || method > rowstoch::kNoise)
        throw py::value_error(cat("method must be 0..5 (qsgd, sign, topk, randk, round, noise), got ", method));
    if (X.ndim() != 2) throw py::value_error(cat("X must be 2-D (rows, w), got ", X.ndim(), "-D"));
    if (!(is_f32(X) || is_f64(X))) throw py::type_error(cat("X must be float32 or float64, got ", dtype_name(X)));
    check_contiguous(X, "X");
    check_same_dtype(out, "out", X, "X");
    check_shape(out, "out", {X.shape(0), X.shape(1)});
    check_contiguous(out, "out");
    check_writeable(out, "out");
    const int64_t n = X.shape(0), w = X.shape(1);
    if (L < 1 || (w > 0 && w % L != 0)) throw py::value_error(cat("L must divide the row width ", w, ", got ", L));
    const bool counted = method == rowstoch::kTopk || method == rowstoch::kRandk;
    const bool bits = method == rowstoch::kQsgd || method == rowstoch::kRound;
    const auto param = per_node_value<std::int64_t>(
        param_obj, counted ? "k" : bits ? "bits" : "param",
        [&](std::int64_t v) { return counted ? v >= 1 : bits ? v >= 1 && v <= 32 : true; },
        counted ? ">= 1" : bits ? "in 1..32" : "an integer");
    const auto sigma = per_node_value<double>(
        sigma_obj, "sigma", [](double v) { return v >= 0.0 && std::isfinite(v); }, "finite and >= 0");
    py::array row_keep, own;
    const rowstoch::NodeIds ids{node_ids(row_ids_obj, "row_ids", n, std::numeric_limits<int64_t>::max(), row_keep),
                                nullptr, nullptr};
    for (const auto& [name, size] : {std::pair<const char*, std::size_t>{"k or bits", param.per_node.size()},
                                     std::pair<const char*, std::size_t>{"sigma", sigma.per_node.size()}}) {
        if (size == 0) continue;  // (one value for every node)
        for (int64_t i = 0; i < n; ++i)
            if (ids.row(i) >= static_cast<int64_t>(size))
                throw py::value_error(cat(name, " has ", size, " values (one per node), but node ", ids.row(i),
                                          " is in this pass"));
    }
    check_same_or_apart(out, "out", X, "X");  // (out may be X: each message is read before it is written)
    check_apart({{&out, "out"}}, {{&row_keep, "row_ids"}});
    if (!own_obj.is_none()) {  // X's rows copied here in the same pass
        own = output_arg(own_obj, "own");
        check_same_dtype(own, "own", X, "X");
        check_shape(own, "own", {n, w});
        check_contiguous(own, "own");
        check_writeable(own, "own");
        check_apart({{&own, "own"}}, {{&X, "X"}, {&out, "out"}, {&row_keep, "row_ids"}});
    }
    if (n == 0 || w == 0) return out;  // no message (L is not a size here: nothing is allocated for it)
    auto run = [&](auto zero) {
        using T = decltype(zero);
        const T* Xp = cptr<T>(X);
        T* Yp = static_cast<T*>(out.mutable_data());
        T* Op = own_obj.is_none() ? nullptr : static_cast<T*>(own.mutable_data());
        py::gil_scoped_release nogil;
        rowstoch::compress_rows(Xp, Yp, n, w, L, ids, method, param.one, sigma.one, unbiased, seed, t, r, Op,
                                param.values(), sigma.values());
    };
    if (is_f64(X)) run(0.0);
    else run(0.0f);
    return out;
}


// The age of the newest arrived message of every stored entry (network.hpp's delay_ages).
py::object delay_ages(py::array indptr, py::array indices, std::uint64_t seed, std::uint64_t t, std::uint64_t r,
                      int64_t max_delay, bool fixed, py::object row_ids_obj, py::object col_ids_obj,
                      py::object layout_obj) {
    check_max_delay(max_delay, t);
    const int64_t rows = link_rows(indptr, indices, row_ids_obj, col_ids_obj);
    py::array row_keep, col_keep;
    int64_t ncols;
    const rowstoch::NodeIds ids = link_ids(row_ids_obj, col_ids_obj, rows, row_keep, col_keep, ncols);
    const bool with_index = !layout_obj.is_none();
    const rowstoch::DelayLayout layout = with_index ? delay_layout(layout_obj, rows, ncols, r)
                                                    : rowstoch::DelayLayout{0, 0, 1};
    // the index in the CSR's own integer type where the stacked block's rows fit it (the mix kernels take both
    // index arrays of one type); ages only where asked for
    const int64_t stacked = with_index ? stacked_rows(layout, max_delay) : 0;
    const bool narrow = !is_i64(indptr) && stacked <= std::numeric_limits<int32_t>::max();
    py::array_t<std::int32_t> out(with_index ? 0 : indices.shape(0));
    py::array index = narrow ? py::array(py::array_t<std::int32_t>(with_index ? indices.shape(0) : 0))
                             : py::array(py::array_t<std::int64_t>(with_index ? indices.shape(0) : 0));
    auto run = [&](auto i, auto j) {
        using I = decltype(i);
        using J = decltype(j);
        const auto links = checked_links<I>(indptr, indices, rows, ncols, !col_ids_obj.is_none());
        const I *Ap = links.first, *Aj = links.second;
        std::int32_t* ages = with_index ? nullptr : out.mutable_data();
        J* ix = with_index ? static_cast<J*>(index.mutable_data()) : nullptr;
        py::gil_scoped_release nogil;
        rowstoch::delay_ages(Ap, Aj, rows, ids, seed, t, r, max_delay, fixed, ages, ix, layout);
    };
    if (is_i64(indptr)) run(int64_t{}, int64_t{});
    else if (narrow) run(int32_t{}, int32_t{});
    else run(int32_t{}, int64_t{});
    if (with_index) return index;
    return out;
}


// One standard normal per stored entry and value: the noise on each received copy (compress.hpp's link_noise);
// with sigma (one value, or one per global node id: the sender's), each scaled by it in the dtype; into out (an
// (nnz, w) array of the dtype) where given.
py::array link_noise(py::array indptr, py::array indices, std::uint64_t seed, std::uint64_t t, std::uint64_t r,
                     int64_t w, py::object dtype_obj, py::object ages_obj, py::object row_ids_obj,
                     py::object col_ids_obj, py::object sigma_obj, py::object out_obj) {
    if (w < 0) throw py::value_error(cat("w must be >= 0, got ", w));
    const int64_t rows = link_rows(indptr, indices, row_ids_obj, col_ids_obj);
    py::array row_keep, col_keep, ages_keep;
    int64_t ncols;
    const rowstoch::NodeIds ids = link_ids(row_ids_obj, col_ids_obj, rows, row_keep, col_keep, ncols);
    const std::int32_t* ages = nullptr;
    if (!ages_obj.is_none()) {
        ages_keep = array_arg(ages_obj, "ages", 1, "one age per stored entry");
        check_contiguous(ages_keep, "ages");
        if (!py::isinstance<py::array_t<std::int32_t>>(ages_keep))
            throw py::type_error(cat("ages must be int32, got ", dtype_name(ages_keep)));
        if (ages_keep.shape(0) != indices.shape(0))
            throw py::value_error(cat("ages has ", ages_keep.shape(0), " entries, expected ", indices.shape(0)));
        ages = cptr<std::int32_t>(ages_keep);
        for (int64_t q = 0; q < indices.shape(0); ++q)
            if (ages[q] < 0 || static_cast<std::uint64_t>(ages[q]) > t)
                throw py::value_error(cat("ages[", q, "] = ", ages[q], " is not in 0..t = ", t));
    }
    py::dtype dtype;
    try {
        dtype = py::dtype::from_args(dtype_obj);
    } catch (py::error_already_set&) {
        dtype = py::dtype("V1");  // (not a dtype at all: refused below, naming the argument)
    }
    if (!(dtype.equal(py::dtype::of<double>()) || dtype.equal(py::dtype::of<float>())))
        throw py::type_error(cat("dtype must be float32 or float64, got ", std::string(py::repr(dtype_obj))));
    PerNodeValue<double> sigma;
    if (!sigma_obj.is_none()) {
        sigma = per_node_value<double>(
            sigma_obj, "sigma", [](double v) { return v >= 0.0 && std::isfinite(v); }, "finite and >= 0");
        const int64_t size = static_cast<int64_t>(sigma.per_node.size());
        auto need = [size](int64_t g) {
            if (size > 0 && g >= size)
                throw py::value_error(cat("sigma has ", size, " values (one per node), but node ", g,
                                          " sends in this pass"));
        };
        if (ids.cols) for (int64_t k = 0; k < ncols; ++k) need(ids.cols[k]);
        else if (ncols > 0) need(ncols - 1);
    }
    py::array out;
    if (out_obj.is_none()) {
        out = new_array(dtype, {indices.shape(0), w}, "link_noise: the noise (nnz, w) =");
    } else {
        out = output_arg(out_obj, "out");
        if (!out.dtype().equal(dtype))
            throw py::type_error(cat("out must be ", std::string(py::str(dtype)), ", got ", dtype_name(out)));
        check_shape(out, "out", {indices.shape(0), w});
        check_contiguous(out, "out");
        check_writeable(out, "out");
        check_apart({{&out, "out"}}, {{&indptr, "indptr"}, {&indices, "indices"}, {&ages_keep, "ages"},
                                      {&row_keep, "row_ids"}, {&col_keep, "col_ids"}});
    }
    auto run = [&](auto i, auto zero) {
        using I = decltype(i);
        using T = decltype(zero);
        const auto links = checked_links<I>(indptr, indices, rows, ncols, !col_ids_obj.is_none());
        T* o = static_cast<T*>(out.mutable_data());
        py::gil_scoped_release nogil;
        rowstoch::link_noise(links.first, links.second, rows, ids, seed, t, r, ages, w, o,
                             sigma_obj.is_none() ? 1.0 : sigma.one, sigma.values());
    };
    const bool f64 = dtype.equal(py::dtype::of<double>());
    if (is_i64(indptr)) f64 ? run(int64_t{}, 0.0) : run(int64_t{}, 0.0f);
    else f64 ? run(int32_t{}, 0.0) : run(int32_t{}, 0.0f);
    return out;
}

py::array mix_power(py::array indptr, py::array indices, py::array data, py::array X, int64_t R,
                    py::object out, py::object work_obj, bool check_indices) {
    if (R < 0) throw py::value_error(cat("R must be >= 0, got ", R));
    Csr A = check_csr(indptr, indices, data, check_indices);
    py::array Y = check_block_io(A, X, out);
    const int64_t w = X.shape(1);
    py::array work;
    if (work_obj.is_none() || R <= 1) {
        work = py::array(X.dtype(), {R > 1 ? X.shape(0) : 0, w});  // one buffer per call, not per step
    } else {
        if (!py::isinstance<py::array>(work_obj))
            throw py::type_error("work must be a numpy.ndarray or None");
        work = work_obj.cast<py::array>();
        check_same_dtype(work, "work", X, "X");
        check_shape(work, "work", {X.shape(0), w});
        check_contiguous(work, "work");
        check_writeable(work, "work");
        check_apart({{&work, "work"}, {&Y, "out"}},
                    {{&X, "X"}, {&A.indptr, "indptr"}, {&A.indices, "indices"}, {&A.data, "data"}});
    }
    Interrupt interrupt(A.nnz * w);
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T *Ax = cptr<T>(A.data), *Xp = cptr<T>(X);
        T *Yp = ptr<T>(Y), *Wp = ptr<T>(work);
        py::gil_scoped_release nogil;
        rowstoch::csr_mix_power(Ap, Aj, Ax, A.n, Xp, w, R, Yp, Wp, [&] { return interrupt.poll(); });
    });
    interrupt.rethrow_if_raised();
    return Y;
}

// An n x w block argument of the GT phases: dtype of A, exact shape, C order.
void check_block(const py::array& a, const char* name, const Csr& A, int64_t w, bool writeable) {
    check_same_dtype(a, name, A.data, "A.data");
    check_shape(a, name, {A.n, w});
    check_contiguous(a, name);
    if (writeable) check_writeable(a, name);
}

bool gt_y_phase(py::array indptr, py::array indices, py::array data, int64_t R, double lr,
                py::array x, py::array y, py::array g_new, py::array g_old, py::array s_new,
                py::array s_old, py::array y_out, py::array xw, py::array psi, py::array work,
                bool check_indices) {
    if (R < 1) throw py::value_error(cat("R must be >= 1, got ", R));
    Csr A = check_csr(indptr, indices, data, check_indices);
    if (x.ndim() != 2) throw py::value_error(cat("x must be 2-D (n, w), got ", x.ndim(), "-D"));
    const int64_t w = x.shape(1);
    const std::pair<py::array*, const char*> inputs[] = {
        {&x, "x"}, {&y, "y"}, {&g_new, "g_new"}, {&g_old, "g_old"}};
    const std::pair<py::array*, const char*> outputs[] = {
        {&y_out, "y_out"}, {&xw, "xw"}, {&psi, "psi"}, {&work, "work"}};
    for (auto& [a, name] : inputs) check_block(*a, name, A, w, false);
    for (auto& [a, name] : outputs) {
        if (a == &work && R == 1 && work.size() == 0) continue;  // one pass: no ping-pong buffer needed
        check_block(*a, name, A, w, true);
    }
    for (auto& [a, name] : {std::pair<py::array*, const char*>{&s_new, "s_new"}, {&s_old, "s_old"}}) {
        check_same_dtype(*a, name, A.data, "A.data");
        check_shape(*a, name, {A.n});
        check_contiguous(*a, name);
    }
    check_apart({{&y_out, "y_out"}, {&xw, "xw"}, {&psi, "psi"}, {&work, "work"}},
                {{&x, "x"}, {&y, "y"}, {&g_new, "g_new"}, {&g_old, "g_old"}, {&s_new, "s_new"}, {&s_old, "s_old"},
                 {&A.indptr, "indptr"}, {&A.indices, "indices"}, {&A.data, "data"}});
    bool finite = true;
    Interrupt interrupt(A.nnz * w);  // (R passes without the GIL: 10^9 of them had held Ctrl-C for hours)
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T* Ax = cptr<T>(A.data);
        const T *xp = cptr<T>(x), *yp = cptr<T>(y), *gn = cptr<T>(g_new), *go = cptr<T>(g_old);
        const T *sn = cptr<T>(s_new), *so = cptr<T>(s_old);
        T *yo = ptr<T>(y_out), *wp = ptr<T>(xw), *pp = ptr<T>(psi), *kp = ptr<T>(work);
        const T lr_t = static_cast<T>(lr);
        py::gil_scoped_release nogil;
        rowstoch::gt_tracker_input(A.n, w, yp, gn, go, sn, so, pp);
        finite = rowstoch::gt_tracker_mix(Ap, Aj, Ax, A.n, w, R, lr_t, pp, kp, xp, yo, wp,
                                          [&] { return interrupt.poll(); });
    });
    interrupt.rethrow_if_raised();
    return finite;
}

// A block of the same shape and dtype as `ref`, C-contiguous (writeable when asked).
void check_rows_block(const py::array& a, const char* name, const py::array& ref, bool writeable,
                      const char* ref_name = "x") {
    check_same_dtype(a, name, ref, ref_name);
    check_contiguous(a, name);
    if (a.ndim() != 2 || a.shape(0) != ref.shape(0) || a.shape(1) != ref.shape(1))
        throw py::value_error(cat(name, " must have the shape of ", ref_name, " ", shape_text(ref.shape(), ref.ndim()),
                                  ", got ", shape_text(a.shape(), a.ndim())));
    if (writeable) check_writeable(a, name);
}

// out <- sum_t coef_t X_t (module docstring of gt.hpp's combine): coef_t a float, a per-row vector (n,), a
// per-column row (1, w) or a whole (n, w) block of coefficients (gt.hpp's combine_general).
bool combine(py::array out, py::list coefs, py::list blocks) {
    const py::ssize_t K = blocks.size();
    if (K < 1 || K > 4 || static_cast<py::ssize_t>(coefs.size()) != K)
        throw py::value_error(cat("combine takes 1 to 4 (coefficient, block) terms, got ", coefs.size(), " coefficients and ",
                                  K, " blocks"));
    if (out.ndim() != 2) throw py::value_error(cat("out must be 2-D (n, w), got ", out.ndim(), "-D"));
    if (!(is_f32(out) || is_f64(out))) throw py::type_error(cat("out must be float32 or float64, got ", dtype_name(out)));
    check_contiguous(out, "out");
    check_writeable(out, "out");
    const int64_t n = out.shape(0), w = out.shape(1);
    std::vector<py::array> X(K), rc(K);
    std::vector<double> scalar(K, 0.0);
    // each coefficient's strides over (row, column): (0, 0) scalar, (1, 0) per row, (0, 1) per column, (w, 1) full
    std::vector<int64_t> rs(K, 0), cs(K, 0);
    std::vector<char> has(K, 0);
    bool general = false;
    for (py::ssize_t t = 0; t < K; ++t) {
        const std::string xn = cat("blocks[", t, "]"), cn = cat("coefs[", t, "]");
        if (!py::isinstance<py::array>(blocks[t])) throw py::type_error(cat(xn, " must be a NumPy array"));
        X[t] = blocks[t].cast<py::array>();
        check_rows_block(X[t], xn.c_str(), out, false, "out");
        // a block may be out itself (element-wise in place) but no other overlap
        if (X[t].data() != out.data()) check_no_overlap(out, "out", X[t], xn.c_str());
        if (py::isinstance<py::array>(coefs[t])) {
            rc[t] = coefs[t].cast<py::array>();
            has[t] = 1;
            check_same_dtype(rc[t], cn.c_str(), out, "out");
            check_contiguous(rc[t], cn.c_str());
            check_no_overlap(out, "out", rc[t], cn.c_str());
            if (rc[t].ndim() == 1 && rc[t].shape(0) == n) {
                rs[t] = 1;
            } else if (rc[t].ndim() == 2 && rc[t].shape(0) == 1 && rc[t].shape(1) == w) {
                cs[t] = 1;
                general = true;
            } else if (rc[t].ndim() == 2 && rc[t].shape(0) == n && rc[t].shape(1) == w) {
                rs[t] = w;
                cs[t] = 1;
                general = true;
            } else {
                throw py::value_error(cat(cn, " must be a number, one value per row (shape (", n, ",)), one per column "
                                          "(shape (1, ", w, ")) or one per entry (shape (", n, ", ", w, ")), got shape ",
                                          shape_text(rc[t].shape(), rc[t].ndim())));
            }
        } else {
            py::object c = coefs[t];
            if (!(py::isinstance<py::float_>(c) || py::isinstance<py::int_>(c) ||
                  py::hasattr(c, "__float__")) || py::isinstance<py::list>(c) || py::isinstance<py::tuple>(c))
                throw py::type_error(cat(cn, " must be a number or a NumPy array of one value per row, column or "
                                         "entry, got ", std::string(py::str(py::type::of(c).attr("__name__")))));
            scalar[t] = py::cast<double>(c.attr("__float__")());
        }
    }
    bool finite = true;
    auto run = [&](auto tag) {
        using T = decltype(tag);
        const T* xs[4] = {nullptr, nullptr, nullptr, nullptr};
        const T* rcs[4] = {nullptr, nullptr, nullptr, nullptr};
        T cs_[4] = {0, 0, 0, 0};
        for (py::ssize_t t = 0; t < K; ++t) {
            xs[t] = cptr<T>(X[t]);
            rcs[t] = has[t] ? cptr<T>(rc[t]) : nullptr;
            cs_[t] = static_cast<T>(scalar[t]);
        }
        T* op = ptr<T>(out);
        py::gil_scoped_release nogil;
        if (!general) {
            finite = rowstoch::combine(n, w, static_cast<int>(K), xs, rcs, cs_, op);
            return;
        }
        const T* coef[4] = {nullptr, nullptr, nullptr, nullptr};
        for (py::ssize_t t = 0; t < K; ++t) coef[t] = rcs[t] ? rcs[t] : &cs_[t];
        finite = rowstoch::combine_general(n, w, static_cast<int>(K), xs, coef, rs.data(), cs.data(), op);
    };
    if (is_f64(out)) run(double{});
    else run(float{});
    return finite;
}

// dst[k] <- src[k] for every row k, rows in parallel: two 2-D blocks of one dtype and shape whose rows are each
// contiguous, at any row stride (a delayed history's slot is every (D + 1) R-th row), not overlapping. NumPy copies
// such a block on one thread, a message at a time: at n = 2^18, d = 10 the two copies of a delayed round (its own
// rows, its messages into the history) took 13 ms of the round's 45 on two threads.
void copy_rows(py::array src, py::array dst) {
    check_ndim(src, "src", 2);
    check_ndim(dst, "dst", 2);
    check_writeable(dst, "dst");
    check_same_dtype(dst, "dst", src, "src");
    if (src.dtype().attr("hasobject").cast<bool>())  // (bytes copied without their references: refused)
        throw py::type_error(cat("src and dst hold Python objects (dtype ", dtype_name(src),
                                 "): copy them with NumPy"));
    if (src.shape(0) != dst.shape(0) || src.shape(1) != dst.shape(1))
        throw py::value_error(cat("src and dst must have one shape, got (", src.shape(0), ", ", src.shape(1), ") and (",
                                  dst.shape(0), ", ", dst.shape(1), ")"));
    const int64_t n = src.shape(0), w = src.shape(1), item = src.itemsize(), row_bytes = w * item;
    if (n == 0 || w == 0) return;
    const char* s = static_cast<const char*>(src.data());
    char* d = static_cast<char*>(dst.mutable_data());
    const int64_t ss = n > 1 ? src.strides(0) : row_bytes, ds = n > 1 ? dst.strides(0) : row_bytes;
    for (const auto* a : {&src, &dst})
        if (w > 1 && a->strides(1) != item)
            throw py::value_error(cat(a == &src ? "src" : "dst", "'s rows must be contiguous (a stride of ", item,
                                      " bytes between values), got ", a->strides(1)));
    if (ds > -row_bytes && ds < row_bytes)
        throw py::value_error(cat("dst's rows overlap one another (a row stride of ", ds, " bytes, rows of ", row_bytes,
                                  ")"));
    auto span = [&](const char* base, int64_t stride) {  // [first byte, last byte + 1) of a block
        const char* end = base + (n - 1) * stride;
        return std::make_pair(std::min(base, end), std::max(base, end) + row_bytes);
    };
    const auto a = span(s, ss), b = span(d, ds);
    if (a.first < b.second && b.first < a.second) {
        if (s == d && ss == ds) return;  // (the block itself)
        throw py::value_error("the spans of src and dst in memory overlap: copy through a new array");
    }
    py::gil_scoped_release nogil;
    rowstoch::for_range(n, rowstoch::threads_for(n * w), [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) std::memcpy(d + k * ds, s + k * ss, static_cast<std::size_t>(row_bytes));
    });
}

int64_t first_nonfinite(py::array X) {
    if (X.ndim() != 2) throw py::value_error(cat("X must be 2-D, got ", X.ndim(), "-D"));
    check_contiguous(X, "X");
    const int64_t n = X.shape(0), w = X.shape(1);
    if (is_f64(X)) {
        const double* p = cptr<double>(X);
        py::gil_scoped_release nogil;
        return rowstoch::first_nonfinite_row(p, n, w);
    }
    if (is_f32(X)) {
        const float* p = cptr<float>(X);
        py::gil_scoped_release nogil;
        return rowstoch::first_nonfinite_row(p, n, w);
    }
    throw py::type_error(cat("X must be float32 or float64, got ", dtype_name(X)));
}

// A per-sample gradient table's entries at the draws idx: read into block (put = false) or written from it.
template <class T, class I>
void sample_rows_typed(py::array& table, const py::array& idx, py::array& block, bool put, int64_t rows,
                       int64_t reps, int64_t d) {
    const I* drawn = cptr<I>(idx);
    if (put) {
        T* t = ptr<T>(table);
        const T* b = cptr<T>(block);
        py::gil_scoped_release nogil;
        rowstoch::put_samples(t, rows, reps, d, drawn, b);
    } else {
        const T* t = cptr<T>(table);
        T* b = ptr<T>(block);
        py::gil_scoped_release nogil;
        rowstoch::take_samples(t, rows, reps, d, drawn, b);
    }
}

void sample_rows(py::array table, py::array idx, py::array block, bool put) {
    check_ndim(table, "table", 4);
    check_contiguous(table, "table");
    check_contiguous(idx, "idx");
    check_contiguous(block, "block");
    check_same_dtype(block, "block", table, "table");
    if (!is_f64(table) && !is_f32(table))
        throw py::type_error(cat("table must be float32 or float64, got ", dtype_name(table)));
    const int64_t m = table.shape(0), rows = table.shape(1), reps = table.shape(2), d = table.shape(3);
    if (idx.size() != rows * reps)
        throw py::value_error(cat("idx must hold one draw per node and replica (", rows, " x ", reps, " = ",
                                  rows * reps, "), got ", idx.size()));
    if (block.size() != rows * reps * d)
        throw py::value_error(cat("block must hold ", rows * reps, " entries of ", d, " values (", rows * reps * d,
                                  "), got ", block.size()));
    check_writeable(put ? table : block, put ? "table" : "block");
    if (!is_i64(idx) && !is_i32(idx))
        throw py::type_error(cat("idx must be int32 or int64, got ", dtype_name(idx)));
    const int64_t bad = is_i64(idx) ? rowstoch::first_bad_sample(cptr<int64_t>(idx), idx.size(), m)
                                    : rowstoch::first_bad_sample(cptr<std::int32_t>(idx), idx.size(), m);
    if (bad >= 0)
        throw py::value_error(cat("idx holds ", is_i64(idx) ? cptr<int64_t>(idx)[bad] : cptr<std::int32_t>(idx)[bad],
                                  " at position ", bad, ": not a sample of the table's ", m));
    if (is_f64(table)) {
        if (is_i64(idx)) sample_rows_typed<double, int64_t>(table, idx, block, put, rows, reps, d);
        else sample_rows_typed<double, std::int32_t>(table, idx, block, put, rows, reps, d);
    } else {
        if (is_i64(idx)) sample_rows_typed<float, int64_t>(table, idx, block, put, rows, reps, d);
        else sample_rows_typed<float, std::int32_t>(table, idx, block, put, rows, reps, d);
    }
}

py::array draw_samples(std::uint64_t prefix, py::array rep_ids, py::array node_ids, std::uint64_t key, int64_t m,
                       bool all_nodes) {
    if (m < 1) throw py::value_error(cat("samples must be >= 1, got ", m));
    check_ndim(rep_ids, "rep_ids", 1);
    check_ndim(node_ids, "node_ids", 1);
    check_contiguous(rep_ids, "rep_ids");
    check_contiguous(node_ids, "node_ids");
    if (!is_i64(rep_ids) || !is_i64(node_ids))
        throw py::type_error(cat("rep_ids and node_ids must be int64, got ", dtype_name(rep_ids), " and ",
                                 dtype_name(node_ids)));
    const int64_t reps = rep_ids.shape(0), rows = node_ids.shape(0);
    checked_product({reps, rows}, cat("reps * rows = ", reps, " * ", rows).c_str());
    py::array out = new_array(py::dtype::of<int64_t>(), {reps, rows}, "draw_samples: the draws (reps, rows) =");
    const int64_t* r = cptr<int64_t>(rep_ids);
    const int64_t* ids = all_nodes ? nullptr : cptr<int64_t>(node_ids);
    int64_t* o = ptr<int64_t>(out);
    py::gil_scoped_release nogil;
    rowstoch::draw_samples(prefix, r, reps, ids, rows, key, m, o);
    return out;
}

py::array numpy_minibatches(py::array entropy, int64_t n, int64_t M, int64_t batches, int64_t batch, py::array own) {
    if (n < 1 || M < 1) throw py::value_error(cat("n and M must be >= 1, got ", n, " and ", M));
    if (batches < 1) throw py::value_error(cat("batches must be >= 1, got ", batches));
    if (batch < 1 || batch > M) throw py::value_error(cat("batch must be in 1..M = ", M, ", got ", batch));
    if (M > (int64_t(1) << 40))  // (a thread holds 3 M values and M + 1 counts: 32 TB here)
        throw py::value_error(cat("M = ", M, " samples a node is more than 2^40"));
    check_ndim(entropy, "entropy", 2);
    check_ndim(own, "own", 1);
    check_contiguous(entropy, "entropy");
    check_contiguous(own, "own");
    if (!has_type<uint64_t>(entropy) || entropy.shape(1) != 3)
        throw py::type_error(cat("entropy must be uint64 of shape (keys, 3), got ", dtype_name(entropy), " of ",
                                 entropy.shape(0), " x ", entropy.shape(1)));
    if (!is_i64(own)) throw py::type_error(cat("own must be int64, got ", dtype_name(own)));
    const int64_t keys = entropy.shape(0), m = own.shape(0);
    const int64_t* nodes = cptr<int64_t>(own);
    for (int64_t i = 0; i < m; ++i)
        if (nodes[i] < 0 || nodes[i] >= n)
            throw py::value_error(cat("own[", i, "] = ", nodes[i], " is not in 0..", n - 1));
    checked_product({keys, batches, n, M},
                    cat("keys * batches * n * M = ", keys, " * ", batches, " * ", n, " * ", M).c_str());
    checked_product({keys, batches, m, batch},
                    cat("keys * batches * m * batch = ", keys, " * ", batches, " * ", m, " * ", batch).c_str());
    py::array out = new_array(py::dtype::of<int64_t>(), {keys, batches, m, batch},
                              "numpy_minibatches: the draws (keys, batches, m, batch) =");
    const uint64_t* e = cptr<uint64_t>(entropy);
    int64_t* o = ptr<int64_t>(out);
    py::gil_scoped_release nogil;
    rowstoch::numpy_minibatches(e, keys, n, M, batches, batch, nodes, m, o);
    return out;
}

py::array numpy_pcg64_states(py::array entropy) {
    check_ndim(entropy, "entropy", 2);
    check_contiguous(entropy, "entropy");
    if (!has_type<uint64_t>(entropy) || entropy.shape(1) != 3)
        throw py::type_error(cat("entropy must be uint64 of shape (keys, 3), got ", dtype_name(entropy), " of ",
                                 entropy.shape(0), " x ", entropy.shape(1)));
    const int64_t keys = entropy.shape(0);
    py::array out = new_array(py::dtype::of<uint64_t>(), {keys, int64_t(4)}, "numpy_pcg64_states: (keys, 4) =");
    const uint64_t* e = cptr<uint64_t>(entropy);
    uint64_t* o = ptr<uint64_t>(out);
    for (int64_t k = 0; k < keys; ++k) {
        std::uint32_t words[6];
        std::uint64_t seeded[4];
        rowstoch::seed_sequence_state(words, rowstoch::entropy_words(e + 3 * k, 3, words), seeded);
        const rowstoch::NumpyPcg64 g(seeded);
        o[4 * k] = static_cast<uint64_t>(g.state >> 64);
        o[4 * k + 1] = static_cast<uint64_t>(g.state);
        o[4 * k + 2] = static_cast<uint64_t>(g.inc >> 64);
        o[4 * k + 3] = static_cast<uint64_t>(g.inc);
    }
    return out;
}

py::tuple diag_powers(py::array indptr, py::array indices, py::array data, int64_t stride,
                      int64_t n_records, int64_t block, bool check_indices) {
    if (stride < 1) throw py::value_error(cat("stride must be >= 1, got ", stride));
    if (n_records < 1) throw py::value_error(cat("n_records must be >= 1, got ", n_records));
    if (block < 1) throw py::value_error(cat("block must be >= 1, got ", block));
    checked_product({n_records - 1, stride}, cat("stride * (n_records - 1) = ", stride, " * ", n_records - 1).c_str());
    Csr A = check_csr(indptr, indices, data, check_indices);
    // at most (n_records - 1) stride steps of an n-column block product: the whole work must be countable
    checked_product({n_records - 1, stride, std::max<int64_t>(A.nnz, 1), std::max<int64_t>(A.n, 1)},
                    cat("stride * (n_records - 1) * nnz * n = ", stride, " * ", n_records - 1, " * ", A.nnz, " * ",
                        A.n).c_str());
    py::array diags = new_array(A.data.dtype(), {n_records, A.n}, "diag_powers: the diagonals (n_records, n) =");
    int64_t taken = 0;
    const int64_t b = std::min<int64_t>(block, std::max<int64_t>(A.n, 1));  // columns advanced together
    Interrupt interrupt(A.nnz * b);
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T* Ax = cptr<T>(A.data);
        T* D = ptr<T>(diags);
        py::gil_scoped_release nogil;
        taken = rowstoch::csr_diag_powers(Ap, Aj, Ax, A.n, stride, n_records, b, D,
                                          [&] { return interrupt.poll(); });
    });
    interrupt.rethrow_if_raised();
    return py::make_tuple(diags, taken);
}

// The data set of the logistic objective: H (n M, d), Y (n M,) for n nodes, and
// an iterate block X ((m, d) or (reps, m, d)) of the same dtype for m of the
// nodes: all n (nodes = None) or the global ids in `nodes`.
struct LogisticData {
    int64_t n, M, d, reps, m;
    const int64_t* node_ids;
};

LogisticData check_logistic(const py::array& H, const py::array& Y, int64_t n, const py::array& X,
                            const py::object& nodes_obj, py::array& nodes) {
    check_ndim(H, "H", 2);
    check_ndim(Y, "Y", 1);
    check_contiguous(H, "H");
    check_contiguous(Y, "Y");
    if (!(is_f32(H) || is_f64(H)))
        throw py::type_error(cat("H must be float32 or float64, got ", dtype_name(H)));
    check_same_dtype(Y, "Y", H, "H");
    check_same_dtype(X, "X", H, "H");
    check_contiguous(X, "X");
    if (n < 1) throw py::value_error(cat("n must be >= 1, got ", n));
    if (H.shape(0) % n != 0)
        throw py::value_error(cat("H has ", H.shape(0), " rows, not a multiple of n = ", n));
    if (Y.shape(0) != H.shape(0))
        throw py::value_error(cat("Y has ", Y.shape(0), " entries but H has ", H.shape(0), " rows"));
    LogisticData D{n, H.shape(0) / n, H.shape(1), 1, n, nullptr};
    if (!nodes_obj.is_none()) {
        nodes = array_arg(nodes_obj, "nodes", 1, "global node ids");
        check_contiguous(nodes, "nodes");
        if (!is_i64(nodes)) throw py::type_error(cat("nodes must be int64, got ", dtype_name(nodes)));
        D.m = nodes.shape(0);
        D.node_ids = cptr<int64_t>(nodes);
        for (int64_t i = 0; i < D.m; ++i)
            if (D.node_ids[i] < 0 || D.node_ids[i] >= n)
                throw py::value_error(cat("nodes[", i, "] = ", D.node_ids[i], " is not a node of 0..", n - 1));
    }
    if (X.ndim() == 3) D.reps = X.shape(0);
    else if (X.ndim() != 2) throw py::value_error(cat("X must be 2-D (m, d) or 3-D (reps, m, d), got ", X.ndim(), "-D"));
    if (X.shape(X.ndim() - 2) != D.m || X.shape(X.ndim() - 1) != D.d)
        throw py::value_error(cat("X must have ", D.m, " rows (nodes) of d = ", D.d, " entries"));
    return D;
}

template <class F>
void dispatch_value(const py::array& H, F&& f) {
    if (is_f64(H)) f(double{});
    else f(float{});
}

// G (X's shape) and, with_loss, L (X's shape without its last axis) of a gradient kernel over every row of X,
// called as kernel(h, y, x, g, l) on H's value type without the GIL (l null without the losses); (G, L) or G.
template <class Kernel>
py::object gradients_and_losses(const py::array& H, const py::array& Y, const py::array& X, bool with_loss,
                                Kernel&& kernel) {
    py::array G(X.dtype(), std::vector<py::ssize_t>(X.shape(), X.shape() + X.ndim()));
    py::array L;  // only with_loss
    if (with_loss) L = py::array(X.dtype(), std::vector<py::ssize_t>(X.shape(), X.shape() + X.ndim() - 1));
    dispatch_value(H, [&](auto t) {
        using T = decltype(t);
        const T *h = cptr<T>(H), *y = cptr<T>(Y), *x = cptr<T>(X);
        T* g = ptr<T>(G);
        T* l = with_loss ? ptr<T>(L) : nullptr;
        py::gil_scoped_release nogil;
        kernel(h, y, x, g, l);
    });
    if (with_loss) return py::make_tuple(G, L);
    return G;
}

py::array logistic_grad(py::array H, py::array Y, int64_t n, double rho, py::array X, int64_t B,
                        int64_t batches, std::uint64_t seed, std::uint64_t iteration, int64_t rep_offset,
                        py::object nodes_obj, py::object out_obj, int64_t rep_period) {
    py::array nodes;
    LogisticData D = check_logistic(H, Y, n, X, nodes_obj, nodes);
    if (B < 1 || B > D.M) throw py::value_error(cat("batch must be in 1..", D.M, " (samples per node), got ", B));
    if (batches < 1) throw py::value_error(cat("batches must be >= 1, got ", batches));
    if (rep_offset < 0) throw py::value_error(cat("rep_offset must be >= 0, got ", rep_offset));
    if (rep_period < 0) throw py::value_error(cat("rep_period must be >= 0, got ", rep_period));
    // a gradient call runs without the GIL and cannot be interrupted: work that would take hours is refused
    const int64_t work = checked_product({D.reps, D.m, B, batches, D.d}, cat("batches = ", batches).c_str());
    if (work > (int64_t{1} << 40))
        throw py::value_error(cat("batches = ", batches, " with batch = ", B, " is ", work,
                                  " multiply-adds per call (over 2^40: hours of work); lower batches or batch"));
    py::array G;
    if (out_obj.is_none()) {
        std::vector<py::ssize_t> shape(X.shape(), X.shape() + X.ndim());
        G = py::array(X.dtype(), shape);
    } else {
        G = output_arg(out_obj, "out");
        check_same_dtype(G, "out", X, "X");
        check_contiguous(G, "out");
        check_writeable(G, "out");
        if (G.size() != X.size()) throw py::value_error("out must have the shape of X");
        check_apart({{&G, "out"}}, {{&X, "X"}, {&H, "H"}, {&Y, "Y"}, {&nodes, "nodes"}});
    }
    dispatch_value(H, [&](auto t) {
        using T = decltype(t);
        const T *h = cptr<T>(H), *y = cptr<T>(Y), *x = cptr<T>(X);
        T* g = ptr<T>(G);
        py::gil_scoped_release nogil;
        rowstoch::logistic_stochastic_grad(h, y, D.m, D.node_ids, D.M, D.d, static_cast<T>(rho), x, D.reps, B,
                                           batches, seed, iteration, rep_offset, g, rep_period);
    });
    return G;
}

// Exact gradients of every row's local objective; with_loss also returns the
// local losses from the same pass (a tuple (G, L)).
py::object logistic_full_grad(py::array H, py::array Y, int64_t n, double rho, py::array X, py::object nodes_obj,
                              bool with_loss) {
    py::array nodes;
    LogisticData D = check_logistic(H, Y, n, X, nodes_obj, nodes);
    auto kernel = [&](const auto* h, const auto* y, const auto* x, auto* g, auto* l) {
        using T = std::remove_pointer_t<decltype(g)>;
        rowstoch::logistic_full_grad(h, y, D.m, D.node_ids, D.M, D.d, static_cast<T>(rho), x, D.reps, g, l);
    };
    return gradients_and_losses(H, Y, X, with_loss, kernel);
}

// Least squares' gradients (and losses) of every node and replica, rowstoch::least_squares_grad: H (n, M, d) the
// data every replica reads (nodes: which of its n nodes X's rows are), or (reps, m, M, d) each replica's own rows;
// Y its targets, H's shape without d.
py::object least_squares_grad(py::array H, py::array Y, py::array X, py::object nodes_obj, bool with_loss) {
    if (H.ndim() != 3 && H.ndim() != 4)
        throw py::value_error(cat("H must be 3-D (n, M, d) or 4-D (reps, m, M, d), got ", H.ndim(), "-D"));
    check_ndim(Y, "Y", H.ndim() - 1);
    check_contiguous(H, "H");
    check_contiguous(Y, "Y");
    if (!(is_f32(H) || is_f64(H))) throw py::type_error(cat("H must be float32 or float64, got ", dtype_name(H)));
    check_same_dtype(Y, "Y", H, "H");
    check_same_dtype(X, "X", H, "H");
    check_contiguous(X, "X");
    for (py::ssize_t k = 0; k + 1 < H.ndim(); ++k)
        if (Y.shape(k) != H.shape(k))
            throw py::value_error(cat("Y must have H's shape without its last axis: axis ", k, " has ", Y.shape(k),
                                      " entries, H's ", H.shape(k)));
    if (X.ndim() != 2 && X.ndim() != 3)
        throw py::value_error(cat("X must be 2-D (m, d) or 3-D (reps, m, d), got ", X.ndim(), "-D"));
    const bool own = H.ndim() == 4;  // (each replica's rows)
    const int64_t n = H.shape(own ? 1 : 0), M = H.shape(own ? 2 : 1), d = H.shape(own ? 3 : 2);
    const int64_t reps = X.ndim() == 3 ? X.shape(0) : 1;
    int64_t m = n;
    const int64_t* node_ids = nullptr;
    py::array nodes;
    if (!nodes_obj.is_none()) {
        if (own) throw py::value_error("nodes name rows of a shared H (3-D); a 4-D H holds each replica's own rows");
        nodes = array_arg(nodes_obj, "nodes", 1, "global node ids");
        check_contiguous(nodes, "nodes");
        if (!is_i64(nodes)) throw py::type_error(cat("nodes must be int64, got ", dtype_name(nodes)));
        m = nodes.shape(0);
        node_ids = cptr<int64_t>(nodes);
        for (int64_t i = 0; i < m; ++i)
            if (node_ids[i] < 0 || node_ids[i] >= n)
                throw py::value_error(cat("nodes[", i, "] = ", node_ids[i], " is not a node of 0..", n - 1));
    }
    if (own && H.shape(0) != reps)
        throw py::value_error(
            cat("H holds the rows of ", H.shape(0), " replica(s) (its first axis) but X has ", reps));
    if (M < 1) throw py::value_error("H must hold at least one row per node");
    if (X.shape(X.ndim() - 2) != m || X.shape(X.ndim() - 1) != d)
        throw py::value_error(cat("X must have ", m, " rows (nodes) of d = ", d, " entries"));
    const int64_t stride = own ? n * M : 0;
    auto kernel = [&](const auto* h, const auto* y, const auto* x, auto* g, auto* l) {
        rowstoch::least_squares_grad(h, y, m, node_ids, M, d, x, reps, stride, g, l);
    };
    return gradients_and_losses(H, Y, X, with_loss, kernel);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "rowstoch_fast compiled kernels (CSR mixing, fused Pull-Diag-GT step, diagonal tracker).";

    m.def("has_openmp", &rowstoch::has_openmp, "True when the kernels were built with OpenMP.");
    m.def("build_info", []() {
        py::dict info;
        info["openmp"] = rowstoch::has_openmp();
        info["max_threads"] = rowstoch::max_threads();
        std::string compiler =
#if defined(__clang__)
            std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
            std::string("gcc ") + __VERSION__;
#else
            std::string("unknown");
#endif
        compiler.erase(compiler.find_last_not_of(' ') + 1);  // (clang's version string ends in a space)
        info["compiler"] = compiler;
        info["flags"] = std::string(ROWSTOCH_BUILD_FLAGS);
        info["serial_below_work"] = rowstoch::kSerialWork;
        info["simd_width"] = rowstoch::simd_width();
        return info;
    }, "How the extension was built: OpenMP, compiler, flags, thread count.");
    m.def("get_num_threads", &rowstoch::max_threads, "Threads the kernels use (1 without OpenMP).");
    m.def("set_num_threads", [](int64_t t) {
        if (t < 1 || t > rowstoch::thread_cap() || !rowstoch::set_threads(static_cast<int>(t)))
            throw py::value_error(cat("threads must be in 1..", rowstoch::thread_cap(),
                                      " (4 per processor, at least 64), got ", t));
    }, py::arg("threads"),
          "Set the threads every kernel uses, process-wide (from any Python thread); no effect without OpenMP.");
    m.def("set_adaptive_threads", [](bool on) { rowstoch::contention().enabled = on; }, py::arg("enabled"),
          "Turn the contention back-off on or off (on by default where supported; env ROWSTOCH_ADAPTIVE_THREADS=0).");
    m.def("adaptive_threads", []() {
        rowstoch::Contention& c = rowstoch::contention();
        py::dict d;
        d["supported"] = rowstoch::contention_supported();
        d["enabled"] = c.enabled.load();
        d["windows"] = c.windows.load();
        d["serial_episodes"] = c.serial_episodes.load();
        d["serial_now"] = rowstoch::contended_threads(2) == 1;
        return d;
    }, "State of the contention back-off: windows of parallel time judged, times it went serial.");
    m.def("get_simd_width", &rowstoch::simd_width,
          "Doubles per vector in the vector kernels (gradients, delayed ages, top-k): 8 with AVX-512F (x86-64,\n"
          "detected at run time; the kernels with a replica in each lane), 4 with AVX2, else 2.");
    m.def("simd_widths", []() {
        py::list widths;
        for (int w : {2, 4, 8})
            if (w <= rowstoch::simd_width_available()) widths.append(w);
        return widths;
    }, "The vector widths this CPU runs: [2], [2, 4] (AVX2) or [2, 4, 8] (AVX-512F).");
    m.def("set_simd_width", [](int w) {
        if (!rowstoch::set_simd_width(w))
            throw py::value_error(cat("width must be 0 (automatic), 2, 4 where the CPU has AVX2 or 8 where it has "
                                      "AVX-512F (it has ", rowstoch::simd_width_available(), " at most), got ", w));
    }, py::arg("width"),
          "Force the vector kernels' width (2, 4 or 8; 0 = automatic). Same bits at any width.");

    m.def("mix", &mix, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("X"),
          py::arg("out") = py::none(), py::arg("check_indices") = true, py::arg("ncols") = -1,
          "Y = A X for CSR A (n x ncols, square by default) and dense C-contiguous X (ncols x d).");
    bind_mix_lossy(m);  // (passes.cpp)
    m.def("ge_advance", &ge_advance, py::arg("indptr"), py::arg("indices"), py::arg("bad"), py::arg("seed"),
          py::arg("from_"), py::arg("to"), py::arg("p_bad"), py::arg("p_recover"), py::arg("init") = false,
          py::arg("row_ids") = py::none(), py::arg("col_ids") = py::none(),
          "Advance the Gilbert-Elliott state of every stored entry (bad[q], uint8) to iteration `to` "
          "(rowstoch_fast.network.Lossy, model='gilbert-elliott'), reading the transitions from `to` backwards: "
          "about 1 / |p_bad - p_recover| of them an entry, whatever to - from_. Interrupted (Ctrl-C), bad is "
          "left as it was.");
    m.def("compress", &compress, py::arg("X"), py::arg("out"), py::arg("method"), py::arg("L"), py::arg("param"),
          py::arg("sigma"), py::arg("unbiased"), py::arg("seed"), py::arg("t"), py::arg("r"),
          py::arg("row_ids") = py::none(), py::arg("own") = py::none(),
          "out <- the compressed (or noisy) messages of X's rows: rowstoch/compress.hpp (out may be X); own: "
          "X's rows copied there in the same pass. param (bits or k) and sigma: one value, or one per node (1-D, "
          "indexed by the rows' global ids: each sender's).");
    m.def("delay_ages", &delay_ages, py::arg("indptr"), py::arg("indices"), py::arg("seed"), py::arg("t"),
          py::arg("r"), py::arg("max_delay"), py::arg("fixed") = false, py::arg("row_ids") = py::none(),
          py::arg("col_ids") = py::none(), py::arg("layout") = py::none(),
          "int32 per stored entry: the age (iterations) of the newest message of the link that has arrived by "
          "iteration t (network.Delayed; rowstoch/network.hpp); with layout = (n_own, n_block, rounds[, "
          "node_major]): instead the row each entry reads in the delayed round's stacked block (int32 where indptr "
          "is and the rows fit; node_major False: the blocks iteration by iteration).");
    bind_mix_delayed(m);  // (passes.cpp)
    m.def("link_noise", &link_noise, py::arg("indptr"), py::arg("indices"), py::arg("seed"), py::arg("t"),
          py::arg("r"), py::arg("w"), py::arg("dtype") = py::dtype::of<double>(), py::arg("ages") = py::none(),
          py::arg("row_ids") = py::none(), py::arg("col_ids") = py::none(), py::arg("sigma") = py::none(),
          py::arg("out") = py::none(),
          "(nnz, w) standard normals: the noise on each received copy of a message (network.Noisy per='link'); "
          "with sigma (one value, or one per node: the sender's) scaled by it in the dtype; into out where given.");
    m.def("lost_links", &lost_links, py::arg("indptr"), py::arg("indices"), py::arg("seed"), py::arg("t"),
          py::arg("r"), py::arg("p"), py::arg("row_ids") = py::none(), py::arg("col_ids") = py::none(),
          py::arg("bad") = py::none(),
          "One uint8 per stored entry: 1 where round r of iteration t loses the message j -> i "
          "(uniform_hash(seed, t, r, i, j) < p, p one number or one per node (the sender j's), gated by Gilbert-Elliott states `bad` where given; never a self "
          "loop; global ids row_ids / col_ids for an MPI share): the draws of every lossy pass.");
    bind_running_sums(m);  // (passes.cpp)
    m.def("mix_power", &mix_power, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("X"), py::arg("R"), py::arg("out") = py::none(), py::arg("work") = py::none(),
          py::arg("check_indices") = true,
          "Y = A^R X with two ping-pong buffers (out and work, allocated here when not given).");
    m.def("gt_y_phase", &gt_y_phase, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("R"), py::arg("lr"), py::arg("x").noconvert(), py::arg("y").noconvert(),
          py::arg("g_new").noconvert(), py::arg("g_old").noconvert(),
          py::arg("s_new").noconvert(), py::arg("s_old").noconvert(),
          py::arg("y_out").noconvert(), py::arg("xw").noconvert(), py::arg("psi").noconvert(),
          py::arg("work").noconvert(), py::arg("check_indices") = true,
          "Pull-Diag-GT y phase: y_out <- A^R (y + s_new g_new - s_old g_old), xw <- x - lr y_out.\n"
          "work: a second buffer for R > 1 (an empty array will do at R = 1). Returns False when xw has a NaN or Inf.");
    m.def("combine", &combine, py::arg("out").noconvert(), py::arg("coefs"), py::arg("blocks"),
          "out <- sum_t coefs[t] * blocks[t] (1 to 4 terms; a coefficient is a float, a per-row vector (n,), a\n"
          "per-column row (1, w) or an (n, w) block; a block may be out itself). Returns False when out has a NaN or Inf.");
    m.def("sample_rows", &sample_rows, py::arg("table").noconvert(), py::arg("idx").noconvert(),
          py::arg("block").noconvert(), py::arg("put"),
          "A per-sample table (m, rows, reps, d): block[i * reps + r] <- table[idx[r, i], i, r] (put=False), or\n"
          "the inverse (put=True). idx: (reps, rows) or (rows,) draws in 0..m-1, int32 or int64; block: rows * reps\n"
          "entries of d values, C order, the table's dtype.");
    m.def("draw_samples", &draw_samples, py::arg("prefix"), py::arg("rep_ids").noconvert(),
          py::arg("node_ids").noconvert(), py::arg("key"), py::arg("samples"), py::arg("all_nodes") = false,
          "One sample index per replica and node, uniform in 0..samples-1, as int64 (len(rep_ids), len(node_ids)):\n"
          "the top 53 bits of mix64 chained from prefix over the replica's id, the node's id and key, times samples,\n"
          "floored (objectives.draw_samples). rep_ids, node_ids: int64 (all_nodes: node i is i, node_ids' length\n"
          "alone read).");
    m.def("numpy_minibatches", &numpy_minibatches, py::arg("entropy").noconvert(), py::arg("n"), py::arg("M"),
          py::arg("batches"), py::arg("batch"), py::arg("own").noconvert(),
          "The least-squares mini-batches, int64 (keys, batches, m, batch): for each row [seed, rep, iteration] of\n"
          "entropy (uint64, keys x 3), numpy.random.default_rng(row) draws random((n, M)) batches times, and each\n"
          "node own[i] takes the indices of its batch smallest uniforms, smallest first (ties by index).");
    m.def("numpy_pcg64_states", &numpy_pcg64_states, py::arg("entropy").noconvert(),
          "The PCG64 states of numpy.random.default_rng(row) for each row [seed, rep, iteration] of entropy (uint64,\n"
          "keys x 3), as uint64 (keys, 4): the state's high and low words, then the increment's (what\n"
          "bit_generator.state holds after seeding).");
    m.def("copy_rows", &copy_rows, py::arg("src").noconvert(), py::arg("dst").noconvert(),
          "dst[k] <- src[k] for every row, in parallel: 2-D blocks of one dtype and shape, each row contiguous (any\n"
          "row stride), not overlapping.");
    m.def("first_nonfinite", &first_nonfinite, py::arg("X"),
          "Row index of the first NaN/Inf in a 2-D float array, or -1.");
    m.def("logistic_grad", &logistic_grad, py::arg("H"), py::arg("Y"), py::arg("n"), py::arg("rho"),
          py::arg("X"), py::arg("batch"), py::arg("batches"), py::arg("seed"), py::arg("iteration"),
          py::arg("rep_offset") = 0, py::arg("nodes") = py::none(), py::arg("out") = py::none(),
          py::arg("rep_period") = 0,
          "Stochastic gradients of the nonconvex logistic objective for every node (and repetition: block r\n"
          "draws the streams of repetition rep_offset + r, or rep_offset + r % rep_period with rep_period > 0).");
    m.def("logistic_full_grad", &logistic_full_grad, py::arg("H"), py::arg("Y"), py::arg("n"),
          py::arg("rho"), py::arg("X"), py::arg("nodes") = py::none(), py::arg("with_loss") = false,
          "Exact local gradients grad f_i(x_i) over each node's data; with_loss: (G, f_i(x_i)) from one pass.");
    m.def("least_squares_grad", &least_squares_grad, py::arg("H"), py::arg("Y"), py::arg("X"),
          py::arg("nodes") = py::none(), py::arg("with_loss") = false,
          "Least squares' gradients (H_i^T (H_i x_i - y_i)) / M of every node and replica, H (n, M, d) shared or\n"
          "(reps, m, M, d) each replica's rows; with_loss: (G, ||H_i x_i - y_i||^2 / (2M)) from one pass.");
    m.def("diag_powers", &diag_powers, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("stride"), py::arg("n_records"), py::arg("block") = 256,
          py::arg("check_indices") = true,
          "(diags, steps): diags[m] = diag(A^(m*stride)), m < n_records, computed in column blocks.");
}
