"""A live view of a running comparison (``rowstoch compare --live``): after every method, the figure so far saved
(and shown in a window that refreshes, where matplotlib has a display) and, in a terminal, a text plot of the
ranked metric.

Examples
--------
>>> import numpy as np, pandas as pd
>>> from rowstoch_fast.compare.live import text_plot
>>> rounds = np.arange(0, 101, 10)
>>> frame = pd.DataFrame({"algorithm": np.repeat(["fast", "slow"], 11), "communication_rounds": np.tile(rounds, 2),
...                       "grad_norm": np.concatenate([10.0 ** (-rounds / 20), 10.0 ** (-rounds / 50)])})
>>> print(text_plot(frame, "grad_norm", width=24, height=6))  # (* where two lines meet)
grad_norm (log10) against communication rounds
  0.0 |* B
      |  A  B B
 -1.0 |     A   B  B B
      |       A        B B
 -2.0 |         A           B B
      |            A
 -3.0 |              A
      |                A
 -4.0 |                  A
      |                     A
 -5.0 |                       A
      +------------------------
       0                    100
  A fast   1e-05
  B slow   0.01
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from .._checks import check_bool, check_text
from ..report import AXES, by_record, check_axis, check_one_section, escape_mathtext, section_title
from ..user_metrics import linear_scale
from .tables import require_frame

__all__ = ["LiveView", "text_plot"]

#: The letters of the lines of a text plot, one per algorithm (then repeated).
MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#: Resolution of the live PNG: a preview on a screen, redrawn after every method (the comparison's own figure is
#: saved at :data:`rowstoch_fast.report.DPI` at the end); 120 dpi saves in 0.6-0.75 of the time of 300.
LIVE_DPI = 120
#: The share of the wall time ``rowstoch compare --live`` lets its figure take (:class:`LiveView`'s ``share``).
CLI_SHARE = 0.25
#: The least seconds between two text plots of ``rowstoch compare --live`` (:class:`LiveView`'s ``text_every``): after
#: every method, a 42-method comparison had written 2,129 lines of text plots (helper 189).
CLI_TEXT_EVERY = 60.0
#: Matplotlib backends that draw no window.
_NO_WINDOW = ("agg", "pdf", "ps", "svg", "pgf", "cairo", "template")


def text_plot(frame, metric, x="communication_rounds", width=60, height=12):
    """The mean of ``metric`` over repetitions against ``x``, one letter per algorithm, as text: a log10 scale (a
    mean at rounding, 0 or below, on the bottom line) unless the metric is drawn on a linear one (as in the figure:
    ``test_accuracy``, a metric of yours registered so) or has no positive value; a legend with each algorithm's
    last mean.

    Parameters
    ----------
    frame : pandas.DataFrame
        Records with the columns ``algorithm``, ``x`` and ``metric`` (what :func:`~rowstoch_fast.compare.compare`
        returns).
    metric : str
    x : str, default "communication_rounds"
        A column of ``frame``, or one of :data:`rowstoch_fast.report.AXES` (``"rounds"``, ``"gradients"``, ...).
    width, height : int
        Columns and rows of the plotting area (each row is two lines of text: a value is drawn on the nearer).

    Returns
    -------
    str
    """
    require_frame(frame, "frame")
    check_text(metric, "metric")
    check_text(x, "x")
    check_one_section(frame)
    column = AXES[x][0] if x in AXES else x
    for name in (column, metric, "algorithm"):
        if name not in frame.columns:
            raise ValueError(f"the records have no column {name!r} (they have {', '.join(map(str, frame.columns))})")
    if not (isinstance(width, int) and width >= 8 and isinstance(height, int) and height >= 2):
        raise ValueError(f"width must be an integer >= 8 and height >= 2, got {width!r} and {height!r}")
    curves = []
    for name, runs in frame.groupby("algorithm", sort=False):
        with np.errstate(all="ignore"):
            records = by_record(runs, column)
            xs, ys = (records[c].mean().to_numpy(dtype=np.float64) for c in (column, metric))
        curves.append((str(name), xs, ys))
    values = np.concatenate([ys for _, _, ys in curves]) if curves else np.zeros(0)
    finite = values[np.isfinite(values)]
    # log10 unless the metric is drawn linear (test_accuracy, a metric of yours registered so) or has no positive
    # value; a record at rounding (0, or -1e-16 below f*) goes to the bottom line, as in the figure
    log = not linear_scale(metric, getattr(frame, "attrs", {}).get("extra_metrics")) and bool((finite > 0).any())
    shown = np.log10(finite[finite > 0]) if log else finite
    lo, hi = (float(shown.min()), float(shown.max())) if shown.size else (0.0, 1.0)
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    xs_all = np.concatenate([xs for _, xs, _ in curves]) if curves else np.zeros(1)
    x_lo, x_hi = float(np.nanmin(xs_all)), float(np.nanmax(xs_all))
    x_span = (x_hi - x_lo) or 1.0
    lines = 2 * height - 1  # (a value on every line of text: the axis is labelled every other)
    grid = [[" "] * width for _ in range(lines)]
    for k, (_, xs, ys) in enumerate(curves):
        mark = MARKS[k % len(MARKS)]
        with np.errstate(all="ignore"):
            v = np.where(ys > 0, np.log10(np.where(ys > 0, ys, 1.0)), np.where(np.isfinite(ys), lo, np.nan)) \
                if log else ys
        for xv, yv in zip(xs, v):
            if not np.isfinite(yv):
                continue
            col = min(width - 1, int(round((xv - x_lo) / x_span * (width - 1))))
            row = min(lines - 1, int(round((hi - yv) / (hi - lo) * (lines - 1))))
            grid[row][col] = mark if grid[row][col] in (" ", mark) else "*"
    label_width = max(len(f"{hi:.1f}"), len(f"{lo:.1f}")) + 1
    axis = frame.attrs.get("cost_label", "cost") if x == "cost" else AXES[x][1] if x in AXES else x.replace("_", " ")
    out = [f"{metric} ({'log10' if log else 'linear'}) against {axis}"]
    for row in range(lines):
        value = hi - (hi - lo) * row / (lines - 1)
        label = f"{value:.1f}" if row % 2 == 0 else ""
        out.append(f"{label:>{label_width}} |{''.join(grid[row]).rstrip()}")
    out.append(" " * label_width + " +" + "-" * width)
    right = f"{x_hi:g}"
    out.append(" " * (label_width + 2) + f"{x_lo:g}".ljust(width - len(right)) + right)
    names = max((len(name) for name, _, _ in curves), default=0)
    for k, (name, _, ys) in enumerate(curves):
        last = ys[np.isfinite(ys)]
        out.append(f"  {MARKS[k % len(MARKS)]} {name.ljust(names)}   {last[-1]:.3g}" if last.size
                   else f"  {MARKS[k % len(MARKS)]} {name.ljust(names)}   (no finite record)")
    return "\n".join(out)


class LiveView:
    """What ``rowstoch compare --live`` shows as each method finishes: the figure of the comparison so far saved to
    ``path`` (one file at :data:`LIVE_DPI` dpi, replaced each time; shown in a window that refreshes where matplotlib has an interactive
    backend and a display), and a text plot of ``metric`` per frame on ``stream`` (a terminal with no window).

    Parameters
    ----------
    metric : str
        The metric drawn (the ranked one).
    x : {"rounds", "gradients", "bytes", "seconds"}, default "rounds"
    path : str, optional
        The PNG file the figure is saved to (e.g. ``<out>/live.png``); None: none.
    window : bool, optional
        Show the figure in a window; default: where matplotlib's backend draws one.
    stream : file, optional
        Where the text plot goes (default ``sys.stderr``); None with ``text=False``.
    text : bool, optional
        Write the text plot; default: where there is no window.
    share : float, default 1
        The most of the wall time that drawing the figure may take, in (0, 1]: after a draw that took ``t``
        seconds, a call within ``t * (1 / share - 1)`` seconds keeps its frames for the next draw instead of
        drawing (the text plot is written every time). 1 draws at every call; ``rowstoch compare --live`` uses
        :data:`CLI_SHARE` (a draw takes 1-2 s on a 2-core machine: after each of 28 methods, it had cost up to a
        minute). Call :meth:`flush` at the end to draw what is kept.
    text_every : float, default 0
        The least seconds between two text plots: a call sooner after the last one keeps its frames for the next
        (or :meth:`flush`). 0 writes one at every call; ``rowstoch compare --live`` uses :data:`CLI_TEXT_EVERY`.

    Call it with the frames of the comparison so far (one per graph / setting), e.g. from ``compare(...,
    on_result=...)``.
    """

    def __init__(self, metric, x="rounds", path=None, window=None, stream=None, text=None, share=1.0,
                 text_every=0.0):
        self.metric, self.x = metric, check_axis(x)
        self.path = None if path is None else os.fspath(path)
        self.window = _has_window() if window is None else check_bool(window, "window")
        self.text = (not self.window) if text is None else check_bool(text, "text")
        self.stream = sys.stderr if stream is None else stream
        if np.ndim(share) or not isinstance(share, (int, float, np.integer, np.floating)) or not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share!r}")
        self.share = float(share)
        if np.ndim(text_every) or isinstance(text_every, (bool, np.bool_)) \
                or not isinstance(text_every, (int, float, np.integer, np.floating)) or not 0 <= text_every < np.inf:
            raise ValueError(f"text_every must be a number of seconds >= 0, got {text_every!r}")
        self.text_every = float(text_every)
        self._figure, self._kept, self._next = None, None, -np.inf
        self._text_kept, self._next_text = None, -np.inf

    def __call__(self, frames):
        frames = [f for f in frames if f is not None and len(f)]
        if not frames:
            return
        if self.path is not None or self.window:
            self._kept = frames
            if time.monotonic() >= self._next:
                self._draw_kept()
        if self.text:
            self._text_kept = frames
            if time.monotonic() >= self._next_text:
                self._write()

    def _write(self):
        frames, self._text_kept = self._text_kept, None
        for frame in frames:
            print(text_plot(frame, self.metric, self.x), file=self.stream, flush=True)
        self._next_text = time.monotonic() + self.text_every

    def flush(self):
        """Draw the frames kept by a call that came too soon after the last draw (see ``share``) and write the text
        plot of those kept by one too soon after the last text plot (``text_every``); nothing if none."""
        if self._text_kept is not None:
            self._write()
        self._draw_kept()

    def _draw_kept(self):
        if self._kept is None:
            return
        frames, self._kept = self._kept, None
        start = time.monotonic()
        self._draw(frames)
        end = time.monotonic()
        self._next = end + (end - start) * (1 / self.share - 1)

    def _draw(self, frames):
        from ..report import figure, pyplot, save

        plt = pyplot()
        if self._figure is not None:
            plt.close(self._figure)
        titles = [escape_mathtext(section_title(fr)) for fr in frames] if len(frames) > 1 else None  # (a sweep's
        # rows told apart, as in compare.png, helper 233; one row untitled, as before; "$" escaped, helper 236)
        self._figure = fig = figure(frames, [self.metric], self.x, titles=titles)
        if self.path is not None:
            save(fig, self.path, LIVE_DPI, format="png")  # (atomic: a viewer that reloads the file never reads half
            # of it)
        if self.window:
            plt.show(block=False)
            plt.pause(0.001)
        else:
            plt.close(fig)
            self._figure = None

    def close(self):
        """Close the window (if any)."""
        if self._figure is not None:
            from ..report import pyplot

            pyplot().close(self._figure)
            self._figure = None


def _has_window():
    """Whether matplotlib, as configured (``MPLBACKEND``, the rc file, a display), draws in a window."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        return False
    if "matplotlib.pyplot" not in sys.modules and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                                                       or sys.platform in ("darwin", "win32")):
        return False  # (a headless machine: pyplot would fall back to Agg)
    backend = str(matplotlib.get_backend()).lower()
    return not any(backend == b or backend.startswith(b) for b in _NO_WINDOW) and "inline" not in backend
