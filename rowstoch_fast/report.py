"""Paper-ready outputs of a comparison: tables (Markdown, LaTeX) and multi-panel figures.

Tables show the final value of each metric as mean +- standard deviation over the repetitions, the best
finished run of each column in bold, and the status of every run; they are plain text (LaTeX with booktabs
rules, no package of ours needed). Figures have one panel per (graph, metric), colour-blind-safe colours
(Okabe and Ito) with a marker and a line style per algorithm, so they read in grey too.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AXES", "METRIC_LABELS", "check_axis", "check_formats", "draw", "figure", "to_latex", "to_markdown",
           "tuning_figure"]

#: ``--x`` choices: the frame's column and the axis label.
AXES = {"rounds": ("communication_rounds", "communication rounds"),
        "gradients": ("gradient_evaluations", "gradient evaluations (all nodes)"),
        "bytes": ("bytes", "bytes sent"),
        "seconds": ("wall_seconds", "wall time (s)")}
#: How each metric is written on an axis or a table's head.
METRIC_LABELS = {
    "suboptimality": "f(x̄) − f*",
    "distance": "mean ‖x_i − x*‖",
    "consensus_error": "consensus error",
    "grad_norm_mean": "‖∇f(x̄)‖",
    "grad_norm": "‖(1/n) Σ ∇f_i(x_i)‖ (paper)",
    "grad_norm_centroid": "‖∇f(πᵀx)‖",
    "loss": "(1/n) Σ f_i(x_i)",
    "descent_deviation": "descent deviation",
}
_TEX_LABELS = {
    "suboptimality": r"$f(\bar x) - f^\star$",
    "distance": r"$\frac{1}{n}\sum_i \|x_i - x^\star\|$",
    "consensus_error": "consensus error",
    "grad_norm_mean": r"$\|\nabla f(\bar x)\|$",
    "grad_norm": r"$\|\frac{1}{n}\sum_i \nabla f_i(x_i)\|$",
    "grad_norm_centroid": r"$\|\nabla f(\pi^\top x)\|$",
    "loss": r"$\frac{1}{n}\sum_i f_i(x_i)$",
    "descent_deviation": "descent deviation",
}
#: Okabe and Ito's colour-blind-safe palette (black last).
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", "-.", ":")
#: Resolution of saved raster figures.
DPI = 300
FORMATS = ("png", "pdf", "svg")


def check_axis(x):
    """``x`` if it is one of :data:`AXES`, else a ValueError naming the choices."""
    if not isinstance(x, str) or x not in AXES:
        raise ValueError(f"x must be one of {', '.join(AXES)}, got {x!r}")
    return x


def check_formats(formats):
    """``formats`` (a comma-separated string or a sequence) as a list of :data:`FORMATS`."""
    if isinstance(formats, str):
        formats = [f.strip().lower() for f in formats.split(",") if f.strip()]
    formats = list(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"format must be among {', '.join(FORMATS)}, got {', '.join(map(str, bad)) or 'nothing'}")
    return list(dict.fromkeys(formats))


def pyplot():
    """matplotlib's pyplot on the Agg backend where no display was chosen, or an ImportError saying how to get it."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install 'rowstoch_fast[plot]'") from exc
    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(i):
    """Colour, marker and line style of the ``i``-th line (no two of the first 40 alike)."""
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[(i // len(COLOURS)) % len(LINESTYLES)]}


def draw(ax, frame, metric, x="rounds"):
    """One line per algorithm of ``frame``: the mean of ``metric`` over repetitions against ``x``, a band of one
    standard deviation, log scale; a run that did not finish is marked in its label."""
    column, label = AXES[check_axis(x)]
    # a run that converged to rounding records 0 (or -1e-16) suboptimality: drawn at a floor of 1e-16 of the
    # metric's scale (the largest record of a run that finished); a diverging run leaves the panel at 1e16 of
    # that scale (its label says so) instead of crushing it
    finished = frame["status"] == "done" if "status" in frame.columns else ~frame["diverged"].astype(bool)
    scale = frame.loc[finished, metric].to_numpy(dtype=np.float64)
    scale = scale[np.isfinite(scale) & (scale > 0)]
    floor = 1e-16 * (float(scale.max()) if scale.size else 1.0)
    ceiling = 1e32 * floor
    for i, (name, runs) in enumerate(frame.groupby("algorithm", sort=False)):
        g = runs.groupby(column, sort=True)[metric]
        with np.errstate(invalid="ignore", over="ignore"):
            mean, std = g.mean().clip(lower=floor), g.std(ddof=0).fillna(0)
            mean = mean.where(np.isfinite(mean) & (mean <= ceiling))
            std = std.where(np.isfinite(std) & (mean + std <= ceiling), 0.0)
        status = runs["status"].iloc[0] if "status" in runs.columns else (
            "diverged" if runs["diverged"].iloc[0] else "done")
        note = "" if status == "done" else f" ({status})"
        st = style(i)
        line = ax.plot(mean.index, mean.values, label=f"{name}, lr {runs['lr'].iloc[0]:.2g}{note}",
                       markevery=max(1, len(mean) // 8), markersize=4.5, linewidth=1.4, **st)[0]
        ax.fill_between(mean.index, np.clip(mean - std, floor, None), mean + std, color=line.get_color(),
                        alpha=0.12, linewidth=0)
    ax.set_yscale("log")
    ax.set_xlabel(label)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    ax.grid(True, which="major", alpha=0.3)


def figure(frames, metrics, x="rounds", path=None, formats=("png",), titles=None, dpi=DPI):
    """A figure with one panel per (frame, metric): rows are the frames (graphs), columns the metrics, one shared
    legend below. Saved as ``path`` + ``.`` + each of ``formats`` (PNG at :data:`DPI` dpi). Returns the Figure.

    Parameters
    ----------
    frames : sequence of pandas.DataFrame
        What :func:`~rowstoch_fast.compare.compare` returns, one per graph.
    metrics : sequence of str
    x : {"rounds", "gradients", "bytes", "seconds"}
    path : str, optional
        The files' path without suffix.
    formats : sequence of {"png", "pdf", "svg"}
    titles : sequence of str, optional
        One per frame (row).
    dpi : int
        Resolution of a PNG (default :data:`DPI`).
    """
    check_axis(x)
    formats = check_formats(formats)
    plt = pyplot()
    rows, cols = len(frames), len(metrics)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows + 0.9), squeeze=False)
    for r, frame in enumerate(frames):
        for c, metric in enumerate(metrics):
            ax = axes[r, c]
            draw(ax, frame, metric, x)
            if titles:
                ax.set_title(f"{titles[r]}: {METRIC_LABELS.get(metric, metric)}", fontsize="medium")
    handles, labels = _legend_entries(axes)
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)) if len(labels) > 4 else len(labels),
               fontsize="small", frameon=False)
    fig.tight_layout(rect=(0, _legend_room(len(labels), fig), 1, 1))
    if path is not None:
        for fmt in formats:
            fig.savefig(f"{path}.{fmt}", dpi=dpi)
    return fig


def _legend_entries(axes):
    """The legend entries of every panel, each algorithm once (the rates differ between graphs: the name only)."""
    seen = {}
    for ax in axes.ravel():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            name = label.split(",")[0]
            seen.setdefault(name, handle)
    return list(seen.values()), list(seen)


def _legend_room(entries, fig):
    lines = math.ceil(entries / (3 if entries > 4 else max(entries, 1)))
    return min(0.4, (0.28 * lines + 0.15) / fig.get_figheight())


def tuning_figure(tuning, path=None, formats=("png",)):
    """Every tuning candidate's score against its rate, one panel per algorithm, one line per rung (rejected
    candidates as crosses at the top); ``tuning`` is ``frame.attrs["tuning"]``. Returns the Figure or None."""
    if not tuning:
        return None
    formats = check_formats(formats)
    plt = pyplot()
    cols = min(3, len(tuning))
    rows = math.ceil(len(tuning) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (label, record) in zip(axes.ravel(), tuning.items()):
        finite = [s for rung in record["rungs"] for s in rung["scores"].values() if math.isfinite(s)]
        top = max(finite) * 3 if finite else 1.0
        for i, rung in enumerate(record["rungs"]):
            lrs = sorted(rung["scores"])
            ok = [lr for lr in lrs if lr not in rung["rejected"]]
            st = style(i)
            ax.plot(ok, [rung["scores"][lr] for lr in ok], color=st["color"], marker=st["marker"],
                    linestyle=st["linestyle"], label=f"{rung['rounds']} rounds")
            bad = [lr for lr in lrs if lr in rung["rejected"]]
            ax.plot(bad, [top] * len(bad), color=st["color"], marker="x", linestyle="none")
        if record.get("chosen") is not None:
            ax.axvline(record["chosen"], color="0.4", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{label}: lr {record['chosen']:.2g}" if record.get("chosen") else label, fontsize="medium")
        ax.set_xlabel("learning rate")
        ax.set_ylabel(METRIC_LABELS.get(record["metric"], record["metric"]))
        ax.legend(fontsize="x-small")
    for ax in axes.ravel()[len(tuning):]:
        ax.set_visible(False)
    fig.tight_layout()
    if path is not None:
        for fmt in formats:
            fig.savefig(f"{path}.{fmt}", dpi=DPI)
    return fig


def _cells(table, metrics):
    """``{metric: [(text, mean, std, best) per row]}`` and the best row per metric (finished runs only)."""
    out = {}
    for m in metrics:
        means = table[m].to_numpy(dtype=np.float64)
        ok = (table["status"] == "ok").to_numpy() & np.isfinite(means)
        groups = table["graph"].to_numpy() if "graph" in table.columns else np.zeros(len(table))
        best = np.zeros(len(table), dtype=bool)
        if m + "_best" in table.columns:  # the summary's own judgement (ties within rounding)
            best = table[m + "_best"].fillna(False).to_numpy(dtype=bool)
        else:
            for g in dict.fromkeys(groups):
                idx = np.flatnonzero((groups == g) & ok)
                if idx.size:
                    best[idx[means[idx] == means[idx].min()]] = True
        out[m] = [(means[i], table[m + "_std"].iloc[i], bool(best[i])) for i in range(len(table))]
    return out


def _num(v, digits=2):
    if not math.isfinite(v):
        return "inf" if v > 0 else ("nan" if v != v else "-inf")
    return f"{v:.{digits}e}"


def to_markdown(table, metrics=None):
    """A :func:`~rowstoch_fast.compare.summary` table as Markdown: mean ± std per metric, the best finished run of
    each metric (per graph) in bold, the rate and where it came from, and every run's status."""
    metrics = list(metrics or [table.attrs.get("metric", "final")])
    cells = _cells(table, metrics)
    graph = "graph" in table.columns
    head = (["graph"] if graph else []) + ["algorithm", "lr (source)", "R", "rounds"] + \
        [METRIC_LABELS.get(m, m) for m in metrics] + ["status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * (len(head) - len(metrics) - 1)
                                                           + ["---:"] * len(metrics) + ["---"]) + "|"]
    for i, r in enumerate(table.itertuples()):
        row = ([str(r.graph)] if graph else []) + [r.algorithm, f"{r.lr:.3g} ({r.lr_source})" if r.lr_source else
                                                   f"{r.lr:.3g}", str(r.rounds_per_iteration),
                                                   str(r.communication_rounds)]
        for m in metrics:
            mean, std, best = cells[m][i]
            text = f"{_num(mean)} ± {_num(std, 1)}"
            row.append(f"**{text}**" if best else text)
        row.append(r.status)
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _tex(text):
    return (str(text).replace("\\", r"\textbackslash{}").replace("&", r"\&").replace("%", r"\%")
            .replace("_", r"\_").replace("#", r"\#"))


def to_latex(table, metrics=None, caption=None):
    """A :func:`~rowstoch_fast.compare.summary` table as a LaTeX ``tabular`` with booktabs rules (``\\usepackage
    {booktabs}``): mean $\\pm$ std per metric, the best finished run of each metric (per graph) in bold."""
    metrics = list(metrics or [table.attrs.get("metric", "final")])
    cells = _cells(table, metrics)
    graph = "graph" in table.columns
    cols = ("l" if graph else "") + "lrrr" + "r" * len(metrics) + "l"
    head = (["graph"] if graph else []) + ["algorithm", "lr (source)", "$R$", "rounds"] + \
        [_TEX_LABELS.get(m, _tex(m)) for m in metrics] + ["status"]
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\setlength{\tabcolsep}{4pt}"]
    if caption:
        lines.append(r"\caption{" + _tex(caption) + "}")
    lines += [r"\begin{tabular}{" + cols + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    previous = None
    for i, r in enumerate(table.itertuples()):
        if graph and previous is not None and r.graph != previous:
            lines.append(r"\midrule")
        previous = r.graph if graph else None
        row = ([_tex(r.graph)] if graph else []) + [_tex(r.algorithm),
                                                    _tex(f"{r.lr:.3g}" + (f" ({r.lr_source})" if r.lr_source else "")),
                                                    str(r.rounds_per_iteration), str(r.communication_rounds)]
        for m in metrics:
            mean, std, best = cells[m][i]
            text = f"{_num(mean)} $\\pm$ {_num(std, 1)}"
            row.append(r"\textbf{" + text + "}" if best else text)
        row.append(_tex(r.status))
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
