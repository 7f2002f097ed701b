// The lossy and delayed gossip passes' entry points (rowstoch/network.hpp's csr_mix_lossy* and csr_mix_delayed):
// their instantiations, one for every combination of a pass's flags, index and value types, are about half of
// _core's compiled code (bench/RESULTS.md 43a), so they are compiled in this file of their own, beside
// bindings.cpp (setup.py compiles the two in parallel); and the per-link running sums of the robust methods
// (rowstoch/links.hpp), which balance the two files' compile times (bench/RESULTS.md 49). Same checks, same order
// as every other entry point.
#include "glue.hpp"

namespace {

py::array mix_lossy(py::array indptr, py::array indices, py::array data, py::array X, py::object out,
                    std::uint64_t seed, std::uint64_t t, std::uint64_t r, py::object p_obj, bool renormalise,
                    py::object awake_obj, py::object row_ids_obj, py::object col_ids_obj, int64_t ncols,
                    py::object bad_obj, bool check_indices, bool symmetric, bool stacked, py::object messages_obj) {
    const int rule = loss_rule(renormalise, symmetric);
    const LossProbability loss = loss_probability(p_obj);
    const double p = loss.one;
    if (ncols < -1) throw py::value_error(cat("ncols must be >= 0 (or -1 for square), got ", ncols));
    check_ndim(indptr, "indptr", 1);  // (before its length is read: a 0-d indptr was an IndexError)
    check_ndim(indices, "indices", 1);
    if (indptr.shape(0) < 1) throw py::value_error("indptr must have at least one entry (n + 1 for n rows)");
    const int64_t rows = indptr.shape(0) - 1, cols = ncols < 0 ? rows : ncols;
    const bool has_ids = !row_ids_obj.is_none() || !col_ids_obj.is_none();
    if (stacked && (has_ids || ncols >= 0))
        throw py::value_error("stacked: the indices name the n nodes (a square matrix, no row_ids / col_ids or "
                              "ncols) and X is [own rows; messages], 2 n rows");
    const bool split = !messages_obj.is_none();  // (X the own rows, messages one row per node: no stacked copy)
    py::array messages;
    if (split) {
        if (stacked || has_ids || ncols >= 0)
            throw py::value_error("messages: the indices name the n nodes (a square matrix, no row_ids / col_ids, "
                                  "ncols or stacked), X holds the own rows and messages one row per node");
        messages = array_arg(messages_obj, "messages", 2, "the messages, one row per node");
        check_same_dtype(messages, "messages", X, "X");
        check_shape(messages, "messages", {X.ndim() == 2 ? X.shape(0) : 0, X.ndim() == 2 ? X.shape(1) : 0});
        check_contiguous(messages, "messages");
    }
    if (has_ids && (row_ids_obj.is_none() || col_ids_obj.is_none()))
        throw py::value_error("row_ids and col_ids go together (the global ids of the rows and of the columns)");
    if (cols != rows && !has_ids)
        throw py::value_error("a rectangular share of a matrix needs row_ids and col_ids (the nodes' global ids)");
    py::array awake, row_keep, col_keep;
    // one flag per node: as many as rows, or (an MPI share, with ids) as many as the network has nodes
    int64_t n_global = has_ids ? std::numeric_limits<int64_t>::max() : std::max(rows, cols);
    if (!awake_obj.is_none() && has_ids) n_global = array_arg(awake_obj, "awake", 1, "one flag per node").shape(0);
    const std::uint8_t* mask = flags(awake_obj, "awake", has_ids ? n_global : rows, false, awake, "one flag per node");
    rowstoch::NodeIds ids{node_ids(row_ids_obj, "row_ids", rows, n_global, row_keep),
                          node_ids(col_ids_obj, "col_ids", cols, n_global, col_keep), loss.thresholds()};
    check_loss_nodes(loss, ids, rows, cols);
    py::array bad_keep;
    const std::uint8_t* bad = flags(bad_obj, "bad", indices.shape(0), false, bad_keep);
    return one_pass(indptr, indices, data, X, out, check_indices, ncols,
                    [&](auto Ap, auto Aj, auto Ax, int64_t n, auto Xp, int64_t w, auto Yp) {
                        using T = std::remove_const_t<std::remove_pointer_t<decltype(Xp)>>;
                        if (split)
                            rowstoch::csr_mix_lossy_split(Ap, Aj, Ax, n, Xp, cptr<T>(messages), w, Yp, seed, t, r, p,
                                                          rule, mask, bad, loss.thresholds());
                        else if (stacked)
                            rowstoch::csr_mix_lossy_stacked(Ap, Aj, Ax, n, Xp, w, Yp, seed, t, r, p, rule, mask, bad,
                                                            loss.thresholds());
                        else
                            rowstoch::csr_mix_lossy(Ap, Aj, Ax, n, Xp, w, Yp, seed, t, r, p, rule, mask, ids, bad);
                    },
                    {{&awake, "awake"}, {&row_keep, "row_ids"}, {&col_keep, "col_ids"}, {&bad_keep, "bad"},
                     {&messages, "messages"}},
                    stacked ? 2 * rows : -1);
}

// out <- one delayed round over the stacked block H (network.hpp's csr_mix_delayed: the ages drawn in the pass).
py::array mix_delayed(py::array indptr, py::array indices, py::array data, py::array H, py::array out,
                      std::uint64_t seed, std::uint64_t t, std::uint64_t r, int64_t max_delay, bool fixed,
                      py::object layout_obj, py::object row_ids_obj, py::object col_ids_obj, std::uint64_t loss_seed,
                      py::object p_obj, bool renormalise, py::object awake_obj, py::object bad_obj, bool symmetric) {
    check_max_delay(max_delay, t);
    const int rule = loss_rule(renormalise, symmetric);
    const LossProbability loss = loss_probability(p_obj);
    const double p = loss.one;
    const int64_t rows = link_rows(indptr, indices, row_ids_obj, col_ids_obj);
    py::array row_keep, col_keep, awake_keep, bad_keep;
    int64_t ncols;
    rowstoch::NodeIds ids = link_ids(row_ids_obj, col_ids_obj, rows, row_keep, col_keep, ncols);
    ids.thresholds = loss.thresholds();  // (the losses' per-node p, by global id: read by the lossy round only)
    check_loss_nodes(loss, ids, rows, ncols);
    // one awake flag per node: as many as the columns name (the nodes, or with ids, every global id they hold)
    int64_t n_nodes = ncols;
    if (ids.cols)
        for (int64_t k = 0; k < ncols; ++k) n_nodes = std::max(n_nodes, ids.cols[k] + 1);
    if (ids.rows)
        for (int64_t k = 0; k < rows; ++k) n_nodes = std::max(n_nodes, ids.rows[k] + 1);
    const std::uint8_t* awake = awake_obj.is_none() ? nullptr
        : flags(awake_obj, "awake", std::max(n_nodes, array_arg(awake_obj, "awake", 1, "one flag per node").shape(0)),
                false, awake_keep, "one flag per node");
    const std::uint8_t* bad = flags(bad_obj, "bad", indices.shape(0), false, bad_keep);
    const rowstoch::LossyRound lossy{loss_seed, p, rule, awake, bad};
    const bool lossy_round = p > 0.0 || awake || bad || loss.thresholds();
    const rowstoch::DelayLayout layout = delay_layout(layout_obj, rows, ncols, r);
    check_ndim(data, "data", 1);
    if (!(is_f32(data) || is_f64(data))) throw py::type_error(cat("data must be float32 or float64, got ", dtype_name(data)));
    if (data.shape(0) != indices.shape(0))
        throw py::value_error(cat("data.size (", data.shape(0), ") must equal indices.size (", indices.shape(0), ")"));
    check_contiguous(data, "data");
    check_ndim(H, "H", 2);
    check_same_dtype(H, "H", data, "data");
    check_contiguous(H, "H");
    const int64_t stacked = stacked_rows(layout, max_delay), w = H.shape(1);
    if (H.shape(0) != stacked)
        throw py::value_error(cat("H has ", H.shape(0), " rows, the layout ", stacked, " (n_own + (max_delay + 1) "
                                  "rounds n_block)"));
    check_same_dtype(out, "out", H, "H");
    check_shape(out, "out", {rows, w});
    check_contiguous(out, "out");
    check_writeable(out, "out");
    check_apart({{&out, "out"}}, {{&H, "H"}, {&indptr, "indptr"}, {&indices, "indices"}, {&data, "data"},
                                  {&row_keep, "row_ids"}, {&col_keep, "col_ids"}, {&awake_keep, "awake"},
                                  {&bad_keep, "bad"}});
    auto run = [&](auto i, auto v) {
        using I = decltype(i);
        using T = decltype(v);
        const auto links = checked_links<I>(indptr, indices, rows, ncols, !col_ids_obj.is_none());
        const I *Ap = links.first, *Aj = links.second;
        const T *Ax = cptr<T>(data), *Hp = cptr<T>(H);
        T* Yp = ptr<T>(out);
        py::gil_scoped_release nogil;
        rowstoch::csr_mix_delayed(Ap, Aj, Ax, rows, ids, Hp, w, Yp, seed, t, r, max_delay, fixed, layout,
                                  lossy_round ? &lossy : nullptr);
    };
    const bool i64 = is_i64(indptr), f64 = is_f64(data);
    if (i64 && f64) run(int64_t{}, 0.0);
    else if (i64) run(int64_t{}, 0.0f);
    else if (f64) run(int32_t{}, 0.0);
    else run(int32_t{}, 0.0f);
    return out;
}

// One round of per-link running sums for each quantity of `blocks` (rowstoch/links.hpp): items (X, out, pending,
// pending_out, held, held_out), X with ncols rows, out with the CSR's rows, the per-link blocks and flags with one
// row per stored entry; every written array apart from every other array of the call.
void running_sums(py::array indptr, py::array indices, py::array data, py::object arrived_obj, py::sequence blocks,
                  bool check_indices, int64_t ncols) {
    if (ncols < -1) throw py::value_error(cat("ncols must be >= 0 (or -1 for square), got ", ncols));
    Csr A = check_csr(indptr, indices, data, check_indices, ncols);
    py::array arrived_keep;
    const std::uint8_t* arrived = flags(arrived_obj, "arrived", A.nnz, false, arrived_keep);
    if (!arrived) throw py::type_error("arrived must be a bool array (one flag per stored entry), got None");
    const py::ssize_t count = blocks.size();
    if (count < 1 || count > 8)
        throw py::value_error(cat("blocks must hold 1 to 8 quantities, got ", count));
    static const char* const names[6] = {"X", "out", "pending", "pending_out", "held", "held_out"};
    std::vector<py::array> arrays;  // 6 per quantity, in `names` order
    std::vector<std::string> labels;
    for (py::ssize_t q = 0; q < count; ++q) {
        py::object item = blocks[q];
        if (!py::isinstance<py::tuple>(item) || py::len(item) != 6)
            throw py::type_error(cat("blocks[", q, "] must be a tuple (X, out, pending, pending_out, held, held_out), "
                                     "got ", type_name(item)));
        py::tuple tup = item.cast<py::tuple>();
        for (int k = 0; k < 6; ++k) {
            labels.push_back(cat("blocks[", q, "].", names[k]));
            py::object v = tup[k];
            py::array keep;
            const bool written = k == 1 || k == 3 || k == 5;
            if (k >= 4) {
                if (v.is_none()) throw py::type_error(cat(labels.back(), " must be a bool (or uint8) array, got None"));
                flags(v, labels.back().c_str(), A.nnz, written, keep);
            } else {
                keep = written ? output_arg(v, labels.back().c_str())
                               : array_arg(v, labels.back().c_str(), 2, "a 2-D block");
                const char* name = labels.back().c_str();
                if (keep.ndim() != 2) throw py::value_error(cat(name, " must be 2-D, got ", keep.ndim(), "-D"));
                check_same_dtype(keep, name, A.data, "data");
                check_contiguous(keep, name);
                if (written) check_writeable(keep, name);
            }
            arrays.push_back(keep);
        }
        const py::array& X = arrays[6 * q];
        const int64_t w = X.shape(1);
        if (X.shape(0) != A.ncols)
            throw py::value_error(cat(labels[6 * q], " has ", X.shape(0), " rows, expected ", A.ncols,
                                      " (the columns the indices read)"));
        check_shape(arrays[6 * q + 1], labels[6 * q + 1].c_str(), {A.n, w});
        check_shape(arrays[6 * q + 2], labels[6 * q + 2].c_str(), {A.nnz, w});
        check_shape(arrays[6 * q + 3], labels[6 * q + 3].c_str(), {A.nnz, w});
    }
    // every written array apart from every other array of the call (the kernel's pointers are __restrict)
    std::vector<std::pair<const py::array*, std::string>> all = {
        {&A.indptr, "indptr"}, {&A.indices, "indices"}, {&A.data, "data"}, {&arrived_keep, "arrived"}};
    for (size_t k = 0; k < arrays.size(); ++k) all.emplace_back(&arrays[k], labels[k]);
    for (size_t k = 4; k < all.size(); ++k) {
        const int role = static_cast<int>((k - 4) % 6);
        if (role != 1 && role != 3 && role != 5) continue;
        for (size_t m = 0; m < all.size(); ++m)
            if (m != k) check_no_overlap(*all[k].first, all[k].second.c_str(), *all[m].first, all[m].second.c_str());
    }
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        std::vector<rowstoch::LinkSums<T>> sums;
        for (py::ssize_t q = 0; q < count; ++q) {
            py::array* a = &arrays[6 * q];
            sums.push_back({cptr<T>(a[0]), a[0].shape(1), ptr<T>(a[1]), cptr<T>(a[2]), ptr<T>(a[3]),
                            static_cast<const std::uint8_t*>(a[4].data()),
                            static_cast<std::uint8_t*>(a[5].mutable_data())});
        }
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T* Ax = cptr<T>(A.data);
        py::gil_scoped_release nogil;
        rowstoch::link_running_sums(Ap, Aj, Ax, arrived, A.n, sums.data(), static_cast<int>(count));
    });
}

// The same round with the undelivered mass held by the links that hold any (rowstoch/links.hpp's
// compact_running_sums): blocks of (X, out, ids, pending, ids_out, pending_out), ids strictly increasing link ids
// (0..nnz-1) with one row of pending each, ids_out / pending_out with room for every link. Returns how many links
// hold mass after the round (the first rows of every ids_out / pending_out).
int64_t running_sums_compact(py::array indptr, py::array indices, py::array data, py::object arrived_obj,
                             py::sequence blocks, bool check_indices, int64_t ncols, py::object draw_obj) {
    if (ncols < -1) throw py::value_error(cat("ncols must be >= 0 (or -1 for square), got ", ncols));
    Csr A = check_csr(indptr, indices, data, check_indices, ncols);
    if (!draw_obj.is_none() && A.ncols != A.n)
        throw py::value_error("draw needs a square matrix (the losses of an MPI share are drawn on its global ids: "
                              "pass arrived)");
    py::array arrived_keep;
    std::uint8_t* arrived = flags(arrived_obj, "arrived", A.nnz, !draw_obj.is_none(), arrived_keep);
    if (!arrived) throw py::type_error("arrived must be a bool array (one flag per stored entry), got None");
    rowstoch::LinkDraws draws{0, 0, 0, 0.0, {nullptr, nullptr, nullptr}};
    if (!draw_obj.is_none()) {  // (seed, t, r, p): the round's Bernoulli losses, drawn into arrived
        if (!py::isinstance<py::tuple>(draw_obj) || py::len(draw_obj) != 4)
            throw py::type_error(cat("draw must be a tuple (seed, t, r, p) or None, got ", type_name(draw_obj)));
        py::tuple d = draw_obj.cast<py::tuple>();
        for (int k = 0; k < 3; ++k)
            if (int_item(d, k, "draw", "seed, t, r") < 0)
                throw py::value_error(cat("draw[", k, "] (seed, t, r) must be >= 0"));
        draws.seed = static_cast<std::uint64_t>(int_item(d, 0, "draw", "seed"));
        draws.t = static_cast<std::uint64_t>(int_item(d, 1, "draw", "t"));
        draws.r = static_cast<std::uint64_t>(int_item(d, 2, "draw", "r"));
        draws.p = d[3].cast<double>();
        if (!(draws.p >= 0.0 && draws.p <= 1.0))
            throw py::value_error(cat("draw's p must be in [0, 1], got ", draws.p));
    }
    const py::ssize_t count = blocks.size();
    if (count < 1 || count > 8) throw py::value_error(cat("blocks must hold 1 to 8 quantities, got ", count));
    static const char* const names[6] = {"X", "out", "ids", "pending", "ids_out", "pending_out"};
    std::vector<py::array> arrays;  // 6 per quantity, in `names` order
    std::vector<std::string> labels;
    for (py::ssize_t q = 0; q < count; ++q) {
        py::object item = blocks[q];
        if (!py::isinstance<py::tuple>(item) || py::len(item) != 6)
            throw py::type_error(cat("blocks[", q, "] must be a tuple (X, out, ids, pending, ids_out, pending_out), "
                                     "got ", type_name(item)));
        py::tuple tup = item.cast<py::tuple>();
        for (int k = 0; k < 6; ++k) {
            labels.push_back(cat("blocks[", q, "].", names[k]));
            const char* name = labels.back().c_str();
            const bool written = k == 1 || k == 4 || k == 5;
            const bool ids = k == 2 || k == 4;
            py::array a = written ? output_arg(tup[k], name) : array_arg(tup[k], name, ids ? 1 : 2,
                                                                          ids ? "link ids" : "a 2-D block");
            if (a.ndim() != (ids ? 1 : 2))
                throw py::value_error(cat(name, " must be ", ids ? 1 : 2, "-D, got ", a.ndim(), "-D"));
            check_contiguous(a, name);
            if (ids) {
                if (!is_i64(a)) throw py::type_error(cat(name, " must be int64, got ", dtype_name(a)));
            } else {
                check_same_dtype(a, name, A.data, "data");
            }
            if (written) check_writeable(a, name);
            arrays.push_back(a);
        }
        py::array* a = &arrays[6 * q];
        const int64_t w = a[0].shape(1), m = a[2].shape(0);
        if (w < 1)  // (no column runs: the links' ids would not be written, though their count is returned)
            throw py::value_error(cat(labels[6 * q], " must have at least one column, got 0"));
        if (a[0].shape(0) != A.ncols)
            throw py::value_error(cat(labels[6 * q], " has ", a[0].shape(0), " rows, expected ", A.ncols,
                                      " (the columns the indices read)"));
        check_shape(a[1], labels[6 * q + 1].c_str(), {A.n, w});
        check_shape(a[3], labels[6 * q + 3].c_str(), {m, w});
        if (a[4].shape(0) < A.nnz || a[5].shape(0) < A.nnz || a[5].shape(1) != w)
            throw py::value_error(cat(labels[6 * q + 4], " and ", labels[6 * q + 5], " need room for every link (",
                                      A.nnz, " rows of ", w, " values), got ", shape_text(a[4].shape(), 1), " and ",
                                      shape_text(a[5].shape(), a[5].ndim())));
        const int64_t* ids = cptr<int64_t>(a[2]);
        for (int64_t k = 0; k < m; ++k)
            if (ids[k] < 0 || ids[k] >= A.nnz || (k > 0 && ids[k] <= ids[k - 1]))
                throw py::value_error(cat(labels[6 * q + 2], " must be increasing link ids in 0..", A.nnz - 1,
                                          ", got ", ids[k], " at ", k));
    }
    std::vector<std::pair<const py::array*, std::string>> all = {
        {&A.indptr, "indptr"}, {&A.indices, "indices"}, {&A.data, "data"}, {&arrived_keep, "arrived"}};
    for (size_t k = 0; k < arrays.size(); ++k) all.emplace_back(&arrays[k], labels[k]);
    for (size_t k = 4; k < all.size(); ++k) {
        const int role = static_cast<int>((k - 4) % 6);
        if (role != 1 && role != 4 && role != 5) continue;
        for (size_t m = 0; m < all.size(); ++m)
            if (m != k) check_no_overlap(*all[k].first, all[k].second.c_str(), *all[m].first, all[m].second.c_str());
    }
    if (!draw_obj.is_none())  // (arrived written too)
        for (size_t m = 0; m < all.size(); ++m)
            if (m != 3) check_no_overlap(arrived_keep, "arrived", *all[m].first, all[m].second.c_str());
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(A.n, A.nnz / 8192));
    std::vector<int64_t> work(static_cast<size_t>(parts * (count + 1)));
    int64_t total = 0;
    dispatch(A, [&](auto i, auto t) {
        using I = decltype(i);
        using T = decltype(t);
        std::vector<rowstoch::CompactLinkSums<T>> sums;
        for (py::ssize_t q = 0; q < count; ++q) {
            py::array* a = &arrays[6 * q];
            sums.push_back({cptr<T>(a[0]), a[0].shape(1), ptr<T>(a[1]), cptr<int64_t>(a[2]), a[2].shape(0),
                            cptr<T>(a[3]), ptr<int64_t>(a[4]), ptr<T>(a[5])});
        }
        const I *Ap = cptr<I>(A.indptr), *Aj = cptr<I>(A.indices);
        const T* Ax = cptr<T>(A.data);
        py::gil_scoped_release nogil;
        total = rowstoch::compact_running_sums(Ap, Aj, Ax, arrived, A.n, sums.data(), static_cast<int>(count), parts,
                                               work.data(), draw_obj.is_none() ? nullptr : &draws);
    });
    return total;
}

}  // namespace

void bind_mix_lossy(py::module_& m) {
    m.def("mix_lossy", &mix_lossy, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("X"),
          py::arg("out") = py::none(), py::arg("seed") = 0, py::arg("t") = 0, py::arg("r") = 0, py::arg("p") = 0.0,
          py::arg("renormalise") = true, py::arg("awake") = py::none(), py::arg("row_ids") = py::none(),
          py::arg("col_ids") = py::none(), py::arg("ncols") = -1, py::arg("bad") = py::none(),
          py::arg("check_indices") = true, py::arg("symmetric") = false, py::arg("stacked") = false,
          py::arg("messages") = py::none(),
          "One lossy gossip round (rowstoch_fast.network.Lossy): messages j -> i (j != i) lost when "
          "uniform_hash(seed, t, r, i, j) < p (p: one number, or one per node, the sender j's); row-stochastic receivers renormalise over what arrived; symmetric: "
          "the undirected rule (a link used when both its messages arrived and both ends are awake, an unused "
          "link's weight kept on x_i; bad's bit 1 gates the other message). stacked: X is [own rows; messages] "
          "(2 n rows; a self loop reads its own row i, the entry of column j the message n + j), the draws on the "
          "node ids the indices name (a round of compressed messages over losses). messages: the same round with X the "
          "own rows and `messages` the n messages, apart (no stacked block to copy X into).");
}

void bind_mix_delayed(py::module_& m) {
    m.def("mix_delayed", &mix_delayed, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("H"),
          py::arg("out"), py::arg("seed"), py::arg("t"), py::arg("r"), py::arg("max_delay"), py::arg("fixed"),
          py::arg("layout"), py::arg("row_ids") = py::none(), py::arg("col_ids") = py::none(),
          py::arg("loss_seed") = 0, py::arg("p") = 0.0, py::arg("renormalise") = true,
          py::arg("awake") = py::none(), py::arg("bad") = py::none(), py::arg("symmetric") = false,
          "out <- one delayed round of the CSR weights over the stacked block H = [own rows; the last max_delay + 1 "
          "iterations' messages] (layout as delay_ages takes it): each entry reads the newest message of its link "
          "that has arrived, its age drawn in the pass (rowstoch/network.hpp's csr_mix_delayed; the same sums as "
          "mix over delay_ages' index); with p > 0, awake or bad, the round's losses and sleep as mix_lossy draws "
          "them (on the senders' ids).");
}

void bind_running_sums(py::module_& m) {
    m.def("running_sums", &running_sums, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("arrived"), py::arg("blocks"), py::arg("check_indices") = true, py::arg("ncols") = -1,
          "One round of per-link running sums (robust push-sum; rowstoch/links.hpp) in one sweep over the links, for "
          "each quantity (X, out, pending, pending_out, held, held_out) of blocks: out_i <- sum_p arrived_p "
          "data_p X[indices_p] + sum_p arrived_p pending_p over row i's entries (the two sums added last), "
          "pending_out_p <- pending_p + data_p X[indices_p] where lost, 0 where arrived. held[p] == 0 declares row "
          "p of pending all zeros (not read); held_out is read the same way for pending_out and rewritten.");
    m.def("running_sums_compact", &running_sums_compact, py::arg("indptr"), py::arg("indices"), py::arg("data"),
          py::arg("arrived"), py::arg("blocks"), py::arg("check_indices") = true, py::arg("ncols") = -1,
          py::arg("draw") = py::none(),
          "running_sums with the undelivered mass held only by the links that hold any: for each quantity (X, out, "
          "ids, pending, ids_out, pending_out) of blocks, ids (increasing int64 link ids) and pending (one row each) "
          "the mass before the round; the lost links' ids and mass written to the first rows of ids_out / pending_out "
          "(room for every link). The same sums as running_sums. draw = (seed, t, r, p): the round's Bernoulli losses "
          "(lost_links' draws, a self loop always arriving) drawn in the sweep and written to arrived (an output "
          "then). Returns how many links hold mass now.");
}
