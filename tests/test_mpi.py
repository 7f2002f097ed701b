"""The MPI backend under mpiexec -n 2 and -n 3 (oversubscribed on two cores), against the single-process runs.

(3 ranks, not 4: a middle rank with a halo on each side, uneven blocks and the "single" partition's round-robin
over two ranks are all there at 3; on a 2-core machine beside another busy process, 4 spinning ranks took 2.3x
the time of 3 (55 s against 24 s for the registry's algorithms), time the suite's other worker lost:
bench/RESULTS.md 55a)"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from rowstoch_fast import PullDiagGT, topology  # noqa: E402
from rowstoch_fast.network import layers as network_layers  # noqa: E402
from rowstoch_fast.objectives import NonconvexLogistic, Quadratic  # noqa: E402

from conftest import feed, for_algorithm, hang_limit, options_for  # noqa: E402

def launcher_flags(version_text, is_root):
    """Extra mpiexec flags for the MPI that printed ``version_text``: Open MPI refuses to run as root and
    to place more ranks than cores unless told; MPICH needs neither."""
    if "Open MPI" not in version_text and "OpenRTE" not in version_text:
        return []
    return ["--oversubscribe"] + (["--allow-run-as-root"] if is_root else [])


def find_launcher():
    """The mpiexec that matches the installed mpi4py: the one beside this Python (the mpich wheel of the
    test extras) first, then PATH's (a system MPI, as on the GPU machine's image); with its flags."""
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if exe is None:
        return None, []
    try:
        probe = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        version = probe.stdout + probe.stderr
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    return exe, launcher_flags(version, hasattr(os, "geteuid") and os.geteuid() == 0)


MPIEXEC, MPIEXEC_FLAGS = find_launcher()


def _sigterm_exit(returncode):
    """Whether mpiexec reported the command's SIGTERM exit (143): MPICH's Hydra passes the ranks' status on; Open
    MPI's mpirun (the flags name it) may report it otherwise, so there any failure counts."""
    return returncode == 143 if not MPIEXEC_FLAGS else returncode != 0
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH (pip install mpich)")
CASES = os.path.join(os.path.dirname(__file__), "mpi_cases.py")
TIMEOUT = 150  # no test may hang: every run is bounded (seconds at rest, scaled by the load: hang_limit)
MORE_RANKS = 3  # the oversubscribed runs (the module's docstring says why 3)


def _fewer_at(ranks, monkeypatch, **variables):
    """The problems of a run at more ranks than the 2 every problem runs at: ``variables`` (mpi_cases.chosen), set
    here too (the checks read the same problems) and handed to the ranks; none at 2 ranks."""
    for key in variables:
        monkeypatch.delenv(key, raising=False)
    if ranks <= 2:
        return {}
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    return variables


def mpirun(case, ranks, tmp_path, out=None, env=None):
    out = out or str(tmp_path / f"{case}-{ranks}.npz")
    cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", str(ranks), sys.executable, "-m", "mpi4py", CASES, case, out]
    env = dict(os.environ, OMP_NUM_THREADS="1", MPIR_CVAR_CH4_NUM_VCIS="1", **(env or {}))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    limit = hang_limit(TIMEOUT)
    try:
        output, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpiexec and every rank
        proc.communicate()
        pytest.fail(f"mpiexec -n {ranks} {case} did not finish in {limit:.0f} s (hang)")
    assert proc.returncode == 0, output
    return dict(np.load(out)) if out.endswith(".npz") else output


def test_launcher_flags_for_open_mpi_as_root():
    assert launcher_flags("HYDRA build details:\n    Version: 4.2.0", True) == []
    assert launcher_flags("mpiexec (Open MPI) 4.1.6", False) == ["--oversubscribe"]
    assert launcher_flags("mpiexec (Open MPI) 5.0.3", True) == ["--oversubscribe", "--allow-run-as-root"]


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


@pytest.mark.parametrize("ranks", [2, MORE_RANKS])
def test_every_algorithm_equals_single_process(ranks, tmp_path, monkeypatch):
    """Each algorithm of the registry under MPI (two partitions, the second stepped by ask/tell) against the same
    algorithm in one process."""
    from rowstoch_fast.algorithms import REGISTRY

    import mpi_cases

    # (at 3 ranks, one graph and one algorithm of each kind: 52 algorithms at 4 ranks on 2 cores took 40 s of CI)
    fewer = _fewer_at(ranks, monkeypatch, ROWSTOCH_MPI_GRAPHS="random",
                      ROWSTOCH_MPI_ALGORITHMS=",".join(mpi_cases.kinds_of_algorithm(REGISTRY)))
    got = mpirun("algorithms", ranks, tmp_path, env=fewer)
    algorithms = mpi_cases.chosen(REGISTRY, "ROWSTOCH_MPI_ALGORITHMS")
    checked = 0
    for gname, A in mpi_cases.algorithm_graphs().items():
        f = Quadratic.random(A.n, 3, seed=1)
        x0 = np.broadcast_to(f.x0(), (2, A.n, 3)) + np.arange(2.0)[:, None, None]
        for name, cls in sorted(algorithms.items()):
            ref = cls.build(for_algorithm(cls, A), x0, 0.01, rounds=2 if cls.multi_round else 1, **options_for(cls))
            fed = feed(cls, f.full_gradient)
            for _ in range(30):
                ref.step(fed)
            traffic = ref.traffic()
            for pname in ("contiguous", "single"):
                key = f"{gname}/{name}/{pname}"
                assert rel(got[key + "/x"], ref.x) < 1e-12, key
                assert got[key + "/state_x"].shape == (A.n, 6), key
                assert got[key + "/traffic"].tolist() == [traffic["messages"], traffic["bytes"]], key
                checked += 1
    assert checked == len(mpi_cases.algorithm_graphs()) * len(algorithms) * 2
    assert ranks == 2 and len(algorithms) == len(REGISTRY) or 10 <= len(algorithms) < len(REGISTRY)


@pytest.mark.parametrize("ranks", [2, MORE_RANKS])
def test_iterates_equal_single_process(ranks, tmp_path, monkeypatch):
    import mpi_cases

    fewer = _fewer_at(ranks, monkeypatch, ROWSTOCH_MPI_GRAPHS="ring,random")
    got = mpirun("gt", ranks, tmp_path, env=fewer)
    checked = 0
    for gname, A in mpi_cases.graphs().items():
        f = Quadratic.random(A.n, 3, seed=1)
        for R in (1, 3):
            for tracker in ("exact", "perron"):
                ref = PullDiagGT(A, f.x0(), lr=0.01, rounds=R, tracker=tracker)
                for _ in range(25):
                    ref.step(f.full_gradient)
                for pname in ("contiguous", "single"):
                    key = f"{gname}/{pname}/R{R}/{tracker}"
                    assert rel(got[key + "/x"], np.asarray(ref.x)) < 1e-12, key
                    assert rel(got[key + "/y"], np.asarray(ref.y)) < 1e-12, key
                    np.testing.assert_allclose(got[key + "/c"], ref.centroid(), rtol=1e-12)
                    checked += 1
    assert checked == 8 * len(mpi_cases.graphs())


def test_stochastic_objective_matches_single_process(tmp_path):
    got = mpirun("logistic", 2, tmp_path)
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    ref = PullDiagGT(topology.exponential(8), np.broadcast_to(f.x0(), (2, 8, 10)), lr=0.05, rounds=2)
    oracle = f.oracle(seed=3, batches=2)
    for _ in range(20):
        ref.step(oracle)
    assert rel(got["x"], np.asarray(ref.x)) < 1e-12


def test_communication_volume_matches_halo(tmp_path):
    stats = mpirun("stats", MORE_RANKS, tmp_path)["stats"]
    R, w = 3, 4
    for messages, bytes_, halo_rows, neighbours in stats:
        # two phases (x and y) of R rounds each per iteration; one message per neighbour per round
        assert messages == 2 * R * neighbours
        assert bytes_ == 2 * R * halo_rows * w * 8
    # the ring split in 3 contiguous blocks: each rank sends its last node to the next rank
    assert (stats[:, 2] == 1).all()


def test_bad_input_on_one_rank_raises_on_all(tmp_path):
    outcomes = [str(o) for o in mpirun("bad_input", 2, tmp_path)["outcomes"]]
    assert outcomes[1].startswith("ValueError") and "x0 must be finite" in outcomes[1]
    assert outcomes[0].startswith("RemoteError") and "rank 1 failed" in outcomes[0]


def test_bad_mpi_options_are_named(tmp_path):
    comm, partition = [str(o) for o in mpirun("bad_options", 2, tmp_path)["outcomes"]]
    assert comm == "TypeError: comm must be an mpi4py communicator (e.g. MPI.COMM_WORLD), got str"
    assert "partition must be 16 integer owner ranks, got float64 of shape (16,)" in partition


def test_grad_fn_failure_on_one_rank_raises_on_all(tmp_path):
    outcomes = [str(o) for o in mpirun("grad_error", 2, tmp_path)["outcomes"]]
    assert "simulated failure" in outcomes[1] and outcomes[0].startswith("RemoteError")
    assert all("at iteration 3" in o for o in outcomes)


def test_gradients_borrowed_on_one_rank_and_copied_on_another_do_not_hang(tmp_path):
    """A grad_fn returning Fortran-order arrays: the rank of one row borrows its block, the other copies it (a
    reviewer's reproducer hung in a scan only the borrowing rank called); both finish, and a NaN gradient raises
    the gradient's error on every rank."""
    outcomes = mpirun("fortran_gradients", 2, tmp_path)["outcomes"]
    for per_rank in outcomes.T:  # (each method: its outcome on both ranks)
        assert all("non-finite gradient" in str(o) for o in per_rank), per_rank


def test_cli_run_under_mpiexec_matches_single_process(tmp_path):
    import pandas as pd

    from rowstoch_fast import cli

    out = str(tmp_path / "mpi")
    mpirun("cli", 2, tmp_path, out=out)
    single = str(tmp_path / "single")
    assert cli.main(["run", "--topology", "exponential", "--n", "8", "--lr", "0.05", "--iterations", "20",
                     "--repeats", "2", "--total", "1600", "--batch", "20", "--out", single, "--no-progress"]) == 0
    a = pd.read_csv(os.path.join(out, "history.csv"))
    b = pd.read_csv(os.path.join(single, "history.csv"))
    cols = ["iteration", "grad_norm", "loss", "consensus_error", "descent_deviation"]
    np.testing.assert_allclose(a[cols].to_numpy(), b[cols].to_numpy(), rtol=1e-9, atol=1e-15)


def test_cli_run_into_a_used_folder_is_refused_on_every_rank(tmp_path):
    mpirun("cli_refused", 2, tmp_path, out=str(tmp_path / "used"))  # (a hang fails it: mpirun's bound)


def test_checkpoint_under_mpi_resumes_like_single_process(tmp_path):
    from rowstoch_fast import Algorithm, run

    got = mpirun("checkpoint", 2, tmp_path)["frame"]
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    ref = run(Algorithm(topology.exponential(8), lr=0.05, rounds=2), f, 40, record_every=5, repeats=2, progress=False)
    cols = ["iteration", "grad_norm", "loss", "consensus_error", "descent_deviation"]
    np.testing.assert_allclose(got, ref.frame[cols].to_numpy(float), rtol=1e-10, atol=1e-15)
    # the distributed checkpoint has the single-process format: this process can resume it too
    ck = str(tmp_path / "checkpoint-2.npz.ck.npz")
    single = run(Algorithm(topology.exponential(8), lr=0.05, rounds=2), f, 40, record_every=5, repeats=2,
                 progress=False, resume=ck)
    np.testing.assert_allclose(single.frame[cols].to_numpy(float), ref.frame[cols].to_numpy(float), rtol=1e-10, atol=1e-15)


def test_a_delayed_networks_checkpoint_under_mpi_resumes_like_single_process(tmp_path):
    """The messages in flight of a delayed (compressed, lossy) network: saved from 2 ranks and resumed there, and
    resumed by one process, the records of the uninterrupted single-process run."""
    from rowstoch_fast import Algorithm, run

    import mpi_cases  # noqa: F401

    got = mpirun("checkpoint_delayed", 2, tmp_path)["frame"]
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    kw = dict(record_every=5, repeats=2, progress=False)
    ref = run(Algorithm(mpi_cases.delayed_network(), lr=0.05, method="push-pull"), f, 40, **kw)
    cols = ["iteration", "grad_norm", "loss", "consensus_error"]
    np.testing.assert_allclose(got, ref.frame[cols].to_numpy(float), rtol=1e-10, atol=1e-15)
    ck = str(tmp_path / "checkpoint_delayed-2.npz.ck.npz")
    single = run(Algorithm(mpi_cases.delayed_network(), lr=0.05, method="push-pull"), f, 40, resume=ck, **kw)
    np.testing.assert_allclose(single.frame[cols].to_numpy(float), ref.frame[cols].to_numpy(float), rtol=1e-10,
                               atol=1e-15)


def test_the_robust_methods_delayed_histories_under_mpi_resume_like_single_process(tmp_path):
    """Robust gradient-push and R-FAST over compressed, noisy, delayed, sleepy, lossy links on 2 ranks (each
    keeping its halo's messages): their iterates, and a resume from the state saved on the ranks (every node's
    messages in it), equal one process's; that state resumes in one process too."""
    from rowstoch_fast import mixing
    from rowstoch_fast.algorithms import REGISTRY

    import mpi_cases

    got = mpirun("checkpoint_delayed_links", 2, tmp_path)
    net = mpi_cases.links_delayed_network()
    b = np.random.default_rng(0).standard_normal((12, 3))
    for name in ("robust-gradient-push", "r-fast"):
        cls = REGISTRY[name]
        mats = {k: (net.map(mixing.out_degree_weights) if k == "C" else net) for k in cls.matrices}
        opt = cls.build(net, np.zeros(3), 0.02)
        for _ in range(16):
            opt.step(feed(cls, lambda X: X - b))
        np.testing.assert_allclose(got[name], opt.x, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(got[name + "/resumed"], opt.x, rtol=1e-12, atol=1e-13)
        state = dict(np.load(str(tmp_path / f"checkpoint_delayed_links-2.npz.{name}.state.npz")))
        single = cls.from_state_dict(state, **mats)
        for _ in range(9):
            single.step(feed(cls, lambda X: X - b))
        np.testing.assert_allclose(single.x, opt.x, rtol=1e-12, atol=1e-13)


COMPARE = ["compare", "--topology", "exponential", "--n", "8", "--total", "1600", "--batch", "20",
           "--algorithms", "pull-diag-gt,push-pull,sgp", "--rounds-budget", "40", "--repeats", "2",
           "--lr", "pull-diag-gt=0.01,push-pull=0.05", "--tune", "--no-progress"]


@pytest.mark.parametrize("ranks", [2])
def test_compare_under_mpi_equals_single_process(ranks, tmp_path, monkeypatch):
    """rowstoch compare --backend mpi (tuning included) writes what the single-process run writes."""
    import json

    import pandas as pd

    monkeypatch.setenv("ROWSTOCH_FORMAT", "png")  # (the figures too: a resume's ranks had raced on them)

    from rowstoch_fast import cli

    monkeypatch.setenv("ROWSTOCH_TEST_ARGS", json.dumps(COMPARE))
    mpirun("compare", ranks, tmp_path, out=str(tmp_path / "mpi"))
    assert cli.main(COMPARE + ["--out", str(tmp_path / "one")]) == 0
    a, b = (pd.read_csv(tmp_path / d / "compare.csv") for d in ("mpi", "one"))
    assert len(a) == len(b) and (a["algorithm"] == b["algorithm"]).all()
    assert (a["grad_norm_mean"] - b["grad_norm_mean"]).abs().max() < 1e-12
    rates = [json.loads((tmp_path / d / "lr.json").read_text()) for d in ("mpi", "one")]
    for r in rates:  # (every rate, score and trajectory equal; the tuning's wall time is its own)
        for record in r["exponential"]["tuning"].values():
            record.pop("seconds", None)
    assert rates[0] == rates[1]
    # --resume under mpiexec (the backend is the folder's): every rank had taken itself for rank 0, both wrote,
    # and one was refused by the other's lock or found the other's figure renamed under it
    monkeypatch.setenv("ROWSTOCH_TEST_ARGS", json.dumps(["--repeats", "3", "--no-progress"]))
    output = mpirun("resume", ranks, tmp_path, out=str(tmp_path / "mpi"))
    assert output.count("wrote ") == 1, output
    assert cli.main(["compare", "--resume", str(tmp_path / "one"), "--repeats", "3", "--no-progress"]) == 0
    a, b = (pd.read_csv(tmp_path / d / "compare.csv") for d in ("mpi", "one"))
    assert sorted(a["rep"].unique()) == [0, 1, 2] and len(a) == len(b)
    assert (a["grad_norm_mean"] - b["grad_norm_mean"]).abs().max() < 1e-12
    assert (tmp_path / "mpi" / "compare.png").is_file() and not list((tmp_path / "mpi").glob("*.part"))


#: The networks the run at 3 ranks checks (4 ranks on a 2-core machine took 41 s over all of them, 5x the run
#: at 2; the registry's every example, which the run at 2 ranks checks, would be 184 more runs, 3.6x the 51 of
#: the compositions here): the compositions, where the partition decides most (halos of delayed, compressed,
#: noisy messages), and the registry's composition of every layer over fixed links (mpi_cases.layer_networks:
#: the per-link methods too)
MORE_RANK_NETWORKS = ("sleepy-lossy,topk-delayed-lossy,qsgd-delayed-noisy,undirected-topk-delayed,delayed-schedule,"
                      "layer:composed-links")


@pytest.mark.parametrize("ranks", [2, MORE_RANKS])
def test_unreliable_networks_equal_single_process(ranks, tmp_path, monkeypatch):
    """Losses, schedules and sleep under MPI: the same messages lost (hashed on global node ids), the same
    iterates as one process, for every algorithm and two partitions; every registered layer's every example and
    their compositions at 2 ranks (mpi_cases.layer_networks, read from the registry), the compositions at 3."""
    import mpi_cases  # noqa: F401 - imports mpi4py: only the helper's definitions are needed
    from rowstoch_fast.algorithms import REGISTRY

    assert {f"layer:{label}" for cls in network_layers() for label in cls.examples(topology.exponential(20))} | \
        {"layer:composed", "layer:composed-links"} <= set(mpi_cases.all_unreliable_networks())

    # (at 3 ranks, the compositions and one algorithm of each kind: every algorithm took 24 s of CI at 4)
    fewer = _fewer_at(ranks, monkeypatch, ROWSTOCH_MPI_NETWORKS=MORE_RANK_NETWORKS,
                      ROWSTOCH_MPI_ALGORITHMS=",".join(mpi_cases.kinds_of_algorithm(REGISTRY)))
    got = mpirun("networks", ranks, tmp_path, env=fewer)
    algorithms = mpi_cases.chosen(REGISTRY, "ROWSTOCH_MPI_ALGORITHMS")
    f = Quadratic.random(20, 3, seed=2)
    checked = 0
    for nname, net in mpi_cases.unreliable_networks().items():
        for name, cls in sorted(algorithms.items()):
            if not mpi_cases.runs_on(nname, net, cls):  # (an undirected network's method: a static W only)
                continue
            ref = cls.build(net, f.x0(), 0.01, rounds=2 if cls.multi_round else 1)
            fed = feed(cls, f.full_gradient)
            for _ in range(20):
                ref.step(fed)
            for pname in ("contiguous", "single"):
                assert rel(got[f"{nname}/{name}/{pname}"], ref.x) < 1e-12, (nname, name, pname)
                for k, v in ref._save_extra().items():  # per-link state (running sums) gathered in entry order
                    np.testing.assert_allclose(got[f"{nname}/{name}/{pname}/{k}"], v, rtol=1e-12, atol=1e-14)
                checked += 1
    assert checked == 2 * sum(mpi_cases.runs_on(nname, net, cls) for nname, net in mpi_cases.unreliable_networks().items()
                              for cls in algorithms.values())
    compressed = mpi_cases.all_unreliable_networks()["compressed"]
    assert {"choco-sgd", "compressed-push-pull"} <= {name for name, cls in REGISTRY.items()
                                                     if mpi_cases.runs_on("compressed", compressed, cls)}


def outcomes_per_rank(case, tmp_path):
    """Each rank's ``{name: outcome}`` of a case that runs several calls and gathers how each ended."""
    got = mpirun(case, 2, tmp_path)
    names = [str(n) for n in got["names"]]
    return [dict(zip(names, map(str, rank_outcomes))) for rank_outcomes in got["outcomes"]]


def test_settings_that_differ_between_ranks_are_refused_on_every_rank(tmp_path):
    """A different lr or seed on one rank ran silently wrong (0.0358 where one process gives 0.1207 or 0.0103); a
    different graph hung. The run's settings are compared before anything is built: a refusal on every rank,
    naming what differs."""
    for outcome in outcomes_per_rank("settings_differ", tmp_path):
        assert outcome["same"] == "no error"
        assert "ValueError: the run's settings differ between the MPI ranks: lr is 0.01 on rank 0 and 0.02 on " \
               "rank 1" in outcome["lr"]
        assert "seed is 0 on rank 0 and 1 on rank 1" in outcome["seed"]
        assert "differ between the MPI ranks: network is" in outcome["graph"]


def test_an_optimizer_built_differently_on_the_ranks_is_refused_on_every_rank(tmp_path):
    for outcome in outcomes_per_rank("constructors_differ", tmp_path):
        assert outcome["same"] == "no error"
        for name, key in [("matrix", "matrices"), ("n", "matrices"), ("x0", "x0"), ("partition", "partition"),
                          ("lr", "lr"), ("rounds", "rounds")]:
            assert outcome[name].startswith(f"ValueError: PullDiagGT's settings differ between the MPI ranks: {key} "
                                            "is "), (name, outcome[name])
        assert outcome["lr"].endswith("lr is 0.05 on rank 0 and 0.1 on rank 1; every rank must run the same")


def test_ask_tell_and_cancel_called_apart_are_refused_on_every_rank(tmp_path):
    """A rank that cancels and asks again while the others tell ran its step's exchanges once more than they did
    (a hang, documented), and one that tells without a pending ask was refused alone while the others waited in
    tell's agreement (a hang): ask and tell now agree on what each rank calls, a refusal on every rank. A rank that
    steps while another asks had hung too (its step's exchanges met the other's agreement): step agrees as well."""
    for outcome in outcomes_per_rank("asktell_apart", tmp_path):
        assert outcome["same"] == "no error"
        assert outcome["reasked"].startswith("RuntimeError: step(), ask() and tell() must be called on every MPI "
                                             "rank alike: rank 0 called tell() at iteration "), outcome["reasked"]
        assert "and rank 1 ask()" in outcome["reasked"], outcome["reasked"]
        assert "tell() at iteration" in outcome["cancelled"] and "without a pending ask()" in outcome["cancelled"], \
            outcome["cancelled"]
        for name in ("set_apart", "set_apart_gt"):
            assert re.fullmatch(r"RuntimeError: step\(\), ask\(\) and tell\(\) must be called on every MPI rank alike: "
                                r"rank 0 called ask\(\) at iteration \d+ and rank 1 another collective call",
                                outcome[name]), outcome
        assert outcome["stepped_apart"] == ("RuntimeError: RuntimeError: step(), ask() and tell() must be called on "
                                            "every MPI rank alike: rank 0 called step() at iteration 1 and rank 1 "
                                            "ask() at iteration 1"), outcome["stepped_apart"]


def test_settings_assigned_on_one_rank_after_construction_are_refused_on_every_rank(tmp_path):
    for outcome in outcomes_per_rank("assigned_apart", tmp_path):
        assert outcome["both_ranks"] == "no error"
        assert outcome["lr"] == ("ValueError: PullDiagGT's settings at iteration 16 differ between the MPI ranks: lr is "
                                 "0.05 on rank 0 and 0.01 on rank 1; every rank must run the same"), outcome["lr"]
        assert outcome["growth_limit"].startswith("ValueError: PullDiagGT's settings at iteration 16 differ between "
                                                  "the MPI ranks: growth_limit is 1000000.0 on rank 0 and None on "
                                                  "rank 1"), outcome["growth_limit"]
        assert outcome["check_finite"].startswith("ValueError: check_finite cannot change after construction under "
                                                  "MPI"), outcome["check_finite"]
        assert outcome["check_finite_kept"] == "no error"


def test_what_one_rank_alone_is_given_wrong_is_refused_on_every_rank(tmp_path):
    """Helper 203: another method, a bad check_finite or form, a bad run() or compare() argument, a checkpoint
    setting, a checkpoint file or a matrix for a state on one rank alone: refused there while the others waited in
    the next collective (a hang), or run apart. Each is a refusal on every rank now, the others' a RemoteError naming
    the rank, or the settings' agreement naming what differs."""
    ranks = outcomes_per_rank("one_rank_refused", tmp_path)
    for outcome in ranks:
        assert outcome["same"] == "no error"
        assert "settings differ between the MPI ranks: method is 'DGD' on rank 0 and 'EXTRA' on rank 1" \
            in outcome["method"]
        assert "settings differ between the MPI ranks: check_finite is True on rank 0 and False on rank 1" \
            in outcome["check_finite_differs"]
        assert "settings differ between the MPI ranks: form is 'atc' on rank 0 and 'frost' on rank 1" in outcome["form"]
        assert "the run's checkpoint settings differ between the MPI ranks: checkpoint_every is 5 on rank 0 and 10" \
            in outcome["checkpoint_every"]
        assert outcome["prox"].endswith("an anonymous function is named by its identity in each process: name it "
                                        "(Prox(value, prox, name=...))"), outcome["prox"]
        assert outcome["partition"] == "no error"  # (int32 and int64 arrays of the same owners)
    zero, one = ranks
    for name, kind, fragment in [("check_finite", "TypeError", "check_finite must be True or False"),
                                 ("form_invalid", "ValueError", "form must be 'atc' or 'frost', got 'bogus'"),
                                 ("iterations", "ValueError", "iterations must be >= 0, got -1"),
                                 ("metrics", "ValueError", "got 'nosuch'"),
                                 ("resume", "FileNotFoundError", "missing.npz' does not exist"),
                                 ("compare", "ValueError", "nosuch"), ("state", "ValueError", ""),
                                 ("gather", "ValueError", "array has shape (4, 2), expected (4, 3)")]:
        assert one[name].startswith(kind + ": ") and fragment in one[name], (name, one[name])
        assert zero[name].startswith(f"RemoteError: rank 1 failed: {kind}: "), (name, zero[name])


def test_a_resume_of_different_states_on_the_ranks_is_refused_on_every_rank(tmp_path):
    for outcome in outcomes_per_rank("states_differ", tmp_path):
        assert outcome["shared"] == "no error"
        assert outcome["none"].startswith("ValueError: state is None on rank(s) [1]: state_dict() returns the state "
                                          "on the root only")
        assert outcome["apart"] == outcome["local"] == ("ValueError: the ranks passed different states (ranks [0] "
                                                        "/ [1]): every rank must resume the same state_dict()")


def test_a_users_metric_that_raises_under_mpi_raises_on_every_rank(tmp_path):
    """Rank 0 alone measures the user's metrics: where one raised, rank 0 reported it and the others waited in the
    next collective for ever."""
    first, other = (str(o) for o in mpirun("metric_raises", 2, tmp_path)["outcomes"])
    assert "deliberate at iteration 10" in first
    assert other.startswith("RemoteError: rank 0 failed") and "deliberate at iteration 10" in other


def test_a_signal_to_mpiexec_stops_every_rank_together(tmp_path):
    """SIGTERM to mpiexec reaches each rank at its own moment: each broke off at another point and waited in
    another collective (rank 0 in a gather, rank 1 in a broadcast), in about half the tries, losing what was
    computed since the last checkpoint. The ranks now agree every few iterations and stop at the same one: exit
    143, the history written, and the checkpoint resumes to the records of a run never interrupted."""
    import pandas as pd

    from rowstoch_fast import cli

    common = ["run", "--n", "8", "--objective", "logistic", "--total", "1600", "--batch", "20", "--record-every",
              "100", "--no-progress"]
    for attempt in range(3):
        out, ck = tmp_path / f"o{attempt}", tmp_path / f"ck{attempt}.npz"
        cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, "-m", "rowstoch_fast.cli", *common, "--iterations",
               "400000", "--backend", "mpi", "--out", str(out), "--checkpoint", str(ck)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, OMP_NUM_THREADS="1", MPIR_CVAR_CH4_NUM_VCIS="1"),
                                start_new_session=True)
        try:
            deadline = time.time() + hang_limit(60)
            while time.time() < deadline and not ck.exists() and proc.poll() is None:
                time.sleep(0.05)
            time.sleep(0.3 * attempt)  # (at other moments of the run)
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=hang_limit(60))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"a SIGTERM to mpiexec hung its ranks (attempt {attempt})")
        assert _sigterm_exit(proc.returncode) and "Traceback" not in output, output
        assert (out / "history.csv").is_file(), output
    stopped = pd.read_csv(out / "history.csv")["iteration"].max()
    resumed = subprocess.run([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, "-m", "rowstoch_fast.cli", *common,
                              "--iterations", str(stopped + 200), "--backend", "mpi", "--out", str(tmp_path / "resumed"),
                              "--resume", str(ck), "--checkpoint", str(ck)], capture_output=True, text=True,
                             timeout=hang_limit(TIMEOUT), env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert cli.main([*common, "--iterations", str(stopped + 200), "--out", str(tmp_path / "whole")]) == 0
    cols = ["iteration", "grad_norm", "loss", "consensus_error"]
    np.testing.assert_allclose(pd.read_csv(tmp_path / "resumed" / "history.csv")[cols],
                               pd.read_csv(tmp_path / "whole" / "history.csv")[cols], rtol=1e-9, atol=1e-15)


KILLER = '''
import os, signal
import rowstoch_fast as rf

AT = int(os.environ["KILL_AT"])


def kill_me(state):  # (the rank's own SIGTERM, sent at one iteration: on rank 0 alone, where the metrics run)
    if state.iteration == AT:
        os.kill(os.getpid(), signal.SIGTERM)
    return 0.0


rf.register_metric("kill_me", kill_me)
'''


@pytest.mark.parametrize("at", [0, 18])
def test_a_signal_in_the_set_up_or_after_the_last_agreement_is_not_lost(tmp_path, at):
    """The ranks agreed on a held signal every 16 iterations only: one that reached a rank in the set-up hung the
    others (it was not held yet), and one after the last agreement of a run (iteration 18 of 20) was dropped (exit
    0, and a scheduler's SIGTERM is followed by its SIGKILL). Now held from the start, agreed on after the set-up
    and at the last iteration: exit 143, the history written, on every rank."""
    (tmp_path / "killer.py").write_text(KILLER)
    out = tmp_path / "out"
    cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, "-m", "rowstoch_fast.cli", "run", "--n", "8",
           "--objective", "quadratic", "--d", "3", "--iterations", "20", "--record-every", "1", "--no-progress",
           "--backend", "mpi", "--metrics-module", str(tmp_path / "killer.py"), "--out", str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=hang_limit(60),
                              env=dict(os.environ, KILL_AT=str(at), OMP_NUM_THREADS="1"), start_new_session=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a SIGTERM to one rank at iteration {at} hung the other")
    assert _sigterm_exit(proc.returncode), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    import pandas as pd

    assert pd.read_csv(out / "history.csv")["iteration"].max() == (0 if at == 0 else 20)


SCRIPT = '''
import os, signal, sys
import rowstoch_fast as rf
from rowstoch_fast import Algorithm, run, topology
from rowstoch_fast.objectives import Quadratic


def kill_me(state):
    if state.iteration == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGTERM)
    return 0.0


f = Quadratic.random(8, 3, seed=0)
try:  # (at lr 200 the run diverges at iteration 92, after the signal at 85 and before the agreement at 96)
    h = run(Algorithm(topology.exponential(8), float(sys.argv[2]), backend="mpi"), f, 1000, record_every=1,
            progress=False, checkpoint=sys.argv[1], metrics=["grad_norm", rf.user_metrics.Metric("kill_me", kill_me)])
except rf.DivergenceError:
    pass
print("the script went on", flush=True)
'''


@pytest.mark.parametrize("lr, at", [(0.01, 3), (200.0, 85)])
def test_a_scripts_default_sigterm_still_ends_it_under_mpi(tmp_path, lr, at):
    """A script that leaves SIGTERM to its default ended on it with one process, but under MPI the held signal
    became a KeyboardInterrupt: run() returned an interrupted history and the script went on. Now the signal is
    raised again once the run saved its checkpoint, on every rank; and where the run diverges before the next
    agreement, it is not dropped (the script went on from the DivergenceError)."""
    (tmp_path / "script.py").write_text(SCRIPT)
    ck = tmp_path / "ck.npz"
    cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, str(tmp_path / "script.py"), str(ck), str(lr), str(at)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=hang_limit(60), start_new_session=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        pytest.fail("the script's SIGTERM under MPI hung it")
    assert proc.returncode != 0 and "the script went on" not in proc.stdout, proc.stdout + proc.stderr
    assert ck.is_file() or at == 85


STOPPED = '''
import os, signal
import rowstoch_fast as rf
from mpi4py import MPI
from rowstoch_fast import Algorithm, run, topology
from rowstoch_fast.objectives import Quadratic


def kill_me(state):  # (rank 0's own Ctrl-C at the record of iteration 1: every rank stops at the agreement, 16)
    if state.iteration == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return 0.0


h = run(Algorithm(topology.exponential(8), 0.01, backend="mpi"), Quadratic.random(8, 3, seed=0), 1000,
        record_at=[0, 1, 500], progress=False, metrics=["grad_norm", rf.user_metrics.Metric("kill_me", kill_me)])
print(f"rank {MPI.COMM_WORLD.Get_rank()}: interrupted={h.interrupted} at={list(h.frame['iteration'])}", flush=True)
'''


def test_the_record_where_an_interrupted_run_stopped_is_every_ranks(tmp_path):
    """The record of the iteration an interrupted run stopped at had been taken after the ranks shared their
    records: rank 0's history had one row more than rank 1's, and their final values differed (helper 239)."""
    (tmp_path / "script.py").write_text(STOPPED)
    cmd = [MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, str(tmp_path / "script.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=hang_limit(60), start_new_session=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"rank {rank}: interrupted=True at=[0, 1, 16]" in proc.stdout, proc.stdout + proc.stderr


TUNING = '''
import os, signal, sys
import rowstoch_fast as rf
from rowstoch_fast import compare as cmp, topology
from rowstoch_fast.objectives import Quadratic

fired = []
if sys.argv[2] == "as-ctrl-c":  # (a script that takes SIGTERM as Ctrl-C: compare() returns what finished)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def kill_me(state):  # (rank 0's own SIGTERM, once, in the tuner's first run: the ranked metric runs on the root)
    if state.iteration >= 100 and not fired:
        fired.append(1)
        os.kill(os.getpid(), signal.SIGTERM)
    return 1.0 / (1.0 + state.iteration)


frame = cmp.compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), "dsgd", 2000, repeats=1, backend="mpi",
                    progress=False, metric=rf.user_metrics.Metric("kill_me", kill_me, ranked=True),
                    checkpoint_dir=sys.argv[1])
print(f"interrupted={frame.attrs['interrupted']}", flush=True)
'''


@pytest.mark.parametrize("handler", ["as-ctrl-c", "default"])
def test_a_signal_while_tuning_stops_every_rank_together(tmp_path, handler):
    """The tuner's runs held no signal under MPI: a SIGTERM reaching rank 0 in the middle of the grid's run broke
    it off there while rank 1 spun in the next collective, a hang past any timeout of the launcher (its ranks left
    behind). They agree as the evaluation's runs do: every rank stops at one iteration, the stage's checkpoint is
    saved, and the comparison returns interrupted where the script takes SIGTERM as Ctrl-C; where it left SIGTERM
    to its default, every rank then ends by it (as with one process)."""
    (tmp_path / "tuning.py").write_text(TUNING)
    ck = tmp_path / "ck"
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable,
                                           str(tmp_path / "tuning.py"), str(ck), handler],
                                          "a SIGTERM to one rank while tuning")
    if handler == "default":
        assert code != 0 and "interrupted=" not in output, output
    else:
        assert code == 0 and output.count("interrupted=True") == 2, output
    assert (ck / "dsgd.tuning-0.npz").is_file(), output


BETWEEN = '''
import os, signal
from mpi4py import MPI
from rowstoch_fast import compare as cmp, topology
from rowstoch_fast.objectives import Quadratic

fired = []
signal.signal(signal.SIGTERM, signal.default_int_handler)  # (SIGTERM as Ctrl-C: compare() returns what finished)


def written(frame):  # (the root's own SIGTERM while it takes the first method's results: between two runs)
    if MPI.COMM_WORLD.rank == 0 and not fired:
        fired.append(1)
        os.kill(os.getpid(), signal.SIGTERM)


frame = cmp.compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), "dsgd,sgp,push-pull", 3000, lr=0.01,
                    repeats=1, backend="mpi", progress=False, on_result=written)
print(f"interrupted={frame.attrs['interrupted']} methods={','.join(sorted(set(frame['algorithm'])))}", flush=True)
'''


def test_a_signal_between_two_runs_stops_every_rank_together(tmp_path):
    """Between a comparison's runs no agreement held a signal: one that reached the root while it took a method's
    results (what the command line writes as tables) broke the comparison off there, while the other rank waited
    in the next run's first collective, a hang. It is held until the next run, which agrees on it after its
    set-up: every rank stops at the same point."""
    (tmp_path / "between.py").write_text(BETWEEN)
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable,
                                           str(tmp_path / "between.py")], "a SIGTERM to the root between two runs")
    assert code == 0 and output.count("interrupted=True methods=dsgd,sgp") == 2, output


WRITING = '''
import os, signal, sys, time
from mpi4py import MPI
from rowstoch_fast import cli, compare as cmp

pids = MPI.COMM_WORLD.allgather(os.getpid())
write = cmp.write_outputs


def signalled_write(*args, **kwargs):  # (a scheduler's SIGTERM to every rank while rank 0 writes the outputs, the
    time.sleep(1.0)                       # others done with the comparison by then)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    return write(*args, **kwargs)


cmp.write_outputs = signalled_write
sys.exit(cli.main(["compare", "--n", "8", "--objective", "quadratic", "--d", "3", "--algorithms", "dsgd,push-pull",
                   "--lr", "0.05", "--rounds-budget", "20", "--repeats", "2", "--no-progress", "--backend", "mpi",
                   "--format", "png", "--out", sys.argv[1]]))
'''


def test_a_signal_while_rank_0_writes_the_outputs_leaves_them_whole(tmp_path):
    """The ranks other than 0 left once the last method ran: a scheduler's SIGTERM then ended one with 143 (or in
    MPI_Finalize, with the signal), and mpiexec ended rank 0 as it wrote the figures: no compare.png, the folder's
    lock left behind (a helper's trial, 0.8 s after the last table). They now leave together, once rank 0 has
    written and let go of the folder, every rank with 143."""
    (tmp_path / "writing.py").write_text(WRITING)
    out = tmp_path / "out"
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable,
                                           str(tmp_path / "writing.py"), str(out)],
                                          "a SIGTERM while rank 0 wrote the outputs")
    assert _sigterm_exit(code) and "Traceback" not in output, output
    assert (out / "compare.png").is_file() and (out / "summary.tex").is_file(), output
    assert not (out / ".rowstoch-compare.lock").exists() and not list(out.glob("*.part")), output


def _launched_within_limit(cmd, what):
    """``(exit code, output)`` of an MPI launch; a failure naming ``what`` where it hangs (its ranks killed too)."""
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        output, _ = proc.communicate(timeout=hang_limit(60))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{what} hung")
    return proc.returncode, output


@pytest.mark.parametrize("command", ["compare", "run"])
def test_ranks_launched_with_different_arguments_are_refused_on_every_rank(tmp_path, command):
    """An MPMD launch whose ranks got other arguments (a budget, an option on one only) ran two problems whose
    collectives never matched: both ranks spun, past the launcher's SIGTERM and SIGINT (a helper's trial, 13
    minutes). The arguments are compared first: exit 2 on every rank, naming the first that differs. An option
    one rank's parser refuses: that rank left before MPI's initialization, where the other waited for it past
    every signal; the launch is aborted with the parser's exit code."""
    common = [sys.executable, "-m", "rowstoch_fast.cli", command, "--n", "8", "--objective", "quadratic", "--d", "3",
              "--no-progress", "--backend", "mpi", "--out", str(tmp_path / "out")]
    budget = ["--rounds-budget"] if command == "compare" else ["--iterations"]
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "1", *common, *budget, "20", ":", "-n", "1",
                                           *common, *budget, "600"], f"ranks given other budgets ({command})")
    said = (f"the MPI ranks were given different arguments: rank 1 has '{budget[0]} 600' where rank 0 has "
            f"'{budget[0]} 20'")
    assert (code == 2 if not MPIEXEC_FLAGS else code != 0) and output.count(said) == 2, output  # (Open MPI's
    # mpirun may report the ranks' status otherwise, as _sigterm_exit says)
    assert not (tmp_path / "out").exists()
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "1", *common, ":", "-n", "1", *common,
                                           "--bogus-option"], f"an option refused on one rank ({command})")
    assert code != 0 and "unrecognized arguments: --bogus-option" in output, output
    if command == "compare":  # (an experiment file read on every rank before MPI starts: one rank's refusal)
        (tmp_path / "exp.toml").write_text('[network]\nn = 8\n[objective]\nkind = "quadratic"\nd = 3\n'
                                           '[run]\nrounds_budget = 20\n[algorithms.dsgd]\nlr = 0.05\n')
        files = [[*common, "--config", str(tmp_path / name)] for name in ("exp.toml", "missing.toml")]
        code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "1", *files[0], ":", "-n", "1",
                                               *files[1]], "an experiment file missing on one rank")
        assert code != 0 and "missing.toml' does not exist" in output, output
    else:  # the same command written otherwise on each rank (--out=o, another order) is the same command: it runs
        # (the words had been compared: refused, naming '--out=...')
        written = [sys.executable, "-m", "rowstoch_fast.cli", command, "--objective", "quadratic", "--n", "8", "--d",
                   "3", "--backend", "mpi", f"--out={tmp_path / 'same'}", "--no-progress", *budget, "20"]
        code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "1", *common[:-2], "--out",
                                               str(tmp_path / "same"), *budget, "20", ":", "-n", "1", *written],
                                              "the same command written otherwise on each rank")
        assert code == 0 and "different arguments" not in output, output
        assert (tmp_path / "same" / "history.json").exists()
    # an option written at its default value on one rank only: the same values, but the command reads which options
    # were written (a file's settings they override, --tracker's check): refused (the parse alone hung)
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "1", *common, *budget, "20", "--data-seed",
                                           "42", ":", "-n", "1", *common, *budget, "20"],
                                          f"an option at its default on one rank ({command})")
    said = "rank 1 has 'nothing more written' where rank 0 has '--data-seed written'"
    assert (code == 2 if not MPIEXEC_FLAGS else code != 0) and output.count(said) == 2, output


LASTFAIL = '''
import sys
from mpi4py import MPI
from rowstoch_fast import cli, compare as cmp

real = cmp.compare


def compare(*a, **k):  # (rank 0's error alone, past the comparison's last collective: its last table unwritable)
    frame = real(*a, **k)
    if MPI.COMM_WORLD.Get_rank() == 0:
        raise OSError(28, "No space left on device")
    return frame


cmp.compare = compare
sys.exit(cli.main(["compare", "--n", "8", "--objective", "quadratic", "--d", "3", "--algorithms", "dsgd", "--lr",
                   "0.05", "--rounds-budget", "20", "--repeats", "1", "--no-progress", "--backend", "mpi",
                   "--out", sys.argv[1]]))
'''


def test_an_error_of_rank_0_alone_after_the_last_run_ends_every_rank(tmp_path):
    """A review's trial: the ranks past the last collective waited for rank 0's outputs, signals held, and rank 0
    failed instead (a full disk): they waited for ever. Rank 0 waits with them before its error ends it."""
    (tmp_path / "lastfail.py").write_text(LASTFAIL)
    code, output = _launched_within_limit([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable,
                                           str(tmp_path / "lastfail.py"), str(tmp_path / "out")],
                                          "an error of rank 0's alone after the last run")
    assert code != 0 and "No space left on device" in output, output


def test_a_nan_in_the_settings_is_the_same_on_every_rank(tmp_path):
    """The ranks' settings were compared with ==, and NaN never equals itself: a run whose config held a NaN was
    refused on every rank ("tol is nan on rank 0 and nan on rank 1")."""
    (tmp_path / "nan.py").write_text(
        "from rowstoch_fast import Algorithm, run, topology\n"
        "from rowstoch_fast.objectives import Quadratic\n"
        "h = run(Algorithm(topology.exponential(8), 0.01, backend='mpi'), Quadratic.random(8, 3, seed=0), 5,\n"
        "        progress=False, config={'tol': float('nan')})\n"
        "print(f\"ran {h.frame['iteration'].max()}\", flush=True)\n")  # (one piece: the ranks' prints interleave)
    proc = subprocess.run([MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, str(tmp_path / "nan.py")],
                          capture_output=True, text=True, timeout=hang_limit(60),
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0 and proc.stdout.count("ran 5") == 2, proc.stdout + proc.stderr


def test_a_checkpoint_dir_in_use_is_refused_on_every_rank(tmp_path):
    """compare(checkpoint_dir=) under MPI: rank 0 takes the folder's lock, and a folder another comparison holds
    is refused on every rank (two scripts under mpiexec sharing it wrote each other's checkpoints)."""
    from rowstoch_fast.compare import outputs

    (tmp_path / "ck.py").write_text(
        "import sys\n"
        "from rowstoch_fast import compare as cmp, topology\n"
        "from rowstoch_fast.objectives import Quadratic\n"
        "try:\n"
        "    f = cmp.compare(topology.exponential(8), Quadratic.random(8, 3, seed=0), 'dsgd', 20, lr=0.05,\n"
        "                    repeats=1, backend='mpi', progress=False, checkpoint_dir=sys.argv[1])\n"
        "    print('ran', len(f), flush=True)\n"
        "except Exception as exc:\n"
        "    print('refused', type(exc).__name__, exc, flush=True)\n")
    folder = tmp_path / "ck"
    command = [MPIEXEC, *MPIEXEC_FLAGS, "-n", "2", sys.executable, str(tmp_path / "ck.py"), str(folder)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with outputs.FolderLock(folder, option="checkpoint_dir"):  # (another comparison holds it)
        proc = subprocess.run(command, capture_output=True, text=True, timeout=hang_limit(60), env=env)
    assert proc.returncode == 0 and proc.stdout.count("refused") == 2, proc.stdout + proc.stderr
    assert "is being written by another comparison" in proc.stdout
    proc = subprocess.run(command, capture_output=True, text=True, timeout=hang_limit(60), env=env)
    assert proc.returncode == 0 and proc.stdout.count("ran") == 2, proc.stdout + proc.stderr
    assert not (folder / outputs.LOCK).exists()
