"""The tuner's rates run beside its grid (tuning._beside): the last refinement of the same problem runs in the
grid's block, and a refinement of those rates reads their columns; every choice and record stays the same bits."""
import json

import numpy as np
import pytest

from rowstoch_fast import topology
from rowstoch_fast.compare import tuning
from rowstoch_fast.compare.plan import Method
from rowstoch_fast.objectives import NonconvexLogistic


@pytest.fixture
def problem(monkeypatch):
    monkeypatch.setattr(tuning, "_REFINED", [])
    return topology.exponential(8), NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)


def _grid():
    from rowstoch_fast.compare.plan import TUNE_GRID

    return tuple(sorted(set(TUNE_GRID)))


def _plain(record):
    return json.dumps({k: v for k, v in record.items() if k != "seconds"}, sort_keys=True, default=repr)


def _counted(monkeypatch):
    runs = []
    inner = tuning.trajectories

    def counted(network, objective, method, rates, *args, **kwargs):
        runs.append([float(lr) for lr in rates])
        return inner(network, objective, method, rates, *args, **kwargs)

    monkeypatch.setattr(tuning, "trajectories", counted)
    return runs


@pytest.mark.parametrize("label", ["dsgd", "pull-diag-gt", "push-pull", "gt-saga"])
def test_a_rate_runs_the_same_bits_beside_the_grid_as_alone(problem, label):
    A, f = problem
    method = Method(label, label, 1, {})
    grid, refine = list(_grid()), [0.0562341, 0.0749894, 0.133352]
    both = tuning.trajectories(A, f, method, grid + refine, 40, "grad_norm_mean", seed=5, repeats=2)[1]
    alone = tuning.trajectories(A, f, method, refine, 40, "grad_norm_mean", seed=5, repeats=2)[1]
    first = tuning.trajectories(A, f, method, grid, 40, "grad_norm_mean", seed=5, repeats=2)[1]
    assert np.array_equal(both[:, 2 * len(grid):], alone, equal_nan=True)
    assert np.array_equal(both[:, :2 * len(grid)], first, equal_nan=True)


def test_the_next_tuning_runs_the_last_refinement_beside_its_grid_and_chooses_the_same(problem, monkeypatch):
    A, f = problem
    method = Method("dsgd", "dsgd", 1, {})
    runs = _counted(monkeypatch)
    first = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2)
    refined = [float(lr) for lr in first[1]["stages"][1]["scores"]]
    assert [s["name"] for s in first[1]["stages"]][:2] == ["grid", "refine"] and len(runs) >= 2
    assert tuning._REFINED[0][1] == tuple(refined)
    runs.clear()
    again = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2)
    assert _plain(again[1]) == _plain(first[1]) and again[0] == first[0]
    assert runs[0] == list(_grid()) + refined  # (the grid's block, widened)
    assert all(run != refined for run in runs)  # (the refinement read, not run)
    # another problem (a new objective) runs its grid alone
    other = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    runs.clear()
    assert _plain(tuning.tune(A, other, method, 60, "grad_norm_mean", seed=2)[1]) == _plain(first[1])
    assert runs[0] == list(_grid())


def test_a_refinement_runs_only_the_rates_not_run_beside_the_grid(problem, monkeypatch):
    A, f = problem
    method = Method("dsgd", "dsgd", 1, {})
    expected = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2)
    refined = [float(lr) for lr in expected[1]["stages"][1]["scores"]]
    key = tuning._problem_key(A, f, 60, "grad_norm_mean", (2 + tuning.TUNE_SEED_OFFSET) % (tuning.MAX_KEY + 1),
                              _grid(), 2)
    tuning._REFINED[:] = [(key, (refined[0], 7.77e-3))]  # (one of them, and one it does not ask for)
    runs = _counted(monkeypatch)
    again = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2)
    assert _plain(again[1]) == _plain(expected[1])
    assert runs[0] == list(_grid()) + [refined[0], 7.77e-3] and runs[1] == refined[1:]


def test_no_rate_runs_beside_where_a_replicas_position_counts(problem):
    A, f = problem
    planned, grid = (0.05, 0.07), list(_grid())
    dsgd = Method("dsgd", "dsgd", 1, {})
    assert tuning._beside(grid, planned, dsgd, A, f, "auto", 2, "grad_norm_mean") == [0.05, 0.07]
    assert tuning._beside(grid, planned, dsgd, A, f, "mpi", 2, "grad_norm_mean") == []
    assert tuning._beside(grid, planned, dsgd, A, f, "auto", 2, object()) == []  # (a user's metric: by replica index)
    from rowstoch_fast import network

    lossy = network.Lossy(A, p=0.1, seed=1)
    assert tuning._beside(grid, planned, dsgd, lossy, f, "auto", 2, "grad_norm_mean") == []
    assert tuning._beside(grid, [0.05] * 10**6, dsgd, A, f, "auto", 2, "grad_norm_mean") == []  # (memory)
    # nor for a method of per-sample gradients: its table of every sample is m times its iterates (helper 249's
    # GT-SAGA, 2,000 samples a node: 51 MB beside the grid's 141, estimated at 0.4 MB)
    assert tuning._beside(grid, planned, Method("gt-saga", "gt-saga", 1, {}), A, f, "auto", 2,
                          "grad_norm_mean") == []
    # nor for a method whose replicas share a loop (ADMM's Newton solve runs until every replica converged: 1.4e-16
    # apart on a logistic objective), nor on an objective of the user's (its arithmetic unchecked)
    assert tuning._beside(grid, planned, Method("admm", "admm", 1, {}), A, f, "auto", 2, "grad_norm_mean") == []
    from rowstoch_fast.objectives import NonconvexLogistic

    class Mine(NonconvexLogistic):
        pass

    assert tuning._beside(grid, planned, dsgd, A, Mine.synthetic(8, total=1600, batch=20, seed=0), "auto", 2,
                          "grad_norm_mean") == []


def test_a_tuning_resumed_in_a_fresh_process_goes_on_with_the_rates_its_grid_ran_beside(problem, tmp_path,
                                                                                       monkeypatch):
    A, f = problem
    method = Method("dsgd", "dsgd", 1, {})
    expected = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2)  # (files the refinement)
    tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2, checkpoint_dir=str(tmp_path), keep_stages=True)
    tuning._REFINED[:] = []  # (a fresh process)
    monkeypatch.setattr(tuning, "initialize", lambda *a, **k: pytest.fail("a kept stage ran again"))
    again = tuning.tune(A, f, method, 60, "grad_norm_mean", seed=2, checkpoint_dir=str(tmp_path), keep_stages=True)
    assert _plain(again[1]) == _plain(expected[1])
