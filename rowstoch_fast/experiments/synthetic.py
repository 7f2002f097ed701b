"""The paper's synthetic experiments: Figure 1 (Pull-Diag), Figure 2 (linear speedup), multi-gossip, the demo."""

from __future__ import annotations

import math
import os

import numpy as np

from .. import topology
from .. import _progress
from .._checks import check_choice, check_int, check_names, make_rng
from ..errors import DivergenceError
from ..metrics import metrics_table
from ..objectives import NonconvexLogistic
from ..protocol import a_protocol, pull_diag
from ..runner import Algorithm, run
from ._common import (COMPARE_RULE, DATA_SEED, FINAL_WINDOW, SLOPE_TOLERANCE, _plt, _save, _stop_if,
                      _stopped, _write_verdict, check_log, compare_windows, make_out_dir, other_data, window_by_repeat,
                      window_means, window_stats, write_histories, write_table, writes_before_sigterm)

#: Learning rates of the paper's linear-speedup figure on exponential graphs (shared/paper_graphs.md).
LINEAR_SPEEDUP_LR = {1: 5e-2, 2: 2.6e-2, 8: 6.4e-3, 16: 3e-3, 128: 4e-4, 512: 1e-4}
#: Learning rates of the paper's multi-gossip figures (Appendix E, "Learning Rates"), by graph and R.
MULTI_GOSSIP_LR = {
    "ring": {1: 0.005, 5: 0.01, 10: 0.02},
    "grid": {1: 0.02, 5: 0.03, 10: 0.03},
    "geometric": {1: 0.02, 5: 0.02, 10: 0.03},
    "nearest_neighbor": {1: 0.02, 5: 0.02, 10: 0.02},
}


#: Pull-Diag "reaches the average" where its error fell below this fraction of its start.
REACHED = 1e-2
PULL_DIAG_RULE = (f"'holds' where Pull-Diag's error after the run is below {REACHED:g} of its start (it reaches the "
                  "average) and the A-protocol's is at least half its bias ||1 (pi^T Z - mean)|| (it goes to the "
                  "pi-weighted average instead); 'no bias to correct' where kappa = 1 (pi uniform); one draw of Z: "
                  "both protocols are deterministic, Z sets only the bias's size")


#: Figure 1's two panels (its caption: "fixed kappa_A with different beta_A", "fixed beta_A with different
#: kappa_A"), on matrices made to have them: ``A = beta I + (1 - beta) 1 pi^T`` is row-stochastic with Perron vector
#: ``pi``, and ``A - 1 pi^T = beta (I - 1 pi^T)``, a pi-orthogonal projection times beta, so its generalized spectral
#: gap is ``1 - beta`` exactly and its skewness ``kappa = max pi / min pi`` (pi geometric over the 16 nodes).
PANELS = {"fixed kappa": {"kappa": (2.0,), "beta": (0.5, 0.7, 0.9)},
          "fixed beta": {"kappa": (1.5, 5.0, 50.0), "beta": (0.8,)}}
PANEL_RULE = ("'holds' where Pull-Diag's error at k = T/5 and at k = T/2 grows along the panel's family (larger "
              "beta at fixed kappa, larger kappa at fixed beta: each at least the one before; errors below 1e-12 of "
              "the start are at rounding and count as equal); the error is the root-mean-square over Gaussian "
              "values z ~ N(0, I), exactly (the Frobenius norm of the error's matrix, the run from Z = I): no one "
              "draw decides")


def panel_matrix(beta, kappa, n=16):
    """``beta I + (1 - beta) 1 pi^T`` with ``pi`` geometric from 1 to ``kappa`` (normalized): generalized spectral
    gap ``1 - beta`` and equilibrium skewness ``kappa``, exactly (:data:`PANELS`)."""
    pi = np.geomspace(1.0, kappa, n)
    pi /= pi.sum()
    from ..mixing import MixingMatrix

    return MixingMatrix(beta * np.eye(n) + (1.0 - beta) * np.outer(np.ones(n), pi))


def _panel_rows(iterations, log, n=16, curves=None):
    """The verdict rows of Figure 1's two panels (:data:`PANELS`, :data:`PANEL_RULE`). Each family is judged on
    the expected error over Gaussian values: Pull-Diag is linear, ``z_k - 1 1^T z / n = M_k z``, so the run from
    ``Z = I`` has error ``||M_k||_F``, the root-mean-square of ``||M_k z||`` over ``z ~ N(0, I)``; one draw of
    ``z`` decided the fixed-beta panel against the claim on 10 of 200 draws. ``curves`` (a dict), when given,
    receives each panel's runs, ``[(beta, kappa, errors)]``, for the figure."""
    rows, at = [], (max(1, iterations // 5), max(1, iterations // 2))
    Z = np.eye(n)
    for panel, family in PANELS.items():
        runs = [(b, k, pull_diag(panel_matrix(b, k, n), Z, iterations).errors) for k in family["kappa"]
                for b in family["beta"]]
        if curves is not None:
            curves[panel] = runs
        floor = 1e-12 * float(runs[0][2][0])
        grows = all(max(later[2][t], floor) >= max(earlier[2][t], floor) for t in at
                    for earlier, later in zip(runs, runs[1:]))
        varied = "beta" if panel == "fixed kappa" else "kappa"
        log(f"{panel}: " + "; ".join(f"{varied} {b if varied == 'beta' else k:g}: error {e[at[0]]:.2e} at k = "
                                     f"{at[0]}, {e[at[1]]:.2e} at k = {at[1]}" for b, k, e in runs))
        rows.append({"claim": f"{panel} ({'kappa' if varied == 'beta' else 'beta'} = "
                              f"{family['kappa' if varied == 'beta' else 'beta'][0]:g}): the larger {varied}, the "
                              "slower Pull-Diag reaches the average", "graph": panel,
                     **{f"error_k{t}_{varied}_{v:g}": float(e[t]) for t in at
                        for v, e in ((b if varied == "beta" else k, e) for b, k, e in runs)},
                     "rule": PANEL_RULE, "verdict": "holds" if grows else "does not hold"})
    return rows


@writes_before_sigterm
def reproduce_pull_diag(out_dir, iterations=100, d=4, seed=0, log=print):
    """Figure 1: consensus error of Pull-Diag (and the A-protocol) on the paper's 16-node graphs, and its two
    panels' claims on matrices made to have a given ``beta`` and ``kappa`` (:data:`PANELS`).

    ``iterations`` (>= 1) steps of each protocol from values of dimension ``d`` (>= 1) drawn on ``seed``; files
    of an earlier run in ``out_dir`` are replaced (``rowstoch reproduce`` refuses them without ``--overwrite``).
    Returns a dict ``graph -> (beta, kappa, final Pull-Diag error, final A-protocol error)``.
    """
    # (checked before anything is written, helper 218: iterations=0 had met an IndexError, seed=-1 NumPy's words,
    # d=0 drawn zeros and an empty figure, log=None "'NoneType' object is not callable")
    iterations = check_int(iterations, "iterations", minimum=1)
    d = check_int(d, "d", minimum=1)
    rng = make_rng(seed)
    check_log(log)
    make_out_dir(out_dir)
    graphs = {"exponential": topology.exponential(16), **topology.paper_graphs()}
    Z = rng.standard_normal((16, d))
    curves, table = {}, {}
    biases, starts = {}, {}
    for name, A in graphs.items():
        m = A.metrics()
        pd_ = pull_diag(A, Z, iterations)
        ap = a_protocol(A, Z, iterations)
        curves[name] = (pd_.errors, ap.errors)
        table[name] = (m.beta, m.kappa, float(pd_.errors[-1]), float(ap.errors[-1]))
        # the A-protocol's limit is every node at pi^T Z: its error there, ||1 (pi^T Z - mean)||
        biases[name] = float(np.sqrt(A.n) * np.linalg.norm(np.asarray(A.pi) @ Z - Z.mean(axis=0)))
        starts[name] = float(pd_.errors[0])
    import pandas as pd

    frame = pd.DataFrame({"k": np.arange(iterations + 1)})
    for name, (e1, e2) in curves.items():
        frame[f"pull_diag/{name}"] = e1
        frame[f"a_protocol/{name}"] = e2
    write_table(frame, out_dir, "pull_diag.csv", log)
    log(f"Pull-Diag vs A-protocol, consensus error ||z_k - mean|| after {iterations} steps (16 nodes, d={d}):")
    log(f"{'graph':<18}{'beta':>8}{'kappa':>8}{'Pull-Diag':>12}{'A-protocol':>12}")
    for name, (b, k, e1, e2) in table.items():
        log(f"{name:<18}{b:>8.3f}{k:>8.3f}{e1:>12.2e}{e2:>12.2e}")
    panels = {}
    rows = [
        {"claim": f"{name}: Pull-Diag reaches the average where the A-protocol stays biased", "graph": name,
         "kappa": k, "start_error": starts[name], "pull_diag_error": e1, "a_protocol_error": e2,
         "a_protocol_bias": biases[name], "rule": PULL_DIAG_RULE,
         "verdict": ("no bias to correct (kappa = 1)" if k < 1 + 1e-9 else
                     "holds" if e1 < REACHED * starts[name] and e2 >= 0.5 * biases[name] else "does not hold")}
        for name, (b, k, e1, e2) in table.items()] + _panel_rows(iterations, log, curves=panels)
    _write_verdict(out_dir, "pull_diag", rows, log)
    plt = _plt()
    if plt is not None:  # the paper's graphs, then Figure 1's two panels (fixed kappa, fixed beta)
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
        ax = axes[0]
        for name, (e1, _) in curves.items():
            b, k = table[name][:2]
            ax.semilogy(e1, label=f"{name} (beta={b:.3f}, kappa={k:.2f})")
        ax.semilogy(curves["grid"][1], "k--", label="A-protocol, grid (biased)")
        ax.set_ylabel("||z_k - 1 1^T z / n||")
        ax.set_title("the paper's 16-node graphs", fontsize=9)
        for ax, (panel, runs) in zip(axes[1:], panels.items()):
            varied = "beta" if panel == "fixed kappa" else "kappa"
            for b, k, errors in runs:
                ax.semilogy(errors / errors[0], label=f"{varied} = {b if varied == 'beta' else k:g}")
            ax.set_ylabel("||z_k - mean||, RMS over z ~ N(0, I), / start")
            kept = f"kappa = {runs[0][1]:g}" if varied == "beta" else f"beta = {runs[0][0]:g}"
            verdict = next(r["verdict"] for r in rows if r["graph"] == panel)
            ax.set_title(f"Figure 1, {panel} ({kept}): the claim {verdict}", fontsize=9)
        for ax in axes:
            ax.set_xlabel("k")
            ax.legend(fontsize=7)
        fig.suptitle("Pull-Diag protocol (Figure 1)")
        fig.tight_layout()
        log(f"wrote {_save(fig, out_dir, 'pull_diag.png')}")
        plt.close(fig)
    return table


#: Figure 2's two halves and their sizes (Section 6.1): directed exponential graphs and the paper's directed ring.
LINEAR_SPEEDUP_SIZES = {"exponential": (1, 2, 8, 16, 128, 512), "ring": (1, 5, 10, 16)}
#: The rates the paper prints for Figure 2 (Appendix E, "Learning Rates"): ``n * alpha_n`` per graph.
PAPER_RATE_CONSTANT = {"exponential": 0.512, "ring": 0.002}
#: This command's rate on the ring, ``n * alpha_n`` (the exponential table's, whose ``n * alpha_n`` lies in
#: 0.048-0.0512: Pull-Diag-GT's step acts like ``n * alpha`` on the average, so equal ``n * alpha`` is equal speed).
RING_RATE_CONSTANT = 0.05
#: Iterations of each half by default, enough for every size to leave its transient at this command's rates
#: (bench/RESULTS.md section 21): on exponential graphs the 512-node run is still falling after the paper's 4,000
#: (40% over its last fifth) and settles at about 3,300 of 8,000; on the ring the 16-node run settles at about
#: 6,200.
LINEAR_SPEEDUP_ITERATIONS = {"exponential": 8000, "ring": 20000}
#: Rates of :func:`reproduce_linear_speedup`: this command's (the research code's on exponential graphs) or the
#: paper's printed ones.
RATES = ("default", "paper")
def linear_speedup_rate(graph, n, rates="default"):
    """The learning rate of Figure 2 on ``graph`` (``"exponential"`` or ``"ring"``) of ``n`` nodes.

    ``rates="paper"``: the paper's printed rule (``n * alpha = 0.512`` on exponential graphs, ``0.002`` on rings);
    ``"default"``: the research code's table on exponential graphs (:data:`LINEAR_SPEEDUP_LR`, ``0.0512 / n`` for
    other sizes) and ``n * alpha = 0.05`` on rings.
    """
    check_choice(graph, "graph", tuple(LINEAR_SPEEDUP_SIZES))
    check_choice(rates, "rates", tuple(RATES))
    n = check_int(n, "n", minimum=1)  # (0 had divided by zero, -1 given a negative rate)
    if rates == "paper":
        return PAPER_RATE_CONSTANT[graph] / n
    if graph == "exponential":
        return LINEAR_SPEEDUP_LR.get(n, 0.0512 / n)
    return RING_RATE_CONSTANT / n


#: Where the window a run's final window is checked against ends (a fraction of the run): the tenth of records
#: before the one before last. A run still falling like 1/k drops about 20% between the two.
EARLIER_WINDOW_END = 0.8
#: A run is still falling when its repeats' mean fall between the two windows exceeds this one-sided quantile of
#: Student's t (with repeats - 1 degrees of freedom) times its standard error: 3 standard errors for many repeats,
#: more for few (at 3 repeats 19, so that a settled run is not called falling by its noise).
TRANSIENT_QUANTILE = 0.99865


def _still_falling(frame, metric="grad_norm"):
    """Whether a run is still in its transient, and by how much it fell: each repeat's final window (the last tenth
    of its records) against its own earlier window (the tenth ending at :data:`EARLIER_WINDOW_END`), paired by
    repeat (repeats at different levels do not hide a fall they share; a repeat missing from either window is
    left out). Falling when the mean fall ``1 - final / earlier`` exceeds its standard error times Student's t at
    :data:`TRANSIENT_QUANTILE`. Returns ``(falling, fall)``; ``falling`` is None where it cannot be told (one
    repeat: its own noise is no measure of another seed's; a NaN, or a window at 0)."""
    final = window_by_repeat(frame, metric)[0]
    earlier = window_by_repeat(frame, metric, end=EARLIER_WINDOW_END)[0]
    both = final.index.intersection(earlier.index)
    with np.errstate(divide="ignore", invalid="ignore"):
        falls = (1 - final[both] / earlier[both]).to_numpy(float)
    fall = float(np.mean(falls)) if falls.size else math.nan
    if falls.size < 2 or not np.all(np.isfinite(falls)):
        return None, fall
    from scipy.stats import t

    error = float(np.std(falls, ddof=1) / np.sqrt(falls.size))
    return bool(fall > t.ppf(TRANSIENT_QUANTILE, falls.size - 1) * error), fall


def _slope_interval(per_repeat, draws=2000, seed=0):
    """A 95% bootstrap interval of the fitted slope of log(final) against log(n): the repeats' window means of each
    size (``per_repeat``: n -> array) resampled with replacement, the sizes' means refitted. NaN with one repeat."""
    ns = np.log(np.array(list(per_repeat), dtype=float))
    if min(len(v) for v in per_repeat.values()) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    fits = np.empty(draws)
    for b in range(draws):
        finals = [rng.choice(v, v.size).mean() for v in per_repeat.values()]
        fits[b] = np.polyfit(ns, np.log(finals), 1)[0]
    low, high = np.percentile(fits, [2.5, 97.5])
    # a percentile bootstrap under-covers with few repeats (81-88% at 3): widened by Student's t against the normal
    # quantile and the bootstrap's 1/m variance against 1/(m - 1)
    from scipy.stats import t

    m = min(len(v) for v in per_repeat.values())
    widen = float(t.ppf(0.975, m - 1) / 1.959964 * np.sqrt(m / (m - 1)))
    centre = float(np.polyfit(ns, np.log([v.mean() for v in per_repeat.values()]), 1)[0])
    return centre - widen * (centre - float(low)), centre + widen * (float(high) - centre)


def _settled_at(curve, final):
    """The first iteration from which the mean curve stays within 1.5x its final level (the transient's length)."""
    above = curve[curve > 1.5 * final]
    if len(above) == 0:
        return int(curve.index.min())
    later = curve.index[curve.index > above.index.max()]
    return int(later.min()) if len(later) else int(curve.index.max())


@writes_before_sigterm
def reproduce_linear_speedup(out_dir, iterations=None, repeats=20, graphs=("exponential", "ring"), sizes=None,
                             rates="default", total=204800, batch=200, seed=0, data_seed=DATA_SEED, progress=True,
                             log=print):
    """Figure 2: Pull-Diag-GT on growing networks, both halves: directed exponential graphs (1 - 512 nodes) and
    the paper's directed ring (1, 5, 10, 16 nodes), the paper's synthetic problem.

    The claim, per graph: after the same number of iterations the final gradient norm falls like ``n^(-1/2)``,
    decided by :data:`LINEAR_SPEEDUP_RULE`: each size's final is the mean over repeats of each repeat's mean over
    the last tenth of its records; the slope of ``log(final)`` against ``log(n)`` has a bootstrap interval over
    repeats, which must lie within :data:`SLOPE_TOLERANCE` of -1/2; a size still in its transient (its repeats
    still falling from the tenth of records at 70-80% of the run to the last, beyond 3 standard errors) makes the
    verdict "not decided: transient not left after K iterations", with how far each such size still fell. The CSV
    gives each size's final, its spread and the iteration it settled at.

    Parameters
    ----------
    iterations : int, optional
        Iterations of every run; default per graph :data:`LINEAR_SPEEDUP_ITERATIONS` (8,000 on exponential
        graphs, twice the paper's 4,000, which leave the 512-node run in its transient at this command's rates;
        20,000 on the ring, whose 16-node run settles at about 6,200).
    graphs : sequence of {"exponential", "ring"}
        The halves to run.
    sizes : sequence of int or dict, optional
        Network sizes, for every graph or per graph (``{"ring": (1, 5)}``); default
        :data:`LINEAR_SPEEDUP_SIZES`.
    rates : {"default", "paper"}
        See :func:`linear_speedup_rate`. At the paper's printed ring rate the runs are still in their transient
        after 40,000 iterations (bench/RESULTS.md section 21).
    seed, data_seed : int
        The runs' mini-batch streams, and the draw of the synthetic data (:data:`DATA_SEED`: the paper's
        instance; another draws another instance of the same problem).

    Returns
    -------
    (dict, dict)
        ``finals[graph][n]`` (``inf`` where the run diverged) and ``slopes[graph]``.

    Notes
    -----
    Files of an earlier run in ``out_dir`` are replaced (``rowstoch reproduce`` refuses them without
    ``--overwrite``).
    """
    graphs = _checked_graphs(graphs)
    check_choice(rates, "rates", tuple(RATES))
    check_log(log)
    _progress.check(progress)
    if isinstance(sizes, dict) and set(sizes) - set(LINEAR_SPEEDUP_SIZES):
        raise ValueError(f"sizes: unknown graph {sorted(set(sizes) - set(LINEAR_SPEEDUP_SIZES))[0]!r} (the halves "
                         f"are {', '.join(LINEAR_SPEEDUP_SIZES)})")
    plan = {g: _checked_sizes(sizes.get(g, LINEAR_SPEEDUP_SIZES[g]) if isinstance(sizes, dict)
                              else LINEAR_SPEEDUP_SIZES[g] if sizes is None else sizes, g) for g in graphs}
    built = {(g, n): topology.exponential(n) if g == "exponential" else topology.paper_ring(n)  # bad sizes: refused
             for g in graphs for n in plan[g]}  # before anything runs
    make_out_dir(out_dir)
    histories, finals, spreads, info, per_repeat = {}, {g: {} for g in graphs}, {}, {}, {}
    interrupted, error = False, None
    total_runs = sum(len(v) for v in plan.values())
    try:
        for g in graphs:
            T = iterations or LINEAR_SPEEDUP_ITERATIONS[g]
            for n in plan[g]:
                lr = linear_speedup_rate(g, n, rates)
                A = built[(g, n)]
                f = NonconvexLogistic.synthetic(n, total=total, batch=batch, seed=data_seed)
                try:
                    h = run(Algorithm(A, lr), f, T, record_every=max(1, T // 100), repeats=repeats, seed=seed,
                            progress=progress)
                except DivergenceError as exc:  # one size diverging does not end the figure
                    finals[g][n] = math.inf
                    log(f"{g}, n = {n:>4}: lr = {lr:g}, diverged at iteration {exc.iteration}")
                    continue
                if h.interrupted:  # Ctrl-C: write what finished, then stop
                    interrupted = True
                    break
                finals[g][n], spreads[(g, n)], start, _ = window_stats(h.frame, "grad_norm")
                per_repeat[(g, n)] = window_means(h.frame, "grad_norm")[0]
                curve = h.summary().set_index("iteration")["grad_norm"]
                falling, fall = _still_falling(h.frame)
                info[(g, n)] = {"lr": lr, "falling": falling, "fall": fall,
                                "settled_at": _settled_at(curve, finals[g][n])}
                histories[(g, n)] = h
                log(f"{g}, n = {n:>4}: lr = {lr:g}, final ||(1/n) 1^T grad f(x)|| = {finals[g][n]:.4e} "
                    f"+- {spreads[(g, n)]:.1e} (iterations {start:g}-{T}; {abs(fall):.0%} "
                    f"{'below' if fall >= 0 else 'above'} iterations {_earlier(T)}"
                    f"{': still falling' if falling else ': cannot tell' if falling is None else ''}; {h.frame['wall_seconds'].max():.1f} s)")
            if interrupted:
                break
    except Exception as exc:  # noqa: BLE001 - write what finished, then re-raise (_stop_if)
        error = exc
    slopes, verdicts = {}, []
    for g in graphs:
        done = {n: v for n, v in finals[g].items() if np.isfinite(v) and (g, n) in info}
        slopes[g] = (float(np.polyfit(np.log(np.array(list(done), float)), np.log(list(done.values())), 1)[0])
                     if len(done) > 1 else math.nan)
        if not finals[g]:
            continue
        T = iterations or LINEAR_SPEEDUP_ITERATIONS[g]
        low, high = _slope_interval({n: per_repeat[(g, n)] for n in done}) if len(done) > 1 else (math.nan, math.nan)
        log(f"{g}: fitted slope of log(final metric) vs log(n): {slopes[g]:.3f}, 95% interval [{low:.3f}, "
            f"{high:.3f}] (linear speedup: about -0.5)")
        verdicts.append({
            "claim": f"{g}: linear speedup, the final gradient norm falls like n^(-1/2), at "
                     + ("the paper's printed rates" if rates == "paper" else "this command's rates, not the paper's "
                        "printed ones (--rates paper)"), "graph": g,  # (the ring's verdict rests on them)
            "rates": rates, "iterations": T, "slope": slopes[g], "slope_low": low, "slope_high": high,
            "sizes": len(done), "diverged": len(finals[g]) - len(done), "seed": seed, "data_seed": data_seed,
            "finals": "; ".join(f"n={n}: {v:.4g} +- {spreads.get((g, n), math.nan):.2g}" for n, v in finals[g].items()),
            "settled_at": "; ".join(f"n={n}: {info[(g, n)]['settled_at']}" for n in done),
            "rule": LINEAR_SPEEDUP_RULE, "verdict": _speedup_verdict(g, T, finals[g], done, info, (low, high))})
    _write_verdict(out_dir, "linear_speedup", verdicts, log,
                   stopped=_stopped(interrupted, error, f"{sum(map(len, finals.values()))} of {total_runs} runs"))
    write_histories(out_dir, "linear_speedup", histories, lambda key: {"graph": key[0], "n": key[1],
                                                                       "lr": info[key]["lr"]})
    plt = _plt()
    if plt is not None and histories:
        shown = [g for g in graphs if any(k[0] == g for k in histories)]
        fig, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 3.8), squeeze=False)
        for ax, g in zip(axes[0], shown):
            for (g2, n), h in histories.items():
                if g2 == g:
                    h.plot("grad_norm", ax=ax, label=f"n = {n}")
            said = next((v["verdict"].split(":")[0].split(" (")[0] for v in verdicts if v["graph"] == g), "")
            ax.set_title(f"Pull-Diag-GT, {'exponential graphs' if g == 'exponential' else 'rings'} "
                         f"(slope {slopes[g]:.2f}{', ' + said if said else ''})\n{iterations or LINEAR_SPEEDUP_ITERATIONS[g]} iterations, "
                         f"{repeats} repetitions, {'the paper' if rates == 'paper' else 'this command'}'s rates"
                         + other_data(data_seed),
                         fontsize=9)  # (the settings: runs at either rates looked the same)
            ax.legend(fontsize=7)
        log(f"wrote {_save(fig, out_dir, 'linear_speedup.png')}")
        plt.close(fig)
    _stop_if(interrupted, log, f"{sum(map(len, finals.values()))} of {total_runs} runs", error)
    return finals, slopes


def _earlier(T):
    """The iterations of the window a final window is checked against, as words (``"5600-6400"``)."""
    return f"{(EARLIER_WINDOW_END - FINAL_WINDOW) * T:g}-{EARLIER_WINDOW_END * T:g}"


#: The linear-speedup verdict's rule, in the words its CSV carries.
LINEAR_SPEEDUP_RULE = (
    f"each size's final: its repeats' means over the last {FINAL_WINDOW:.0%} of their records, averaged; the slope "
    f"of log(final) against log(n) fitted, with a 95% bootstrap interval over repeats; 'holds' where the interval "
    f"lies within {SLOPE_TOLERANCE:.3g} of -0.5 (half the way to n^(-1/3) and n^(-2/3)), 'does not hold' where "
    f"it lies outside, 'inconclusive' across the edge or with one repeat; 'not decided' where a size diverged, "
    f"fewer than two finished, or a size is still in its transient (its repeats' mean fall from the tenth of "
    f"records before the one before last to the last tenth above its standard error times Student's t at "
    f"{TRANSIENT_QUANTILE}, paired by repeat) or cannot be told from it (one repeat)")


def _speedup_verdict(g, T, finals, done, info, interval):
    """The verdict of one half of Figure 2 (:data:`LINEAR_SPEEDUP_RULE`)."""
    failed = [n for n in finals if n not in done]
    if failed:
        return (f"not decided: n = {', '.join(map(str, failed))} diverged or gave NaN (the rate, not the slope, "
                "failed there)")
    if len(done) < 2:
        return "not decided: fewer than two sizes finished"
    untold = [n for n in done if info[(g, n)]["falling"] is None]
    if untold:
        return (f"not decided: whether n = {', '.join(map(str, untold))} left the transient cannot be told (one "
                "repeat, or a NaN or 0 in its windows)")
    transient = {n: info[(g, n)]["fall"] for n in done if info[(g, n)]["falling"]}
    if transient:
        return (f"not decided: transient not left after {T} iterations at n = "
                + ", ".join(f"{n} (fell {fall:.0%} from iterations {_earlier(T)} to the last tenth)"
                            for n, fall in transient.items()))
    low, high = interval
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive (one repeat: no interval for the slope)"
    if -0.5 - SLOPE_TOLERANCE <= low and high <= -0.5 + SLOPE_TOLERANCE:
        return "holds"
    if high < -0.5 - SLOPE_TOLERANCE or low > -0.5 + SLOPE_TOLERANCE:
        return "does not hold"
    return "inconclusive"


def _checked_sizes(sizes, graph):
    """:func:`reproduce_linear_speedup`'s network sizes for ``graph``: at least two distinct integers >= 1 (a slope
    needs two; none had returned empty tables and NaN slopes, helper 218), as a tuple; else an error naming
    ``sizes``."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError(f"sizes must be network sizes (a sequence of integers, or a dict of them per graph), got "
                        f"{type(sizes).__name__} {sizes!r:.60}")
    sizes = tuple(check_int(n, f"sizes ({graph})", minimum=1) for n in sizes)
    if len(set(sizes)) < 2 or len(set(sizes)) != len(sizes):
        raise ValueError(f"sizes must give at least two distinct network sizes for the {graph} graph (the slope of "
                         f"the final against n needs two), got {sizes}")
    return sizes


def _checked_graphs(graphs, known=LINEAR_SPEEDUP_SIZES):
    """``graphs`` of the linear-speedup figure (or of another, ``known`` its names) as a tuple, each known, none
    twice, at least one; one name is one graph (the neural figures' had been read letter by letter, helper 204)."""
    graphs = tuple(check_names(graphs, "graphs"))
    unknown = [g for g in graphs if g not in known]
    if unknown or not graphs or len(set(graphs)) != len(graphs):
        raise ValueError(f"graphs must be distinct names from {', '.join(known)}, got "
                         f"{', '.join(map(repr, graphs)) or 'none'}")
    return graphs


@writes_before_sigterm
def reproduce_multi_gossip(out_dir, communication_rounds=2000, repeats=5, rounds=(1, 5, 10), total=204800,
                           batch=200, seed=0, data_seed=DATA_SEED, progress=True, log=print):
    """Figure 3's synthetic analogue: Pull-Diag-GT vs MG-Pull-Diag-GT (R = 5, 10) on the 16-node paper graphs.

    Every run gets the same budget of communication rounds (and samples):
    ``T = communication_rounds / R`` iterations. ``seed``: the runs' mini-batch streams; ``data_seed``: the draw of
    the synthetic data (:data:`DATA_SEED`: the paper's instance; over other draws the claims' verdicts differ:
    bench/RESULTS.md section 56d). Returns a dict ``(graph, R) -> final gradient norm`` (``inf`` when the run
    diverged). Files of an earlier run in ``out_dir`` are replaced (``rowstoch reproduce`` refuses them without
    ``--overwrite``).
    """
    rounds = check_rounds(rounds, communication_rounds)
    check_log(log)
    _progress.check(progress)
    make_out_dir(out_dir)
    f = NonconvexLogistic.synthetic(16, total=total, batch=batch, seed=data_seed)
    graphs = topology.paper_graphs()
    finals, histories = {}, {}
    instance = ": the paper's instance" if data_seed == DATA_SEED else ""
    log(f"MG-Pull-Diag-GT, 16 nodes, {communication_rounds} communication rounds, {repeats} repetitions (seed {seed}, "
        f"data seed {data_seed}{instance}): the last record of ||(1/n) 1^T grad f(x)|| (the verdicts read each run's "
        f"last {FINAL_WINDOW:.0%} of records):")
    log("at the paper's rates (Appendix E; " + "; ".join(
        f"{name} " + ", ".join(f"{MULTI_GOSSIP_LR[name][R]:g}" for R in rounds) for name in graphs)
        + f" for R = {', '.join(map(str, rounds))}), which it chose for its MNIST network: each verdict is the claim "
        "at those rates, not at each method's best rate on this problem (rowstoch compare --preset paper tunes "
        "them)")
    log(f"{'graph':<18}" + "".join(f"{'R = %d' % R:>12}" for R in rounds))
    interrupted, error = False, None
    try:
        for name, A in graphs.items():
            line = f"{name:<18}"
            for R in rounds:
                lr = MULTI_GOSSIP_LR[name][R]
                try:
                    h = run(Algorithm(A, lr, rounds=R), f, communication_rounds // R,
                            record_every=max(1, communication_rounds // R // 50), repeats=repeats, seed=seed,
                            progress=progress)
                except DivergenceError as exc:
                    finals[(name, R)] = math.inf
                    line += f"{'diverged@' + str(exc.iteration):>12}"
                    continue
                if h.interrupted:  # Ctrl-C: write what finished, then stop
                    interrupted = True
                    break
                finals[(name, R)] = h.final()
                histories[(name, R)] = h
                line += f"{finals[(name, R)]:>12.3e}"
            log(line)
            if interrupted:
                break
    except Exception as exc:  # noqa: BLE001 - write what finished, then re-raise (_stop_if)
        error = exc
    verdicts = [{**row, "seed": seed, "data_seed": data_seed}
                for row in _multi_gossip_verdicts(graphs, rounds, finals, histories)]
    _write_verdict(out_dir, "multi_gossip", verdicts, log,
                   stopped=_stopped(interrupted, error, f"{len(finals)} of {len(graphs) * len(rounds)} runs"))
    write_histories(out_dir, "multi_gossip", histories, lambda key: {"graph": key[0], "R": key[1]})
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(2, 2, figsize=(8, 6), sharex=True)
        for ax, name in zip(axes.ravel(), graphs):
            for R in rounds:
                if (name, R) in histories:
                    histories[(name, R)].plot("grad_norm", ax=ax, label=f"R = {R}")
            ax.set_title(name, fontsize=9)
            if ax.get_legend_handles_labels()[0]:  # (a graph an interruption left without runs has none)
                ax.legend(fontsize=7)
        fig.suptitle(f"Pull-Diag-GT vs MG-Pull-Diag-GT, the synthetic logistic problem (n = 16),\n"  # (on one
                     # line it ran past both edges of the 8-inch figure)
                     f"{communication_rounds} communication rounds, {repeats} repetitions, the paper's rates"
                     + other_data(data_seed),
                     fontsize=9)  # (the panels named only their graph)
        log(f"wrote {_save(fig, out_dir, 'multi_gossip.png')}")
        plt.close(fig)
    _stop_if(interrupted, log, f"{len(finals)} of {len(graphs) * len(rounds)} runs", error)
    return finals


def check_rounds(rounds, budget):
    """``rounds`` of a multi-gossip figure: distinct, 1 (plain Pull-Diag-GT, the baseline) among them, each one
    whose rate the paper gives (:data:`MULTI_GOSSIP_LR`), and each at least one iteration of ``budget``
    communication rounds. Returns them as a tuple."""
    rounds = tuple(rounds)
    known = sorted(MULTI_GOSSIP_LR["ring"])
    if 1 not in rounds or len(set(rounds)) != len(rounds) or any(R not in known for R in rounds):
        raise ValueError(f"rounds must be distinct values from {known} (the R the paper gives rates for), 1 among "
                         f"them (plain Pull-Diag-GT, the baseline), got {rounds}")
    if budget < max(rounds):
        raise ValueError(f"{budget} communication rounds are less than one iteration at R = {max(rounds)}")
    return rounds


#: The multi-gossip verdicts' rule: :data:`COMPARE_RULE`, then the transient guard of :func:`_behind_and_falling`.
#: The stretches of a fifth of the run in a second budget: how far a run still falling is followed (at its last
#: fifth's pace, geometric: a 1/k decline falls slower than that, so the guard errs towards "not decided").
FOLLOWED_FIFTHS = 5

MULTI_GOSSIP_RULE = (COMPARE_RULE + "; 'not decided' where the run behind is still falling (its repeats' mean fall "
                     "from the tenth of records ending at 80% of the run to the last tenth beyond Student's t times "
                     "its standard error) and, falling on at that pace per fifth of the run, would pass the other "
                     "(followed at its own mean fall where it falls at all) within a second budget")


def _behind_and_falling(verdict, name, R, histories, mg, plain):
    """``verdict`` unless the run it puts behind (MG for "does not hold", plain for "holds") is still in its
    transient (:func:`_still_falling`) and, falling on at its last fifth's pace for :data:`FOLLOWED_FIFTHS` more
    fifths of the run (a second budget), would pass the other (``mg`` and ``plain``: their final means), itself
    followed at its own pace where it still falls too: then not decided. The order of two runs is the budget's
    while the one behind still falls fast enough: at 1,000 rounds 5 of the 8 claims did not hold, at 2,000 one did,
    its MG run still falling 39%."""
    behind = (name, R) if verdict == "does not hold" else (name, 1) if verdict == "holds" else None
    if behind not in histories:
        return verdict
    falling, fall = _still_falling(histories[behind].frame)
    ahead, back = (plain, mg) if behind[1] > 1 else (mg, plain)
    other = (name, 1) if behind[1] > 1 else (name, R)
    if other in histories:  # (the run ahead followed too, at its measured fall, where it falls at all: it may
        # widen the gap. Whatever its own t-test says: gated by it, a 3.3% fall passed on one seed and 3.8% did not
        # on the next, and the ring's claim at R = 5 turned "not decided" on 2 of 8 seeds, helper 114)
        _, pace = _still_falling(histories[other].frame)
        ahead *= (1 - pace) ** FOLLOWED_FIFTHS if math.isfinite(pace) and pace > 0 else 1.0
    if not falling or not back * (1 - fall) ** FOLLOWED_FIFTHS < ahead:
        return verdict
    who = f"MG-Pull-Diag-GT (R = {R})" if behind[1] > 1 else "Pull-Diag-GT"
    return (f"not decided: {who}, behind at the budget, is still falling ({fall:.0%} from its records at 70-80% of "
            "the run to its last tenth), fast enough to pass the other within a second budget; a longer run "
            "decides")


def _multi_gossip_verdicts(graphs, rounds, finals, histories):
    """A verdict per graph and per ``R > 1`` (never the best of several R): MG-Pull-Diag-GT's final window against
    plain Pull-Diag-GT's (R = 1) at equal communication, by :data:`MULTI_GOSSIP_RULE`."""
    failed = (math.inf, math.nan, math.nan, 0)
    stats = {key: window_stats(h.frame, "grad_norm", x="communication_rounds") for key, h in histories.items()}
    rows = []
    for name in graphs:
        if (name, 1) not in finals:
            continue
        p_mean, p_spread, start, p_repeats = stats.get((name, 1), failed)
        for R in rounds:
            if R == 1 or (name, R) not in finals:
                continue
            m_mean, m_spread, _, m_repeats = stats.get((name, R), failed)
            rows.append({"claim": f"{name}: MG-Pull-Diag-GT (R = {R}) ends with a lower gradient norm than "
                                  f"Pull-Diag-GT at equal communication", "graph": name, "R": R,
                         "lr_mg": MULTI_GOSSIP_LR[name][R], "lr_plain": MULTI_GOSSIP_LR[name][1],
                         "final_mg": m_mean, "spread_mg": m_spread, "repeats_mg": m_repeats,
                         "final_plain": p_mean, "spread_plain": p_spread, "repeats_plain": p_repeats,
                         "window_from_round": start, "rule": MULTI_GOSSIP_RULE,
                         "verdict": _behind_and_falling(compare_windows(m_mean, m_spread, m_repeats, p_mean,
                                                                        p_spread, p_repeats), name, R, histories,
                                                        m_mean, p_mean)})
    return rows


@writes_before_sigterm
def demo(out_dir="rowstoch-demo", log=print, progress=True):
    """The main job on the embedded default: metrics, then Pull-Diag-GT vs MG-Pull-Diag-GT on the paper's graphs.

    Runs :func:`reproduce_multi_gossip` with its own settings (what ``rowstoch reproduce multi-gossip`` runs):
    the synthetic problem of Appendix E.2 (n = 16, d = 10, 204,800 samples, batch 200) for 2,000 communication
    rounds, 5 repetitions, R in {1, 5, 10} on the four 16-node graphs; prints a summary table and the verdict of
    each claim, and writes ``multi_gossip.png``, ``multi_gossip.csv`` and ``multi_gossip_verdict.csv``. Takes
    under a minute on 2 cores. (A shorter run, 1,000 rounds over 3 repetitions, had judged 5 of the 8 claims
    "does not hold" where the paper's budget judges 7 of 8 "holds" and 1 "not decided": a demo must not tell a
    new user otherwise than the reproduction does.) The files of an earlier run in ``out_dir`` are replaced
    (``rowstoch demo`` refuses them without ``--overwrite``).
    """
    check_log(log)

    graphs = {"exponential-16": topology.exponential(16), **{f"paper-{k}": v for k, v in topology.paper_graphs().items()}}
    log("Network metrics of the paper's 16-node graphs (Section 2.2, Appendix E.1):")
    log(metrics_table(graphs.items()))
    log("")
    log("Figure 3's claim on the synthetic problem (rowstoch reproduce multi-gossip runs the same): "
        "MG-Pull-Diag-GT with R gossip rounds per iteration against Pull-Diag-GT, at equal communication")
    finals = reproduce_multi_gossip(out_dir, progress=progress, log=log)
    records = os.path.join(out_dir, "multi_gossip.csv")
    if os.path.isfile(records):  # (the figure and the verdicts' table say where they went themselves)
        log(f"wrote {records} (every record)")
    return finals
