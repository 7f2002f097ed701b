"""The paper's experiments, reproduced: Figure 1 (Pull-Diag), Figure 2 (linear speedup), multi-gossip.

Each function writes a CSV and (with matplotlib) a PNG into ``out_dir``,
returns its numbers, and is what ``rowstoch reproduce ...`` and
``rowstoch demo`` call.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from . import topology
from ._progress import bar as progress_bar
from .algorithms import labels
from .errors import DivergenceError
from .metrics import metrics_table
from .objectives import NonconvexLogistic
from .protocol import a_protocol, pull_diag
from .runner import Algorithm, run

__all__ = ["LINEAR_SPEEDUP_LR", "MULTI_GOSSIP_LR", "reproduce_pull_diag", "reproduce_linear_speedup",
           "reproduce_multi_gossip", "reproduce_mnist_mlp", "reproduce_robustness", "mlp", "demo"]

#: Learning rates of the paper's linear-speedup figure on exponential graphs (shared/paper_graphs.md).
LINEAR_SPEEDUP_LR = {1: 5e-2, 2: 2.6e-2, 8: 6.4e-3, 16: 3e-3, 128: 4e-4, 512: 1e-4}
#: Learning rates of the paper's multi-gossip figures (Appendix E, "Learning Rates"), by graph and R.
MULTI_GOSSIP_LR = {
    "ring": {1: 0.005, 5: 0.01, 10: 0.02},
    "grid": {1: 0.02, 5: 0.03, 10: 0.03},
    "geometric": {1: 0.02, 5: 0.02, 10: 0.03},
    "nearest_neighbor": {1: 0.02, 5: 0.02, 10: 0.02},
}


def _plt():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        return None


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _finish(plt, fig, axes, out_dir, name, log):
    """The legend on the first panel, the figure saved as ``name`` and closed."""
    axes[0, 0].legend(fontsize=7)
    log(f"wrote {_save(fig, out_dir, name)}")
    plt.close(fig)


def _stop_if(interrupted, log, done, error=None):
    """After a Ctrl-C (``interrupted``) or an error (``error``, re-raised): the outputs of what finished are
    written; say so and stop (KeyboardInterrupt: the command line exits with 130)."""
    if error is not None:
        log(f"stopped by {type(error).__name__}: wrote the {done} that finished")
        raise error
    if interrupted:
        log(f"interrupted: wrote the {done} that finished")
        raise KeyboardInterrupt


def _stopped(interrupted, error, done):
    """What stopped an experiment before its end (``"interrupted after 2 of 6 sizes"``), or None if it ran to the
    end: its outputs are then partial and decide no claim."""
    if error is not None:
        return f"stopped by {type(error).__name__} after {done}"
    return f"interrupted after {done}" if interrupted else None


def reproduce_pull_diag(out_dir, iterations=100, d=4, seed=0, log=print):
    """Figure 1: consensus error of Pull-Diag (and the A-protocol) on the paper's 16-node graphs.

    Returns a dict ``graph -> (beta, kappa, final Pull-Diag error, final A-protocol error)``.
    """
    os.makedirs(out_dir, exist_ok=True)
    graphs = {"exponential": topology.exponential(16), **topology.paper_graphs()}
    Z = np.random.default_rng(seed).standard_normal((16, d))
    curves, table = {}, {}
    for name, A in graphs.items():
        m = A.metrics()
        pd_ = pull_diag(A, Z, iterations)
        ap = a_protocol(A, Z, iterations)
        curves[name] = (pd_.errors, ap.errors)
        table[name] = (m.beta, m.kappa, float(pd_.errors[-1]), float(ap.errors[-1]))
    import pandas as pd

    frame = pd.DataFrame({"k": np.arange(iterations + 1)})
    for name, (e1, e2) in curves.items():
        frame[f"pull_diag/{name}"] = e1
        frame[f"a_protocol/{name}"] = e2
    frame.to_csv(os.path.join(out_dir, "pull_diag.csv"), index=False)
    log(f"Pull-Diag vs A-protocol, consensus error ||z_k - mean|| after {iterations} steps (16 nodes, d={d}):")
    log(f"{'graph':<18}{'beta':>8}{'kappa':>8}{'Pull-Diag':>12}{'A-protocol':>12}")
    for name, (b, k, e1, e2) in table.items():
        log(f"{name:<18}{b:>8.3f}{k:>8.3f}{e1:>12.2e}{e2:>12.2e}")
    _write_verdict(out_dir, "pull_diag", [
        {"claim": f"{name}: Pull-Diag reaches the average where the A-protocol stays biased", "graph": name,
         "kappa": k, "pull_diag_error": e1, "a_protocol_error": e2,
         "verdict": ("no bias to correct (kappa = 1)" if k < 1 + 1e-9 else "holds" if e1 < e2 else "does not hold")}
        for name, (b, k, e1, e2) in table.items()], log)
    plt = _plt()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for name, (e1, _) in curves.items():
            b, k = table[name][:2]
            ax.semilogy(e1, label=f"{name} (beta={b:.3f}, kappa={k:.2f})")
        ax.semilogy(curves["grid"][1], "k--", label="A-protocol, grid (biased)")
        ax.set_xlabel("k")
        ax.set_ylabel("||z_k - 1 1^T z / n||")
        ax.set_title("Pull-Diag protocol (Figure 1)")
        ax.legend(fontsize=7)
        log(f"wrote {_save(fig, out_dir, 'pull_diag.png')}")
        plt.close(fig)
    return table


def reproduce_linear_speedup(out_dir, iterations=4000, repeats=20, sizes=(1, 2, 8, 16, 128, 512), total=204800,
                             batch=200, seed=0, progress=True, log=print):
    """Figure 2: Pull-Diag-GT on exponential graphs of growing size, the paper's settings.

    Returns ``(finals, slope)``: the final gradient norm (mean over repetitions,
    averaged over the last 10% of records) per ``n``, and the fitted slope of
    ``log(final)`` against ``log(n)`` (linear speedup predicts about -1/2).
    """
    os.makedirs(out_dir, exist_ok=True)
    histories, finals = {}, {}
    interrupted, error = False, None
    try:
        for n in sizes:
            lr = LINEAR_SPEEDUP_LR.get(n, 0.512 / n / 10)
            f = NonconvexLogistic.synthetic(n, total=total, batch=batch, seed=42)
            try:
                h = run(Algorithm(topology.exponential(n), lr), f, iterations, record_every=max(1, iterations // 100),
                        repeats=repeats, seed=seed, progress=progress)
            except DivergenceError as exc:  # one size diverging ended the whole figure
                finals[n] = math.inf
                log(f"n = {n:>4}: lr = {lr:g}, diverged at iteration {exc.iteration}")
                continue
            if h.interrupted:  # Ctrl-C: write what finished, then stop
                interrupted = True
                break
            s = h.summary()
            tail = s["grad_norm"].iloc[-max(1, len(s) // 10):]
            finals[n] = float(tail.mean())
            histories[n] = h
            log(f"n = {n:>4}: lr = {lr:g}, final ||(1/n) 1^T grad f(x)|| = {finals[n]:.4e} "
                f"({h.frame['wall_seconds'].max():.1f} s)")
    except Exception as exc:  # noqa: BLE001 - write what finished, then re-raise (_stop_if)
        error = exc
    done = {n: v for n, v in finals.items() if np.isfinite(v)}
    ns = np.array(list(done), dtype=float)
    vals = np.array(list(done.values()))
    slope = float(np.polyfit(np.log(ns), np.log(vals), 1)[0]) if len(done) > 1 else float("nan")
    log(f"fitted slope of log(final metric) vs log(n): {slope:.3f} (linear speedup: about -0.5)")
    holds = bool(np.isfinite(slope) and abs(slope + 0.5) <= SLOPE_TOLERANCE and len(done) == len(finals))
    _write_verdict(out_dir, "linear_speedup", [{
        "claim": "linear speedup: the final gradient norm falls like n^(-1/2) (a slope of -0.5 within "
                 f"{SLOPE_TOLERANCE})", "slope": slope, "sizes": len(done), "diverged": len(finals) - len(done),
        "verdict": "holds" if holds else "does not hold"}], log,
        stopped=_stopped(interrupted, error, f"{len(finals)} of {len(sizes)} sizes"))
    import pandas as pd

    rows = []
    for n, h in histories.items():
        s = h.summary()
        s.insert(0, "n", n)
        rows.append(s)
    if rows:
        pd.concat(rows).to_csv(os.path.join(out_dir, "linear_speedup.csv"), index=False)
    plt = _plt()
    if plt is not None and histories:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for n, h in histories.items():
            h.plot("grad_norm", ax=ax, label=f"n = {n}")
        ax.set_title(f"Pull-Diag-GT, exponential graphs (slope {slope:.2f})")
        ax.legend(fontsize=7)
        log(f"wrote {_save(fig, out_dir, 'linear_speedup.png')}")
        plt.close(fig)
    _stop_if(interrupted, log, f"{len(finals)} of {len(sizes)} sizes", error)
    return finals, slope


def reproduce_multi_gossip(out_dir, communication_rounds=2000, repeats=5, rounds=(1, 5, 10), total=204800,
                           batch=200, seed=0, progress=True, log=print):
    """Figure 3's synthetic analogue: Pull-Diag-GT vs MG-Pull-Diag-GT (R = 5, 10) on the 16-node paper graphs.

    Every run gets the same budget of communication rounds (and samples):
    ``T = communication_rounds / R`` iterations. Returns a dict
    ``(graph, R) -> final gradient norm`` (``inf`` when the run diverged).
    """
    os.makedirs(out_dir, exist_ok=True)
    f = NonconvexLogistic.synthetic(16, total=total, batch=batch, seed=42)
    graphs = topology.paper_graphs()
    finals, histories = {}, {}
    log(f"MG-Pull-Diag-GT, 16 nodes, {communication_rounds} communication rounds, final ||(1/n) 1^T grad f(x)||:")
    log(f"{'graph':<18}" + "".join(f"{'R = %d' % R:>12}" for R in rounds))
    interrupted, error = False, None
    try:
        for name, A in graphs.items():
            line = f"{name:<18}"
            for R in rounds:
                lr = MULTI_GOSSIP_LR[name].get(R, MULTI_GOSSIP_LR[name][1])
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
    verdicts = []
    for name in graphs:
        if (name, 1) not in finals or not any((name, R) in finals for R in rounds if R > 1):
            continue
        best_R = min((R for R in rounds if R > 1 and (name, R) in finals), key=lambda R: finals[(name, R)])
        verdicts.append({"claim": f"{name}: MG-Pull-Diag-GT ends with a lower gradient norm than Pull-Diag-GT at "
                                  "equal communication", "graph": name, "R": best_R,
                         "final_mg": finals[(name, best_R)], "final_plain": finals[(name, 1)],
                         "verdict": "holds" if finals[(name, best_R)] < finals[(name, 1)] else "does not hold"})
    _write_verdict(out_dir, "multi_gossip", verdicts, log,
                   stopped=_stopped(interrupted, error, f"{len(finals)} of {len(graphs) * len(rounds)} runs"))
    import pandas as pd

    rows = []
    for (name, R), h in histories.items():
        s = h.summary()
        s.insert(0, "R", R)
        s.insert(0, "graph", name)
        rows.append(s)
    if rows:
        pd.concat(rows).to_csv(os.path.join(out_dir, "multi_gossip.csv"), index=False)
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(2, 2, figsize=(8, 6), sharex=True)
        for ax, name in zip(axes.ravel(), graphs):
            for R in rounds:
                if (name, R) in histories:
                    histories[(name, R)].plot("grad_norm", ax=ax, label=f"R = {R}")
            ax.set_title(name)
            if ax.get_legend_handles_labels()[0]:  # (a graph an interruption left without runs has none)
                ax.legend(fontsize=7)
        log(f"wrote {_save(fig, out_dir, 'multi_gossip.png')}")
        plt.close(fig)
    _stop_if(interrupted, log, f"{len(finals)} of {len(graphs) * len(rounds)} runs", error)
    return finals


#: How far the fitted slope of the linear-speedup figure may be from -1/2 for the claim to hold.
SLOPE_TOLERANCE = 0.2


def _write_verdict(out_dir, name, rows, log, stopped=None):
    """``<name>_verdict.csv`` (one row per claim: its numbers and ``verdict``), and a line per claim.

    ``stopped`` (e.g. ``"interrupted after 2 of 6 sizes"``): the run did not finish, so no claim is decided: every
    row's verdict says so, whatever its partial numbers are (a verdict needs the whole experiment).
    """
    import pandas as pd

    if stopped is not None:
        rows = rows or [{"claim": f"{name.replace('_', ' ')}: the paper's claims", "verdict": ""}]
        rows = [{**row, "verdict": f"not decided ({stopped})"} for row in rows]
    if not rows:
        return
    pd.DataFrame(rows).to_csv(os.path.join(out_dir, f"{name}_verdict.csv"), index=False)
    for row in rows:
        numbers = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                            if k not in ("claim", "verdict", "graph"))
        log(f"the paper's claim ({row['claim']}) {row['verdict']} on this run: {numbers}")


def reproduce_robustness(out_dir, rounds_budget=1000, repeats=10, losses=(0.0, 0.1, 0.3, 0.5), mg_rounds=5,
                         bursty=(0.9, 0.05, 0.2), algorithms=None, seed=0, progress=True, log=print):
    """Message loss against the algorithms (issue 12): the directed exponential graph (n = 64) and the paper's
    ring (n = 16), the synthetic logistic problem, each algorithm at the learning rate tuned on the lossless
    network over the whole budget (a tenth of it ranked the rates by noise on the ring), then under Bernoulli
    loss ``p`` in ``losses`` and one bursty (Gilbert-Elliott) setting ``bursty = (p in the bad state, p_bad,
    p_recover)``, all with the same communication budget.

    Row-stochastic receivers renormalise over what arrived (their rows stay stochastic); a push-based
    sender's lost mass is lost. ``algorithms`` default: every registered one whose class is ``in_robustness``
    (read from the registry at the call, so a class registered after import is in). Returns the table (also ``robustness.csv``, and ``robustness.png``: the final
    gradient metric against the loss rate, one line per algorithm, the spread over ``repeats``).
    """
    import pandas as pd

    from . import compare as cmp
    from .network import Lossy

    os.makedirs(out_dir, exist_ok=True)
    graphs = {"exponential (n = 64)": topology.exponential(64), "ring (n = 16)": topology.paper_graphs()["ring"]}
    names = list(labels(lambda cls: cls.in_robustness) if algorithms is None else algorithms)
    settings = [(f"p = {p:g}", p, None) for p in losses]
    if bursty is not None:
        p_bad_state, p_bad, p_recover = bursty
        settings.append((f"bursty (p_bad = {p_bad:g}, p_recover = {p_recover:g})",
                         p_bad_state * p_bad / (p_bad + p_recover), bursty))
    rows, interrupted, error = [], False, None
    try:
        for gname, A in graphs.items():
            f = NonconvexLogistic.synthetic(A.n, total=204800, batch=200, seed=42)
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
                if spec is None:
                    net = A if rate == 0 else Lossy(A, rate, seed=seed + 1)
                else:
                    net = Lossy(A, spec[0], seed=seed + 1, model="gilbert-elliott", p_bad=spec[1], p_recover=spec[2])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # losses can make a tuned rate diverge: recorded
                    frame = cmp.compare(net, f, names, rounds_budget, lr=rates, repeats=repeats, seed=seed,
                                        mg_rounds=mg_rounds, progress=progress, points=10, metric="grad_norm")
                if frame.attrs["interrupted"]:
                    interrupted = True
                    break
                for name in names:
                    part = frame[frame["algorithm"] == name]
                    last = part[part["iteration"] == part["iteration"].max()]
                    status = frame.attrs["status"].get(name, "?")
                    rows.append({"graph": gname, "setting": label, "loss_rate": rate, "algorithm": name,
                                 "lr": rates[name], "grad_norm": float(last["grad_norm"].mean()),
                                 "grad_norm_std": float(last["grad_norm"].std(ddof=0)), "status": status})
                log(f"  {label:<40}" + "  ".join(f"{r['algorithm']} {r['grad_norm']:.2e}"
                                                for r in rows[-len(names):]))
            if interrupted:
                break
    except Exception as exc:  # noqa: BLE001 - write the settings that finished, then re-raise (_stop_if)
        error = exc
    table = pd.DataFrame(rows, columns=["graph", "setting", "loss_rate", "algorithm", "lr", "grad_norm",
                                        "grad_norm_std", "status"]).astype({"loss_rate": float, "lr": float,
                                                                            "grad_norm": float, "grad_norm_std": float})
    table.to_csv(os.path.join(out_dir, "robustness.csv"), index=False)
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(1, len(graphs), figsize=(5.5 * len(graphs), 4), squeeze=False)
        for ax, gname in zip(axes[0], graphs):
            part = table[table["graph"] == gname]
            for k, name in enumerate(names):
                mine = part[part["algorithm"] == name]
                plain = mine[mine["setting"].str.startswith("p =")]
                line = ax.errorbar(plain["loss_rate"], plain["grad_norm"], yerr=plain["grad_norm_std"], marker="o",
                                   capsize=3, label=name)
                burst = mine[~mine["setting"].str.startswith("p =")]
                ax.plot(burst["loss_rate"], burst["grad_norm"], marker="*", markersize=12, linestyle="none",
                        color=line[0].get_color())
            ax.set_yscale("log")
            ax.set_xlabel("message loss rate (star: bursty losses, same mean rate)")
            ax.set_title(f"{gname}, {rounds_budget} communication rounds", fontsize=9)
        axes[0, 0].set_ylabel("final ||(1/n) sum_i grad f_i(x_i)||")
        _finish(plt, fig, axes, out_dir, "robustness.png", log)
    log(f"wrote {os.path.join(out_dir, 'robustness.csv')}")
    _stop_if(interrupted, log, f"{len(rows) // len(names)} of {len(graphs) * len(settings)} settings", error)
    return table


#: What ``rowstoch reproduce communication`` runs: methods with and without error feedback or reference points
#: (CHOCO-SGD, Compressed Push-Pull), gradient tracking, Pull-Diag.
COMMUNICATION_ALGORITHMS = ("dgd", "choco-sgd", "diging", "push-pull", "compressed-push-pull", "pull-diag-gt")


def reproduce_communication(out_dir, rounds_budget=1000, repeats=3, d=32, n=32, algorithms=COMMUNICATION_ALGORITHMS,
                            delays=(1, 2, 4, 8), seed=0, progress=True, log=print):
    """Compressed messages against the algorithms (issue 37): the undirected exponential graph on ``n`` nodes
    (Metropolis weights: every method runs on it), least squares in ``d`` dimensions, each algorithm at the
    learning rate tuned without compression, then under QSGD (8, 4 and 2 bits, unbiased) and top-k
    (``k = d / 4, d / 16``) and delayed messages (delays uniform up to ``delays``) with the same number of
    communication rounds. Returns the table (also ``communication.csv``, and ``communication.png``: the final
    suboptimality against the bytes sent, one line per algorithm through its compression levels, one panel per
    compressor, and against the delay bound in a third: under delays CHOCO-SGD's copies and Compressed
    Push-Pull's mixtures follow the newest message that has arrived)."""
    import pandas as pd

    from . import compare as cmp
    from .algorithms import REGISTRY
    from .network import Compressed, Delayed
    from .objectives import LeastSquares

    os.makedirs(out_dir, exist_ok=True)
    W = topology.exponential(n, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(n, d=d, seed=seed + 7)
    metric = cmp.default_metric(f)
    names = list(algorithms)
    settings = [("none", "none", W)]
    settings += [(f"qsgd {b} bits", "qsgd", Compressed(W, "qsgd", bits=b, seed=seed + 1)) for b in (8, 4, 2)]
    settings += [(f"top-{k}", "topk", Compressed(W, "topk", k=k)) for k in (max(1, d // 4), max(1, d // 16))]
    settings += [(f"delay <= {D}", "delay", Delayed(W, D, seed=seed + 2)) for D in delays]
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
            running = [name for name in names if REGISTRY[name].applies_to(net)]
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
                             f"{metric}_std": float(last[metric].std(ddof=0)),
                             "status": frame.attrs["status"].get(name, "?")})
            log(f"  {label:<14}" + "  ".join(f"{r['algorithm']} {r[metric]:.2e}" for r in rows[-len(running):]))
    except Exception as exc:  # noqa: BLE001 - write the settings that finished, then re-raise (_stop_if)
        error = exc
    table = pd.DataFrame(rows, columns=["setting", "compressor", "algorithm", "lr", "bytes", metric, f"{metric}_std",
                                        "status"]).astype({"lr": float, "bytes": float, metric: float,
                                                           f"{metric}_std": float})
    table.to_csv(os.path.join(out_dir, "communication.csv"), index=False)
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
        ax.set_yscale("log")
        ax.set_xlabel("max_delay (iterations; each message's delay uniform up to it)")
        ax.set_title(f"delayed messages, n = {n}, d = {d}", fontsize=9)
        for ax, (kind, title) in zip(axes[0], panels.items()):
            for name in names:
                mine = table[(table["algorithm"] == name) & table["compressor"].isin(["none", kind])]
                mine = mine[np.isfinite(mine[metric])]
                y = np.maximum(mine[metric], 1e-16)  # (exact to the last bit: drawn at the floor)
                ax.plot(mine["bytes"], y, marker="o", label=name, color=colors[name])
                for (_, row), value in zip(mine.iterrows(), y):
                    ax.annotate(row["setting"].replace(" bits", "b"), (row["bytes"], value), fontsize=6,
                                xytext=(3, 3), textcoords="offset points")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
            ax.set_xlabel(f"bytes sent in {rounds_budget} communication rounds")
            ax.set_title(f"{title}, n = {n}, d = {d}", fontsize=9)
        axes[0, 0].set_ylabel(f"final {metric}")
        _finish(plt, fig, axes, out_dir, "communication.png", log)
    log(f"wrote {os.path.join(out_dir, 'communication.csv')}")
    _stop_if(interrupted, log, f"{len(rows) // max(len(names), 1)} of {len(settings)} settings", error)
    return table


def mlp(inputs, classes=10, hidden=(64, 32, 16)):
    """The four-layer fully connected network of the paper's MNIST experiment (ReLU between layers)."""
    import torch

    sizes = (inputs, *hidden, classes)
    layers = []
    for k in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


#: The horizontal axes of :func:`reproduce_mnist_mlp`.
MNIST_AXES = ("batches", "rounds", "both")


def reproduce_mnist_mlp(out_dir, data="digits", data_dir=None, communication_rounds=2000, repeats=3,
                        rounds=(1, 10), batch=16, alpha=None, record_every=50, graphs=None, seed=0, progress=True,
                        log=print, axis="batches"):
    """The paper's MNIST experiment (Figure 3 / Appendix E): a four-layer MLP on each of 16 nodes, Pull-Diag-GT
    (R = 1) against MG-Pull-Diag-GT (R = 10), on the paper's four 16-node graphs, trained through
    :class:`rowstoch_fast.torch.Replicas` (needs PyTorch); ends with a verdict per graph on the paper's claim
    ("MG-Pull-Diag-GT outperforms on all topologies": a lower final training loss).

    Parameters
    ----------
    data : {"digits", "mnist"}
        scikit-learn's bundled 8x8 digits (no download; the default here) or
        MNIST read from the IDX files in ``data_dir``.
    communication_rounds : int
        The budget of every run, on ``axis``.
    axis : {"batches", "rounds"}
        ``"batches"``, the paper's axis (Appendix E: "at the end of each batch
        (that is, communication round)"): every method runs
        ``communication_rounds`` iterations of one mini-batch of ``batch``
        samples per node, MG-Pull-Diag-GT gossiping ``R`` rounds in each.
        ``"rounds"``, equal communication (eq. 14 as Section 4 charges it):
        ``T = communication_rounds / R`` iterations, each averaging ``R``
        mini-batches. ``"both"``: the two, side by side (a column ``axis``).
    alpha : float, optional
        Split the training data over the nodes with Dirichlet(``alpha``) label
        skew (the paper's heterogeneous experiment) instead of IID.
    record_every : int
        Communication rounds between two records (train loss of every node's
        model on the whole training set, averaged; test accuracy of the nodes'
        models, averaged, and of their pi-weighted average). A run that diverges
        ends with a row marked ``diverged`` (train loss ``inf``).

    Returns
    -------
    pandas.DataFrame
        One row per record and repeat (also written to ``mnist_mlp.csv``, with
        ``mnist_mlp.png``).
    """
    import pandas as pd
    import torch

    from . import datasets
    from .algorithms import PullDiagGT
    from .torch import Replicas, accuracy

    if axis not in MNIST_AXES:
        raise ValueError(f"axis must be one of {', '.join(MNIST_AXES)}, got {axis!r}")
    os.makedirs(out_dir, exist_ok=True)
    if data == "digits":
        X, y = datasets.load_digits()
        perm = np.random.default_rng(seed).permutation(len(y))
        n_test = len(y) // 6
        Xte, yte, Xtr, ytr = X[perm[:n_test]], y[perm[:n_test]], X[perm[n_test:]], y[perm[n_test:]]
    elif data == "mnist":
        if data_dir is None:
            raise ValueError("data='mnist' reads the IDX files from data_dir (nothing is downloaded)")
        Xtr, ytr, Xte, yte = datasets.load_mnist(data_dir)
    else:
        raise ValueError(f"data must be 'digits' or 'mnist', got {data!r}")
    n = 16
    parts = datasets.iid_split(len(ytr), n, seed=seed) if alpha is None else \
        datasets.dirichlet_split(ytr, n, alpha, seed=seed)
    Xtr_t, ytr_t = torch.as_tensor(Xtr, dtype=torch.float32), torch.as_tensor(ytr)
    Xte_t, yte_t = torch.as_tensor(Xte, dtype=torch.float32), torch.as_tensor(yte)
    all_graphs = topology.paper_graphs()
    names = list(all_graphs) if graphs is None else list(graphs)
    rows = []
    log(f"MLP on {data} ({len(ytr)} training samples over {n} nodes), "
        + (f"{communication_rounds} batches (the paper's axis; MG gossips R rounds per batch)" if axis == "batches"
           else f"{communication_rounds} communication rounds (MG: R rounds and R mini-batches per iteration)")
        + f", {repeats} repeats")
    log(f"{'graph':<18}{'R':>4}{'train loss':>12}{'test accuracy':>15}")
    views = ("batches", "rounds") if axis == "both" else (axis,)
    total = len(names) * len(rounds) * repeats * len(views)
    bar = progress_bar(progress, total, 0, "mnist-mlp")
    interrupted, error = False, None
    try:
        for view, name in [(view, name) for view in views for name in names]:
            A = all_graphs[name].astype(np.float32)
            pi = A.pi
            for R in rounds:
                lr = MULTI_GOSSIP_LR[name].get(R, MULTI_GOSSIP_LR[name][1])
                finals = []
                for rep in range(repeats):
                    torch.manual_seed(seed + rep)
                    replicas = Replicas(mlp(Xtr.shape[1]), n)
                    gen = np.random.default_rng([seed, rep, R])

                    draws = R if view == "rounds" else 1  # mini-batches per iteration (averaged: eq. 14b)

                    def batch_fn(node, t, gen=gen):
                        idx = parts[node][gen.integers(0, len(parts[node]), batch)]
                        return Xtr_t[idx], ytr_t[idx]

                    grad_fn = replicas.grad_fn(batch_fn, rounds=draws)
                    opt = PullDiagGT(A, replicas.x0(), lr=lr, rounds=R)
                    T = communication_rounds // R if view == "rounds" else communication_rounds
                    every = max(1, record_every // R) if view == "rounds" else record_every
                    diverged = False
                    for t in range(T + 1):
                        if t % every == 0 or t == T:
                            replicas.set_params(opt.gather_x())
                            losses, _ = replicas.evaluate(Xtr_t, ytr_t)
                            _, acc = replicas.evaluate(Xte_t, yte_t)
                            central = accuracy(replicas.module(weights=pi), Xte_t, yte_t)
                            rows.append({"axis": view, "graph": name, "R": R, "repeat": rep, "iteration": t,
                                         "communication_rounds": t * R, "batches": t * draws,
                                         "samples": t * draws * batch,
                                         "train_loss": float(np.mean(losses)), "test_accuracy": float(np.mean(acc)),
                                         "test_accuracy_centroid": central, "diverged": False})
                        if t == T:
                            break
                        try:
                            opt.step(grad_fn)
                        except DivergenceError as exc:
                            diverged = True
                            rows.append({"axis": view, "graph": name, "R": R, "repeat": rep,
                                         "iteration": exc.iteration,
                                         "communication_rounds": exc.iteration * R,
                                         "batches": exc.iteration * draws, "samples": exc.iteration * draws * batch,
                                         "train_loss": math.inf, "test_accuracy": math.nan,
                                         "test_accuracy_centroid": math.nan, "diverged": True})
                            break
                    finals.append(math.inf if diverged else rows[-1]["train_loss"])
                    if bar is not None:
                        bar.update(1)
                last = [r for r in rows if r["axis"] == view and r["graph"] == name and r["R"] == R
                        and r["iteration"] == T]
                acc = np.mean([r["test_accuracy"] for r in last]) if last else math.nan
                log(f"{name:<18}{R:>4}{np.mean(finals):>12.4f}{acc:>15.3f}"
                    + (f"   ({view})" if len(views) > 1 else ""))
    except KeyboardInterrupt:  # Ctrl-C: write the records so far, then stop
        interrupted = True
    except Exception as exc:  # noqa: BLE001 - write the records so far, then re-raise (_stop_if)
        error = exc
    if bar is not None:
        bar.close()
    frame = pd.DataFrame(rows, columns=["axis", "graph", "R", "repeat", "iteration", "communication_rounds",
                                        "batches", "samples", "train_loss", "test_accuracy",
                                        "test_accuracy_centroid", "diverged"])
    frame.to_csv(os.path.join(out_dir, "mnist_mlp.csv"), index=False)
    verdict = pd.concat([_mnist_verdict(frame[frame["axis"] == view], names, rounds, repeats).assign(axis=view)
                         for view in views], ignore_index=True)
    stopped = _stopped(interrupted, error, f"{len(rows)} records")
    if stopped is not None:  # partial records decide no claim
        verdict["claim"] = f"not decided ({stopped})"
    verdict.to_csv(os.path.join(out_dir, "mnist_mlp_verdict.csv"), index=False)
    for v in verdict.itertuples():
        log(f"{v.graph}{' (' + v.axis + ')' if len(views) > 1 else ''}: the paper's claim (MG-Pull-Diag-GT, R = "
            f"{v.R_mg}, ends with a lower training loss than Pull-Diag-GT) {v.claim} on this run: "
            f"{v.train_loss_mg:.4f} ({v.diverged_mg} of {repeats} diverged) against {v.train_loss_plain:.4f} "
            f"({v.diverged_plain} of {repeats} diverged); test accuracy {v.test_accuracy_mg:.3f} against "
            f"{v.test_accuracy_plain:.3f}")
    plt = _plt()
    if plt is not None and len(frame):
        fig, axes = plt.subplots(2 * len(views), len(names), figsize=(3 * len(names), 5.5 * len(views)),
                                 squeeze=False)
        for v, view in enumerate(views):
            top, bottom = axes[2 * v], axes[2 * v + 1]
            for k, name in enumerate(names):
                for R in rounds:
                    part = frame[(frame["axis"] == view) & (frame["graph"] == name) & (frame["R"] == R)]
                    label = "Pull-Diag-GT" if R == 1 else f"MG-Pull-Diag-GT (R = {R})"
                    failed = part[part["diverged"]]
                    if len(failed):  # say so where the curve stops (or is missing)
                        top[k].text(0.02, 0.02 + 0.08 * rounds.index(R), f"{label}: diverged in {len(failed)} of "
                                    f"{repeats} runs", transform=top[k].transAxes, fontsize=7)
                    part = part[~part["diverged"]]
                    x = "batches" if view == "batches" else "communication_rounds"
                    mean = part.groupby(x)[["train_loss", "test_accuracy"]].mean()
                    top[k].plot(mean.index, mean["train_loss"], label=label)
                    bottom[k].plot(mean.index, mean["test_accuracy"], label=label)
                top[k].set_title(name + (f" ({view})" if len(views) > 1 else ""))
                top[k].set_yscale("log")
                bottom[k].set_xlabel("batches (the paper's axis)" if view == "batches" else "communication rounds")
            top[0].set_ylabel("training loss (nodes' mean)")
            bottom[0].set_ylabel("test accuracy (nodes' mean)")
        _finish(plt, fig, axes, out_dir, "mnist_mlp.png", log)
    log(f"wrote {os.path.join(out_dir, 'mnist_mlp.csv')}")
    _stop_if(interrupted, log, f"{len(rows)} records", error)
    return frame


def _mnist_verdict(frame, names, rounds, repeats):
    """Per graph: the final training loss and test accuracy of plain Pull-Diag-GT (the smallest R) and of the
    largest R (means over the runs that did not diverge; a run that diverged counts as losing), and whether the
    paper's claim holds on this run."""
    import pandas as pd

    plain, mg = min(rounds), max(rounds)
    rows = []
    for name in names:
        out = {"graph": name, "R_mg": mg}
        for key, R in (("plain", plain), ("mg", mg)):
            part = frame[(frame["graph"] == name) & (frame["R"] == R)]
            failed = part.groupby("repeat")["diverged"].any()  # a run that diverged: none of its records count
            diverged = int(failed.sum())
            ended = part[~part["repeat"].isin(failed[failed].index)]
            last = ended[ended["iteration"] == ended["iteration"].max()] if len(ended) else ended
            out[f"train_loss_{key}"] = float(last["train_loss"].mean()) if len(last) and diverged < repeats \
                else math.inf
            out[f"test_accuracy_{key}"] = float(last["test_accuracy"].mean()) if len(last) else math.nan
            out[f"diverged_{key}"] = diverged
        holds = (out["diverged_mg"] <= out["diverged_plain"] and out["train_loss_mg"] < out["train_loss_plain"])
        out["claim"] = "holds" if holds else "does not hold"
        rows.append(out)
    return pd.DataFrame(rows, columns=["graph", "R_mg", "train_loss_plain", "train_loss_mg", "test_accuracy_plain",
                                       "test_accuracy_mg", "diverged_plain", "diverged_mg", "claim"])


def demo(out_dir="rowstoch-demo", log=print, progress=True):
    """The main job on the embedded default: metrics, then Pull-Diag-GT vs MG-Pull-Diag-GT on the paper's graphs.

    Runs the synthetic problem of Appendix E.2 (n = 16, d = 10, 204,800 samples,
    batch 200) for 1,000 communication rounds with R in {1, 5, 10} on the four
    16-node graphs, prints a summary table and writes ``multi_gossip.png`` and
    ``multi_gossip.csv``. Takes well under a minute on 2 cores.
    """

    graphs = {"exponential-16": topology.exponential(16), **{f"paper-{k}": v for k, v in topology.paper_graphs().items()}}
    log("Network metrics of the paper's 16-node graphs (Section 2.2, Appendix E.1):")
    log(metrics_table(graphs.items()))
    log("")
    return reproduce_multi_gossip(out_dir, communication_rounds=1000, repeats=3, rounds=(1, 5, 10), progress=progress, log=log)
