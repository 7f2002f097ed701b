"""``rowstoch reproduce k-gt-local-steps``: K-GT's synthetic experiment (Liu, Lin, Koloskova & Stich 2024) runs,
writes its outputs, states its verdict by a rule that can fail, and refuses bad options before anything runs."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from rowstoch_fast import cli, experiments
from rowstoch_fast.experiments import heterogeneous_quadratics, kgt_local_steps_verdicts, reproduce_kgt_local_steps

OUTPUTS = ["kgt_local_steps.csv", "kgt_local_steps.png", "kgt_local_steps_finals.csv", "kgt_local_steps_verdict.csv"]


def test_the_command_runs_writes_its_outputs_and_states_a_verdict(tmp_path, capsys, monkeypatch):
    """A tiny run through the command line (20 rounds, 2 repeats; K in {1, 2} and zeta in {0, 10} instead of the
    default's four K, to keep it to seconds): every (zeta, method, K) run, one verdict row per pair of consecutive K
    per zeta and per K at the largest zeta, each printed with its numbers and the rule."""
    pytest.importorskip("matplotlib")
    import functools

    steps, zetas = (1, 2), (0.0, 10.0)
    monkeypatch.setattr(experiments, "reproduce_kgt_local_steps",
                        functools.partial(reproduce_kgt_local_steps, local_steps=steps, heterogeneity=zetas))
    out = tmp_path / "kgt"
    assert cli.main(["reproduce", "k-gt-local-steps", "--iterations", "20", "--repeats", "2", "--out", str(out),
                     "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == OUTPUTS
    finals = pd.read_csv(out / "kgt_local_steps_finals.csv")
    assert len(finals) == len(steps) * len(zetas) * len(experiments.KGT_METHODS)
    assert (finals["repeats"] == 2).all()
    records = pd.read_csv(out / "kgt_local_steps.csv")
    assert records["communication_rounds"].max() == 20
    for K in steps:  # K gradient steps per communication round: the gradients axis is honest
        run = records[(records["local_steps"] == K) & (records["communication_rounds"] == 20)]
        assert len(run) and (run["iteration"] == 20 * K).all()
    verdict = pd.read_csv(out / "kgt_local_steps_verdict.csv")
    assert len(verdict) == len(zetas) * (len(steps) - 1) + len(steps)
    assert set(verdict["verdict"]) <= {"holds", "does not hold", "inconclusive"}
    assert (verdict["rule"] == experiments.KGT_RULE).all()
    assert len(re.findall(r"^  (holds|does not hold|inconclusive|not decided) +\S", printed, re.M)) == len(verdict)
    assert "K-GT's claims on this run:" in printed
    # each row is the finals' numbers, compared by the rule's Welch interval
    row = verdict[verdict["versus"] == "local-dsgd"].iloc[0]
    kgt = finals[(finals["algorithm"] == "k-gt") & (finals["heterogeneity"] == max(zetas))
                 & (finals["local_steps"] == row["K"])].iloc[0]
    assert row["final"] == pytest.approx(kgt["final"])


def test_the_default_plan():
    """The command's default: the paper's two methods, K = 1 .. 8 doubling, homogeneous and heterogeneous data."""
    assert experiments.KGT_METHODS == ("k-gt", "local-dsgd")
    assert experiments.KGT_LOCAL_STEPS == (1, 2, 4, 8) and experiments.KGT_HETEROGENEITY == (0.0, 10.0)
    assert experiments.KGT_ROUNDS == 300 and experiments.KGT_REPEATS == 5


@pytest.mark.parametrize("args, fragment", [
    (["--iterations", "5"], "--iterations is the communication rounds of each run, at least 10 (the verdict reads "
                            "the last tenth of its records), got 5"),
    (["--alpha", "0.5"], "reproduce k-gt-local-steps takes no --alpha (it takes --iterations, --repeats, --seed)"),
    (["--data-seed", "3"], "reproduce k-gt-local-steps takes no --data-seed"),
    (["--graphs", "ring"], "reproduce k-gt-local-steps takes no --graphs"),
    (["--repeats", "0"], "--repeats"),
    (["--iterations", str(2**62 + 1)], "--iterations is at most 576460752303423488 (2^62 iterations a run, 8 local "
                                       "steps a round)"),  # (a traceback, helper 261)
])
def test_bad_options_are_refused_in_one_line_before_anything_is_written(tmp_path, capsys, args, fragment):
    out = tmp_path / "kgt"
    try:
        rc = cli.main(["reproduce", "k-gt-local-steps", *args, "--out", str(out), "--no-progress"])
    except SystemExit as exc:  # (argparse's own checks exit)
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rowstoch: error:") and fragment in lines[0], err
    assert not out.exists()


@pytest.mark.parametrize("options, message", [
    (dict(local_steps=(4,)), "local_steps must be at least two distinct K"),
    (dict(local_steps=(2, 2)), "local_steps must be at least two distinct K"),
    (dict(local_steps=(0, 1)), "local_steps"),
    (dict(heterogeneity=()), "heterogeneity must be distinct levels"),
    (dict(heterogeneity=(-1.0,)), "heterogeneity"),
    (dict(communication_rounds=9), "communication_rounds"),
    (dict(methods=("local-dsgd",)), "methods must hold k-gt"),
    (dict(methods=("k-gt", "dgd")), "'dgd' is not a registered local-update method"),
])
def test_the_function_refuses_bad_options_before_writing(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        reproduce_kgt_local_steps(str(tmp_path / "o"), progress=False, log=lambda line: None, **options)
    assert not (tmp_path / "o").exists()


def _finals(kgt, dsgd, spread=1e-4, repeats=5, status=None, zeta=10.0, steps=(1, 2, 4)):
    rows = [{"heterogeneity": zeta, "algorithm": name, "local_steps": K, "status": (status or {}).get((name, K), "ok"),
             "final": value, "spread": spread, "repeats": repeats}
            for name, values in (("k-gt", kgt), ("local-dsgd", dsgd)) for K, value in zip(steps, values)]
    return pd.DataFrame(rows)


def test_the_verdict_holds_where_the_claims_do():
    rows = kgt_local_steps_verdicts(_finals([3e-3, 1.5e-3, 8e-4], [7e-2, 7e-2, 6e-2]), (1, 2, 4), (10.0,))
    assert [r["verdict"] for r in rows] == ["holds"] * 6
    assert [(r["K"], r["versus"]) for r in rows] == [(2, "K = 1"), (4, "K = 2"), (4, "trend"), (1, "local-dsgd"),
                                                      (2, "local-dsgd"), (4, "local-dsgd")]


def test_the_verdict_rule_can_fail():
    """Data where the claims do not hold give 'does not hold' (never the best pair, never the best K): K-GT's
    error rising from K = 2 to K = 4, and Local DSGD below K-GT at K = 4; a spread too wide to tell is
    'inconclusive'; a K-GT run that diverged (or made no progress) loses whatever its numbers."""
    rows = kgt_local_steps_verdicts(_finals([3e-3, 1.5e-3, 2.5e-3], [7e-2, 7e-2, 1e-3]), (1, 2, 4), (10.0,))
    assert [r["verdict"] for r in rows] == ["holds", "does not hold", "inconclusive", "holds", "holds",
                                            "does not hold"]  # (the trend: down, then up: its residuals tell)
    rising = kgt_local_steps_verdicts(_finals([1e-3, 1.5e-3, 2.5e-3], [7e-2, 7e-2, 7e-2]), (1, 2, 4), (10.0,))
    assert rising[2]["versus"] == "trend" and rising[2]["verdict"] == "does not hold" and rising[2]["slope"] > 0
    wide = kgt_local_steps_verdicts(_finals([3e-3, 2.9e-3, 2.8e-3], [7e-2, 7e-2, 7e-2], spread=1e-3), (1, 2, 4),
                                    (10.0,))
    assert [r["verdict"] for r in wide[:2]] == ["inconclusive", "inconclusive"]
    lost = kgt_local_steps_verdicts(_finals([3e-3, 1e-6, 8e-4], [7e-2, 7e-2, 6e-2],
                                            status={("k-gt", 2): "diverged"}), (1, 2, 4), (10.0,))
    assert [r["verdict"] for r in lost] == ["does not hold", "holds", "does not hold", "holds", "does not hold",
                                            "holds"]
    assert math.isinf(lost[0]["final"])
    one = kgt_local_steps_verdicts(_finals([3e-3, 1.5e-3, 8e-4], [7e-2, 7e-2, 6e-2], spread=math.nan, repeats=1),
                                   (1, 2, 4), (10.0,))
    assert all(r["verdict"].startswith("inconclusive (one repeat") for r in one)


def test_the_verdict_reads_every_run_there_is_and_no_other():
    """A run the experiment did not reach (it stopped) gives no row; identical minimisers (zeta = 0 only) have no
    heterogeneity to correct, so K-GT is not compared with Local DSGD there."""
    finals = _finals([3e-3, 1.5e-3, 8e-4], [7e-2, 7e-2, 6e-2])
    partial = finals[~((finals["algorithm"] == "k-gt") & (finals["local_steps"] == 4))]
    assert [r["versus"] for r in kgt_local_steps_verdicts(partial, (1, 2, 4), (10.0,))] == [
        "K = 1", "local-dsgd", "local-dsgd"]
    homogeneous = _finals([3e-3, 1.5e-3, 8e-4], [3e-3, 1.5e-3, 8e-4], zeta=0.0)
    assert [r["versus"] for r in kgt_local_steps_verdicts(homogeneous, (1, 2, 4), (0.0,))] == ["K = 1", "K = 2",
                                                                                               "trend"]


def test_the_trend_over_k_holds_where_each_doubling_cannot_tell():
    """Each doubling of K judged alone at 5 repeats with spreads of a third of the mean is inconclusive, and on
    seeds 0-5 the default run held 10, 9, 6, 7, 8 and 8 of its 10 rows (helper 114): one fit over every K (its
    slope's interval from the runs' spreads) tells the claim "falls with K"; it checks against a fit of its own."""
    steps = (1, 2, 4, 8)
    finals = _finals([3e-3, 2.2e-3, 1.6e-3, 1.2e-3], [7e-2] * 4, spread=0.0, steps=steps)
    finals["spread"] = finals["final"] / 3
    rows = kgt_local_steps_verdicts(finals, steps, (10.0,))
    pairs = [r for r in rows if r["versus"].startswith("K = ")]
    trend = next(r for r in rows if r["versus"] == "trend")
    assert [r["verdict"] for r in pairs] == ["inconclusive"] * 3 and trend["verdict"] == "holds"
    x, y = np.log2(steps), np.log([3e-3, 2.2e-3, 1.6e-3, 1.2e-3])
    assert trend["slope"] == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-9)  # (equal weights: equal log spreads)
    assert trend["slope_low"] < trend["slope"] < trend["slope_high"] < 0
    flat = _finals([3e-3, 2.9e-3, 3.1e-3, 3e-3], [7e-2] * 4, spread=1e-3, steps=steps)
    assert next(r for r in kgt_local_steps_verdicts(flat, steps, (10.0,)) if r["versus"] == "trend")[
        "verdict"] == "inconclusive"


def test_heterogeneous_quadratics():
    """zeta = 0: one minimiser for every node (no drift); zeta > 0: the local minimisers spread with zeta, over the
    same curvatures and the same centre."""
    same = heterogeneous_quadratics(8, 3, 0.0, seed=1)
    x = same.optimum().x
    assert np.allclose(same.full_gradient(np.broadcast_to(x, (8, 3))), 0)
    far = heterogeneous_quadratics(8, 3, 10.0, seed=1)
    assert np.array_equal(far.q, same.q)
    dissimilarity = np.linalg.norm(far.full_gradient(np.broadcast_to(far.optimum().x, (8, 3))), axis=1)
    assert dissimilarity.min() > 1.0
    assert np.allclose(far.full_gradient(np.broadcast_to(far.optimum().x, (8, 3))).mean(0), 0)
    with pytest.raises(ValueError, match="heterogeneity"):
        heterogeneous_quadratics(8, 3, -1.0)


def test_an_interrupted_run_keeps_what_finished_and_decides_nothing(tmp_path, monkeypatch):
    """Ctrl-C in the third run (the harness returns what it had, marked interrupted): the two runs before it are in
    the records and finals, every verdict row says 'not decided', and the command stops (KeyboardInterrupt: exit
    130 on the command line)."""
    from rowstoch_fast import compare as cmp

    real, calls = cmp.compare, []

    def interrupted_third(*args, **kwargs):
        frame = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 3:
            frame.attrs["interrupted"] = True
        return frame

    monkeypatch.setattr(cmp, "compare", interrupted_third)
    lines = []
    with pytest.raises(KeyboardInterrupt):
        reproduce_kgt_local_steps(str(tmp_path), communication_rounds=10, repeats=2, local_steps=(1, 2),
                                  heterogeneity=(10.0,), progress=False, log=lines.append)
    finals = pd.read_csv(tmp_path / "kgt_local_steps_finals.csv")
    assert list(zip(finals["algorithm"], finals["local_steps"])) == [("k-gt", 1), ("k-gt", 2)]
    records = pd.read_csv(tmp_path / "kgt_local_steps.csv")
    assert sorted(set(records["local_steps"])) == [1, 2] and set(records["algorithm"]) == {"k-gt"}
    verdict = pd.read_csv(tmp_path / "kgt_local_steps_verdict.csv")
    assert len(verdict) == 1 and verdict["verdict"][0] == "not decided (interrupted after 2 of 4 runs)"
    assert any(line.startswith("interrupted: wrote the 2 of 4 runs") for line in lines)


def test_a_neural_runs_loss_that_is_no_longer_finite_counts_as_diverged():
    """A run whose training loss ended infinite without a DivergenceError (the flag False) read "inf +- nan (0 of 1
    diverged)" and was not counted against its side."""
    from rowstoch_fast.experiments.neural import _final_stats

    rows = [{"repeat": r, "iteration": it, "train_loss": (math.inf if r == 1 and it == 40 else 1.0 / (1 + it)),
             "test_accuracy": 0.5, "diverged": False} for r in range(3) for it in range(0, 50, 10)]
    stats = _final_stats(pd.DataFrame(rows))
    assert stats["diverged"] == 1 and stats["repeats"] == 2 and stats["train_loss"] == math.inf
    finite = _final_stats(pd.DataFrame([r for r in rows if r["repeat"] != 1]))
    assert finite["diverged"] == 0 and finite["repeats"] == 2 and math.isfinite(finite["train_loss"])


def test_the_verdict_lines_take_the_verdict_s_head_alone():
    """Helper 197: "inconclusive (one repeat: the spread over seeds is unknown)" had been cut at the colon inside
    its parenthesis, half of it on the claim's line; the numbers every claim shares are said once."""
    from rowstoch_fast.experiments._common import verdict_lines

    lines = verdict_lines([{"claim": "a", "verdict": "inconclusive (one repeat: the spread over seeds is unknown)",
                            "seed": 0, "x": 1.0},
                           {"claim": "b", "verdict": "not decided: behind and still falling", "seed": 0, "x": 2.0},
                           {"claim": "c", "verdict": "holds", "seed": 0, "x": 3.0}])
    assert lines == ["the paper's claims on this run (seed 0):",
                     "  inconclusive  a", "                (one repeat: the spread over seeds is unknown)",
                     "                (x 1)",
                     "  not decided   b", "                behind and still falling", "                (x 2)",
                     "  holds         c", "                (x 3)"]


def test_the_data_s_and_the_function_s_own_arguments_are_named_as_given(tmp_path):
    """Helper 204: noise = -1 was refused as "sigma must be ...", an argument the caller never gave; seed -1 and
    1.5 met NumPy's words; heterogeneity 1e308 "b must be finite"; a file as out_dir makedirs's bare
    FileExistsError; finals None "'NoneType' object is not subscriptable"."""
    quiet = dict(progress=False, log=lambda line: None)
    with pytest.raises(ValueError, match=r"^noise must be finite and >= 0, got -1\.0$"):
        heterogeneous_quadratics(2, 3, 1.0, noise=-1)
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        heterogeneous_quadratics(2, 3, 1.0, seed=-1)
    with pytest.raises(TypeError, match="seed must be an integer, got float 1.5"):
        heterogeneous_quadratics(2, 3, 1.0, seed=1.5)
    with pytest.raises(ValueError, match="heterogeneity = 1e[+]308 puts the minimisers past float64's range"):
        heterogeneous_quadratics(2, 3, 1e308)
    f = heterogeneous_quadratics(2, 3, 1.0, seed=np.int64(3))  # (the same draw as before for a seed it took)
    rng = np.random.default_rng(3)
    q = rng.uniform(0.5, 2.0, (2, 3))
    np.testing.assert_array_equal(f.b, q * (rng.standard_normal(3) + rng.standard_normal((2, 3))))
    out = tmp_path / "o"
    for options, error, message in ((dict(noise=-1), ValueError, "noise must be finite and >= 0"),
                                    (dict(seed=-1), ValueError, "seed must be >= 0, got -1"),
                                    (dict(d=0), ValueError, "d must be >= 1, got 0")):
        with pytest.raises(error, match=message):
            reproduce_kgt_local_steps(str(out), **options, **quiet)
        assert not out.exists()
    out.write_text("mine")
    with pytest.raises(NotADirectoryError, match=f"out_dir {re.escape(repr(str(out)))} is a file: give a folder"):
        reproduce_kgt_local_steps(str(out), **quiet)
    from rowstoch_fast.experiments.synthetic import reproduce_pull_diag  # (the synthetic figures' folders too)

    with pytest.raises(NotADirectoryError, match="is a file: give a folder"):
        reproduce_pull_diag(str(out), log=lambda *a: None)
    assert out.read_text() == "mine"
    with pytest.raises(TypeError, match="finals must be a DataFrame of the runs' finals"):
        kgt_local_steps_verdicts(None, (1, 2), (5.0,))
