"""Objects as a notebook treats them: copied, pickled, printed, changed after they were built (helper 267)."""

import copy
import importlib
import inspect
import pickle
import pkgutil

import pytest

import rowstoch_fast
from rowstoch_fast.errors import DivergenceError


def _exception_classes():
    found = {}
    for info in pkgutil.walk_packages(rowstoch_fast.__path__, "rowstoch_fast."):
        if any(part in info.name for part in ("torch", "mpi", "cupy", "__main__")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional backend's module
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) \
                    and value.__module__.startswith("rowstoch_fast"):
                found[value.__qualname__] = value
    return found


def test_a_divergence_error_survives_pickle_and_copy_with_what_was_attached():
    # (BaseException rebuilds cls(*args), without the keyword-only arguments: a process pool sweeping rates broke,
    # or waited for ever, at the first divergent rate)
    error = DivergenceError.gradient(7, 3, 6)
    error.history = {"rows": [1, 2]}
    for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error), copy.copy(error)):
        assert type(again) is DivergenceError and str(again) == str(error)
        assert (again.iteration, again.node, again.what, again.history) == (7, 3, "gradient", {"rows": [1, 2]})


def test_every_exception_of_the_package_that_takes_a_message_pickles():
    classes = _exception_classes()
    assert "DivergenceError" in classes and len(classes) >= 8
    for name, cls in classes.items():
        try:
            error = cls("what went wrong")
        except TypeError:  # (one built with other arguments: DivergenceError is tested above)
            continue
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is cls and str(again) == str(error), name


def test_frost_keeps_its_own_per_node_rates():
    # (the caller's array had been kept: changed afterwards, opt.lr and state_dict() said the new rates while the
    # steps ran at the old ones, and a resume from that state ended 3.5 away)
    import numpy as np

    from rowstoch_fast import topology

    A = topology.exponential(8)
    given = np.full(8, 1e-3)
    opt = rowstoch_fast.FROST(A, np.zeros((8, 3)), lr=given)
    given[:] = 0.05
    assert np.all(opt.lr == 1e-3) and np.all(opt.state_dict()["lr"] == 1e-3)
    with pytest.raises(ValueError, match="read-only"):
        opt.lr[0] = 1.0
    opt.lr = given
    given[:] = 0.07
    assert np.all(opt.lr == 0.05)


def test_printing_network_metrics_computes_nothing_and_equality_never_raises():
    # (repr had computed beta: 25 s on a ring of 16,384 nodes, then a BetaNotConverged in place of the text;
    # == had compared the pi arrays: "the truth value of an array is ambiguous")
    import numpy as np

    from rowstoch_fast import topology
    from rowstoch_fast.metrics import BetaNotConverged
    from rowstoch_fast.protocol import pull_diag

    m = topology.ring(8).metrics()
    assert "not computed" in repr(m) and not m._beta
    beta = m.beta
    assert f"beta={beta!r}" in repr(m) and "spectral_gap" in repr(m)
    failed = topology.ring(8).metrics()
    failed._beta.append(BetaNotConverged("no"))
    assert "did not converge" in repr(failed)
    other = topology.ring(8).metrics()
    assert m == m and m != other and m not in [other] and len({m, other}) == 2
    a, b = (pull_diag(topology.ring(8), np.arange(8.0), 3) for _ in range(2))
    assert a == a and a != b and len({a, b}) == 2


@pytest.mark.parametrize("method", ["pull-diag-gt", "extra"])
def test_a_shallow_copy_of_an_optimizer_steps_apart_from_it(method):
    # (copy.copy had shared the state blocks: stepping the copy changed the original's x, 0.36 and 1.2 away)
    import numpy as np

    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.objectives import LeastSquares, Oracle
    from rowstoch_fast.runner import build_replicas

    A = topology.exponential(8) if method == "pull-diag-gt" else topology.ring(8, directed=False,
                                                                                weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=32, d=4, batch=4, seed=1)

    def stepped(k):
        opt = build_replicas(Algorithm(A, 1e-2, method=method), f, 1)
        oracle = Oracle(f, seed=3)
        for _ in range(k):
            opt.step(oracle)
        return opt, oracle

    opt, oracle = stepped(10)
    branch = copy.copy(opt)
    branch.lr = 0.1
    for _ in range(3):
        branch.step(Oracle(f, seed=9))
    for _ in range(10):
        opt.step(oracle)
    assert np.array_equal(opt.x, stepped(20)[0].x)


def test_an_objective_keeps_its_own_data_and_an_optimum_of_what_defines_it_now():
    # (it had kept the caller's arrays, read live by the gradients, beside a cached optimum of the old data: a
    # converged run's suboptimality read 0.43, and DGD tied EXTRA and NIDS; f.lam = 1.0 and a regularizer's lam
    # were half taken, 0.25 and 3.1)
    import numpy as np

    from rowstoch_fast.composite import L1
    from rowstoch_fast.objectives import LeastSquares, LogisticL2, Quadratic

    rng = np.random.default_rng(0)
    H, y = rng.standard_normal((64, 5)), rng.standard_normal(64)
    f = LeastSquares(H, y, 8)
    before = f.optimum()
    H *= 3
    y += 1
    assert f.optimum() == before and not np.shares_memory(f.H, H)
    with pytest.raises(ValueError, match="read-only"):
        f.H[0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        f.optimum().x[0] = 1.0  # (handed out: `err = f.optimum().x; err -= x_hat` had rewritten the cache)
    q, b = rng.uniform(0.5, 2.0, (4, 3)), rng.standard_normal((4, 3))
    g = Quadratic(q, b)
    b[:] = 5.0
    assert not np.allclose(g.minimizer, 5.0)
    frozen = H.copy()
    frozen.setflags(write=False)  # (a read-only array is kept as it is: data too large to hold twice)
    assert np.shares_memory(LeastSquares(frozen, y, 8).H, frozen)
    view = H.view()  # (a read-only view of writeable memory had been kept as it was: the caller's later changes
    view.setflags(write=False)  # to H were the objective's)
    viewed, was = LeastSquares(view, y, 8), H.copy()
    before = viewed.optimum()
    H += 1.0
    assert not np.shares_memory(viewed.H, H) and viewed.optimum() == before
    assert np.array_equal(viewed.H.reshape(64, 5), was)
    made = LeastSquares.synthetic(8, seed=5), LogisticL2.synthetic(8, total=800, batch=10, seed=1)
    for kept in (f.H, f.y, g.q, made[0].H, made[1].Y):
        with pytest.raises(ValueError, match="WRITEABLE"):  # (nor made writeable again: helper 267)
            kept.setflags(write=True)

    lg = LogisticL2.synthetic(8, total=800, batch=10, seed=1)
    lg.optimum()
    lg.lam = 1.0
    assert lg.optimum().value == LogisticL2.synthetic(8, total=800, batch=10, seed=1, lam=1.0).optimum().value
    reg = L1(0.1)
    comp = LeastSquares.synthetic(8, seed=2) + reg
    comp.optimum()
    reg.lam = 1.0
    assert comp.optimum().value == pytest.approx((LeastSquares.synthetic(8, seed=2) + L1(1.0)).optimum().value,
                                                 rel=1e-9)
    part = LogisticL2.synthetic(8, total=800, batch=10, seed=3)
    total = part + LogisticL2.synthetic(8, total=800, batch=10, seed=4)
    first = total.optimum().value
    part.lam = 0.5
    assert total.optimum().value != first


def test_a_step_that_fails_after_its_oracle_drew_puts_the_oracle_back():
    # (Ctrl-C in a hand-written loop, caught and continued, had left the oracle a mini-batch ahead of the optimizer,
    # which rolls back: 5 of 20 continued loops ended elsewhere than an uninterrupted one)
    import numpy as np

    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.objectives import LogisticL2, Oracle
    from rowstoch_fast.runner import build_replicas

    f = LogisticL2.synthetic(8, total=800, batch=10, seed=1)

    def stepped(interrupt_at=None):
        opt = build_replicas(Algorithm(topology.exponential(8), 0.05), f, 1)
        oracle = Oracle(f, seed=2)
        advance = opt._advance
        for k in range(12):
            if k == interrupt_at:
                def failing(grad_fn, cur, nxt, t):
                    advance(grad_fn, cur, nxt, t)  # (the gradients drawn, then the signal)
                    raise KeyboardInterrupt
                opt._advance = failing
                with pytest.raises(KeyboardInterrupt):
                    opt.step(oracle)
                del opt._advance
                assert opt.iteration == k and oracle.iteration == opt.calls["gradient"] == k + 1
            opt.step(oracle)
        return opt.x

    assert np.array_equal(stepped(5), stepped())


def test_objectives_and_oracles_say_what_they_hold():
    # (the default <rowstoch_fast.objectives.LeastSquares object at 0x...> had told a notebook nothing)
    from rowstoch_fast.composite import L1
    from rowstoch_fast.objectives import LeastSquares, Objective, Oracle

    f = LeastSquares.synthetic(4, samples_per_node=8, d=3)
    assert repr(f) == "LeastSquares(n=4, d=3, batch=8)"
    assert repr(2 * f + L1(0.1)) == "2.0 * LeastSquares(n=4, d=3, batch=8) + L1(lam=0.1)"
    oracle = Oracle(f, seed=3)
    oracle(f.x0()[None].repeat(4, 0))
    assert repr(oracle) == "Oracle(LeastSquares(n=4, d=3, batch=8), seed=3, iteration=1)"

    class Mine(Objective):  # (one of the user's without sizes: the default)
        pass

    assert "Mine object at" in repr(Mine())


def test_a_part_swapped_deep_inside_an_objective_drops_the_outer_optimum():
    # (the cache had been keyed on a sum of counts per object: a part swapped for one assigned as often left the
    # sum, and an outer objective's stale f*, as they were, helper 268)
    import numpy as np

    from rowstoch_fast.composite import Scaled, Sum
    from rowstoch_fast.objectives import LeastSquares

    rng = np.random.default_rng(0)
    s1, s2, s3 = (LeastSquares(rng.standard_normal((40, 3)) * (1 + 2 * k), rng.standard_normal(40) + 5 * k, 4)
                  for k in (0, 1, 0))
    s1.n = s1.n
    inner = Sum(s1, s3)
    outer = Scaled(inner, 2.0)
    outer.optimum()
    inner.parts = (s2, s3)
    assert outer.optimum().value == Scaled(Sum(s2, s3), 2.0).optimum().value
