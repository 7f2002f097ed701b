"""The live view of a comparison (rowstoch_fast/compare/live.py): the text plot, the refreshed figure."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from rowstoch_fast.compare.live import LiveView, text_plot


def records(values, rounds=None, name="m"):
    rounds = np.arange(len(values)) * 10 if rounds is None else rounds
    return pd.DataFrame({"algorithm": name, "communication_rounds": rounds, "grad_norm": values, "rep": 0})


def test_the_text_plot_puts_each_mean_where_its_value_is():
    frame = pd.concat([records([1.0, 0.1, 0.01], name="a"), records([1.0, 1.0, 1.0], name="b")])
    text = text_plot(frame, "grad_norm", width=11, height=3).splitlines()
    assert text[0] == "grad_norm (log10) against communication rounds"
    rows = [line.split("|", 1)[1] if "|" in line else None for line in text[1:6]]
    assert rows[0] == "*    B    B"  # log10 = 0 on the top line: a and b together at 0, b after
    assert rows[2] == "     A" and rows[4] == "          A"  # -1 half way, -2 at the bottom
    assert text[-2:] == ["  A a   0.01", "  B b   1"]


def test_a_repetitions_mean_a_linear_scale_and_missing_values():
    two = pd.concat([records([2.0, 4.0]), records([4.0, 8.0]).assign(rep=1)])
    text = text_plot(two, "grad_norm", width=8, height=2)
    assert "(log10)" in text and text.splitlines()[-1] == "  A m   6"  # the mean over repetitions
    rounding = records([1.0, 0.1, -1e-16, np.nan])  # (below f* by rounding: on the bottom line; NaN not drawn)
    lines = text_plot(rounding, "grad_norm", width=10, height=2).splitlines()
    assert "(log10)" in lines[0] and lines[1].endswith("|A") and lines[3].endswith("|   A  A")
    assert lines[-1] == "  A m   -1e-16"  # (the last finite mean)
    accuracy = records([0.5, 0.9, 0.7]).rename(columns={"grad_norm": "test_accuracy"})
    assert "(linear)" in text_plot(accuracy, "test_accuracy", width=8, height=2)  # (drawn linear, as in the figure)
    assert "(no finite record)" in text_plot(records([np.nan, np.inf]), "grad_norm", width=8, height=2)


@pytest.mark.parametrize("kwargs,match", [({"width": 3}, "width must be"), ({"height": 1}, "height"),
                                          ({"x": "iteration_count"}, "no column 'iteration_count'")])
def test_bad_text_plot_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        text_plot(records([1.0, 0.5]), "grad_norm", **kwargs)


def test_the_live_view_replaces_its_figure_and_writes_the_text_plot(tmp_path):
    frame = records([1.0, 0.1, 0.01]).assign(status="ok", lr=0.1, iteration=[0, 10, 20])
    out = io.StringIO()
    live = LiveView("grad_norm", path=tmp_path / "live.png", window=False, stream=out, text=True)
    live([frame])
    first = (tmp_path / "live.png").read_bytes()
    live([frame, frame.assign(algorithm="other")])
    assert (tmp_path / "live.png").read_bytes() != first and first.startswith(b"\x89PNG")
    assert out.getvalue().count("grad_norm (log10)") == 3 and not list(tmp_path.glob("*.part*"))
    live([])  # nothing finished yet: nothing drawn
    assert out.getvalue().count("grad_norm (log10)") == 3


def test_the_live_view_draws_within_its_share_of_the_time_and_flushes_what_it_kept(tmp_path, monkeypatch):
    """A draw takes 1-2 s on a 2-core machine: after every method of a 28-method comparison it had cost up to a
    minute. With ``share`` a call soon after a draw keeps its frames (the text plot still written), and
    ``flush`` draws the newest."""
    import rowstoch_fast.compare.live as live_module

    clock = [0.0]
    monkeypatch.setattr(live_module.time, "monotonic", lambda: clock[0])
    drawn = []

    def draw(self, frames):
        clock[0] += 1.0  # a draw of 1 s
        drawn.append(len(frames))

    monkeypatch.setattr(LiveView, "_draw", draw)
    frame = records([1.0, 0.1]).assign(status="ok", lr=0.1, iteration=[0, 10])
    out = io.StringIO()
    live = LiveView("grad_norm", path=tmp_path / "live.png", window=False, stream=out, text=True, share=0.25)
    live([frame])  # drawn: 1 s, then 3 s without
    clock[0] += 1.0
    live([frame] * 2)  # 1 s later: kept
    clock[0] += 1.0
    live([frame] * 3)  # 2 s later: kept (the newest replaces it)
    assert drawn == [1] and out.getvalue().count("grad_norm (log10)") == 6
    clock[0] += 1.5
    live([frame] * 4)  # 3.5 s after the draw: drawn
    assert drawn == [1, 4]
    live.flush()  # nothing kept
    live([frame] * 5)
    live.flush()
    assert drawn == [1, 4, 5]
    every = LiveView("grad_norm", path=tmp_path / "live.png", window=False, stream=out, text=False)
    every([frame]), every([frame])
    assert drawn == [1, 4, 5, 1, 1]  # the default: every call draws
    with pytest.raises(ValueError, match="share must be in"):
        LiveView("grad_norm", share=0)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan"), "60", True, [1.0]])
def test_a_bad_text_every_is_named(bad):
    with pytest.raises(ValueError, match="text_every must be"):
        LiveView("grad_norm", text_every=bad)


def test_the_text_plot_waits_text_every_and_flush_writes_the_newest(monkeypatch):
    """After every method, a 42-method ``--live`` comparison wrote 2,129 lines of text plots: with ``text_every``
    a call sooner after the last text plot keeps its frames, and ``flush`` writes the newest of them once."""
    import rowstoch_fast.compare.live as live_module

    clock = [0.0]
    monkeypatch.setattr(live_module.time, "monotonic", lambda: clock[0])
    frame = records([1.0, 0.1]).assign(status="ok", lr=0.1, iteration=[0, 10])
    out = io.StringIO()
    live = LiveView("grad_norm", window=False, stream=out, text=True, text_every=60)
    live([frame])  # the first: written
    for k in range(2, 6):  # 10 s apart: kept
        clock[0] += 10.0
        live([frame.assign(algorithm=f"method {j}") for j in range(k)])
    assert out.getvalue().count("grad_norm (log10)") == 1
    clock[0] += 25.0  # 65 s after the first
    live([frame.assign(algorithm=f"method {j}") for j in range(6)])
    assert out.getvalue().count("grad_norm (log10)") == 7  # (one text plot per frame)
    live.flush()  # nothing kept
    assert out.getvalue().count("grad_norm (log10)") == 7
    clock[0] += 1.0
    live([frame])
    live.flush()  # kept: written once
    live.flush()
    assert out.getvalue().count("grad_norm (log10)") == 8


def test_the_live_figure_of_a_sweep_titles_its_rows(tmp_path, monkeypatch):
    """Helper 233: live.png of a sweep had no row titles (which row is which setting?); compare.png has them."""
    pytest.importorskip("matplotlib")
    from rowstoch_fast import report

    drawn = []
    real = report.figure
    monkeypatch.setattr(report, "figure", lambda *a, **k: drawn.append(k.get("titles")) or real(*a, **k))
    frame = records([1.0, 0.1, 0.01]).assign(status="ok", lr=0.1, iteration=[0, 10, 20])
    live = LiveView("grad_norm", path=tmp_path / "live.png", window=False, stream=io.StringIO(), text=False)
    live([frame.assign(graph="ring", setting="none"), frame.assign(graph="ring", setting="loss @p$_{x$.txt")])
    live([frame.assign(graph="ring")])  # (one row: no title, as before)
    assert drawn == [["ring / none", r"ring / loss @p\$_{x\$.txt"], None]  # (a file's "$" drawn as it is: the
    # title had been refused as TeX math, ending the comparison after its first method, helper 236)
