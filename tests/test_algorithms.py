"""Every algorithm of rowstoch_fast.algorithms against its dense transcription in _reference.py, and the
common interface (replicas, state_dict, DivergenceError, matrix kinds, convergence, backends)."""

import re
import sys
import types

import numpy as np
import pytest

from rowstoch_fast import _core
from rowstoch_fast import (DSGD, FROST, SGP, DivergenceError, MixingMatrix, PullDiagGD, PullDiagGT, PushPull, _reference,
                           topology)
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.algorithms import labels as cmp_labels
from rowstoch_fast.algorithms import names as algorithm_names
from rowstoch_fast.algorithms._corrections import tracker_row
from rowstoch_fast.mixing import out_degree_weights
from conftest import cupy_or_reason, feed, for_algorithm, options_for, random_primitive, steps_until, twin_samples


def quadratic(n, d, rng):
    """Strongly convex f_i(x) = 1/2 x^T diag(q_i) x - b_i^T x, and the minimisers of the uniform and pi-weighted sums."""
    Q = rng.uniform(0.5, 2.0, (n, d))
    b = rng.standard_normal((n, d))
    return (lambda X: Q * X - b), b.sum(0) / Q.sum(0), (lambda w: (w @ b) / (w @ Q))


def rel(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


def random_column(n, rng, self_loops=True):
    """A random strongly connected, primitive column-stochastic matrix (the transpose of a random row-stochastic one)."""
    return MixingMatrix(random_primitive(n, 0.3, rng, self_loops=self_loops).toarray().T, stochastic="column")


def build_on(cls, A, C, x0, lr, R=1):
    """``cls`` on the row-stochastic ``A`` and the column-stochastic ``C`` (whichever it mixes with; an
    undirected network's method on the Metropolis W of ``A``'s graph)."""
    kwargs = cls.problem_matrices(for_algorithm(cls, A))  # A and/or C (that of A), W, or n
    if "C" in kwargs:
        kwargs["C"] = C
    if cls.multi_round:
        kwargs["rounds"] = R
    return cls(x0=x0, lr=lr, **kwargs)


def twin_of(cls, A, C, x0, lr, grad, T, R=1):
    """The models of ``cls``'s dense twin in _reference.py (registered with @twin under its name)."""
    import inspect

    twin = _reference.TWINS.get(cls.name)
    assert twin is not None, (f"{cls.name} has no dense twin: decorate its transcription in rowstoch_fast/_reference.py "
                              f"with @twin({cls.name!r})")
    given = {"A": A.toarray(), "C": C.toarray(), "W": for_algorithm(cls, A).toarray(), "n": A.n, "x0": x0, "lr": lr,
             "grad_fn": grad, "T": T, "R": R}
    if cls.gradients == "samples":  # (the samples and draws feed() gives the method)
        given.update(twin_samples(grad, np.shape(x0)[:-1]))
    if cls.gradients == "prox":  # (the local proximal operators feed() gives the method)
        given["prox"] = feed(cls, grad).prox
    return twin(**{k: given[k] for k in inspect.signature(twin).parameters if k in given})


# every registered algorithm (and its multi-round form): an algorithm without a twin fails here
CASES = [(name, R) for name in algorithm_names() for R in ((1, 3) if REGISTRY[name].multi_round else (1,))]


@pytest.mark.parametrize("name,R", CASES)
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_iterates_match_reference(name, R, self_loops, seed):
    cls = REGISTRY[name]
    rng = np.random.default_rng(seed)
    n, d, lr, T = 12, 3, 0.01, 200
    A = random_primitive(n, 0.3, rng, self_loops=self_loops)
    C = random_column(n, rng, self_loops=self_loops)
    grad, _, _ = quadratic(n, d, rng)
    x0 = rng.standard_normal((n, d))
    try:
        opt = build_on(cls, A, C, x0, lr, R)
    except ValueError as exc:  # the exact diagonal tracker needs diag(A^(tR)) > 0: refused at once, said so
        assert not self_loops and "tracker" in cls.hyper and "no self loop" in str(exc), exc
        return
    xs = twin_of(cls, A, C, x0, lr, grad, T, R)
    fed = feed(cls, grad)
    for t in range(1, T + 1):
        opt.step(fed)
        # (rounding drifts as the steps go, and the twin's BLAS products make it the CPU's own: Prox-ED's reached
        # 4.4e-13 by its 50th iteration and 3.6e-12 by its 200th on a VM without AVX-512 (OpenBLAS's Haswell
        # kernels), within 1e-12 on the VMs before it; a wrong step is off by far more from the first)
        assert rel(opt.x, xs[t]) < 1e-12 * max(1.0, t / 20), (name, t, rel(opt.x, xs[t]))
    talking = sum(opt._talks(t) for t in range(T))  # (all but the silent first ones; one in K of local steps)
    assert opt.iteration == T and opt.communication_rounds == talking * opt.rounds


def test_frost_with_one_step_size_per_node_matches_reference():
    rng = np.random.default_rng(2)
    A = random_primitive(12, 0.3, rng)
    grad, _, _ = quadratic(12, 3, rng)
    x0 = rng.standard_normal((12, 3))
    lr = 0.01 * np.linspace(0.5, 1.5, 12)
    opt = FROST(A, x0, lr)
    xs = _reference.frost(A.toarray(), x0, lr, grad, 200)
    for t in range(1, 201):
        opt.step(grad)
        assert rel(opt.x, xs[t]) < 1e-12, t


def test_the_reference_test_fails_for_a_wrong_update():
    """The registry-driven test can fail: an algorithm registered with a deliberately wrong update (DSGD's with
    the mixing and the step swapped) does not match the twin it names, and one without a twin is named."""
    from rowstoch_fast.algorithms import _registry

    class Wrong(DSGD):
        name = "wrong-dsgd"

        def _advance(self, grad_fn, cur, nxt, t):
            g, w = self._work
            self._gradient(grad_fn, cur["x"], g, t)
            self._ops.mix(self.A, cur["x"], w)
            finite = self._ops.combine(nxt["x"], [1.0, -self.lr], [w, g])  # A x - lr g, not A (x - lr g)
            self._check_iterates(finite, t, nxt["x"])

    try:
        rng = np.random.default_rng(0)
        A, C = random_primitive(8, 0.4, rng), random_column(8, rng)
        grad, _, _ = quadratic(8, 2, rng)
        x0 = rng.standard_normal((8, 2))
        with pytest.raises(AssertionError, match="wrong-dsgd has no dense twin"):
            twin_of(Wrong, A, C, x0, 0.01, grad, 5)
        _reference.TWINS["wrong-dsgd"] = _reference.TWINS["dsgd"]
        opt = build_on(Wrong, A, C, x0, 0.01)
        xs = twin_of(Wrong, A, C, x0, 0.01, grad, 5)
        for t in range(1, 6):
            opt.step(grad)
        assert rel(opt.x, xs[5]) > 1e-6
    finally:
        _registry.REGISTRY.pop("wrong-dsgd", None)
        _reference.TWINS.pop("wrong-dsgd", None)


def test_a_method_that_breaks_the_step_contract_is_told_which_rule():
    """A step that rebound its block (``nxt["x"] = np.full((3, 3), 7.)`` on 6 nodes, or an int64 array) had made that
    array the iterate, silently; a class without ``_advance`` raised an empty NotImplementedError, and one whose
    ``state`` lacks its model block a ``KeyError: 'x'`` from the constructor (helper 238)."""
    from rowstoch_fast.algorithms._base import Optimizer

    class Base(Optimizer):
        matrices, state, hyper = ("A",), ("x",), ("lr",)

        def __init__(self, A, x0, lr):
            self._start(x0, {"A": A}, "auto", True, None, None, lr=lr)

        def _check_hyper(self, lr):
            self.lr = self._check_lr(lr)
            return {"lr": self.lr}

    class Rebinds(Base):
        def _advance(self, grad_fn, cur, nxt, t):
            nxt["x"] = np.full((3, 3), 7.0)

    class Carries(Base):
        def _advance(self, grad_fn, cur, nxt, t):
            self._carry(cur, nxt, "x")

    A, x0 = topology.exponential(6), np.ones((6, 2))
    opt = Rebinds(A, x0, 0.1)
    with pytest.raises(RuntimeError, match=re.escape("Rebinds: this step rebound its block 'x' to another array "
                                                     "(nxt['x'] = ...); write into the block")):
        opt.step(lambda X: X)
    assert opt.iteration == 0 and opt.x.shape == (6, 2)  # (not committed)
    opt = Rebinds(A, x0, 0.1)
    opt._ops.keeps_blocks = False  # (a GPU's: a carry copies; its step's blocks had been the optimizer's own dict)
    with pytest.raises(RuntimeError, match="Rebinds: this step rebound its block 'x' to another array"):
        opt.step(lambda X: X)
    assert opt.iteration == 0 and opt.x.shape == (6, 2) and opt._nxt["x"].shape == (6, 2)
    copies = Carries(A, x0, 0.1)
    copies._ops.keeps_blocks = False
    assert np.array_equal(copies.step(lambda X: X).step(lambda X: X).x, x0)
    assert np.array_equal(Carries(A, x0, 0.1).step(lambda X: X).step(lambda X: X).x, x0)  # (a carry is no rebinding)
    with pytest.raises(NotImplementedError, match="Base defines no _advance"):
        Base(A, x0, 0.1).step(lambda X: X)
    with pytest.raises(TypeError, match=r"NoModel: its state \('y',\) lacks its model block 'x'"):
        type("NoModel", (Base,), {"state": ("y",), "name": "no-model-238"})
    assert "no-model-238" not in REGISTRY
    with pytest.raises(TypeError, match=r"NoOutput: its output block 'server' is not a full state block of \('x',\)"):
        type("NoOutput", (Base,), {"output": "server", "name": "no-output-block"})
    assert "no-output-block" not in REGISTRY
    type("AbstractBase", (Base,), {"model": "z"})  # (a base class of others, named nothing: not checked)


@pytest.mark.parametrize("name, message", [
    ("dsgd", "the method name 'dsgd' is rowstoch_fast.algorithms.dsgd.DSGD's; give the new method a name of its own"),
    ("mg-pull-diag-gt", "'mg-NAME' is the comparisons' label of NAME"),
    ("my,gt", "it has ',', which the command line's lists"),
    ("my gt", "it has ' ', which"),
    ("a=b", "it has '=', which"),
    (1, "name must be a string (or None: not registered), got 1")])
def test_a_method_name_that_is_taken_or_unusable_is_refused(name, message, monkeypatch):
    """A class named like a registered method had replaced it everywhere (``Algorithm(method="dsgd")``, compare and
    the command line ran the new class, ``rowstoch_fast.DSGD`` the old one), and names the command line cannot
    select were registered (helper 238); the registry is left as it was."""
    from rowstoch_fast.algorithms import DSGD

    before = dict(REGISTRY)
    with pytest.raises(TypeError, match=re.escape(message)):
        type("Mine", (DSGD,), {"name": name})
    assert REGISTRY == before
    again = [type("Again", (DSGD,), {"name": "again-dsgd", "__module__": __name__}) for _ in range(2)]  # (a cell
    try:  # run twice: the same module and name take their own name back)
        assert REGISTRY["again-dsgd"] is again[1]
        # a file imported, then run as __main__ (python -m, %run), and a notebook's class renamed, its method's name
        # kept (helper 239)
        main = sys.modules["__main__"]
        monkeypatch.setattr(main, "__file__", sys.modules[__name__].__file__, raising=False)
        type("Again", (DSGD,), {"name": "again-dsgd", "__module__": "__main__"})
        monkeypatch.delattr(main, "__file__", raising=False)
        for qualname in ("First", "Renamed"):
            type(qualname, (DSGD,), {"name": "again-dsgd", "__module__": "__main__"})
        assert REGISTRY["again-dsgd"].__qualname__ == "Renamed"
        with pytest.raises(TypeError, match="the method name 'again-dsgd' is __main__.Renamed's"):
            type("Again", (DSGD,), {"name": "again-dsgd", "__module__": __name__})
    finally:
        REGISTRY.pop("again-dsgd", None)


def test_frost_form_is_frost_with_rounds():
    """PullDiagGT(form="frost", rounds=R) is FROST with A^R and D_k = Diag(A^(kR))."""
    rng = np.random.default_rng(3)
    A = random_primitive(10, 0.3, rng)
    grad, _, _ = quadratic(10, 2, rng)
    x0 = rng.standard_normal((10, 2))
    opt = PullDiagGT(A, x0, 0.01, rounds=2, form="frost")
    xs = _reference.frost(np.linalg.matrix_power(A.toarray(), 2), x0, 0.01, grad, 100)
    for t in range(1, 101):
        opt.step(grad)
        assert rel(opt.x, xs[t]) < 1e-12


def test_the_frost_form_of_pull_diag_gt_resumes_as_itself():
    """PullDiagGT(form="frost")'s state_dict saved neither its form nor an xw block: from_state_dict refused it
    ("missing ['xw']"), and with an xw added by hand it came back as the ATC form, silently."""
    rng = np.random.default_rng(5)
    A = random_primitive(8, 0.4, rng)
    grad, _, _ = quadratic(8, 2, rng)
    opt = PullDiagGT(A, rng.standard_normal((8, 2)), 0.05, form="frost")
    for _ in range(10):
        opt.step(grad)
    again = PullDiagGT.from_state_dict(opt.state_dict())
    assert again.form == "frost" and "xw" not in again.state
    older = opt.state_dict()  # (a state saved before the form was: no xw block, so the FROST form)
    del older["form"]
    assert PullDiagGT.from_state_dict(older).form == "frost"
    for _ in range(10):
        opt.step(grad)
        again.step(grad)
    np.testing.assert_array_equal(opt.x, again.x)
    atc = PullDiagGT(A, np.zeros((8, 2)), 0.05)
    atc.step(grad)
    assert PullDiagGT.from_state_dict(atc.state_dict()).form == "atc"
    state = atc.state_dict()
    del state["xw"]
    with pytest.raises(ValueError, match=r"state is missing \['xw'\]"):
        PullDiagGT.from_state_dict(state)


@pytest.mark.parametrize("name", sorted(n for n, c in REGISTRY.items() if not c.matrices))
def test_a_method_without_a_matrix_resumes_in_its_precision(name):
    """A float32 run of a method without a mixing matrix (centralized, federated) came back in float64 from its
    state (the start rebuilt as np.zeros): 1.3e-8 .. 4.4e-8 off the uninterrupted run after 12 steps."""
    cls = REGISTRY[name]
    b = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    opt = cls.build(topology.ring(6), np.zeros((6, 3), np.float32), 0.05)
    oracle = feed(cls, lambda X: X - b)
    for _ in range(5):
        opt.step(oracle)
    again = cls.from_state_dict(opt.state_dict())
    assert again.x.dtype == np.float32
    for _ in range(7):
        opt.step(oracle)
        again.step(oracle)
    np.testing.assert_array_equal(again.x, opt.x)


def test_a_resume_refuses_the_saved_matrix_in_another_precision_and_a_damaged_initialized_flag():
    """A ring of weights 1/2 is the same matrix in float32 and float64: given in the other precision it was
    accepted and the run went on in it (2e-7 off after 10 steps)."""
    A = topology.ring(6)
    b = np.arange(12.0).reshape(6, 2)
    opt = PullDiagGT(A, np.zeros((6, 2)), 0.05)
    for _ in range(3):
        opt.step(lambda X: X - b)
    state = opt.state_dict()
    with pytest.raises(ValueError, match=r"A is the matrix this state was saved with but in float32, and the state "
                                         r"was saved in float64: pass A.astype\('float64'\)"):
        PullDiagGT.from_state_dict(state, A=A.astype(np.float32))
    with pytest.raises(ValueError, match="A is not the matrix this state was saved with"):
        PullDiagGT.from_state_dict(state, A=topology.exponential(6))
    PullDiagGT.from_state_dict(state, A=A)
    with pytest.raises(ValueError, match=r"state\['initialized'\] is False at iteration 3"):
        PullDiagGT.from_state_dict({**state, "initialized": np.array(False)})


def test_a_step_inside_its_own_step_is_refused():
    """A grad_fn that stepped its own optimizer (a logging hook) nested two steps, and one iteration was lost
    (iteration 2 after 3 steps); one that set x mixed the new x with the gradients at the old. Both raise now, and
    the optimizer stays at the last finished iteration."""
    A = topology.ring(4)
    b = np.arange(8.0).reshape(4, 2)
    opt = DSGD(A, np.zeros((4, 2)), 0.1)
    opt.step(lambda X: X - b)
    before = opt.x.copy()

    def steps_again(X):
        opt.step(lambda Y: Y - b)
        return X - b

    def sets_x(X):
        opt.x = np.ones((4, 2))
        return X - b

    for hook, match in ((steps_again, r"DSGD.step\(\) called while a step of this optimizer runs"),
                        (sets_x, "x can be set between steps only")):
        with pytest.raises(RuntimeError, match=match):
            opt.step(hook)
        assert opt.iteration == 1
        np.testing.assert_array_equal(opt.x, before)
    opt.step(lambda X: X - b)  # (the guard is lifted after a refusal)
    assert opt.iteration == 2
    gt = PullDiagGT(A, np.zeros((4, 2)), 0.1)
    with pytest.raises(RuntimeError, match=r"PullDiagGT.step\(\) called while"):
        gt.step(lambda X: gt.step(lambda Y: Y - b) and X - b)  # (the first step: inside initialize)
    assert gt.iteration == 0


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_replicas_equal_separate_runs_and_state_dict_resumes(name, tmp_path):
    """x0 of shape (reps, n, d) runs each repetition as its own run would; state_dict continues bit for bit, read
    back from an ``.npz`` without pickle (as its docstring says: a hyperparameter left None, such as LT-ADMM's
    ``dual_step`` or a federated method's ``client_steps``, was an object array np.load refuses)."""
    rng = np.random.default_rng(7)
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.3, seed=2))
    G = rng.standard_normal((3, 10, 2))
    x0 = rng.standard_normal((3, 10, 2))
    batched = cls.build(A, x0, 0.02, **options_for(cls))
    singles = [cls.build(A, x0[r], 0.02, **options_for(cls)) for r in range(3)]
    for _ in range(30):
        batched.step(feed(cls, lambda X: X - G))
        for r, s in enumerate(singles):
            s.step(feed(cls, lambda X, r=r: X - G[r], rep_offset=r))
    for r, s in enumerate(singles):
        np.testing.assert_array_equal(batched.x[r], s.x)
    np.savez(tmp_path / "state.npz", **batched.state_dict())
    with np.load(tmp_path / "state.npz", allow_pickle=False) as saved:
        state = dict(saved)
    again = cls.from_state_dict(state, **{k: v for k, v in cls.problem_matrices(A).items() if k in cls.matrices})
    assert str(state["format"]) == f"rowstoch_fast.{cls.__name__}/1"
    for _ in range(5):
        batched.step(feed(cls, lambda X: X - G))
        again.step(feed(cls, lambda X: X - G))
    np.testing.assert_array_equal(batched.x, again.x)
    assert batched.gather_x().shape == (3, 10, 2)
    traffic = batched.traffic()
    assert traffic["messages"] > 0 and traffic["bytes"] >= 8 * traffic["messages"]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_divergence_keeps_the_last_finite_state(name):
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.ring(6))
    opt = cls.build(A, np.ones((6, 2)), 1e300)
    if cls.stable_for_any_lr:  # (ADMM: a huge step is a converging one; the NaN below is its divergence)
        for _ in range(5):
            opt.step(feed(cls, lambda X: X * 1e10))
        assert np.isfinite(opt.x).all()
    else:
        with pytest.raises(DivergenceError) as err:
            for _ in range(5):
                opt.step(feed(cls, lambda X: X * 1e10))
        assert np.isfinite(opt.x).all() and err.value.iteration - 1 <= opt.iteration <= err.value.iteration
    opt = cls.build(A, np.ones((6, 2)), 0.1)
    with pytest.raises(DivergenceError, match="non-finite gradient"):
        for _ in range(1 + cls.gradient_free_iterations):  # (the first iteration that takes a gradient)
            opt.step(feed(cls, lambda X: np.where(np.arange(6)[:, None] == 4, np.nan, X)))


@pytest.mark.parametrize("name", sorted(n for n, c in REGISTRY.items() if c.gradients == "samples"))
def test_a_tracker_that_overflows_is_never_kept(name):
    """Sample gradients of 1e308 at lr = 1e-300: the step whose tracker (or estimate) overflows raises, and the
    state kept is finite in every block (the review of Push-SAGA: its tracker, mixed after its combine, was
    committed as inf and only the next step raised)."""
    from rowstoch_fast.objectives import SampleOracle

    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.ring(4))
    opt = cls.build(A, np.zeros((4, 1)), 1e-300)
    oracle = SampleOracle(lambda X, idx: np.full(X.shape, 1e308), samples=1, seed=0)
    with pytest.raises(DivergenceError):
        for _ in range(6):
            opt.step(oracle)
    for key, value in opt.state_dict().items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.isfinite(value).all(), key


FUSED_GRADIENT_CHECK = ("dsgd", "local-dsgd", "dgd", "sgp", "pull-diag-gd", "prox-skip", "k-gt", "led", "choco-sgd",
                        "dlm", "wang-elia", "atg", "dinno")


@pytest.mark.parametrize("name", FUSED_GRADIENT_CHECK)
def test_a_gradient_its_checked_combine_reads_is_not_scanned_first(name, monkeypatch):
    """Where a step's next checked combine reads the gradients (every row, a nonzero coefficient), the host does
    not scan them first (a pass over the block less: Local DSGD's step 1.2-1.4x, ProxSkip's 1.4-1.5x at 2^16);
    a NaN in them still raises the gradient's error, at its iteration and node, as the scan did (the check that
    failed scans them then)."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.ring(6))

    def spied(opt):  # (the gradients grad_fn returns, and which of them a scan read)
        returned, scanned = [], []
        for method in ("first_nonfinite", "is_finite"):
            real = getattr(opt._ops, method)
            monkeypatch.setattr(opt._ops, method, lambda *blocks, real=real: (
                scanned.extend(any(np.shares_memory(b, r) for r in returned) for b in blocks), real(*blocks))[1])

        def grad(X):
            returned.append(X - 1.0)
            return returned[-1]
        return grad, scanned

    opt = cls.build(A, np.ones((6, 2)), 0.1)
    grad, scanned = spied(opt)
    for _ in range(6):
        opt.step(feed(cls, grad))
    assert not any(scanned)
    calls = [0]

    def bad(X):
        calls[0] += 1
        return np.where((np.arange(6)[:, None] == 4) & (calls[0] == 3), np.nan, X - 1.0)

    opt = cls.build(A, np.ones((6, 2)), 0.1)
    with pytest.raises(DivergenceError, match="non-finite gradient") as err:
        for _ in range(6):
            opt.step(feed(cls, bad))
    assert err.value.what == "gradient" and err.value.node == 4 and opt.iteration == err.value.iteration
    if name != "dsgd":
        return
    opt = cls.build(A, np.ones((6, 2)), 0.1)  # (a step interrupted between the read and its check leaves nothing)
    monkeypatch.setattr(opt._ops, "combine", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        opt.step(lambda X: X - 1.0)
    assert "_unchecked_gradient" not in vars(opt)
    simple = REGISTRY["simple-gt"].build(topology.ring(6, directed=False, weights="metropolis"), np.ones((6, 2)), 0.1)
    grad, scanned = spied(simple)
    simple.step(grad)
    assert any(scanned)  # (a method whose next check does not read them still scans them)


def test_matrix_kinds_are_checked():
    A = topology.ring(5)
    C = topology.ring(5, stochastic="column")
    x0 = np.zeros((5, 1))
    # a ring's weights are doubly stochastic: built as either kind, it is taken as the other (as the same numbers)
    assert PushPull(A, A, x0, 0.1).C.stochastic == "column" and PullDiagGT(C, x0, 0.1).A.stochastic == "row"
    star = topology.star(5)  # (row-stochastic only: the centre's column sums to more than 1)
    with pytest.raises(ValueError, match="C must be a column-stochastic MixingMatrix, got a row-stochastic one whose "
                                         "column 0 sums to 2.2"):
        PushPull(star, star, x0, 0.1)
    A32 = MixingMatrix(A, dtype=np.float32)  # (taken as the other kind: its numbers, dtype and doubly stochasticity)
    C32 = PushPull(A32, A32, x0.astype(np.float32), 0.1).C
    assert (C32.dtype, C32.stochastic, C32.doubly) == (np.float32, "column", True)
    assert np.array_equal(C32.csr.data, A32.csr.data)
    star_c = topology.star(5, stochastic="column")
    with pytest.raises(ValueError, match="A must be a row-stochastic MixingMatrix, got a column-stochastic one"):
        PullDiagGT(star_c, x0, 0.1)
    with pytest.raises(ValueError, match="same number of nodes"):
        PushPull(A, topology.ring(6, stochastic="column"), x0, 0.1)
    skewed = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.2, 0.2, 0.6]])
    with pytest.raises(ValueError, match="C must be column-stochastic: column 0 sums to 0.7"):
        SGP(skewed, np.zeros((3, 1)), 0.1)
    with pytest.raises(ValueError, match="lr has 4 per-node values but A has 5 nodes"):
        FROST(A, x0, np.full(4, 0.1))
    with pytest.raises(ValueError, match="lr must be positive at every node"):
        FROST(A, x0, np.array([0.1, 0.1, -1.0, 0.1, 0.1]))
    with pytest.raises(ValueError, match="rounds"):
        DSGD.build(A, x0, 0.1, rounds=2)
    with pytest.raises(TypeError, match="backend 'cpu' takes no option 'partition'"):
        DSGD(A, x0, 0.1, partition=np.zeros(5, int))


def test_column_stochastic_matrix_and_metrics():
    A = topology.erdos_renyi(30, 0.15, seed=5)
    C = topology.erdos_renyi(30, 0.15, seed=5, stochastic="column")
    np.testing.assert_allclose(C.toarray().sum(axis=0), 1.0, atol=1e-14)
    assert (C.csr != out_degree_weights(A).csr).nnz == 0  # same graph, sender-side weights
    Cd = C.toarray()
    np.testing.assert_allclose(Cd @ C.pi, C.pi, atol=1e-14)  # the right Perron vector
    assert abs(C.pi.sum() - 1) < 1e-14
    m = C.metrics()
    assert abs(m.beta - _reference.beta(Cd.T)) < 1e-10 and abs(m.kappa - _reference.kappa(C.pi)) < 1e-10
    with pytest.raises(ValueError, match="stochastic must be 'row' or 'column'"):
        topology.ring(4, stochastic="doubly")
    raw = np.array([[1.0, 0.0, 3.0], [1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    Cn = MixingMatrix(raw, normalize=True, stochastic="column")
    np.testing.assert_allclose(Cn.toarray().sum(axis=0), 1.0)
    import pickle

    assert pickle.loads(pickle.dumps(C)).stochastic == "column" and C.astype(np.float32).stochastic == "column"


@pytest.mark.parametrize("name", algorithm_names(lambda cls: cls.exact))
def test_exact_methods_converge_to_the_minimiser(name):
    rng = np.random.default_rng(11)
    A = for_algorithm(REGISTRY[name], topology.erdos_renyi(16, 0.4, seed=4))
    grad, xstar, _ = quadratic(16, 3, rng)
    # (FedDyn's dual moves at about alpha K lr a round: at its default alpha = 0.1 these 3,000 rounds reach 4e-6)
    options = {"alpha": 1.0} if "alpha" in REGISTRY[name].hyper else {}
    opt = REGISTRY[name].build(A, np.zeros(3), 0.005, **options)
    grad = feed(REGISTRY[name], grad)
    errors = steps_until(opt, grad, lambda x: rel(x, np.broadcast_to(xstar, (16, 3))), 1e-8, 12000)
    assert errors[-1] < 1e-8, (name, errors)


@pytest.mark.parametrize("name", algorithm_names(lambda cls: not cls.exact and cls.bias is None))
def test_dgd_type_methods_reach_an_order_lr_neighbourhood(name):
    rng = np.random.default_rng(12)
    A = for_algorithm(REGISTRY[name], topology.erdos_renyi(16, 0.4, seed=4))
    grad, xstar, _ = quadratic(16, 3, rng)
    errors = []
    for lr in (0.008, 0.002):
        opt = REGISTRY[name].build(A, np.zeros(3), lr)
        for _ in range(int(60 / lr)):
            opt.step(grad)
        errors.append(np.abs(opt.x - xstar).max())
    assert errors[0] < 1.0 and errors[1] < errors[0] / 2.5, errors  # O(lr): a quarter of lr, about a quarter of it


def test_dsgd_converges_to_the_pi_weighted_problem():
    """The bias the paper removes: DSGD goes to argmin sum_i pi_i f_i, Pull-Diag-GD to argmin (1/n) sum_i f_i."""
    rng = np.random.default_rng(13)
    A = topology.erdos_renyi(16, 0.2, seed=8)
    assert A.kappa > 1.5
    grad, xstar, weighted = quadratic(16, 2, rng)
    x_pi = weighted(A.pi)
    lr = 0.002
    dsgd, gd = DSGD(A, np.zeros(2), lr), PullDiagGD(A, np.zeros(2), lr)
    for _ in range(20000):
        dsgd.step(grad)
        gd.step(grad)
    bias = np.abs(x_pi - xstar).max()
    assert bias > 0.05
    assert np.abs(dsgd.x.mean(0) - x_pi).max() < 0.2 * bias
    assert np.abs(gd.x.mean(0) - xstar).max() < 0.2 * bias


CUPY, WHY = cupy_or_reason()


@pytest.mark.skipif(CUPY is None, reason=f"CuPy backend unavailable: {WHY}")
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_cupy_backend_equals_cpu(name):
    rng = np.random.default_rng(4)
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(20, 0.2, seed=1))  # (an undirected network's method: its W)
    G = rng.standard_normal((2, 20, 3))
    x0 = rng.standard_normal((2, 20, 3))
    cpu = cls.build(A, x0, 0.02, **options_for(cls))
    gpu = cls.build(A, CUPY.asarray(x0), 0.02, **options_for(cls))
    assert gpu.backend == "cupy"
    Gd = CUPY.asarray(G)
    for _ in range(50):
        cpu.step(feed(cls, lambda X: X - G))
        gpu.step(feed(cls, lambda X: X - Gd))
    assert rel(gpu.gather_x(), cpu.x) < 1e-12
    with pytest.raises(TypeError, match=r"must be a CuPy \(device\) array|[A-Za-z]+ steps with a per-sample oracle|ADMM steps with an oracle"):
        gpu.step(lambda X: np.asarray(G))


def test_the_readme_recipe_adds_an_algorithm_in_one_class():
    """The guide's "Adding an algorithm" example (docs/guide/algorithms.md), run as written: registered, correct, on
    the MPI-free backends, and usable by name from the runner and the harness."""
    import pathlib
    import re

    guide = (pathlib.Path(__file__).parent.parent / "docs" / "guide" / "algorithms.md").read_text()
    section = guide[guide.index("## Adding an algorithm"):]
    code, twin_code = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    namespace = {}
    exec(compile(code, "algorithms.md", "exec"), namespace)
    cls = namespace["HeavyBallDSGD"]
    try:
        assert REGISTRY["heavy-ball-dsgd"] is cls
        exec(compile(twin_code, "algorithms.md", "exec"), {"twin": _reference.twin, "np": np})
        assert "heavy-ball-dsgd" in algorithm_names() and "heavy-ball-dsgd" in cmp_labels()
        rng = np.random.default_rng(5)
        A, C = random_primitive(9, 0.3, rng), random_column(9, rng)
        grad, _, _ = quadratic(9, 2, rng)
        x0 = rng.standard_normal((9, 2))
        opt, xs = build_on(cls, A, C, x0, 0.01), twin_of(cls, A, C, x0, 0.01, grad, 50)  # what the registry test runs
        for t in range(1, 51):
            opt.step(grad)
            assert rel(opt.x, xs[t]) < 1e-12
        rng = np.random.default_rng(0)
        A = random_primitive(9, 0.3, rng)
        grad, _, _ = quadratic(9, 2, rng)
        x0 = rng.standard_normal((9, 2))
        opt = cls(A, x0, 0.01, m=0.3)
        Ad, x, x_prev = A.toarray(), x0.copy(), x0.copy()
        for _ in range(100):
            opt.step(grad)
            x, x_prev = Ad @ x - 0.01 * grad(x) + 0.3 * (x - x_prev), x
            assert rel(opt.x, x) < 1e-12
        again = cls.from_state_dict(opt.state_dict(), A=A)
        np.testing.assert_array_equal(again.x, opt.x)
        from rowstoch_fast import compare as cmp
        from rowstoch_fast.objectives import Quadratic

        frame = cmp.compare(topology.ring(6), Quadratic.random(6, 2, seed=0), "heavy-ball-dsgd,dsgd", 30, lr=0.05,
                            repeats=1, progress=False)
        assert set(frame["algorithm"]) == {"heavy-ball-dsgd", "dsgd"}
    finally:
        REGISTRY.pop("heavy-ball-dsgd", None)
        _reference.TWINS.pop("heavy-ball-dsgd", None)


def test_the_recipe_class_joins_the_paper_preset_and_the_robustness_experiment(tmp_path):
    """Following the recipe literally (no capability tag written) must leave every list that reads the tags
    working: they are read off the class (its matrices, its gradients), so the recipe's directed method joins
    ``--preset paper`` and ``reproduce robustness`` and runs there, and the same class over an undirected ``W``
    (D^2, written the same way, once left both lists crashing) stays out of both."""
    import pathlib
    import re

    from rowstoch_fast import config, experiments
    from rowstoch_fast.algorithms import labels
    from rowstoch_fast.compare.plan import make_plan
    from rowstoch_fast.objectives import NonconvexLogistic

    guide = (pathlib.Path(__file__).parent.parent / "docs" / "guide" / "algorithms.md").read_text()
    code = re.findall(r"```python\n(.*?)```", guide[guide.index("## Adding an algorithm"):], re.S)[0]
    namespace = {}
    exec(compile(code, "algorithms.md", "exec"), namespace)
    cls = namespace["HeavyBallDSGD"]
    undirected = type("UndirectedHeavyBall", (cls,), {"name": "heavy-ball-dsgd-w", "matrices": ("W",)})
    try:
        assert "in_paper_preset" not in cls.__dict__ and "in_robustness" not in cls.__dict__  # as the recipe writes it
        assert cls.in_paper_preset and cls.in_robustness
        assert not undirected.in_paper_preset and not undirected.in_robustness
        _, algorithms, _ = config.load(config.preset_path("paper"))
        assert "heavy-ball-dsgd" in algorithms and "heavy-ball-dsgd-w" not in algorithms
        f = NonconvexLogistic.synthetic(16, total=320, batch=4, seed=0)
        for A in topology.paper_graphs().values():  # what compare --preset paper checks before it runs
            plan = make_plan(A, f, list(algorithms), 100, repeats=1, mg_rounds=2)
            assert "heavy-ball-dsgd" in [m.label for m in plan.methods]
        assert "heavy-ball-dsgd" in labels(lambda c: c.in_robustness)
        # (the experiment's default list is that of labels above; run it with the recipe's method alone: the whole
        # list took 15 s of the suite)
        table = experiments.reproduce_robustness(tmp_path, rounds_budget=10, repeats=1, losses=(0.1,), bursty=None,
                                                 algorithms=["heavy-ball-dsgd", "dsgd"], progress=False, total=12800,
                                                 log=lambda *a: None)
        assert "heavy-ball-dsgd" in set(table["algorithm"]) and "heavy-ball-dsgd-w" not in set(table["algorithm"])
    finally:
        REGISTRY.pop("heavy-ball-dsgd", None)
        REGISTRY.pop("heavy-ball-dsgd-w", None)


class _HostDeviceArray(np.ndarray):
    """A NumPy array that the package takes for a GPU array (it has ``__cuda_array_interface__`` and ``get``)."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (0, False), "version": 3}

    def get(self):
        return np.array(self).view(np.ndarray)


class _FakeGraphs:
    """CUDA stream capture on the host: launches made while a stream captures are recorded, not run, and the
    graph replays them (what the CuPy backend relies on: same arguments, same order)."""

    recording = None

    class Stream:
        def __init__(self, non_blocking=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def begin_capture(self):
            _FakeGraphs.recording = []

        def end_capture(self):
            launches, _FakeGraphs.recording = _FakeGraphs.recording, None
            return types.SimpleNamespace(launch=lambda: [f() for f in launches])

    @classmethod
    def run(cls, launch):
        if cls.recording is None:
            launch()
        else:
            cls.recording.append(launch)


def _fake_cupy():
    dev = lambda a: a.view(_HostDeviceArray)  # noqa: E731
    return types.SimpleNamespace(
        asarray=lambda a, dtype=None: dev(np.array(a, dtype=dtype)), asnumpy=lambda a: np.array(a), zeros=lambda s, dtype=None: dev(np.zeros(s, dtype)),
        empty=lambda s, dtype=None: dev(np.zeros(s, dtype)), empty_like=lambda a: dev(np.empty_like(a)),
        ascontiguousarray=lambda a, dtype=None: dev(np.ascontiguousarray(a, dtype=dtype)),
        isfinite=np.isfinite, argmax=np.argmax, float64=np.float64, int64=np.int64, uint64=np.uint64, int32=np.int32,
        uint8=np.uint8, eye=lambda n: dev(np.eye(n)), ones=lambda s, dtype=None: dev(np.ones(s, dtype)),
        diagonal=np.diagonal, maximum=np.maximum, where=lambda *a: dev(np.where(*a)), add=np.add,
        arange=lambda *a, **k: dev(np.arange(*a, **k)), take=np.take, sign=np.sign, abs=np.abs, minimum=np.minimum,
        sqrt=np.sqrt, inf=np.inf, clip=np.clip, subtract=np.subtract, divide=np.divide, multiply=np.multiply,
        broadcast_to=lambda a, shape: dev(np.broadcast_to(a, shape)), full=lambda s, v, dtype=None: dev(np.full(s, v, dtype)),
        cuda=types.SimpleNamespace(Stream=_FakeGraphs.Stream,
                                   Device=lambda *a: types.SimpleNamespace(synchronize=lambda: None, use=lambda: None,
                                                                           attributes={"L2CacheSize": 50 * 2**20,
                                                                                       "MultiProcessorCount": 132}),
                                   runtime=types.SimpleNamespace(getDevice=lambda: 0,
                                                                 memGetInfo=lambda: (80 * 2**30, 80 * 2**30))))


def _host_kernels(monkeypatch, backend):
    """The CuPy backend's kernels on the host, with kernels.cu's run status: a checked launch (id > 0) that
    writes a NaN/Inf records its id, and every launch after it does nothing; launches under capture are
    recorded into the graph."""
    fake = _fake_cupy()
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)

    def frozen(status, launch):
        return not isinstance(status, np.intp) and status[0] != 0 and status[0] != launch

    def mix(M, src, dst, status=None):
        def launch():
            if not frozen(status, 0):
                dst[...] = M.csr @ np.asarray(src)
        _FakeGraphs.run(launch)

    def combine(out, coefs, blocks, status, launch):
        plain = [np.ascontiguousarray(b.view(np.ndarray), dtype=out.dtype) for b in blocks]  # (as _combine_into)
        if not frozen(status, launch) and not _core.combine(
                out.view(np.ndarray), [c.view(np.ndarray) if isinstance(c, np.ndarray) else c for c in coefs], plain):
            if launch and status[0] == 0:
                status[0] = launch

    def mix_lossy(M, src, dst, status, key, p, renormalise, awake, bad=None):
        # the device kernel's twin (tests/test_backends.py checks they agree bit for bit); the key is re-derived
        def launch():
            if not frozen(status, 0):
                c = M.csr
                dst[...] = _core.mix_lossy(c.indptr, c.indices, c.data, np.ascontiguousarray(src), seed=lossy[0],
                                           t=lossy[1], r=lossy[2], p=p, renormalise=renormalise,
                                           awake=None if awake is None else np.asarray(awake).astype(bool),
                                           bad=None if bad is None else np.asarray(bad))
        _FakeGraphs.run(launch)

    lossy = [0, 0, 0]

    def round_key(seed, t, r):  # remember the counters for the host pass (the kernel only needs their hash)
        lossy[:] = [seed, t, r]
        return 0

    monkeypatch.setattr(backend, "_mix_into", mix)
    monkeypatch.setattr(backend, "_combine_into", combine)
    monkeypatch.setattr(backend, "_mix_lossy_into", mix_lossy)
    monkeypatch.setattr(backend, "_device_bad_states",  # the device chains' twin (checked bit for bit too)
                        lambda chain, M, t: chain.bad_states(M.csr.indptr, M.csr.indices, t).copy())
    import rowstoch_fast._hashing as hashing

    monkeypatch.setattr(hashing, "round_key", round_key)
    monkeypatch.setattr(backend, "_kernel", lambda name, width=None: None)  # nothing to compile
    monkeypatch.setattr(backend, "draw_samples",  # the per-sample draws' twin: the compiled host pass (the emulated
                        # kernel equals it: tests/test_backends.py)
                        lambda prefix, reps, ids, rows, key, m: fake.asarray(_core.draw_samples(
                            prefix, np.asarray(reps, dtype=np.int64),
                            np.empty(rows, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64),
                            key, m, ids is None).reshape(-1)))
    monkeypatch.setattr(backend.CupyBackend, "_sample_rows", lambda *args, **kwargs: False)  # (generic operations)
    monkeypatch.setattr(backend, "LINK_KERNEL", "generic")  # (running sums: the generic operations; the emulated
    # device runs link_sums: tests/test_backends.py)
    monkeypatch.setattr(backend, "_mix_arguments", lambda M: ("entry", M, M, M))  # (the graphs' keys)
    monkeypatch.setattr(backend, "_ptr", lambda a: id(a) if not isinstance(a, np.ndarray) else a.ctypes.data)
    return fake


def _on_cpu_and_device(cls, A, x0, G, fake, steps):
    """``cls`` built on the network ``A`` from ``x0`` on the CPU and on the (fake) device, both run ``steps``
    steps of the gradient ``X - G`` (R = 3 for the multi-round methods): ``(cpu, gpu)``."""
    rounds = 3 if cls.multi_round else 1
    cpu = cls.build(A, x0, 0.02, rounds=rounds, **options_for(cls))
    gpu = cls.build(A, fake.asarray(x0), 0.02, rounds=rounds, **options_for(cls))
    assert gpu.backend == "cupy"
    Gd = fake.asarray(G)
    for _ in range(steps):
        cpu.step(feed(cls, lambda X: X - G))
        gpu.step(feed(cls, lambda X: X - Gd))
    return cpu, gpu


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_cupy_backend_glue_on_the_host(name, monkeypatch):
    """The CuPy backend's Python (allocation, deferred checks, graphs, trackers, gathering, resume) for every
    algorithm, with NumPy standing in for CuPy and the CPU for the CSR and combine kernels (tests/cuda_on_host.cpp
    checks those)."""
    from rowstoch_fast.backends import cupy as backend

    fake = _host_kernels(monkeypatch, backend)
    rng = np.random.default_rng(5)
    A = for_algorithm(REGISTRY[name], topology.erdos_renyi(12, 0.3, seed=2))
    G = rng.standard_normal((2, 12, 3))
    x0 = rng.standard_normal((2, 12, 3))
    cls = REGISTRY[name]
    cpu, gpu = _on_cpu_and_device(cls, A, x0, G, fake, 40)
    Gd = fake.asarray(G)
    full = gpu.gather_x()
    assert type(full) is np.ndarray and rel(full, cpu.x) < 1e-12
    if cls.multi_round:
        assert len(gpu._ops._graphs) >= 2 and gpu._ops.use_graphs  # the rounds ran as replayed graphs
    resumed = cls.from_state_dict(gpu.state_dict(), **{k: v for k, v in cls.problem_matrices(A).items()
                                                       if k in cls.matrices}, backend="cupy")
    resumed.step(feed(cls, lambda X: X - Gd))
    cpu.step(feed(cls, lambda X: X - G))
    assert rel(resumed.gather_x(), cpu.x) < 1e-12
    with pytest.raises(TypeError, match=r"must be a CuPy \(device\) array|[A-Za-z]+ steps with a per-sample oracle|ADMM steps with an oracle"):
        gpu.step(lambda X: np.asarray(G))
    with pytest.raises(DivergenceError, match="non-finite gradient"):
        gpu.step(feed(cls, lambda X: X * np.nan))
        gpu.x


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("cause", ["gradient", "iterate"])
def test_cupy_deferred_checks_raise_the_per_step_error(name, cause, monkeypatch):
    """On the device the NaN/Inf check is read every check_every steps: the error still names the iteration and
    node a per-step check names, and the optimizer is rolled back to the same last finite state, from which it
    goes on like the CPU one."""
    from rowstoch_fast.backends import cupy as backend

    if cause == "iterate" and REGISTRY[name].stable_for_any_lr:
        pytest.skip(f"{name} converges for any step size: its iterates do not overflow")
    fake = _host_kernels(monkeypatch, backend)
    rng = np.random.default_rng(6)
    A = for_algorithm(REGISTRY[name], topology.erdos_renyi(12, 0.3, seed=3))
    x0 = rng.standard_normal((12, 3))
    cls = REGISTRY[name]
    rounds = 2 if cls.multi_round else 1
    bad_at = 11  # the gradient call that goes bad

    def make_grad():
        calls = [0]

        def grad(X):
            calls[0] += 1
            G = X - 1.0
            if cause == "gradient" and calls[0] == bad_at:
                G = G.copy()
                G[4, 1] = np.nan
            return G
        return grad

    lr = 0.02 if cause == "gradient" else 1e150  # the iterates overflow
    cpu = cls.build(A, x0, lr, rounds=rounds)
    gpu = cls.build(A, fake.asarray(x0), lr, rounds=rounds)
    gpu._ops.check_every = 8
    errors = {}
    for opt, dev in ((cpu, False), (gpu, True)):
        grad = feed(cls, make_grad())
        with pytest.raises(DivergenceError) as info:
            for _ in range(40):
                opt.step(grad)
            opt.x
        errors[dev] = info.value
    assert (errors[True].iteration, errors[True].node, errors[True].what) == \
        (errors[False].iteration, errors[False].node, errors[False].what)
    assert gpu.iteration == cpu.iteration
    assert gpu.calls == cpu.calls  # (the steps the device ran past the failure, rolled back, count nothing)
    # (bit for bit through the kernels; per-link running sums are generic array operations here (LINK_KERNEL) and
    # a compiled pass on the CPU, and a method without gossip sums its rows as a matrix-vector product on the
    # device: the same values up to the order of the sums)
    equal = np.testing.assert_array_equal if cls.matrices and not cls.per_link_state else \
        (lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13))
    equal(gpu.gather_x(), cpu.x)
    for name_ in cls.state:
        equal(gpu.gather_state(name_), cpu.gather_state(name_))
    if cause == "gradient":  # and it goes on from there like the CPU one
        for opt, G in ((cpu, 0.5 * x0), (gpu, fake.asarray(0.5 * x0))):
            for _ in range(3):
                opt.step(feed(cls, lambda X: X - G))
        equal(gpu.gather_x(), cpu.x)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_float32_end_to_end_follows_float64(name):
    """Matrix, iterates and gradients in float32: within 1e-5 (relative) of the float64 run on the same matrix (its
    float32 weights in float64: EXTRA, NIDS and Exact Diffusion sum their corrections over the whole past, so a
    W whose float32 rows sum to 1 +- 3e-8 alone moves them 5e-5 in 200 steps, the same in any precision)."""
    rng = np.random.default_rng(9)
    A = for_algorithm(REGISTRY[name], topology.erdos_renyi(64, 0.15, seed=4))
    Q, b = rng.uniform(0.5, 2.0, (64, 4)), rng.standard_normal((64, 4))
    Q32, b32 = Q.astype(np.float32), b.astype(np.float32)
    cls = REGISTRY[name]
    ref = cls.build(A.astype(np.float32).astype(np.float64), np.zeros(4), 0.002, tracker="perron")
    low = cls.build(A.astype(np.float32), np.zeros(4, np.float32), 0.002, tracker="perron")
    for _ in range(200):
        ref.step(feed(cls, lambda X: Q * X - b))
        low.step(feed(cls, lambda X: Q32 * X - b32))
    assert low.x.dtype == np.float32 and low._cur[low.model].dtype == np.float32
    assert rel(low.x, ref.x) < 1e-5, rel(low.x, ref.x)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_cupy_backend_runs_varying_networks_like_the_cpu(name, monkeypatch):
    """Every algorithm on a lossy, sleepy, scheduled network through the CuPy backend's Python (host stand-ins
    for the kernels, the tracker's V_t on the 'device'): the CPU's iterates."""
    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.network import Lossy, Schedule, Sleepy

    fake = _host_kernels(monkeypatch, backend)
    A = topology.erdos_renyi(14, 0.3, seed=2)
    lossy = Lossy(Schedule([A, topology.exponential(14)]), 0.3, seed=1)
    bursty = Lossy(A, 0.9, seed=3, model="gilbert-elliott", p_bad=0.3, p_recover=0.3)
    net = Sleepy(lossy if name < "m" else bursty, 0.8, seed=2)  # half the algorithms on each
    x0 = np.random.default_rng(3).standard_normal((14, 2))
    cls = REGISTRY[name]
    rounds = 2 if cls.multi_round else 1
    if not cls.applies_to(net):  # an undirected network's method: refused at once, naming what it needs
        with pytest.raises(ValueError, match=f"^{cls.__name__}: [WCA] must be (a static|doubly stochastic)"):
            cls.build(net, x0, 0.02, rounds=rounds)
        return
    cpu = cls.build(net, x0, 0.02, rounds=rounds)
    gpu = cls.build(net, fake.asarray(x0), 0.02, rounds=rounds)
    G = np.random.default_rng(4).standard_normal((14, 2))
    Gd = fake.asarray(G)
    for _ in range(12):
        cpu.step(feed(cls, lambda X: X - G))
        gpu.step(feed(cls, lambda X: X - Gd))
    np.testing.assert_allclose(gpu.gather_x(), cpu.x, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_assigning_lr_between_steps_continues_like_a_restart_with_that_lr(name):
    """``opt.lr = new`` between steps (a step-size schedule): checked, and the state derived from lr (Pull-Diag-GT's
    x - lr y, FROST's per-node steps) recomputed, so the run goes on exactly as ``from_state_dict(state, lr=new)``
    does; it was a plain attribute (NaN accepted, x - lr y kept from the old lr for one step). The
    hyperparameters the buffers and trackers depend on cannot be assigned."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    rng = np.random.default_rng(1)
    b, x0 = rng.standard_normal((10, 3)), rng.standard_normal((10, 3))
    opt = cls.build(A, x0, 0.01, rounds=2 if cls.multi_round else 1)
    for _ in range(4):
        opt.step(feed(cls, lambda X: X - b))
    state = opt.state_dict()
    opt.lr = np.float64(0.03)  # NumPy scalars too
    assert opt.lr == 0.03 and type(opt.lr) is float and float(opt.state_dict()["lr"]) == 0.03
    again = cls.from_state_dict(state, **({} if not cls.matrices else cls.problem_matrices(A)), lr=0.03)
    for _ in range(4):
        opt.step(feed(cls, lambda X: X - b))
        again.step(feed(cls, lambda X: X - b))
    np.testing.assert_array_equal(opt.x, again.x)
    for bad, error in ((float("nan"), ValueError), (-1.0, ValueError), ("0.1", TypeError)):
        with pytest.raises(error, match="lr must be"):
            opt.lr = bad
    assert opt.lr == 0.03

    def schedule_inside(X):
        opt.lr = 0.01
        return X - b
    with pytest.raises(RuntimeError, match="lr can change between steps only"):
        opt.step(feed(cls, schedule_inside))
    assert opt.lr == 0.03
    for fixed in {"rounds", *cls.hyper} - {"lr"}:
        with pytest.raises(AttributeError, match=f"{fixed} cannot change once {cls.__name__} is built|property "
                                                 f"'{fixed}' of '{cls.__name__}' object has no setter|"
                                                 f"can't set attribute '{fixed}'|can't set attribute$"):  # (read-only
            # properties; Python 3.9's message names no attribute)
            setattr(opt, fixed, getattr(opt, fixed, 1))


@pytest.mark.parametrize("form", ["atc", "frost"])
@pytest.mark.parametrize("tracker", ["perron", "exact"])
def test_the_gpu_step_negates_the_frozen_tracker_once(monkeypatch, form, tracker):
    """Pull-Diag-GT's y phase on the CuPy backend takes -D_t^{-1}: the device table is negated once for the
    steps before the tracker freezes and the frozen row once for the rest of the run (each step made a negation
    kernel and an allocation), the iterates unchanged (the CPU's, bit for bit here)."""
    from rowstoch_fast.backends import cupy as backend

    fake = _host_kernels(monkeypatch, backend)
    negations = []
    monkeypatch.setattr(_HostDeviceArray, "__rmul__", lambda a, c: negations.append(1) or np.multiply(c, a),
                        raising=False)
    A = topology.erdos_renyi(12, 0.3, seed=2)
    rng = np.random.default_rng(3)
    G, x0 = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    cpu = PullDiagGT(A, x0, 0.02, rounds=2, tracker=tracker, form=form)
    gpu = PullDiagGT(A, fake.asarray(x0), 0.02, rounds=2, tracker=tracker, form=form)
    frozen = gpu._tracker.frozen_at
    Gd = fake.asarray(G)
    for _ in range(frozen + 6):
        cpu.step(lambda X: X - G)
        gpu.step(lambda X: X - Gd)
    np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
    assert len(negations) == 2  # the device table once (for t < frozen_at), then the frozen row once
    assert tracker_row(gpu, frozen + 9, -1.0) is tracker_row(gpu, frozen, -1.0)


def test_pull_diag_gd_on_the_gpu_scales_the_frozen_row_once_per_lr(monkeypatch):
    """Pull-Diag-GD's -lr D_t^{-1}: computed once after the tracker freezes, again after ``opt.lr = ...``; the
    CPU's iterates bit for bit."""
    from rowstoch_fast import PullDiagGD
    from rowstoch_fast.backends import cupy as backend

    fake = _host_kernels(monkeypatch, backend)
    products = []
    monkeypatch.setattr(_HostDeviceArray, "__rmul__", lambda a, c: products.append(c) or np.multiply(c, a),
                        raising=False)
    A = topology.erdos_renyi(12, 0.3, seed=2)
    rng = np.random.default_rng(4)
    G, x0 = rng.standard_normal((12, 3)), rng.standard_normal((12, 3))
    cpu, gpu = PullDiagGD(A, x0, 0.02, tracker="perron"), PullDiagGD(A, fake.asarray(x0), 0.02, tracker="perron")
    Gd = fake.asarray(G)
    for lr in (0.02, 0.01):
        cpu.lr = gpu.lr = lr
        for _ in range(5):
            cpu.step(lambda X: X - G)
            gpu.step(lambda X: X - Gd)
    np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
    assert products == [-0.02, -0.02, -0.01]  # t = 0 (before the perron tracker freezes), frozen, new lr


def test_a_bad_value_in_a_state_is_named():
    """A NaN planted in a state was reported as divergence blaming the learning rate; a bad hyperparameter did not
    say it came from the state (issue 35)."""
    import rowstoch_fast as rf

    opt = rf.PullDiagGT(rf.topology.exponential(8), np.zeros((8, 3)), 0.01)
    state = opt.state_dict()
    x = state["x"].copy()
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"state\['x'\] holds a NaN or Inf \(node 3\): the state is damaged"):
        rf.PullDiagGT.from_state_dict({**state, "x": x})
    with pytest.raises(ValueError, match="state: lr must be finite and > 0, got -1.0 \\(the saved 'lr'"):
        rf.PullDiagGT.from_state_dict({**state, "lr": np.array(-1.0)})
    with pytest.raises(TypeError, match=r"state\['y'\] must hold numbers, got dtype <U1"):
        rf.PullDiagGT.from_state_dict({**state, "y": np.full((8, 3), "a")})


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_gradient_read_where_grad_fn_returned_it_equals_a_copied_one(name):
    """Methods that only read this step's gradients take them where grad_fn returned them (no copy on the CPU):
    grad_fn returning the read-only view of the iterate itself, a copy of it, or a strided array gives the same
    iterates bit for bit."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    x0 = np.random.default_rng(2).standard_normal((10, 3))
    runs = []
    for grad in (lambda X: X, lambda X: np.array(X), lambda X: np.asfortranarray(X),
                 lambda X: np.array(X, dtype=np.float32)):
        opt = cls.build(A, x0, 0.01, rounds=2 if cls.multi_round else 1)
        fed = feed(cls, grad)
        for _ in range(6):
            opt.step(fed)
        runs.append(opt.x)
    for r in runs[1:3]:
        np.testing.assert_array_equal(r, runs[0])
    # (float32 gradients: their rounding relative to the iterates' scale, not to an entry that passes near 0, as a
    # heavy-ball DSGD's 3.5e-4 did: helper 238)
    np.testing.assert_allclose(runs[3], runs[0], rtol=1e-6, atol=1e-6 * np.abs(runs[0]).max())


@pytest.mark.parametrize("name", ["sonata", "gt-saga-atc", "aug-dgm", "pull-diag-gt", "diging"])
def test_a_round_is_one_iterations_exchange_whether_its_vectors_leave_at_once_or_in_sequence(name):
    """The paper's convention, one for the whole registry: SONATA and GT-SAGA-ATC, which mix their trackers after
    their models as AugDGM and Pull-Diag-GT do, get as many iterations from a budget of rounds as DIGing, whose two
    vectors leave at once (they had counted two rounds per iteration, and got half the iterations); ``traffic()``
    still counts both messages of the sequential methods."""
    cls = REGISTRY[name]
    assert cls.iterations_for(120) == 120
    A = topology.exponential(8)
    opt = cls(**cls.problem_matrices(for_algorithm(cls, A)), x0=np.zeros((8, 3)), lr=0.01)
    grad = (lambda X: X - 1.0)
    for _ in range(3):
        opt.step(feed(cls, grad))
    assert opt.communication_rounds == 3
    sequential = 1 if name == "diging" else 2  # (DIGing packs x and y into one message; the others send twice)
    assert opt.traffic()["messages"] == 3 * sequential * sum(opt._edges.values())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_two_buffers_of_a_block_never_share_memory(name):
    """A block a step leaves as it was stays in its buffer on the host (``_carry``: no copy); the commit then
    hands the next step the spare one. After every step each block's current and next buffers are apart (the
    next step writes one while it reads the other), whatever the method carried."""
    opt, grad = _stepped(name)
    for _ in range(9):
        opt.step(grad)
        buffers = [(side, block, getattr(opt, side)[block]) for side in ("_cur", "_nxt") for block in opt.state]
        for i, (side, block, one) in enumerate(buffers):  # (a block carried under another name too: _carry_as)
            for other_side, other, two in buffers[i + 1:]:
                assert not np.shares_memory(one, two), (name, opt.iteration, side, block, other_side, other)


def _stepped(name):
    """``(optimizer, grad_fn)`` of the registered method ``name`` on a 10-node graph of its kind."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.3, seed=2))
    x0 = np.random.default_rng(3).standard_normal((10, 2))
    return cls.build(A, x0, 0.02, **options_for(cls)), feed(cls, lambda X: X - 1.0)


def test_carrying_two_blocks_from_one_source_is_refused(monkeypatch):
    """_carry_as's contract (distinct sources, each of its destination's shape), broken, is a RuntimeError naming
    it at the step that broke it, and the state stays as it was (not two blocks sharing a buffer a step later)."""
    opt, grad = _stepped("extra")
    opt.step(grad)
    carry = type(opt)._carry_as
    monkeypatch.setattr(opt, "_carry_as", lambda cur, nxt, pairs: carry(opt, cur, nxt, {"x_prev": "x", "g_prev": "x"}))
    before = {name: block.copy() for name, block in opt._cur.items()}
    with pytest.raises(RuntimeError, match="share one buffer"):
        opt.step(grad)
    assert opt.iteration == 1 and all(np.array_equal(opt._cur[name], before[name]) for name in before)


PREVIOUS = {"x_prev": "x", "g_prev": "g"}


@pytest.mark.parametrize("name, moved", [("extra", PREVIOUS), ("nids", PREVIOUS), ("pg-extra", PREVIOUS),
                                         ("prox-nids", PREVIOUS), ("abm", {"x_prev": "x"}),
                                         ("gt-sarah", {"x_prev": "x"}), ("k-gt", {"x_round": "x"}),
                                         ("dinno", {"x_round": "x"})])
def test_a_previous_iterate_is_kept_in_its_buffer_not_copied(name, moved):
    """The blocks a step keeps as the previous iterate (or a round's start) take the buffer they were in
    (``_carry_as``: no copy, two block passes less); the run equals the registry's reference (the iterates
    test) and every buffer stays apart from the others (above)."""
    opt, grad = _stepped(name)
    for _ in range(2):
        opt.step(grad)
    if name in ("k-gt", "dinno"):
        while opt.iteration % opt.local_steps:  # (to a round's start)
            opt.step(grad)
    before = dict(opt._cur)
    opt.step(grad)
    for dst, src in moved.items():
        assert opt._cur[dst] is before[src], (name, dst, src)


def test_a_carried_block_stays_in_its_buffer_and_a_failed_step_after_it_changes_nothing():
    """LT-ADMM's iterations without a round keep z, e and c where they are (they were copied: 3 of its 6 block
    passes); a step that fails after carrying them leaves the state and the blocks' buffers as they were, and the
    run goes on bit for bit as one that never failed."""
    W = topology.ring(8, directed=False, weights="metropolis")
    x0 = np.random.default_rng(4).standard_normal((8, 3))
    opt, plain = (REGISTRY["lt-admm"](W, x0, 0.05, local_steps=4) for _ in range(2))
    grad = lambda X: X - 2.0  # noqa: E731
    for o in (opt, plain):
        o.step(grad)  # (iteration 0 sends; 1, 2 and 3 do not)
    kept = {name: opt._cur[name] for name in ("z", "e", "c")}
    opt.step(grad)
    plain.step(grad)
    assert all(opt._cur[name] is kept[name] for name in kept)
    before = {name: (opt._cur[name], opt._cur[name].copy()) for name in opt.state}
    with pytest.raises(DivergenceError):
        opt.step(lambda X: np.full_like(X, np.nan))
    assert opt.iteration == 2
    for name, (buffer, values) in before.items():
        assert opt._cur[name] is buffer and np.array_equal(buffer, values)
    for _ in range(10):
        opt.step(grad)
        plain.step(grad)
    np.testing.assert_array_equal(opt.x, plain.x)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_hyperparameter_is_judged_before_the_build_as_the_constructor_judges_it(name):
    """``check_hyper`` (what ``Algorithm`` and ``compare(hyper=...)`` run before anything is built; a bad
    momentum was refused only when ABm's turn came, after the comparison's other methods had run) refuses what
    the constructor refuses, with its words, and nothing it accepts."""
    import inspect

    from rowstoch_fast.runner import algorithm_options

    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.3, seed=2))
    x0 = np.zeros((10, 2))
    params = inspect.signature(cls.__init__).parameters
    values = (-5, 0, 0.5, 1, 2, 7, 1e9, float("nan"), float("inf"), "x", None, True)
    refused = 0
    for option in algorithm_options(name):
        if option in ("regularizer", "comm", "partition"):
            continue
        for value in values + (("atc", "frost", "frots") if option == "form" else ()):
            options = {**options_for(cls), option: value}
            try:
                cls.build(A, x0, 0.02, **options)
                built = None
            except (ValueError, TypeError) as exc:
                built = exc
            try:
                cls.check_hyper(A.n, 0.02, rounds=1, tracker="exact",
                                **{"check_finite": True, **{k: v for k, v in options.items() if k in params}})
                probed = None
            except (ValueError, TypeError) as exc:
                probed = exc
            if probed is not None:
                refused += 1
                assert built is not None, f"{option}={value!r}: the probe refused what the constructor built"
                assert type(built) is type(probed) and str(built) == str(probed)
            elif built is not None and value is not None:
                pytest.fail(f"{option}={value!r}: the constructor refused it ({built}) but the probe let it by")
    assert refused  # (check_finite="x" at least)
    for lr in (-1.0, float("nan"), np.full((2, 1, 1), 0.02), np.full((2, 1, 1), -0.02)):  # (the rate, as Algorithm
        # passes it with rounds and the tracker)
        try:
            cls.build(A, x0 if np.ndim(lr) < 3 else np.zeros((2, 10, 2)), lr, **options_for(cls))
            built = None
        except (ValueError, TypeError) as exc:
            built = exc
        try:
            cls.check_hyper(A.n, lr, rounds=1, tracker="exact", **options_for(cls))
            probed = None
        except (ValueError, TypeError) as exc:
            probed = exc
        assert (built is None) == (probed is None) and str(built) == str(probed), (lr, built, probed)


def test_a_float32_problem_runs_every_method_in_float32():
    """A float32 matrix and objective (the command line's --dtype float32) ran the undirected methods in float64
    (their W rebuilt doubly stochastic at the default dtype) and the methods without a matrix, centralized and
    federated, too (objective.x0() is float64): a float32 run in float64, unsaid (helper 117)."""
    import warnings

    from rowstoch_fast import composite, objectives, topology
    from rowstoch_fast.runner import Algorithm, build_replicas

    f = objectives.LogisticL2.synthetic(8, total=512, d=5, batch=16, dtype=np.float32)
    ran = set()
    for A in (topology.exponential(8), topology.by_name("ring", 8, undirected=True, weights="metropolis")):
        A32 = A.astype(np.float32)
        for name in algorithm_names():
            cls = REGISTRY[name]
            if not cls.applies_to(A32):
                continue
            obj = f + composite.L1(0.01) if cls.composite else f
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt = build_replicas(Algorithm(A32, cls.default_lr(8), method=name), obj, 1)
            assert opt.x.dtype == np.float32, (name, opt.x.dtype)
            for k in cls.matrices:
                assert getattr(opt, k).dtype == np.float32, (name, k)
            ran.add(name)
    assert {"diging", "centralized", "fedavg", "dgd"} <= ran
    A64 = topology.exponential(8)  # (a float64 network, a float32 objective: every method in float64, as one run)
    for name in ("centralized", "fedavg", "diging", "pull-diag-gt"):
        opt = build_replicas(Algorithm(A64, REGISTRY[name].default_lr(8), method=name), f, 1)
        assert opt.x.dtype == np.float64, (name, opt.x.dtype)


def test_a_float32_run_at_its_optimum_is_not_said_below_it():
    """f(x_bar) in float32 rounds to steps of 7e-9 at |f*| = 0.1: an exact method's records fell 1.5e-8 below f*
    and every float32 run warned that the objective's f* was not its minimum (helper 117)."""
    import warnings

    from rowstoch_fast import objectives, run, topology
    from rowstoch_fast.runner import Algorithm

    f = objectives.Quadratic.random(8, 5, seed=1, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        h = run(Algorithm(topology.exponential(8).astype(np.float32), 0.05, method="diging"), f, 600,
                record_every=20, progress=False)
    assert h.frame["suboptimality"].min() <= 0  # (it reached f* to float32 rounding: the case that warned)


def test_an_optimum_off_on_data_in_small_units_is_said():
    """The warning's bar was 1e-8 of max(1, |f*|): on data 1e-5 smaller (a start 3.8e-10 above f*) an f* off by
    1e-13, 2.6e-4 of the start, was never said (helper 265). Relative to the data's units now; an exact f* is still
    not said off."""
    import warnings

    from rowstoch_fast import objectives, run, topology
    from rowstoch_fast.runner import Algorithm

    base = objectives.LeastSquares.synthetic(8, samples_per_node=10, d=4, seed=3)
    H, y = np.asarray(base.H).reshape(-1, 4) * 1e-5, np.asarray(base.y).reshape(-1) * 1e-5

    class Off(objectives.LeastSquares):
        delta = 0.0

        def optimum(self):
            best = super().optimum()
            return best._replace(value=best.value + self.delta)

    W = topology.ring(8, directed=False, weights="metropolis")
    for delta, said in ((0.0, False), (1e-13, True)):
        f = Off(H, y, 8)
        f.delta = delta
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            h = run(Algorithm(W, 1e9, method="extra"), f, 3000, record_every=100, progress=False)
        assert h.frame["suboptimality"].min() < (-0.5 * delta if said else 1e-20)  # (below the f* off; else at f*
        # to rounding, on either side of it as the compiler rounds)
        assert any("fell below the f*" in str(w.message) for w in caught) == said, [str(w.message) for w in caught]


def test_build_takes_a_matrix_it_would_derive_as_given():
    """Helper 252: ``DecentralizedOptimizer(reps, "push-pull", A, C=my_C)`` met Python's "got multiple values for
    keyword argument 'C'" (``build`` derives C from A's graph): a C given is the one mixed with, none gives
    the out-degree weights of A's graph as before."""
    adj = np.eye(6) + np.roll(np.eye(6), 1, axis=1)
    adj[0, 3] = 1.0
    A = MixingMatrix(adj, normalize=True)
    C = MixingMatrix(0.3 * adj + np.eye(6), normalize=True, stochastic="column")
    cls = REGISTRY["push-pull"]
    assert np.array_equal(cls.build(A, np.zeros((6, 2)), 0.01, C=C).C.toarray(), C.toarray())
    assert np.array_equal(cls.build(A, np.zeros((6, 2)), 0.01).C.toarray(), out_degree_weights(A).toarray())
