"""A published figure of a local-update method, reproduced: K-GT's synthetic-quadratic experiment
(``rowstoch reproduce k-gt-local-steps``).

The paper: Y. Liu, T. Lin, A. Koloskova and S. U. Stich, "Decentralized gradient tracking with local steps",
Optimization Methods and Software, 2024 (arXiv 2301.01313). Its claims that this module checks on its own runs:
K-GT "reduces the communication overhead asymptotically by a linear factor K, where K denotes the number of local
steps", while it "inherits the data-independence property of gradient tracking", illustrated on "convex and
non-convex benchmark problems" against local decentralized SGD, whose local steps drift apart under heterogeneous
data (quoted from the paper's abstract). The figure reproduced is the paper's experiment on synthetic quadratics;
its number in the paper and its exact constants (graph size, data, noise, target accuracy) were not checked against
the paper's text when this module was written (the text was not at hand): :data:`KGT_FIGURE` names it in every
output, and is the one place to correct.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from .. import topology
from .._checks import MAX_KEY, check_int, check_positive_float, make_rng
from .._files import atomic_write
from .._progress import bar
from ..objectives import Quadratic
from ._common import (COMPARE_RULE, _plt, _stop_if, _stopped, _write_verdict, compare_windows, error_bars,
                      make_out_dir, spread, window_means, write_table, writes_before_sigterm)

__all__ = ["KGT_PAPER", "KGT_FIGURE", "KGT_DIFFERENCES", "KGT_LOCAL_STEPS", "KGT_HETEROGENEITY",
           "KGT_METHODS", "KGT_ROUNDS", "KGT_REPEATS", "KGT_MIN_ROUNDS", "KGT_RULE", "KGT_TREND_RULE",
           "heterogeneous_quadratics",
           "kgt_local_steps_verdicts", "reproduce_kgt_local_steps"]

#: The paper, as the outputs name it.
KGT_PAPER = ("Liu, Lin, Koloskova & Stich, 'Decentralized gradient tracking with local steps', Optim. Methods "
             "Softw. 2024 (arXiv 2301.01313)")
#: The figure, as the outputs name it. Its number in the paper was not checked when this module was written (the
#: paper's text was not at hand): correct it here, in one place, once someone has read it.
KGT_FIGURE = "its experiment on synthetic heterogeneous quadratics (figure number not checked)"
#: What differs from the paper's setup, as the outputs state it.
KGT_DIFFERENCES = (
    "here: our own quadratics (f_i(x) = 1/2 sum_k q_ik (x_k - x*_ik)^2 + const, q ~ U(0.5, 2), x*_i = x_c + zeta "
    "N(0, I)), Gaussian gradient noise sigma = 1, a ring of 16 nodes (Metropolis weights), each method's rate tuned "
    "by `rowstoch compare`'s tuner on seeds apart from the repeats, the error after a fixed number of communication "
    "rounds rather than the rounds to reach a target; without the paper's 'periodical GT' (not in this package)")

#: The numbers of local steps ``K`` of the default run.
KGT_LOCAL_STEPS = (1, 2, 4, 8)
#: The heterogeneity levels ``zeta`` of the default run: identical minimisers (0) and far apart (10).
KGT_HETEROGENEITY = (0.0, 10.0)
#: The methods: the paper's K-GT and its baseline, local decentralized SGD.
KGT_METHODS = ("k-gt", "local-dsgd")
#: Communication rounds per run (every ``K``: ``K`` gradient steps per round) and repeats, by default.
KGT_ROUNDS = 300
KGT_REPEATS = 5
#: Records per run (the verdict reads the last tenth of them).
KGT_POINTS = 50
#: The fewest communication rounds a run may have.
KGT_MIN_ROUNDS = 10

#: The verdict's rule, in the words its CSV carries.
KGT_RULE = (
    "each run (method, zeta, K) at the rate the tuner picked over its whole budget; its final is each repeat's mean "
    "suboptimality f(x_bar) - f* over the last tenth of its records, compared across runs with the same number of "
    "communication rounds: for K-GT at every zeta, every K against the next larger K (each pair a row; none "
    "skipped), and at the largest zeta K-GT against Local DSGD at every K; each comparison by "
    + COMPARE_RULE.split("; ", 1)[1] + "; a run whose status is not ok (diverged, no progress, unstable) loses")


def heterogeneous_quadratics(n, d, heterogeneity, noise=1.0, seed=0):
    """Node ``i``'s ``f_i(x) = 1/2 sum_k q_ik (x_k - x*_ik)^2`` (up to a constant): ``q_ik ~ U(0.5, 2)`` and
    ``x*_i = x_c + heterogeneity N(0, I)`` around a common ``x_c ~ N(0, I)``, gradients with noise ``noise N(0, I)``.

    ``heterogeneity = 0``: every ``f_i`` has the same minimiser (no drift); the larger it is, the further apart the
    local minimisers (``||grad f_i(x*)||`` grows with it), the drift that local steps without a correction suffer.
    The curvatures ``q`` and the common ``x_c`` are the same for every ``heterogeneity`` (same ``seed``).

    Returns
    -------
    Quadratic

    Examples
    --------
    >>> f = heterogeneous_quadratics(4, 3, 0.0)
    >>> bool(np.allclose(f.full_gradient(np.broadcast_to(f.minimizer, (4, 3))), 0))  # one common minimiser
    True
    """
    n, d = check_int(n, "n", minimum=1), check_int(d, "d", minimum=1)
    heterogeneity = check_positive_float(heterogeneity, "heterogeneity", allow_zero=True)
    noise = check_positive_float(noise, "noise", allow_zero=True)  # (named as given, not Quadratic's sigma; and
    # the seed, helper 204)
    rng = make_rng(seed)
    q = rng.uniform(0.5, 2.0, (n, d))
    centre = rng.standard_normal(d)
    with np.errstate(over="ignore", invalid="ignore"):
        b = q * (centre + heterogeneity * rng.standard_normal((n, d)))
    if not np.isfinite(b).all():  # (1e308 had said "b must be finite", an argument the caller never gave)
        raise ValueError(f"heterogeneity = {heterogeneity:g} puts the minimisers past float64's range; give a "
                         f"smaller one")
    f = Quadratic(q, b, sigma=noise)
    f.source = {"generator": "heterogeneous_quadratics", "seed": seed, "heterogeneity": heterogeneity}
    return f


def _checked(local_steps, heterogeneity, communication_rounds, repeats, methods):
    """The options of :func:`reproduce_kgt_local_steps`, checked before anything runs or is written."""
    try:
        steps = tuple(local_steps)
        zetas = tuple(heterogeneity)
    except TypeError:
        raise TypeError("local_steps and heterogeneity must be sequences") from None
    steps = tuple(check_int(K, "local_steps", minimum=1) for K in steps)
    if len(steps) < 2 or len(set(steps)) != len(steps):
        raise ValueError(f"local_steps must be at least two distinct K >= 1 (each is compared with the next), got "
                         f"{steps}")
    zetas = tuple(check_positive_float(z, "heterogeneity", allow_zero=True) for z in zetas)
    if not zetas or len(set(zetas)) != len(zetas):
        raise ValueError(f"heterogeneity must be distinct levels >= 0, at least one, got {zetas}")
    communication_rounds = check_int(communication_rounds, "communication_rounds", minimum=KGT_MIN_ROUNDS)
    repeats = check_int(repeats, "repeats", minimum=1)
    methods = tuple(methods)
    if "k-gt" not in methods or len(set(methods)) != len(methods):
        raise ValueError(f"methods must hold k-gt (the claims are about it), each once, got {methods}")
    from ..algorithms import REGISTRY

    unknown = [m for m in methods if m not in REGISTRY or not hasattr(REGISTRY[m], "local_steps")]
    if unknown:
        raise ValueError(f"methods: {unknown[0]!r} is not a registered local-update method")
    return tuple(sorted(steps)), zetas, communication_rounds, repeats, methods


@writes_before_sigterm
def reproduce_kgt_local_steps(out_dir, communication_rounds=KGT_ROUNDS, repeats=KGT_REPEATS,
                              local_steps=KGT_LOCAL_STEPS, heterogeneity=KGT_HETEROGENEITY, methods=KGT_METHODS, n=16,
                              d=10, noise=1.0, seed=0, progress=True, log=print):
    """K-GT's synthetic experiment (Liu, Lin, Koloskova & Stich, Optim. Methods Softw. 2024, arXiv 2301.01313; its
    figure on synthetic quadratics, number not checked): the error after the same communication against the number
    of local steps ``K``, for K-GT and Local DSGD, homogeneous and heterogeneous.

    Every (method, ``zeta``, ``K``) is one ``rowstoch compare`` run on a ring of ``n`` nodes (Metropolis weights,
    doubly stochastic) over :func:`heterogeneous_quadratics` (``d`` dimensions, gradient noise ``noise``): its
    rate tuned over the whole budget of ``communication_rounds`` rounds (on seeds no repeat draws), then
    ``repeats`` runs of ``K * communication_rounds`` gradient steps each, the suboptimality ``f(x_bar) - f*``
    recorded against the communication rounds and the gradients. The claims checked (:data:`KGT_RULE`):

    - K-GT: more local steps end lower at equal communication (the paper's "communication overhead reduced by a
      factor K"), at every ``zeta``: each ``K`` against the next, and the final's trend over every ``K``
      (:data:`KGT_TREND_RULE`);
    - K-GT ends lower than Local DSGD at the largest ``zeta``, at every ``K`` (the heterogeneity correction).

    What differs from the paper (:data:`KGT_DIFFERENCES`, also in the figure's title): our own quadratics and
    Gaussian gradient noise (``noise = 1``), a ring of 16 nodes with Metropolis weights, every rate tuned by the
    harness's tuner on seeds apart from the repeats, the error after a fixed number of communication rounds (the
    verdict's) rather than the rounds to reach a target accuracy, and no "periodical GT" (gradient tracking with
    local steps but without K-GT's correction; not in this package). Default size: 16 runs (two methods, four ``K``,
    two ``zeta``) of 300 rounds and 5 repeats, about 25 s of CPU on 2 cores; ``communication_rounds=1000,
    repeats=10`` (``--iterations 1000 --repeats 10``) for a longer run.

    Parameters
    ----------
    out_dir : str
        Where ``kgt_local_steps.csv`` (every record, rewritten after each run, so a stopped run keeps what finished),
        ``kgt_local_steps_finals.csv`` (each run's final window, rate and status), ``kgt_local_steps_verdict.csv``
        and ``kgt_local_steps.png`` go.
    communication_rounds, repeats : int
        The budget of every run (at least 10 rounds) and its repeats (a verdict needs two).
    local_steps : sequence of int
        ``K``, at least two distinct values.
    heterogeneity : sequence of float
        ``zeta`` levels (the K-GT-against-Local-DSGD claim is read at the largest).
    methods : sequence of str
        Registered local-update methods, ``"k-gt"`` among them.
    n, d, noise, seed
        The problem (``seed``: its data and the runs' streams).
    progress : bool or "always"
        A bar over the runs.
    log : callable

    Returns
    -------
    pandas.DataFrame
        The finals (one row per run), also ``kgt_local_steps_finals.csv``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as out:
    ...     finals = reproduce_kgt_local_steps(out, communication_rounds=20, repeats=2, local_steps=(1, 2),
    ...                                        heterogeneity=(5.0,), methods=("k-gt",), progress=False,
    ...                                        log=lambda line: None)
    ...     sorted(os.listdir(out))
    ['kgt_local_steps.csv', 'kgt_local_steps.png', 'kgt_local_steps_finals.csv', 'kgt_local_steps_verdict.csv']
    >>> finals[["local_steps", "status"]].values.tolist()
    [[1, 'ok'], [2, 'ok']]
    """
    import pandas as pd

    from .. import compare as cmp

    steps, zetas, communication_rounds, repeats, methods = _checked(local_steps, heterogeneity, communication_rounds,
                                                                     repeats, methods)
    n, d = check_int(n, "n", minimum=1), check_int(d, "d", minimum=1)  # (helper 204: noise, seed and a file as
    # out_dir had been refused at the first run, or by makedirs's bare FileExistsError)
    check_positive_float(noise, "noise", allow_zero=True)
    check_int(seed, "seed", minimum=0, maximum=MAX_KEY - 1)  # (the data are drawn on seed + 1)
    make_out_dir(out_dir)
    W = topology.ring(n, directed=False, weights="metropolis")
    plan = [(z, name, K) for z in zetas for name in methods for K in steps]
    log(f"{KGT_PAPER}, {KGT_FIGURE}: {len(plan)} runs of {communication_rounds} communication rounds x {repeats} "
        f"repeats on a ring of {n} nodes")
    frames, finals = [], []
    interrupted, error = False, None
    records_path = os.path.join(out_dir, "kgt_local_steps.csv")
    progress_bar = bar(progress, len(plan), desc="k-gt-local-steps", unit="run")
    try:
        for z, name, K in plan:
            f = heterogeneous_quadratics(n, d, z, noise=noise, seed=seed + 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the tuner's too-large rates diverge: expected
                frame = cmp.compare(W, f, [name], communication_rounds, repeats=repeats, seed=seed,
                                    points=KGT_POINTS, progress=False, metric="suboptimality",
                                    hyper={name: {"local_steps": K}})
            if frame.attrs["interrupted"]:  # Ctrl-C: write what finished, then stop
                interrupted = True
                break
            status = frame.attrs["status"][name]
            means, _ = window_means(frame, "suboptimality", x="communication_rounds")
            mean, width = float(np.mean(means)) if means.size else math.nan, spread(means)
            finals.append({"heterogeneity": z, "algorithm": name, "local_steps": K, "lr": frame.attrs["lr"][name],
                           "status": status, "final": mean, "spread": width, "repeats": int(means.size),
                           "lowest": float(np.min(means, initial=np.inf)),
                           "highest": float(np.max(means, initial=-np.inf)),
                           "start": float(frame.loc[frame["communication_rounds"] == 0, "suboptimality"].mean())})
            frame = frame.assign(heterogeneity=z, local_steps=K)
            frames.append(frame[["heterogeneity", "algorithm", "local_steps", "lr", "status", "rep",
                                 "communication_rounds", "iteration", "suboptimality", "consensus_error"]])
            records = pd.concat(frames, ignore_index=True)
            atomic_write(records_path, lambda fh: records.to_csv(fh, index=False))
            log(f"  zeta = {z:g}, {name:<10} K = {K:>2}: lr {frame.attrs['lr'][name]:.3g}, final f(x_bar) - f* "
                f"{mean:.3e} +- {width:.1e} ({status})")
            if progress_bar is not None:
                progress_bar.update(1)
    except Exception as exc:  # noqa: BLE001 - write the runs that finished, then re-raise (_stop_if)
        error = exc
    finally:
        if progress_bar is not None:
            progress_bar.close()
    table = pd.DataFrame(finals, columns=["heterogeneity", "algorithm", "local_steps", "lr", "status", "final",
                                          "spread", "repeats", "lowest", "highest", "start"])
    write_table(table, out_dir, "kgt_local_steps_finals.csv", log)
    done = f"{len(finals)} of {len(plan)} runs"
    stopped = _stopped(interrupted, error, done)
    rows = kgt_local_steps_verdicts(table, steps, zetas)
    _write_verdict(out_dir, "kgt_local_steps", rows, log, stopped=stopped)
    if rows and stopped is None:
        counts = {v: sum(r["verdict"] == v for r in rows) for v in dict.fromkeys(r["verdict"] for r in rows)}
        log("K-GT's claims on this run: " + ", ".join(f"{k} {c} of {len(rows)}" for k, c in counts.items()))
    if frames:
        _figure(pd.concat(frames, ignore_index=True), table, steps, zetas, methods, communication_rounds, n, out_dir,
                log)
    log(f"wrote {records_path}")
    _stop_if(interrupted, log, done, error)
    return table


#: The rule of the trend row: what the pairwise rows judge one doubling at a time, judged over every K at once.
KGT_TREND_RULE = (
    "the slope of log(final) against log2(K) over every K (a fit weighted by each run's variance of its log mean, "
    "(spread / final)^2 / repeats), with a 95% interval from Student's t at the fewest repeats less one, the "
    "larger of the fit's and its residuals' standard errors: 'holds' where the interval lies below 0, 'does not "
    "hold' where above, 'inconclusive' across it or with one repeat; a run whose status is not ok loses (does not "
    "hold). Pairwise doublings judged at 5 repeats with spreads of 30-50% held 2-6 of 6 seeds each (bench/RESULTS.md "
    "section 56d): the trend over all of them is the claim's robust reading")


def _falls_with_k(steps, points):
    """``(verdict, slope, low, high)`` of :data:`KGT_TREND_RULE` from ``points``: ``(final, spread, repeats, status)``
    for each K of ``steps``."""
    if any(p[3] != "ok" for p in points):
        return "does not hold", math.nan, math.nan, math.nan
    finals = np.array([p[0] for p in points], dtype=np.float64)
    spreads = np.array([p[1] for p in points], dtype=np.float64)
    repeats = np.array([p[2] for p in points], dtype=np.float64)
    x, y = np.log2(np.asarray(steps, dtype=np.float64)), np.log(finals)
    if repeats.min() < 2 or not np.isfinite(spreads).all() or not (finals > 0).all():
        slope = float(np.polyfit(x, y, 1)[0]) if (finals > 0).all() else math.nan
        return "inconclusive (one repeat: the spread over seeds is unknown)", slope, math.nan, math.nan
    var = np.maximum((spreads / finals) ** 2 / repeats, 1e-30)
    w = 1.0 / var
    xm = float(np.sum(w * x) / np.sum(w))
    sxx = float(np.sum(w * (x - xm) ** 2))
    slope = float(np.sum(w * (x - xm) * (y - np.sum(w * y) / np.sum(w))) / sxx)
    intercept = float(np.sum(w * y) / np.sum(w)) - slope * xm
    residual = float(np.sum(w * (y - intercept - slope * x) ** 2)) / max(len(x) - 2, 1)
    error = math.sqrt(max(1.0, residual) / sxx)  # (the fit's, or its residuals' where they scatter more)
    from scipy.stats import t

    margin = float(t.ppf(0.975, int(repeats.min()) - 1)) * error
    low, high = slope - margin, slope + margin
    verdict = "holds" if high < 0 else "does not hold" if low > 0 else "inconclusive"
    return verdict, slope, low, high


def kgt_local_steps_verdicts(finals, local_steps, heterogeneity):
    """The verdict rows of :func:`reproduce_kgt_local_steps` from its finals (one row per run: ``heterogeneity``,
    ``algorithm``, ``local_steps``, ``status``, ``final``, ``spread``, ``repeats``), by :data:`KGT_RULE`: every
    pair of consecutive ``K`` for K-GT at every ``zeta``, and K-GT against Local DSGD at the largest ``zeta`` at
    every ``K`` (when Local DSGD ran and that ``zeta`` is above 0). A run missing from ``finals`` (the experiment
    stopped first) gives no row.

    Examples
    --------
    >>> import pandas as pd
    >>> finals = pd.DataFrame({"heterogeneity": 5.0, "algorithm": ["k-gt", "k-gt", "local-dsgd", "local-dsgd"],
    ...                        "local_steps": [1, 2, 1, 2], "status": "ok", "final": [1e-3, 2e-3, 1e-1, 1e-1],
    ...                        "spread": 1e-4, "repeats": 5})
    >>> [row["verdict"] for row in kgt_local_steps_verdicts(finals, (1, 2), (5.0,))]  # K = 2 ends higher
    ['does not hold', 'holds', 'holds']
    """
    if not all(hasattr(finals, k) for k in ("columns", "iloc")):  # (None: "'NoneType' object is not subscriptable")
        raise TypeError(f"finals must be a DataFrame of the runs' finals (reproduce_kgt_local_steps's "
                        f"kgt_local_steps_finals.csv), got {type(finals).__name__}")

    def stats(z, name, K):
        part = finals[(finals["heterogeneity"] == z) & (finals["algorithm"] == name) & (finals["local_steps"] == K)]
        if not len(part):
            return None
        row = part.iloc[0]
        if row["status"] != "ok":  # diverged, no progress, unstable: it loses
            return (math.inf, math.nan, int(row["repeats"]), row["status"])
        return (float(row["final"]), float(row["spread"]), int(row["repeats"]), row["status"])

    rows = []
    steps = sorted(local_steps)
    for z in heterogeneity:
        for a, b in zip(steps, steps[1:]):
            small, large = stats(z, "k-gt", a), stats(z, "k-gt", b)
            if small is None or large is None:
                continue
            rows.append({"claim": f"K-GT, zeta = {z:g}: K = {b} local steps end lower than K = {a} after the same "
                                  f"communication rounds", "zeta": z, "K": b, "versus": f"K = {a}",
                         "final": large[0], "spread": large[1], "repeats": large[2], "final_versus": small[0],
                         "spread_versus": small[1], "repeats_versus": small[2], "rule": KGT_RULE,
                         "verdict": compare_windows(large[0], large[1], large[2], small[0], small[1], small[2])})
        trend = [stats(z, "k-gt", K) for K in steps]
        if len(steps) > 2 and all(point is not None for point in trend):
            verdict, slope, low, high = _falls_with_k(steps, trend)
            rows.append({"claim": f"K-GT, zeta = {z:g}: the final falls with K over K = "
                                  f"{', '.join(map(str, steps))} (one trend) after the same communication rounds",
                         "zeta": z, "K": steps[-1], "versus": "trend", "final": trend[-1][0],
                         "spread": trend[-1][1], "repeats": trend[-1][2], "final_versus": trend[0][0],
                         "spread_versus": trend[0][1], "repeats_versus": trend[0][2], "slope": slope,
                         "slope_low": low, "slope_high": high, "rule": KGT_TREND_RULE, "verdict": verdict})
    z = max(heterogeneity)
    for K in steps if z > 0 else ():  # (identical minimisers: no heterogeneity to correct, no claim)
        kgt, dsgd = stats(z, "k-gt", K), stats(z, "local-dsgd", K)
        if kgt is None or dsgd is None:
            continue
        rows.append({"claim": f"zeta = {z:g}, K = {K}: K-GT ends lower than Local DSGD after the same communication "
                              f"rounds", "zeta": z, "K": K, "versus": "local-dsgd",
                     "final": kgt[0], "spread": kgt[1], "repeats": kgt[2], "final_versus": dsgd[0],
                     "spread_versus": dsgd[1], "repeats_versus": dsgd[2], "rule": KGT_RULE,
                     "verdict": compare_windows(kgt[0], kgt[1], kgt[2], dsgd[0], dsgd[1], dsgd[2])})
    return rows


def _figure(records, table, steps, zetas, methods, communication_rounds, n, out_dir, log):
    """``kgt_local_steps.png``: the finals against K (log-log), and at the largest zeta every run's mean
    suboptimality against the communication rounds and against the gradients per node (K per round)."""
    plt = _plt()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), squeeze=False)
    ax = axes[0, 0]
    styles = {name: style for name, style in zip(methods, ("-", "--", ":", "-."))}
    for name in methods:
        for k, z in enumerate(zetas):
            part = table[(table["algorithm"] == name) & (table["heterogeneity"] == z)].sort_values("local_steps")
            if len(part):
                y = np.where(part["status"] == "ok", part["final"], np.nan)
                ax.errorbar(part["local_steps"], y, error_bars(y, part["spread"], part["lowest"], part["highest"]),
                            marker="o", capsize=3, linestyle=styles[name], color=f"C{k}", label=f"{name}, zeta = {z:g}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(steps), [str(K) for K in steps])
    ax.set_xlabel("local steps K per communication round")
    ax.set_ylabel(f"final f(x_bar) - f* after {communication_rounds} rounds")
    ax.set_title("the verdict's numbers (mean +- sd over repeats)", fontsize=9)
    ax.legend(fontsize=7)
    z = max(zetas)
    shown = records[records["heterogeneity"] == z]
    for ax, x, label in ((axes[0, 1], "communication_rounds", "communication rounds"),
                         (axes[0, 2], "iteration", "gradient evaluations per node (K per round)")):
        for name in methods:
            for k, K in enumerate(steps):
                run = shown[(shown["algorithm"] == name) & (shown["local_steps"] == K)]
                if len(run):
                    curve = run.groupby(x)["suboptimality"].mean()
                    ax.plot(curve.index, np.maximum(curve.to_numpy(float), 1e-16), linestyle=styles[name],
                            color=f"C{k}", label=f"{name}, K = {K}")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_title(f"zeta = {z:g}, mean over repeats", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
    axes[0, 1].set_ylabel("f(x_bar) - f*")
    import textwrap

    fig.suptitle(f"{KGT_PAPER},\n" + textwrap.fill(f"{KGT_FIGURE}; ring of {n} nodes. What differs: "
                                                     f"{KGT_DIFFERENCES}", 190), fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "kgt_local_steps.png"), dpi=120)
    log(f"wrote {os.path.join(out_dir, 'kgt_local_steps.png')}")
    plt.close(fig)
