"""The benchmark harness: rowstoch_fast.compare and ``rowstoch compare``."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rowstoch_fast import compare as cmp
from rowstoch_fast import topology
from rowstoch_fast.objectives import NonconvexLogistic, Quadratic
from test_careless_user import ROWSTOCH, SMALL, assert_one_line_error, rowstoch


@pytest.fixture(scope="module")
def problem():
    return topology.exponential(8), NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)


def test_same_budget_seeds_and_metrics_for_every_algorithm(problem):
    A, f = problem
    frame = cmp.compare(A, f, ["pull-diag-gt", "mg-pull-diag-gt", "push-diging", "mg-push-diging", "dsgd"], 80,
                        lr={"pull-diag-gt": 0.01, "mg-pull-diag-gt": 0.01, "push-diging": 0.1,
                            "mg-push-diging": 0.1, "dsgd": 0.1}, repeats=3, mg_rounds=4, progress=False)
    table = cmp.summary(frame)
    assert table["algorithm"].tolist() == ["pull-diag-gt", "mg-pull-diag-gt", "push-diging", "mg-push-diging", "dsgd"]
    assert table["communication_rounds"].tolist() == [80] * 5
    assert table["iterations"].tolist() == [80, 20, 80, 20, 80]
    # an MG iteration averages R mini-batches: the samples per round are the same for everyone
    assert len(set(table["gradient_evaluations"])) == 1
    assert (table["messages"] > 0).all() and not table["diverged"].any()
    # three repetitions per record; the same seeds give the same first record for every algorithm
    first = frame[frame["iteration"] == 0].groupby("algorithm")["grad_norm"].apply(tuple)
    assert len(set(first)) == 1 and len(first.iloc[0]) == 3
    again = cmp.compare(A, f, "dsgd", 80, lr=0.1, repeats=3, progress=False)
    np.testing.assert_array_equal(again["grad_norm"], frame.loc[frame["algorithm"] == "dsgd", "grad_norm"])
    assert frame.attrs["lr"]["dsgd"] == 0.1 and frame.attrs["status"]["dsgd"] == "done"


def test_tuning_picks_from_the_grid_and_keeps_given_rates(problem):
    A, f = problem
    frame = cmp.compare(A, f, "pull-diag-gt,sgp", 100, lr={"sgp": 0.05}, tune=True, repeats=1, progress=False)
    assert frame.attrs["lr"]["sgp"] == 0.05 and "sgp" not in frame.attrs["tuning"]
    scores = frame.attrs["tuning"]["pull-diag-gt"]
    assert set(scores) == set(cmp.TUNE_GRID) and frame.attrs["lr"]["pull-diag-gt"] in cmp.TUNE_GRID
    best = frame.attrs["lr"]["pull-diag-gt"]
    assert scores[best] == min(scores.values())


def test_tuning_runs_on_the_fraction_of_the_budget_it_is_given(problem):
    """tune_fraction=1 scores each rate by the full run (its score is the full run's final metric); a bad
    fraction is refused by name before anything runs."""
    A, f = problem
    full = cmp.compare(A, f, "pull-diag-gt", 60, tune=True, tune_fraction=1.0, repeats=1, progress=False)
    rate = full.attrs["lr"]["pull-diag-gt"]
    assert full["iteration"].max() == 60
    assert full.attrs["tuning"]["pull-diag-gt"][rate] == full["grad_norm"].iloc[-1]
    tenth = cmp.compare(A, f, "pull-diag-gt", 60, tune=True, repeats=1, progress=False).attrs["tuning"]
    assert tenth["pull-diag-gt"] != full.attrs["tuning"]["pull-diag-gt"]
    for bad in (0, 1.5, "half"):
        with pytest.raises(ValueError, match="tune_fraction must be a number in"):
            cmp.compare(A, f, "pull-diag-gt", 60, tune=True, tune_fraction=bad, progress=False)


def test_a_diverging_algorithm_is_reported_not_raised():
    import warnings

    A, f = topology.exponential(8), Quadratic.random(8, 3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow notes on the way to inf
        frame = cmp.compare(A, f, "pull-diag-gt,dsgd", 400, lr={"pull-diag-gt": 50.0, "dsgd": 0.1}, repeats=2,
                            progress=False)
    table = cmp.summary(frame).set_index("algorithm")
    assert table.loc["pull-diag-gt", "diverged"] and not table.loc["dsgd", "diverged"]
    assert frame.attrs["status"] == {"pull-diag-gt": "diverged", "dsgd": "done"}


def test_bad_arguments_name_what_is_wrong(problem):
    A, f = problem
    with pytest.raises(ValueError, match="no learning rate for push-pull"):
        cmp.compare(A, f, "dsgd,push-pull", 10, lr={"dsgd": 0.1}, progress=False)
    with pytest.raises(ValueError, match="unknown algorithm 'frosty'"):
        cmp.compare(A, f, "frosty", 10, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="'mg-dsgd' is not a multi-round method"):
        cmp.compare(A, f, "mg-dsgd", 10, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="listed twice"):
        cmp.compare(A, f, "dsgd,dsgd", 10, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="lr: sgp is not among"):
        cmp.compare(A, f, "dsgd", 10, lr={"dsgd": 0.1, "sgp": 0.1}, progress=False)
    with pytest.warns(RuntimeWarning, match="runs only 2 iterations"):
        cmp.compare(A, f, "mg-pull-diag-gt", 10, lr=0.01, mg_rounds=5, progress=False)
    with pytest.raises(ValueError, match="rounds_budget = 3 is less than one iteration of mg-pull-diag-gt "
                                         r"\(R = 5 rounds\)"):  # it ran one iteration over the budget
        cmp.compare(A, f, "mg-pull-diag-gt", 3, lr=0.01, mg_rounds=5, progress=False)
    # these were a ZeroDivisionError, KeyErrors and min() of an empty sequence
    with pytest.raises(ValueError, match="mg_rounds must be >= 1, got 0"):
        cmp.compare(A, f, "mg-pull-diag-gt", 10, lr=0.01, mg_rounds=0, progress=False)
    with pytest.raises(ValueError, match="points must be >= 1, got 0"):
        cmp.compare(A, f, "dsgd", 10, lr=0.01, points=0, progress=False)
    with pytest.raises(ValueError, match="grid: give at least one learning rate"):
        cmp.tune_lr(A, f, "dsgd", "dsgd", 1, 10, grid=())
    with pytest.raises(ValueError, match="metric must be one of grad_norm, .*, got 'accuracy'"):
        cmp.tune_lr(A, f, "dsgd", "dsgd", 1, 10, metric="accuracy")
    frame = cmp.compare(A, f, "dsgd", 10, lr=0.01, repeats=1, progress=False)
    for call in (cmp.summary, cmp.plot):
        with pytest.raises(ValueError, match="metric must be one of grad_norm, .*, got 'gradnorm'"):
            call(frame, metric="gradnorm")
        with pytest.raises(ValueError, match="frame must be the table compare\\(\\) returns; it has no column algorithm"):
            call(frame.drop(columns="algorithm"))


def test_plot_draws_one_line_per_algorithm(problem, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    A, f = problem
    frame = cmp.compare(A, f, "dsgd,sgp,centralized", 30, lr=0.1, repeats=2, progress=False)
    ax = cmp.plot(frame, path=tmp_path / "c.png")
    assert len(ax.get_lines()) == 3 and (tmp_path / "c.png").stat().st_size > 1000
    assert "centralized" in cmp.format_summary(cmp.summary(frame))


def test_cli_compare_writes_the_table_csv_and_figure(tmp_path):
    out = tmp_path / "cmp"
    rc, stdout, err = rowstoch("compare", "--topology", "ring", *SMALL, "--algorithms", "pull-diag-gt,push-pull,sgp",
                               "--rounds-budget", "40", "--repeats", "2", "--lr", "pull-diag-gt=0.01,push-pull=0.05",
                               "--tune", "--out", out)
    assert rc == 0, err
    assert "tuned sgp: lr = " in stdout and "push-pull" in stdout
    for name in ("compare.csv", "summary.csv", "lr.json", "compare.png"):
        assert (out / name).stat().st_size > 0, name
    import pandas as pd

    table = pd.read_csv(out / "summary.csv")
    assert table["algorithm"].tolist() == ["pull-diag-gt", "push-pull", "sgp"]
    assert (table["communication_rounds"] == 40).all()


@pytest.mark.parametrize("args, fragments", [
    (["--lr", "frost=x"], ["--lr frost='x' is not a number"]),
    (["--lr", "sgp=0.1"], ["--lr names 'sgp'"]),
    (["--algorithms", "frost,nope"], ["unknown algorithm 'nope'"]),
    (["--lr", "0.1", "--algorithms", "frost", "--topology", "torus"], ["unknown topology 'torus'"]),
    ([], ["no learning rate for frost"]),
    (["--lr", "-1"], ["frost = -1.0 must be a finite number > 0"]),
    (["--preset", "paper", "--topology", "ring"], ["--preset paper runs the paper's four 16-node graphs"]),
    (["--tune", "--tune-fraction", "2"], ["--tune-fraction must be in (0, 1], got 2"]),
    (["--lr", "frost=0.1,frost=0.2"], ["--lr gives frost twice"]),
    (["--tune", "--tune-fraction", "nan"], ["--tune-fraction must be in (0, 1], got nan"]),
])
def test_cli_compare_bad_input_is_one_line(tmp_path, args, fragments):
    base = ["compare", *SMALL, "--algorithms", "frost", "--rounds-budget", "10", "--out", tmp_path / "o"]
    if "--algorithms" in args:
        base = [a for a in base if a != "frost" and a != "--algorithms"]
    rc, _, err = rowstoch(*base, *args)
    assert_one_line_error(rc, err, *fragments)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process group")
def test_cli_compare_ctrl_c_keeps_what_finished(tmp_path):
    out = tmp_path / "cmp"
    cmd = [ROWSTOCH] if ROWSTOCH else [sys.executable, "-m", "rowstoch_fast.cli"]
    proc = subprocess.Popen(cmd + ["compare", "--topology", "exponential", *SMALL, "--algorithms",
                                   "dsgd,sgp,push-pull", "--rounds-budget", "200000", "--repeats", "1",
                                   "--lr", "0.05", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:  # the first algorithm finishes, the second is running: interrupt it
            line = proc.stdout.readline()
            if "dsgd: done" in line or not line:
                break
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        stdout, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    import pandas as pd

    frame = pd.read_csv(out / "compare.csv")
    last = frame.groupby("algorithm", sort=False)["iteration"].max()
    # what finished is complete; the algorithm running at the Ctrl-C keeps its records so far (on a fast machine
    # that may be push-pull rather than sgp)
    assert list(last.index) in (["dsgd", "sgp"], ["dsgd", "sgp", "push-pull"])
    assert (last.iloc[:-1] == 200000).all() and 0 < last.iloc[-1] < 200000
    assert "interrupted" in stdout


def test_a_failing_algorithm_keeps_the_finished_ones(problem):
    """An error in one algorithm's run (here its objective's, from the second algorithm on) goes out with the
    algorithms that finished before it (``exc.frame``); they were lost."""
    A, _ = problem

    class Flaky(Quadratic):
        calls = 0

        def stochastic_gradient(self, X, iteration, **kw):
            type(self).calls += 1
            if type(self).calls > 40:
                raise OSError("the data server went away")
            return super().stochastic_gradient(X, iteration, **kw)

    with pytest.raises(OSError, match="went away") as info:
        cmp.compare(A, Flaky.random(8, 3, seed=0), "dsgd,sgp", 30, lr=0.01, repeats=1, progress=False)
    assert list(info.value.frame["algorithm"].unique()) == ["dsgd"]


def test_cli_compare_writes_what_finished_before_an_error(tmp_path, monkeypatch, capsys):
    """An error in the second algorithm's run: the first one's records go to --out before the error is reported
    (one line, exit 2)."""
    import pandas as pd

    from rowstoch_fast import cli
    from rowstoch_fast.objectives import NonconvexLogistic

    real, calls = NonconvexLogistic.stochastic_gradient, [0]

    def flaky(self, X, iteration, **kw):
        calls[0] += 1
        if calls[0] > 25:
            raise RuntimeError("the data server went away")
        return real(self, X, iteration, **kw)

    monkeypatch.setattr(NonconvexLogistic, "stochastic_gradient", flaky)
    code = cli.main(["compare", "--n", "8", "--total", "1600", "--batch", "20", "--algorithms", "dsgd,sgp", "--lr",
                     "0.01", "--rounds-budget", "20", "--repeats", "1", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "the data server went away" in err
    assert f"the algorithms that finished before the error are in {tmp_path / 'compare.csv'}" in err
    assert list(pd.read_csv(tmp_path / "compare.csv")["algorithm"].unique()) == ["dsgd"]
