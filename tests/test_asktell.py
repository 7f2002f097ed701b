"""Ask/tell and a settable ``x``: the iterates of ``step`` bit for bit, on every algorithm and backend, and the
misuses refused with a sentence."""

import numpy as np
import pytest

from rowstoch_fast import DGD, DivergenceError, PullDiagGT, topology
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.network import Delayed, Lossy
from conftest import for_algorithm

BATCH = sorted(name for name, cls in REGISTRY.items() if cls.gradients == "batch")


def _problem(n=10, d=3, seed=0):
    rng = np.random.default_rng(seed)
    Q, b = rng.uniform(0.5, 2.0, (n, d)), rng.standard_normal((n, d))
    return (lambda X: Q * X - b), rng.standard_normal((n, d))


def _stepped_and_told(cls, A, x0, grad, steps, **kw):
    """The same optimizer run by ``step`` and by ``ask``/``tell`` until both are at iteration ``steps``."""
    stepped, told = cls.build(A, x0, 0.02, **kw), cls.build(A, x0, 0.02, **kw)
    for _ in range(steps):
        stepped.step(grad)
    asks = 0
    while told.iteration < steps:
        X = told.ask()
        assert not X.flags.writeable
        told.tell(grad(X))
        asks += 1
    return stepped, told, asks


@pytest.mark.parametrize("name", BATCH)
def test_ask_tell_equals_step_bit_for_bit(name):
    cls = REGISTRY[name]
    grad, x0 = _problem()
    rounds = {"rounds": 2} if cls.multi_round else {}
    for A in (for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=1)),
              Delayed(Lossy(topology.erdos_renyi(10, 0.4, seed=1), 0.2, seed=3), 2, seed=4)):
        if not cls.applies_to(A):
            continue
        stepped, told, asks = _stepped_and_told(cls, A, x0, grad, 15, **rounds)
        np.testing.assert_array_equal(told.x, stepped.x)
        assert told.state_dict().keys() == stepped.state_dict().keys()
        for key, value in stepped.state_dict().items():
            np.testing.assert_array_equal(told.state_dict()[key], value, err_msg=key)
        # (a first gradient at x0 where the method starts from one; none where an iteration takes none)
        assert 15 - cls.gradient_free_iterations <= asks <= 16


def test_ask_tell_equals_step_on_the_cupy_backend_glue(monkeypatch):
    """The GPU backend's Python with NumPy standing in for CuPy (tests/test_algorithms.py's host kernels)."""
    from rowstoch_fast.backends import cupy as backend
    from test_algorithms import _host_kernels

    fake = _host_kernels(monkeypatch, backend)
    grad, x0 = _problem()
    for name in ("pull-diag-gt", "push-pull", "dsgd"):
        cls = REGISTRY[name]
        A = topology.erdos_renyi(10, 0.4, seed=1)
        stepped = cls.build(A, fake.asarray(x0), 0.02)
        told = cls.build(A, fake.asarray(x0), 0.02)
        assert told.backend == "cupy"
        for _ in range(12):
            stepped.step(grad)
        while told.iteration < 12:
            told.tell(grad(told.ask()))
        np.testing.assert_array_equal(told.gather_x(), stepped.gather_x())


def test_asking_twice_returns_the_same_points_and_tell_needs_an_ask():
    grad, x0 = _problem()
    opt = PullDiagGT(topology.exponential(10), x0, lr=0.05)
    with pytest.raises(RuntimeError, match=r"tell\(G\) without a pending ask\(\)"):
        opt.tell(x0)
    X = opt.ask()
    assert opt.ask() is X
    np.testing.assert_array_equal(X, x0)  # the first gradients: at x0
    with pytest.raises(ValueError, match=r"G has shape \(3,\), expected \(10, 3\)"):
        opt.tell(np.zeros(3))
    with pytest.raises(TypeError, match="got None"):
        opt.tell(None)
    with pytest.raises(TypeError, match="real numeric"):
        opt.tell(np.full((10, 3), "a"))
    opt.tell(grad(X))  # the points stay asked after the refused ones
    with pytest.raises(RuntimeError, match=r"needs gradients at new points .* no ask\(\) has handed out yet"):
        opt.tell(grad(X))  # (helper 196: taken as the gradients at x1, which no ask() had handed out)
    assert opt.iteration == 0 and opt.ask() is not X  # (x0's gradients in; the first step asks at x1)
    opt.tell(grad(opt.ask()))
    assert opt.iteration == 1
    X = opt.ask()
    opt.step(grad)  # a step of its own: the points asked before are dropped, and tell says so (helper 252)
    with pytest.raises(RuntimeError, match=r"tell\(G\): step\(\) ran since ask\(\) and dropped its points"):
        opt.tell(grad(X))
    dgd = DGD(topology.exponential(10), x0, lr=0.05)
    X = dgd.ask()
    dgd.x = x0 + 1.0  # (x set: the points asked are no longer the step's)
    with pytest.raises(RuntimeError, match=r"changed since ask\(\).*ask\(\) again"):
        dgd.tell(grad(X))
    opt.tell(grad(opt.ask()))
    assert opt.iteration == 3
    X = opt.ask()
    opt.cancel()
    with pytest.raises(RuntimeError, match="without a pending ask"):
        opt.tell(grad(X))
    X = opt.ask()  # (a step, then an explicit cancel: the cancel is what tell says, helper 256)
    opt.step(grad)
    opt.cancel()
    with pytest.raises(RuntimeError, match="without a pending ask"):
        opt.tell(grad(X))


def test_lr_set_between_ask_and_tell_acts_on_what_the_step_computes_from_g():
    """The points asked stay the step's (tell needs them); the update made from G uses the new rate: for DGD,
    the step of the new rate; for Pull-Diag-GT, x - lr y after it."""
    grad, x0 = _problem()
    for cls in (DGD, PullDiagGT):
        A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=1))
        told, stepped = cls.build(A, x0, 0.02), cls.build(A, x0, 0.02)
        for k in range(6):
            X = told.ask()
            told.lr = 0.02 + 0.01 * k
            told.tell(grad(X))
            stepped.lr = 0.02 + 0.01 * k
            stepped.step(grad)
        if cls is DGD:
            np.testing.assert_array_equal(told.x, stepped.x)
        else:  # (the pairs are one behind the steps: the first asks the gradients at x0)
            assert told.lr == stepped.lr and np.isfinite(told.x).all()


@pytest.mark.parametrize("options", [{}, {"rounds": 3}, {"form": "frost"}, {"reps": 2}])
def test_pull_diag_gt_takes_a_rate_set_between_ask_and_tell_from_its_gradients_on(options):
    """Helper 209: Pull-Diag-GT's compiled y phase read the rate from before the gradients, so that one assigned
    between ask and tell (what every torch scheduler does) waited an iteration while ``opt.lr`` said the new one:
    x - lr y after the gradients used the old rate. The same steps with the rate assigned between steps agree now,
    in each branch (the fused phase, more rounds, the FROST form, per-replica rates)."""
    A = topology.exponential(8)
    reps = options.pop("reps", None)
    b = np.arange(8.0)[:, None] if reps is None else np.arange(16.0).reshape(2, 8, 1)
    x0 = np.zeros_like(b)

    def g(X):
        return X - b

    lr = (lambda v: v) if reps is None else (lambda v: np.full((reps, 1, 1), v))
    told, stepped = PullDiagGT(A, x0, lr(0.1), **options), PullDiagGT(A, x0, lr(0.1), **options)
    told.step(g)
    X = told.ask()
    told.lr = lr(0.05)
    told.tell(g(X))
    told.step(g)
    stepped.step(g)
    stepped.step(g)
    stepped.lr = lr(0.05)
    stepped.step(g)
    np.testing.assert_array_equal(told.x, stepped.x)


@pytest.mark.parametrize("name", BATCH)
def test_a_rate_set_between_ask_and_tell_keeps_the_points_asked(name, monkeypatch):
    """The step tell makes needs its gradients at the points ask returned: the part before them runs with the
    rate they were asked with, whatever the method (13 of them use the rate there); the new rate then applies."""
    from rowstoch_fast.algorithms import _asktell

    seen = []
    answer = _asktell._Probe.__call__

    def recording(self, X):
        if self.answer is not None:
            seen.append(np.array(X))
        return answer(self, X)

    monkeypatch.setattr(_asktell._Probe, "__call__", recording)
    cls = REGISTRY[name]
    grad, x0 = _problem()
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=1))
    opt = cls.build(A, x0, 0.02, **({"rounds": 2} if cls.multi_round else {}))
    for k in range(5):
        X = np.array(opt.ask())
        opt.lr = 0.02 + 0.005 * (k + 1)
        assert opt.lr == 0.02 + 0.005 * k or k == 0 and opt.lr == 0.02  # (the rate asked with, until tell)
        opt.tell(grad(X))
        np.testing.assert_array_equal(seen[-1], X)
        assert opt.lr == 0.02 + 0.005 * (k + 1)
    X = opt.ask()
    opt.lr = 0.5
    opt.cancel()  # (dropped: the rate applies now, to the state too)
    assert opt.lr == 0.5


def test_a_failing_step_raises_from_tell_and_keeps_the_state():
    grad, x0 = _problem()
    opt = PullDiagGT(topology.exponential(10), x0, lr=0.05)
    for _ in range(4):
        opt.step(grad)
    before = opt.x.copy()
    X = opt.ask()
    with pytest.raises(DivergenceError, match=r"the gradients told \(tell\(G\)\) hold a non-finite gradient at "
                                              r"iteration 5"):  # (not "grad_fn returned", helper 252)
        opt.tell(X * np.nan)
    assert opt.iteration == 4
    np.testing.assert_array_equal(opt.x, before)
    opt.tell(grad(opt.ask()))  # and it goes on
    assert opt.iteration == 5


def test_ask_holds_nothing_between_calls():
    """No helper thread, no reference: an optimizer with points asked is collected like any other."""
    import gc
    import threading
    import weakref

    grad, x0 = _problem()
    before = threading.active_count()
    opt = PullDiagGT(topology.exponential(10), x0, lr=0.05)
    opt.ask()
    state = opt.state_dict()  # (allowed while points are asked)
    assert threading.active_count() == before and int(state["iteration"]) == 0
    gone = weakref.ref(opt)
    del opt
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("name", sorted(name for name, cls in REGISTRY.items() if cls.gradients != "batch"))
def test_a_method_of_an_oracle_refuses_ask(name):
    """A per-sample oracle's method (GT-SAGA, GT-SVRG) or a local prox's (ADMM) has no points to ask at."""
    cls = REGISTRY[name]
    opt = cls.build(for_algorithm(cls, topology.exponential(6)), np.zeros((6, 2)), 0.1)
    with pytest.raises(TypeError, match="per-sample oracle" if cls.gradients == "samples" else "prox"):
        opt.ask()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_setting_x_before_the_first_step_is_building_from_it(name):
    from conftest import feed

    cls = REGISTRY[name]
    grad, x1 = _problem(seed=2)
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=1))
    built = cls.build(A, x1, 0.02)
    moved = cls.build(A, np.zeros_like(x1), 0.02)
    moved.x = x1
    for _ in range(6):
        built.step(feed(cls, grad))
        moved.step(feed(cls, grad))
    np.testing.assert_array_equal(moved.x, built.x)
    if tuple(cls.state) != (cls.model,):
        with pytest.raises(RuntimeError, match="can be set before the first step only"):
            moved.x = x1
    else:  # (DGD, DSGD, ...: x is the whole state, settable at any time)
        moved.x = x1
        np.testing.assert_array_equal(moved.x, x1)


def test_setting_x_is_checked():
    _, x0 = _problem()
    opt = PullDiagGT(topology.exponential(10), x0, lr=0.05)
    with pytest.raises(ValueError, match=r"x must have shape \(10, 3\).*got \(10, 2\)"):
        opt.x = np.zeros((10, 2))
    bad = x0.copy()
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="x must be finite"):
        opt.x = bad
    np.testing.assert_array_equal(opt.x, x0)  # untouched by the refused ones
    with pytest.raises(TypeError, match="real numeric"):
        opt.x = np.full((10, 3), "a")


@pytest.mark.parametrize("then", ["ask and tell", "step"])
def test_a_rate_set_between_ask_and_tell_survives_a_checkpoint_taken_there(then):
    """``opt.lr = ...`` between ask and tell, then ``state_dict()``: the checkpoint held the old rate and the
    resumed run kept it (3.3 off the uninterrupted run after 6 steps). A step made otherwise takes the new rate
    whole, in both runs; a rate set after the resume replaces the one put off."""
    grad, x0 = _problem()
    A = topology.exponential(10)
    opt = DGD(A, x0, lr=0.03)
    for _ in range(3):
        opt.tell(grad(opt.ask()))
    X = opt.ask()
    opt.lr = 0.3
    ckpt = opt.state_dict()
    again = DGD.from_state_dict(ckpt)
    assert again.lr == 0.03
    if then == "step":
        opt.step(grad)
        again.step(grad)
    for _ in range(6):
        opt.tell(grad(opt.ask()))
        again.tell(grad(again.ask()))
    np.testing.assert_array_equal(again.x, opt.x)
    assert again.lr == opt.lr == 0.3
    later = DGD.from_state_dict(ckpt)
    later.lr = 0.01  # (assigned with no points asked: the rate from here, the one put off dropped)
    later.tell(grad(later.ask()))
    assert later.lr == 0.01
