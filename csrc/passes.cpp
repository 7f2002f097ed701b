// The lossy and delayed gossip passes' entry points (rowstoch/network.hpp's csr_mix_lossy* and csr_mix_delayed):
// their instantiations, one for every combination of a pass's flags, index and value types, are about half of
// _core's compiled code (bench/RESULTS.md 43a), so they are compiled in this file of their own, beside
// bindings.cpp (setup.py compiles the two in parallel). Same checks, same order as every other entry point.
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
