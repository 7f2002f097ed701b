"""Paper-ready outputs of a comparison: tables (Markdown, LaTeX) and multi-panel figures.

Tables show the final value of each metric as mean +- standard deviation over the repetitions, its rank (shared
where the repetitions cannot tell runs apart; rank 1 in bold; only runs that ended ``ok`` ranked), the status of
every run and one line of diagnosis for those that did not end ``ok`` (or ran at the next stable rate, or ended
near the no-progress bar); they are
plain text (LaTeX with booktabs rules and numbers as ``$(1.83 \\pm 0.29) \\times 10^{-1}$``, no package of ours
needed). Figures have one panel per (graph or setting, metric), colour-blind-safe colours (Okabe and Ito) with a marker and a line style per
algorithm (no two of the first 24 alike), so they read in grey too; a run that leaves the range of the runs that
ended ``ok`` is cut at the panel's edge with a marker there. PDF and PostScript files embed TrueType (Type 42)
fonts, as IEEE's PDF eXpress and ACM ask (Type 3 fonts are refused).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import re
import sys
import textwrap

import numpy as np

from ._checks import (check_caption, check_int, check_names, check_not_subnormal, check_positive_float, check_text,
                      finite_float, fmt_bytes)
from ._files import file_target

__all__ = ["AXES", "METRIC_LABELS", "COST_UNITS", "check_axis", "check_cost_weights", "check_formats", "draw", "figure",
           "ranks_caption", "table_caption", "to_latex", "to_markdown", "with_cost",
           "tuning_figure"]

#: ``--x`` choices: the frame's column and the axis label.
AXES = {"rounds": ("communication_rounds", "communication rounds"),
        "gradients": ("gradient_evaluations", "gradient evaluations (all nodes)"),
        "bytes": ("bytes", "bytes sent"),
        "seconds": ("wall_seconds", "wall time (s)"),
        "cost": ("cost", "cost")}  # (with_cost: weighted operations; its label says the weights)
#: The x axes whose ticks count things, written with an SI prefix ("200 kB", "1.5 M"), and their unit.
COUNTED = {"gradients": "", "bytes": "B", "cost": ""}
#: What a cost weight is per (:func:`with_cost`): the column of a comparison's records it multiplies.
COST_UNITS = {"gradient": "gradient_evaluations", "round": "communication_rounds", "message": "messages",
              "byte": "bytes"}
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
    "test_loss": "test loss of x̄",
    "test_accuracy": "test accuracy of x̄",
    "test_mse": "test MSE of x̄",
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
    "test_loss": r"test loss of $\bar x$",
    "test_accuracy": r"test accuracy of $\bar x$",
    "test_mse": r"test MSE of $\bar x$",
}
#: Okabe and Ito's colour-blind-safe palette (black last).
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")  # (not "d": a thin "D", helper 189)
#: One line style per round of the palette: lines 0-7 solid, 8-15 dashed, 16-23 dotted, 24-31 dash-dotted, then
#: long dashes and dash-dot-dotted (``rowstoch compare``'s default on an undirected network runs 42 methods).
LINESTYLES = ("-", "--", ":", "-.", (0, (8, 2)), (0, (4, 1.5, 1, 1.5, 1, 1.5)))
#: Lines whose colour, marker and line style are all their own (:func:`style`).
DISTINCT_STYLES = len(COLOURS) * len(LINESTYLES)
#: matplotlib settings of every file written: TrueType (Type 42) fonts in PDF and PostScript.
SAVE_RC = {"pdf.fonttype": 42, "ps.fonttype": 42}
#: Resolution of saved raster figures.
DPI = 300
#: Resolution of the tuning figure (a diagnostic of up to dozens of panels, not a figure for a paper).
TUNING_DPI = 120
FORMATS = ("png", "pdf", "svg")


def check_axis(x):
    """``x`` if it is one of :data:`AXES`, else a ValueError naming the choices."""
    if not isinstance(x, str) or x not in AXES:
        raise ValueError(f"x must be one of {', '.join(AXES)}, got {x!r}")
    return x


#: The largest cost weight: a weight of 1e308 made every cost inf (NumPy's overflow warning, then an axis of inf);
#: 1e100 times counts up to 2^62, summed over the four units, stays finite with room to spare.
COST_WEIGHT_MAX = 1e100


def check_cost_weights(weights):
    """``weights`` (``{unit: weight}``, or the text ``"gradient=1,round=100"``) checked: units among
    :data:`COST_UNITS`, weights finite, in ``[0, COST_WEIGHT_MAX]``, not all 0. Returns the dict."""
    if isinstance(weights, str):
        items = weights.split(",")
        pairs = [w.partition("=") for w in items if w.strip()]
        if len(pairs) < len(items) and pairs:  # (an empty item, "gradient=1,,round=1", had been skipped without a
            # word: helper 192)
            raise ValueError(f"cost weights: item {[w.strip() for w in items].index('') + 1} of {weights!r} is empty")
        if any(not sep for _, sep, _ in pairs) or not pairs:
            raise ValueError(f"cost weights must be UNIT=WEIGHT pairs, comma-separated (units: {', '.join(COST_UNITS)}), "
                             f"got {weights!r}")
        units = [k.strip() for k, _, _ in pairs]
        twice = next((u for u in units if units.count(u) > 1), None)
        if twice is not None:
            raise ValueError(f"cost weights: {twice!r} is given twice")
        try:
            weights = {k.strip(): float(v) for k, _, v in pairs}
        except ValueError:
            raise ValueError(f"cost weights must be numbers, got {weights!r}") from None
    if not isinstance(weights, dict) or not weights:
        raise ValueError(f"cost weights must map units ({', '.join(COST_UNITS)}) to weights, got {weights!r}")
    for unit, w in weights.items():
        if unit not in COST_UNITS:
            raise ValueError(f"cost weights: unknown unit {unit!r}; choose from {', '.join(COST_UNITS)}")
        if not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
            raise ValueError(f"cost weights: {unit} must be a finite number >= 0, got {w!r}")
        check_not_subnormal(w, f"cost weights: {unit}", zero_too=True)  # (its digits lost, helper 192)
        if w > COST_WEIGHT_MAX:
            raise ValueError(f"cost weights: {unit} must be at most {COST_WEIGHT_MAX:g}, got {w!r} (a cost of "
                             f"counts up to 2^62 must stay finite; only the weights' ratios shape the axis)")
    if not any(weights.values()):
        raise ValueError("cost weights: at least one must be > 0")
    return {unit: float(w) for unit, w in weights.items()}


def with_cost(frame, weights):
    """``frame`` with a ``cost`` column, ``sum_unit weights[unit] * frame[COST_UNITS[unit]]`` (e.g. a gradient
    evaluation 1 and a communication round 100: ``{"gradient": 1, "round": 100}``), and the axis label that says
    so (``frame.attrs["cost_label"]``): the ``--x cost`` axis of ``rowstoch compare``.

    Examples
    --------
    >>> import pandas as pd
    >>> f = with_cost(pd.DataFrame({"gradient_evaluations": [0, 32], "communication_rounds": [0, 2]}),
    ...               "gradient=1,round=100")
    >>> f["cost"].tolist(), f.attrs["cost_label"]
    ([0.0, 232.0], 'cost (1 per gradient evaluation + 100 per communication round)')
    """
    weights = check_cost_weights(weights)
    if not hasattr(frame, "columns") or not hasattr(frame, "attrs"):  # (a dict had met .to_numpy)
        raise TypeError(f"frame must be a DataFrame of compare() (or its summary), got {type(frame).__name__}")
    lacking = [u for u in weights if COST_UNITS[u] not in frame.columns]
    if lacking:  # (pandas' KeyError 'bytes' had named the column alone, helper 204)
        raise ValueError(f"cost weights: {lacking[0]} weighs the frame's {COST_UNITS[lacking[0]]!r} column, which it "
                         f"does not have")
    frame = frame.copy()
    frame["cost"] = sum(w * frame[COST_UNITS[u]].to_numpy(dtype=np.float64) for u, w in weights.items())
    names = {"gradient": "gradient evaluation", "round": "communication round", "message": "message", "byte": "byte"}
    frame.attrs["cost_label"] = "cost (" + " + ".join(f"{w:g} per {names[u]}" for u, w in weights.items() if w) + ")"
    return frame


def check_formats(formats):
    """``formats`` (a comma-separated string or a sequence) as a list of :data:`FORMATS`."""
    if isinstance(formats, str):
        formats = [f.strip().lower() for f in formats.split(",") if f.strip()]
    if not hasattr(formats, "__iter__"):  # (None: "'NoneType' object is not iterable", helper 204)
        raise TypeError(f"format must be among {', '.join(FORMATS)} (a comma-separated string or a list), got "
                        f"{type(formats).__name__} {formats!r:.60}")
    formats = list(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"format must be among {', '.join(FORMATS)}, got {', '.join(map(str, bad)) or 'nothing'}")
    return list(dict.fromkeys(formats))


def pyplot():
    """matplotlib's pyplot, on the Agg backend where no backend was chosen (no ``MPLBACKEND``, no
    ``matplotlib.use``, no matplotlibrc's, pyplot not imported: a script's figures need no display), or an
    ImportError saying how to get it. A backend chosen is left as it is (a notebook's inline backend, set through
    ``MPLBACKEND`` before pyplot is imported, had been switched to Agg by the first figure written)."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib, a dependency of rowstoch_fast that this install lacks: "
                          "pip install matplotlib") from exc
    if "matplotlib.pyplot" not in __import__("sys").modules and not _backend_chosen(matplotlib):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def axes_for(ax, figsize, path=None, dpi=DPI):
    """``with axes_for(ax, figsize, path) as ax:`` the Axes to draw into: ``ax``, or a new figure's of ``figsize``.
    Once drawn, with ``path`` the figure is laid out and saved there (:func:`save`: a PDF's fonts TrueType), and a
    figure made here is then closed (a loop of saved plots had kept every figure open; its Axes stays usable, e.g.
    ``ax.figure.savefig``); one made here whose drawing or save failed is closed. pyplot as matplotlib picks its
    backend (a plot saved, then another shown: the backend is not switched)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib, a dependency of rowstoch_fast that this install lacks: "
                          "pip install matplotlib") from exc
    made = ax is None
    with closing_on_error(plt) if made else contextlib.nullcontext():
        if made:
            _, ax = plt.subplots(figsize=figsize)
        yield ax
        if path is not None:
            ax.figure.tight_layout()
            save(ax.figure, path, dpi)
            if made:
                plt.close(ax.figure)


class closing_on_error:
    """``with closing_on_error(plt):``: the figures made in the block are closed if it raises (an interrupted or
    failed save had left them open: in a notebook, half-drawn figures shown at the end of the cell and piling up
    past matplotlib's "more than 20 figures" warning). What the block closes itself it keeps closing."""

    def __init__(self, plt):
        self.plt = plt

    def __enter__(self):
        self.before = set(self.plt.get_fignums())
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None:
            for number in set(self.plt.get_fignums()) - self.before:
                self.plt.close(number)
        return False


def check_backend():
    """A ValueError naming ``MPLBACKEND`` where it is set to a backend matplotlib cannot load here (an unknown name,
    a ``module://`` that does not import, a GUI toolkit missing): what a command checks before it runs, since its
    figures come last (a run finished, then a traceback, and the folder's old figure stayed beside the new
    records). Unset, or pyplot already imported: nothing to check."""
    import importlib.util

    value = os.environ.get("MPLBACKEND")
    if not value or "matplotlib.pyplot" in sys.modules or importlib.util.find_spec("matplotlib") is None:
        return
    try:
        import matplotlib
        import matplotlib.pyplot as plt

        plt.switch_backend(matplotlib.rcParams["backend"])  # (loaded at the first figure otherwise)
    except Exception as exc:  # noqa: BLE001 - matplotlib's ValueError, an ImportError of the backend's module
        said = (str(exc).splitlines() or [""])[0][:200]
        raise ValueError(f"MPLBACKEND={value!r}: matplotlib cannot use it here ({type(exc).__name__}: {said}); "
                         "unset it, or name one that loads (MPLBACKEND=Agg writes the figures without a "
                         "display)") from None


def _backend_chosen(matplotlib):
    """Whether a matplotlib backend was chosen (else matplotlib picks one when pyplot is first imported)."""
    if os.environ.get("MPLBACKEND"):
        return True
    chosen = getattr(matplotlib.rcParams, "_get_backend_or_none", None)  # (matplotlib >= 3.6)
    if chosen is not None:
        return chosen() is not None
    from matplotlib import rcsetup  # pragma: no cover - older matplotlib

    return dict.__getitem__(matplotlib.rcParams, "backend") is not getattr(rcsetup, "_auto_backend_sentinel", None)


def style(i):
    """Colour, marker and line style of the ``i``-th line: the first :data:`DISTINCT_STYLES` (48) differ in their
    (colour, line style) pair, the first 96 in their (colour, marker) pair (each round of the palette shifts the
    markers by one: lines ``i`` and ``i + 24`` had shared both, differing in their dashes alone, helper 219's
    SONATA and LT-ADMM two black diamonds); then the cycle repeats."""
    i = check_int(i, "i")  # ("a": a TypeError of % formatting, helper 204)
    colour, round_ = i % len(COLOURS), i // len(COLOURS)
    return {"color": COLOURS[colour], "marker": MARKERS[(colour + round_) % len(MARKERS)],
            "linestyle": LINESTYLES[round_ % len(LINESTYLES)]}


def _undated(format):
    """``savefig``'s metadata that leaves the date out of a PDF or SVG file (two runs of one comparison wrote PDFs
    that differed in their ``/CreationDate`` alone)."""
    import matplotlib

    format = str(format or matplotlib.rcParams["savefig.format"]).lower()
    return {"metadata": {"CreationDate": None}} if format == "pdf" else \
        {"metadata": {"Date": None}} if format == "svg" else {}


def save(fig, path, dpi=DPI, format=None):
    """``fig.savefig(path)`` with :data:`SAVE_RC` (Type 42 fonts in a PDF or PostScript file); a file path is
    written beside it first, then renamed (a kill while a figure was written left an empty ``compare.png``); a
    PDF or SVG file holds no date, so that two runs of one comparison write the same bytes.
    ``dpi``: a number > 0 (an array had raised NumPy's "truth value ... is ambiguous" inside matplotlib).
    The format is ``format``, else the path's extension, else matplotlib's ``savefig.format`` (whose extension is
    then added to the name, as ``savefig`` does). Returns the path written."""
    if not hasattr(fig, "savefig"):  # (None: an AttributeError, helper 204)
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    dpi = dpi if isinstance(dpi, str) and dpi == "figure" else check_positive_float(dpi, "dpi")  # (matplotlib's
    # "figure": the figure's own)
    import matplotlib

    with matplotlib.rc_context(SAVE_RC), np.errstate(over="ignore", invalid="ignore"):  # (matplotlib 3.5: figure)
        if not isinstance(path, (str, os.PathLike)):  # (a file object: as it is)
            _check_pixels(fig, dpi, format or matplotlib.rcParams["savefig.format"])
            fig.savefig(path, dpi=dpi, format=format, **_undated(format))
            return path
        path = os.fspath(path)
        if os.path.isdir(path):  # (matplotlib's rule wrote DIR.png beside the folder DIR, helper 185)
            raise IsADirectoryError(f"cannot save the figure to {path!r}: it is a folder; give a file's name in it "
                                    f"(e.g. {os.path.join(path, 'figure.png')!r})")
        ext = os.path.splitext(path)[1][1:]
        if format is None and not ext:
            format = matplotlib.rcParams["savefig.format"]
            path = f"{path}.{format}"
        target = file_target(path)  # (through a link; a device or FIFO refused, not replaced: helper 218)
        folder = os.path.dirname(target) or "."
        if not os.path.isdir(folder):  # (the error named the temporary file: 'h.png.part'; a link's target's too,
            # helper 222)
            raise FileNotFoundError(f"cannot save the figure to {path!r}: its folder {folder!r} does not exist")
        _check_pixels(fig, dpi, format or ext)
        tmp = f"{target}.part"
        try:
            fig.savefig(tmp, dpi=dpi, format=format or ext, **_undated(format or ext))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return path


#: The largest raster image :func:`save` writes: Agg's own limit a side, and 2^28 pixels (1 GiB of RGBA) in all.
MAX_PIXELS_SIDE, MAX_PIXELS = 2**16, 2**28


def _check_pixels(fig, dpi, format):
    """A ValueError naming ``dpi`` where ``fig`` saved at it as a raster image (not PDF, SVG or PostScript) would
    be past :data:`MAX_PIXELS`: dpi = 10000 had taken a minute and 9.5 GB, dpi = 1e6 a bare std::bad_alloc
    (helper 204)."""
    if str(format).lower() in ("pdf", "svg", "svgz", "eps", "ps"):
        return
    inches = fig.get_size_inches()
    scale = fig.dpi if isinstance(dpi, str) else dpi
    width, height = (float(v) * scale for v in inches)
    if max(width, height) >= MAX_PIXELS_SIDE or width * height > MAX_PIXELS:
        raise ValueError(f"dpi = {scale:g} makes the {inches[0]:g} x {inches[1]:g} in figure an image of {width:.0f} x "
                         f"{height:.0f} pixels ({fmt_bytes(width * height * 4)}): at most "
                         f"{MAX_PIXELS_SIDE - 1} a side and 2^28 in all; lower dpi")


def spread_within(mean, spread, lowest, highest):
    """``(low, high)``: ``mean`` -+ ``spread`` (NaN: none) within ``[lowest, highest]``, the repetitions' own
    range; on a log panel mean - spread falls below zero where the repetitions spread widely (0.05, 0.26 and 0.05:
    to the panel's floor, decades below every one of them). NaN where ``mean`` is."""
    mean = np.asarray(mean, dtype=np.float64)
    width = np.nan_to_num(np.asarray(spread, dtype=np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        return (np.minimum(np.maximum(mean - width, lowest), mean),
                np.maximum(np.minimum(mean + width, highest), mean))


#: The highest a panel reaches: records above it leave it (a margin and ticks above about 1e307 overflow).
TOP = 1e300


def _require_cost(frame):
    """A ValueError with the advice where ``frame`` has no ``cost`` column (x = "cost" reads it)."""
    if "cost" not in frame.columns:
        raise ValueError("x = 'cost' needs the records' cost column: report.with_cost(frame, weights) first")


def by_record(runs, column):
    """One method's records ``runs`` grouped record by record for a curve over ``column``: by ``iteration`` where
    the records have it (each repetition's record of an iteration together, at the mean of their ``column``: the
    gradients, messages, bytes or seconds of repetitions that drew other clients or links differ, and grouped by
    their own value they had never met, the mean line a sawtooth through the repetitions' points, helper 273), by
    ``column`` otherwise."""
    return runs.groupby("iteration" if "iteration" in runs.columns else column, sort=True)


def draw(ax, frame, metric, x="rounds"):
    """One line per algorithm of ``frame``: the mean of ``metric`` over repetitions against ``x``, a band of one
    standard deviation (within the repetitions' range: on a log panel the mean minus one standard deviation can
    fall decades below every record), log scale (linear for a metric where higher is better, e.g. ``test_accuracy``:
    :func:`~rowstoch_fast.user_metrics.linear_scale`). The panel spans the records of the runs that ended ``ok``
    (a margin around them), and reaches down by up to three decades more to those of the other runs; a run that
    leaves it upwards (it diverged, or climbed) is cut at the edge, where a triangle edged in black marks the point,
    a record below it is drawn at the bottom, with a triangle down edged in black where a run that was in the panel
    first does (one more than three decades below the ``ok`` runs, or at rounding: 0 or -1e-16, its label then
    ending "(to rounding)"), and a run that did not end ``ok`` says so in its label. A count (calls, messages:
    :data:`~rowstoch_fast.user_metrics.COUNTS`) spans every run's records."""
    from .user_metrics import COUNTS, linear_scale

    check_text(metric, "metric")
    column, label = AXES[check_axis(x)]
    if x == "cost":
        _require_cost(frame)
        label = frame.attrs.get("cost_label", label)
    ax.set_xlabel(textwrap.fill(label, X_LABEL_WIDTH))  # (a cost's weights ran into the next panel's label)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
    if len(frame) and not np.isfinite(frame[metric].to_numpy(dtype=np.float64)).any():  # (no value: an empty panel
        # that says so, not one marked as a run that left it, helper 218; descent_deviation where no method records
        # it, helper 222: not refused, which had ended a comparison whose runs had all finished; every value inf
        # too, helper 224)
        ax.text(0.5, 0.5, "no finite record\n(not recorded by these methods,\nor every value NaN or infinite)",
                transform=ax.transAxes, ha="center", va="center", fontsize="small", color="0.35")
        ax.set_xticks([])
        ax.set_yticks([])  # (no scale of 0 .. 1 it never had)
        return
    linear = linear_scale(metric, getattr(frame, "attrs", {}).get("extra_metrics"))
    finished = frame["status"].isin(["ok", "done"]) if "status" in frame.columns else ~frame["diverged"].astype(bool)
    if metric in COUNTS:  # (a count of calls or messages is no sign of a run's failure: every run's spans the panel,
        # where one that did not end ok had been cut at its edge with the triangle of a run that diverged)
        finished = finished | True
    if not finished.any():  # no run ended ok: the span of those that did not diverge (a diverged one at 1e286 set
        # the panel to 1e270 .. 1e286, and the runs ending near 5 were drawn flat at its floor), else of every one
        calm = frame["status"] != "diverged" if "status" in frame.columns else ~frame["diverged"].astype(bool)
        finished = calm if calm.any() else finished | True
    after = frame["iteration"] > 0
    flat = _at_rounding_throughout(frame, metric, finished, after, linear)
    if (finished & ~flat).any():  # (a run at rounding from its first record, centralized's consensus error of
        # 1e-16 .. 1e-15, had stretched the panel over 14 decades, the decentralized runs' 1e-3 .. 1 in its top
        # strip, helper 246: drawn at the bottom, "(to rounding)", as one that reached it is)
        finished = finished & ~flat
    values = frame.loc[finished, metric].to_numpy(dtype=np.float64)
    later = frame.loc[finished & after, metric].to_numpy(dtype=np.float64)
    others = frame.loc[~finished & ~flat & after, metric].to_numpy(dtype=np.float64)
    values, later, others = (v[np.isfinite(v) & (linear | (v > 0))] for v in (values, later, others))
    top = float(values.max()) if values.size else 1.0
    # the lowest record after the start sets the bottom (a consensus error starts at 0); a run that converged to
    # rounding records 0 (or -1e-16): the panel stops at 1e-16 of the largest record
    floor = max(1e-16 * top, float(later.min()) / 3.0) if later.size else None
    if others.size and not linear:  # a run that did not end ok may fall below those that did (a lossy
        # Pull-Diag-GT's consensus error, drawn flat at the bottom a decade above its records): the panel reaches
        # down to it, by 3 decades at most below them (a useless rate's run at 1e-10 squeezed the others into the
        # top decade of nine), all the way where they have no record above 0 (a consensus error of exactly 0)
        theirs = max(1e-16 * top, float(others.min()) / 3.0)
        floor = theirs if floor is None else min(floor, max(theirs, floor * 1e-3))
    floor = 1e-16 * top if floor is None else floor
    if floor >= top and not linear:  # (the ok runs have no record after their start above the other runs' floor, an
        # ok run at 0 from its first step: the panel had run upside down, 2.3e-4 .. 1.6e-17, helper 230) the calm
        # other runs' records set the top; with none, the floor is the ok runs' rounding (a diverged run leaves it)
        calm = frame["status"] != "diverged" if "status" in frame.columns else ~frame["diverged"].astype(bool)
        theirs = frame.loc[~finished & ~flat & after & calm, metric].to_numpy(dtype=np.float64)
        theirs = theirs[np.isfinite(theirs) & (theirs > 0)]
        if theirs.size:
            top = max(top, float(theirs.max()))
        else:
            floor = 1e-16 * top
    top = min(top, TOP)  # (a record at 1e308: its margin overflowed, and so did matplotlib's ticks, helper 218)
    if floor >= top:  # (only the cap can put it there now: records above TOP, whose floor had stayed over the top,
        # the panel upside down, 2.2e307 .. 3e300; matplotlib 3.5 then labelled a tick at inf and raised, .ci/oldest)
        floor = top / 10.0
    high = top * 3.0
    if linear:  # (the records' range and a tenth of it around)
        bottom = float(values.min()) if values.size else 0.0
        margin = 0.1 * (top - bottom) or 0.1 * max(abs(top), 1.0)
        floor, high = bottom - margin, top + margin
    for i, (name, runs) in enumerate(frame.groupby("algorithm", sort=False)):
        records = by_record(runs, column)
        g = records[metric]
        with np.errstate(invalid="ignore", over="ignore"):
            mean, std = g.mean(), g.std(ddof=1).fillna(0)
            lowest, highest = g.min().to_numpy(dtype=np.float64), g.max().to_numpy(dtype=np.float64)
            xs = records[column].mean().to_numpy(dtype=np.float64)
        ys = mean.to_numpy(dtype=np.float64)
        out = ~np.isfinite(ys) | (ys > high)
        if np.isfinite(ys).any():  # (a metric without a value before the first round ends, the clients' drift: its
            # line starts there; it had been cut before its first point, marked as a run that left the panel,
            # helper 273; a run without a finite record, diverged at its start, keeps its mark, helper 274)
            out[:int(np.argmax(np.isfinite(ys)))] = False
        cut = int(np.argmax(out)) if out.any() else len(ys)  # drawn up to where it leaves the panel
        status = runs["status"].iloc[0] if "status" in runs.columns else (
            "diverged" if runs["diverged"].iloc[0] else "ok")
        note = "" if status in ("ok", "done") else f" ({status})"
        rounds = _pd_numbers(runs["rounds_per_iteration"])[:1] if "rounds_per_iteration" in runs.columns else []
        rounds = int(rounds[0]) if len(rounds) and np.isfinite(rounds[0]) else 1  # (NaN: records without it)
        shown_name = f"{name} (R = {rounds})" if rounds > 1 else name  # (the table's R column: a figure pasted
        # into a paper without it had left MG-Pull-Diag-GT's gossip rounds unsaid, helper 246)
        st = style(i)
        shown = np.clip(ys[:cut], floor, None)
        if not linear:  # records below the panel before the first inside it (a consensus error starting at 0 from a
            # common x0) are not drawn: clipped to the floor they would show a start the run never had
            below = ~(ys[:cut] >= floor)
            if not below.all():
                shown[:int(np.argmin(below))] = np.nan
            elif cut < len(ys):  # (below it, then above: its triangle alone; a square at its floor read as a record)
                shown[:] = np.nan
            # (a run below the panel throughout stays drawn at its floor: at rounding, 0 or under 1e-16 of the top)
        seen = ~np.isnan(shown)
        rounding = not linear and bool((seen & ~(ys[:cut] > 1e-16 * top)).any()) and bool((ys[:cut] > floor).any())
        mask = flat.to_numpy(dtype=bool)  # (by position: a frame concatenated without ignore_index repeats labels)
        throughout = bool(mask[(frame["algorithm"] == name).to_numpy()].all()) and not mask.all()
        line = ax.plot(xs[:cut], shown, label=f"{shown_name}, lr {runs['lr'].iloc[0]:.2g}{note}"
                       + (" (to rounding)" if rounding or throughout else ""),  # (helper 202: centralized at -4.4e-16 read 2e-4)
                       markevery=max(1, len(shown) // 8), markersize=4.5, linewidth=1.4, **st)[0]
        if not linear:  # where a run's records fall below the panel's bottom after being in it (a run that did not
            # end ok, more than 3 decades below the others, or one that reached rounding): a triangle down at the
            # bottom, edged in black and larger than the lines' markers (helper 202: a method whose own marker is a
            # triangle down hid it), as one leaving the top has one up (drawn flat at the bottom, it read as records)
            deep = seen & (ys[:cut] < floor) & ((ys[:cut] > 1e-16 * top) | rounding)  # (at rounding throughout,
            # a consensus error of 0 from a common start: no mark)
            if deep.any():
                ax.plot([xs[int(np.argmax(deep))]], [floor], marker="v", markersize=8, color=line.get_color(),
                        markeredgecolor="black", clip_on=False, linestyle="none")
        band_low, band_high = spread_within(shown, std.to_numpy(dtype=np.float64)[:cut], lowest[:cut], highest[:cut])
        with np.errstate(invalid="ignore"):
            ax.fill_between(xs[:cut], np.clip(band_low, floor, None), np.clip(band_high, floor, high),
                            color=line.get_color(), alpha=0.12, linewidth=0)
        if cut < len(ys):  # where it left the panel
            x_out = xs[cut]
            if cut > 0:
                ax.plot([xs[cut - 1], x_out], [shown[-1], high], color=line.get_color(), linewidth=1.0,
                        linestyle=st["linestyle"])
            ax.plot([x_out], [high], marker="^", markersize=8, color=line.get_color(), markeredgecolor="black",
                    clip_on=False, linestyle="none")
    ax.set_yscale("linear" if linear else "log")
    ax.set_ylim(floor if linear else floor / 1.5, high)
    if x in COUNTED:  # (matplotlib writes counts below 1e6 in full: "100000200000300000" under a narrow panel)
        from matplotlib.ticker import EngFormatter, MaxNLocator

        ax.xaxis.set_major_formatter(EngFormatter(unit=COUNTED[x], sep="\N{THIN SPACE}"))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=X_TICKS, steps=[1, 2, 2.5, 5, 10], min_n_ticks=3))  # (a unit
        # widens each tick: "0 B50 kB100 kB150 kB" ran together at eight ticks, helper 219)
    ax.grid(True, which="major", alpha=0.3)


#: A run whose records after its start all lie this far below the highest level of the panel's other ``ok`` runs
#: is at rounding throughout (:func:`_at_rounding_throughout`).
ROUNDING_THROUGHOUT = 1e-12


def _band_entry(frames):
    """``(handle, label)`` of the legend entry that says what the shaded bands are, where some method of
    ``frames`` ran more than one repetition; else None (helper 246: the bands had been explained nowhere in the
    figure, only in the harness guide)."""
    counts = sorted({int(n) for f in frames if {"rep", "algorithm"} <= set(f.columns) and len(f)
                     for n in f.groupby("algorithm", sort=False)["rep"].nunique()})
    if not counts or counts[-1] < 2:
        return None
    from matplotlib.patches import Patch

    over = f"{counts[0]} repetitions" if len(counts) == 1 else "the repetitions"
    return (Patch(facecolor="0.55", alpha=0.3, linewidth=0),
            f"band: mean \N{PLUS-MINUS SIGN} 1 std over {over}, within their range")


def _at_rounding_throughout(frame, metric, finished, after, linear):
    """A mask of ``frame``'s rows: those of each method that ended ``ok`` (``finished``) whose every record after
    the start (``after``) is 0 or at most :data:`ROUNDING_THROUGHOUT` times the highest level of the other ``ok``
    methods (each one's middle record after the start): a consensus error at rounding from the first step
    (``centralized``, whose nodes hold one iterate). Such a run does not set the panel's bottom. None of them on a
    linear panel."""
    flat = finished & False
    if linear or not finished.any():
        return flat
    values = frame[metric].to_numpy(dtype=np.float64)
    names = frame["algorithm"].to_numpy()
    ok, later = finished.to_numpy(dtype=bool), after.to_numpy(dtype=bool)
    levels = {}  # each ok method's middle record after the start (its level, not a transient's peak: helper 256)
    for name in dict.fromkeys(names[ok]):
        v = np.sort(values[(names == name) & ok & later])
        v = v[np.isfinite(v) & (v > 0)]
        levels[name] = float(v[len(v) // 2]) if v.size else 0.0  # (the lower middle: no mean of two at 1e308)
    for name in levels:
        mine = names == name
        own = values[mine & later]
        top = max((level for other, level in levels.items() if other != name), default=0.0)  # (the highest other
        # level: two runs at rounding do not hide each other)
        if own.size and top > 0 and np.isfinite(own).all() and own.max() <= ROUNDING_THROUGHOUT * top:
            flat = flat | mine
    return flat


def figure(frames, metrics, x="rounds", path=None, formats=("png",), titles=None, dpi=DPI):
    """A figure with one panel per (frame, metric): rows are the frames (graphs), columns the metrics, one shared
    legend below (in as many columns as its measured width allows; the figure grows by its measured height, so it
    meets no panel nor label whatever the number of methods). Saved as ``path`` + ``.`` + each of ``formats`` (PNG
    at :data:`DPI` dpi). Returns the Figure.

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
    given = frames
    frames = [frames] if hasattr(frames, "columns") else frames  # (one frame: one row of panels)
    frames = list(frames) if hasattr(frames, "__iter__") and not isinstance(frames, (str, dict)) else None
    if frames is None or not all(hasattr(f, "columns") for f in frames):
        raise TypeError(f"frames must be a frame of rowstoch_fast.compare.compare or a list of them, got "
                        f"{type(given).__name__}")
    metrics = check_names(metrics, "metrics")
    if not frames or not metrics:  # (matplotlib's "Number of rows must be a positive integer, not 0")
        raise ValueError(f"figure needs at least one frame and one metric, got {len(frames)} frame(s) and "
                         f"{len(metrics)} metric(s)")
    from ._metric_names import METRICS

    for k, frame in enumerate(frames):  # (pandas' KeyError had named the column alone, helper 193)
        if "iteration" not in frame.columns or "final" in frame.columns:
            raise TypeError(f"frames[{k}] is not the records of a comparison (compare()'s frame): "
                            + ("a summary holds no trajectories" if "final" in frame.columns else
                               "it has no iteration column"))
        missing = [m for m in metrics if m not in frame.columns]
        if missing:
            raise ValueError(f"metrics: {missing[0]!r} is not recorded in frames[{k}] (compare(..., metrics=[...]) "
                             f"records it); it holds {', '.join(c for c in frame.columns if c in METRICS) or 'none'}")
        for m in metrics:  # (text: matplotlib's or NumPy's words far below, helper 204)
            try:
                frame[m].to_numpy(dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"metrics: {m!r} in frames[{k}] holds {frame[m].dtype} values that are not numbers "
                                f"(e.g. {frame[m].iloc[0]!r:.40})") from None
        if check_axis(x) == "cost":  # (the advice, not "no column cost")
            _require_cost(frame)
        check_records(frame, f"frames[{k}]", metrics, ("algorithm", "lr", AXES[x][0]))
        check_one_section(frame, f"frames[{k}]")
    if titles is not None:
        titles = [titles] if isinstance(titles, str) else [str(t) for t in titles]
        titles = [check_caption(t, f"titles[{k}]") for k, t in enumerate(titles)]  # (matplotlib's parser's words
        # at the drawing had named none, helper 218)
        if len(titles) != len(frames):  # (fewer had left the last rows untitled, unsaid, helper 204)
            raise ValueError(f"titles: {len(titles)} title(s) for {len(frames)} frame(s); give one per frame")
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path without suffix (str), got {type(path).__name__} {path!r}")
    plt = pyplot()
    rows, cols = len(frames), len(metrics)
    width = max(4.6 * cols, 6.0)
    head = 0.45 if titles else 0.0  # a row's title (its graph and setting) above its panels
    fig, axes = plt.subplots(rows, cols, figsize=(width, (3.2 + head) * rows + 0.9), squeeze=False)
    for r, frame in enumerate(frames):
        for c, metric in enumerate(metrics):
            draw(axes[r, c], frame, metric, x)
            if rows == 1 or r == 0:
                axes[r, c].set_title(METRIC_LABELS.get(metric, metric), fontsize="medium")
    handles, labels = _legend_entries(axes)
    band = _band_entry(frames)
    if band is not None and handles:  # (no method drawn, no band either: helper 256)
        handles, labels = handles + [band[0]], labels + [band[1]]
    entry = max(2.2, 0.85 + max((len(t) for t in labels), default=0) / LEGEND_CHARS)  # (inches: the longest
    # entry's text and its line; a status and a line drawn under another's had run off the figure's edge)
    ncol = max(1, min(len(labels), int(width // entry)))
    legend, ncol = _legend_below(fig, handles, labels, ncol)
    width = fig.get_figwidth()  # (wider where one column of the legend is wider than the panels)
    height = fig.get_figheight()
    bottom = min(0.45, (0.28 * math.ceil(len(labels) / ncol) + 0.15) / height)
    need = _legend_top(fig, legend) + LEGEND_GAP  # (inches from the figure's bottom: its drawn extent)
    if need > bottom * height or bottom * height > 0.9:  # a legend of more than two lines, or one taller than
        # the estimate: the figure grows by the legend's measured height, the panels keep theirs (a fixed height
        # and a reserve capped at 45% of it had put 26 methods' legend over the x labels and the second row's
        # panels, helper 233)
        height = (3.2 + head) * rows + PANELS_SPARE + need
        fig.set_size_inches(width, height)
        bottom = need / height
    texts = [textwrap.fill(str(t), int(width * 11)) for t in titles] if titles else []  # (bold 10 pt: ~11.6 a
    # character per inch, less the margins)
    lines = max((t.count("\n") + 1 for t in texts), default=0)
    for _ in range(3):  # laid out, then checked from the drawn extents: the panels' lowest text above the legend
        with np.errstate(over="ignore", invalid="ignore"):  # (matplotlib 3.5: log ticks of a panel at 1e308)
            fig.tight_layout(rect=(0, bottom, 1, 1 - 0.25 * lines / height), h_pad=2.0 + 2.2 * lines)
        renderer = _renderer(fig)
        with np.errstate(over="ignore", invalid="ignore"):
            low = min(ax.get_tightbbox(renderer).y0 for ax in axes.flat) / fig.dpi
        short = _legend_top(fig, legend) + LEGEND_GAP / 2 - low
        if short <= 0:
            break
        height += short + LEGEND_GAP / 2
        bottom = (bottom * fig.get_figheight() + short + LEGEND_GAP / 2) / height
        fig.set_size_inches(width, height)
    for r, text in enumerate(texts):  # above the row's panels (and the metrics' titles), across them
        above = 0.32 if r == 0 else 0.1
        fig.text(0.5, axes[r, 0].get_position().y1 + above / height, text, ha="center", va="bottom",
                 fontsize="medium", fontweight="bold")
    if path is not None:
        for fmt in formats:
            save(fig, f"{path}.{fmt}", dpi)
    return fig


#: The characters per inch of a legend entry's text (``fontsize="small"``, about 9 points: 53 took 3.3 inches).
LEGEND_CHARS = 16
#: Inches between the figure's legend (below the panels) and the lowest panel's x label.
LEGEND_GAP = 0.12
#: Inches of a figure's height beside its rows of panels and its legend, where the legend is measured (a row's
#: x label and ticks within each row's 3.2 inches, as a figure with one line of legend has them).
PANELS_SPARE = 0.47
#: Inches of the figure's width the legend leaves on either side.
LEGEND_MARGIN = 0.05


def _renderer(fig):
    """The renderer ``fig`` is laid out with (matplotlib 3.5's is found by its tight_layout module)."""
    get = getattr(fig, "_get_renderer", None)  # (matplotlib >= 3.6)
    if get is not None:
        return get()
    from matplotlib.tight_layout import get_renderer  # pragma: no cover - matplotlib 3.5

    return get_renderer(fig)


def _legend_top(fig, legend):
    """The top of ``fig``'s legend, in inches from the figure's bottom (where it is anchored), as drawn."""
    return legend.get_window_extent(_renderer(fig)).y1 / fig.dpi


def _legend_below(fig, handles, labels, ncol):
    """``fig``'s legend of ``labels``, below the panels, in as many columns as fit the figure's width as measured
    (from ``ncol``, the estimate from the longest entry's characters, up while a column more shortens it, down while
    it is wider than the figure: 26 entries of long names had stood in one column as tall as two rows of panels);
    where one column is wider, the figure is widened to it. Returns the Legend and its columns."""
    def make(k):
        return fig.legend(handles, labels, loc="lower center", ncol=k, fontsize="small", frameon=False)

    def wide(legend):
        room = (fig.get_figwidth() - 2 * LEGEND_MARGIN) * fig.dpi
        return legend.get_window_extent(_renderer(fig)).width > room

    legend = make(ncol)
    while ncol > 1 and wide(legend):
        legend.remove()
        ncol -= 1
        legend = make(ncol)
    if wide(legend):  # one column wider than the panels
        fig.set_size_inches(legend.get_window_extent(_renderer(fig)).width / fig.dpi + 2 * LEGEND_MARGIN + 0.01,
                            fig.get_figheight())
    for more in range(ncol + 1, len(labels) + 1):
        if math.ceil(len(labels) / more) == math.ceil(len(labels) / ncol):
            continue  # (no line fewer: as it was)
        trial = make(more)
        if wide(trial):
            trial.remove()
            break
        legend.remove()
        legend, ncol = trial, more
    return legend, ncol


#: The most intervals between ticks of a counted x axis (bytes, messages: each tick's text carries its unit).
X_TICKS = 4
#: The characters of an x axis' label per line (wrapped past it: a cost's weights in words).
X_LABEL_WIDTH = 40


def _legend_entries(axes):
    """The legend entries of every panel, each algorithm once (the rates differ between graphs: the name only),
    with the status of a run that did not end ok, "sgp (diverged)", and in how many rows where not in all of them
    (the legend had dropped it with the rate: a diverged method read as any other); "(to rounding)" likewise, in
    how many rows where not in all of them (a helper's two graphs: the directed ring's row ending at 2.6e-2 to
    8.6e-2 under a legend that said "to rounding" of the exponential row's)."""
    seen, notes, rounding, curves, rounds_of = {}, {}, {}, {}, {}
    for r, row in enumerate(np.atleast_2d(axes)):
        for c, ax in enumerate(row):
            for handle, label in zip(*ax.get_legend_handles_labels()):
                name, _, rest = label.partition(",")
                multi = re.fullmatch(r"(.*) \(R = (\d+)\)", name)  # (draw's "mg (R = 4)": R may differ by row, a
                # graph's Theorem 3 R; one entry per R had drawn two in one style, no row named, helper 256)
                if multi:
                    name = multi.group(1)
                    rounds_of.setdefault(name, {})[r] = int(multi.group(2))
                seen.setdefault(name, handle)
                curves.setdefault(name, {}).setdefault(r, []).append((c, _drawn(handle, ax)))
                said = re.findall(r"\(([^()]*)\)", rest)
                if "to rounding" in said:  # (a panel's own: kept from any panel, not the row's last, helper 210)
                    rounding.setdefault(name, set()).add(r)
                status = [note for note in said if note != "to rounding"]
                notes.setdefault(name, {})[r] = status[0] if status else "ok"
    labels = []
    for name, rows in notes.items():
        failed = sorted({note for note in rows.values() if note != "ok"})
        R = rounds_of.get(name, {})
        shown = name if not R else f"{name} (R = {next(iter(R.values()))})" if len(set(R.values())) == 1 else (
            f"{name} (R = " + ", ".join(f"{R[r]} in row {r + 1}" for r in sorted(R)) + ")")
        if not failed:
            label = shown
        elif all(note != "ok" for note in rows.values()):
            label = f"{shown} ({', '.join(failed)})"
        else:
            counts = (f"{note} in {sum(n == note for n in rows.values())} of {len(rows)} rows" for note in failed)
            label = f"{shown} ({', '.join(counts)})"
        reached = len(rounding.get(name, ()))
        labels.append(label + ("" if not reached else " (to rounding)" if reached == len(rows) else
                               f" (to rounding in {reached} of {len(rows)} rows)") + _hidden(name, curves))
    return list(seen.values()), labels


def _drawn(handle, ax=None):
    """A legend handle's line as drawn: its x data, and its y data as a share of the panel's height (``ax``'s limits,
    in the logarithm on a log axis; the data themselves without ``ax``); None where it has none."""
    try:
        x, y = np.asarray(handle.get_xdata(), dtype=np.float64), np.asarray(handle.get_ydata(), dtype=np.float64)
    except (AttributeError, TypeError, ValueError):
        return None
    if ax is None or not hasattr(ax, "get_ylim"):
        return x, y
    low, high = ax.get_ylim()
    with np.errstate(all="ignore"):
        if ax.get_yscale() == "log":
            low, high, y = np.log10(low), np.log10(high), np.log10(y)
        return x, (y - low) / (high - low) if high > low else y


#: Two lines at the same x values within this share of their panel's height at every point are drawn as one (a
#: line 1.4 points wide covers about 1% of a panel: push-pull 0.35% off centralized, on a panel of two decades, lay
#: hidden under it, unsaid; a share of the values, not of the panel, had said two accuracies half a panel apart
#: were one line, helper 224).
SAME_LINE = 1e-2


def _hidden(name, curves):
    """What a legend entry adds where the method's lines lie under a later-drawn method's in every panel of a row
    (within :data:`SAME_LINE`; ``curves``: name -> row -> ``[(panel, (x, y))]``, in the order drawn, the legend's):
    ``" (under dgd)"``, the last such method, with in how many rows where not in all of them (helper 219: DIGing
    under Compressed Push-Pull in the reliable row, where the two methods coincide, 1.3e-5 apart; the legend listed
    a line no reader could find)."""
    rows = curves[name]
    under = {}
    names = list(curves)
    for other in names[names.index(name) + 1:]:
        for r, drawn in rows.items():
            theirs = dict(curves[other].get(r, ()))
            if len(theirs) == len(drawn) and all(
                    line is not None and theirs.get(c) is not None and line[0].shape == theirs[c][0].shape
                    and np.array_equal(line[0], theirs[c][0], equal_nan=True) and line[1].shape == theirs[c][1].shape
                    and np.allclose(line[1], theirs[c][1], rtol=0.0, atol=SAME_LINE, equal_nan=True)
                    for c, line in drawn):
                under[r] = other
    if not under:
        return ""
    over = {}  # the methods over it, and in how many rows (helper 222: under B in one row and C in the other had
    # read "under C")
    for other in under.values():
        over[other] = over.get(other, 0) + 1
    if len(over) == 1 and len(under) == len(rows):
        return f" (under {next(iter(over))})"
    return " (" + ", ".join(f"under {other} in {count} of {len(rows)} rows" for other, count in over.items()) + ")"


def _merged_stages(stages):
    """The tuning's stages with those of one name together (a confirmation runs in pieces, each judging its
    contenders on all their streams so far): a rate's last score and rejection."""
    merged = {}
    for stage in stages:
        into = merged.setdefault(stage["name"], {"name": stage["name"], "scores": {}, "rejected": {}})
        for lr, score in stage["scores"].items():
            into["scores"][lr] = score
            into["rejected"].pop(lr, None)
            if lr in stage["rejected"]:
                into["rejected"][lr] = stage["rejected"][lr]
    return list(merged.values())


#: The tuner's stages in the order it runs them: a stage keeps its colour and marker in every panel (they had
#: been given by the stage's place in its panel: "fine" and "confirm" the same green triangles).
TUNING_STAGES = ("grid", "search", "refine", "past the edge", "fine", "confirm")


#: The decades below which a panel of :func:`tuning_figure` keeps its labelled minor ticks.
MINOR_TICKS_BELOW = 2


def tuning_figure(tuning, path=None, formats=("png",), dpi=TUNING_DPI, title=None):
    """Every tuning candidate's score against its rate, one panel per algorithm, one line per stage (the grid, its
    refinement, a confirmation's pieces as one; rejected candidates as crosses at the top; a stage in the same
    style in every panel), the chosen rate a dotted line, and where the evaluation found it unstable and the method
    ran at the next stable rate of its tuning, that rate a dash-dotted one (the title names both); ``tuning`` is
    ``frame.attrs["tuning"]``. One legend for every panel (the stages), no minor ticks and fixed margins: a
    diagnostic figure of 27 panels drawn in a second, not five. ``title``: the setting tuned on (graph, n,
    problem, network model), above the panels (a comparison's ``tuning-<setting>.png`` had said it in its file name
    alone, helper 219). Returns the Figure or None."""
    check_text(title, "title", allow_none=True)
    if tuning is not None and not isinstance(tuning, dict):  # (a frame: "truth value of a DataFrame is
        # ambiguous", helper 204)
        raise TypeError(f"tuning must be a comparison's frame.attrs['tuning'] (a dict), got {type(tuning).__name__}"
                        + (": pass frame.attrs['tuning']" if hasattr(tuning, "attrs") else ""))
    if not tuning:
        return None
    formats = check_formats(formats)
    plt = pyplot()
    from matplotlib.ticker import NullLocator

    cols = min(3, len(tuning))
    rows = math.ceil(len(tuning) / cols)
    text = textwrap.fill(f"tuning: {title}", int(4.2 * cols * 11)) if title else ""  # (bold 10 pt: as figure's)
    above = 0.25 * (text.count("\n") + 1) + 0.1 if text else 0.0  # (inches)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows + 0.6 + above), squeeze=False)
    handles = {}
    names = [*TUNING_STAGES, *dict.fromkeys(stage["name"] for record in tuning.values() for stage in record["stages"]
                                            if stage["name"] not in TUNING_STAGES)]
    for ax, (label, record) in zip(axes.ravel(), tuning.items()):
        stages = _merged_stages(record["stages"])
        finite = [s for stage in stages for s in stage["scores"].values() if math.isfinite(s)]
        top = max(finite) * 3 if finite else 1.0
        for stage in stages:
            lrs = sorted(stage["scores"])
            ok = [lr for lr in lrs if lr not in stage["rejected"]]
            i = names.index(stage["name"])
            st = style(i)
            xs = lrs if i == 0 else ok  # (the grid's line broken at a rejected rate: it had joined the rates on
            # either side of a decade of rejected ones as if it ran through them)
            line = ax.plot(xs, [stage["scores"][lr] if lr in ok else math.nan for lr in xs], color=st["color"],
                           marker=st["marker"], linestyle=st["linestyle"] if i == 0 else "none")[0]
            handles.setdefault(stage["name"], line)
            bad = [lr for lr in lrs if lr in stage["rejected"]]
            cross = ax.plot(bad, [top] * len(bad), color="0.35", marker="x", linestyle="none")[0]
            if bad:
                handles.setdefault("rejected", cross)
        chosen, ran = record.get("chosen"), (record.get("retried") or {}).get("next_stable")
        if chosen is not None:
            handles.setdefault("chosen", ax.axvline(chosen, color="0.4", linewidth=0.8, linestyle=":"))
        if ran is not None:
            handles.setdefault("ran (next stable)", ax.axvline(ran, color="0.15", linewidth=0.9, linestyle="-."))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        low, high = ax.get_ylim()
        if not (low > 0 and high / low < 10 ** MINOR_TICKS_BELOW):  # (a panel of less than two decades keeps
            # matplotlib's labelled minor ticks: one of a single labelled tick could not be read, helper 246)
            ax.yaxis.set_minor_locator(NullLocator())
        title = f"{label}: lr {chosen:.2g}" if chosen else label
        if chosen and ran is not None:  # (and each next stable rate that failed too: helper 243)
            failed = "; ".join(f"{g['lr']:.2g} {g.get('status', 'failed')}" for g in [
                {**record["retried"], "lr": chosen}, *(record.get("retried_also") or ())])
            title = f"{label}: lr {ran:.2g} (next stable; {failed})"
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("learning rate", fontsize="small")
        ax.set_ylabel(METRIC_LABELS.get(record["metric"], record["metric"]), fontsize="small")
    for ax in axes.ravel()[len(tuning):]:
        ax.set_visible(False)
    height = fig.get_figheight()
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=len(handles), fontsize="small",
               frameon=False)
    fig.subplots_adjust(left=0.08, right=0.98, top=1 - (0.4 + above) / height, bottom=1.0 / height, hspace=0.55,
                        wspace=0.3)
    if text:
        fig.text(0.5, 1 - 0.1 / height, text, ha="center", va="top", fontsize="medium", fontweight="bold")
    if path is not None:
        for fmt in formats:
            save(fig, f"{path}.{fmt}", dpi)
    return fig


#: The columns that tell a table's sections apart (graph, communication setting).
_GROUPS = ("graph", "setting")


def sections(frame):
    """``frame``'s rows by section (graph and setting), in order of first appearance: ``[(title, rows)]``
    (:func:`section_title`; one, titled ``""``, where it has neither column; a missing label a section too)."""
    present = [g for g in _GROUPS if g in frame.columns]
    if not present:
        return [("", frame)]
    by = present if len(present) > 1 else present[0]  # (pandas 1.5 warns on a list of one)
    return [(section_title(part), part) for _, part in frame.groupby(by, sort=False, dropna=False)]


def escape_mathtext(text):
    """``text`` with each ``$`` not escaped already written ``\\$``: a label drawn as it is (a file's name), not
    read as TeX math by matplotlib (a per-node loss file ``p$_{x$.txt`` had ended a comparison's figures and its
    live view; helper 236)."""
    return re.sub(r"(?<!\\)\$", r"\\$", str(text))


def section_title(frame):
    """The title of a section's records: its graph and setting, ``" / "`` between (``""`` without them)."""
    return " / ".join(str(frame[g].iloc[0]) for g in _GROUPS if g in frame.columns)


def check_one_section(frame, name="frame"):
    """That ``frame``'s records are of one graph and communication setting (its ``graph`` and ``setting`` columns,
    where it has them, hold one value each), else a ValueError naming them: a panel draws one line per algorithm,
    and a compare.csv of three settings read back with pandas had been drawn as their pooled mean (DSGD's line
    ending at 0.11, the mean of 2.3e-4, 6.2e-3 and 0.33, labelled with the first setting's rate; helper 233)."""
    said = [title for title, _ in sections(frame)]
    if len(said) > 1:
        column = "setting" if "setting" in frame.columns else "graph"
        raise ValueError(f"{name} holds the records of {len(said)} sections ({'; '.join(said[:4])}"
                         f"{'; ...' if len(said) > 4 else ''}): a panel draws one; select one "
                         f"(frame[frame[{column!r}] == ...]), or pass one frame per section "
                         "(compare.read_outputs(folder) reads a comparison's folder so)")


def check_records(frame, name, metrics, needed=()):
    """That ``frame`` (named ``name`` in errors) holds a comparison's records as :func:`figure` and
    :func:`~rowstoch_fast.compare.summary` read them, else a ValueError (TypeError for a column of no numbers)
    saying what is wrong (helper 218): each column once; ``needed`` columns and ``metrics`` present, holding
    numbers; iterations that are numbers; one record per
    run and iteration, and one rate per method (two comparisons of one method concatenated, at lr 0.05 and 0.005,
    were summarized as one row, the rate of one and the final value of the other, and drawn as their average); the
    repetitions of a method that ran its budget (``ok``, ``no-progress``, ``unstable``) ending at one iteration (a
    repetition cut at 20 of 40 had been averaged with the others' ends)."""
    columns = list(getattr(frame, "columns", ()))
    twice = next((c for c in columns if columns.count(c) > 1), None)
    if twice is not None:
        raise ValueError(f"{name} has the column {twice!r} twice")
    missing = [c for c in (*needed, *metrics) if c not in columns]
    if missing:
        raise ValueError(f"{name} must be the records compare() returns; it has no column {', '.join(missing)}")
    if not any(c in columns for c in ("status", "diverged")):
        raise ValueError(f"{name} must be the records compare() returns; it has no status (or diverged) column")
    for m in metrics:
        if frame[m].dtype.kind not in "biuf":  # (numbers as text: "dtype 'str' does not support operation 'mean'")
            raise TypeError(f"{name}'s column {m!r} must hold numbers, got dtype {frame[m].dtype}")
    if "iteration" in columns and not np.isfinite(_pd_numbers(frame["iteration"])).all():
        raise ValueError(f"{name}'s iteration column must hold whole numbers, got a missing or non-numeric one")
    groups = [g for g in (*_GROUPS, "algorithm") if g in columns]
    if "algorithm" not in columns or "iteration" not in columns:
        return
    if frame["algorithm"].isna().any():  # (they had been summarized as one method, "nan")
        raise ValueError(f"{name}'s algorithm column has missing labels: every record names its method")
    run = [*groups, "rep"] if "rep" in columns else groups
    doubled = frame.duplicated(subset=[*run, "iteration"])
    if doubled.any():
        row = frame.loc[doubled].iloc[0]
        raise ValueError(f"{name} holds two records of {row['algorithm']} at iteration {row['iteration']}"
                         + (f" (repetition {row['rep']})" if "rep" in columns else "")
                         + ": two runs of one method (two comparisons concatenated?); give each its own label "
                         "(frame.assign(algorithm=...)) or a graph or setting column that tells them apart")
    if "lr" in columns:
        rates = frame.groupby(groups, sort=False)["lr"].nunique()
        if (rates > 1).any():
            key = rates.index[int(np.argmax(rates.to_numpy() > 1))]
            raise ValueError(f"{name} holds runs of {key if isinstance(key, str) else key[-1]} at "
                             f"{int(rates.max())} rates: one method's runs share theirs; give each rate's runs "
                             "their own label (frame.assign(algorithm=...))")
    if "rep" in columns and "status" in columns:
        ok = frame["status"].isin(["ok", "done", "no-progress", "unstable"])  # (ran their budget: not stopped)
        ends = frame.loc[ok].groupby(run, sort=False)["iteration"].max()
        if len(ends):
            spans = ends.groupby(level=list(range(len(groups))), sort=False).agg(["min", "max"])
            apart = spans[spans["min"] != spans["max"]]
            if len(apart):
                key = apart.index[0]
                raise ValueError(f"{name}: the repetitions of {key if isinstance(key, str) else key[-1]}, which "
                                 f"ran their budget, end at iterations {apart['min'].iloc[0]} to "
                                 f"{apart['max'].iloc[0]}: "
                                 "records cut short (a filtered frame?); a summary or figure reads every "
                                 "repetition to its end")


#: The columns of a summary its tables read (:func:`to_markdown`, :func:`to_latex`, the printed one).
SUMMARY_COLUMNS = ("lr", "lr_source", "rounds_per_iteration", "communication_rounds", "final_std", "status")


def _check_summary(table):
    """``table`` if it is a comparison's summary, else a TypeError naming it."""
    if not hasattr(table, "attrs") or not hasattr(table, "columns") or "algorithm" not in table.columns:
        raise TypeError(f"table must be a comparison's summary (a DataFrame from rowstoch_fast.compare.summary), "
                        f"got {type(table).__name__}")
    if "final" not in table.columns:  # (the records themselves: "'Pandas' object has no attribute 'final'")
        raise TypeError("table must be a comparison's summary (rowstoch_fast.compare.summary(frame)), got its "
                        "records" if "iteration" in table.columns else "table must be a comparison's summary "
                        "(rowstoch_fast.compare.summary(frame)): it has no final column")
    missing = [c for c in SUMMARY_COLUMNS if c not in table.columns]
    if missing:  # (pandas' KeyError 'status', or "'Pandas' object has no attribute 'lr_source'": helper 218)
        raise ValueError(f"table must be a comparison's summary (rowstoch_fast.compare.summary(frame)); it has no "
                         f"column {', '.join(missing)}")
    return table


def _summary_metrics(table, metrics):
    """The metrics (names) a table of ``table`` (a summary, checked) shows: ``metrics`` (one name or several), by
    default the summary's own; a name that is not among its columns is a ValueError naming ``metrics``."""
    _check_summary(table)
    names = check_names(metrics, "metrics", allow_none=True) or [table.attrs.get("metric", "final")]
    for m in names:
        if m not in table.columns or m + "_std" not in table.columns:
            shown = [c[:-4] for c in table.columns if c.endswith("_std") and c[:-4] in table.columns]
            raise ValueError(f"metrics: {m!r} is not in this summary, which has {', '.join(shown)} (summary(frame, "
                             "metrics=[...]) adds others)" if shown else "table is not a summary (no mean and "
                             "standard deviation columns): pass summary(frame) of the comparison's frame")
    return names


def _cells(table, metrics):
    """``{metric: [(mean, std, best) per row]}``: best is the summary's own judgement (rank 1 under that metric,
    ties shared); a table without it takes the smallest finished value of its section."""
    out = {}
    groups = [g for g in _GROUPS if g in table.columns]
    section = table[groups].astype(str).agg("|".join, axis=1).to_numpy() if groups else np.zeros(len(table))
    for m in metrics:
        means = table[m].to_numpy(dtype=np.float64)
        ok = (table["status"] == "ok").to_numpy() & np.isfinite(means)
        best = np.zeros(len(table), dtype=bool)
        if m + "_best" in table.columns:
            best = table[m + "_best"].fillna(False).to_numpy(dtype=bool)
        else:
            for g in dict.fromkeys(section):
                idx = np.flatnonzero((section == g) & ok)
                if idx.size:
                    best[idx[means[idx] == means[idx].min()]] = True
        out[m] = [(means[i], float(table[m + "_std"].iloc[i]), bool(best[i])) for i in range(len(table))]
    return out


def _num(v, digits=2):
    if not math.isfinite(v):
        return "inf" if v > 0 else ("nan" if v != v else "-inf")
    return f"{v:.{digits}e}"


def rate_text(lr):
    """A step size as the tables print it: the shortest decimal of at most six significant digits that reads back
    as the rate run (``0.1``, ``0.0749894``, ``5.62341e-05``: a refined rate is kept to six digits, so a rerun at
    the printed value, ``--lr``, is the run itself), else the rate to six digits (a grid point, ``0.00316228`` for
    10^-2.5: ``summary.csv`` and ``lr.json`` keep every digit); not a finite number: as it is. Two significant
    digits were not enough on noisy problems: a rerun at 0.0056 of a run at 0.00562341 under 4-bit QSGD ended at
    8.06e-3 against 7.07e-3."""
    try:
        lr = float(lr)
    except (TypeError, ValueError):  # ("abc": float()'s words, helper 204)
        raise TypeError(f"lr must be a number, got {type(lr).__name__} {lr!r:.60}") from None
    except OverflowError:  # (10**400: "int too large to convert to float", helper 218)
        finite_float(lr, "lr")  # (its words: an integer of so many digits)
    if not math.isfinite(lr):
        return str(lr)
    for digits in range(1, 7):
        text = f"{lr:.{digits}g}"
        if float(text) == lr and not ("e+" in text and abs(lr) < 1e6):  # (10, not 1e+01)
            return text
    return f"{lr:.6g}"


def _lr_cell(r):
    """A row's rate and where it came from, as summary.md and .tex print them: ``0.0749894 (tuned)``."""
    return rate_text(r.lr) + (f" ({r.lr_source})" if r.lr_source else "")


def _rank(r):
    """A row's rank as text: ``1``, ``1=`` (shared), ``-`` (not ranked: the run did not end ok)."""
    rank = getattr(r, "rank", None)
    if rank is None or str(rank) == "<NA>" or (isinstance(rank, float) and math.isnan(rank)):
        return "-"
    return f"{int(rank)}{'=' if getattr(r, 'rank_shared', False) else ''}"


def _notes(table):
    """``(where, algorithm, status, diagnosis)`` of every row that says why it did not end ok, why it is shown at
    another rate than its tuned one, or that it ended near the no-progress bar."""
    groups = [g for g in _GROUPS if g in table.columns]
    return [(" / ".join(str(getattr(r, g)) for g in groups), r.algorithm, r.status, r.diagnosis)
            for r in table.itertuples() if _said(getattr(r, "diagnosis", ""))]


def table_notes(table, metrics, cells=None, metric=None):
    """The notes under a summary ``table`` showing ``metrics`` (its Markdown, LaTeX and text forms alike), those
    that apply, in order: values below the optimum, runs that did not move, repetitions that ended equal, a biased
    method's fixed point (``metric``: :func:`biased_fixed_point`'s), ties far apart, runs that used fewer rounds.
    ``cells``: the table's cells, where computed already."""
    below = _below_optimum(table, metrics, _cells(table, metrics) if cells is None else cells)
    return [note for note in (below, unmoved_start(table), identical_runs(table), biased_fixed_point(table, metric),
                              wide_ties(table), crowded_first(table), rounding_pace(table), fewer_rounds(table))
            if note]


def _said(diagnosis):
    """Whether a summary row's diagnosis says something (a summary read back from summary.csv holds NaN for none)."""
    return isinstance(diagnosis, str) and bool(diagnosis)


#: A mean suboptimality below 0 by at most this much is rounding (f(x) and f* agree to their last digits), where a
#: table does not carry its problem's own level (:func:`_rounding_level`).
ROUNDING = 1e-12


def _rounding_level(table):
    """The level below which a summary ``table``'s suboptimality is rounding: its problem's own
    (``attrs["rounding"]``: the harness's converged level, from f*'s size, the start's and the loss's measured
    rounding near f*), else :data:`ROUNDING` (a table read back from summary.csv). Not the larger of the two: on
    data in small units (a lasso's start 2.7e-10 above f*, its level 6.6e-22) f* off by 1.4e-13, 5e-4 of the
    start, had been called rounding (helper 265)."""
    level = float(getattr(table, "attrs", {}).get("rounding", 0.0) or 0.0)
    return level if math.isfinite(level) and level > 0 else ROUNDING


def below_optimum(table, metrics):
    """:func:`_below_optimum`'s note for a summary ``table`` and the ``metrics`` it shows (the printed table's:
    helper 210 found its f - f* of -4.4e-16 unexplained where summary.md explained it), or None."""
    return _below_optimum(table, metrics, _cells(table, metrics))


def _below_optimum(table, metrics, cells):
    """A note for the rows whose mean suboptimality is below 0, or None: rounding where it is within
    :data:`ROUNDING` of 0 (a run that reached the optimum; or the problem's own, its summary's
    ``attrs["rounding"]``: a float32 problem's records round in steps of 1.5e-8), else a computed ``f*`` that is
    not the minimum."""
    rounding = _rounding_level(table)
    groups = [g for g in _GROUPS if g in table.columns]
    below = {}
    for m in metrics:
        if "suboptimality" not in m:
            continue
        for i, (mean, _, _) in enumerate(cells[m]):
            if math.isfinite(mean) and mean < 0:
                where = " / ".join(str(table[g].iloc[i]) for g in groups)
                name = f"{where}: {table['algorithm'].iloc[i]}" if where else str(table["algorithm"].iloc[i])
                below[name] = min(mean, below.get(name, 0.0))
    if not below:
        return None
    if all(v >= -rounding for v in below.values()):
        return (f"f - f* below 0 ({', '.join(below)}): rounding, not a run better than the optimum; f(x) and the "
                "computed f* agree to their last digits.")
    return (f"f - f* below 0 by more than {rounding:g} ({', '.join(f'{k} {v:.2e}' for k, v in below.items())}): "
            "the f* the objective computed is not exactly its minimum (it is only as exact as the objective's "
            "solver; a user objective's may stop early) and these runs found lower points, or, where |f*| is "
            "large, rounding.")


#: The family-wise level at which :func:`rowstoch_fast.compare.ranks` tells methods apart: two-sided tests of their
#: log final values (paired over the repetitions two methods share, Welch's otherwise), pair by pair, under Holm's
#: step-down over the pairs tested in a table's section
#: (here, below the harness, because the tables' footnotes say it; read at each ranking).
TIE_LEVEL = 0.05
#: The least ratio of two methods' final values (of the geometric means over their repetitions) that
#: :func:`rowstoch_fast.compare.ranks` tells apart, whatever its test says: a tuned rate is chosen on a grid of
#: eighth-decade steps at best, within 1.25x of the best grid rate (issue 47), so a 1% gap between two methods is
#: the tuner's as much as theirs. Helper 205: gaps of 0.4-1.1%, consistent over five repetitions, told a method
#: worse than one and ranked it below another 2.2x above it (a rank counts the methods told better), a verdict that
#: changed with the seed. (Testing the gap beyond ln 1.1 instead of beyond 0 had also tied 61 pairs 1.1-6.8x apart
#: at every seed whose p-values sat by Holm's bars, helper 207.)
TIE_MARGIN = 1.1


def tie_note(one_run, more="two or more"):
    """The footnote of a table whose ranks are shared, after its ``=``: why they are, by the rule of
    :func:`rowstoch_fast.compare.ranks`.

    ``one_run``: every ranked run is one repetition (then nothing tells methods apart); ``more``: how the reader
    asks for more repetitions (the command line's option, or the words).
    """
    if one_run:
        return (f"tied: one repetition tells no method from another ({more} rank them); only runs that ended ok "
                "are ranked.")
    return ("tied: the repetitions cannot tell it from at least one other method: the geometric means of their "
            f"final values are within {TIE_MARGIN:g}x (a tuned rate's resolution), or a two-sided test (paired over "
            f"the seeds two methods share; Welch's otherwise) does not tell them apart at a family-wise "
            f"{TIE_LEVEL:.0%} over the pairs of its section (Holm's step-down), or their means differ by less than "
            "rounding; a rank is 1 + the number of methods told better, so a method whose repetitions spread widely "
            "can rank above one with a lower mean; only runs that ended ok are ranked.")


def single_runs(table):
    """Whether every ``ok`` run of a summary table is one repetition (its spread NaN; an overflowed one is inf)."""
    if "final_std" not in table.columns:
        return False
    std = table.loc[table["status"] == "ok", "final_std"].to_numpy(dtype=np.float64)
    return bool(std.size) and bool(np.isnan(std).all())


def ties_note(table):
    """The footnote of a table whose ranks are shared: why they are (one repetition, or repetitions that cannot
    tell the methods apart)."""
    return "= " + tie_note(single_runs(table))


def identical_runs(table):
    """The note of a table whose ``ok`` runs' repetitions all ended equal (their spread exactly 0: nothing in the
    problem or the network is drawn, or, ProxSkip's coins, the same in each: "nothing is drawn" had been said of
    them, helper 266), else ``""``: their ranks order the final values, which one repetition would
    give as well (the caption's "the repetitions tell better" is no statistics there)."""
    if "final_std" not in table.columns:
        return ""
    parts = [(title, part["final_std"].to_numpy(dtype=np.float64))
             for title, part in sections(table[table["status"] == "ok"]) if len(part)]
    equal = [title for title, std in parts if (std == 0).all()]
    said = f"the ranks order the final values themselves, a ratio below {TIE_MARGIN:g} tied."
    if not equal:
        return ""
    if len(equal) == len(parts):
        return f"Every run's repetitions ended equal (nothing drawn differs between them): {said}"
    return (f"In {', '.join(equal)}, every run's repetitions ended equal (nothing drawn there differs between them): "
            f"there {said}")  # (a
    # table of drawn and undrawn settings, none,qsgd:4,topk:2: the terminal's sections said it, summary.md and .tex
    # did not; helper 233)


#: A run that used less than this share of the communication rounds of the run of its section that used the most
#: gets :func:`fewer_rounds`' note.
FEWER_ROUNDS = 0.9


def fewer_rounds(table):
    """The note of a table where an ``ok`` run used fewer communication rounds than its section's most by more than
    a tenth (:data:`FEWER_ROUNDS`), else ``""``: a multi-round method whose ``R`` rounds an iteration fit the budget
    fewer times than whole (helper 219: MG-Pull-Diag-GT at Theorem 3's R = 118 on a ring of 12 ran 2 iterations,
    236 of the 300 rounds, ``ok``, ranked, its consensus error bold as the best, the command line's warning on
    stderr alone); its values are after fewer rounds than the others'."""
    if "communication_rounds" not in table.columns or "status" not in table.columns or not len(table):
        return ""
    groups = [g for g in _GROUPS if g in table.columns]
    rounds = _pd_numbers(table["communication_rounds"])
    keys = [tuple(table[g].iloc[i] for g in groups) for i in range(len(table))]
    most = {}
    for key, used in zip(keys, rounds):
        if math.isfinite(used):
            most[key] = max(used, most.get(key, 0.0))
    several = _several_sections(table)
    per, done = (_pd_numbers(table[c]) if c in table.columns else np.full(len(table), math.nan)
                 for c in ("rounds_per_iteration", "iterations"))  # (each column read once, not once a row)
    said = []
    for i, (key, used) in enumerate(zip(keys, rounds)):
        if table["status"].iloc[i] != "ok" or not (math.isfinite(used) and used < FEWER_ROUNDS * most[key]):
            continue
        where = " / ".join(map(str, key)) + ": " if several else ""
        how = f" ({int(done[i])} iterations of R = {int(per[i])})" if math.isfinite(per[i]) \
            and math.isfinite(done[i]) and per[i] > 1 else ""
        said.append(f"{where}{table['algorithm'].iloc[i]} {int(used)} of {int(most[key])}{how}")
    if not said:
        return ""
    return (f"Runs that used fewer communication rounds than the others: {'; '.join(said)}; their values are after "
            "those rounds (a budget that holds more of their iterations, or a smaller R, compares them at equal "
            "communication).")


def times_text(ratio):
    """A ratio as the notes write it: ``"3.9x"``, ``"2,175x"`` (whole from 100 up)."""
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def _several_sections(table):
    """Whether ``table`` holds several sections (graphs, settings): then a note names the section it speaks of."""
    groups = [g for g in _GROUPS if g in table.columns]
    return bool(groups) and len(table[groups].drop_duplicates()) > 1


def wide_ties(table):
    """The note of a table where the tests do not tell a method from one whose mean ends ten times lower or more
    (``table.attrs["wide_ties"]``: :func:`~rowstoch_fast.compare.tables.summary`'s), else ``""``: the repetitions
    spread too widely for the tests, at the family-wise level over every pair, to tell it from that one (helper 189:
    GT-SAGA at 8.3e-6 +- 6.3e-6 ranked 1= over two repetitions, ABM at 3.5e-9 14=; helper 202: GT-SAGA 10x above
    20 methods at 1=, ranked 4=), which more repetitions would."""
    wide = getattr(table, "attrs", {}).get("wide_ties") or []
    if not wide:
        return ""
    several = _several_sections(table)
    one = len(wide) == 1
    names = ", ".join((f"{name} ({where})" if where and several else name)
                      + ("" if one else f" {times_text(ratio)}") for where, name, ratio, _ in wide)
    # (each its own ratio: a span over the methods had read as if each were tied with the furthest, helper 210)
    fewest = min(w[3] for w in wide)
    lower = (f"a method with a mean {times_text(wide[0][2])} lower" if one else
             "methods with means that many times lower")
    return (f"{names} {'is' if one else 'are'} not told apart from {lower} (a rank "
            f"counts the methods told better): over {fewest}{'+' if any(w[3] > fewest for w in wide) else ''} "
            f"repetitions the differences spread too widely for the tests, at {TIE_LEVEL:.0%} over the pairs of "
            f"{'each section' if several else 'the table'}, to tell {'it' if one else 'them'} from "
            f"{'it' if one else 'those'}; more repetitions (--repeats) would.")


#: The share of a section's ``ok`` methods (three or more) sharing rank 1 from which :func:`crowded_first` says so.
CROWDED = 2 / 3
#: The least ratio between the final values of the methods sharing rank 1 for :func:`crowded_first`'s note: where
#: they end closer, the margin (:data:`TIE_MARGIN`) ties them as much as the repetitions' spread.
CROWDED_APART = 2.0


def crowded_first(table):
    """The note of a table where most ``ok`` methods of a section (:data:`CROWDED`, three or more) share rank 1,
    not at rounding (:func:`rounding_pace` says those), over repetitions that differ and ending
    :data:`CROWDED_APART` times apart or more, else ``""``: bold there
    marks every method not told from the best, and a reader takes it for a verdict of "all equal" (helper 246:
    MG-Pull-Diag-GT 5.6e-4, Pull-Diag-GT 2.3e-3 and FROST 3.3e-3 all ``1=`` over three repetitions; after
    ``--resume DIR --repeats 6`` the ranks parted, MG first)."""
    if not {"rank", "rank_shared", "status"} <= set(table.columns) or single_runs(table):
        return ""
    paced = {(p[0], p[1]) for p in getattr(table, "attrs", {}).get("paced") or []}  # (section, method: helper 256)
    crowded = []
    for title, part in sections(table[table["status"] == "ok"]):
        if "final_std" in part.columns and (_pd_numbers(part["final_std"]) == 0).all():
            continue  # (its repetitions ended equal: identical_runs says so; a drawn section beside it still speaks,
            # helper 256)
        first = part[(part["rank"] == 1) & part["rank_shared"].astype(bool)]
        first = first[[(title, name) not in paced for name in first["algorithm"]]]
        finals = _pd_numbers(first["final"]) if "final" in first.columns else np.array([])
        finals = finals[np.isfinite(finals)]
        apart = finals.size >= 2 and finals.min() > 0 and finals.max() > CROWDED_APART * finals.min()  # (methods
        # within a few percent of each other are tied by the margin, which more repetitions do not change)
        if len(part) >= 3 and len(first) >= 3 and len(first) >= CROWDED * len(part) and apart:
            crowded.append((f"in {title}, " if title and _several_sections(table) else "")
                           + f"{len(first)} of {len(part)} methods")
    if not crowded:
        return ""
    return (f"{'; '.join(crowded)} share rank 1 (bold: not told apart from the best): their repetitions "
            "spread too widely for the tests to order them, which does not make them equal; more repetitions "
            "(--repeats, or --resume DIR --repeats N to add to this comparison) may tell them apart.")


def rounding_pace(table):
    """The note of a table where two methods or more of a section ended at its rounding level
    (``table.attrs["paced"]``: :func:`~rowstoch_fast.compare.tables.summary`'s), else ``""``: their final values
    cannot order them (they share a rank), so it says how fast each got there, the round from which every
    repetition stayed at or below the level (the level named: the figure's "(to rounding)" reads another, 1e-16 of
    its panel's top, helper 229) and the ranked metric's factor per communication round before it (the table's
    ``rate``), the fastest first."""
    paced = getattr(table, "attrs", {}).get("paced") or []
    if not paced:
        return ""
    metric = getattr(table, "attrs", {}).get("metric") or "ranked metric"
    several = _several_sections(table)
    parts = []
    for where in dict.fromkeys(p[0] for p in paced):
        mine = [p for p in paced if p[0] == where]
        each = ", ".join(f"{name} by round {at}" + (f" ({rate:.3g}x)" if math.isfinite(rate) else "")
                         for _, name, at, rate, _ in mine)
        parts.append(f"{where} (at or below {mine[0][4]:.2g}): {each}" if where and several else each)
    names = list(dict.fromkeys(p[1] for p in paced))
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    level = "their section's rounding level" if several else f"{paced[0][4]:.2g}, the ties' rounding level"
    return (f"{listed} ended at or below {level}, where final values cannot order them; how fast they got there "
            f"(the round from which every repetition's {metric} stayed there; in parentheses its factor per "
            "communication round before, the summary's rate): " + "; ".join(parts) + ".")


def unmoved_start(table):
    """The note of a table in a section of which no ``ok`` run's ranked metric ever left one value (a start that is
    already a minimiser, features all 0: every rate ends alike), else ``""``: its rates (the largest the tuner
    tried) and its shared ranks tell nothing (helper 180's H = 0 had read "lr = 1000 (tuned)", rank 1= each)."""
    unmoved = getattr(table, "attrs", {}).get("unmoved") or []
    if not unmoved:
        return ""
    metric = getattr(table, "attrs", {}).get("metric", "the ranked metric")
    several = _several_sections(table)  # (a section named where there are several)
    where = "; ".join(f"{key}: {value:.3g}" if key and several else f"{value:.3g}" for key, value in unmoved)
    from ._metric_names import RANKED_METRICS  # (the metrics that fall to 0 at a minimiser: a constant test accuracy
    # while the gradient fell had been called an optimal start, helper 187)

    optimal = metric in RANKED_METRICS
    return (f"No run's {metric} left its start value ({where}): " +
            ("the start is already where every method stays (its gradients are 0 there), so " if optimal else
             "by it every rate and method ends alike, so ") +
            "the rates, which the tuner cannot tell apart, and the ranks tell nothing about the methods.")


def biased_fixed_point(table, metric=None):
    """The note of a table ranked by the paper's ``grad_norm`` (``metric``; default the table's own, or, in a summary
    read back from its CSV, the metric whose finals are its ``final`` column) where, in a section, a method that is
    not exact (:attr:`~rowstoch_fast.algorithms.Optimizer.exact`) ranks at or above every exact one, else ``""``:
    that metric reads the nodes' own models, and is 0 at DGD's fixed point away from the minimiser (helper 175: DGD
    ranked 1 at 3.1e-16 on an undirected ring of 128 where f(x̄) - f* was 2.8e-3). Not said of a biased method an
    exact one beats (helper 176: DSGD on a directed graph ends at 0.22 by it, federated methods at 0.03), nor where
    the table shows the mean model too (:data:`MEAN_MODEL_METRICS`: the first of them it has) and the method ends
    there within :data:`BIASED_BY` of the best exact one (helper 177: at a noise floor every method ties by both;
    DSGD ranked first by grad_norm on a ring of 48 was also the best by f(x̄) - f*)."""
    metric = (metric if metric not in (None, "final") else None) or getattr(table, "attrs", {}).get("metric") \
        or _ranked_metric(table)
    if metric != "grad_norm" or "rank" not in table.columns:
        return ""
    from .algorithms import REGISTRY, method_of

    groups = [g for g in _GROUPS if g in table.columns]
    shown = next((m for m in MEAN_MODEL_METRICS if m in table.columns  # (one it has values of: f - f* is NaN
                  and np.isfinite(_pd_numbers(table[m])).any()), None)  # where f* is not known)
    floor = _rounding_level(table)
    values = _pd_numbers(table[shown]) if shown else np.full(len(table), math.nan)
    sections = {}
    for r, value in zip(table.itertuples(), values):
        if _rank(r) != "-":
            exact = getattr(REGISTRY.get(method_of(str(r.algorithm))), "exact", True)
            key = " / ".join(str(getattr(r, g)) for g in groups)
            sections.setdefault(key, []).append((int(r.rank), exact, str(r.algorithm), float(value)))
    biased = {}
    for key, ranked in sections.items():
        exact = [(rank, value) for rank, is_exact, _, value in ranked if is_exact]
        if not exact:
            continue
        best_rank = min(rank for rank, _ in exact)
        best_value = max(min((value for _, value in exact if math.isfinite(value)), default=math.nan), floor)
        biased.update(dict.fromkeys(f"{name} ({key})" if key else name for rank, is_exact, name, value in ranked
                                    if not is_exact and rank <= best_rank
                                    and not (math.isfinite(value) and value <= BIASED_BY * best_value)))
    if not biased:
        return ""
    return (f"{', '.join(biased)} {'ranks' if len(biased) == 1 else 'rank'} at or above the exact methods by "
            "grad_norm = ||(1/n) sum_i grad f_i(x_i)||, which reads the nodes' own models: it is 0 at DGD's fixed "
            "point away from the minimiser (x = W x - lr grad F(x), summed over the nodes where W's columns sum to 1) "
            "and can be small at another method's that is not exact; rank by grad_norm_mean or suboptimality "
            "(--metric) to see where the mean model stands.")


#: The metrics of the nodes' mean model that tell :func:`biased_fixed_point` where a method ranked high by
#: ``grad_norm`` stands, in this order of preference.
MEAN_MODEL_METRICS = ("suboptimality", "grad_norm_mean", "distance")
#: How much above the best exact method's a method that is not exact ends by :data:`MEAN_MODEL_METRICS` before
#: :func:`biased_fixed_point` says so (the repetitions' spread at a noise floor: helper 177's 1.683e-3 against
#: 1.669e-3).
BIASED_BY = 2.0


def _pd_numbers(column):
    """A summary's column as float64 numbers (NaN where an entry is none: one read back from its CSV may hold
    anything)."""
    import pandas as pd

    return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)


def _ranked_metric(table):
    """The metric a summary ranks whose ``attrs`` are lost (read back from summary.csv): the one whose final means
    are its ``final`` column; None where none is."""
    if "final" not in table.columns:
        return None
    final = _pd_numbers(table["final"])
    for m in [c[:-len("_std")] for c in table.columns if c.endswith("_std") and c != "final_std"]:
        if m in table.columns and np.array_equal(_pd_numbers(table[m]), final, equal_nan=True):
            return m
    return None


def _named(metric):
    """A metric's head in a Markdown table: its label, and the name the command line and the terminal's table use
    where the label is a formula (``‖∇f(x̄)‖ (grad_norm_mean)``)."""
    label = METRIC_LABELS.get(metric, metric)
    return label if label in (metric, str(metric).replace("_", " ")) else f"{label} ({metric})"


def to_markdown(table, metrics=None):
    """A :func:`~rowstoch_fast.compare.summary` table as Markdown: mean ± std per metric, the rank (shared where the
    repetitions cannot tell runs apart) with rank 1 of each metric (per section) in bold, the rate and where it came
    from, every run's status, and below the table why each run that did not end ok did not (and why one is shown at
    the next stable rate of its tuning)."""
    metrics = _summary_metrics(table, metrics)
    cells = _cells(table, metrics)
    groups = [g for g in _GROUPS if g in table.columns]
    head = groups + ["algorithm", "rank", "lr (source)", "R", "rounds"] + [_named(m) for m in metrics] + ["status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * (len(head) - len(metrics) - 1)
                                                           + ["---:"] * len(metrics) + ["---"]) + "|"]
    for i, r in enumerate(table.itertuples()):
        row = [str(getattr(r, g)) for g in groups] + [r.algorithm, _rank(r), _lr_cell(r),
                                                      str(r.rounds_per_iteration), str(r.communication_rounds)]
        for m in metrics:
            mean, std, best = cells[m][i]
            text = f"{_num(mean)} ± {_num(std, 1)}" if math.isfinite(std) or std == math.inf else _num(mean)
            # (NaN: one repetition; inf: a spread that overflowed, said)
            row.append(f"**{text}**" if best else text)
        row.append(r.status)
        lines.append("| " + " | ".join(" ".join(cell.replace("|", "\\|").split("\n")) for cell in row) + " |")
        # (a '|' of a label had split its row: helper 192's lr_source "a|b"; a line break too, helper 218)
    notes = _notes(table)
    if "rank_shared" in table.columns and table["rank_shared"].fillna(False).any():
        lines += ["", ties_note(table)]
    for note in table_notes(table, metrics, cells):
        lines += ["", note]
    if notes:
        lines += [""] + [f"- {where + ': ' if where else ''}{name} ({status}): {why}"
                         for where, name, status, why in notes]
    return "\n".join(lines) + "\n"


#: LaTeX's special characters and what prints them (one pass: a replacement is never escaped again).
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def _tex(text):
    """``text`` as LaTeX prints it: its special characters escaped, and ``--`` kept two hyphens (LaTeX set a
    caption's "--network-seed" with an en dash)."""
    return "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text)).replace("--", "-{}-").replace("--", "-{}-")


def _tex_head(metric):
    """A metric's column head: its formula, else its words ("messages dropped", not ``messages\\_dropped``)."""
    return _TEX_LABELS.get(metric) or _tex(METRIC_LABELS.get(metric, str(metric).replace("_", " ")))


def tex_number(mean, std=None, digits=2):
    """``mean`` (and ``std``) as LaTeX math with one power of ten: ``$(1.83 \\pm 0.29) \\times 10^{-1}$`` (``$1.83
    \times 10^{-1}$`` without ``std``; ``$0$`` and non-finite values as words). ``digits``: 0 to 17, the most a
    float64 holds (helper 218: 10**9 built strings of 1 GB each)."""
    digits = check_int(digits, "digits", minimum=0, maximum=17)
    for value, name in ((mean, "mean"), (std, "std")):  # ("a": math.isfinite's words, helper 204)
        if (value is not None or name == "mean") and (isinstance(value, (bool, np.bool_))
                                                      or not isinstance(value, numbers.Real)):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r:.60}")
        if value is not None:  # (10**400: "int too large to convert to float", helper 218)
            finite_float(value, name)
    if not math.isfinite(mean):
        return r"$\infty$" if mean > 0 else ("n/a" if mean != mean else r"$-\infty$")
    if mean == 0:
        return "$0$" if std is None or not math.isfinite(std) or not std else f"$0 \\pm {std:.1g}$"
    e = int(math.floor(math.log10(abs(mean))))
    if abs(round(mean / 10 ** e, digits)) >= 10:  # (9.999 rounds up to the next power)
        e += 1
    scale = 10.0 ** e
    power = "" if e == 0 else f" \\times 10^{{{e}}}"
    if std == math.inf:  # (a spread that overflowed: said, not dropped)
        return f"${mean / scale:.{digits}f}{power} \\pm \\infty$"
    if std is None or not math.isfinite(std):
        return f"${mean / scale:.{digits}f}{power}$"
    body = f"{mean / scale:.{digits}f} \\pm {std / scale:.{digits}f}"
    return f"$({body}){power}$" if power else f"${body}$"


def ranks_caption(fewest, most, methods, rounds=None):
    """What a table of final values is and how its ranks read, in words (:func:`table_caption`'s, and the part of
    ``rowstoch compare``'s caption after the problem): its methods' ``fewest`` .. ``most`` repetitions (0: not
    known), its number of ``methods``, the communication ``rounds`` (None: those the table shows)."""
    after = f"Final values after {'the communication rounds shown' if rounds is None else f'{rounds} communication rounds'}"
    if most == 1:
        return (f"{after}, of one repetition. " + ("One repetition tells no method from another: every rank is "
                                                   "shared; only" if methods > 1 else "Only")
                + " runs that ended ok are ranked.")
    over = "" if not most else f" over {most} repetitions" if fewest == most else \
        f" over {fewest} to {most} repetitions"
    return (f"{after}, mean and standard deviation (the sample's){over}. A rank is 1 + the number of methods the "
            "repetitions tell better; = marks a method they cannot tell from another; rank 1 in bold; only runs "
            "that ended ok are ranked.")


def table_caption(table):
    """The caption :func:`to_latex` writes where none is given (:func:`ranks_caption`): what a
    :func:`~rowstoch_fast.compare.summary` table's numbers are (final values, mean and the sample's standard
    deviation over its repetitions) and how its ranks are read. It cannot name the problem or the network, which
    the table does not hold; a table read back from its CSV, which keeps no count of repetitions, is read as one
    of one repetition where no spread is shown."""
    _check_summary(table)
    fewest, most = table.attrs.get("repeats") or (0, 0)  # (summary's: its methods' fewest and most repetitions)
    if not most and "final_std" in table.columns and len(table) and \
            np.isnan(_pd_numbers(table["final_std"])).all():  # (read back from CSV: one repetition each)
        fewest = most = 1
    return ranks_caption(fewest, most, len(table))


def to_latex(table, metrics=None, caption=None, label="tab:compare"):
    """A :func:`~rowstoch_fast.compare.summary` table as a LaTeX ``table`` with booktabs rules (``\\usepackage
    {booktabs}``): each metric as ``$(m \\pm s) \\times 10^{e}$``, the rank (``1=`` where shared), rank 1 of each
    metric (per section) in bold, the status of every run and, below the table, why each run that did not end ok
    did not (and why one is shown at the next stable rate of its tuning); ``caption`` and ``\\label{label}``.

    ``caption=None`` writes one from what the table knows (what its numbers are, over how many repetitions, how
    it ranks: :func:`table_caption`); name the problem, n, the graph and the network model in your own (``rowstoch
    compare`` does); ``caption=""`` writes none."""
    check_text(caption, "caption", allow_none=True), check_text(label, "label", allow_none=True)
    metrics = _summary_metrics(table, metrics)
    if caption is None:
        caption = table_caption(table)
    cells = _cells(table, metrics)
    groups = [g for g in _GROUPS if g in table.columns]
    cols = "l" * len(groups) + "lrrrr" + "r" * len(metrics) + "l"
    head = groups + ["algorithm", "rank", "lr (source)", "$R$", "rounds"] + \
        [_tex_head(m) for m in metrics] + ["status"]
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\setlength{\tabcolsep}{4pt}"]
    if caption:
        lines.append(r"\caption{" + _tex(caption) + "}")
    if label:
        lines.append(r"\label{" + label + "}")
    lines += [r"\begin{tabular}{" + cols + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    previous = None
    for i, r in enumerate(table.itertuples()):
        key = tuple(getattr(r, g) for g in groups)
        if groups and previous is not None and key != previous:
            lines.append(r"\midrule")
        previous = key
        row = [_tex(v) for v in key] + [_tex(r.algorithm), _tex(_rank(r)), _tex(_lr_cell(r)),
                                        str(r.rounds_per_iteration), str(r.communication_rounds)]
        for m in metrics:
            mean, std, best = cells[m][i]
            text = tex_number(mean, std)
            row.append(r"{\boldmath " + text + "}" if best else text)
        row.append(_tex(r.status))
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    notes = _notes(table)
    shared = "rank_shared" in table.columns and table["rank_shared"].fillna(False).any()
    general = table_notes(table, metrics, cells)
    if notes or shared or general:
        lines.append(r"\par\smallskip\footnotesize\raggedright")
        if shared:
            lines.append(_tex(ties_note(table)) + r"\par")
        for note in general:
            lines.append(_tex(note) + r"\par")
        for where, name, status, why in notes:
            lines.append(_tex(f"{where + ': ' if where else ''}{name} ({status}): {why}") + r"\par")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
