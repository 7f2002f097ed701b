"""What the paper's experiments share: the figure helpers, the verdict file, what stopped a run."""

from __future__ import annotations

import functools
import math
import os
import re

import numpy as np

from .._files import atomic_write
from .._signals import sigterm_as_interrupt

def _plt():
    """pyplot (:func:`rowstoch_fast.report.pyplot`: Agg only where pyplot was not imported, so a notebook's backend
    is left as it is), or None without matplotlib."""
    from ..report import pyplot

    try:
        return pyplot()
    except ImportError:
        return None


def _save(fig, out_dir, name, bottom=0.0):
    """``fig`` laid out (above ``bottom``, a share of its height: a legend below the panels) and saved."""
    from ..report import save

    fig.tight_layout(rect=(0, bottom, 1, 1))
    return save(fig, os.path.join(out_dir, name), dpi=120)


#: The cross over a point whose run did not end ``ok`` (:func:`mark_failed`).
FAILED_MARK = {"marker": "x", "color": "0.15", "markersize": 9, "markeredgewidth": 1.6, "linestyle": "none",
               "zorder": 5}
_FAILED_LABEL = "_did not end ok"


def mark_failed(ax, x, y, status):
    """A cross over each point whose run did not end ``ok`` (``status``, one per point): its value is a diverged
    or stalled run's last record, not a result (a figure of the final values drew them as the others).
    :func:`_finish` then explains the cross in the legend."""
    bad = np.asarray(status, dtype=object) != "ok"
    if bad.any():
        ax.plot(np.asarray(x, dtype=np.float64)[bad], np.asarray(y, dtype=np.float64)[bad], label=_FAILED_LABEL,
                **FAILED_MARK)


def _finish(plt, fig, axes, out_dir, name, log):
    """The legend on the first panel (with the cross of :func:`mark_failed` where a panel has one), the figure
    saved as ``name`` and closed."""
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if any(line.get_label() == _FAILED_LABEL for ax in axes.flat for line in ax.get_lines()):
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], **FAILED_MARK))
        labels.append("did not end ok (the CSV's status)")
    if axes.size == 1:
        axes[0, 0].legend(handles, labels, fontsize=7)
        log(f"wrote {_save(fig, out_dir, name)}")
    else:  # below the panels, where it covers none (it had covered the first panel's upper right, helper 246)
        ncol = min(len(labels), max(1, int(fig.get_figwidth() // 2.2)))
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
        lines = -(-len(labels) // ncol)
        log(f"wrote {_save(fig, out_dir, name, bottom=(0.17 * lines + 0.08) / fig.get_figheight())}")
    plt.close(fig)


def make_out_dir(out_dir):
    """``os.makedirs(out_dir, exist_ok=True)``, or a NotADirectoryError naming ``out_dir`` where it is a file
    (makedirs's bare FileExistsError had named nothing, helper 204)."""
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder's path, got {type(out_dir).__name__} {out_dir!r:.60}")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise NotADirectoryError(f"out_dir {os.fspath(out_dir)!r} is a file: give a folder for the outputs")
    os.makedirs(out_dir, exist_ok=True)


def check_evaluations_fit(runs, rounds_budget, repeats, **options):
    """Each evaluation of a reproduction (``runs``: ``(network, objective, names)``) planned as
    :func:`~rowstoch_fast.compare.compare` plans it, before anything is tuned or written: a MemoryError (or a
    refused argument) at once, where ``reproduce robustness --repeats 10^8`` had tuned for 47 s, then written
    empty outputs, before its first evaluation's refusal."""
    import warnings

    from ..compare.plan import make_plan

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a short budget's: the evaluation itself says it, or not)
        for net, objective, names in runs:
            make_plan(net, objective, names, rounds_budget, lr={name: 1.0 for name in names}, tune=False,
                      repeats=repeats, **options)


def check_log(log):
    """``log`` if it is callable (it takes a line, as ``print`` does), else a TypeError naming it, before anything
    runs (``log=None`` had met "'NoneType' object is not callable" at the first line said, helper 218)."""
    if not callable(log):
        raise TypeError(f"log must be a callable that takes a line (e.g. print), got {type(log).__name__} "
                        f"{log!r:.60}")
    return log


def writes_before_sigterm(reproduce):
    """``reproduce`` (a reproduction: its runs, then its outputs) with a SIGTERM left to its default taken as
    Ctrl-C while it runs, so that it writes what finished, then ends the process, as SIGTERM asks
    (:func:`~rowstoch_fast._signals.sigterm_as_interrupt` around the whole: the comparisons and runs inside
    return to it instead of ending the process themselves)."""
    @functools.wraps(reproduce)
    def reproduction(*args, **kwargs):
        with sigterm_as_interrupt():
            return reproduce(*args, **kwargs)

    return reproduction


def _stop_if(interrupted, log, done, error=None):
    """After a Ctrl-C (``interrupted``) or an error (``error``, re-raised): the outputs of what finished are
    written; say so and stop (KeyboardInterrupt: the command line exits with 130)."""
    if error is not None:
        log(f"stopped by {type(error).__name__}: wrote the {done} that finished")
        raise error
    if interrupted:
        log(f"interrupted: wrote the {done} that finished; a reproduction has no resume: run it again from its start "
            f"(the command line's --overwrite replaces these files)")  # (helper 189: the command line's rerun was
        # refused, nothing had said why; helper 190: a Python caller has no --overwrite)
        raise KeyboardInterrupt


def _stopped(interrupted, error, done):
    """What stopped an experiment before its end (``"interrupted after 2 of 6 sizes"``), or None if it ran to the
    end: its outputs are then partial and decide no claim."""
    if error is not None:
        return f"stopped by {type(error).__name__} after {done}"
    return f"interrupted after {done}" if interrupted else None


#: The seed of the paper's synthetic data instance (Appendix E.2's problem as its figures draw it): the default
#: ``data_seed`` of the reproductions on it; another draws another instance of the same problem.
DATA_SEED = 42


def other_data(data_seed):
    """What a figure's title adds for ``data_seed``: nothing for the paper's instance, ``", data seed 3"``
    otherwise."""
    return "" if data_seed == DATA_SEED else f", data seed {data_seed}"

#: How far the fitted slope of the linear-speedup figure may be from -1/2 for the claim to hold: half the way to
#: the nearest other simple law, n^(-1/3) or n^(-2/3), so that an interval within it is nearer -1/2 than either
#: (at 0.2, an n^(-1/3) law's [-0.36, -0.31] held). The default runs' intervals: [-0.551, -0.537] and
#: [-0.506, -0.471] (20 repeats).
SLOPE_TOLERANCE = 1 / 12


def verdict_lines(rows):
    """The console's lines of the claims' verdicts ``rows`` (dicts: ``claim``, ``verdict``, numbers): a header with
    the numbers every claim shares (seed, repetitions, ...), then per claim its verdict's head (``holds``, ``does not
    hold``, ``inconclusive``, ``not decided``) aligned before the claim, the rest of the verdict below it, and the
    numbers it follows from (one line of 330 characters each had carried the claim, its verdict and twelve numbers,
    the shared ones too)."""
    def text(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    keys = list(dict.fromkeys(k for row in rows for k in row if k not in ("claim", "verdict", "graph", "rule")))
    shared = [k for k in keys if len(rows) > 1 and all(k in row and text(row[k]) == text(rows[0][k]) for row in rows)]
    lines = ["the paper's claims on this run" + (f" ({', '.join(f'{k} {text(rows[0][k])}' for k in shared)})"
                                                 if shared else "") + ":"]
    for row in rows:
        found = re.match(r"(holds|does not hold|inconclusive|not decided)\b:? ?(.*)", str(row["verdict"]), re.S)
        head, rest = (found[1], found[2]) if found else (str(row["verdict"]), "")  # (the head alone: "inconclusive
        # (one repeat: ...)" had been cut at the colon inside its parenthesis, helper 197)
        lines.append(f"  {head:<13} {row['claim']}")
        if rest:
            lines.append(f"  {'':<13} {rest}")
        numbers = ", ".join(f"{k} {text(row[k])}" for k in keys if k in row and k not in shared)
        if numbers:
            lines.append(f"  {'':<13} ({numbers})")
    return lines


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
    path = os.path.join(out_dir, f"{name}_verdict.csv")
    table = pd.DataFrame(rows)
    atomic_write(path, lambda fh: table.to_csv(fh, index=False))
    for line in verdict_lines(rows):
        log(line)
    for rule in dict.fromkeys(row["rule"] for row in rows if row.get("rule") and stopped is None):
        log(f"(the rule: {rule})")
    log(f"wrote {path}")  # (the verdicts' table was written unsaid)


def write_table(frame, out_dir, name, log, index=False):
    """``frame`` written as ``<out_dir>/<name>`` (CSV, atomically: a kill leaves the old file or the new one) and
    said in a "wrote" line (helper 223: pull_diag.csv and kgt_local_steps_finals.csv had been written unsaid, the
    other files said). Returns the path."""
    path = os.path.join(out_dir, name)
    atomic_write(path, lambda fh: frame.to_csv(fh, index=index))
    log(f"wrote {path}")
    return path


def write_histories(out_dir, name, histories, columns):
    """``<name>.csv``: each run's summary (``histories``: key -> History), led by the columns ``columns(key)``
    gives (a dict, in order), the runs one after another; nothing when no run finished."""
    import pandas as pd

    rows = []
    for key, h in histories.items():
        s = h.summary()
        for k, (column, value) in enumerate(columns(key).items()):
            s.insert(k, column, value)
        rows.append(s)
    if rows:
        table = pd.concat(rows)
        atomic_write(os.path.join(out_dir, f"{name}.csv"), lambda fh: table.to_csv(fh, index=False))


#: The window a verdict reads: the records in the last tenth of a run (at least one record).
FINAL_WINDOW = 0.1


def _window(frame, x, window, end):
    """The records whose ``x`` lies in the ``window`` fraction of its range ending at the fraction ``end`` (a window
    between two records: the record before its end)."""
    lo, hi = frame[x].min(), frame[x].max()
    first, last = lo + (end - window) * (hi - lo), lo + end * (hi - lo)
    part = frame[(frame[x] >= min(first, last)) & (frame[x] <= last)]
    return part if len(part) else frame[frame[x] == frame[x][frame[x] <= last].max()]


def window_by_repeat(frame, metric, x="iteration", window=FINAL_WINDOW, end=1.0):
    """Each repeat's mean of ``metric`` over a window of its records: those whose ``x`` lies in the ``window``
    fraction of its range that ends at the fraction ``end`` (default: the last tenth). The repeats are
    ``frame["rep"]`` (or ``frame["repeat"]``; one repeat, 0, without either); a NaN record makes its repeat's mean
    NaN (never skipped). Returns ``(means, start)``: a Series indexed by repeat, and the window's first ``x``."""
    import pandas as pd

    part = _window(frame, x, window, end)
    key = "rep" if "rep" in part else "repeat" if "repeat" in part else None
    if key is None:
        means = pd.Series({0: part[metric].to_numpy(float).mean()}, dtype=float)
    else:
        means = part.groupby(key)[metric].agg(lambda v: v.to_numpy(float).mean())
    return means, float(part[x].min())


def window_means(frame, metric, x="iteration", window=FINAL_WINDOW, end=1.0):
    """:func:`window_by_repeat`'s means as an array: ``(means, start)``."""
    means, start = window_by_repeat(frame, metric, x, window, end)
    return means.to_numpy(float), start


def window_stats(frame, metric, x="iteration", window=FINAL_WINDOW, end=1.0):
    """``(mean, spread, start, repeats)`` over :func:`window_means`' window: the mean over repeats, their
    :func:`spread`, the window's first ``x``, and how many repeats have records in it."""
    means, start = window_means(frame, metric, x, window, end)
    return float(means.mean()), spread(means), start, int(means.size)


def spread(means):
    """The spread of a final: the standard deviation over repeats of their window means (ddof 1); NaN with one
    repeat (one run's own records do not show how much another seed would differ)."""
    means = np.asarray(means, dtype=float)
    return float(np.std(means, ddof=1)) if means.size > 1 else math.nan


def error_bars(mean, spread, lowest, highest):
    """``yerr`` of ``errorbar``: ``mean`` +- ``spread`` within the repeats' range ``[lowest, highest]``
    (:func:`~rowstoch_fast.report.spread_within`); none where the mean is NaN (not drawn)."""
    from ..report import spread_within

    mean = np.asarray(mean, dtype=float)
    low, high = spread_within(mean, spread, lowest, highest)
    return np.nan_to_num(np.vstack([mean - low, high - mean]))


#: The confidence of :func:`compare_windows`' interval.
CONFIDENCE = 0.95

#: How a verdict compares two methods' final windows (``compare_windows``), in the words its CSV carries.
COMPARE_RULE = (f"each run's mean over its final window (the last {FINAL_WINDOW:.0%} of its records); 'holds' where "
                f"the first method's mean over repeats is lower than the second's beyond a {CONFIDENCE:.0%} Welch "
                "interval of the difference (from the spreads, standard deviations over repeats, and the numbers of "
                "repeats), 'does not hold' where it is higher beyond it, 'inconclusive' within it or with one "
                "repeat; a run that diverged or gave NaN loses")


def compare_windows(first, first_spread, first_repeats, second, second_spread, second_repeats):
    """Whether ``first`` (a mean over ``first_repeats`` repeats, standard deviation ``first_spread``) is lower than
    ``second``: ``"holds"``, ``"does not hold"``, or ``"inconclusive"`` (the difference within a
    :data:`CONFIDENCE` Welch interval, or a side with one repeat: no spread over seeds to judge by). A non-finite
    value (a run that diverged, a NaN) loses; both non-finite: inconclusive."""
    if not np.isfinite(first) and not np.isfinite(second):
        return "inconclusive"
    if not np.isfinite(first):
        return "does not hold"
    if not np.isfinite(second):
        return "holds"
    if min(first_repeats, second_repeats) < 2 or not (np.isfinite(first_spread) and np.isfinite(second_spread)):
        return "inconclusive (one repeat: the spread over seeds is unknown)"
    from scipy.stats import t

    a, b = first_spread ** 2 / first_repeats, second_spread ** 2 / second_repeats
    error = math.sqrt(a + b)
    df = (a + b) ** 2 / (a ** 2 / (first_repeats - 1) + b ** 2 / (second_repeats - 1)) if error > 0 else math.inf
    margin = float(t.ppf(0.5 + CONFIDENCE / 2, df)) * error + 1e-9 * max(abs(first), abs(second))
    if first < second - margin:
        return "holds"
    if first > second + margin:
        return "does not hold"
    return "inconclusive"
