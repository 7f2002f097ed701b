"""A careless user (issue 10, items 2-13 and the friction list): clear one-line errors, nothing lost, nothing silent.

CLI cases go through the installed ``rowstoch`` entry point in a subprocess, as a user would run them, where the
process matters (signals, warnings, a closed pipe, the command's start, a run that must not hang); a refusal of
the arguments runs the same ``cli.main`` in this process (:func:`rowstoch_here`).
"""

import contextlib
import importlib.util
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import rowstoch_fast as rf
from rowstoch_fast import Algorithm, MixingMatrix, PullDiagGT, run, topology
from rowstoch_fast.objectives import LeastSquares, NonconvexLogistic, Quadratic
from conftest import hang_limit, sigint_as_usual

ROWSTOCH = shutil.which("rowstoch")
SMALL = ["--n", "8", "--total", "1600", "--batch", "20", "--no-progress"]


def rowstoch(*args, env=None, timeout=120):
    """Run the ``rowstoch`` command; (returncode, stdout, stderr)."""
    cmd = [ROWSTOCH] if ROWSTOCH else [sys.executable, "-m", "rowstoch_fast.cli"]
    out = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=hang_limit(timeout),
                         env=dict(os.environ, **(env or {})))
    return out.returncode, out.stdout, out.stderr


def rowstoch_here(*args, env=None):
    """:func:`rowstoch` in this process: ``cli.main`` with its standard streams captured and ``env`` set while it
    runs, ``(returncode, stdout, stderr)`` (an argparse refusal's ``SystemExit`` is its code). For refusals of the
    arguments: the same code as the command without a new interpreter's start (0.5 s alone, 1.4 s beside the
    suite's other worker, per call)."""
    from rowstoch_fast import cli

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        mp.setattr(sys, "argv", ["rowstoch", *map(str, args)])  # (what a command records of its command line)
        try:
            rc = cli.main([str(a) for a in args])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc, err, *fragments, code=2):
    assert rc == code, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("rowstoch: error:")]
    assert len(lines) == 1, err
    assert all(line.startswith("rowstoch: error:") for line in err.splitlines() if "error:" in line), err
    for fragment in fragments:
        assert fragment in lines[0], err


def beta_one_matrix(path):
    """A valid (primitive) matrix without self loops whose beta is 1."""
    np.save(path, np.array([[0, 1, 0], [0, 0, 1], [0.5, 0.5, 0]], dtype=float))
    return str(path)


# ---------------------------------------------------------------- 2: malformed CSR structures
def _save_raw_npz(path, indptr, indices, data, shape):
    np.savez(path, format=np.array(b"csr"), shape=np.array(shape), indptr=np.asarray(indptr),
             indices=np.asarray(indices), data=np.asarray(data, dtype=float))
    return str(path)


@pytest.mark.parametrize("indptr, indices, fragment", [
    ([0, 1, 2], [0, 7], "column index 7"),
    ([0, 1, 2], [-3, 1], "column index -3"),
    ([0, 2, 1], [0, 1], "indptr"),
    ([0, 1, 5], [0, 1], "indptr[-1] = 5"),
])
def test_malformed_npz_matrix_is_refused(tmp_path, indptr, indices, fragment):
    path = _save_raw_npz(tmp_path / "bad.npz", indptr, indices, [1.0, 1.0], (2, 2))
    rc, _, err = rowstoch_here("metrics", "--matrix", path)
    assert_one_line_error(rc, err, "bad.npz", fragment)


def test_malformed_scipy_matrix_and_state_are_refused():
    bad = sp.csr_array((np.ones(2), np.array([0, 9], dtype=np.int32), np.array([0, 1, 2], dtype=np.int32)),
                       shape=(2, 2))
    with pytest.raises(ValueError, match="column index 9"):
        MixingMatrix(bad)
    state = PullDiagGT(topology.ring(4), np.zeros(2), lr=0.1).state_dict()
    for key, value, fragment in (("indices", np.array([0, 1, 2, 99, 0, 1, 2, 3], np.int32), "column index 99"),
                                 ("indptr", np.array([0, 2, 1, 6, 8], np.int32), "non-decreasing"),
                                 ("indptr", np.array([0, 2, 4, 6, 9], np.int32), r"indptr\[-1\] = 9")):
        broken = dict(state, **{key: value})
        with pytest.raises(ValueError, match=fragment):
            PullDiagGT.from_state_dict(broken)


# ---------------------------------------------------------------- 3: sizes that cannot fit
@pytest.mark.parametrize("args", [
    ["metrics", "--topology", "ring", "--n", "100000000"],
    ["run", "--n", "100000000", "--total", "100000000", "--batch", "1", "--no-progress"],
])
def test_impossible_sizes_fail_at_once(tmp_path, args):
    rc, _, err = rowstoch(*args, *(("--out", tmp_path) if args[0] == "run" else ()),
                          env={"ROWSTOCH_MEMORY_LIMIT": str(2 * 2**30)}, timeout=60)
    assert_one_line_error(rc, err, "needs about", "GiB")


def test_an_address_space_limit_is_memory_too(tmp_path):
    """Under `ulimit -v` (as a cluster's job may run), `rowstoch metrics --topology geometric --n 2000000` ended
    "out of memory: std::bad_alloc", out of SciPy's k-d tree, with no size: the memory check read only the free
    memory. It now reads what the address-space limit leaves, and says the size first (a graph of about 3 GiB
    here, under a limit of 2 GiB)."""
    import resource

    limit = 2 * 2**30
    cmd = [ROWSTOCH] if ROWSTOCH else [sys.executable, "-m", "rowstoch_fast.cli"]
    out = subprocess.run(cmd + ["metrics", "--topology", "geometric", "--n", "400000"], capture_output=True, text=True,
                         timeout=hang_limit(60), env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"),
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert_one_line_error(out.returncode, out.stderr, "geometric(400000", "needs about", "available")


@pytest.mark.parametrize("option, value, fragment", [
    ("--seed", "100000000000000000000000", "expected a seed in [0, 2^64 - 1]"),
    ("--data-seed", "-5", "expected a non-negative integer, got -5"),
    ("--network-seed", "18446744073709551616", "expected a seed in [0, 2^64 - 1]"),
])
def test_seeds_beyond_64_bits_are_refused_by_name(tmp_path, option, value, fragment):
    rc, _, err = rowstoch_here("run", *SMALL, "--iterations", "2", option, value, "--no-progress", "--out", tmp_path)
    assert_one_line_error(rc, err, f"argument {option}", fragment)


def test_counts_beyond_the_kernels_int64_are_refused_by_name():
    A = topology.exponential(8)
    with pytest.raises(ValueError, match=r"R must be <= 2\^62, got 1180591620717411303424"):
        A.mix_power(np.ones(8), 2**70)
    with pytest.raises(ValueError, match=r"rounds must be <= 2\^62"):
        PullDiagGT(A, np.zeros((8, 2)), lr=0.1, rounds=2**70, tracker="perron")
    with pytest.raises(MemoryError, match="iterations .* needs about"):
        rf.pull_diag(A, np.ones(8), 2**70)
    from rowstoch_fast.tracker import diag_powers

    with pytest.raises(MemoryError, match=r"diag_powers\(n_records=1000000000000\) of 8 nodes needs about"):
        diag_powers(A, 1, 10**12, max_work=math.inf)
    f = NonconvexLogistic.synthetic(8, total=160, batch=5, seed=0)
    with pytest.raises(MemoryError, match=r"run\(repeats=1099511627776\) .* needs about .*; lower repeats"):
        rf.run(rf.Algorithm(A, 0.1), f, 3, repeats=2**40, progress=False)
    # a broadcast view of replicas as x0 (what x0's own error suggests) was copied whole, then refused (a helper's
    # trial: 1.7 GB resident before the MemoryError; past the free memory, the process killed)
    with pytest.raises(MemoryError, match=r"PullDiagGT on 8 nodes with 4096 x 1000000 values per node .* needs about"):
        PullDiagGT(A, np.broadcast_to(np.zeros(10**6), (4096, 8, 10**6)), lr=0.1)  # (262 GB copied first: killed)


def test_the_check_before_x0_is_copied_asks_no_more_than_the_blocks(monkeypatch):
    """The check before x0's copy (above) counted a copy that a contiguous x0 never makes and x0's float64 where a
    float32 matrix makes the run float32, refusing runs that fit (a review); it never asks more than the blocks."""
    from rowstoch_fast import _checks
    from rowstoch_fast.algorithms import REGISTRY

    A, d = topology.exponential(8), 2 * 10**5
    dsgd = REGISTRY["dsgd"]  # (its blocks: x twice and its work blocks, each 8 x d float64)
    monkeypatch.setattr(_checks, "available_memory", lambda: int(1.1 * (2 + dsgd.scratch) * 8 * d * 8))
    dsgd(A, np.zeros((8, d)), lr=0.1)
    gt = REGISTRY["pull-diag-gt"]  # (float32 blocks: half of what float64 would ask)
    monkeypatch.setattr(_checks, "available_memory",
                        lambda: int(0.6 * (2 * len(gt.state) + gt.scratch) * 8 * d * 8))
    assert gt(MixingMatrix(A.csr, dtype=np.float32), np.zeros((8, d)), lr=0.1).x.dtype == np.float32


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
@pytest.mark.parametrize("call", ["A.mix_power(np.ones((A.n, 4)), 10**7)",  # (about an hour; 10**12 refused)
                                  "diag_powers(topology.ring(4096), 10**8, 3, block=64, max_work=math.inf)",
                                  # (the fused y phase of MG-Pull-Diag-GT's rounds: --rounds 10**9 held Ctrl-C)
                                  "_core.gt_y_phase(A.csr.indptr, A.csr.indices, A.csr.data, 10**7, 0.1, "
                                  "*[np.zeros((A.n, 4))] * 4, np.ones(A.n), np.ones(A.n), "
                                  "*[np.zeros((A.n, 4)) for _ in range(4)], False)"])
def test_ctrl_c_stops_a_long_compiled_loop(tmp_path, call):
    """A power A^R, the tracker's diagonals or the fused tracker phase run in C++ without the GIL for as long as
    asked; Ctrl-C still stops them within a fraction of a second (KeyboardInterrupt), instead of after the whole
    loop."""
    import signal
    import subprocess
    import time

    code = ("import math, sys, time\nimport numpy as np\nfrom rowstoch_fast import _core, topology\n"
            "from rowstoch_fast.tracker import diag_powers\nA = topology.exponential(4096)\nprint('ready', flush=True)\n"
            f"try:\n    {call}\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, preexec_fn=sigint_as_usual)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=hang_limit(60))
    finally:  # a loop that did not stop must not outlive the test
        proc.kill()
        proc.communicate()
    assert "interrupted" in out and proc.returncode == 0, err
    assert time.perf_counter() - sent < 10


def test_rounds_whose_mini_batches_are_refused_are_named_as_rounds(tmp_path):
    """A multi-round method's gradients average ``rounds`` mini-batches (eq. 12b): ``rounds=10**9`` was refused as
    "batches = 1000000000 ...; lower batches or batch", an argument neither the library's caller nor the command
    line's had given."""
    f = NonconvexLogistic.synthetic(n=16)
    with pytest.raises(ValueError, match=r"^rounds = 1000000000: each gradient averages 1000000000 mini-batches "
                                         r"\(eq. 12b\), and batches = .* lower rounds or the batch$"):
        run(Algorithm(topology.exponential(16), lr=3e-3, rounds=10**9), f, 3)
    rc, _, err = rowstoch_here("run", "--algorithm", "mg-pull-diag-gt", "--rounds", "1000000000", "--no-progress",
                               "--out", tmp_path)
    assert_one_line_error(rc, err, "rounds = 1000000000: each gradient averages", "lower --rounds or --batch")
    for lr in ([], ["--lr", "0.001"]):  # (tuned: the tuner's runs had said "batches"; compare's option is --mg-rounds)
        rc, _, err = rowstoch_here("compare", "--algorithms", "mg-pull-diag-gt", "--mg-rounds", "100000000", *lr,
                                   "--rounds-budget", "2000000000", "--tracker", "perron", "--no-progress", "--out",
                                   tmp_path / f"c{len(lr)}")
        assert_one_line_error(rc, err, "rounds = 100000000: each gradient averages", "lower --mg-rounds or --batch")


def test_rounds_whose_noise_draws_do_not_fit_are_named_as_rounds(tmp_path):
    """A quadratic's noisy gradient draws its ``batches`` mini-batches' normals at once: a multi-round method's
    ``rounds=10**9`` had met NumPy's "Unable to allocate 1.16 TiB for an array with shape (1000000000, 16, 10)",
    naming neither the rounds nor what to lower."""
    f = Quadratic.random(n=16, d=10, seed=0, sigma=0.5)
    with pytest.raises(MemoryError, match=r"^rounds = 1000000000000: each gradient averages 1000000000000 "
                                          r"mini-batches \(eq. 12b\), and batches = 1000000000000: each gradient's "
                                          r"noise, 1000000000000 x 16 x 10 normals drawn at once, needs about .* of "
                                          r"memory but only .* is available; lower the rounds$"):
        run(Algorithm(topology.exponential(16), lr=3e-3, rounds=10**12, tracker="perron"), f, 3)
    rc, _, err = rowstoch_here("run", "--algorithm", "mg-pull-diag-gt", "--rounds", "1000000000000", "--tracker",
                               "perron", "--objective", "quadratic", "--sigma", "0.5", "--no-progress", "--out",
                               tmp_path)
    assert_one_line_error(rc, err, "rounds = 1000000000000: each gradient averages", "lower --rounds")


def test_a_matrix_market_header_of_more_rows_than_entries_is_refused_before_any_array_of_n(tmp_path):
    """A header of 2e9 x 2e9 over three entries was converted to CSR, 23 GB, until the OOM killer ended the process
    (helper 231); a matrix with fewer entries than rows cannot be stochastic, and says which row is empty."""
    path = tmp_path / "big.mtx"
    path.write_text("%%MatrixMarket matrix coordinate real general\n2000000000 2000000000 3\n1 2 0.5\n2 1 0.5\n"
                    "1 1 0.5\n")
    rc, _, err = rowstoch("metrics", "--matrix", path, env={"ROWSTOCH_MEMORY_LIMIT": str(2 * 2**30)}, timeout=60)
    assert_one_line_error(rc, err, "W has 3 stored entries for its 2000000000 rows: row 2 has none, and every row "
                                   "of a row-stochastic matrix needs one")
    with pytest.raises(ValueError, match="W has 2 stored entries for its 3 columns: column 1 has none"):
        MixingMatrix(sp.csr_array(([1.0, 1.0], ([0, 1], [0, 2])), shape=(3, 3)), stochastic="column")
    with pytest.raises(ValueError, match=r"W must be square, got shape \(2000000000, 1999999999\)"):  # (arrays of n
        # had been made first, helper 239)
        MixingMatrix(sp.coo_array(([1.0], ([0], [0])), shape=(2000000000, 1999999999)))
    dok = sp.dok_array((2, 2))  # (no .data array: an AttributeError, helper 239)
    dok[0, 0] = dok[0, 1] = dok[1, 0] = dok[1, 1] = 0.5
    assert MixingMatrix(dok).n == 2


def test_mistyped_node_id_in_edge_list(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("0 1\n1 2\n2 0\n2 400000000\n")
    rc, _, err = rowstoch("metrics", "--matrix", path, env={"ROWSTOCH_MEMORY_LIMIT": str(2 * 2**30)}, timeout=60)
    assert_one_line_error(rc, err, "n = 400000001 nodes", "largest id")


def test_cheap_checks_come_before_the_network_is_built(tmp_path):
    rc, _, err = rowstoch("run", "--n", "1000003", "--no-progress", "--out", tmp_path, timeout=30)
    assert_one_line_error(rc, err, "--total's default (204800 samples) gives less than one sample to each of the "
                                   "1000003 nodes; give --total")
    rc, _, err = rowstoch_here("run", "--n", "12", "--total", "1000", "--no-progress", "--out", tmp_path)
    assert_one_line_error(rc, err, "--total 1000 samples must be divisible by the 12 nodes (e.g. --total 996)")


def test_the_default_data_size_fits_any_number_of_nodes(tmp_path):
    """``--n 12`` ran nowhere: the default ``--total`` (204,800) is not a multiple of 12, and the refusal named an
    option nobody wrote; the defaults are now fitted to n (the most samples n nodes share evenly, the default batch
    lowered to the samples per node), what was given is still checked as given."""
    import argparse

    from rowstoch_fast.cli._common import _fitted_size
    from rowstoch_fast.errors import UsageError

    def fitted(n, **given):
        args = argparse.Namespace(objective="logistic", data_file=None, given={"--" + k for k in given},
                                  **{"total": 204800, "batch": 200, **given})
        return _fitted_size(args, n)

    assert fitted(16) == (204800, 200)
    assert fitted(12) == (204792, 200)
    assert fitted(4096) == (204800, 50)
    assert fitted(7, batch=20) == (204799, 20)
    with pytest.raises(UsageError, match=r"--batch 300 exceeds the 50 samples per node \(--total / n\)"):
        fitted(4096, batch=300)
    with pytest.raises(UsageError, match="--total 204800 samples must be divisible by the 12 nodes"):
        fitted(12, total=204800)
    rc, _, err = rowstoch_here("run", "--n", "12", "--iterations", "2", "--no-progress", "--out", tmp_path / "r")
    assert rc == 0, err
    kept = json.loads((tmp_path / "r" / "history.json").read_text())
    assert '"total": 204792' in json.dumps(kept), sorted(kept)


# ---------------------------------------------------------------- 4: no self loops, beta = 1
def test_matrix_without_gap_is_explained(tmp_path):
    path = beta_one_matrix(tmp_path / "noloops.npy")
    rc, out, err = rowstoch_here("metrics", "--matrix", path)
    assert rc == 0 and "n/a" in out and "Traceback" not in err
    rc, _, err = rowstoch_here("run", "--matrix", path, "--algorithm", "mg-pull-diag-gt", "--total", "300", "--batch",
                               "10", "--out", tmp_path / "o", "--no-progress")
    assert_one_line_error(rc, err, "beta = 1", "self loops")
    rc, _, err = rowstoch_here("run", "--matrix", path, "--total", "300", "--batch", "10", "--out", tmp_path / "o",
                               "--no-progress")
    assert_one_line_error(rc, err, "no self loop")
    assert "multiply-adds" not in err


# ---------------------------------------------------------------- 5: resume only what was checkpointed
@pytest.fixture(scope="module")
def problem():
    return NonconvexLogistic.synthetic(n=8, total=1600, batch=20, seed=0)


def test_resume_refuses_another_configuration(problem, tmp_path):
    ck = str(tmp_path / "ck.npz")
    algo = Algorithm(topology.exponential(8), lr=0.05)
    run(algo, problem, 10, progress=False, checkpoint=ck, repeats=2, seed=1)
    other_batch = NonconvexLogistic.synthetic(n=8, total=1600, batch=10, seed=0)
    other_data = NonconvexLogistic.synthetic(n=8, total=1600, batch=20, seed=5)
    cases = [(dict(objective=other_batch), "objective.batch = 20 but this run has objective.batch = 10"),
             (dict(objective=other_data), "objective.data_sha1"),
             (dict(seed=2), "seed = 1 but this run has seed = 2"),
             (dict(repeats=3), "repeats = 2 but this run has repeats = 3")]
    for change, fragment in cases:
        kw = dict(objective=problem, seed=1, repeats=2) | change
        with pytest.raises(ValueError, match=fragment.replace(".", r"\.")):
            run(algo, kw.pop("objective"), 20, progress=False, resume=ck, **kw)
    # iterations, lr and record_every may change
    h = run(Algorithm(topology.exponential(8), lr=0.01), problem, 20, progress=False, resume=ck, repeats=2, seed=1,
            record_every=5)
    assert h.meta["completed_iterations"] == 20


def test_cli_resume_refuses_another_data_seed(tmp_path):
    ck = tmp_path / "ck.npz"
    rc, _, err = rowstoch_here("run", *SMALL, "--iterations", "5", "--checkpoint", ck, "--out", tmp_path / "a")
    assert rc == 0, err
    rc, _, err = rowstoch_here("run", *SMALL, "--iterations", "10", "--resume", ck, "--data-seed", "7",
                               "--out", tmp_path / "b")
    assert_one_line_error(rc, err, "data_seed = 42", "data_seed = 7")
    # the default n and an explicit --n 16 are the same run; --lr and --iterations may change
    rc, _, err = rowstoch_here("run", "--total", "1600", "--batch", "20", "--iterations", "5", "--checkpoint",
                               tmp_path / "ck16.npz", "--out", tmp_path / "c", "--no-progress")
    assert rc == 0, err
    rc, _, err = rowstoch_here("run", "--n", "16", "--total", "1600", "--batch", "20", "--iterations", "10", "--lr",
                               "5e-4", "--resume", tmp_path / "ck16.npz", "--out", tmp_path / "c", "--no-progress")
    assert rc == 0, err


# ---------------------------------------------------------------- 6: damaged files
@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 truncated", b"\x93NUMPY garbage", b'{"meta": {}}'])
def test_damaged_checkpoint_and_matrix_files(tmp_path, content, problem):
    for name in ("ck.npz", "A.npy", "A.npz"):
        (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match="cannot read checkpoint .*ck.npz") as info:
        run(Algorithm(topology.exponential(8), lr=0.05), problem, 5, progress=False, resume=str(tmp_path / "ck.npz"))
    assert "allow_pickle" not in str(info.value)  # (NumPy's words for a file of another kind: helper 192's
    # history.json given to --resume read "load it unsafely using the `allow_pickle=` keyword argument")
    if content.startswith(b"{"):
        assert str(info.value).endswith("it is not a NumPy file (.npy or .npz): it begins b'{\"meta'")
    for name in ("A.npy", "A.npz"):
        rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / name)
        assert_one_line_error(rc, err, name)


def test_pickled_npy_is_refused_clearly(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / "obj.npy")
    assert_one_line_error(rc, err, "obj.npy")


# ---------------------------------------------------------------- 7: unwritable outputs
def test_unwritable_out_fails_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        rc, _, err = rowstoch("run", *SMALL, "--iterations", "100000", "--out", out, timeout=30)
        assert_one_line_error(rc, err, "--out")
    rc, _, err = rowstoch("run", *SMALL, "--iterations", "100000", "--checkpoint", blocker / "ck.npz",
                          "--out", tmp_path / "o", timeout=30)
    assert_one_line_error(rc, err, "--checkpoint")


def test_late_write_failure_keeps_the_results(tmp_path, monkeypatch, capsys):
    from rowstoch_fast import cli, runner

    real = runner.History.to_csv
    calls = []

    def failing_once(self, path, *a, **k):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(30, "Read-only file system")
        return real(self, path, *a, **k)

    monkeypatch.setattr(runner.History, "to_csv", failing_once)
    code = cli.main(["run", *SMALL, "--iterations", "10", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "Read-only file system" in err and "the results are in" in err
    fallback = os.path.dirname(calls[-1])
    assert os.path.exists(os.path.join(fallback, "history.csv")) and fallback in err
    shutil.rmtree(fallback)


# ---------------------------------------------------------------- 8: divergence keeps the history
def test_a_run_whose_metrics_overflow_is_diverged_not_done(tmp_path):
    """Iterates that stay finite while their metrics overflow (a rate of 1e6: grad norm, loss and consensus error
    inf) exited 0, "done"; they are diverged: exit 3, said so."""
    code, out, err = rowstoch_here("run", "--objective", "least-squares", "--n", "8", "--algorithm", "dsgd", "--lr",
                                   "1e6", "--iterations", "30", "--no-progress", "--out", tmp_path / "o")
    assert code == 3 and "diverged at iteration 30" in out
    assert "rowstoch: diverged: the last record's grad norm" in err and "smaller --lr" in err


class _LossTurnsNaN(rf.objectives.LeastSquares):
    """Least squares whose recorded loss turns NaN after ``good`` passes, the iterates finite throughout."""

    def __init__(self, *args, good, **kwargs):
        super().__init__(*args, **kwargs)
        self.good, self.calls = good, 0

    def evaluate(self, X, nodes=None):
        self.calls += 1
        G, L = super().evaluate(X, nodes)
        return G, (L * np.nan if self.calls > self.good else L)


def test_a_run_whose_loss_turns_nan_at_finite_iterates_is_diverged_not_done(tmp_path):
    """A NaN loss at finite iterates (an objective's value that fails) ended "done", history.json's diverged false,
    where compare() called the same run diverged; a metric left unrecorded (NaN throughout) is no divergence."""
    g = rf.objectives.LeastSquares.synthetic(8, heterogeneity=1.0)
    A = topology.ring(8, directed=False, weights="metropolis")

    def problem(good):
        return _LossTurnsNaN(g.H.reshape(-1, g.d), g.y.reshape(-1), n=8, good=good)

    h = run(Algorithm(A, method="dsgd", lr=0.01), problem(3), 60, record_every=10, progress=False)
    assert np.isnan(h.frame["loss"].iloc[-1]) and np.isfinite(h.frame["grad_norm"]).all()
    assert h.status == "diverged" and h.overflowed == ["loss"]
    h.to_json(tmp_path / "h.json")
    assert json.loads((tmp_path / "h.json").read_text())["diverged"] is True
    fine = run(Algorithm(A, method="dsgd", lr=0.01), problem(10 ** 6), 60, record_every=10, progress=False)
    assert fine.status == "done" and fine.overflowed == []
    unrecorded = run(Algorithm(A, method="dsgd", lr=0.01), problem(10 ** 6), 60, record_every=10, progress=False,
                     metrics=["consensus_error"])
    assert unrecorded.frame["loss"].isna().all() and unrecorded.status == "done"
    ck = tmp_path / "ck.npz"  # a run resumed with fewer metrics: its checkpoint's records have the loss, its own not
    run(Algorithm(A, method="dsgd", lr=0.01), problem(10 ** 6), 20, record_every=10, progress=False, checkpoint=ck)
    resumed = run(Algorithm(A, method="dsgd", lr=0.01), problem(10 ** 6), 40, record_every=10, progress=False,
                  checkpoint=ck, resume=ck, metrics=["consensus_error"])
    assert np.isfinite(resumed.frame["loss"].iloc[0]) and np.isnan(resumed.frame["loss"].iloc[-1])
    assert resumed.status == "done" and resumed.overflowed == []


def test_divergence_writes_what_was_recorded(tmp_path):
    rc, _, err = rowstoch("run", "--objective", "quadratic", "--n", "8", "--iterations", "300", "--lr", "3",
                          "--no-progress", "--out", tmp_path)
    assert rc == 3 and "Traceback" not in err and "diverged" in err
    doc = json.loads((tmp_path / "history.json").read_text())
    assert doc["diverged"] is True and doc["meta"]["diverged"]["iteration"] > 0 and len(doc["rows"]["iteration"]) > 1


def test_divergence_error_carries_the_history(problem):
    with pytest.raises(rf.DivergenceError) as info:
        run(Algorithm(topology.exponential(8), lr=3.0), rf.objectives.Quadratic.random(8, 2), 300,
            record_every=10, progress=False)
    h = info.value.history
    assert h.diverged and len(h) > 1 and h.meta["diverged"]["iteration"] == info.value.iteration


# ---------------------------------------------------------------- 9: no silent rescaling
def test_unnormalised_matrix_file_needs_normalize(tmp_path):
    np.save(tmp_path / "W.npy", np.array([[1.0, 1.0], [1.0, 1.0]]))
    rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / "W.npy")
    assert_one_line_error(rc, err, "sums to 2.0", "--normalize")
    assert "np.float64" not in err
    rc, out, err = rowstoch_here("metrics", "--matrix", tmp_path / "W.npy", "--normalize")
    assert rc == 0 and "W.npy" in out, err


# ---------------------------------------------------------------- 10: 1-D x0
def test_ambiguous_one_dimensional_x0_is_refused():
    A = topology.exponential(4)
    with pytest.raises(ValueError, match=r"ambiguous.*x0\[:, None\].*np.broadcast_to"):
        PullDiagGT(A, np.zeros(4), lr=0.1)
    assert PullDiagGT(A, np.zeros(3), lr=0.1).x.shape == (4, 3)  # (d,) with d != n: one vector for every node
    assert PullDiagGT(A, np.zeros((4, 1)), lr=0.1).x.shape == (4, 1)
    np.testing.assert_array_equal(A.mix(np.arange(4.0)), A.mix(np.arange(4.0)[:, None])[:, 0])


# ---------------------------------------------------------------- 11: networkx
def test_from_networkx_keeps_self_loops_and_checks_attribute_names():
    nx = pytest.importorskip("networkx")
    G = nx.DiGraph()
    G.add_edge(0, 0, w=3.0)
    G.add_edge(0, 1, w=1.0)
    G.add_edge(1, 0, w=1.0)
    G.add_edge(1, 1, w=1.0)
    A = MixingMatrix.from_networkx(G, "w")
    np.testing.assert_allclose(A.toarray(), [[0.75, 0.25], [0.5, 0.5]])  # a_00 = 3 / (3 + 1), not (3 + 1) / 5
    with pytest.raises(ValueError, match="no edge of G has the attribute 'weight'.*'w'"):
        MixingMatrix.from_networkx(G, "weight")


# ---------------------------------------------------------------- 12: one thread per optimizer
def test_concurrent_steps_are_refused():
    opt = PullDiagGT(topology.exponential(8), np.zeros(2), lr=0.01)
    opt.step(lambda X: X - 1.0)
    inside, release = threading.Event(), threading.Event()

    def slow_grad(X):
        inside.set()
        release.wait(30)
        return X - 1.0

    t = threading.Thread(target=opt.step, args=(slow_grad,))
    t.start()
    try:
        assert inside.wait(30)
        with pytest.raises(RuntimeError, match="second thread"):
            opt.step(lambda X: X - 1.0)
        with pytest.raises(RuntimeError, match="second thread"):
            opt.state_dict()
    finally:
        release.set()
        t.join()
    assert opt.iteration == 2  # nothing lost, nothing doubled
    opt.step(lambda X: X - 1.0)  # usable again


# ---------------------------------------------------------------- 13: divergence without NaN
def test_exploding_run_warns(tmp_path):
    rc, _, err = rowstoch("run", *SMALL, "--iterations", "50", "--lr", "1e6", "--out", tmp_path)
    assert rc == 3 and "rowstoch: warning:" in err and "smaller lr" in err  # (and diverged: exit 3, as compare says)


def test_exploding_run_warns_in_python(problem):
    with pytest.warns(RuntimeWarning, match="the loss from"):
        run(Algorithm(topology.exponential(8), lr=1e6), problem, 50, progress=False)


# ---------------------------------------------------------------- friction
def test_version_help_and_topology_list():
    rc, out, _ = rowstoch("--version")
    assert rc == 0 and rf.__version__ in out
    rc, out, _ = rowstoch("run", "--help")
    assert rc == 0 and "default 204800, lowered to a multiple of n" in " ".join(out.split()) and "1/n" in out
    rc, out, _ = rowstoch("topologies")
    assert rc == 0 and "exponential" in out and "paper-grid" in out
    rc, out, _ = rowstoch("metrics", "--help")
    assert rc == 0 and "0-based" in out
    rc, out, _ = rowstoch("compare", "--help")  # (a default of 0 equals False: helper 214 found --seed,
    # --network-seed, --sigma and --test-samples without theirs)
    flat = " ".join(out.split())
    for option in ("--seed SEED seed of the gradient streams and of random topologies (default: 0)",
                   "--sigma SIGMA gradient noise (quadratic) (default: 0.0)", "(default: Theorem 3's R for the graph)"):
        assert option in flat, option


def test_paper_graphs_refuse_another_n():
    rc, _, err = rowstoch_here("metrics", "--topology", "paper-ring", "--n", "64")
    assert_one_line_error(rc, err, "16-node")


def test_a_paper_graph_misnamed_is_told_the_four():
    """Helper 246: ``paper_graphs()["rign"]`` was a bare ``KeyError: 'rign'``."""
    from rowstoch_fast import topology

    graphs = topology.paper_graphs()
    with pytest.raises(KeyError, match=r"'rign' is not one of the paper's graphs \(did you mean 'ring'\?\): ring, "
                                       r"grid, geometric, nearest_neighbor"):
        graphs["rign"]
    assert graphs.get("rign") is None and sorted(graphs) == ["geometric", "grid", "nearest_neighbor", "ring"]


def test_a_misspelt_algorithm_is_told_the_name_first():
    """Helper 246: ``Algorithm(method="pushpull")``'s "did you mean" came after a list of 52 names."""
    with pytest.raises(ValueError, match=r"^method must be a registered algorithm, got 'pushpull' \(did you mean "
                                         r"'push-pull'\?\): one of abm, "):
        Algorithm(topology.ring(4), lr=0.01, method="pushpull")


def test_closed_pipe_is_quiet():
    cmd = f"{ROWSTOCH or sys.executable + ' -m rowstoch_fast.cli'} metrics --n 64 | head -c 10"
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=hang_limit(120))
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr


def test_plot_can_save_with_title_and_legend(problem, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    h = run(Algorithm(topology.exponential(8), lr=0.05), problem, 10, progress=False)
    ax = h.plot(path=tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 0 and ax.get_legend() is not None


def test_demo_says_where_it_writes(tmp_path, monkeypatch, capsys):
    from rowstoch_fast import cli, experiments

    monkeypatch.setattr(experiments, "demo", lambda out, progress=True: None)
    assert cli.main(["demo", "--out", str(tmp_path / "d"), "--no-progress"]) == 0
    assert str(tmp_path / "d") in capsys.readouterr().out


def test_a_demo_run_again_starts_from_a_folder_without_its_earlier_run(tmp_path, monkeypatch):
    """`rowstoch demo` into its folder again, interrupted: the earlier run's CSV and verdict stayed beside what the
    new run had written (the reproduction refuses such a folder; the demo owns its own and clears its files first,
    leaving the user's)."""
    from rowstoch_fast import cli, experiments

    out = tmp_path / "d"
    out.mkdir()
    for name in ("multi_gossip.csv", "multi_gossip_verdict.csv", "multi_gossip.png", "multi_gossip_notes.txt",
                 ".rowstoch-demo"):  # (the marker of the demo's own folder)
        (out / name).write_text("earlier")

    def interrupted(folder, progress=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiments, "demo", interrupted)
    assert cli.main(["demo", "--out", str(out), "--no-progress"]) == 130
    assert sorted(p.name for p in out.iterdir()) == [".rowstoch-demo", "multi_gossip_notes.txt"]


def test_the_demo_judges_the_claims_as_the_reproduction_does(tmp_path, monkeypatch):
    """The first command a new user runs: a shorter run (1,000 rounds, 3 repetitions) told them that Figure 3's
    claim fails on 5 of 8 (graph, R) where ``rowstoch reproduce multi-gossip`` finds it holds on most. It now runs
    the reproduction with the reproduction's own settings."""
    from rowstoch_fast.experiments import synthetic

    seen = {}
    monkeypatch.setattr(synthetic, "reproduce_multi_gossip", lambda out, **kw: seen.update(kw) or {})
    synthetic.demo(str(tmp_path), log=lambda *a: None, progress=False)
    assert set(seen) == {"progress", "log"}  # (no budget, repetitions or rounds of its own)


def test_a_mistyped_name_gets_the_closest_one(tmp_path):
    """A new user's trial: `--algorithms PullDiagGT` and `--topology rign` listed every choice and no suggestion."""
    from rowstoch_fast import compare as cmp
    from rowstoch_fast._checks import did_you_mean
    from rowstoch_fast.errors import UsageError

    names = ["pull-diag-gt", "push-pull", "frost", "dsgd", "sgp"]
    assert did_you_mean("PullDiagGT", names) == " (did you mean 'pull-diag-gt'?)"
    assert did_you_mean("pull_diag_gt", names) == " (did you mean 'pull-diag-gt'?)"
    assert did_you_mean("frosty", names) == " (did you mean 'frost'?)"
    assert did_you_mean("xyz", names) == "" and did_you_mean("dsgd", names) == ""
    with pytest.raises(ValueError, match=r"unknown algorithm 'pushpull' \(did you mean 'push-pull'\?\); choose from"):
        cmp.parse_algorithms("pushpull", topology.ring(4))
    with pytest.raises(UsageError, match=r"unknown topology 'rign' \(did you mean 'ring'\?\)"):
        topology.by_name("rign", 8)
    rc, _, err = rowstoch_here("compare", "--topology", "exponentail", *SMALL, "--out", tmp_path / "o")
    assert_one_line_error(rc, err, "unknown topology 'exponentail' (did you mean 'exponential'?)")
    rc, _, err = rowstoch_here("run", "--algorithm", "PullDiagGT", "--out", tmp_path / "o")  # (argparse's choices)
    assert_one_line_error(rc, err, "argument --algorithm: invalid choice: 'PullDiagGT' (did you mean 'pull-diag-gt'?)")
    rc, _, err = rowstoch_here("reproduce", "mult-gossip")
    assert_one_line_error(rc, err, "invalid choice: 'mult-gossip' (did you mean 'multi-gossip'?) (choose from")


def test_numpy_scalars_print_as_numbers():
    with pytest.raises(TypeError, match=r"rounds must be an integer, got float64 2\.5$"):
        PullDiagGT(topology.ring(4), np.zeros(2), lr=0.1, rounds=np.float64(2.5))


def test_matrix_market_files_ask_for_sparse_arrays(monkeypatch, tmp_path):
    """SciPy >= 1.18 warns when mmread's spmatrix default is used (item 23): the loader passes it explicitly."""
    import scipy.io

    from rowstoch_fast import cli

    calls = []

    def fake_mmread(source, *, spmatrix=True):
        calls.append(spmatrix)
        return sp.coo_array(topology.exponential(8).csr)

    monkeypatch.setattr(scipy.io, "mmread", fake_mmread)
    assert cli.load_matrix(str(tmp_path / "A.mtx") if (tmp_path / "A.mtx").write_text("x") else "").n == 8
    assert calls == [False]


def test_cupy_backend_checks_x0_before_building_the_tracker(monkeypatch):
    """Item 25: a host x0 with backend='cupy' is reported as such, not as the exact tracker's work limit.

    The CuPy probe is faked, so this runs (and means the same) with and without a GPU.
    """
    from rowstoch_fast.backends import cupy as cuda

    monkeypatch.setattr(cuda, "require_cupy", lambda: object())
    monkeypatch.setenv("ROWSTOCH_TRACKER_MAX_WORK", "1")  # any exact tracker would be refused
    with pytest.raises(TypeError, match="x0 must be a CuPy"):
        PullDiagGT(topology.exponential(64), np.zeros((64, 2)), lr=0.1, backend="cupy")


@pytest.mark.parametrize("call, error, fragment", [
    ("objectives.Quadratic.random(4, 2, seed=-1)", ValueError, "seed must be >= 0, got -1"),
    ("objectives.Quadratic.random(4, 2, seed=1.5)", TypeError, "seed must be an integer, got float 1.5"),
    ("objectives.Quadratic.random(4, 2, seed=[1, -2])", ValueError, r"seed\[1\] must be >= 0, got -2"),
    ("objectives.Quadratic.random(4, 2).x0(seed=-1)", ValueError, "seed must be >= 0"),
    ("objectives.NonconvexLogistic.synthetic(4, total=40, batch=2, seed=-1)", ValueError, "seed must be >= 0"),
    ("topology.erdos_renyi(10, 0.5, seed=-1)", ValueError, "seed must be >= 0"),
    ("topology.geometric(10, 0.5, seed=1.5)", TypeError, "seed must be an integer"),
    ("topology.nearest_neighbor(10, 3, seed='a')", TypeError, "seed must be an integer"),
    ("datasets.iid_split(10, 2, seed=-1)", ValueError, "seed must be >= 0"),
    ("datasets.dirichlet_split(np.arange(10) % 2, 2, alpha=1.0, seed=1.5)", TypeError, "seed must be an integer"),
    ("objectives.Quadratic.random(0, 2)", ValueError, "n must be >= 1, got 0"),
    ("objectives.Quadratic.random(4, 0)", ValueError, "d must be >= 1, got 0"),
    ("objectives.Quadratic.random(4.0, 2)", TypeError, "n must be an integer, got float 4.0"),
    ("objectives.Quadratic(np.ones((0, 2)), np.ones((0, 2)))", ValueError, r"q must have at least one row"),
    ("objectives.LeastSquares(np.ones((8, 0)), np.ones(8), 4)", ValueError,
     r"H must have at least one row per node \(n = 4\) and one column, got shape \(8, 0\)"),
    ("objectives.LeastSquares(np.ones((0, 2)), np.ones(0), 4)", ValueError, "H must have at least one row per node"),
    ("objectives.NonconvexLogistic(np.ones((8, 0)), np.ones(8), 4, batch=1)", ValueError, "H must have at least"),
    ("objectives.Quadratic.random(4, 2).full_gradient(np.zeros((1, 2)), nodes=[1.5])", TypeError,
     "nodes must be integer node ids, got dtype float64"),
    ("objectives.NonconvexLogistic.synthetic(4, total=40, batch=2).stochastic_gradient(np.zeros((1, 10)), 0, "
     "nodes=np.array([True]))", TypeError, "nodes must be integer node ids, got dtype bool"),
    ("PullDiagGT(topology.exponential(4), np.zeros(2), lr=0.1).step(lambda X: None)", TypeError,
     r"grad_fn returned None; it must return the gradients at X, an array of shape \(4, 2\)"),
])
def test_seeds_sizes_and_node_ids_are_checked_by_name(call, error, fragment):
    """Seeds reach NumPy only once they are integers >= 0 (NumPy's own errors name no argument: "expected
    non-negative integer"); empty data, float node ids (they were truncated: node 1.5 read node 1) and a grad_fn
    that forgets to return are refused by name."""
    from rowstoch_fast import PullDiagGT, datasets, objectives, topology

    names = {"np": np, "PullDiagGT": PullDiagGT, "datasets": datasets, "objectives": objectives, "topology": topology}
    with pytest.raises(error, match=fragment):
        eval(call, names)


@pytest.mark.parametrize("call, error, fragment", [
    ("topology.ring(4).mix(np.ones(4), -5)", ValueError, "t must be >= 0, got -5"),
    ("topology.ring(4).mix(np.ones(4), 2**100)", ValueError, "t must be <= 2^60 - 1"),
    ("topology.ring(4).mix(np.ones(4), True)", TypeError, "t is the iteration (an int), got bool"),
    ("network.Compressed(topology.ring(4), 'qsgd', bits=2).mix(np.ones((4, 4)), 0, d=2.5)", TypeError,
     "d must be an integer, got float 2.5"),
    ("network.Compressed(topology.ring(4), 'qsgd', bits=2).mix(np.ones((4, 4)), 0, d=0)", ValueError,
     "d must be >= 1, got 0"),
    ("network.Compressed(topology.ring(4), 'topk', k=2).mix(np.ones((4, 4)), 0, d='2')", TypeError,
     "d must be an integer, got str '2'"),
    ("objectives.NonconvexLogistic.synthetic(n=4, total=800, batch=20, seed=0, heterogeneity=1e308)", ValueError,
     "heterogeneity = 1e+308 overflows the margins"),
    ("composite.L1(1).prox(np.ones(3), 0.1, out=np.empty(3, dtype=np.float32))", ValueError,
     "out must be an array of v's shape (3,) and of its dtype float64 or a wider one, got ndarray of shape (3,) and "
     "dtype float32"),
    ("composite.L1(1).prox(np.ones(3), 0.1, out=np.empty(2))", ValueError, "out must be an array of v's shape"),
    ("composite.L1(1).prox(np.ones(3), 0.1, xp='numpy')", TypeError, "xp must be an array module"),
    ("composite.Box([0, 1, 2], [1, 2])", ValueError, "lower and upper must hold as many bounds (d each), got 3 and 2"),
    ("composite.as_regularizer({'type': 'Scaled'})", ValueError, "holds 'of' (a regularizer's) and 'a'"),
    ("composite.as_regularizer({'type': 'Scaled', 'of': {'type': 'L1', 'lam': 1}, 'a': '2'})", ValueError,
     "Scaled's a must be a number > 0, got str '2'"),
    ("composite.as_regularizer({'type': ['L1']})", ValueError, "a regularizer's type must be a name (a str)"),
    ("composite.as_regularizer({'type': 'GroupLasso', 'groups': [0, 0, 1], 'lam': 1, 'weights': 'x'})", ValueError,
     "weights must hold 2 numbers >= 0 (one per group), got str 'x'"),
    ("metrics.metrics_table([topology.ring(4)])", TypeError, "named[0] must be a (name, MixingMatrix) pair"),
    ("metrics.lower_bound(1.0, 1.0, 0.0, 10**400, n=16, beta=0.5, kappa=1.0)", ValueError, "K must be <= 2^63 - 1"),
    ("objectives.Quadratic(np.full((2, 2), 1e-320), np.ones((2, 2)))", ValueError,
     "q[0, 0] = 1e-320 is below the smallest normal float64"),
    ("objectives.Quadratic(np.full((2, 2), 1e308), np.full((2, 2), 1e308))", ValueError,
     "the minimiser sum(b) / sum(q) over the nodes is not finite at coordinate 0"),
    ("network.one_peer_exponential(10**12)", MemoryError, "one_peer_exponential(1000000000000): 40 matrices"),
    ("network.redrawn('x', 1)", TypeError, "net must be a MixingMatrix or a network"),
    ("network.describe(5)", TypeError, "net must be a network or a MixingMatrix, got int"),
    ("topology.ring(4).draw(ax=5)", TypeError, "ax must be a matplotlib Axes, got int"),
    ("topology.ring(4).draw(path='graph.xyz')", ValueError, "path 'graph.xyz': matplotlib cannot write .xyz files"),
    ("topology.ring(4).draw(node_color='notacolor')", ValueError, "node_color 'notacolor' is not a matplotlib colour"),
    ("PullDiagGT(topology.ring(4), np.zeros((4, 3)), 0.1).gather(np.zeros((4, 2)), copy=False)", ValueError,
     "array has shape (4, 2), expected (4, 3)"),
])
def test_layers_matrices_objectives_and_regularizers_check_what_they_are_given(call, error, fragment):
    """Helper 199: a matrix's ``mix`` took t = -5, 2**100 and True (every network refuses them); a message layer's d
    of 2.5, 0 and True was read as no d, "2" met a TypeError of %; a logistic heterogeneity of 1e308 labelled every
    NaN margin -1; a float32 ``out`` rounded a prox's result unsaid; a Box of 3 and 2 bounds, a Scaled description
    without its parts, a list as a type and GroupLasso's weights "x" met NumPy's and Python's own errors; and the
    metrics, a Quadratic's data, a schedule's size, the network queries and a drawing's arguments likewise."""
    from rowstoch_fast import composite, metrics, network, objectives

    names = {"np": np, "topology": topology, "network": network, "objectives": objectives, "composite": composite,
             "metrics": metrics, "PullDiagGT": PullDiagGT}
    with pytest.raises(error, match=re.escape(fragment)):
        eval(call, names)


def test_what_those_checks_let_through_still_works():
    """The valid inputs beside helper 199's bad ones (helper 200): a Scaled description read back, pairs as a dict or
    lists, a wider ``out``, a file object to draw into, a fixed delay's messages mixed in order."""
    import io

    from rowstoch_fast import composite, metrics, network

    assert composite.as_regularizer((composite.L1(1) * 3).describe()) == composite.L1(1) * 3
    assert metrics.metrics_table({"ring": topology.ring(4)}).splitlines()[2].startswith("ring ")
    assert metrics.metrics_table([["ring", topology.ring(4)]]).splitlines()[2].startswith("ring ")
    wide = composite.L1(1).prox(np.ones(3, np.float32), 0.1, out=np.empty(3))
    assert wide.dtype == np.float64 and np.allclose(wide, 0.9)
    png = io.BytesIO()
    topology.ring(4).draw(path=png)
    assert png.getvalue().startswith(b"\x89PNG")
    net = network.Delayed(topology.ring(4), max_delay=2, delay="fixed")
    assert [float(net.mix(np.full((4, 1), float(t)), t, d=1)[0, 0]) for t in range(4)] == [0.0, 0.5, 1.0, 2.0]


def test_seeds_numpy_takes_still_work():
    """None, NumPy integers, sequences of integers and Generators are still seeds."""
    from rowstoch_fast import datasets, objectives, topology

    assert topology.erdos_renyi(10, 0.5, seed=np.random.default_rng(0)).n == 10
    assert topology.geometric(10, 0.5, seed=None).n == 10
    a = objectives.Quadratic.random(4, 2, seed=[1, 2])
    np.testing.assert_array_equal(a.q, np.random.default_rng([1, 2]).uniform(0.5, 2.0, (4, 2)))
    np.testing.assert_array_equal(np.concatenate(datasets.iid_split(10, 2, seed=np.int64(3))),
                                  np.random.default_rng(3).permutation(10))
    assert objectives.Quadratic.random(4, 2).full_gradient(np.zeros((0, 2)), nodes=[]).shape == (0, 2)


def test_an_error_during_the_set_up_gets_a_line_of_its_own(tmp_path):
    """The set-up line (``rowstoch: set-up: the network ... ...``, no newline) is cleared before the error: it
    was printed after it on the same line (``--progress``: without a terminal there is none)."""
    rc, _, err = rowstoch_here("run", "--matrix", tmp_path / "missing.npz", "--out", tmp_path, "--progress")
    assert "set-up: the network" in err
    assert_one_line_error(rc, err, "missing.npz", "does not exist")


def test_options_are_not_abbreviated(tmp_path):
    """A prefix of an option is not that option: ``--network lossy`` was read as ``--network-seed``."""
    rc, _, err = rowstoch_here("run", "--record", "5", "--out", tmp_path)
    assert_one_line_error(rc, err, "unrecognized arguments: --record 5")
    rc, _, err = rowstoch_here("run", "--network", "lossy", "--out", tmp_path)
    assert_one_line_error(rc, err, "unrecognized arguments: --network lossy")


def test_an_unknown_option_is_named_by_its_command_with_the_closest_one():
    """Helper 149: ``compare --algorithm pull-diag-gt`` read "unrecognized arguments ... (see rowstoch --help)",
    no hint of ``--algorithms`` and the top-level help pointed to; the command's help and its closest option now."""
    rc, _, err = rowstoch_here("compare", "--algorithm", "pull-diag-gt")
    assert_one_line_error(rc, err, "unrecognized arguments: --algorithm pull-diag-gt (did you mean '--algorithms'?) "
                                   "(see rowstoch compare --help)")
    rc, _, err = rowstoch_here("metrics", "--topolgy=ring")
    assert_one_line_error(rc, err, "(did you mean '--topology'?) (see rowstoch metrics --help)")
    rc, _, err = rowstoch_here("compare", "--algorithms", "dsgd,", "frost")
    assert_one_line_error(rc, err, "unrecognized arguments: frost (see rowstoch compare --help)")
    rc, _, err = rowstoch_here("compare", "--rounds", "50")  # (the first words of an option: it, not the closest
    assert_one_line_error(rc, err, "(did you mean '--rounds-budget'?)")  # spelling, "--mg-rounds")


@pytest.mark.parametrize("args, fragment", [
    (["pull-diag", "--iterations", "5"], "reproduce pull-diag takes no --iterations"),
    (["multi-gossip", "--data", "mnist"], "reproduce multi-gossip takes no --data (it takes --iterations, --repeats, "
                                          "--seed, --data-seed)"),
    (["pull-diag", "--seed", "1"], "reproduce pull-diag takes no --seed"),  # (read by the figures that draw)
    (["communication", "--data-seed", "1"], "reproduce communication takes no --data-seed"),
    (["mnist-mlp", "--data-seed", "1"], "reproduce mnist-mlp takes no --data-seed"),
    (["linear-speedup", "--alpha", "0.5"], "reproduce linear-speedup takes no --alpha"),
    (["mnist-mlp", "--data-dir", "somewhere"], "--data-dir is read with --data mnist only"),
    (["linear-speedup", "--graphs", ""], "--graphs was given an empty value"),
    (["linear-speedup", "--graphs", "ring,ring"], "--graphs must name distinct halves of Figure 2"),
    (["linear-speedup", "--graphs", "torus"], "--graphs must name distinct halves of Figure 2"),
    (["multi-gossip", "--rates", "paper"], "reproduce multi-gossip takes no --rates"),
    (["mnist-heterogeneous", "--alpha", "0.5"], "reproduce mnist-heterogeneous takes no --alpha"),
    (["mnist-mlp", "--data", "mnist", "--data-dir", "."], "--data-dir: no MNIST in '.': it holds"),
    (["cifar10-resnet"], "reads CIFAR-10 from --data-dir, or trains on --synthetic images: give one of the two"),
    (["cifar10-resnet", "--synthetic", "--data-dir", "."], "give one of the two"),
    (["cifar10-resnet", "--data-dir", "."], "--data-dir: data_batch_1[.gz] not found in '.'"),
    (["mnist-mlp", "--width", "4"], "reproduce mnist-mlp takes no --width"),
    (["cifar10-resnet", "--synthetic", "--width", "100000000"],  # (a traceback: PyTorch's sizes overflowed)
     "--width is at most 4096 (64 times ResNet-18's channels), got 100000000"),
    (["cifar10-resnet", "--synthetic", "--iterations", "5"],
     "reproduce cifar10-resnet: --iterations is the communication rounds of each run, at least 10 (one iteration "
     "at R = 10), got 5"),
    (["multi-gossip", "--iterations", "5"],  # (a traceback, exit 1, an empty --out made)
     "reproduce multi-gossip: --iterations is the communication rounds of each run, at least 10 (one iteration at "
     "R = 10), got 5"),
    (["robustness", "--iterations", "3"], "reproduce robustness: --iterations is the communication rounds of each "
                                          "run, at least 5"),
])
def test_reproduce_refuses_options_its_figure_does_not_read(tmp_path, args, fragment):
    """They were ignored: ``reproduce mnist-mlp --data-dir DIR`` trained on the digits, ``pull-diag --iterations
    5`` ran the paper's 40 iterations."""
    if "communication rounds are less than" in fragment and importlib.util.find_spec("torch") is None:
        fragment = "reproduce cifar10-resnet needs PyTorch"  # (the budget is the experiment's to check: it needs it)
    rc, _, err = rowstoch_here("reproduce", *args, "--out", tmp_path, "--no-progress")
    assert_one_line_error(rc, err, fragment)


@pytest.mark.parametrize("args, fragment", [
    (["--algorithms", "mg-pull-diag-gt", "--rounds-budget", "5"],
     "--rounds-budget = 5 is less than one iteration of mg-pull-diag-gt (R = 29 rounds); raise the budget or "
     "pass fewer rounds (--mg-rounds)"),
    (["--algorithms", "mg-pull-diag-gt", "--mg-rounds", "1000", "--rounds-budget", "500"],
     "--rounds-budget = 500 is less than one iteration of mg-pull-diag-gt (R = 1000 rounds); raise the budget or "
     "lower its rounds (--mg-rounds)"),  # (helper 231: "or pass --mg-rounds" to one who had passed it)
    (["--algorithms", "pull-diag-gt,pull-diag-gt"], "--algorithms: 'pull-diag-gt' is listed twice"),
    (["--algorithms", "dsgd", "--lr", "dsgd=-1"], "--lr: dsgd = -1.0 must be a finite number > 0"),
])
def test_compare_errors_name_the_options(tmp_path, args, fragment):
    """Errors from the Python API name its arguments (``rounds_budget = 5``); on the command line they name the
    options (``--rounds-budget = 5``)."""
    rc, _, err = rowstoch_here("compare", "--n", "16", *args, "--out", tmp_path, "--no-progress")
    assert_one_line_error(rc, err, fragment)


@pytest.mark.parametrize("args, fragment", [
    (["run", "--algorithm", "dsgd", "--tracker", "perron"], "--tracker is not read by dsgd"),
    (["run", "--objective", "quadratic", "--rho", "0.5", "--batch", "5"], "--batch is not read with --objective quadratic"),
    (["run", "--objective", "least-squares", "--rho", "0.5"], "--rho is not read with --objective least-squares"),
    (["run", "--sigma", "0.3"], "--sigma is not read with --objective logistic"),
    (["run", "--network-seed", "3"], "--network-seed is not read without --loss, --awake, --activation, --compress, --noise or --max-delay"),
    (["run", "--normalize"], "--normalize is not read without --matrix"),
    (["compare", "--algorithms", "dsgd", "--lr", "0.1", "--mg-rounds", "3"], "--mg-rounds is not read without an mg-*"),
    (["compare", "--algorithms", "dsgd", "--lr", "0.1", "--lam", "0.5"], "--lam is not read with --objective logistic"),
    (["compare", "--algorithms", "dsgd", "--lr", "0.1", "--matrix", "m.npy", "--undirected"],
     "--undirected is not read with --matrix"),
    (["metrics", "--normalize"], "--normalize is not read without --matrix"),
])
def test_options_the_command_would_not_read_are_refused(tmp_path, args, fragment):
    """They were ignored silently (a run other than the one asked for: --tracker perron with DSGD, --rho with the
    quadratic, --network-seed on a reliable network)."""
    tail = ["--out", tmp_path, "--no-progress"] if args[0] != "metrics" else []
    rc, _, err = rowstoch_here(*args, *tail)
    assert_one_line_error(rc, err, fragment)


def test_a_hopeless_exact_tracker_is_one_line_naming_the_option(tmp_path):
    """`rowstoch run --topology ring --n 16000` spent more than 590 s in the spectral gap before deciding."""
    rc, _, err = rowstoch("run", "--topology", "ring", "--n", "16000", "--objective", "quadratic", "--iterations", "5",
                          "--out", tmp_path / "o", "--no-progress")
    assert_one_line_error(rc, err, "the exact diagonal tracker needs at least 7999 powers of A", "use --tracker perron")


# ---------------------------------------------------------------- divergence without NaN, from the stepping API

def _step_until(opt, grad_fn, iterations):
    """Step ``opt`` up to ``iterations`` times; the DivergenceError that ends a diverging run, if any."""
    for _ in range(iterations):
        try:
            opt.step(grad_fn)
        except rf.DivergenceError as exc:
            return exc
    return None


@pytest.mark.parametrize("name", ["pull-diag-gt", "dsgd", "push-pull", "diging"])
def test_growth_is_warned_before_the_nan(name):
    """An iterate that grows a millionfold gets one GrowthWarning, at a read iteration, before any NaN."""
    cls = rf.algorithms.REGISTRY[name]
    A = topology.exponential(16)  # (uniform weights on a regular graph: row-, column- and doubly stochastic)
    kwargs = {m: A for m in cls.matrices}
    opt = cls(x0=np.zeros((16, 3)), lr=5.0, **kwargs)
    with pytest.warns(rf.GrowthWarning) as caught, np.errstate(over="ignore", invalid="ignore"):
        error = _step_until(opt, lambda X: 10.0 * X + 1.0, 400)
    growth = [w for w in caught if w.category is rf.GrowthWarning]
    assert len(growth) == 1, [str(w.message) for w in growth]
    text = str(growth[0].message)
    assert type(opt).__name__ in text and "iteration 32" in text and "lr" in text  # (16 sets the level)
    assert "(at iteration 16, the first read)" in text  # (helper 246: where the level it grew from was read)
    assert growth[0].filename == __file__  # (pointed at the caller of step)
    assert error is None or error.iteration > 32


@pytest.mark.parametrize("far,lr", [(1e5, 0.1), (1e7, 0.1), (1e9, 0.001)])
def test_growth_to_a_far_minimiser_is_not_warned(far, lr):
    """Converging to a minimiser far from x0 = 0 (as far as the millionfold limit and beyond: the growth is measured
    from iteration 16, when most of the way is behind) warns nothing, and ``growth_limit = None`` silences a real
    divergence."""
    A = topology.exponential(16)
    opt = PullDiagGT(A, np.zeros((16, 2)), lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _step_until(opt, lambda X: X - far, 3000 if lr > 0.01 else 40_000)
    assert np.allclose(opt.x, far)
    opt = PullDiagGT(A, np.zeros((16, 2)), lr=5.0)
    opt.growth_limit = None
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("error", rf.GrowthWarning)
        assert isinstance(_step_until(opt, lambda X: 10.0 * X + 1.0, 400), rf.DivergenceError)


def test_growth_scale_is_the_first_step_of_a_loaded_optimizer():
    """A state loaded mid-run measures growth from its own first step: a state that is already large but steady
    (x = 1e9 at a fixed point) warns nothing."""
    A = topology.exponential(16)
    opt = PullDiagGT(A, np.full((16, 2), 1e9), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _step_until(opt, lambda X: X - 1e9, 40)
        again = PullDiagGT.from_state_dict(opt.state_dict())
        _step_until(again, lambda X: X - 1e9, 40)
    assert np.allclose(again.x, 1e9)


@pytest.mark.parametrize("bad", ["1e6", -1, 1, 0.5, float("nan"), float("inf"), True, [1e6]])
def test_a_bad_growth_limit_is_refused_naming_it(bad):
    opt = PullDiagGT(topology.exponential(8), np.zeros((8, 1)), lr=0.1)
    with pytest.raises(ValueError, match="growth_limit must be None or a finite number above 1"):
        opt.growth_limit = bad
    opt.growth_limit = 10
    assert opt.growth_limit == 10.0 and PullDiagGT.growth_limit is not None
    opt.growth_limit = None
    assert opt.growth_limit is None


@pytest.mark.parametrize("name", ["robust-gradient-push", "r-fast"])
def test_per_link_methods_copy_and_pickle_with_their_waiting_mass(name):
    """The mass waiting on lost links, which the CPU backend keeps compact between rounds, goes with a deep copy and
    a pickle of the optimizer: each continues as the original does, bit for bit."""
    from rowstoch_fast.mixing import out_degree_weights
    from rowstoch_fast.network import Lossy

    A = topology.exponential(12)
    cls = rf.algorithms.REGISTRY[name]
    nets = {"A": Lossy(A, 0.3, seed=1), "C": Lossy(out_degree_weights(A), 0.3, seed=2)}
    opt = cls(**{m: nets[m] for m in cls.matrices}, x0=np.zeros((12, 2)), lr=0.02)
    b = np.arange(12.0)[:, None]
    for _ in range(10):
        opt.step(lambda X: X - b)
    assert any(np.abs(v).sum() > 0 for k, v in opt._save_extra().items())  # (mass waits on links now)
    assert_copies_continue(opt, lambda X: X - b, 10)


def assert_copies_continue(opt, grad, steps):
    """A deep copy and a pickle of ``opt`` step as ``opt`` does, bit for bit."""
    import copy
    import pickle

    copies = [copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))]
    for _ in range(steps):
        for o in [opt, *copies]:
            o.step(grad)
    for o in copies:
        assert np.array_equal(o.x, opt.x)


@pytest.mark.parametrize("layer", ["lossy", "sleepy", "noisy"])
@pytest.mark.parametrize("name", ["pull-diag-gt", "dsgd"])
def test_an_optimizer_over_a_varying_network_copies_and_pickles(name, layer):
    """A deep copy or a pickle of Pull-Diag-GT over losses or sleep failed ("cannot pickle 'module' object": its
    tracker held NumPy's module and a lambda); one over message noise failed at its next step ("dtype must be
    float32 or float64, got dtype('float64')": the kernel compared the unpickled dtype by identity). Each copy now
    continues as the original does, bit for bit."""
    from rowstoch_fast.network import Lossy, Noisy, Sleepy

    A = topology.exponential(8)
    net = {"lossy": lambda: Lossy(A, 0.2, seed=3), "sleepy": lambda: Sleepy(A, 0.7, seed=3),
           "noisy": lambda: Noisy(A, 0.01, seed=3)}[layer]()
    b = np.arange(16.0).reshape(8, 2)
    opt = rf.algorithms.REGISTRY[name](net, np.zeros((8, 2)), lr=0.02)
    for _ in range(5):
        opt.step(lambda X: X - b)
    assert_copies_continue(opt, lambda X: X - b, 5)


def test_an_embedders_mistakes_are_named_by_their_arguments(tmp_path):
    """What a library user passed wrong, named as they passed it: an algorithm's A was reported as MixingMatrix's
    own W; pull_diag of a lossy network said "W must be a numeric array ... dtype object"; a checkpoint_dir that is
    a file gave a bare "[Errno 17] File exists"; run's x0 of the wrong shape was refused inside the objective as X."""
    from rowstoch_fast import objectives, pull_diag
    from rowstoch_fast.compare import compare
    from rowstoch_fast.network import Lossy

    with pytest.raises(ValueError, match=r"^A must be non-negative; A\[0, 1\] = -0.5 \(row 0\)"):
        PullDiagGT(np.array([[1.5, -0.5], [0.5, 0.5]]), np.zeros((2, 1)), lr=0.1)
    with pytest.raises(ValueError, match=r"^A must be finite; A\[0, 0\] = nan"):
        PullDiagGT(np.array([[np.nan, 1.0], [0.5, 0.5]]), np.zeros((2, 1)), lr=0.1)
    with pytest.raises(TypeError, match="A must be a fixed matrix .* got Lossy"):
        pull_diag(Lossy(topology.exponential(5), 0.1), np.ones(5), 3)
    np.testing.assert_array_equal(pull_diag(Lossy(topology.exponential(5), 0.0), np.ones(5), 3).errors,
                                  pull_diag(topology.exponential(5), np.ones(5), 3).errors)  # (one that never
    # changes is its matrix)
    f = objectives.Quadratic.random(n=8, d=3, seed=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match=r"checkpoint_dir .*file' cannot be made a folder.*a file has that name"):
        compare(topology.exponential(8), f, ["dsgd"], 20, lr=1e-3, checkpoint_dir=tmp_path / "file", progress=False,
                repeats=1)
    with pytest.raises(ValueError, match=r"x0 must have shape \(d,\) or \(n, d\) = \(8, 3\), got \(8, 2\)"):
        run(rf.Algorithm(topology.exponential(8), lr=1e-3), f, 5, x0=np.zeros((8, 2)), progress=False)

    class Longer(objectives.Quadratic):  # (helper 196: an x0() of another length than d ran a 5-D problem, unsaid)
        def x0(self, seed=42, scale=0.01):
            return np.zeros(5)

    g = objectives.Quadratic.random(n=8, d=3, seed=0)
    g.__class__ = Longer
    with pytest.raises(ValueError, match=r"^Longer.x0\(\) must have shape \(d,\) or \(n, d\) = \(8, 3\), got \(5,\)"):
        run(rf.Algorithm(topology.exponential(8), lr=1e-3), g, 5, progress=False, metrics=["loss", "consensus_error"])


@pytest.mark.parametrize("args", [("compare", "--config", ""), ("compare", "--resume", ""), ("compare", "--lr", ""),
                                  ("run", "--checkpoint", ""), ("run", "--matrix="), ("metrics", "--data-file", ""),
                                  ("compare", "--metrics-module=")])
def test_an_empty_value_is_refused_naming_its_option(args):
    """`rowstoch compare --config ''` (an unset variable in a script) ran the whole default comparison into
    ./compare; --checkpoint '' wrote none and said nothing; --lr '' tuned: refused, naming the option."""
    code, out, err = rowstoch_here(*args)
    option = next(a for a in args if a.startswith("--")).split("=")[0]
    assert code == 2 and f"{option} was given an empty value" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name,value", [("ROWSTOCH_MEMORY_LIMIT", "abc"), ("ROWSTOCH_MEMORY_LIMIT", "nan"),
                                        ("ROWSTOCH_MEMORY_LIMIT", "-1"), ("ROWSTOCH_MEMORY_LIMIT", "inf"),
                                        ("ROWSTOCH_TRACKER_MAX_WORK", "abc"), ("ROWSTOCH_TRACKER_MAX_WORK", "nan"),
                                        ("ROWSTOCH_TRACKER_MAX_BYTES", "abc"), ("ROWSTOCH_TRACKER_MAX_BYTES", "-5")])
def test_a_bad_environment_variable_is_refused_naming_it(name, value, tmp_path):
    """ROWSTOCH_MEMORY_LIMIT=abc gave "could not convert string to float", =-1 was taken ("only -1 B is
    available"), ROWSTOCH_TRACKER_MAX_WORK=nan silently lifted the cap: refused, naming the variable."""
    code, _, err = rowstoch_here("run", "--n", "8", "--iterations", "5", "--no-progress", "--out", tmp_path / "o",
                                 env={name: value})
    assert code == 2 and f"the environment variable {name} must be" in err and repr(value) in err


@pytest.mark.parametrize("table,key,value", [("communication", "network_seed", "-1"), ("objective", "data_seed", "-3"),
                                             ("run", "seed", str(2**64))])
def test_a_seed_out_of_range_in_a_file_is_named_by_its_own_key(tmp_path, table, key, value):
    """[communication] network_seed = -1 and [objective] data_seed = -1 were refused as "[run] seed" (the library's
    check says "seed"): each names its own table and key."""
    tables = {"network": {"topology": '"exponential"', "n": "8"}, "objective": {"kind": '"least-squares"', "d": "4"},
              "run": {"rounds_budget": "20", "repeats": "1"}, "communication": {"loss": "0.1"}}
    tables[table][key] = value
    path = tmp_path / "e.toml"
    path.write_text("".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in body.items()) for t, body in tables.items())
                    + "[algorithms.dsgd]\nlr = 0.05\n")
    code, _, err = rowstoch_here("compare", "--config", path, "--out", tmp_path / "o", "--no-progress")
    assert code == 2 and f"[{table}] {key} must be a seed in [0, 2^64 - 1], got {value}" in err


def test_a_setting_given_twice_is_refused(tmp_path):
    """`topology = ["ring", "ring"]` ran the graph twice and merged both runs' records under graph=ring;
    `--compress qsgd:4,qsgd --bits 4` ran one setting twice under one label: refused, as `loss = [0.1, 0.1]` was."""
    path = tmp_path / "e.toml"
    path.write_text('[network]\ntopology = ["ring", "ring"]\nn = 8\n[objective]\nkind = "least-squares"\nd = 4\n'
                    '[run]\nrounds_budget = 20\nrepeats = 1\n[algorithms.dsgd]\nlr = 0.05\n')
    code, _, err = rowstoch_here("compare", "--config", path, "--out", tmp_path / "a", "--no-progress")
    assert code == 2 and "[network] topology names 'ring' twice" in err
    code, _, err = rowstoch_here("compare", "--n", "8", "--objective", "least-squares", "--algorithms", "dsgd",
                                 "--lr", "0.01", "--compress", "qsgd:4,qsgd", "--bits", "4", "--rounds-budget", "20",
                                 "--repeats", "1", "--out", tmp_path / "b", "--no-progress")
    assert code == 2 and "--compress 'qsgd:4,qsgd' names a setting twice" in err


@pytest.mark.parametrize("steps,message", [(10**20, r"\[algorithms.fedavg\] local_steps must be <= 2\^62"),
                                           (2**61, r"fedavg: a budget of 40 rounds is \d+ of its iterations, more "
                                                   r"than the 2\^62")])
def test_local_steps_past_what_a_run_counts_are_refused(tmp_path, steps, message):
    """`local_steps = 99999999999999999999` (past int64) ran towards 4e21 iterations until killed: refused, as is a
    budget whose iterations pass 2^62."""
    path = tmp_path / "e.toml"
    path.write_text('[network]\ntopology = "exponential"\nn = 8\n[objective]\nkind = "least-squares"\nd = 4\n'
                    f'[run]\nrounds_budget = 40\nrepeats = 1\n[algorithms.fedavg]\nlr = 0.05\nlocal_steps = {steps}\n')
    code, _, err = rowstoch_here("compare", "--config", path, "--out", tmp_path / "o", "--no-progress")
    assert code == 2 and re.search(message, err), err


@pytest.mark.parametrize("args,grouped", [(("run", "--noise", "0_01"), "0_01"), (("compare", "--loss", "0.1,0_2"), "0_2"),
                                          (("run", "--lr=1_0"), "1_0"), (("compare", "--lr", "dsgd=0_01"), "0_01"),
                                          (("run", "--noise", "0..0_5"), "0_5"),
                                          (("compare", "--cost-weights", "gradient=1_0,round=2"), "1_0"),
                                          (("compare", "--compress", "topk:0_5"), "0_5")])
def test_a_number_with_underscores_is_refused(args, grouped):
    """`--noise 0_01` was read as 1.0 (Python's digit grouping: float("0_01") == 1.0), silently."""
    code, _, err = rowstoch_here(*args)
    assert code == 2 and f"{grouped!r} is a number written with underscores" in err


def test_a_path_with_underscores_is_a_name(tmp_path):
    code, _, _ = rowstoch_here("run", "--n", "8", "--iterations", "3", "--no-progress", "--out", tmp_path / "2026_12_01")
    assert code == 0 and (tmp_path / "2026_12_01" / "history.csv").exists()


@pytest.mark.parametrize("args,message", [
    (("--objective", "least-squares", "--metric", "suboptimality,test_accuracy", "--test-samples", "50"),
     "'test_accuracy' does not apply: LeastSquares computes test_loss, test_mse on its test data"),
    (("--objective", "quadratic", "--metric", "suboptimality,test_loss"),
     "'test_loss' does not apply: Quadratic holds no test data"),
    (("--objective", "least-squares", "--metric", "suboptimality,client_drift"),
     "'client_drift' is a federated method's (its clients and server): none of dsgd is federated")])
def test_a_metric_no_run_can_record_is_refused(tmp_path, args, message):
    """A shown metric that no run records was a column of NaN beside runs called ok: refused, saying why."""
    code, _, err = rowstoch_here("compare", "--n", "8", "--algorithms", "dsgd", "--lr", "0.01", *args,
                                 "--rounds-budget", "20", "--repeats", "1", "--out", tmp_path / "o", "--no-progress")
    assert code == 2 and message in err


def test_a_checkpoint_of_another_run_is_not_replaced(tmp_path):
    """`rowstoch run --checkpoint ck.npz` replaced another run's checkpoint without a word (that run could no longer
    resume): refused unless the run resumes from it or --overwrite."""
    ck = tmp_path / "ck.npz"
    common = ("--n", "8", "--iterations", "10", "--no-progress", "--checkpoint", ck)
    assert rowstoch_here("run", *common, "--out", tmp_path / "a")[0] == 0
    saved = ck.read_bytes()
    code, _, err = rowstoch_here("run", *common, "--algorithm", "dsgd", "--out", tmp_path / "b")
    assert code == 2 and "already exists (a run's checkpoint would replace it)" in err and ck.read_bytes() == saved
    assert rowstoch_here("run", "--n", "8", "--iterations", "20", "--no-progress", "--checkpoint", ck, "--resume", ck,
                         "--out", tmp_path / "a")[0] == 0
    assert rowstoch_here("run", *common, "--algorithm", "dsgd", "--out", tmp_path / "c", "--overwrite")[0] == 0


def test_a_schedule_of_layered_networks_says_where_the_layer_goes():
    """Schedule([Lossy(A, 0.1), A]) failed inside the matrix conversion ("float() argument must be ... not
    'Lossy'")."""
    from rowstoch_fast import topology
    from rowstoch_fast.network import Lossy, Schedule

    A = topology.exponential(8)
    with pytest.raises(TypeError, match=r"matrices\[0\] is a Lossy network: a Schedule takes matrices; put the layer "
                                        r"over the schedule instead, e.g. Lossy\(Schedule"):
        Schedule([Lossy(A, 0.1), A])


def test_a_random_quadratic_beyond_memory_is_refused_with_its_size(monkeypatch):
    from rowstoch_fast.objectives import Quadratic

    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2**30))
    with pytest.raises(MemoryError, match=r"Quadratic.random\(n=1000000, d=1000000\) .* needs about .*; a smaller n"):
        Quadratic.random(n=10**6, d=10**6)


@pytest.mark.parametrize("value,got", [("[1, 2]", "(one per client), got shape (2,)"),
                                       ('"1..4"', "(one per client: a sequence, client_steps=1,2,... on the command "
                                                  "line), got the string '1..4' (the FIRST..LAST and @FILE forms of "
                                                  "the network options are not read here)")])
def test_a_per_client_list_in_a_file_is_checked_on_the_networks_size(tmp_path, value, got):
    """`client_steps = "1..4"` with n = 8 was refused as "must be 4 integers" (the check's 4-node stand-in), and
    `client_steps = [1, 2]` without the file and table: both name the file, the table and the network's 8 clients."""
    path = tmp_path / "e.toml"
    path.write_text('[network]\ntopology = "exponential"\nn = 8\n[objective]\nkind = "least-squares"\nd = 4\n'
                    f'[run]\nrounds_budget = 40\nrepeats = 1\n[algorithms.fedavg]\nlr = 0.05\nclient_steps = {value}\n')
    code, _, err = rowstoch_here("compare", "--config", path, "--out", tmp_path / "o", "--no-progress")
    assert code == 2 and f"e.toml: [algorithms.fedavg] client_steps must be 8 integers {got}" in err


def test_live_with_quiet_draws_its_figure_and_no_text_plot(tmp_path, monkeypatch):
    """`--live -q` still wrote the text plot after every method: -q silences it; the figure is still drawn."""
    from rowstoch_fast.compare import live

    monkeypatch.setattr(live, "_has_window", lambda: False)
    code, out, err = rowstoch_here("compare", "--n", "8", "--objective", "quadratic", "--algorithms", "dsgd,diging",
                                   "--lr", "0.05", "--rounds-budget", "20", "--repeats", "1", "--live", "-q",
                                   "--out", tmp_path / "o")
    assert code == 0 and "against communication rounds" not in err + out
    assert (tmp_path / "o" / "live.png").read_bytes()[:4] == b"\x89PNG"


def test_a_spread_over_one_node_is_refused(tmp_path):
    """`--loss 0..0.3 --n 1` silently ran the first value."""
    code, _, err = rowstoch_here("compare", "--loss", "0..0.3", "--n", "1", "--objective", "quadratic", "--algorithms",
                                 "dsgd", "--lr", "0.1", "--rounds-budget", "10", "--repeats", "1", "--out",
                                 tmp_path / "o", "--no-progress")
    assert code == 2 and "--loss 0..0.3: a spread from 0 to 0.3 needs at least two nodes" in err


def test_rowstoch_run_refuses_a_metric_its_method_cannot_record(tmp_path):
    """`rowstoch run --algorithm dsgd --metric client_drift` recorded a column of NaN."""
    code, _, err = rowstoch_here("run", "--n", "8", "--algorithm", "dsgd", "--metric", "client_drift", "--iterations",
                                 "5", "--no-progress", "--out", tmp_path / "o")
    assert code == 2 and "'client_drift' is a federated method's" in err


def test_an_unchecked_run_that_diverges_is_diverged_not_bad_input(tmp_path):
    """With check_finite=false the iterates went to inf unstopped and the objective refused them: exit 2 "X must
    be finite", as if the input were bad. It is a divergence: exit 3, its records kept, marked diverged."""
    code, _, err = rowstoch_here("run", "--n", "8", "--objective", "least-squares", "--algorithm", "dsgd", "--lr",
                                 "1e10", "--iterations", "50", "--hyper", "check_finite=false", "--no-progress",
                                 "--out", tmp_path / "o")
    assert code == 3 and "iterates became non-finite by iteration" in err and "check_finite=False" in err
    assert json.loads((tmp_path / "o" / "history.json").read_text())["diverged"] is True


@pytest.mark.parametrize("name,value", [("ROWSTOCH_MEMORY_LIMIT", " "), ("ROWSTOCH_TRACKER_MAX_WORK", "inf"),
                                        ("ROWSTOCH_TRACKER_MAX_BYTES", "inf"), ("ROWSTOCH_TRACKER_MAX_BYTES", "1e9")])
def test_a_blank_or_unlimited_environment_variable_is_taken(name, value, tmp_path):
    """A blank value is unset (it had crashed: int(None)); inf lifts a tracker's cap, as it did; 1e9 bytes is a
    number (int("1e9") had failed)."""
    code, _, err = rowstoch_here("run", "--n", "8", "--iterations", "3", "--no-progress", "--out", tmp_path / "o",
                                 env={name: value})
    assert code == 0, err


@pytest.mark.parametrize("hyper,message", [("local_steps=2.5", "local_steps must be an integer, got float 2.5"),
                                           ("check_finite=False", "check_finite must be True or False, got str "
                                                                  "'False'")])
def test_a_hyperparameter_of_the_wrong_type_is_one_line(tmp_path, hyper, message):
    """`--hyper local_steps=2.5` ended in a 48-line traceback; `--hyper check_finite=False` (not JSON: the text
    "False") was read as true and the run checked on."""
    code, _, err = rowstoch_here("run", "--n", "8", "--objective", "least-squares", "--algorithm", "fedavg",
                                 "--iterations", "5", "--hyper", hyper, "--no-progress", "--out", tmp_path / "o")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_per_node_file_whose_name_holds_a_comma(tmp_path, monkeypatch):
    """`--loss '0.1,@nf/with,comma.txt'` split the file's name at its comma ("@nf/with: the file cannot be read").
    An `@` item now keeps the longest run of pieces that names a file, on the command line and in an experiment
    file (a path beside it); where no run of pieces names a file, the items are as before."""
    from rowstoch_fast.network.options import split_items

    folder = tmp_path / "nf"
    folder.mkdir()
    np.savetxt(folder / "with,comma.txt", np.linspace(0, 0.2, 8))
    monkeypatch.chdir(tmp_path)
    assert split_items("0.1, @nf/with,comma.txt") == ["0.1", "@nf/with,comma.txt"]
    assert split_items("@nf/with,comma.txt,0.2") == ["@nf/with,comma.txt", "0.2"]
    assert split_items("@nf/with,0.2") == ["@nf/with", "0.2"] and split_items("0.1,,0.2") == ["0.1", "", "0.2"]
    common = ["compare", "--n", "8", "--objective", "least-squares", "--algorithms", "dsgd", "--lr", "0.01",
              "--rounds-budget", "10", "--repeats", "1", "--no-progress"]
    rc, out, err = rowstoch_here(*common, "--loss", "0.1,@nf/with,comma.txt", "--out", tmp_path / "o")
    assert rc == 0, err
    assert "loss @nf/with,comma.txt per node" in (tmp_path / "o" / "summary.md").read_text()
    toml = folder / "exp.toml"
    toml.write_text('[network]\ntopology = "ring"\nn = 8\n[objective]\nkind = "quadratic"\nd = 4\n'
                    '[communication]\nloss = "0.1,@with,comma.txt"\n'
                    '[run]\nrounds_budget = 10\nrepeats = 1\n[algorithms.dsgd]\nlr = 0.05\n')
    rc, out, err = rowstoch_here("compare", "--config", toml, "--out", tmp_path / "f", "--no-progress")
    assert rc == 0, err
    assert f"loss @{folder / 'with,comma.txt'} per node" in (tmp_path / "f" / "summary.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--loss", "-0.1..0.2"], "--loss must be in [0, 1) (gilbert-elliott: [0, 1]), got -0.1..0.2"),
    (["--noise", "-0.5..1"], "--noise must be a finite number >= 0"),
    (["--loss", "-.1"], "--loss must be in [0, 1) (gilbert-elliott: [0, 1]), got -0.1"),
])
def test_a_negative_spread_is_a_value_not_an_option(tmp_path, args, message):
    """`--loss -0.1..0.2` ended "argument --loss: expected one argument": argparse read the value, which looks like
    neither a number nor an option it knows, as an option. It is now the option's value, and its own check says
    what is wrong with it."""
    rc, _, err = rowstoch_here("run", "--n", "8", "--out", tmp_path / "o", *args)
    assert_one_line_error(rc, err, message)


@pytest.mark.parametrize("args, option", [
    (["--objective", "least-squares", "--heterogeneity", "1e308"], "--heterogeneity"),
    (["--objective", "least-squares", "--heterogeneity", "1e200"], "--heterogeneity"),
    (["--objective", "quadratic", "--sigma", "1e300"], "--sigma"),
    (["--objective", "logistic", "--dtype", "float32", "--rho", "1e18"], "--rho"),
    (["--objective", "logistic-l2", "--lam", "1e308"], "--lam"),  # (helper 185: ran, diverged at every rate)
])
def test_objective_scales_whose_square_overflows_are_refused_by_name(tmp_path, args, option):
    """Helper 167: `--heterogeneity 1e308` failed with NumPy's overflow warning and "y must be finite", 1e200 as
    "LeastSquares.optimum()'s value f* is inf", and `--sigma 1e300` ran every rate into NaN, naming no option. A
    scale whose square overflows the dtype is refused with the option's name."""
    rc, _, err = rowstoch_here("run", "--n", "4", "--out", tmp_path / "o", *args)
    assert_one_line_error(rc, err, f"{option} must be at most")


def test_a_reproduction_refuses_an_earlier_runs_folder_unless_overwrite(tmp_path):
    """An interrupted rerun into a folder of an earlier run left that run's CSV and figure beside the new verdict
    (or replaced a finished run with a partial one). The folder is refused; --overwrite removes the earlier files
    first, and leaves the user's own."""
    out = tmp_path / "pd"
    rc, _, err = rowstoch_here("reproduce", "pull-diag", "--out", out)
    assert rc == 0, err
    (out / "notes.txt").write_text("mine")
    (out / "pull_diag_my_notes.txt").write_text("mine too")  # (the figure's prefix, not one of its names: it was
    # refused as an earlier result, and --overwrite removed it)
    written = sorted(p.name for p in out.iterdir())
    rc, _, err = rowstoch_here("reproduce", "pull-diag", "--out", out)
    assert_one_line_error(rc, err, f"--out {str(out)!r} holds the results of an earlier run of pull-diag "
                                   "(pull_diag.csv, pull_diag.png, pull_diag_verdict.csv)", "--overwrite")
    (out / "pull_diag.png").write_bytes(b"stale")
    rc, _, err = rowstoch_here("reproduce", "pull-diag", "--out", out, "--overwrite")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == written and (out / "pull_diag.png").read_bytes() != b"stale"
    rc, _, err = rowstoch_here("reproduce", "multi-gossip", "--iterations", "10", "--repeats", "2", "--out", out,
                               "--no-progress")  # (another figure's files are not its own: it runs)
    assert rc == 0, err
    kept = sorted(p.name for p in out.iterdir())
    rc, _, err = rowstoch_here("reproduce", "multi-gossip", "--iterations", "5", "--out", out, "--overwrite")
    assert_one_line_error(rc, err, "at least 10 (one iteration at R = 10), got 5")  # (refused before --overwrite
    assert sorted(p.name for p in out.iterdir()) == kept  # removed the earlier run's files: the folder was emptied)


def test_the_paper_preset_narrowed_to_a_plain_method_runs(tmp_path):
    """`--preset paper --algorithms pull-diag-gt` was refused: "paper.toml: [run] mg_rounds is not read without an
    mg-* algorithm", naming the shipped file, which the user cannot change (and `--mg-rounds` was refused too). The
    file's R is for the mg-* methods the command line left out; one written on the command line is still refused."""
    rc, out, err = rowstoch_here("compare", "--preset", "paper", "--algorithms", "pull-diag-gt", "--rounds-budget",
                                 "20", "--repeats", "1", "--out", tmp_path / "o", "-q")
    assert rc == 0, err
    rc, _, err = rowstoch_here("compare", "--preset", "paper", "--algorithms", "pull-diag-gt", "--mg-rounds", "5",
                               "--rounds-budget", "20", "--repeats", "1", "--out", tmp_path / "p", "-q")
    assert_one_line_error(rc, err, "--mg-rounds is not read without an mg-* algorithm")


def test_a_data_files_bad_arrays_are_named_by_the_option(tmp_path):
    """A --data-file whose features hold a NaN, or text, was refused as "H must be finite" with no option named."""
    H = np.ones((16, 3))
    H[2, 1] = np.nan
    np.savez(tmp_path / "nan.npz", H=H, y=np.ones(16))
    np.savez(tmp_path / "text.npz", H=np.full((16, 3), "a"), y=np.ones(16))
    for name, fragment in (("nan", "H must be finite; H[2, 1] = nan"), ("text", "H must be")):
        rc, _, err = rowstoch_here("run", "--n", "8", "--objective", "logistic-l2", "--data-file",
                                   tmp_path / f"{name}.npz", "--out", tmp_path / name)
        assert_one_line_error(rc, err, f"--data-file '{tmp_path / name}.npz'", fragment)
    np.savez(tmp_path / "odd.npz", H=np.ones((33, 3)), y=np.ones(33))  # (the only refusal that named no file)
    rc, _, err = rowstoch_here("run", "--n", "8", "--objective", "least-squares", "--data-file", tmp_path / "odd.npz",
                               "--out", tmp_path / "odd")
    assert_one_line_error(rc, err, f"--data-file '{tmp_path / 'odd.npz'}' has 33 rows, which the 8 nodes cannot "
                                   "share evenly (node i takes the i-th of 8 equal blocks of its rows)")


@pytest.mark.parametrize("env, warned", [({"PMI_SIZE": "2", "PMI_RANK": "0"}, True),
                                         ({"PMI_SIZE": "2", "PMI_RANK": "1"}, False),
                                         ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "0"}, True),
                                         ({"PMI_SIZE": "1", "PMI_RANK": "0"}, False)])
def test_a_launch_by_mpiexec_without_the_mpi_backend_is_warned_about(tmp_path, monkeypatch, env, warned):
    """`mpiexec -n 2 rowstoch run` without `--backend mpi` ran the whole problem twice, with nothing said."""
    for key in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(key, raising=False)
    rc, _, err = rowstoch_here("run", "--n", "8", "--iterations", "3", *SMALL[2:], "--out", tmp_path / "o", env=env)
    assert rc == 0, err
    assert ("warning: started by an MPI launcher" in err) == warned, err


@pytest.mark.parametrize("command", [["reproduce", "pull-diag"], ["demo"]])
def test_a_reproduction_started_by_mpiexec_on_several_processes_is_refused(tmp_path, monkeypatch, command):
    """`mpiexec -n 2 rowstoch reproduce ...` ran the figure twice at once into one --out: one run refused the other's
    files as an earlier run's, or removed them under --overwrite. Every process refuses, before anything is
    written."""
    for key in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(key, raising=False)
    for rank in ("0", "1"):
        rc, _, err = rowstoch_here(*command, "--out", tmp_path / "o", env={"PMI_SIZE": "2", "PMI_RANK": rank})
        assert_one_line_error(rc, err, "runs in one process, but an MPI launcher started 2: they would write the "
                                       "same files; run it without mpiexec")
    assert not (tmp_path / "o").exists()


def test_a_run_whose_loss_grows_past_the_warning_is_diverged_not_done(tmp_path):
    """A scale trial: DSGD at lr 100 took the loss to 2e241 with finite iterates; the run warned, then said "done"
    and exited 0 (the loss printed as a number of 240 digits), where compare calls it diverged. Its history.json
    then said ``"diverged": false``: it says what the command said."""
    code, out, err = rowstoch_here("run", "--objective", "least-squares", "--n", "16", "--algorithm", "dsgd", "--lr",
                                   "100", "--iterations", "60", "--no-progress", "--out", tmp_path / "o")
    assert code == 3 and "diverged at iteration 60" in out, (out, err)
    assert "rowstoch: diverged: the gradient norm from" in err and "try a smaller --lr" in err
    loss = out.split("loss ")[1].split()[0]
    assert "e+" in loss and len(loss) < 16, out
    saved = json.loads((tmp_path / "o" / "history.json").read_text())
    assert saved["diverged"] is True and saved["status"] == "diverged" and "the run diverges" in saved["meta"]["grew"]


def test_the_exact_trackers_build_has_a_set_up_line_of_its_own(tmp_path, monkeypatch):
    """A scale trial: at 2^14 nodes the exact tracker's powers of A took 21 minutes of a set-up with nothing shown
    (the run's bar came after it). It is built under a line of its own, naming the way around it, and the run
    reuses it."""
    from rowstoch_fast.cli import run as run_module

    monkeypatch.setattr(run_module, "_SAID_TRACKER", 8)
    code, _, err = rowstoch_here("run", "--n", "8", "--objective", "quadratic", "--d", "3", "--iterations", "5",
                                 "--progress", "--out", tmp_path / "o")
    assert code == 0 and "set-up: the exact tracker's diag(A^k) over all 8 columns" in err, err
    assert "--tracker perron needs none" in err


# ---------------------------------------------------------------- the library's bad arguments, named (helper 135)
def _api_cases():
    from rowstoch_fast import composite, datasets, network, report, topology, tracker
    from rowstoch_fast.metrics import metrics_memory
    from rowstoch_fast.objectives import LeastSquares

    A, f = topology.exponential(4), LeastSquares.synthetic(4, d=3)
    X = np.ones((4, 3))
    vg = lambda x: (0.5 * x @ x - x.sum(), x - 1.0)  # noqa: E731
    return {  # (what was silently wrong, or a raw message naming no argument)
        "gradient_at of a column (a (d, d) 'gradient')": (lambda: f.gradient_at(np.ones((3, 1))), ValueError,
                                                          "x must have shape (d,) = (3,)"),
        "gradient_at of another d (NumPy's broadcast)": (lambda: f.gradient_at(np.ones(4)), ValueError, "x must"),
        "gradient_at of complex x (its real part)": (lambda: f.gradient_at(np.ones(3) * 1j), TypeError,
                                                       "x must be a real array"),
        "value_and_gradient_at(None)": (lambda: f.value_and_gradient_at(None), TypeError, "x must be a real array"),
        "x0(scale=1j)": (lambda: f.x0(scale=1j), TypeError, "scale"),
        "x0(scale=nan)": (lambda: f.x0(scale=float("nan")), ValueError, "scale"),
        "run(x0=complex)": (lambda: rf.run(rf.Algorithm(A, 0.01), f, 2, x0=np.ones(3) + 1j, progress=False),
                            TypeError, "x0 must be a real array"),
        "run(iterations=2**70)": (lambda: rf.run(rf.Algorithm(A, 0.01), f, 2**70, progress=False), ValueError,
                                  "iterations must be <= 2^62"),
        "proximal_gradient(x0=nan)": (lambda: composite.proximal_gradient(vg, composite.L1(0.25), [np.nan, 0.0]),
                                      ValueError, "x0 must be finite"),
        "proximal_gradient(x0=complex)": (lambda: composite.proximal_gradient(vg, None, np.ones(2) * 1j),
                                          TypeError, "x0 must be a real array"),
        "proximal_gradient(tol=nan)": (lambda: composite.proximal_gradient(vg, None, np.zeros(2), tol=float("nan")),
                                       ValueError, "tol"),
        "proximal_gradient(max_iter=-5)": (lambda: composite.proximal_gradient(vg, None, np.zeros(2), max_iter=-5),
                                           ValueError, "max_iter must be >= 1"),
        "proximal_gradient of a NaN gradient": (lambda: composite.proximal_gradient(
            lambda x: (0.0, x * np.nan), None, np.zeros(2)), ValueError, "NaN or Inf"),
        "MixingMatrix(normalize='False')": (lambda: rf.MixingMatrix(2 * A.toarray(), normalize="False"), TypeError,
                                            "normalize must be True or False"),
        "by_name(undirected='False')": (lambda: topology.by_name("ring", 6, undirected="False"), TypeError,
                                        "undirected must be True or False"),
        "by_name(None)": (lambda: topology.by_name(None, 8), TypeError, "name must be"),
        "A.mix(rounds='3')": (lambda: A.mix(X, rounds="3"), TypeError, "rounds must be an integer"),
        "DiagTracker(kind='exat')": (lambda: tracker.DiagTracker(A, kind="exat"), ValueError, "kind must be"),
        "freeze_step('0.5', 0.1)": (lambda: tracker.freeze_step("0.5", 0.1), TypeError, "beta"),
        "freeze_step(0.5, 0.0)": (lambda: tracker.freeze_step(0.5, 0.0), ValueError, "min_pi"),
        "PullDiagGT(rounds=array)": (lambda: rf.PullDiagGT(A, np.zeros(3), 0.1, rounds=np.array([1, 2])),
                                     TypeError, "rounds must be an integer"),
        "L1.prox(step='a')": (lambda: composite.L1(0.1).prox(X, "a"), TypeError, "step must be a real number"),
        "L1.prox(step=True)": (lambda: composite.L1(0.1).prox(X, True), TypeError, "step"),
        "L1.prox(step of another shape)": (lambda: composite.L1(0.1).prox(X, np.ones(2)), ValueError,
                                           "does not broadcast against v"),
        "L1.prox(complex v)": (lambda: composite.L1(0.1).prox(X * 1j, 0.1), TypeError, "v must be a real array"),
        "GroupLasso(None)": (lambda: composite.GroupLasso(None, 0.1), TypeError, "groups must be"),
        "Box(upper='3')": (lambda: composite.Box(upper="3"), TypeError, "upper must be a real number"),
        "Box(lower=True)": (lambda: composite.Box(lower=True), TypeError, "lower must be a real number"),
        "Schedule(None)": (lambda: network.Schedule(None), TypeError, "matrices must be"),
        "iid_split(2**70, 4)": (lambda: datasets.iid_split(2**70, 4), MemoryError, "iid_split(num_samples="),
        "from_networkx(None)": (lambda: rf.MixingMatrix.from_networkx(None), TypeError, "G must be a networkx graph"),
        "to_markdown(None)": (lambda: report.to_markdown(None), TypeError, "table must be a comparison's summary"),
        "to_latex(None)": (lambda: report.to_latex(None), TypeError, "table must be"),
        "metrics_memory(-5)": (lambda: metrics_memory(-5), ValueError, "n must be >= 1"),
        "record_at past the iterations (said '<= 2^2 - 1')": (
            lambda: rf.run(rf.Algorithm(A, 0.01), f, 3, record_at=[4], progress=False), ValueError,
            "record_at must be <= 3, got 4"),
    }


@pytest.mark.parametrize("case", sorted(_api_cases()))
def test_the_library_names_what_is_wrong_with_an_argument(case):
    call, kind, fragment = _api_cases()[case]
    with pytest.raises(kind) as err:
        call()
    assert fragment in str(err.value), str(err.value)


def test_what_is_written_into_a_missing_folder_is_named_as_asked(tmp_path):
    from rowstoch_fast.objectives import LeastSquares

    h = rf.run(rf.Algorithm(rf.topology.exponential(4), 0.01), LeastSquares.synthetic(4, d=3), 2, progress=False)
    with pytest.raises(FileNotFoundError, match=r"cannot write '.*nowhere/h\.csv': its folder .* does not exist"):
        h.to_csv(tmp_path / "nowhere" / "h.csv")
    assert not list(tmp_path.iterdir())


def test_the_topology_builders_show_their_keywords():
    import inspect

    for name in ("exponential", "ring", "grid", "geometric", "complete"):
        params = inspect.signature(getattr(rf.topology, name)).parameters
        assert params["weights"].default == "in-degree" and params["stochastic"].default == "row", name
    inspect.signature(rf.topology.ring).bind(4, weights="metropolis")
    assert rf.topology.geometric(8, 1e300, seed=0).nnz == 64  # (a radius past the square: its estimate overflowed)


# ----- helper 142's fuzzing of the public API (2026-12-04): each case had met Python's, NumPy's or another
# argument's words, or had been accepted


@pytest.fixture(scope="module")
def small_problem():
    from rowstoch_fast.objectives import LeastSquares

    return topology.exponential(8), LeastSquares.synthetic(8, d=5)


def test_step_names_an_objective_an_uncalled_oracle_a_pair_and_none_as_grad_fn(small_problem):
    A, f = small_problem
    with pytest.raises(TypeError, match=r"got LeastSquares, an objective: pass objective\.oracle\(\)"):
        PullDiagGT(A, f.x0(), 0.01).step(f)
    with pytest.raises(TypeError, match=r"grad_fn is the method LeastSquares\.oracle, not the oracle it makes"):
        PullDiagGT(A, f.x0(), 0.01).step(f.oracle)
    with pytest.raises(TypeError, match=r"grad_fn returned a tuple of 2 \(the gradients and a loss\?\)"):
        PullDiagGT(A, f.x0(), 0.01).step(lambda X: (f.full_gradient(X), 1.0))
    opt = PullDiagGT(A, f.x0(), 0.01)
    opt.ask()
    with pytest.raises(TypeError, match=r"tell\(G\): G must be the gradients alone.*got a tuple of 2"):
        opt.tell((np.zeros((8, 5)), 1.0))
    W = topology.by_name("exponential", 8, undirected=True, weights="metropolis")
    admm = rf.ADMM(W, f.x0(), 0.01)  # (its first step takes no gradient: None had been accepted there)
    with pytest.raises(TypeError, match="grad_fn must be a callable grad_fn.X. -> the gradients at X .*got None"):
        admm.step(None)
    assert admm.iteration == 0
    with pytest.raises(TypeError, match="got LeastSquares, an objective"):
        PullDiagGT(A, f.x0(), 0.01).initialize(f)
    # still taken (helper 143): a callable object that also has an objective's methods, a tuple of rows
    class Wrapper:
        stochastic_gradient = full_gradient = None

        def __call__(self, X):
            return f.full_gradient(X)

    assert PullDiagGT(A, f.x0(), 0.01).step(Wrapper()).iteration == 1
    assert PullDiagGT(A, f.x0(), 0.01).step(lambda X: tuple(map(tuple, f.full_gradient(X)))).iteration == 1


def test_report_takes_one_frame_one_metric_and_names_wrong_metrics_titles_and_paths(small_problem, tmp_path):
    from rowstoch_fast import compare as cm, report as rp

    A, f = small_problem
    frame = cm.compare(A, f, ["pull-diag-gt", "dgd"], 40, lr=0.01, tune=False, repeats=2, progress=False, points=5)
    table = cm.summary(frame)
    assert rp.figure(frame, "suboptimality") is not None  # (one frame, one name: a row of one panel)
    assert rp.to_markdown(table, metrics="suboptimality") == rp.to_markdown(table, metrics=["suboptimality"])
    assert cm.summary(frame, metrics=None).equals(cm.summary(frame))
    assert "loss" in cm.summary(frame, metrics="loss").columns  # (a name, not its letters)
    for write in (rp.to_markdown, rp.to_latex):
        with pytest.raises(ValueError, match="metrics: 'loss' is not in this summary, which has suboptimality"):
            write(table, metrics=["loss"])
    with pytest.raises(ValueError, match=r"titles: 2 title\(s\) for 1 frame\(s\)"):
        rp.figure([frame], ["suboptimality"], titles=["a", "b"])
    with pytest.raises(TypeError, match="path must be a file path without suffix .str., got float 2.5"):
        rp.figure([frame], ["suboptimality"], path=2.5)
    assert not os.path.exists("2.5.png")
    with pytest.raises(TypeError, match="metrics must be a name or a sequence of names"):
        rp.figure([frame], [3])
    with pytest.raises(TypeError, match="frames must be a frame of rowstoch_fast.compare.compare or a list"):
        rp.figure("suboptimality", ["suboptimality"])


def test_arguments_of_the_wrong_kind_are_named(small_problem, tmp_path):
    from rowstoch_fast import composite, config, io as rio, mixing, network, objectives, runner, tracker, user_metrics

    A, f = small_problem
    dense = np.full((4, 4), 0.25)
    cases = [
        (lambda: runner.algorithm_options("PullDiagGT"), ValueError,
         r"got 'PullDiagGT' \(did you mean 'pull-diag-gt'\?\)"),
        (lambda: Algorithm(A, lr=0.01, method=["dgd"]), TypeError, r"method must be an algorithm's name .*got list"),
        (lambda: objectives.LogisticL2.synthetic(8, total=800, d=5, batch=None), TypeError, "batch must be an integer"),
        (lambda: objectives.NonconvexLogistic.synthetic(8, total=800, d=5, batch=None), TypeError, "batch must be"),
        (lambda: composite.L1(0.1).prox(3.0, 0.1), ValueError, r"v must have a last axis of d values"),
        (lambda: composite.proximal_gradient(f.value_and_gradient_at, "l1", np.zeros(5)), TypeError,
         "regularizer must be a Regularizer"),
        (lambda: tracker.DiagTracker(dense), TypeError, "A must be a MixingMatrix"),
        (lambda: tracker.diag_powers(dense, 1, 2), TypeError, "A must be a MixingMatrix"),
        (lambda: network.base_matrix(dense), TypeError, "net must be a MixingMatrix or a network"),
        (lambda: network.weights_of("abc"), TypeError, "net must be a MixingMatrix or a network"),
        (lambda: network.fixed_links(2.5), TypeError, "M must be a MixingMatrix or a network"),
        (lambda: objectives.LeastSquares.synthetic(8, d=5, test_samples=10).test_metrics(np.zeros(3)), ValueError,
         r"x must have a last axis of d = 5 values"),
        (lambda: f.hvp(np.zeros((8, 5)), None), TypeError, "V must be a numeric array"),
        (lambda: f.hvp(np.zeros((8, 5)), np.zeros((8, 4))), ValueError, r"V must have shape \(n, d\)"),
        (lambda: rf.History.load(None), TypeError, r"path must be a path \(str or os.PathLike\), got NoneType"),
        (lambda: rio.load_matrix(None), TypeError, "path must be a path"),
        (lambda: rio.save_matrix(3, A), TypeError, "path must be a path"),
        (lambda: config.load(None), TypeError, "path must be a path"),
        (lambda: run(Algorithm(A, lr=0.01), f, 10, progress=False, resume=0), TypeError, "resume must be a path"),
        (lambda: network.Lossy(A, 1.0, model="gilbert_elliott", p_bad=0.1, p_recover=0.5), ValueError,
         r"model must be 'bernoulli' or 'gilbert-elliott', got 'gilbert_elliott' \(did you mean 'gilbert-elliott'"),
        (lambda: user_metrics.load_metrics_module(None), TypeError, "path must be the path of a Python file"),
    ]
    for call, kind, words in cases:
        with pytest.raises(kind, match=words):
            call()
    text = tmp_path / "metrics.txt"
    text.write_text("x = 1\n")
    with pytest.raises(ValueError, match="is not a Python file: give it the suffix .py"):
        user_metrics.load_metrics_module(str(text))
    history = run(Algorithm(A, lr=0.01), f, 5, progress=False)
    with pytest.raises(TypeError, match="folder must be a path"):
        history.save(None)
    with pytest.raises(TypeError, match="path must be a path"):
        history.plot(path=3)
    # what they are for still works: arrays where a matrix is read, a matrix's own helpers
    assert mixing.metropolis_weights(dense).doubly and mixing.out_degree_weights(dense).n == 4
    assert network.out_links(dense).tolist() == [3, 3, 3, 3]


@pytest.mark.parametrize("method", ["dsgd", "push-pull", "exact-diffusion", "k-gt", "sgp"])
def test_a_float32_objective_under_a_too_large_rate_is_a_divergence_not_an_error(method):
    """The optimizer runs in float64; its iterate beyond float32's range had reached the float32 objective, whose
    "X must be finite" ended the whole comparison (helper 141): now the run's divergence, where a step's gradient
    reads it and where a record measures it (helper 143: K-GT, SGP, DSGD on the exponential graph)."""
    from rowstoch_fast import compare as cm
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.objectives import Quadratic
    from rowstoch_fast.runner import build_replicas

    A = topology.ring(64, directed=False)
    f = Quadratic.random(64, 20, seed=3, sigma=0.5, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method in ("dsgd", "push-pull", "exact-diffusion"):
            frame = cm.compare(A, f, [method], 3000, repeats=8, progress=False, lr={method: 10.0}, tune=False)
            assert set(frame["status"]) == {"diverged"}
        if method != "exact-diffusion":  # (a directed graph)
            small = Quadratic.random(16, 6, dtype=np.float32)  # (the record's mean model the first to overflow)
            frame = cm.compare(topology.exponential(16), small, [method], 600, progress=False,
                               lr={method: 30.0}, tune=False)
            assert set(frame["status"]) == {"diverged"}
    opt = build_replicas(Algorithm(A, lr=10.0, method="dsgd"), f, 8)
    oracle = f.oracle(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DivergenceError, match="beyond the objective's float32 range") as err:
            for _ in range(200):
                opt.step(oracle)
    assert err.value.what == "iterate" and opt.iteration == err.value.iteration
    assert np.isfinite(opt.x).all()
    start = np.full((64, 20), 1e39)  # (x0 itself: the user's input, not a step's divergence)
    with pytest.raises(ValueError, match="X must be finite in float32; X.0, 0. = 1e.39 is beyond its range"):
        rf.DSGD(A, start, 0.01).step(f.oracle())


def test_helpers_refuse_what_they_had_cast_or_passed_through(small_problem):
    """Helper 142's SILENT cases and the rest of its RAW ones: each now a TypeError or ValueError naming its
    argument."""
    from rowstoch_fast import compare as cm, config, datasets, experiments, objectives, report, runner, tracker

    A, f = small_problem
    T = tracker.DiagTracker(A)
    cases = [
        (lambda: T.scale(-1), ValueError, "t must be >= 0"),  # (had read the last row)
        (lambda: T.scale(True), TypeError, "t must be an integer, got bool"),  # (had given a (1, ...) block)
        (lambda: T.scale(2.5), TypeError, "t must be an integer"),
        (lambda: tracker.DiagTracker(A, max_bytes="abc"), TypeError, "max_bytes must be a real number"),
        (lambda: tracker.DiagTracker(A, max_work=float("nan")), ValueError, "max_work must be finite"),
        (lambda: tracker.freeze_step(2.5, 0.1), ValueError, r"beta must be in \[0, 1\)"),
        (lambda: objectives.draw_samples(32, 8, 0), TypeError, r"shape must be a tuple \(n,\) or \(reps, n\)"),
        (lambda: objectives.draw_samples(32, (8, 4), float("nan")), TypeError, "iteration must be an integer"),
        (lambda: objectives.draw_samples(32, (8, 4), 1, seed=2.5), TypeError, "seed must be an integer"),
        (lambda: objectives.draw_samples(32, (8, 4), 1, rep_offset=-1), ValueError, "rep_offset must be >= 0"),
        (lambda: experiments.linear_speedup_rate("exponential", 0), ValueError, "n must be >= 1"),
        (lambda: experiments.linear_speedup_rate("exponential", -1), ValueError, "n must be >= 1"),
        (lambda: runner.record_schedule(100.0, 10), TypeError, "iterations must be an integer"),
        (lambda: cm.default_algorithms(None), TypeError, "A must be a numeric array"),
        (lambda: config.preset_path(None), TypeError, "name must be a preset's name"),
        (lambda: cm.tune_lr(A, f, None, "dgd", 1, 40), TypeError, "label must be a str"),
        (lambda: cm.compare(A, f, ["dgd"], 40, lr=0.01, tune=False, progress=False, previous=0), TypeError,
         "previous must be the frame of an earlier compare"),
        (lambda: datasets.split_samples(3.0, np.arange(100), 8), ValueError, "X must hold one entry per sample"),
        (lambda: experiments.label_counts(np.arange(3), datasets.iid_split(100, 8)), ValueError,
         r"parts\[0\] holds sample \d+, past the 3 labels"),
        (lambda: report.with_cost({"gradient_evaluations": [0]}, "gradient=1"), TypeError,
         "frame must be a DataFrame of compare"),
        (lambda: datasets.synthetic_cifar10(train=10, test=10, noise=float("nan")), ValueError,
         "noise must be finite"),
    ]
    for call, kind, words in cases:
        with pytest.raises(kind, match=words):
            call()
    assert T.scale(np.int64(3)) is T.scale(3) or np.array_equal(T.scale(np.int64(3)), T.scale(3))
    assert np.array_equal(T.scale(np.array(3)), T.scale(3))
    assert objectives.draw_samples(32, (8,), np.int64(3)).shape == (8,)
    assert np.array_equal(objectives.draw_samples(32, [2, 8], 3), objectives.draw_samples(32, (2, 8), 3))
    assert tracker.DiagTracker(A, max_bytes=math.inf, max_work=math.inf).n == 8  # (inf: no limit)
    assert runner.record_schedule(10, 0) == [0, 10]


def test_the_mnist_network_refuses_a_flag_or_no_classes():
    pytest.importorskip("torch")
    from rowstoch_fast import experiments

    with pytest.raises(TypeError, match="inputs must be an integer, got bool"):
        experiments.mlp(inputs=True)
    with pytest.raises(ValueError, match="classes must be >= 1, got 0"):
        experiments.mlp(inputs=4, classes=0)
    assert experiments.mlp(4, 3)[-1].out_features == 3


def test_a_regularizers_value_takes_real_arrays_only():
    """``L1.value`` (and ElasticNet's, Box's, GroupLasso's) had taken a complex array and returned |x|'s sum, unsaid
    (helper 142); a list is read as the array it holds, as ``prox`` reads one."""
    from rowstoch_fast.composite import L1, Box, ElasticNet, GroupLasso

    for reg in (L1(0.5), ElasticNet(0.1, 0.2), Box(-1.0, 1.0), GroupLasso([[0], [1]], 0.3)):
        with pytest.raises(TypeError, match=r"x must be a real array, got dtype complex128"):
            reg.value(np.array([[1 + 1j, 2.0]]))
        np.testing.assert_array_equal(reg.value([[1, -2]]), reg.value(np.array([[1.0, -2.0]])))


@pytest.mark.parametrize("name, call", [
    ("delay", lambda A, v: __import__("rowstoch_fast").network.Delayed(A, 1, delay=v)),
    ("method", lambda A, v: __import__("rowstoch_fast").network.Compressed(A, v)),
    ("per", lambda A, v: __import__("rowstoch_fast").network.Noisy(A, 0.1, per=v)),
    ("model", lambda A, v: __import__("rowstoch_fast").network.Sleepy(A, 0.5, model=v)),
    ("form", lambda A, v: rf.PullDiagGT(A, np.zeros((6, 2)), lr=0.1, form=v)),
    ("weights", lambda A, v: topology.exponential(6, weights=v)),
    ("backend", lambda A, v: rf.compare.compare(A, rf.objectives.Quadratic.random(6, 2, seed=0), ["dsgd"], 10, lr=0.1,
                                                 tune=False, progress=False, backend=v)),
    ("tracker", lambda A, v: rf.compare.compare(A, rf.objectives.Quadratic.random(6, 2, seed=0), ["dsgd"], 10, lr=0.1,
                                                 tune=False, progress=False, tracker=v)),
    ("mg_rounds", lambda A, v: rf.compare.compare(A, rf.objectives.Quadratic.random(6, 2, seed=0), ["dsgd"], 10, lr=0.1,
                                                   tune=False, progress=False, mg_rounds=v))])
def test_an_array_where_one_choice_is_read_is_refused_by_name(name, call):
    """An array passed where a string option is read had raised NumPy's "The truth value of an array with more than
    one element is ambiguous" (Delayed's delay, Noisy's per, Sleepy's model, Pull-Diag-GT's form, compare's tracker)
    or "unhashable type" (Compressed's method), naming nothing; compare's tracker and mg_rounds were not checked
    where no method reads them (mg_rounds=['a', 'b'] ran). Each names the argument now (_checks.check_choice)."""
    A = topology.exponential(6)
    for value in (np.array([1, 2]), np.array(["a", "b"])):
        with pytest.raises((TypeError, ValueError), match=rf"^{name} must be"):
            call(A, value)


def _frame_for_fuzz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rf.compare.compare(topology.ring(6), rf.objectives.LeastSquares.synthetic(n=6, samples_per_node=4, d=2,
                                                                                         seed=0),
                                  ["dsgd", "pull-diag-gt"], 8, lr=0.01, tune=False, repeats=1, points=3, progress=False)


@pytest.mark.parametrize("name, call", [
    ("rounds", lambda v: rf.DSGD.build(topology.ring(6), np.zeros((6, 2)), 0.01, rounds=v)),
    ("stochastic", lambda v: topology.ring(6, stochastic=v)),
    ("stochastic", lambda v: rf.MixingMatrix(topology.ring(6).toarray(), stochastic=v)),
    ("validate", lambda v: rf.MixingMatrix(topology.ring(6).toarray(), validate=v)),
    ("self_loops", lambda v: rf.MixingMatrix.from_edges(n=3, edges=[(0, 1), (1, 2), (2, 0)], self_loops=v)),
    ("per_replica", lambda v: rf.PullDiagGT(topology.ring(6), np.zeros((6, 2)), 0.01).traffic(per_replica=v)),
    ("copy", lambda v: rf.PullDiagGT(topology.ring(6), np.zeros((6, 2)), 0.01).gather_x(copy=v)),
    ("higher_is_better", lambda v: rf.compare.ranks({"a": 1.0, "b": 2.0}, higher_is_better=v)),
    ("compositions", lambda v: rf.network.examples(topology.ring(6), compositions=v)),
    ("replace", lambda v: rf.register_metric("careless_fuzz", lambda s: 0.0, replace=v)),
    ("device", lambda v: rf.objectives.draw_samples(10, (6, 1), 0, device=v)),
    ("x", lambda v: rf.compare.empirical_rate(_frame_for_fuzz(), metric="suboptimality", x=v)),
    ("metric", lambda v: rf.compare.text_plot(_frame_for_fuzz(), metric=v)),
    ("metric", lambda v: rf.compare.summary(_frame_for_fuzz(), metric=v)),
    ("caption", lambda v: rf.report.to_latex(rf.compare.summary(_frame_for_fuzz()), caption=v)),
    ("label", lambda v: rf.report.to_latex(rf.compare.summary(_frame_for_fuzz()), label=v)),
    ("title", lambda v: rf.compare.plot(_frame_for_fuzz(), metric="suboptimality", title=v)),
    ("max_work", lambda v: rf.tracker.DiagTracker(topology.ring(6), max_work=v)),
    ("window", lambda v: rf.compare.LiveView(metric="suboptimality", window=v)),
    ("dpi", lambda v: rf.report.figure([_frame_for_fuzz()], ["suboptimality"], dpi=v, path="never")),
    ("converged", lambda v: rf.compare.empirical_rate(_frame_for_fuzz(), metric="suboptimality", converged=v)),
    ("eps", lambda v: rf.tracker.freeze_step(beta=0.5, min_pi=0.1, eps=v)),
    ("d", lambda v: rf.composite.GroupLasso([[0], [1]], lam=0.1, d=v)),
    ("node_size", lambda v: topology.ring(6).draw(node_size=v)),
    ("rep_period", lambda v: rf.objectives.draw_samples(10, (6, 1), 0, rep_period=v)),
    ("backend", lambda v: rf.Algorithm(topology.ring(6), lr=0.01, backend=v))])
def test_an_array_where_one_value_is_read_is_refused_by_name(name, call):
    """Helper 146's fuzzing (2,832 calls, 381 raw): an array where a number, a flag or a name is read had raised
    NumPy's "The truth value of an array with more than one element is ambiguous" or "unhashable type" (``build``'s
    rounds in 141 cases, the topologies' stochastic, MixingMatrix's flags, the summaries' metric and axis, the LaTeX
    caption and label), naming nothing. Each names its argument now."""
    with pytest.raises(TypeError, match=rf"^{name} must be"):
        call(np.array([1, 2]))


def test_tune_lr_and_the_builders_name_their_own_arguments():
    """Helper 146: ``tune_lr(budget=array)`` blamed "rounds_budget" (make_plan's name), its ``rounds`` and
    ``topology.by_name``'s weights, ``one_peer_exponential``'s stochastic and ``DiagTracker``'s max_bytes raised
    NumPy's "truth value ... is ambiguous"."""
    A, f = topology.ring(6), rf.objectives.LeastSquares.synthetic(n=6, samples_per_node=4, d=2, seed=0)
    bad = np.array([1, 2])
    for name, call in (("budget", lambda: rf.compare.tune_lr(A, f, "dsgd", "dsgd", 1, bad, grid=(0.001, 0.01))),
                       ("rounds", lambda: rf.compare.tune_lr(A, f, "dsgd", "dsgd", bad, 8, grid=(0.001, 0.01))),
                       ("weights", lambda: topology.by_name("ring", 6, weights=bad)),
                       ("stochastic", lambda: rf.network.one_peer_exponential(6, stochastic=bad)),
                       ("max_bytes", lambda: rf.tracker.DiagTracker(A, max_bytes=bad))):
        with pytest.raises(TypeError, match=rf"^{name} must be"):
            call()


def test_the_classmethods_that_count_take_numbers_not_arrays():
    """Helper 146: ``iterations_for``, ``memory_per_node``, ``default_lr`` and ``samples_drawn`` returned an array
    for an array of budgets, rounds, replicas, nodes or batch sizes (``iterations_for(10, rounds=[True, False])``:
    ``array([10, 0])`` with a division-by-zero warning), and failed deep for strings."""
    bad = np.array([1, 2])
    for name, call in (("rounds", lambda: PullDiagGT.iterations_for(10, rounds=bad)),
                       ("budget", lambda: PullDiagGT.iterations_for(bad)),
                       ("reps", lambda: PullDiagGT.memory_per_node(2, reps=bad)),
                       ("d", lambda: rf.DSGD.memory_per_node(bad)),
                       ("n", lambda: PullDiagGT.default_lr(bad)), ("n", lambda: rf.DSGD.default_lr(bad)),
                       ("batch", lambda: PullDiagGT(topology.ring(6), np.zeros((6, 2)), 0.01).samples_drawn(bad))):
        with pytest.raises(TypeError, match=rf"^{name} must be an integer"):
            call()
    assert PullDiagGT.iterations_for(np.int64(10), 2) == 5 and PullDiagGT.default_lr(16) == 0.05 / 16


def test_helper_185s_misleading_refusals_say_what_is_wrong(tmp_path):
    """Helper 185: one line and exit 2 each, but naming the wrong thing: `metrics --n 5` was refused whole for the
    torus's square n (every other graph builds), `--metrics-module` of a folder "does not exist", `--checkpoint`
    naming the --out folder "already exists" (nothing did), a `--data-file` whose y is 1e300 blamed H's 3.77, and
    `--matrix` of weights 1e308 with `--normalize` said "pass --normalize" after NumPy's overflow warnings."""
    rc, out, err = rowstoch_here("metrics", "--n", "5")
    assert rc == 0 and "rowstoch: note: not built at --n 5: grid (needs a square --n, got 5); torus" in err
    assert "ring" in out and "torus" not in out
    (tmp_path / "mm").mkdir()
    rc, _, err = rowstoch_here("run", "--n", "4", "--iterations", "3", "--metrics-module", tmp_path / "mm",
                               "--out", tmp_path / "a")
    assert_one_line_error(rc, err, "is a folder: give the Python file in it")
    rc, _, err = rowstoch_here("run", "--n", "4", "--iterations", "3", "--checkpoint", tmp_path / "c", "--out",
                               tmp_path / "c")
    assert_one_line_error(rc, err, "is a folder (--out): give a file name for the checkpoint")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "y.npz", H=rng.standard_normal((8, 3)), y=rng.standard_normal(8) * 1e300)
    rc, _, err = rowstoch_here("run", "--n", "4", "--iterations", "3", "--objective", "least-squares", "--data-file",
                               tmp_path / "y.npz", "--out", tmp_path / "b")
    assert_one_line_error(rc, err, "its rows overflow (the largest entry of H is")
    assert ", of y 1" in err and "e+300); rescale them" in err
    rf.io.save_matrix(tmp_path / "c.npz", rf.topology.star(5, stochastic="column"))  # (helper 187: the API's words)
    rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / "c.npz")
    assert_one_line_error(rc, err, "it is column-stochastic (--matrix takes the network's row-stochastic A")
    assert "stochastic='column'" not in err
    big = np.full((3, 3), 1e308)
    np.save(tmp_path / "big.npy", big)
    rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / "big.npy", "--normalize")
    assert_one_line_error(rc, err, "cannot normalize: the weights of row 0 sum past the largest float")
    rc, _, err = rowstoch_here("metrics", "--matrix", tmp_path / "big.npy")  # (helper 192: accepted, a row of
    # inf; a traceback from the metrics)
    assert_one_line_error(rc, err, "row 0 sums to inf, past the largest float (1e+308 the largest weight): rescale "
                                   "the weights")
    for stochastic, W in (("row", [[1e308, 1e308, 0], [0, .5, .5], [.5, 0, .5]]),
                          ("column", [[1e308, 0, .5], [1e308, .5, 0], [0, .5, .5]])):
        with pytest.raises(ValueError, match=f"{stochastic} 0 sums to inf, past the largest float"):
            rf.MixingMatrix(W, stochastic=stochastic)
    with pytest.raises(ValueError, match="row 0 sums to inf, past the largest float"):
        rf.MixingMatrix.from_edges(2, [[0, 0], [1, 0], [1, 1]], [1e308, 1e308, 1.0], normalize=False)


def test_helper_192s_labels_keep_their_tables_whole(tmp_path):
    """Helper 192: an lr_source with '|' split its row of summary.md; a new line or a right-to-left override went
    into the terminal's table and the Markdown one as it was."""
    from rowstoch_fast.compare import compare, summary
    from rowstoch_fast.report import to_markdown

    W, f = topology.ring(4), LeastSquares.synthetic(4, samples_per_node=4, d=3, seed=0)
    frame = compare(W, f, ["dsgd"], 10, lr={"dsgd": 0.05}, lr_source={"dsgd": "paper | table 3"}, repeats=1,
                    progress=False)
    row = [line for line in to_markdown(summary(frame)).splitlines() if line.startswith("| dsgd")][0]
    assert "0.05 (paper \\| table 3)" in row and row.count(" | ") == to_markdown(summary(frame)).splitlines()[
        0].count(" | ")
    compare(W, f, ["dsgd"], 10, lr={"dsgd": 0.05}, lr_source={"dsgd": "team \U0001F468\u200d\U0001F469"}, repeats=1,
            progress=False)  # (an emoji's zero-width joiner: a format character, printable; helper 194)
    for bad in ("line one\nline two", "tab\there", "\u202eevil", "a\u2028b", "\u2066isolated"):
        with pytest.raises(ValueError, match="lr_source of dsgd must be one line of printable text"):
            compare(W, f, ["dsgd"], 10, lr={"dsgd": 0.05}, lr_source={"dsgd": bad}, repeats=1, progress=False)
    for name in ("heterogeneity", "noise"):  # (f* = inf at 1e200; the command line refused it already)
        with pytest.raises(ValueError, match=f"{name} must be at most 1.34e\\+148 \\(the loss grows as its square"):
            LeastSquares.synthetic(4, **{name: 1e200})


def test_helper_193s_api_answers_are_the_ones_asked_for(tmp_path):
    """Helper 193: format_summary(table, metric=X) headed the ranked metric's values "X (final)" (a metric the
    table does not rank, or none at all); run(metrics=[...]) recorded a column of NaN for a metric that cannot
    apply (compare and the command line refuse it), and History.final / plot of a metric the run did not record
    gave NaN and an empty plot; run(resume=..., x0=...) ignored x0."""
    import pandas as pd

    from rowstoch_fast.compare import compare, format_summary, summary
    from rowstoch_fast.objectives import Quadratic

    W = topology.ring(8, directed=False, weights="metropolis")
    g = LeastSquares.synthetic(8, heterogeneity=1.0)
    table = summary(compare(W, g, ["extra", "dgd"], 40, repeats=2, lr=0.1, points=5, progress=False),
                    metrics=["consensus_error"])
    for metric in ("consensus_error", "bogus"):
        with pytest.raises(ValueError, match=f"metric: the table ranks suboptimality \\(its final column\\), not "
                                             f"'{metric}'"):
            format_summary(table, metric=metric)
    assert "suboptimality (final)" in format_summary(table, metric="suboptimality")
    table.to_csv(tmp_path / "t.csv", index=False)  # (read back: no attrs, its column of that name checked)
    back = pd.read_csv(tmp_path / "t.csv")
    assert "suboptimality (final)" in format_summary(back, metric="suboptimality")
    with pytest.raises(ValueError, match="the table ranks another metric"):
        format_summary(back, metric="consensus_error")
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    with pytest.raises(ValueError, match="metric 'test_accuracy' does not apply: NonconvexLogistic holds no test"):
        run(Algorithm(topology.exponential(8), lr=0.05), f, 5, progress=False, metrics=["grad_norm", "test_accuracy"])
    with pytest.raises(ValueError, match="metric 'client_drift' is a federated method's"):
        run(Algorithm(topology.exponential(8), lr=0.05, method="dsgd"), f, 5, progress=False,
            metrics=["client_drift"])
    h = run(Algorithm(topology.ring(4), lr=0.1), Quadratic.random(4, 3, seed=0), 20, progress=False,
            metrics=["grad_norm"], checkpoint=str(tmp_path / "ck.npz"))
    assert math.isfinite(h.final("grad_norm"))
    for call in (lambda: h.final("suboptimality"), lambda: h.plot("loss")):
        with pytest.raises(ValueError, match="this run did not record '(suboptimality|loss)' \\(it recorded "
                                             "grad_norm\\)"):
            call()
    with pytest.raises(ValueError, match="x0 is not read with resume"):
        run(Algorithm(topology.ring(4), lr=0.1), Quadratic.random(4, 3, seed=0), 30, progress=False,
            metrics=["grad_norm"], resume=str(tmp_path / "ck.npz"), x0=np.full(3, 5.0))


def test_helper_193s_api_edges_are_named():
    """Helper 193: errors from inside matplotlib, pandas and the package, or a value read otherwise than written."""
    import copy

    import scipy.sparse

    from rowstoch_fast import report
    from rowstoch_fast.compare import compare, format_summary, summary

    g = rf.objectives.LogisticL2.synthetic(n=4, total=400, batch=10)
    frame = compare(topology.exponential(4), g, ["dgd"], 10, lr=0.01, repeats=1, points=5, progress=False)
    for call, exc, match in (
            (lambda: report.figure([], ["grad_norm_mean"]), ValueError, "at least one frame and one metric, got 0"),
            (lambda: report.figure([frame], []), ValueError, "got 1 frame\\(s\\) and 0 metric"),
            (lambda: report.figure([frame], ["bogus"]), ValueError, "metrics: 'bogus' is not recorded in frames\\[0\\]"),
            (lambda: report.figure([summary(frame)], ["grad_norm_mean"]), TypeError, "a summary holds no trajectories"),
            (lambda: format_summary(frame), TypeError, "table must be a comparison's summary .*got its records"),
            (lambda: report.to_latex(frame), TypeError, "got its records"),
            (lambda: summary(frame, cache=5), TypeError, "cache must be a dict"),
            (lambda: compare(topology.exponential(4), g, ["pull-diag-gt"], 10, lr=0.01, repeats=1, progress=False,
                             hyper={"pull-diag-gt": {"lr": 0.5}}), ValueError, "'lr' is compare\\(\\)'s own argument"),
            (lambda: rf.objectives.NonconvexLogistic(scipy.sparse.random(40, 5, 0.5, format="csr"), np.ones(40), 4,
                                                     batch=5), TypeError, "H is a SciPy sparse matrix: pass a dense")):
        with pytest.raises(exc, match=match):
            call()
    opt = PullDiagGT(topology.exponential(4), g.x0(), lr=0.01)
    opt.step(g.oracle())
    with pytest.raises(TypeError, match="grad_fn must be a callable grad_fn\\(X\\) .*got int 5"):
        opt.step(5)
    state = copy.deepcopy(opt.state_dict())
    state["check_finite"] = "no"  # (had read as True)
    with pytest.raises(ValueError, match="state\\['check_finite'\\] must be true or false, got 'no'"):
        PullDiagGT.from_state_dict(state)
    with pytest.raises(TypeError, match="state must be the dict returned by PullDiagGT.state_dict\\(\\), got list"):
        PullDiagGT.from_state_dict([1, 2])
    assert PullDiagGT.from_state_dict(opt.state_dict()).iteration == 1


def test_a_float32_data_file_beyond_its_range_is_one_line(tmp_path):
    """Helper 193: NumPy's "overflow encountered in cast" (two lines of its internals) came above the one-line
    error of a --data-file beyond float32's range (a new process: its warnings as a user sees them)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "big.npz", H=rng.standard_normal((8, 3)) * 1e199, y=np.where(np.arange(8) % 2, 1.0, -1.0))
    rc, _, err = rowstoch("run", "--n", "4", "--dtype", "float32", "--data-file",
                          tmp_path / "big.npz", "--iterations", "5", "--out", tmp_path / "o", "-q")
    assert_one_line_error(rc, err, "H must be finite in float32")
    assert err.count("\n") == 1 and "RuntimeWarning" not in err, err


def test_a_data_files_held_out_set_is_read_and_any_other_array_refused(tmp_path):
    """Helper 193: H_test and y_test in a --data-file were ignored without a word: now its held-out test set (the
    test_* metrics); one of the two alone is refused, any other array named as not read."""
    import json

    rng = np.random.default_rng(0)
    H, H_test = rng.standard_normal((8, 3)), rng.standard_normal((6, 3))
    y, y_test = np.where(H @ np.ones(3) > 0, 1.0, -1.0), np.where(H_test @ np.ones(3) > 0, 1.0, -1.0)
    np.savez(tmp_path / "d.npz", H=H, y=y, H_test=H_test, y_test=y_test)
    rc, _, err = rowstoch_here("run", "--n", "4", "--data-file", tmp_path / "d.npz", "--iterations", "5", "--out",
                               tmp_path / "o", "-q", "--metric", "grad_norm,test_accuracy")
    assert rc == 0, err
    accuracy = json.loads((tmp_path / "o" / "history.json").read_text())["rows"]["test_accuracy"]
    assert all(0.0 <= a <= 1.0 for a in accuracy)
    np.savez(tmp_path / "half.npz", H=H, y=y, H_test=H_test)
    rc, _, err = rowstoch_here("run", "--n", "4", "--data-file", tmp_path / "half.npz", "--iterations", "5",
                               "--out", tmp_path / "half", "-q")
    assert_one_line_error(rc, err, "holds H_test without y_test: a held-out test set is both or neither")
    np.savez(tmp_path / "extra.npz", H=H, y=y, feature_names=np.array(["a", "b", "c"]))  # (read, and said: a
    # reviewer, helper 194, had it refused)
    rc, _, err = rowstoch_here("run", "--n", "4", "--data-file", tmp_path / "extra.npz", "--iterations", "5",
                               "--out", tmp_path / "extra", "-q")
    assert rc == 0 and "warning: --data-file" in err and "holds feature_names, which it does not read" in err, err
    np.savez(tmp_path / "wide.npz", H=H, y=y, H_test=rng.standard_normal((6, 4)), y_test=y_test)
    rc, _, err = rowstoch_here("run", "--n", "4", "--data-file", tmp_path / "wide.npz", "--iterations", "5", "--out",
                               tmp_path / "w", "-q")
    assert_one_line_error(rc, err, "H_test must be 2-D with H's 3 columns")


def test_helper_185s_report_inputs_are_named():
    """Helper 185: the summary of an empty frame was a table of no columns that format_summary refused as "not a
    summary"; a text column asked for as the metric failed in "could not convert string to float"; `tex_number(...,
    digits=-1)` in "Format specifier missing precision"; `ranks` with an inf tied every method after NumPy's
    warnings."""
    import pandas as pd

    from rowstoch_fast import compare as cmp, report

    frame = cmp.compare(rf.topology.ring(4), rf.objectives.LeastSquares.synthetic(4, d=2, seed=0), "dgd,diging", 10,
                        lr=0.05, repeats=2, progress=False)
    with pytest.raises(ValueError, match="frame holds no records: there is nothing to summarize"):
        cmp.summary(frame.iloc[:0])
    with pytest.raises(TypeError, match="frame's column 'consensus_error' must hold numbers, got dtype"):
        cmp.summary(frame.assign(consensus_error="x"), "consensus_error")
    with pytest.raises(TypeError, match="frame's column 'suboptimality' must hold numbers"):  # (its ranked one)
        cmp.summary(frame.assign(suboptimality="x"))
    with pytest.raises(ValueError, match="digits must be >= 0, got -1"):
        report.tex_number(1.5, digits=-1)
    with pytest.raises(ValueError, match=r"finals\['a'\] holds inf: only finite final values rank"):
        cmp.ranks({"a": np.array([np.inf, 1.0]), "b": np.array([3.0, 4.0])})
    assert isinstance(frame, pd.DataFrame)


def test_an_optimizer_s_iteration_is_read_only_and_check_finite_is_checked_where_assigned():
    """Helper 196: ``opt.iteration = 50`` was taken (a Pull-Diag tracker went on from A^50's diagonal with the models
    of iteration 0; -7 failed later as "t must be >= 0"), and ``opt.check_finite = 'no'`` too (truthy: still
    checking, and the state_dict it saved was refused on load)."""
    opt = PullDiagGT(topology.exponential(8), np.zeros((8, 1)), lr=0.1)
    opt.step(lambda X: X - 1.0)
    with pytest.raises(AttributeError, match=r"PullDiagGT.iteration is read-only: .* from_state_dict"):
        opt.iteration = 50
    assert opt.iteration == 1
    with pytest.raises(TypeError, match="check_finite"):
        opt.check_finite = "no"
    assert opt.check_finite is True
    opt.check_finite = False
    for _ in range(2):  # (unchecked now: no DivergenceError; the NaN gradients reach x at the second step)
        opt.step(lambda X: np.full_like(X, np.nan))
    assert opt.iteration == 3 and np.isnan(opt.x).all()
    again = PullDiagGT.from_state_dict(opt.state_dict())
    assert again.iteration == 3 and again.check_finite is False


@pytest.mark.parametrize("call, error, fragment", [
    ("reproduce_mnist_mlp(out, batch=0)", ValueError, "batch must be >= 1, got 0"),
    ("reproduce_mnist_mlp(out, batch=2.5)", TypeError, "batch must be an integer, got float 2.5"),
    ("reproduce_mnist_mlp(out, record_every=0)", ValueError, "record_every must be >= 1, got 0"),
    ("reproduce_mnist_mlp(out, repeats=0)", ValueError, "repeats must be >= 1, got 0"),
    ("reproduce_mnist_mlp(out, repeats=1.5)", TypeError, "repeats must be an integer, got float 1.5"),
    ("reproduce_mnist_mlp(out, graphs=['foo'])", ValueError,
     "graphs must be distinct names from ring, grid, geometric, nearest_neighbor, got 'foo'"),
    ("reproduce_mnist_mlp(out, seed=-1)", ValueError, "seed must be >= 0, got -1"),
    ("reproduce_mnist_mlp(out, stem='a/b')", ValueError, "stem must be a file name's stem (the files go in out_dir), "
     "got 'a/b'"),
    ("reproduce_mnist_heterogeneous(out, record_every=-5)", ValueError, "record_every must be >= 1, got -5"),
    ("reproduce_mnist_heterogeneous(out, seed=1.5)", TypeError, "seed must be an integer, got float 1.5"),
    ("reproduce_cifar10_resnet(out, synthetic=True, batch=-3)", ValueError, "batch must be >= 1, got -3"),
    ("reproduce_cifar10_resnet(out, synthetic=True, graphs=5)", TypeError,
     "graphs must be a name or a sequence of names (str), got int 5"),
    ("reproduce_robustness(out, algorithms=[])", ValueError, "algorithms must name at least one algorithm"),
    ("reproduce_robustness(out, bursty=(0.5, 0.0, 0.0))", ValueError, "bursty[1] (p_bad) must be finite and > 0, "
     "got 0.0"),
    ("reproduce_robustness(out, bursty=(0.5,))", ValueError, "bursty must be None or (p in the bad state, p_bad, "
     "p_recover), three probabilities, got (0.5,)"),
    ("reproduce_robustness(out, bursty=(2, 0.1, 0.1))", ValueError, "bursty's three numbers must be probabilities"),
    ("reproduce_robustness(out, total=1000)", ValueError, "total must be a multiple of 64 of at least 12800 (the "
     "samples of the 64-node graph: a mini-batch of 200 on each node), got 1000"),
    # (tuned for 47 s, then wrote empty outputs, before the first evaluation's refusal: helper 231)
    ("reproduce_robustness(out, repeats=10**8)", MemoryError, "the runs' iterates (64 nodes x 100000000 replicas"),
    ("reproduce_communication(out, repeats=10**8)", MemoryError, "the runs' iterates (32 nodes x 100000000 replicas"),
])
def test_the_reproductions_check_their_arguments_before_any_work(tmp_path, call, error, fragment):
    """Helper 204: the Python API of the neural reproductions took batch 0 (ZeroDivisionError), record_every 0 (the
    same, after the CSVs were written) and -5, repeats 0 (empty outputs), graphs ['foo'] (KeyError) and 'ring'
    (letter by letter), seed -1, stem 'a/b' (OSError); the robustness one, no algorithm (ZeroDivisionError after
    writing its CSV), bursty (0.5, 0, 0) and (0.5,), a small total (named batch). Each is refused before anything
    is read, run or written."""
    from rowstoch_fast import experiments

    out = tmp_path / "out"
    names = {name: getattr(experiments, name) for name in experiments.__all__}
    with pytest.raises(error, match=re.escape(fragment)):
        eval(call, {**names, "out": str(out)})
    assert not out.exists()


def test_a_figure_saved_at_a_dpi_past_any_image_is_refused(tmp_path):
    """Helper 204: dpi = 10000 took a minute and 9.5 GB for one panel, dpi = 1e6 ended in a bare std::bad_alloc;
    a raster image past 2^16 pixels a side or 2^28 in all is refused, naming dpi and the size; a PDF takes any."""
    import matplotlib.pyplot as plt

    from rowstoch_fast import report

    fig = plt.figure(figsize=(6, 4))
    draw = fig.savefig
    fig.savefig = lambda *a, **k: pytest.fail("drawn: nothing checked the size first")  # (gigabytes, a minute)
    try:
        for dpi in (10000, 1e6):
            with pytest.raises(ValueError, match=re.escape(f"dpi = {dpi:g} makes the 6 x 4 in figure an image of "
                                                           f"{6 * dpi:.0f} x {4 * dpi:.0f} pixels (")) as info:
                report.save(fig, tmp_path / "big.png", dpi=dpi)
            assert str(info.value).endswith("iB): at most 65535 a side and 2^28 in all; lower dpi")
        with pytest.raises(ValueError, match=r"an image of 36000 x 24000 pixels"):  # (within a side, past in all)
            report.save(fig, io.BytesIO(), dpi=6000)
        assert not list(tmp_path.iterdir())
        fig.savefig = draw
        assert report.save(fig, tmp_path / "big.pdf", dpi=10000).endswith("big.pdf")
        assert report.save(fig, tmp_path / "small.png", dpi=50).endswith("small.png")
    finally:
        plt.close(fig)


def test_the_neural_figures_models_and_label_counts_check_their_sizes(monkeypatch):
    """Helper 204: resnet18(classes=0) built a net with no output (mlp refused it); 10^10 classes and an MLP of
    10^12 parameters met torch's allocator (now refused from their parameter count, before any is made: exact, a
    byte short of it refuses); mlp(hidden=3) "'int' object is not iterable"; label_counts took classes=0 (counts
    of shape (n, 0)) and met NumPy's words for negative or float labels."""
    pytest.importorskip("torch")
    from rowstoch_fast import experiments

    with pytest.raises(ValueError, match="classes must be >= 1, got 0"):
        experiments.resnet18(4, classes=0)
    with pytest.raises(MemoryError, match=r"resnet18\(width=64, classes=10000000000\), of 5,130,011,168,832 "
                                          "parameters needs about"):
        experiments.resnet18(classes=10**10)
    with pytest.raises(MemoryError, match=r"mlp\(1000000, classes=10, hidden=\(1000000,\)\), of 1,000,011,000,010 "
                                          "parameters"):
        experiments.mlp(10**6, hidden=(10**6,))
    with pytest.raises(TypeError, match=r"hidden must be a sequence of layer widths, e.g. \(64, 32, 16\), got int 3"):
        experiments.mlp(4, hidden=3)
    for make in (lambda: experiments.resnet18(2, classes=3), lambda: experiments.mlp(5, 3, (4, 2))):
        count = sum(p.numel() for p in make().parameters())
        monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(4 * count))
        make()
        monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(4 * count - 1))
        with pytest.raises(MemoryError, match=f"of {count:,} parameters"):
            make()
        monkeypatch.delenv("ROWSTOCH_MEMORY_LIMIT")
    parts = [np.array([0, 1]), np.array([2, 3])]
    with pytest.raises(ValueError, match="classes must be >= 1, got 0"):
        experiments.label_counts(np.array([0, 1, 1, 0]), parts, classes=0)
    with pytest.raises(ValueError, match=r"labels must be class ids in 0\.\.9 \(classes = 10\), got -1"):
        experiments.label_counts(np.array([0, -1, 1, 0]), parts)
    with pytest.raises(TypeError, match="labels must be a 1-D array of class ids"):
        experiments.label_counts(np.array([0.0, 1.5, 1.0, 0.0]), parts)
    assert experiments.label_counts(np.array([0, 1, 1, 0]), parts, classes=2).tolist() == [[1, 1], [1, 1]]


def test_the_report_helpers_name_what_they_were_given(small_problem, tmp_path):
    """Helper 204: check_formats(None), style("a"), tex_number("a"), rate_text("abc"), save(None, ...) and
    tuning_figure(a frame) met Python's, pandas' or NumPy's words; with_cost of a unit whose column the frame
    lacks a KeyError; a metric column of text matplotlib's; titles for fewer frames were taken, the last rows left
    untitled."""
    from rowstoch_fast import compare as cm, report as rp

    A, f = small_problem
    frame = cm.compare(A, f, ["dgd"], 20, lr=0.01, tune=False, repeats=1, progress=False, points=3)
    for call, error, words in (
            (lambda: rp.check_formats(None), TypeError, "format must be among png, pdf, svg (a comma-separated string "
                                                        "or a list), got NoneType None"),
            (lambda: rp.style("a"), TypeError, "i must be an integer, got str 'a'"),
            (lambda: rp.tex_number("a"), TypeError, "mean must be a real number, got str 'a'"),
            (lambda: rp.tex_number(1.0, "b"), TypeError, "std must be a real number, got str 'b'"),
            (lambda: rp.rate_text("abc"), TypeError, "lr must be a number, got str 'abc'"),
            (lambda: rp.save(None, tmp_path / "x.png"), TypeError, "fig must be a matplotlib Figure, got NoneType"),
            (lambda: rp.tuning_figure(frame), TypeError, "tuning must be a comparison's frame.attrs['tuning'] (a "
                                                         "dict), got DataFrame: pass frame.attrs['tuning']"),
            (lambda: rp.with_cost(frame.drop(columns=["bytes"]), "byte=1"), ValueError,
             "cost weights: byte weighs the frame's 'bytes' column, which it does not have"),
            (lambda: rp.figure([frame.assign(suboptimality="abc")], ["suboptimality"]), TypeError,
             "values that are not numbers (e.g. 'abc')"),  # (after "metrics: 'suboptimality' in frames[0] holds
            # str" or "object", by pandas' version)
            (lambda: rp.figure([frame, frame], ["suboptimality"], titles=["a"]), ValueError,
             "titles: 1 title(s) for 2 frame(s); give one per frame")):
        with pytest.raises(error, match=re.escape(words)):
            call()
    assert not list(tmp_path.iterdir())
    assert rp.rate_text("0.1") == "0.1"
    assert rp.tex_number(np.float64(0.183), 0.029) == r"$(1.83 \pm 0.29) \times 10^{-1}$"
    assert rp.style(np.int64(1)) == rp.style(1) and rp.tuning_figure(None) is None
    import matplotlib.pyplot as plt

    plt.close(rp.figure([frame, frame], ["suboptimality"], titles=["a", "b"]))


def test_complex_client_weights_are_refused_not_cut_to_their_real_parts():
    """Helper 204: FedAvg's client_weights of a complex dtype lost their imaginary parts with a ComplexWarning
    alone."""
    from rowstoch_fast.algorithms import FedAvg

    x0 = np.zeros((8, 2))
    with pytest.raises(TypeError, match=r"client_weights must be 8 positive real numbers \(one per client\), got "
                                        "complex dtype complex128"):
        FedAvg(8, x0, 0.1, participation=0.5, selection="size", client_weights=np.ones(8, complex))
    algo = FedAvg(8, x0, 0.1, participation=0.5, selection="size", client_weights=np.arange(1, 9))
    assert algo.client_weights.tolist() == list(range(1, 9))


# ---------------------------------------------------------------------------------------------- hunter 213's findings


def test_h213_a1_column_stochastic_matrix_is_refused_by_the_row_stochastic_protocols():
    """A column-stochastic C given to pull_diag, a_protocol or the diagonal trackers had run and answered wrong."""
    from rowstoch_fast import tracker

    C = topology.erdos_renyi(5, 0.4, seed=3, stochastic="column")
    for call in (lambda: rf.pull_diag(C, [1.0, 0, 0, 0, 5], 20), lambda: rf.a_protocol(C, [1.0, 0, 0, 0, 5], 20),
                 lambda: tracker.DiagTracker(C), lambda: tracker.diag_powers(C, 1, 3)):
        with pytest.raises(ValueError, match="A must be a row-stochastic MixingMatrix, got a column-stochastic one"):
            call()
    W = MixingMatrix(rf.mixing.metropolis_weights(topology.star(4)), stochastic="column")  # (doubly: taken)
    assert rf.pull_diag(W, [1.0, 0, 0, 0], 60).errors[-1] < 1e-12
    assert tracker.DiagTracker(W).frozen_at >= 1 and rf.mixing.out_degree_weights(C) is C


def test_h213_a2_float32_weights_run_in_float64_sum_to_one_in_float64(tmp_path):
    """A float32 matrix passed its sums at float32's tolerance and then mixed in float64 with rows 3.7e-8 off 1:
    gossip drifted to 2.04485 where pi^T z = 2.04082."""
    W = np.array([[.1, .2, .7], [.3, .3, .4], [.6, .3, .1]], np.float32)
    np.save(tmp_path / "w.npy", W)
    for A in (rf.io.load_matrix(str(tmp_path / "w.npy")), MixingMatrix(W), MixingMatrix(sp.csr_array(W)),
              MixingMatrix(MixingMatrix(W, dtype=np.float32))):
        assert A.dtype == np.float64
        assert np.abs(A.toarray().sum(axis=1) - 1).max() <= 4e-16
        z = rf.a_protocol(A, [1.0, 2, 3], 3000).z
        assert np.allclose(z, A.pi @ [1.0, 2, 3], rtol=0, atol=1e-12)
    B = MixingMatrix(W, dtype=np.float32)  # (float32 runs keep the weights as given)
    assert B.dtype == np.float32 and np.array_equal(B.toarray(), W)
    C = MixingMatrix(W.T.copy(), stochastic="column")
    assert np.abs(C.toarray().sum(axis=0) - 1).max() <= 4e-16


def test_h213_a3_a_start_whose_metrics_overflow_is_said_naming_x0():
    """x0 of 1e300 (finite) had recorded inf in every metric of every row, the run not diverged, not a word."""
    rng = np.random.default_rng(0)
    f = LeastSquares(rng.normal(size=(20, 3)), rng.normal(size=20), 4)
    algo = Algorithm(topology.ring(4), lr=0.05, method="dsgd")
    with pytest.warns(RuntimeWarning, match=r"x0: the metrics at the start overflow to inf \(grad_norm.*loss\): its "
                                            r"largest entry, 1e\+300, is too large for LeastSquares"):
        run(algo, f, 3, progress=False, x0=np.array([1e300, 0, 0]))  # (a warning: a run from 1e160 comes back)
    assert not run(algo, f, 3, progress=False, x0=np.array([1e3, 0, 0])).diverged
    from rowstoch_fast import a_protocol, pull_diag  # (the protocols: errors [inf, inf, inf, nan] had come back)

    for protocol in (pull_diag, a_protocol):
        with pytest.raises(ValueError, match=r"Z's values are too large to be averaged and measured in float64 \(the "
                                             r"largest is 1e\+308"):
            protocol(topology.ring(4), [1e308, 1e308, 0, 0], 3)
    assert np.isfinite(pull_diag(topology.ring(4), [1e150, 1e150, 0, 0], 3).errors).all()


def test_h213_a4_a_checkpoint_named_as_one_of_the_runs_outputs_is_refused(tmp_path, monkeypatch):
    """--checkpoint fresh/history.json with --out fresh had been accepted, and history.json written over it."""
    monkeypatch.chdir(tmp_path)
    for name in ("history.json", "./grad_norm.png"):
        rc, _, err = rowstoch_here("run", "--n", "4", "--iterations", "30", "--total", "400", "--batch", "10",
                                   "--no-progress", "--out", "fresh", "--checkpoint", f"fresh/{name}")
        assert rc == 2 and "is one of the run's own outputs" in err and len(err.strip().splitlines()) == 1, err


def test_h213_a5_a6_a7_schedule_refuses_what_mixing_matrix_refuses():
    """Schedule had dropped imaginary parts, taken a periodic P (alone or as a periodic product), a 0-node matrix and
    a dict's keys."""
    from rowstoch_fast.network import Schedule, one_peer_exponential

    P = np.array([[0.0, 1], [1, 0]])
    with pytest.raises(TypeError, match=r"matrices\[0\]: W must be real, got complex dtype complex128"):
        Schedule([np.array([[.5 + .3j, .5 - .3j], [.5, .5]])])
    with pytest.raises(ValueError, match=r"the Schedule's matrix must be primitive, as a MixingMatrix must: A must be "
                                         r"primitive \(aperiodic\), but its graph has period 2"):
        Schedule([P])
    with pytest.raises(ValueError, match=r"the product of the Schedule's 2 matrices over its period leaves 2 groups "
                                         r"of nodes that hear only from their own group"):
        Schedule([P, P])  # (the identity)
    cycle = np.roll(np.eye(3), 1, axis=1)
    with pytest.raises(ValueError, match=r"over its period is periodic \(.* cycles of a multiple of 3 periods\)"):
        Schedule([cycle, cycle])
    leader = np.zeros((5, 5))
    leader[:, 0] = 1.0  # (every node copies node 0: a rank-one product, which mixes; helper 217)
    assert Schedule([leader, topology.ring(5).toarray()]).n == 5
    with pytest.raises(ValueError, match=r"matrices\[0\]: W must have at least one node, got shape \(0, 0\)"):
        Schedule([np.zeros((0, 0))])
    with pytest.raises(TypeError, match=r"got a dict \(pass list\(d.values\(\)\)\)"):
        Schedule({1: topology.ring(3)})
    half = np.full((2, 2), 0.5)
    assert Schedule([P, half]).n == 2 and len(one_peer_exponential(16, "column").matrices) == 4
    assert Schedule.examples(topology.ring(3))["schedule"].n == 3


def test_h213_a8_network_tracker_refuses_a_jump_past_the_work_limit():
    """NetworkTracker(ring(6)).scale(10**18) had stepped V_t without end."""
    from rowstoch_fast.tracker import NetworkTracker

    T = NetworkTracker(topology.ring(6))
    steps = []

    def counted(V, t):  # (without the refusal the steps went on without end: stopped here, not hung)
        steps.append(t)
        if len(steps) > 1000:
            raise RuntimeError("scale(10**18) stepped V_t on")
        return T._host_mix(V, t)

    T._mix = counted
    with pytest.raises(ValueError, match=r"NetworkTracker.scale\(t=1000000000000000000\) .* needs about 3.6e\+19 "
                                         r"multiply-adds .* but the limit is"):
        T.scale(10**18)
    assert not steps
    with pytest.raises(ValueError, match=r"t must be <= 2\^60 - 1"):
        T.scale(2**61)
    assert T.scale(5).tolist() == [32.0] * 6 and T.scale(2).tolist() == [4.0] * 6


def test_a_resumed_run_replays_its_network_tracker_past_the_jump_bound(monkeypatch):
    """The bound on a jump ahead of NetworkTracker.scale (above) had applied to a resumed optimizer's replay of
    V_t from V_0 to where it stood, work its own steps had done: a long run on a large lossy network was refused its
    resume (the limit's words naming ROWSTOCH_TRACKER_MAX_WORK). The replay to there is free; a jump past it is not."""
    from rowstoch_fast import PullDiagGT
    from rowstoch_fast.network import Lossy

    b = np.arange(12.0).reshape(6, 2)
    network = Lossy(topology.ring(6), 0.1, seed=3)
    opt = PullDiagGT(network, np.zeros((6, 2)), 0.05)
    for _ in range(30):
        opt.step(lambda X: X - b)
    state = opt.state_dict()
    monkeypatch.setenv("ROWSTOCH_TRACKER_MAX_WORK", "100")  # (a jump of 30 iterations is past it)
    again = PullDiagGT.from_state_dict(state, A=network)
    again.step(lambda X: X - b)
    opt.step(lambda X: X - b)
    np.testing.assert_array_equal(again.x, opt.x)  # (the replay's scales are the run's own)
    with pytest.raises(ValueError, match=r"NetworkTracker.scale\(t=200\)"):
        again._tracker.scale(200)
    with pytest.raises(ValueError, match=r"resuming at state\['iteration'\] = 1000000000000000 \(the tracker "
                                         r"replays .* but the limit is 1.0e\+04"):  # (REPLAY_FACTOR times the bound:
        # an edited iteration had replayed for centuries, helper 224)
        PullDiagGT.from_state_dict({**state, "iteration": np.int64(10**15)}, A=network)


def test_h213_a9_a_sparse_npz_with_a_float_shape_is_refused(tmp_path):
    """A save_npz file whose shape reads [2.7, 2.2] had been cut to 2 nodes."""
    sp.save_npz(tmp_path / "ok.npz", sp.csr_array(np.full((2, 2), 0.5)))
    stored = dict(np.load(tmp_path / "ok.npz"))
    np.savez(tmp_path / "f.npz", **dict(stored, shape=np.array([2.7, 2.2])))
    with pytest.raises(ValueError, match=r"has shape \[2.7, 2.2\] of dtype float64: a scipy.sparse .npz stores its "
                                         r"shape as integers"):
        rf.io.load_matrix(str(tmp_path / "f.npz"))
    assert rf.io.load_matrix(str(tmp_path / "ok.npz")).n == 2


def test_h213_b10_b11_c20_a_per_node_npy_file_that_cannot_be_read_is_said_naming_option_and_file(tmp_path,
                                                                                                   monkeypatch):
    """@FILE of an empty .npy (NumPy's EOFError), an .npz under a .npy name (AttributeError 'ndim'), a header of
    10^10 values ("Unable to allocate 74.5 GiB") or a text file (pickle's advice) had named neither."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.npy").write_bytes(b"")
    np.savez(tmp_path / "z.npz", a=np.ones(4))
    shutil.copy(tmp_path / "z.npz", tmp_path / "npz.npy")
    (tmp_path / "text.npy").write_text("0.1 0.1 0.1 0.1\n")
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**13,)})
    (tmp_path / "huge.npy").write_bytes(header.getvalue() + bytes(64))
    for name, words in (("empty", "it is empty"), ("npz", "it is an .npz archive"),
                        ("text", "it is not a NumPy file"), ("huge", "its header declares that many values")):
        for option in ("--loss", "--awake"):
            rc, _, err = rowstoch_here("run", "--n", "4", "--iterations", "5", "--total", "400", "--batch", "10",
                                       "--no-progress", "--out", "o", option, f"@{name}.npy")
            assert rc == 2 and option in err and f"@{name}.npy" in err and words in err and f"'{name}.npy'" in err, err
            assert len(err.strip().splitlines()) == 1, err


def test_h213_b12_c18_c23_a_damaged_checkpoints_meta_or_records_and_a_folder_are_said(tmp_path, monkeypatch):
    """meta of valid JSON but not an object (AttributeError), records holding a string ("'>' not supported"), and
    --resume of a folder ("does not exist")."""
    monkeypatch.chdir(tmp_path)
    args = ["run", "--n", "4", "--total", "400", "--batch", "10", "--no-progress"]
    assert rowstoch_here(*args, "--iterations", "5", "--out", "o", "--checkpoint", "ck.npz")[0] == 0
    stored = dict(np.load("ck.npz"))
    for k, (key, value, words) in enumerate((("meta", "[1, 2]", "its meta is list"),
                                             ("meta", '{"config": "x"}', "its meta's config is str"),
                                             ("rows", '[[0, 0, 0, 0, "a"]]', "its records hold str 'a'"))):
        np.savez(f"d{k}.npz", **dict(stored, **{key: np.array(value)}))
        rc, _, err = rowstoch_here(*args, "--iterations", "10", "--out", f"r{k}", "--resume", f"d{k}.npz")
        assert rc == 2 and f"checkpoint 'd{k}.npz' is damaged ({words}" in err, err
    os.mkdir("adir")
    rc, _, err = rowstoch_here(*args, "--iterations", "10", "--out", "ra", "--resume", "adir")
    assert rc == 2 and "--resume 'adir' is a folder" in err, err
    with pytest.raises(IsADirectoryError, match="checkpoint 'adir' is a folder"):
        run(Algorithm(topology.ring(4), lr=0.05), LeastSquares.synthetic(4, d=3), 3, progress=False, resume="adir")


def test_h213_b13_perron_vector_of_a_reducible_unvalidated_matrix_is_a_value_error():
    """validate=False matrices: eye(2) met SciPy's "singular matrix detected"; [[1, 0], [.5, .5]] gave pi = [1, 0],
    kappa inf with a divide-by-zero warning, then "array must not contain infs or NaNs"."""
    for W, why in ((np.eye(2), "more than one solution"), ([[1.0, 0], [0.5, 0.5]], r"pi\[1\] = 0")):
        A = MixingMatrix(W, validate=False)
        with pytest.raises(ValueError, match=r"the Perron vector of A is not unique and positive: A is reducible or "
                                             rf"periodic \(.*{why}"):
            A.pi
        with pytest.raises(ValueError, match="A is reducible or periodic"):
            A.metrics().beta
    assert MixingMatrix([[0.0, 1], [1, 0]], validate=False).pi.tolist() == [0.5, 0.5]  # (periodic: pi is unique)


def test_h213_b14_c16_int_ranges_of_diag_powers_and_theta_without_a_gap():
    """diag_powers(stride=2**63) met pybind11's "incompatible function arguments"; theta() of a matrix without a
    self loop and beta = 1 asked for 3.8e16 steps (freeze_step(1.0, 0.1) = 39070613938484168) where the documented
    answer is inf."""
    from rowstoch_fast import tracker

    for args, words in (((2**63, 2), r"stride must be <= 2\^62"), ((1, 2**63), r"n_records must be <= 2\^63 - 1")):
        with pytest.raises(ValueError, match=words):
            tracker.diag_powers(topology.ring(6), *args, max_work=math.inf)
    with pytest.raises(ValueError, match=r"block must be <= 2\^63 - 1"):
        tracker.diag_powers(topology.ring(6), 1, 2, block=2**63)
    W = np.zeros((3, 3))
    W[1, 0] = W[2, 1] = W[0, 2] = W[1, 2] = 1
    m = MixingMatrix(W / W.sum(axis=1, keepdims=True)).metrics()
    assert m.beta == 1.0 and m.theta() == math.inf and m.theta(5) == math.inf
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\) .* got 1.0"):
        tracker.freeze_step(1.0, 0.1)
    assert tracker.freeze_step(0.5, 0.125) == 57


def test_h213_b15_load_data_file_checks_its_objective(tmp_path):
    """None met an AttributeError on None.startswith; a misspelt "logstic" skipped the check of the labels."""
    from rowstoch_fast.cli._common import OBJECTIVES

    np.savez(tmp_path / "d.npz", H=np.ones((4, 2)), y=np.array([1.0, -1, 1, 2]))
    with pytest.raises(TypeError, match="objective must be one of 'logistic', .* got NoneType None"):
        rf.io.load_data_file(str(tmp_path / "d.npz"), None)
    with pytest.raises(ValueError, match=r"got 'logstic' \(did you mean 'logistic'\?\)"):
        rf.io.load_data_file(str(tmp_path / "d.npz"), "logstic")
    assert len(rf.io.load_data_file(str(tmp_path / "d.npz"), "least-squares")) == 2
    assert rf.io.DATA_OBJECTIVES == OBJECTIVES


def test_h213_c17_an_edge_list_id_past_int64_is_refused_naming_its_line(tmp_path):
    """'1 1e300' had been cast with NumPy's "invalid value encountered in cast" to node -9223372036854775808."""
    (tmp_path / "e.txt").write_text("0 1\n# a comment\n1 1e300\n")
    with pytest.raises(ValueError, match=r"e.txt', line 3: edge 1 \(1 1e\+300\) names node 1e\+300, past the largest "
                                         r"node id an edge list takes \(2\^62 - 1\)"):
        rf.io.load_matrix(str(tmp_path / "e.txt"))
    (tmp_path / "f.txt").write_text("0 1\n\n1 2.5\n")
    with pytest.raises(ValueError, match=r"f.txt', line 3: edge 1 \(1 2.5\) is not a pair of non-negative integer"):
        rf.io.load_matrix(str(tmp_path / "f.txt"))


def test_h213_c19_an_empty_matrix_key_in_an_experiment_file_is_said_as_the_command_line_says_it(tmp_path):
    """[network] matrix = "" had been read as the file's folder: "[Errno 21] Is a directory"."""
    from rowstoch_fast import config

    path = tmp_path / "cfg.toml"
    path.write_text('[network]\nmatrix = ""\n[run]\nalgorithms = "dsgd"\n')
    with pytest.raises(ValueError, match=r"cfg.toml: \[network\] matrix was given an empty value: give it one, or "
                                         "leave the key out"):
        config.load(str(path))
    path.write_text('[outputs]\nmetrics = ["loss", ""]\n[run]\nalgorithms = "dsgd"\n')
    with pytest.raises(ValueError, match=r"\[outputs\] metrics was given an empty value"):
        config.load(str(path))
    path.write_text('[network]\ntopology = "ring"\n[run]\nalgorithms = "dsgd"\n')
    assert config.load(str(path))[0]["topology"] == "ring"


def test_h213_c21_metrics_that_need_an_optimum_and_empty_metric_lists_are_refused(tmp_path, monkeypatch):
    """--metric suboptimality,distance on the logistic objective (no optimum) came back as empty columns; --metric ,
    and --metric " " were taken as nothing where --metric "" is refused."""
    monkeypatch.chdir(tmp_path)
    args = ["run", "--n", "4", "--iterations", "5", "--total", "400", "--batch", "10", "--no-progress"]
    rc, _, err = rowstoch_here(*args, "--out", "a", "--metric", "suboptimality,distance")
    assert rc == 2 and "metric 'suboptimality' does not apply: it needs the objective's optimum, and " \
                       "NonconvexLogistic knows none" in err, err
    for value in (",", " "):
        rc, _, err = rowstoch_here(*args, "--out", "b", "--metric", value)
        assert rc == 2 and f"--metric was given no metric name ({value!r})" in err, err
    from rowstoch_fast.runner import check_shown_metrics

    check_shown_metrics(["distance"], LeastSquares.synthetic(4, d=3), [("dsgd", "dsgd", 1)])  # (it has one)


def test_h213_c22_a_user_metric_may_return_any_real_number_a_float_holds():
    """Fraction(1, 3) and 2**70 had been refused as "must return one real number"."""
    import fractions

    from rowstoch_fast.errors import MetricValueError
    from rowstoch_fast.user_metrics import Metric

    assert Metric("m", lambda s: fractions.Fraction(1, 3)).measure(None) == 1 / 3
    assert Metric("m", lambda s: 2**70).measure(None) == 2.0**70
    with pytest.raises(MetricValueError, match="must return one real number that a float holds, got int 1000"):
        Metric("m", lambda s: 10**400).measure(None)
    with pytest.raises(MetricValueError, match="must return one real number, got str 'x'"):
        Metric("m", lambda s: "x").measure(None)


def test_h213_c24_matrix_file_extensions_are_read_in_any_case(tmp_path):
    """save_matrix("m.NPY") / "m.NPZ" had written a text edge list that np.load then failed on."""
    A = topology.ring(4)
    for name in ("m.NPY", "m.NPZ", "m.Mtx"):
        path = str(tmp_path / name)
        rf.io.save_matrix(path, A)
        assert np.array_equal(rf.io.load_matrix(path).toarray(), A.toarray())
    assert np.array_equal(np.load(tmp_path / "m.NPY"), A.toarray())
    assert sorted(os.listdir(tmp_path)) == ["m.Mtx", "m.NPY", "m.NPZ"]


# ---------------------------------------------------------------- helper 218's findings
def test_h218_integers_too_large_for_a_float_are_refused_by_name():
    """10**400 as lr, radius or p (any check_positive_float caller) or in compare's grid had raised a bare
    "OverflowError: int too large to convert to float", naming nothing."""
    from rowstoch_fast.compare.plan import _check_grid

    with pytest.raises(ValueError, match="radius must be a finite number, got an integer of 401 digits"):
        topology.geometric(8, 10**400, seed=0)
    with pytest.raises(ValueError, match="p must be a finite number, got an integer of 401 digits"):
        topology.erdos_renyi(8, -10**400, seed=0)
    with pytest.raises(ValueError, match="lr must be a finite number, got an integer of about 20001 digits"):
        rf._checks.check_positive_float(10**20000, "lr")  # (past the 4300 digits str() takes)
    with pytest.raises(ValueError, match="grid's learning rate must be a finite number, got an integer of 401"):
        _check_grid((10**400, 0.1))


def test_h218_a_subnormal_rate_in_compare_s_grid_is_refused_up_front_naming_grid():
    """compare(grid=(1e-320, 0.1)) had been refused only when the tuner reached the rate, with a float32 run's
    advice ("use a larger lr or float64") for a float64 run, naming lr."""
    from rowstoch_fast.compare import compare

    f = LeastSquares.synthetic(4, 8, 3)
    with pytest.raises(ValueError, match=r"grid: the learning rate = 1e-320 is subnormal .* use a value of at least"):
        compare(topology.exponential(4), f, ["dsgd"], rounds_budget=20, repeats=1, progress=False,
                grid=(1e-320, 0.1))


def test_h218_a_caption_matplotlib_cannot_draw_is_refused_naming_it():
    """A title or label whose text between two '$' is no TeX math matplotlib parses had failed in the figure's
    drawing, after History.save wrote its CSV and JSON, naming neither; title=5 met textwrap's "'int' object has
    no attribute 'expandtabs'". (check_caption: the check History.save and report.figure can call first.)"""
    pytest.importorskip("matplotlib")
    from rowstoch_fast._checks import check_caption

    with pytest.raises(ValueError, match=r"title 'cost in \$ and x_\$' cannot be drawn: .*TeX math, and that math "
                                         r"\('and x_'\) does not parse; write a literal dollar sign as '\\\$'"):
        check_caption("cost in $ and x_$", "title")
    with pytest.raises(ValueError, match=r"label 'dsgd \$\\\\alpha_\$' cannot be drawn"):
        check_caption("dsgd $\\alpha_$", "label")
    with pytest.raises(TypeError, match="title must be a string or None, got int 5"):
        check_caption(5, "title")
    for fine in (None, "plain", "cost in \\$ and x_\\$", "a $ b", "rate $\\alpha$"):
        assert check_caption(fine, "title") == fine


def _sparse_file(path, size, head=b""):
    """A file of ``size`` bytes: ``head``, then NUL bytes (sparse: no disk taken), with no line end after head."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def test_h218_a_text_file_whose_line_never_ends_is_refused_not_read_whole(tmp_path, monkeypatch):
    """An edge list (or a data set's CSV) of NUL bytes, or whose line never ends, had been read whole into
    memory as one line: an OOM kill, or under a memory cap "out of memory: --matrix 'zeros.txt': " with nothing
    after the colon."""
    from rowstoch_fast import datasets, io as rio
    from rowstoch_fast._checks import MIN_LINE_LIMIT
    from rowstoch_fast.errors import UsageError

    zeros = _sparse_file(tmp_path / "zeros.txt", 1 << 30)
    with pytest.raises(UsageError, match=r"edge list '.*zeros\.txt': line 1 is longer than 1,048,576 characters"):
        rio.load_matrix(zeros)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(16 * MIN_LINE_LIMIT))  # (the line limit: 1 MiB characters)
    csv_zeros = _sparse_file(tmp_path / "zeros.csv", 1 << 30)
    with pytest.raises(MemoryError, match=r"zeros\.csv: line 1 is longer than 1,048,576 characters"):
        datasets.load_dataset(str(csv_zeros))
    # a first line that ends, then one that does not: read as lines (the file is large for the memory), bounded
    late = _sparse_file(tmp_path / "late.txt", 4 * MIN_LINE_LIMIT, b"0 1\n1 0\n7")
    with pytest.raises(MemoryError, match=r"late\.txt: line 3 is longer than 1,048,576 characters"):
        rio.load_matrix(late)


def test_h218_paths_that_are_no_regular_file_are_said_as_what_they_are(tmp_path):
    """load_dataset, load_metrics_module and load_matrix of a folder or a device had said "does not exist" (or
    read it: a FIFO blocked); a FIFO stands for a device here (a test opens no real device)."""
    from rowstoch_fast import datasets, io as rio, user_metrics
    from rowstoch_fast.errors import UsageError

    fifo, folder = tmp_path / "fifo", tmp_path / "folder"
    os.mkfifo(fifo)
    folder.mkdir()
    with pytest.raises(ValueError, match=r"data file '.*fifo' is a FIFO \(named pipe\), not a regular file"):
        datasets.load_dataset(str(fifo))
    with pytest.raises(ValueError, match=r"metrics module '.*fifo' is a FIFO \(named pipe\), not a regular file"):
        user_metrics.load_metrics_module(fifo)
    with pytest.raises(IsADirectoryError, match=r"metrics module '.*folder' is a folder: give the Python file in it"):
        user_metrics.load_metrics_module(folder)
    with pytest.raises(UsageError, match=r"matrix file '.*fifo' is a FIFO \(named pipe\): give a matrix file's"):
        rio.load_matrix(fifo)
    with pytest.raises(UsageError, match=r"matrix file '.*folder' is a folder"):
        rio.load_matrix(folder)
    with pytest.raises(ValueError, match=r"cannot read matrix file '.*fifo': it is a FIFO"):
        rf._checks.load_npz_file(str(fifo), "matrix file")
    with pytest.raises(FileNotFoundError, match="metrics module .*nothing.py' does not exist"):
        user_metrics.load_metrics_module(tmp_path / "nothing.py")


def test_h218_label_counts_refuses_a_negative_or_fractional_sample_index():
    """A part holding -1 had counted the last sample's class."""
    labels = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match=r"parts\[1\] holds sample -1: sample indices are 0\.\.3"):
        rf.experiments.label_counts(labels, [np.array([0, 1]), np.array([2, -1])], classes=2)
    with pytest.raises(TypeError, match=r"parts\[0\] must be a 1-D array of sample indices \(integers\), got float64"):
        rf.experiments.label_counts(labels, [np.array([0.5]), np.array([2])], classes=2)
    assert rf.experiments.label_counts(labels, [np.array([0, 3]), []], classes=2).tolist() == [[2, 0], [0, 0]]
