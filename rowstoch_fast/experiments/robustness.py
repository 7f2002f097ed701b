"""The algorithms under imperfect communication (neither in the paper): message loss, compressed messages."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _progress, topology
from .._checks import MAX_KEY, check_int, check_names, check_positive_float, fmt_value
from ..algorithms import labels
from ..objectives import NonconvexLogistic
from ._common import (DATA_SEED, _finish, _plt, _stop_if, check_evaluations_fit, check_log, error_bars, make_out_dir,
                      mark_failed, other_data, write_table, writes_before_sigterm)


@writes_before_sigterm
def reproduce_robustness(out_dir, rounds_budget=1000, repeats=10, losses=(0.0, 0.1, 0.3, 0.5), mg_rounds=5,
                         bursty=(0.9, 0.05, 0.2), algorithms=None, seed=0, progress=True, log=print, total=204800,
                         data_seed=DATA_SEED):
    """Message loss against the algorithms (issue 12): the directed exponential graph (n = 64) and the paper's
    ring (n = 16), the synthetic logistic problem, each algorithm at the learning rate tuned on the lossless
    network over the whole budget (a tenth of it ranked the rates by noise on the ring), then under Bernoulli
    loss ``p`` in ``losses`` and one bursty (Gilbert-Elliott) setting ``bursty = (p in the bad state, p_bad,
    p_recover)``, all with the same communication budget.

    Row-stochastic receivers renormalise over what arrived (their rows stay stochastic); a push-based
    sender's lost mass is lost. ``algorithms`` default: every registered one whose class is ``in_robustness``
    (read from the registry at the call, so a class registered after import is in). Returns the table (also ``robustness.csv``, and ``robustness.png``: the final
    gradient metric against the loss rate, one line per algorithm, the spread over ``repeats``). ``total``: the
    synthetic problem's samples over all the nodes of each graph (mini-batches of 200 a node; every record reads
    the full gradient over all of them); ``data_seed`` their draw (:data:`DATA_SEED`: the paper's instance).
    ``seed``: the runs' mini-batch streams (the losses are drawn on ``seed + 1``). Files of an earlier run in
    ``out_dir`` are replaced (``rowstoch reproduce`` refuses them without ``--overwrite``).
    """
    import pandas as pd

    from .. import compare as cmp
    from ..network import Lossy

    # (checked before anything runs or is written, helper 204: no algorithm had divided by zero after writing the
    # CSV, bursty (0.5, 0, 0) divided by zero, (0.5,) met an unpacking error, a small total named batch)
    names = list(labels(lambda cls: cls.in_robustness)) if algorithms is None else \
        check_names(algorithms, "algorithms")
    if not names:
        raise ValueError("algorithms must name at least one algorithm (None: every one in_robustness), got none")
    bursty = _checked_bursty(bursty)
    losses = _checked_losses(losses, bursty)
    check_log(log)
    _progress.check(progress)  # (used after the tuning)
    check_int(data_seed, "data_seed", minimum=0, maximum=MAX_KEY)
    for value, name in ((rounds_budget, "rounds_budget"), (repeats, "repeats"), (mg_rounds, "mg_rounds")):
        check_int(value, name, minimum=1)
    check_int(seed, "seed", minimum=0, maximum=MAX_KEY - 1)  # (the losses are drawn on seed + 1)
    if check_int(total, "total", minimum=1) < ROBUSTNESS_NODES * 200 or total % ROBUSTNESS_NODES:
        raise ValueError(f"total must be a multiple of {ROBUSTNESS_NODES} of at least {ROBUSTNESS_NODES * 200} (the "
                         f"samples of the {ROBUSTNESS_NODES}-node graph: a mini-batch of 200 on each node), got "
                         f"{total}")
    graphs = {"exponential (n = 64)": topology.exponential(ROBUSTNESS_NODES),
              "ring (n = 16)": topology.paper_graphs()["ring"]}
    settings = [(f"p = {p:g}", p, None) for p in losses]
    if bursty is not None:
        p_bad_state, p_bad, p_recover = bursty
        settings.append((f"bursty (p_bad = {p_bad:g}, p_recover = {p_recover:g})",
                         p_bad_state * p_bad / (p_bad + p_recover), bursty))

    def network(A, rate, spec):
        if spec is None:
            return A if rate == 0 else Lossy(A, rate, seed=seed + 1)
        return Lossy(A, spec[0], seed=seed + 1, model="gilbert-elliott", p_bad=spec[1], p_recover=spec[2])

    problems = {gname: (A, NonconvexLogistic.synthetic(A.n, total=total, batch=200, seed=data_seed))
                for gname, A in graphs.items()}
    check_evaluations_fit([(network(A, rate, spec), f, names) for A, f in problems.values()
                           for _, rate, spec in settings], rounds_budget, repeats, mg_rounds=mg_rounds, points=10,
                          metric="grad_norm")
    make_out_dir(out_dir)
    rows, interrupted, error = [], False, None
    instance = " (the paper's instance)" if data_seed == DATA_SEED else ""
    log(f"the synthetic problem's data seed {data_seed}{instance}, seed {seed}")
    try:
        for gname, (A, f) in problems.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the grid's too-large rates diverge: expected
                tuned = cmp.compare(A, f, names, rounds_budget, tune=True, repeats=1, seed=seed, mg_rounds=mg_rounds,
                                    progress=False, points=4, metric="grad_norm")
            if tuned.attrs["interrupted"]:  # Ctrl-C: write what finished, then stop
                interrupted = True
                break
            rates = tuned.attrs["lr"]
            log(f"{gname}: learning rates tuned without loss: "
                + ", ".join(f"{k} {v:g}" for k, v in rates.items()))
            for label, rate, spec in settings:
                net = network(A, rate, spec)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # losses can make a tuned rate diverge: recorded
                    frame = cmp.compare(net, f, names, rounds_budget, lr=rates, repeats=repeats, seed=seed,
                                        mg_rounds=mg_rounds, progress=progress, points=10, metric="grad_norm")
                if frame.attrs["interrupted"]:
                    interrupted = True
                    break
                for name in names:
                    part = frame[frame["algorithm"] == name]
                    last = part.sort_values("iteration", kind="stable").groupby("rep").tail(1)  # (each repetition's:
                    # one that diverged alone stopped before the others)
                    status = frame.attrs["status"].get(name, "?")
                    rows.append({"graph": gname, "setting": label, "loss_rate": rate, "algorithm": name,
                                 "lr": rates[name], "grad_norm": float(last["grad_norm"].mean()),
                                 "grad_norm_std": float(last["grad_norm"].std(ddof=1)),
                                 "grad_norm_min": float(last["grad_norm"].min()),
                                 "grad_norm_max": float(last["grad_norm"].max()), "status": status,
                                 "seed": seed, "data_seed": data_seed})
                log(f"  {label:<40}" + "  ".join(f"{r['algorithm']} {r['grad_norm']:.2e}{_mark(r)}"
                                                for r in rows[-len(names):]))
            if interrupted:
                break
    except Exception as exc:  # noqa: BLE001 - write the settings that finished, then re-raise (_stop_if)
        error = exc
    table = pd.DataFrame(rows, columns=["graph", "setting", "loss_rate", "algorithm", "lr", "grad_norm",
                                        "grad_norm_std", "grad_norm_min", "grad_norm_max", "status", "seed",
                                        "data_seed"])
    table = table.astype({"loss_rate": float, "lr": float, "grad_norm": float, "grad_norm_std": float,
                          "grad_norm_min": float, "grad_norm_max": float})
    write_table(table, out_dir, "robustness.csv", log)
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(1, len(graphs), figsize=(5.5 * len(graphs), 4), squeeze=False)
        for ax, gname in zip(axes[0], graphs):
            part = table[table["graph"] == gname]
            for k, name in enumerate(names):
                mine = part[part["algorithm"] == name]
                plain = mine[mine["setting"].str.startswith("p =")]
                line = ax.errorbar(plain["loss_rate"], plain["grad_norm"], marker="o", capsize=3, label=name,
                                   yerr=error_bars(plain["grad_norm"], plain["grad_norm_std"],
                                                   plain["grad_norm_min"], plain["grad_norm_max"]))
                burst = mine[~mine["setting"].str.startswith("p =")]
                ax.plot(burst["loss_rate"], burst["grad_norm"], marker="*", markersize=12, linestyle="none",
                        color=line[0].get_color())
                mark_failed(ax, mine["loss_rate"], mine["grad_norm"], mine["status"])
            ax.set_yscale("log")
            ax.set_xlabel("message loss rate (star: bursty losses, same mean rate)")
            ax.set_title(f"{gname}, {rounds_budget} communication rounds"
                         + other_data(data_seed), fontsize=9)
        axes[0, 0].set_ylabel("final ||(1/n) sum_i grad f_i(x_i)||")
        _finish(plt, fig, axes, out_dir, "robustness.png", log)
    _stop_if(interrupted, log, f"{len(rows) // len(names)} of {len(graphs) * len(settings)} settings", error)
    return table


#: The nodes of :func:`reproduce_robustness`'s larger graph (the ring's 16 divide them): its ``total`` is a
#: multiple of them, 200 samples a node at least.
ROBUSTNESS_NODES = 64


def _checked_losses(losses, bursty):
    """:func:`reproduce_robustness`'s ``losses``: Bernoulli loss rates in [0, 1) as a tuple of floats, at least one
    setting with ``bursty``; else an error naming ``losses`` (a rate of 1 had been refused as Lossy's "p must be
    ..." only after the first graph's tuning, minutes at the defaults, helper 218)."""
    if isinstance(losses, (str, bytes)) or not hasattr(losses, "__iter__"):
        raise TypeError(f"losses must be a sequence of loss rates in [0, 1), got {type(losses).__name__} "
                        f"{fmt_value(losses):.60}")
    losses = tuple(check_positive_float(p, f"losses[{k}]", allow_zero=True) for k, p in enumerate(losses))
    for k, p in enumerate(losses):
        if p >= 1:
            raise ValueError(f"losses[{k}] must be a message loss rate in [0, 1) (1 loses every message), got {p!r}")
    if not losses and bursty is None:
        raise ValueError("losses and bursty give no setting to run: give at least one loss rate (0.0: no loss)")
    return losses


def _checked_bursty(bursty):
    """:func:`reproduce_robustness`'s ``bursty``: None, or three probabilities (the loss in the bad state in
    [0, 1], ``p_bad`` and ``p_recover`` in (0, 1]) as a tuple of floats; else an error naming it."""
    if bursty is None:
        return None
    if isinstance(bursty, (str, bytes)) or not hasattr(bursty, "__len__") or len(bursty) != 3:
        raise ValueError(f"bursty must be None or (p in the bad state, p_bad, p_recover), three probabilities, got "
                         f"{fmt_value(bursty):.80}")
    p = check_positive_float(bursty[0], "bursty[0] (the loss in the bad state)", allow_zero=True)
    p_bad, p_recover = (check_positive_float(v, f"bursty[{k}] ({name})")
                        for k, v, name in ((1, bursty[1], "p_bad"), (2, bursty[2], "p_recover")))
    if max(p, p_bad, p_recover) > 1:
        raise ValueError(f"bursty's three numbers must be probabilities (<= 1), got {(p, p_bad, p_recover)}")
    return p, p_bad, p_recover


#: What ``rowstoch reproduce communication`` runs: methods with and without error feedback or reference points
#: (CHOCO-SGD, Compressed Push-Pull), gradient tracking, Pull-Diag.
COMMUNICATION_ALGORITHMS = ("dgd", "choco-sgd", "diging", "push-pull", "compressed-push-pull", "pull-diag-gt")
#: Two point labels of one text closer than this (decades of x, decades of y) in a panel of
#: :func:`reproduce_communication`'s figure are drawn once.
LABEL_NEAR = (0.05, 0.7)


def _mark(row):
    """`` (x)`` after the final value of a run that did not end ok in a reproduction's printed table (its figure marks
    them with an x; the printed table said nothing: helper 189's DGD at 2-bit QSGD, 23.5); else ``""``."""
    return "" if row.get("status") == "ok" else f" (x: {row.get('status')})"


@writes_before_sigterm
def reproduce_communication(out_dir, rounds_budget=1000, repeats=3, d=32, n=32, algorithms=COMMUNICATION_ALGORITHMS,
                            delays=(1, 2, 4, 8), seed=0, progress=True, log=print):
    """Compressed messages against the algorithms (issue 37): the undirected exponential graph on ``n`` nodes
    (Metropolis weights: every method runs on it), least squares in ``d`` dimensions, each algorithm at the
    learning rate tuned without compression, then under QSGD (8, 4 and 2 bits, unbiased) and top-k
    (``k = d / 4, d / 16``) and delayed messages (delays uniform up to ``delays``) with the same number of
    communication rounds. Returns the table (also ``communication.csv``, and ``communication.png``: the final
    suboptimality against the bytes sent, one line per algorithm through its compression levels, one panel per
    compressor, and against the delay bound in a third: under delays CHOCO-SGD's copies and Compressed
    Push-Pull's mixtures follow the newest message that has arrived). ``algorithms``: names, as
    :func:`~rowstoch_fast.compare.compare` takes them (a list, or one comma-separated string). Files of an earlier
    run in ``out_dir`` are replaced (``rowstoch reproduce`` refuses them without ``--overwrite``)."""
    import pandas as pd

    from .. import compare as cmp
    from ..algorithms import REGISTRY, method_of
    from ..compare.plan import parse_algorithms
    from ..network import Compressed, Delayed
    from ..objectives import LeastSquares

    check_log(log)  # (checked before anything is written, helper 218)
    _progress.check(progress)  # (used after the tuning)
    check_int(seed, "seed", minimum=0, maximum=MAX_KEY - 7)  # (the data are drawn on seed + 7)
    W = topology.exponential(n, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(n, d=d, seed=seed + 7)
    metric = cmp.default_metric(f)
    names = [label for label, _, _ in parse_algorithms(algorithms, W)]  # (compare's reading: "dsgd" had been read
    # letter by letter, helper 218)
    settings = [("none", "none", W)]
    settings += [(f"qsgd {b} bits", "qsgd", Compressed(W, "qsgd", bits=b, seed=seed + 1)) for b in (8, 4, 2)]
    settings += [(f"top-{k}", "topk", Compressed(W, "topk", k=k)) for k in (max(1, d // 4), max(1, d // 16))]
    settings += [(f"delay <= {D}", "delay", Delayed(W, D, seed=seed + 2)) for D in delays]

    def running_on(net):  # (labels: an mg- label's method is its name's, a KeyError had said it, helper 239)
        return [name for name in names if REGISTRY[method_of(name)].applies_to(net)]

    check_evaluations_fit([(net, f, running_on(net)) for _, _, net in settings], rounds_budget, repeats, points=10,
                          metric=metric)
    make_out_dir(out_dir)
    rows, interrupted, error = [], False, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the grid's too-large rates diverge: expected
            tuned = cmp.compare(W, f, names, rounds_budget, tune=True, repeats=1, seed=seed, progress=False, points=4,
                                metric=metric)
        interrupted = tuned.attrs["interrupted"]
        rates = tuned.attrs["lr"]
        if not interrupted:
            log("learning rates tuned without compression: " + ", ".join(f"{k} {v:g}" for k, v in rates.items()))
        for label, kind, net in [] if interrupted else settings:
            running = running_on(net)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # compression can make a tuned rate diverge
                frame = cmp.compare(net, f, running, rounds_budget, lr={k: rates[k] for k in running},
                                    repeats=repeats, seed=seed, progress=progress, points=10, metric=metric)
            if frame.attrs["interrupted"]:
                interrupted = True
                break
            for name in running:
                part = frame[frame["algorithm"] == name]
                last = part[part["iteration"] == part["iteration"].max()]
                rows.append({"setting": label, "compressor": kind, "algorithm": name, "lr": rates[name],
                             "bytes": float(last["bytes"].mean()), metric: float(last[metric].mean()),
                             f"{metric}_std": float(last[metric].std(ddof=1)),
                             "status": frame.attrs["status"].get(name, "?")})
            log(f"  {label:<14}" + "  ".join(f"{r['algorithm']} {r[metric]:.2e}{_mark(r)}"
                                             for r in rows[-len(running):]))
    except Exception as exc:  # noqa: BLE001 - write the settings that finished, then re-raise (_stop_if)
        error = exc
    table = pd.DataFrame(rows, columns=["setting", "compressor", "algorithm", "lr", "bytes", metric, f"{metric}_std",
                                        "status"]).astype({"lr": float, "bytes": float, metric: float,
                                                           f"{metric}_std": float})
    write_table(table, out_dir, "communication.csv", log)
    plt = _plt()
    if plt is not None and len(table):  # (interrupted while tuning: nothing to draw)
        panels = {"qsgd": "QSGD (8, 4, 2 bits)", "topk": f"top-k (k = {max(1, d // 4)}, {max(1, d // 16)})"}
        fig, axes = plt.subplots(1, len(panels) + 1, figsize=(5.2 * (len(panels) + 1), 4), squeeze=False)
        ax = axes[0, -1]  # the delays: against the bound
        colors = {name: f"C{k}" for k, name in enumerate(names)}  # (the same in every panel)
        for name in names:
            mine = table[(table["algorithm"] == name) & table["compressor"].isin(["none", "delay"])]
            bound = [0 if s == "none" else int(s.split("<= ")[1]) for s in mine["setting"]]
            if len(mine) > 1:
                ax.plot(bound, np.maximum(mine[metric], 1e-16), marker="o", label=name, color=colors[name])
                mark_failed(ax, bound, np.maximum(mine[metric], 1e-16), mine["status"])
        ax.set_yscale("log")
        ax.set_xlabel("max_delay (iterations; each message's delay uniform up to it)")
        ax.set_title(f"delayed messages, n = {n}, d = {d}", fontsize=9)
        for ax, (kind, title) in zip(axes[0], panels.items()):
            placed = []  # (text, log10 x, log10 y) of the labels drawn in this panel
            for name in names:
                mine = table[(table["algorithm"] == name) & table["compressor"].isin(["none", kind])]
                mine = mine[np.isfinite(mine[metric])]
                y = np.maximum(mine[metric], 1e-16)  # (exact to the last bit: drawn at the floor)
                ax.plot(mine["bytes"], y, marker="o", label=name, color=colors[name])
                mark_failed(ax, mine["bytes"], y, mine["status"])
                for (_, row), value in zip(mine.iterrows(), y):
                    text, at = row["setting"].replace(" bits", "b"), (math.log10(row["bytes"]), math.log10(value))
                    if any(t == text and abs(at[0] - px) < LABEL_NEAR[0] and abs(at[1] - py) < LABEL_NEAR[1]
                           for t, px, py in placed):  # (several methods' points at one setting: one label, not
                        # "qsgd 2b" written over itself, helper 246)
                        continue
                    placed.append((text, *at))
                    ax.annotate(text, (row["bytes"], value), fontsize=6, xytext=(3, 3), textcoords="offset points",
                                color=colors[name])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
            ax.set_xlabel(f"bytes sent in {rounds_budget} communication rounds")
            ax.set_title(f"{title}, n = {n}, d = {d}", fontsize=9)
        axes[0, 0].set_ylabel(f"final {metric}")
        _finish(plt, fig, axes, out_dir, "communication.png", log)
    _stop_if(interrupted, log, f"{len(rows) // max(len(names), 1)} of {len(settings)} settings", error)
    return table
