"""Cases run under ``mpiexec -n P python -m mpi4py tests/mpi_cases.py CASE OUT`` by tests/test_mpi.py.

Rank 0 writes what it gathered to OUT (.npz); tests/test_mpi.py compares it
with the single-process run.
"""

import sys

import numpy as np
from mpi4py import MPI

from rowstoch_fast import PullDiagGT, topology
from rowstoch_fast.errors import RemoteError
from rowstoch_fast.network import layers as network_layers
from rowstoch_fast.objectives import NonconvexLogistic, Quadratic

from conftest import feed, for_algorithm, options_for

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def chosen(every, variable):
    """``every`` (a dict), or the entries the environment variable ``variable`` names (comma-separated): the runs
    at more ranks than cores check the partitions on fewer problems (the two-rank runs check every one)."""
    import os

    names = os.environ.get(variable)
    return every if not names else {name: every[name] for name in names.split(",")}


def kinds_of_algorithm(registry):
    """One algorithm of each kind the MPI backend runs differently (its matrices, per-link state, push-sum weights,
    per-sample or proximal oracle, regularizer, rounds, local steps, federated, silent first iterations), the first by name: the problems of
    the runs at more ranks than cores (the two-rank run checks every algorithm). Read off the classes, so a new
    kind of class joins by itself."""
    kinds = {}
    for name, cls in sorted(registry.items()):
        key = (tuple(cls.matrices), cls.per_link_state, cls.push_sum_weights is not None, cls.gradients,
               cls.composite, cls.multi_round, getattr(cls, "federated", False),
               "local_steps" in getattr(cls, "hyper", ()), bool(cls.silent_iterations))
        kinds.setdefault(key, name)
    return sorted(kinds.values())


def graphs():
    return chosen({"exponential": topology.exponential(12), "ring": topology.paper_graphs()["ring"],
                   "random": topology.erdos_renyi(20, 0.15, seed=4)}, "ROWSTOCH_MPI_GRAPHS")


def algorithm_graphs():
    return chosen({"exponential": topology.exponential(12), "random": topology.erdos_renyi(20, 0.15, seed=4)},
                  "ROWSTOCH_MPI_GRAPHS")


def partitions(n):
    yield "contiguous", None
    owner = np.empty(n, dtype=np.int64)  # rank 0 owns a single node; the rest deal out round-robin
    owner[0] = 0
    owner[1:] = 1 + np.arange(n - 1) % (size - 1) if size > 1 else 0
    yield "single", owner


def case_gt(out):
    results = {}
    for gname, A in graphs().items():
        f = Quadratic.random(A.n, 3, seed=1)
        for pname, owner in partitions(A.n):
            for R in (1, 3):
                for tracker in ("exact", "perron"):
                    opt = PullDiagGT(A, f.x0(), lr=0.01, rounds=R, tracker=tracker, backend="mpi", partition=owner)
                    grad = lambda X, nodes=opt.local_nodes: f.full_gradient(X, nodes)  # noqa: E731
                    for _ in range(25):
                        opt.step(grad)
                    x, y = opt.gather_x(), opt.gather_y()
                    c = opt.centroid()
                    if rank == 0:
                        key = f"{gname}/{pname}/R{R}/{tracker}"
                        results[key + "/x"], results[key + "/y"], results[key + "/c"] = x, y, c
    if rank == 0:
        np.savez(out, **results)


def case_algorithms(out):
    """Every registered algorithm, two graphs, two partitions, replicas: gathered models after 30 steps."""
    from rowstoch_fast.algorithms import REGISTRY

    results = {}
    for gname, A in algorithm_graphs().items():
        f = Quadratic.random(A.n, 3, seed=1)
        x0 = np.broadcast_to(f.x0(), (2, A.n, 3)) + np.arange(2.0)[:, None, None]
        for name, cls in sorted(chosen(REGISTRY, "ROWSTOCH_MPI_ALGORITHMS").items()):
            for pname, owner in partitions(A.n):
                opt = cls.build(for_algorithm(cls, A), x0, 0.01, rounds=2 if cls.multi_round else 1, backend="mpi",
                                partition=owner, **options_for(cls))
                grad = feed(cls, lambda X, nodes=opt.local_nodes: f.full_gradient(X, nodes), nodes=opt.local_nodes)
                if pname == "single" and cls.gradients == "batch":  # (the other partition: by ask/tell)
                    while opt.iteration < 30:
                        opt.tell(grad(opt.ask()))
                for _ in range(30 - opt.iteration):
                    opt.step(grad)
                x = opt.gather_x()
                state = opt.state_dict()
                traffic = opt.traffic()
                if rank == 0:
                    key = f"{gname}/{name}/{pname}"
                    results[key + "/x"] = x
                    results[key + "/state_x"] = state[cls.model]
                    results[key + "/traffic"] = np.array([traffic["messages"], traffic["bytes"]])
    if rank == 0:
        np.savez(out, **results)


def case_logistic(out):
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    A = topology.exponential(8)
    opt = PullDiagGT(A, np.broadcast_to(f.x0(), (2, 8, 10)), lr=0.05, rounds=2, backend="mpi")
    oracle = f.oracle(seed=3, batches=2, nodes=opt.local_nodes)
    for _ in range(20):
        opt.step(oracle)
    x = opt.gather_x()
    if rank == 0:
        np.savez(out, x=x)


def case_stats(out):
    A = topology.ring(16)
    opt = PullDiagGT(A, np.zeros(4), lr=0.01, rounds=3, tracker="perron", backend="mpi")
    m0, b0 = opt.messages, opt.bytes_sent
    for _ in range(5):
        opt.step(lambda X: X - 1.0)
    per_iter = np.array([(opt.messages - m0) / 5, (opt.bytes_sent - b0) / 5, len(opt._ops.halo(A).send_index),
                         len(opt._ops.halo(A).destinations)])
    allstats = comm.gather(per_iter, root=0)
    if rank == 0:
        np.savez(out, stats=np.array(allstats))


def case_bad_options(out):
    """A communicator that is not one, a float partition: named errors (an AttributeError and a message about
    the shape before)."""
    outcomes = []
    for kw in ({"comm": "world"}, {"partition": np.zeros(16)}):
        try:
            PullDiagGT(topology.ring(16), np.zeros(2), lr=0.1, backend="mpi", **kw)
            outcomes.append("no error")
        except (TypeError, ValueError, RemoteError) as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes))


def case_bad_input(out):
    x0 = np.zeros((16, 2))
    if rank == 1:
        x0[3, 1] = np.nan  # bad input on one rank only
    try:
        PullDiagGT(topology.ring(16), x0, lr=0.1, backend="mpi")
        outcome = "no error"
    except ValueError as exc:
        outcome = f"ValueError: {exc}"
    except RemoteError as exc:
        outcome = f"RemoteError: {exc}"
    outcomes = comm.gather(outcome, root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes))


def case_grad_error(out):
    opt = PullDiagGT(topology.ring(16), np.zeros(2), lr=0.1, backend="mpi")

    def grad(X):
        if rank == size - 1 and opt.iteration == 3:
            raise RuntimeError("simulated failure in grad_fn")
        return X - 1.0

    try:
        for _ in range(10):
            opt.step(grad)
        outcome = "no error"
    except RuntimeError as exc:
        outcome = f"{type(exc).__name__}: {exc} at iteration {opt.iteration}"
    outcomes = comm.gather(outcome, root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes))


def case_fortran_gradients(out):
    """A grad_fn returning Fortran-order arrays on 3 nodes over 2 ranks: the rank of one row borrows it (a column
    is contiguous), the other copies it; every method finished (it hung in a collective only one rank called)."""
    from rowstoch_fast import DSGD, SimpleGT

    outcomes = []
    for cls, A in ((DSGD, topology.ring(3)), (SimpleGT, topology.ring(3, directed=False, weights="metropolis"))):
        opt = cls(A, np.zeros((3, 3)), 0.1, backend="mpi")
        for _ in range(5):
            opt.step(lambda X: np.asfortranarray(X - 1.0))
        bad = cls(A, np.zeros((3, 3)), 0.1, backend="mpi")
        try:
            for _ in range(5):
                bad.step(lambda X: np.asfortranarray(np.where(X > -1, np.nan, X)))
            outcome = "no error"
        except Exception as exc:  # (the gradient's DivergenceError on every rank)
            outcome = f"{type(exc).__name__}: {exc}"
        total = opt.gather_x()  # (collective)
        outcomes.append(f"{cls.__name__} {float(np.asarray(total).sum()) if total is not None else 0.0:.6f} {outcome}")
    outcomes = comm.gather(outcomes, root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes))


def case_checkpoint(out):
    from rowstoch_fast import Algorithm, run

    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    algo = Algorithm(topology.exponential(8), lr=0.05, rounds=2, backend="mpi")
    ck = out + ".ck.npz"
    run(algo, f, 20, record_every=5, repeats=2, progress=False, checkpoint=ck)
    h = run(algo, f, 40, record_every=5, repeats=2, progress=False, resume=ck)
    if rank == 0:
        cols = ["iteration", "grad_norm", "loss", "consensus_error", "descent_deviation"]
        np.savez(out, frame=h.frame[cols].to_numpy(float))


def delayed_network():
    """A delayed, compressed, lossy network on 8 nodes (its messages in flight are in the checkpoints)."""
    from rowstoch_fast.network import Compressed, Delayed, Lossy

    return Compressed(Delayed(Lossy(topology.exponential(8), 0.2, seed=1), 2, seed=3), "qsgd", bits=4, seed=2)


def case_checkpoint_delayed(out):
    from rowstoch_fast import Algorithm, run

    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    algo = Algorithm(delayed_network(), lr=0.05, method="push-pull", backend="mpi")
    ck = out + ".ck.npz"
    run(algo, f, 20, record_every=5, repeats=2, progress=False, checkpoint=ck)
    h = run(algo, f, 40, record_every=5, repeats=2, progress=False, resume=ck)
    if rank == 0:
        cols = ["iteration", "grad_norm", "loss", "consensus_error"]
        np.savez(out, frame=h.frame[cols].to_numpy(float))


def links_delayed_network():
    """A compressed, noisy, delayed (uniform), sleepy, lossy network on 12 nodes: what the robust methods' running
    sums keep histories of (a rank its halo's messages)."""
    from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy, Sleepy

    A = topology.erdos_renyi(12, 0.35, seed=4)
    return Compressed(Noisy(Delayed(Sleepy(Lossy(A, 0.1, seed=1), 0.9, seed=2), 3, seed=6), 0.05, seed=6), "topk",
                      k=2)


def case_checkpoint_delayed_links(out):
    """Robust gradient-push and R-FAST over links_delayed_network: 7 steps, state_dict (the histories of the
    running sums: every node's messages, each rank giving its own), 9 more; resumed from the state on the ranks,
    9 steps: the models of both, gathered."""
    from rowstoch_fast import mixing
    from rowstoch_fast.algorithms import REGISTRY

    net = links_delayed_network()
    b = np.random.default_rng(0).standard_normal((12, 3))
    results = {}
    for name in ("robust-gradient-push", "r-fast"):
        cls = REGISTRY[name]
        mats = {k: (net.map(mixing.out_degree_weights) if k == "C" else net) for k in cls.matrices}
        opt = cls.build(net, np.zeros(3), 0.02, backend="mpi")
        nodes = opt.local_nodes
        grad = feed(cls, lambda X, nodes=nodes: X - b[nodes], nodes=nodes)
        for _ in range(7):
            opt.step(grad)
        state = comm.bcast(opt.state_dict(), root=0)
        for _ in range(9):
            opt.step(grad)
        resumed = cls.from_state_dict(state, backend="mpi", **mats)
        for _ in range(9):
            resumed.step(feed(cls, lambda X, nodes=resumed.local_nodes: X - b[nodes], nodes=resumed.local_nodes))
        x, y = opt.gather_x(), resumed.gather_x()
        if rank == 0:
            results[name] = x
            results[name + "/resumed"] = y
            np.savez(out + "." + name + ".state.npz", **state)
    if rank == 0:
        np.savez(out, **results)


def case_compare(out):
    """rowstoch compare with the arguments tests/test_mpi.py passes in ROWSTOCH_TEST_ARGS (JSON)."""
    import json
    import os

    from rowstoch_fast import cli

    assert cli.main(json.loads(os.environ["ROWSTOCH_TEST_ARGS"]) + ["--backend", "mpi", "--out", out]) == 0


def case_resume(out):
    """rowstoch compare --resume OUT under mpiexec (its backend read from its experiment.json), with the arguments
    tests/test_mpi.py passes in ROWSTOCH_TEST_ARGS (JSON)."""
    import json
    import os

    from rowstoch_fast import cli

    assert cli.main(["compare", "--resume", out] + json.loads(os.environ["ROWSTOCH_TEST_ARGS"])) == 0


def _outcome(fn):
    try:
        fn()
        return "no error"
    except Exception as exc:  # noqa: BLE001 - its kind and text are the case's outcome
        return f"{type(exc).__name__}: {exc}"


def case_settings_differ(out):
    """Each rank a different lr, seed or graph: a silently wrong answer, or a hang; each now a refusal on all."""
    from rowstoch_fast import Algorithm, run

    f = Quadratic.random(8, 3, seed=0)
    runs = {"lr": lambda: run(Algorithm(topology.exponential(8), 0.01 * (1 + rank), backend="mpi"), f, 10,
                              progress=False),
            "seed": lambda: run(Algorithm(topology.exponential(8), 0.01, backend="mpi"), f, 10, seed=rank,
                                progress=False),
            "graph": lambda: run(Algorithm(topology.erdos_renyi(8, 0.4, seed=rank), 0.01, backend="mpi"), f, 10,
                                 progress=False),
            "same": lambda: run(Algorithm(topology.exponential(8), 0.01, backend="mpi"), f, 10, progress=False)}
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_constructors_differ(out):
    """An optimizer built on each rank with another matrix, n, x0, partition, rate or hyperparameter: the halo plan
    hung, or the ranks ran a mixture of their problems silently; each now a refusal on every rank."""
    b = np.arange(32.0).reshape(16, 2)

    def built(A=None, x0=None, lr=0.05, **options):
        A = topology.exponential(8) if A is None else A
        opt = PullDiagGT(A, np.zeros((A.n, 2)) if x0 is None else x0, lr, backend="mpi", **options)
        for _ in range(3):
            opt.step(lambda X: X - b[opt.local_nodes])

    owners = np.arange(8) % 2 if rank else np.repeat([0, 1], 4)
    runs = {"matrix": lambda: built(topology.erdos_renyi(8, 0.4, seed=rank)),
            "n": lambda: built(topology.exponential(8 + rank)),
            "x0": lambda: built(x0=np.full((8, 2), float(rank))),
            "partition": lambda: built(partition=owners),
            "lr": lambda: built(lr=0.05 * (1 + rank)),
            "rounds": lambda: built(rounds=1 + rank),
            "same": lambda: built(partition=np.arange(8) % 2)}
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_assigned_apart(out):
    """Helper 203: an optimizer's lr or growth_limit assigned on one rank after construction (a rate computed from
    that rank's own loss): a mixture of rates run silently, or a hang in the growth check's reduction; each now a
    refusal on every rank at the next agreement (iteration 16, 32, ...). check_finite, which decides which
    reductions a step makes, cannot change after construction (assigned here on every rank: on one alone, the
    others would wait at iteration 16 for the one refused)."""
    b = np.arange(32.0).reshape(16, 2)

    def assigned(name, value, ranks=(1,)):
        opt = PullDiagGT(topology.exponential(8), np.zeros((8, 2)), 0.05, backend="mpi")
        for _ in range(5):
            opt.step(lambda X: X - b[opt.local_nodes])
        if name is not None and rank in ranks:
            setattr(opt, name, value)
        for _ in range(40):
            opt.step(lambda X: X - b[opt.local_nodes])
        return opt.iteration

    runs = {"lr": lambda: assigned("lr", 0.01), "growth_limit": lambda: assigned("growth_limit", None),
            "both_ranks": lambda: [assigned(None, None), comm.barrier()],
            "check_finite": lambda: assigned("check_finite", False, ranks=(0, 1)),
            "check_finite_kept": lambda: assigned("check_finite", True, ranks=(0, 1))}
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_asktell_apart(out):
    """ask / tell / cancel called on one rank and not the other: rank 1 cancels and asks again while rank 0 tells
    (a step's exchanges run once more on rank 1: a hang in the next collective), or tells without an ask while
    rank 0 tells (rank 1 refused alone while rank 0 waited in tell's agreement: a hang); each now a refusal on
    every rank naming what each called. Called alike on every rank (cancels included), the steps of step()."""
    A = topology.exponential(8)
    b = np.arange(16.0).reshape(8, 2)

    def made(apart):
        opt = PullDiagGT(A, np.zeros((8, 2)), 0.05, backend="mpi")
        for k in range(6):
            X = opt.ask()
            if k == 3:
                apart(opt)
            opt.tell(X - b[opt.local_nodes])
        return opt

    def reasked(opt):
        if rank == 1:
            opt.cancel()
            opt.ask()

    def cancelled(opt):
        if rank == 1:
            opt.cancel()

    def alike(opt):
        opt.cancel()
        opt.ask()

    def same():
        x = made(alike).gather_x()
        ref = PullDiagGT(A, np.zeros((8, 2)), 0.05, backend="mpi")
        for _ in range(5):
            ref.step(lambda X: X - b[ref.local_nodes])
        assert np.array_equal(x, ref.gather_x()), "ask/tell with a cancel on every rank differs from step()"

    def set_apart(method):  # (rank 1 in an untagged collective: a TypeError there, "None" named here; Pull-Diag-GT's
        # x, which cannot be set after its first step, refused on rank 1 alone while rank 0 waited: helper 222)
        from rowstoch_fast import DSGD

        opt = {"dsgd": DSGD, "pull-diag-gt": PullDiagGT}[method](A, np.zeros((8, 2)), 0.05, backend="mpi")
        for _ in range(3):  # (past the first step: Pull-Diag-GT's x is then refused)
            opt.tell(opt.ask() - b[opt.local_nodes])
        opt.cancel()
        if rank == 0:
            opt.ask()
        else:
            opt.x = np.asarray(opt.x).copy()

    def stepped_apart():  # (rank 0 steps while rank 1 asks: rank 0's exchanges met rank 1's agreement, a hang)
        opt = PullDiagGT(A, np.zeros((8, 2)), 0.05, backend="mpi")
        grad = lambda X: X - b[opt.local_nodes]  # noqa: E731
        opt.step(grad)
        try:
            if rank == 0:
                opt.step(grad)
            else:
                opt.tell(opt.ask() - b[opt.local_nodes])
        except RuntimeError as exc:
            refused = f"{type(exc).__name__}: {exc}"
        else:
            refused = "no error"
        for _ in range(4):  # (both ranks at iteration 1 still: they go on alike)
            opt.step(grad)
        ref = PullDiagGT(A, np.zeros((8, 2)), 0.05, backend="mpi")
        for _ in range(5):
            ref.step(lambda X: X - b[ref.local_nodes])
        assert np.array_equal(opt.gather_x(), ref.gather_x()), "a refused step changed the state"
        raise RuntimeError(refused)

    runs = {"same": same, "reasked": lambda: made(reasked), "cancelled": lambda: made(cancelled),
            "set_apart": lambda: set_apart("dsgd"), "set_apart_gt": lambda: set_apart("pull-diag-gt"),
            "stepped_apart": stepped_apart}
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_states_differ(out):
    """state_dict() (None on the ranks but the root) passed straight to from_state_dict: an AttributeError on rank 1
    while rank 0 waited for it, a hang; ranks resuming states one step apart ran on, mixed, or hung (local steps)."""
    from rowstoch_fast import LocalDSGD, PullDiagGT

    A = topology.exponential(8)
    b = np.arange(16.0).reshape(8, 2)
    opt = PullDiagGT(A, np.zeros((8, 2)), 0.05, backend="mpi")
    for _ in range(3):
        opt.step(lambda X: X - b[opt.local_nodes] if X.shape[-2] < 8 else X - b)
    state = opt.state_dict()
    shared = comm.bcast(state, root=0)
    ahead = PullDiagGT.from_state_dict(shared, A=A)  # (one process: a step further on rank 1)
    if rank == 1:
        ahead.step(lambda X: X - b)
    moved = ahead.state_dict()
    local = LocalDSGD(topology.ring(8, directed=False, weights="metropolis"), np.zeros((8, 2)), 0.05, local_steps=4)
    for _ in range(5 + rank):
        local.step(lambda X: X - b)
    runs = {"none": lambda: PullDiagGT.from_state_dict(state, A=A, backend="mpi"),
            "shared": lambda: PullDiagGT.from_state_dict(shared, A=A, backend="mpi"),
            "apart": lambda: PullDiagGT.from_state_dict(moved, A=A, backend="mpi"),
            "local": lambda: LocalDSGD.from_state_dict(local.state_dict(), backend="mpi")}
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_one_rank_refused(out):
    """Helper 203: a bad argument, another method or another option on one rank had been refused there alone (or not
    at all) while the others waited in the next collective: each now a refusal on every rank."""
    import os
    import tempfile

    from rowstoch_fast import DGD, EXTRA, PGEXTRA, Algorithm, run
    from rowstoch_fast import compare as cmp
    from rowstoch_fast.composite import Prox

    f = Quadratic.random(8, 3, seed=0)
    A, W = topology.exponential(8), topology.ring(8, directed=False, weights="metropolis")
    b = np.arange(24.0).reshape(8, 3)
    folder = comm.bcast(tempfile.mkdtemp() if rank == 0 else None, root=0)
    kept = os.path.join(folder, "ck.npz")
    run(Algorithm(A, 0.01, backend="mpi"), f, 4, checkpoint=kept, progress=False)  # (rank 0 writes it)
    comm.Barrier()
    state = comm.bcast(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi").state_dict(), root=0)

    def stepped(opt):
        for _ in range(2):
            opt.step(lambda X: X - b[opt.local_nodes])

    runs = {
        "method": lambda: stepped((DGD if rank == 0 else EXTRA)(W, np.zeros((8, 3)), 0.05, backend="mpi")),
        "check_finite": lambda: stepped(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi",
                                                   check_finite=True if rank == 0 else "no")),
        "check_finite_differs": lambda: stepped(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi",
                                                           check_finite=rank == 0)),
        "form": lambda: stepped(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi",
                                           form="atc" if rank == 0 else "frost")),
        "form_invalid": lambda: stepped(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi",
                                                   form="atc" if rank == 0 else "bogus")),
        "iterations": lambda: run(Algorithm(A, 0.01, backend="mpi"), f, 10 if rank == 0 else -1, progress=False),
        "metrics": lambda: run(Algorithm(A, 0.01, backend="mpi"), f, 10, progress=False,
                               metrics=["grad_norm"] if rank == 0 else ["nosuch"]),
        "checkpoint_every": lambda: run(Algorithm(A, 0.01, backend="mpi"), f, 10, progress=False,
                                        checkpoint=os.path.join(folder, "c.npz"), checkpoint_every=5 + 5 * rank),
        "resume": lambda: run(Algorithm(A, 0.01, backend="mpi"), f, 10, progress=False,
                              resume=kept if rank == 0 else os.path.join(folder, "missing.npz")),
        "compare": lambda: cmp.compare(A, f, "dsgd" if rank == 0 else "nosuch", 20, lr=0.01, repeats=1,
                                       backend="mpi", progress=False),
        "state": lambda: PullDiagGT.from_state_dict(state, A if rank == 0 else topology.ring(8), backend="mpi"),
        "gather": lambda: PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi").gather(
            np.zeros((4, 3) if rank == 0 else (4, 2))),
        "prox": lambda: stepped(PGEXTRA(W, np.zeros((8, 3)), 0.05, backend="mpi", regularizer=Prox(
            lambda x: 0.0 * x.sum(-1), lambda v, t: v.copy()))),
        "partition": lambda: stepped(PullDiagGT(A, np.zeros((8, 3)), 0.05, backend="mpi", partition=np.repeat(
            [0, 1], 4).astype(np.int32 if rank == 0 else np.int64))),
        "same": lambda: run(Algorithm(A, 0.01, backend="mpi"), f, 10, progress=False),
    }
    outcomes = comm.gather([_outcome(fn) for fn in runs.values()], root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes), names=np.array(list(runs)))


def case_metric_raises(out):
    """A user's metric that raises: measured on rank 0 alone, it hung the others in the next collective."""
    import rowstoch_fast as rf
    from rowstoch_fast import Algorithm, run

    def boom(state):
        if state.iteration >= 10:
            raise ZeroDivisionError(f"deliberate at iteration {state.iteration}")
        return 1.0

    metric = rf.user_metrics.Metric("boom", boom)
    f = Quadratic.random(8, 3, seed=0)
    outcome = _outcome(lambda: run(Algorithm(topology.exponential(8), 0.01, backend="mpi"), f, 30, record_every=5,
                                   progress=False, metrics=["grad_norm", metric]))
    outcomes = comm.gather(outcome, root=0)
    if rank == 0:
        np.savez(out, outcomes=np.array(outcomes))


def case_cli(out):
    from rowstoch_fast import cli

    code = cli.main(["run", "--backend", "mpi", "--topology", "exponential", "--n", "8", "--lr", "0.05",
                     "--iterations", "20", "--repeats", "2", "--total", "1600", "--batch", "20", "--out", out,
                     "--no-progress"])
    assert code == 0


def case_cli_refused(out):
    """A second run into a folder holding the first's history: every rank refuses (rank 0 alone did, and the
    others waited in the run's first collective)."""
    from rowstoch_fast import cli

    args = ["run", "--backend", "mpi", "--n", "8", "--iterations", "3", "--total", "1600", "--batch", "20",
            "--out", out, "--no-progress"]
    assert cli.main(args) == 0
    assert cli.main(args) == 2


def all_unreliable_networks():
    """Time-varying networks with a compiled pass (what backend='mpi' runs), on 20 nodes."""
    from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy, Schedule, Sleepy, one_peer_exponential

    A = topology.erdos_renyi(20, 0.2, seed=5)
    W = topology.erdos_renyi(20, 0.3, seed=5, directed=False, weights="metropolis")
    # (losses alone, independent and bursty, are the registry's examples over A: layer:lossy, layer:bursty below)
    return {"schedule": Schedule([A, topology.exponential(20)]),
            "one-peer": one_peer_exponential(20),
            "sleepy-lossy": Sleepy(Lossy(Schedule([A, topology.ring(20)]), 0.2, seed=3), 0.8, seed=4),
            "markov-lossy": Sleepy(Lossy(A, 0.2, seed=6), seed=7, model="markov", p_sleep=0.3, p_wake=0.5),
            # compressed messages: over a static doubly stochastic matrix (the undirected methods, CHOCO-SGD), and
            # composed over noise, losses and sleep
            "compressed": Compressed(topology.exponential(20), "topk", k=2),
            "qsgd-noisy-lossy": Compressed(Noisy(Sleepy(Lossy(A, 0.2, seed=8), 0.9, seed=1), 0.01, seed=3), "qsgd",
                                           bits=4, seed=9),
            # delayed messages (a rank keeps its halo's): over a static W, and under compression over losses
            "delayed": Delayed(topology.exponential(20), 2, seed=4),
            # ... over a schedule (links that change: every rank keeps every node's messages)
            "delayed-schedule": Noisy(Delayed(Schedule([A, topology.ring(20)]), 2, seed=6), 0.01, seed=2),
            "topk-delayed-lossy": Compressed(Noisy(Delayed(Sleepy(Lossy(A, 0.2, seed=8), 0.9, seed=1), 3, seed=2,
                                                           delay="fixed"), 0.01, seed=5), "topk", k=2),
            # ... over fixed links (the running sums of the robust methods: compressed, delayed, noisy, asleep)
            "qsgd-delayed-noisy": Compressed(Noisy(Delayed(Sleepy(Lossy(A, 0.2, seed=8), 0.9, seed=1), 2, seed=2),
                                                   0.01, seed=5), "qsgd", bits=4, seed=3),
            # losses and sleep over a symmetric W: the undirected methods under the undirected rule (each link's
            # other message drawn on global ids), the directed ones under the row rule; and under messages
            "undirected-sleepy-lossy": Sleepy(Lossy(W, 0.2, seed=8), seed=2, model="poisson", rate=1.0),
            "undirected-topk-delayed": Compressed(Delayed(Sleepy(Lossy(W, 0.2, seed=8), 0.8, seed=1), 2, seed=2),
                                                  "topk", k=2),
            "undirected-bursty": Lossy(W, 0.9, seed=5, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
            # schedules of doubly stochastic matrices: one-peer rounds (DGD, DIGing), symmetric ones under losses
            "undirected-schedule": Lossy(Schedule([W, topology.ring(20, directed=False)]), 0.2, seed=3),
            # every registered layer's every example, and their composition (a new layer runs here without an edit)
            **layer_networks(A)}


def layer_networks(A):
    """``{"layer:LABEL": network}``: every example every registered layer declares over ``A`` (the registry's, no
    list), and two compositions of the layers' first examples, each over the one before in composition order: over
    a schedule (every layer) and over ``A`` (every layer but the matrices' sources: fixed links, so the per-link
    methods run too)."""
    out = {f"layer:{label}": net for cls in network_layers() for label, net in cls.examples(A).items()}
    for label, kinds in (("composed", ("matrices", "links", "messages")), ("composed-links", ("links", "messages"))):
        net = A
        for cls in network_layers():
            examples = cls.examples(net) if cls.acts_on in kinds else {}
            if examples:  # (a layer that cannot wrap what is below it has none)
                net = next(iter(examples.values()))
        out[f"layer:{label}"] = net
    return out


def unreliable_networks():
    """:func:`all_unreliable_networks`, or the ones ``ROWSTOCH_MPI_NETWORKS`` names (:func:`chosen`)."""
    return chosen(all_unreliable_networks(), "ROWSTOCH_MPI_NETWORKS")


#: The networks whose messages are compressed, noisy or delayed: what they change is the pass that mixes (the same for
#: every algorithm), so a method of each family runs on them (the registry runs whole on the others).
MESSAGE_NETWORKS = ("compressed", "qsgd-noisy-lossy", "delayed", "delayed-schedule", "topk-delayed-lossy",
                    "qsgd-delayed-noisy", "undirected-sleepy-lossy", "undirected-topk-delayed", "undirected-bursty",
                    "undirected-schedule")
MESSAGE_ALGORITHMS = ("dsgd", "push-pull", "pull-diag-gt", "push-diging", "dgd", "exact-diffusion", "choco-sgd",
                      "compressed-push-pull", "robust-gradient-push", "r-fast", "diging", "extra")


def runs_on(nname, net, cls):
    """Whether the MPI network test runs ``cls`` on the network ``nname``: a registered layer's example, a method of
    each family where it acts on the messages (as on the message networks above, and the layers' compositions,
    whose outer layer is a message layer), else one algorithm of each kind (:func:`kinds_of_algorithm`: what the
    partition reads of a method; every algorithm runs on the hand-made schedules, losses and sleep above)."""
    message = nname in MESSAGE_NETWORKS or (nname.startswith("layer:") and net.acts_on == "messages")
    if message:
        return cls.applies_to(net) and cls.name in MESSAGE_ALGORITHMS
    if nname.startswith("layer:"):
        from rowstoch_fast.algorithms import REGISTRY

        return cls.applies_to(net) and cls.name in kinds_of_algorithm(REGISTRY)
    return cls.applies_to(net)


def case_networks(out):
    """Every algorithm (or those ``ROWSTOCH_MPI_ALGORITHMS`` names) on lossy / scheduled / sleepy networks, two
    partitions: gathered models after 20 steps."""
    from rowstoch_fast.algorithms import REGISTRY

    results = {}
    f = Quadratic.random(20, 3, seed=2)
    for nname, net in unreliable_networks().items():
        for name, cls in sorted(chosen(REGISTRY, "ROWSTOCH_MPI_ALGORITHMS").items()):
            if not runs_on(nname, net, cls):  # (an undirected network's method: a static W only)
                continue
            for pname, owner in partitions(20):
                opt = cls.build(net, f.x0(), 0.01, rounds=2 if cls.multi_round else 1, backend="mpi", partition=owner)
                grad = feed(cls, lambda X, nodes=opt.local_nodes: f.full_gradient(X, nodes), nodes=opt.local_nodes)
                for _ in range(20):
                    opt.step(grad)
                x = opt.gather_x()
                extra = {k: v for k, v in opt._save_extra().items()}  # (per-link state, gathered: collective)
                if rank == 0:
                    results[f"{nname}/{name}/{pname}"] = x
                    for k, v in extra.items():
                        results[f"{nname}/{name}/{pname}/{k}"] = v
    if rank == 0:
        np.savez(out, **results)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]](sys.argv[2])
