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
    frame = cmp.compare(A, f, "pull-diag-gt,sgp", 100, lr={"sgp": 0.05}, repeats=1, progress=False)
    assert frame.attrs["lr"]["sgp"] == 0.05 and "sgp" not in frame.attrs["tuning"]
    assert frame.attrs["lr_source"] == {"pull-diag-gt": "tuned", "sgp": "given"}
    record = frame.attrs["tuning"]["pull-diag-gt"]
    first, last = record["rungs"][0], record["rungs"][-1]
    assert set(first["scores"]) == set(cmp.TUNE_GRID) and last["rounds"] == 100
    best = frame.attrs["lr"]["pull-diag-gt"]
    assert best == record["chosen"] and best in cmp.TUNE_GRID
    # the winner is the best of the finalists on the whole budget, and no rejected rate
    assert last["scores"][best] == min(last["scores"].values()) and best not in last["rejected"]
    assert record["metric"] == "grad_norm_mean"  # no f* for the nonconvex problem: the gradient at the mean
    assert cmp.summary(frame)["lr_source"].tolist() == ["tuned", "given"]


def test_tuning_runs_on_seeds_the_repetitions_never_draw(problem, monkeypatch):
    A, f = problem
    seeds = []
    real = cmp._one_run

    def spy(*args, **kw):
        seeds.append((kw["seed"], kw["repeats"]))
        return real(*args, **kw)

    monkeypatch.setattr(cmp, "_one_run", spy)
    cmp.compare(A, f, "dsgd", 64, repeats=3, seed=7, progress=False)
    tuning, evaluation = seeds[:-1], seeds[-1]
    assert evaluation == (7, 3)
    assert {s for s, _ in tuning} == {7 + cmp.TUNE_SEED_OFFSET} and {r for _, r in tuning} == {cmp.TUNE_REPEATS}


def test_a_rate_that_is_best_early_and_then_climbs_is_rejected():
    """The verdict's failure mode: a rate that wins at a short horizon and blows up later. Here the tuning runs
    see a metric that falls, then climbs 10x: that rate must lose to one that keeps falling."""
    import pandas as pd

    climbing = pd.DataFrame({"grad_norm_mean": [1.0, 1e-3, 1e-4, 1e-4, 1e-3, 1e-3, 1e-3]})
    steady = pd.DataFrame({"grad_norm_mean": [1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01]})
    score, why = cmp._judge(climbing, "done", "grad_norm_mean")
    assert score == np.inf and why.startswith("unstable (ends")
    assert cmp._judge(steady, "done", "grad_norm_mean") == (0.01, None)
    assert cmp._judge(steady, "diverged", "grad_norm_mean") == (np.inf, "diverged")
    rising = pd.DataFrame({"grad_norm_mean": [1.0, 2.0, 3.0, 4.0]})
    assert cmp._judge(rising, "done", "grad_norm_mean") == (np.inf, "no progress")
    # converged to rounding: 1e-16 and 4e-16 are equal, not "4x above the minimum"
    flat = pd.DataFrame({"grad_norm_mean": [1.0, 1e-3, 1e-16, 4e-16, 1e-16, 4e-16, 4e-16]})
    assert cmp._judge(flat, "done", "grad_norm_mean")[1] is None


@pytest.mark.parametrize("method", ["push-pull", "dsgd", "pull-diag-gt"])
def test_a_tuned_algorithm_never_ends_worse_than_twice_its_best(method):
    """On a deterministic problem (full-batch least squares) the tuned rate's evaluation run ends within 2x of its
    own minimum over the run (the old tuner picked lr = 1 for push-pull from a tenth of the budget, which then
    climbed)."""
    from rowstoch_fast.objectives import LeastSquares

    A = topology.ring(16, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(16, heterogeneity=1.0, seed=3)
    frame = cmp.compare(A, f, method, 400, repeats=2, progress=False)
    mean = frame.groupby("iteration")["suboptimality"].mean()
    floor = cmp.CONVERGED * mean.iloc[0]
    assert max(mean.iloc[-1], floor) <= 2 * max(mean.min(), floor)
    assert frame.attrs["status"][method] == "done"


def test_the_default_metric_ranks_an_exact_method_ahead_of_a_biased_one():
    """Heterogeneous least squares over an undirected ring with its Metropolis W: DSGD stops at a biased point
    where the paper's metric ||(1/n) sum_i grad f_i(x_i)|| is ~0, so that metric ranks it first; the default
    (suboptimality) ranks gradient tracking first whenever its f(x_bar) - f* is lower."""
    from rowstoch_fast.objectives import LeastSquares

    A = topology.ring(16, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(16, heterogeneity=1.0, seed=0)
    frame = cmp.compare(A, f, "dsgd,push-pull,push-diging", 1000, lr=0.1, repeats=1, progress=False)
    assert frame.attrs["metric"] == cmp.default_metric(f) == "suboptimality"
    table = cmp.summary(frame, metrics=["grad_norm"]).set_index("algorithm")
    assert table.loc["push-pull", "suboptimality"] < table.loc["dsgd", "suboptimality"]
    assert table.loc["push-pull", "rank"] < table.loc["dsgd", "rank"]
    assert table.loc["push-diging", "rank"] < table.loc["dsgd", "rank"]
    assert table.loc["dsgd", "grad_norm"] < table.loc["push-pull", "grad_norm"]  # the misranking it replaces
    assert table.loc["push-pull", "suboptimality_best"] and not table.loc["dsgd", "suboptimality_best"]


def test_tables_show_every_metric_the_best_in_bold_and_every_status(tmp_path):
    from rowstoch_fast import report

    A, f = topology.exponential(8), Quadratic.random(8, 3, seed=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        frame = cmp.compare(A, f, "push-pull,dsgd,pull-diag-gt", 200,
                            lr={"push-pull": 0.1, "dsgd": 0.1, "pull-diag-gt": 50.0}, repeats=2, progress=False,
                            lr_source={"dsgd": "paper"})
    table = cmp.summary(frame, metrics=["consensus_error"])
    assert table["status"].tolist() == ["ok", "ok", "diverged"]
    assert table["rank"].iloc[2] is pd_na()
    md = report.to_markdown(table, ["suboptimality", "consensus_error"])
    rows = md.strip().splitlines()
    assert len(rows) == 5 and "0.1 (paper)" in rows[3] and rows[4].endswith("| diverged |")
    assert rows[2].count("**") == 4 and "**" not in rows[3].split("|")[5]  # push-pull best on both; dsgd biased
    tex = report.to_latex(table, ["suboptimality", "consensus_error"])
    assert tex.count(r"\toprule") == 1 and tex.count(r"\bottomrule") == 1 and r"\textbf{" in tex
    assert tex.count(r"\\") == 4 and "diverged" in tex and r"$f(\bar x) - f^\star$" in tex
    fig = report.figure([frame], ["suboptimality", "consensus_error"], path=str(tmp_path / "c"),
                        formats=["png", "svg"], titles=["exp"])
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    assert (tmp_path / "c.png").stat().st_size > 1000 and (tmp_path / "c.svg").stat().st_size > 1000
    # colour-blind-safe lines that differ in marker too
    lines = fig.axes[0].get_lines()
    assert len({ln.get_marker() for ln in lines}) == 3 and {ln.get_color() for ln in lines} <= set(report.COLOURS)


def pd_na():
    import pandas as pd

    return pd.NA


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
        cmp.compare(A, f, "dsgd,push-pull", 10, lr={"dsgd": 0.1}, tune=False, progress=False)
    with pytest.raises(TypeError, match="lr: dsgd must be a number, got str '0.1'"):
        cmp.compare(A, f, "dsgd", 10, lr={"dsgd": "0.1"}, progress=False)
    with pytest.raises(TypeError, match="tune must be True or False, got 'yes'"):
        cmp.compare(A, f, "dsgd", 10, tune="yes", progress=False)
    with pytest.raises(ValueError, match="lr_source: dsgd has no given lr"):
        cmp.compare(A, f, "dsgd", 10, lr_source={"dsgd": "paper"}, progress=False)
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
                               "--out", out, "--format", "png,pdf")
    assert rc == 0, err
    assert "tuning the learning rate of sgp (no --lr for it)" in stdout
    assert "tuned sgp: lr = " in stdout and "push-pull" in stdout
    for name in ("compare.csv", "summary.csv", "summary.md", "summary.tex", "lr.json", "compare.png", "compare.pdf",
                 "tuning.png"):
        assert (out / name).stat().st_size > 0, name
    import json

    import pandas as pd

    table = pd.read_csv(out / "summary.csv")
    assert table["algorithm"].tolist() == ["pull-diag-gt", "push-pull", "sgp"]
    assert (table["communication_rounds"] == 40).all()
    assert table["lr_source"].tolist() == ["given", "given", "tuned"] and (table["status"] == "ok").all()
    # no f* for the paper's nonconvex problem: ranked on the gradient at the mean, consensus error beside it
    assert {"grad_norm_mean", "grad_norm_mean_std", "consensus_error", "rank"} <= set(table.columns)
    rates = json.loads((out / "lr.json").read_text())["ring"]
    assert rates["source"]["sgp"] == "tuned" and len(rates["tuning"]["sgp"]["rungs"][0]["scores"]) == 11
    from PIL import Image

    with Image.open(out / "compare.png") as image:
        assert image.info["dpi"][0] == pytest.approx(300, abs=1)


@pytest.mark.parametrize("args, fragments", [
    (["--lr", "frost=x"], ["--lr frost='x' is not a number"]),
    (["--lr", "sgp=0.1"], ["--lr names 'sgp'"]),
    (["--algorithms", "frost,nope"], ["unknown algorithm 'nope'"]),
    (["--lr", "0.1", "--algorithms", "frost", "--topology", "torusx"], ["unknown topology 'torusx'"]),
    (["--lr", "-1"], ["frost = -1.0 must be a finite number > 0"]),
    (["--preset", "paper", "--topology", "ring"], ["--preset paper runs the paper's four 16-node graphs"]),
    (["--lr", "frost=0.1,frost=0.2"], ["--lr gives frost twice"]),
    (["--metric", "suboptimality,accuracy"], ["--metric must be a comma-separated list of", "'accuracy'"]),
    (["--x", "time"], ["--x must be a comma-separated list of rounds, gradients, bytes, seconds"]),
    (["--format", "png,jpg"], ["--format must be a comma-separated list of png, pdf, svg", "'jpg'"]),
    (["--weights", "metropolis"], ["needs an undirected graph", "--undirected"]),
    (["--undirected", "--topology", "grid"], ["--undirected is for exponential, ring, erdos_renyi"]),
    (["--objective", "logistic-l2", "--lam", "0"], ["--lam must be a finite number > 0, got 0.0"]),
    (["--tune-fraction", "0.5"], ["unrecognized arguments: --tune-fraction"]),
])
def test_cli_compare_bad_input_is_one_line(tmp_path, args, fragments):
    base = ["compare", *SMALL, "--algorithms", "frost", "--rounds-budget", "10", "--out", tmp_path / "o"]
    if "--algorithms" in args:
        base = [a for a in base if a != "frost" and a != "--algorithms"]
    rc, _, err = rowstoch(*base, *args)
    assert_one_line_error(rc, err, *fragments)
    assert not (tmp_path / "o").exists()  # nothing is created before the arguments are valid


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
    # the run stopped by the Ctrl-C says so in every table (it was shown "ok" with its partial budget)
    status = pd.read_csv(out / "summary.csv").set_index("algorithm")["status"]
    assert status.iloc[-1] == "interrupted" and (status.iloc[:-1] == "ok").all()
    assert "| interrupted |" in (out / "summary.md").read_text()


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


EXPERIMENT = """
[network]
topology = "ring"
n = 8
undirected = true
weights = "metropolis"

[objective]
kind = "least-squares"
samples_per_node = 6
d = 3

[run]
rounds_budget = 60
repeats = 2

[outputs]
metrics = ["suboptimality", "distance"]
formats = ["png", "svg"]

[algorithms.dsgd]
lr = 0.1
lr_source = "a paper"

[algorithms.push-pull]
"""


def test_cli_compare_runs_an_experiment_file_and_saves_what_made_the_results(tmp_path):
    import json

    import pandas as pd

    cfg = tmp_path / "exp.toml"
    cfg.write_text(EXPERIMENT)
    out = tmp_path / "out"
    rc, stdout, err = rowstoch("compare", "--config", cfg, "--out", out, "--no-progress")
    assert rc == 0, err
    table = pd.read_csv(out / "summary.csv")
    assert table["algorithm"].tolist() == ["dsgd", "push-pull"]
    assert table["lr_source"].tolist() == ["a paper", "tuned"] and table["lr"].iloc[0] == 0.1
    assert (table["communication_rounds"] == 60).all() and {"distance", "distance_std"} <= set(table.columns)
    saved = json.loads((out / "experiment.json").read_text())
    assert saved["settings"]["weights"] == "metropolis" and saved["settings"]["repeats"] == 2
    assert saved["algorithms"]["dsgd"] == {"lr": 0.1, "lr_source": "a paper"}
    assert saved["version"] and "openmp" in json.dumps(saved["build_info"]).lower()
    assert (out / "compare.svg").stat().st_size > 0
    # an option on the command line wins over the file
    rc, _, err = rowstoch("compare", "--config", cfg, "--repeats", "1", "--out", tmp_path / "o2", "--no-progress")
    assert rc == 0, err
    assert json.loads((tmp_path / "o2" / "experiment.json").read_text())["settings"]["repeats"] == 1


@pytest.mark.parametrize("edit, fragment", [
    (lambda t: t.replace("[run]", "[runs]"), "[runs]: unknown table; the tables are network, objective, communication, run"),
    (lambda t: t.replace("repeats = 2", "repets = 2"), "[run] repets: unknown key; the keys are rounds_budget"),
    (lambda t: t.replace("repeats = 2", 'repeats = "2"'), "[run] repeats must be an integer, got str '2'"),
    (lambda t: t.replace("lr = 0.1", 'lr = "fast"'), "[algorithms.dsgd] lr must be a number, got str 'fast'"),
    (lambda t: t.replace("[algorithms.push-pull]", "[algorithms.pushpull]"), "unknown algorithm 'pushpull'"),
    (lambda t: t.replace('"least-squares"', '"lsq"'), "[objective] kind must be one of logistic, logistic-l2"),
    (lambda t: t.replace("n = 8", "n = 8\nn = 9"), "is not valid TOML"),
    (lambda t: t.replace('lr_source = "a paper"', 'lr_sourse = "a paper"'), "[algorithms.dsgd] lr_sourse: unknown"),
    (lambda t: t.split("[algorithms.dsgd]")[0], "no [algorithms.NAME] table"),
])
def test_a_bad_experiment_file_is_one_line_naming_the_key_and_writes_nothing(tmp_path, edit, fragment):
    cfg = tmp_path / "exp.toml"
    cfg.write_text(edit(EXPERIMENT))
    rc, _, err = rowstoch("compare", "--config", cfg, "--out", tmp_path / "out", "--no-progress")
    assert_one_line_error(rc, err, fragment)
    assert not (tmp_path / "out").exists()


def test_missing_experiment_file_and_two_files_are_refused(tmp_path):
    rc, _, err = rowstoch("compare", "--config", tmp_path / "nope.toml", "--out", tmp_path / "o")
    assert_one_line_error(rc, err, "--config", "nope.toml' does not exist")
    rc, _, err = rowstoch("compare", "--config", tmp_path / "nope.toml", "--preset", "paper", "--out", tmp_path / "o")
    assert_one_line_error(rc, err, "--preset and --config both name an experiment file")
    assert not (tmp_path / "o").exists()


def test_the_paper_preset_is_a_shipped_file_that_tunes_every_algorithm():
    from rowstoch_fast import config

    options, algorithms, _ = config.load(config.preset_path("paper"))
    from rowstoch_fast.algorithms import labels

    # every algorithm that runs on the paper's directed graphs, from the registry (in_paper_preset), none pinned
    assert list(algorithms) == labels(lambda cls: cls.in_paper_preset) and not any("lr" in a for a in algorithms.values())
    assert "dgd" in cmp.ALGORITHMS and "dgd" not in algorithms and {"add-opt", "abm"} <= set(algorithms)
    assert options["topology"] == ["paper-ring", "paper-grid", "paper-geometric", "paper-nearest_neighbor"]


def test_arguments_of_the_wrong_type_are_named(problem):
    """They reached NumPy or Python errors (issue 35: strings as rates, arrays, names that are not strings)."""
    A, f = problem
    cases = [(dict(algorithms=["dsgd", 5]), TypeError, "algorithms: every name must be a string, got int 5"),
             (dict(algorithms=3), TypeError, "algorithms must be names"),
             (dict(lr="0.1"), TypeError, "lr: dsgd must be a number, got str '0.1'"),
             (dict(lr=np.array([0.1, 0.2])), TypeError, "lr: dsgd must be a number, got ndarray"),
             (dict(rounds_budget="100"), TypeError, "rounds_budget must be an integer"),
             (dict(repeats=0), ValueError, "repeats must be >= 1, got 0"),
             (dict(log="print"), TypeError, "log must be a callable"),
             (dict(metric="accuracy"), ValueError, "metric must be one of")]
    for kwargs, kind, message in cases:
        call = dict(dict(algorithms="dsgd", rounds_budget=10, progress=False), **kwargs)
        with pytest.raises(kind, match=message):
            cmp.compare(A, f, **call)
    with pytest.raises(TypeError, match="objective must be an Objective"):
        cmp.compare(A, "logistic", "dsgd", 10, lr=0.1, progress=False)
    with pytest.raises(TypeError, match="A must be a MixingMatrix or a network"):
        cmp.compare(A.toarray(), f, "dsgd", 10, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="objective has n = 8 nodes but the network has 4"):
        cmp.compare(topology.exponential(4), f, "dsgd", 10, lr=0.1, progress=False)


def test_more_repetitions_add_only_the_missing_ones(problem, tmp_path):
    """compare(previous=frame, repeats=k) keeps the earlier repetitions and runs only the new ones; the result is
    the comparison run at k repetitions from the start, bit for bit."""
    A, f = problem
    lines = []
    two = cmp.compare(A, f, "dsgd,push-pull", 40, lr={"dsgd": 0.1, "push-pull": 0.05}, repeats=2, progress=False,
                      checkpoint_dir=str(tmp_path / "ck"))
    assert {p.name for p in (tmp_path / "ck").iterdir()} == {"dsgd.npz", "push-pull.npz"}
    three = cmp.compare(A, f, "dsgd,push-pull", 40, repeats=3, progress=False, previous=two, log=lines.append)
    direct = cmp.compare(A, f, "dsgd,push-pull", 40, lr={"dsgd": 0.1, "push-pull": 0.05}, repeats=3, progress=False)
    cols = ["algorithm", "iteration", "rep", "grad_norm", "grad_norm_mean", "consensus_error"]
    np.testing.assert_array_equal(three[cols].to_numpy(), direct[cols].to_numpy())
    assert "dsgd: 1 more repetitions" in lines and three.attrs["lr_source"] == {"dsgd": "given", "push-pull": "given"}
    kept = cmp.compare(A, f, "dsgd,push-pull", 40, repeats=2, progress=False, previous=two, log=lines.append)
    np.testing.assert_array_equal(kept[cols].to_numpy(), two[cols].to_numpy())
    with pytest.raises(ValueError, match="lr: dsgd = 0.2, but the earlier comparison ran it at 0.1"):
        cmp.compare(A, f, "dsgd", 40, lr=0.2, repeats=2, progress=False, previous=two)


def test_cli_compare_resumes_an_interrupted_comparison(tmp_path, monkeypatch, capsys):
    """--resume DIR keeps what finished, continues the interrupted run from its checkpoint, and ends with the
    records an uninterrupted comparison has (a Ctrl-C in SGP's run, at its 150th gradient)."""
    import pandas as pd

    from rowstoch_fast import cli
    from rowstoch_fast.algorithms import _base

    out = tmp_path / "cmp"
    args = ["compare", "--topology", "exponential", *SMALL, "--algorithms", "dsgd,sgp", "--rounds-budget", "400",
            "--repeats", "2", "--lr", "0.05", "--no-progress"]
    calls = [0]

    def interrupting(real):  # (SGP reads its gradients where grad_fn returned them: _gradient_read)
        def interrupted(self, *a, **kw):
            if self.name == "sgp":
                calls[0] += 1
                if calls[0] == 150:
                    raise KeyboardInterrupt
            return real(self, *a, **kw)
        return interrupted

    for name in ("_gradient", "_gradient_read"):
        monkeypatch.setattr(_base.Optimizer, name, interrupting(getattr(_base.Optimizer, name)))
    assert cli.main(args + ["--out", str(out)]) == 130
    monkeypatch.undo()
    partial = pd.read_csv(out / "compare.csv")
    assert set(partial.loc[partial["algorithm"] == "sgp", "status"]) == {"interrupted"}
    assert (out / "checkpoints" / "exponential" / "sgp.npz").exists()
    capsys.readouterr()
    assert cli.main(["compare", "--resume", str(out), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert "dsgd: kept from the earlier comparison (done, 2 repetitions)" in stdout
    assert "sgp: resumed from its checkpoint" in stdout
    assert cli.main(args + ["--out", str(tmp_path / "direct")]) == 0
    resumed, direct = pd.read_csv(out / "compare.csv"), pd.read_csv(tmp_path / "direct" / "compare.csv")
    cols = ["algorithm", "iteration", "rep", "grad_norm", "grad_norm_mean", "consensus_error", "status"]
    pd.testing.assert_frame_equal(resumed[cols], direct[cols])
    # more repetitions: only the missing ones run, and they are those of a 3-repetition comparison
    assert cli.main(["compare", "--resume", str(out), "--repeats", "3", "--no-progress"]) == 0
    assert "dsgd: 1 more repetitions" in capsys.readouterr().out
    three_args = [a if a != "2" else "3" for a in args]  # (--repeats 2 -> 3; nothing else reads "2")
    assert cli.main(three_args + ["--out", str(tmp_path / "three")]) == 0
    more, three = pd.read_csv(out / "compare.csv"), pd.read_csv(tmp_path / "three" / "compare.csv")
    pd.testing.assert_frame_equal(more[cols], three[cols])
    capsys.readouterr()
    assert cli.main(["compare", "--resume", str(out), "--rounds-budget", "10"]) == 2
    assert "drop --rounds-budget" in capsys.readouterr().err


def test_the_shipped_experiment_file_runs(tmp_path):
    """examples/undirected_least_squares.toml, at a smaller budget (the command line wins over the file)."""
    import pathlib

    import pandas as pd

    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "undirected_least_squares.toml"
    rc, stdout, err = rowstoch("compare", "--config", example, "--rounds-budget", "200", "--repeats", "2",
                               "--out", tmp_path / "o", "--no-progress")
    assert rc == 0, err
    table = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert table["algorithm"].tolist() == ["dsgd", "push-pull", "push-diging", "pull-diag-gt", "frost"]
    assert table["lr_source"].iloc[0] == "a fixed rate for illustration" and (table["lr_source"][1:] == "tuned").all()
    assert (tmp_path / "o" / "compare.pdf").exists() and "ranked by suboptimality" in stdout


def test_cli_compare_reads_the_data_from_a_file(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(0)
    H = rng.standard_normal((64, 3))
    np.savez(tmp_path / "ls.npz", H=H, y=H @ np.ones(3) + 0.1 * rng.standard_normal(64))
    rc, _, err = rowstoch("compare", "--n", "16", "--objective", "least-squares", "--data-file", tmp_path / "ls.npz",
                          "--algorithms", "push-pull", "--lr", "0.3", "--rounds-budget", "300", "--repeats", "1",
                          "--out", tmp_path / "o", "--no-progress")
    assert rc == 0, err
    assert pd.read_csv(tmp_path / "o" / "summary.csv")["suboptimality"].iloc[0] < 1e-10
    np.savez(tmp_path / "labels.npz", H=H, y=np.arange(64.0))
    for args, message in ((["--objective", "logistic-l2", "--data-file", tmp_path / "labels.npz"], "labels y in"),
                          (["--objective", "least-squares", "--data-file", tmp_path / "nope.npz"], "does not exist"),
                          (["--objective", "least-squares", "--data-file", tmp_path / "ls.npz", "--d", "4"],
                           "--d is not read with --data-file")):
        rc, _, err = rowstoch("compare", "--n", "16", *args, "--algorithms", "dsgd", "--out", tmp_path / "bad")
        assert_one_line_error(rc, err, message)
        assert not (tmp_path / "bad").exists()
