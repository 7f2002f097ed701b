"""Objectives: gradients against NumPy references, sampling properties, determinism."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast import _core, _reference
from rowstoch_fast.objectives import LS_KERNEL_MAX_D, LeastSquares, NonconvexLogistic, Objective, Quadratic


def numpy_logistic_grad(H, Y, rho, x):
    z = H @ x
    coef = -Y / (1.0 + np.exp(Y * z))
    return (coef[:, None] * H).mean(0) + rho * 2 * x / (1 + x * x) ** 2


def numpy_logistic_loss(H, Y, rho, x):
    return np.mean(np.log1p(np.exp(-Y * (H @ x)))) + rho * np.sum(x * x / (1 + x * x))


@pytest.fixture(scope="module")
def small():
    return NonconvexLogistic.synthetic(n=4, total=400, d=5, batch=10, seed=3)


def test_synthetic_data_follows_appendix_e2():
    f = NonconvexLogistic.synthetic(n=8, total=8000, d=10, seed=42)
    assert f.H.shape == (8000, 10) and set(np.unique(f.Y)) == {-1.0, 1.0}
    # y = 1 with probability sigmoid(h^T x_opt): the labels agree with the sign of the margin more often than not
    agree = np.mean(np.sign(f.H @ f.x_opt) == f.Y)
    assert 0.6 < agree < 0.95
    het = NonconvexLogistic.synthetic(n=8, total=8000, d=10, seed=42, heterogeneity=10.0)
    assert not np.array_equal(het.Y, f.Y) and np.array_equal(het.H, f.H)


def test_full_gradient_and_loss_match_numpy(small):
    X = np.random.default_rng(0).standard_normal((4, 5))
    G = small.full_gradient(X)
    L = small.loss(X)
    M = small.samples_per_node
    for i in range(4):
        Hi, Yi = small.H[i * M:(i + 1) * M], small.Y[i * M:(i + 1) * M]
        np.testing.assert_allclose(G[i], numpy_logistic_grad(Hi, Yi, small.rho, X[i]), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(L[i], numpy_logistic_loss(Hi, Yi, small.rho, X[i]), rtol=1e-12)
    G2, L2 = small.evaluate(X)  # the one-pass evaluation the runner records with: the same gradients
    np.testing.assert_array_equal(G2, G)
    np.testing.assert_array_equal(L2, L)


def test_full_gradient_is_the_gradient_of_the_loss(small):
    x = np.random.default_rng(1).standard_normal((4, 5))
    G = small.full_gradient(x)
    eps = 1e-6
    for j in range(5):
        e = np.zeros(5)
        e[j] = eps
        fd = (small.loss(x + e) - small.loss(x - e)) / (2 * eps)
        np.testing.assert_allclose(G[:, j], fd, rtol=1e-6, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3), M=st.integers(1, 40), d=st.sampled_from([1, 2, 5, 10, 16, 17, 23]),
       batch_frac=st.floats(0.0, 1.0), batches=st.integers(1, 3), reps=st.integers(1, 2),
       seed=st.integers(0, 2**64 - 1), iteration=st.integers(0, 2**64 - 1), rep_offset=st.integers(0, 5))
def test_stochastic_gradient_matches_the_reference_transcription(n, M, d, batch_frac, batches, reps, seed, iteration,
                                                                 rep_offset):
    """Same mini-batches as _reference.minibatch (the streams written out in Python), same gradients.

    Covers compile-time row lengths (d <= 16) and run-time ones, and both ways the
    kernel puts its permutation back between mini-batches (M <= 4 B and M > 4 B).
    """
    B = max(1, round(batch_frac * M))
    rng = np.random.default_rng(M * 1000 + d)
    H = rng.standard_normal((n * M, d))
    Y = np.where(rng.random(n * M) < 0.5, -1.0, 1.0)
    X = rng.standard_normal((reps, n, d))
    G = _core.logistic_grad(H, Y, n, 0.01, X, B, batches, seed, iteration, rep_offset)
    want = _reference.logistic_stochastic_gradient(H, Y, n, 0.01, X, B, iteration, seed, batches, rep_offset)
    np.testing.assert_allclose(G, want, rtol=1e-11, atol=1e-13)


def test_stochastic_gradient_matches_the_reference_across_draw_sizes():
    """Bounds M - b cross 2^12 during a draw: 32-bit then 16-bit draws from the same pool of bits."""
    n, M, d, B = 2, 4100, 3, 40
    rng = np.random.default_rng(5)
    H = rng.standard_normal((n * M, d))
    Y = np.where(rng.random(n * M) < 0.5, -1.0, 1.0)
    X = rng.standard_normal((1, n, d))
    G = _core.logistic_grad(H, Y, n, 0.01, X, B, 2, 3, 17)
    np.testing.assert_allclose(G, _reference.logistic_stochastic_gradient(H, Y, n, 0.01, X, B, 17, 3, 2),
                               rtol=1e-12, atol=1e-14)


def test_minibatch_reference_draws_a_uniform_subset():
    """The reference sampler itself: B distinct indices, each index equally likely."""
    counts = np.zeros(7)
    for t in range(7000):
        idx = _reference.minibatch(_reference.stream_key(1, 0, 0, t, 0), 7, 3)
        assert len(set(idx)) == 3 and all(0 <= i < 7 for i in idx)
        counts[idx] += 1
    np.testing.assert_allclose(counts / 7000, 3 / 7, atol=0.03)


def test_stochastic_gradient_is_unbiased_and_a_true_minibatch(small):
    X = np.random.default_rng(2).standard_normal((4, 5))
    Gs = np.array([small.stochastic_gradient(X, k) for k in range(3000)])
    np.testing.assert_allclose(Gs.mean(0), small.full_gradient(X), atol=0.01)
    # batch == all samples: exactly the full gradient (sampling without replacement)
    full = NonconvexLogistic(small.H, small.Y, 4, rho=small.rho, batch=small.samples_per_node)
    np.testing.assert_allclose(full.stochastic_gradient(X, 7), small.full_gradient(X), rtol=1e-12, atol=1e-15)


def test_minibatch_is_drawn_without_replacement(small):
    # With H = one-hot rows and Y = +1, x = 0: the gradient of sample l is -e_l / 2, so a batch
    # sums distinct unit vectors exactly when it has no repeated sample.
    M, n = 8, 2
    H = np.tile(np.eye(M), (n, 1))
    f = NonconvexLogistic(H, np.ones(n * M), n, rho=0.0, batch=5)
    for k in range(200):
        G = f.stochastic_gradient(np.zeros((n, M)), k)
        counts = -2 * 5 * G
        np.testing.assert_allclose(counts.sum(1), 5)
        assert np.all(np.isclose(counts, 0) | np.isclose(counts, 1))


def test_streams_are_deterministic_and_thread_independent(small):
    X = np.random.default_rng(3).standard_normal((4, 5))
    a = small.stochastic_gradient(X, 11, seed=5)
    before = _core.get_num_threads()
    try:
        _core.set_num_threads(1)
        b = small.stochastic_gradient(X, 11, seed=5)
    finally:
        _core.set_num_threads(before)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, small.stochastic_gradient(X, 12, seed=5))
    assert not np.array_equal(a, small.stochastic_gradient(X, 11, seed=6))


def test_batched_repetitions_match_single_ones(small):
    X = np.random.default_rng(4).standard_normal((3, 4, 5))
    G = small.stochastic_gradient(X, 2, seed=1, batches=3)
    for r in range(3):
        np.testing.assert_array_equal(G[r], small.stochastic_gradient(X[r], 2, seed=1, batches=3, rep_offset=r))


@settings(max_examples=40, deadline=None)
@given(reps=st.integers(1, 13), period=st.integers(0, 10), batches=st.integers(1, 3), d=st.sampled_from([1, 3, 10, 16, 23]),
       threads=st.sampled_from([1, 2]), subset=st.booleans())
def test_replicas_that_share_streams_equal_their_own_runs(reps, period, batches, d, threads, subset):
    """``rep_period`` (a tuner's candidates on common streams): each replica ``c`` is, bit for bit, the run of
    its own rows on the streams of repetition ``rep_offset + c % period``, whatever the kernel's schedule (it
    draws a shared mini-batch once for all the replicas that share it), the threads or the nodes asked for."""
    n, M = 4, 60
    rng = np.random.default_rng(reps * 100 + period * 10 + d)
    f = NonconvexLogistic(rng.standard_normal((n * M, d)), np.where(rng.random(n * M) < 0.5, -1.0, 1.0), n,
                          rho=0.01, batch=7)
    nodes = [1, 3] if subset else None
    X = rng.standard_normal((reps, 2 if subset else n, d))
    before = _core.get_num_threads()
    try:
        _core.set_num_threads(threads)
        for width in _core.simd_widths():  # (the rows sharing a batch go W at a time, one replica a lane)
            _core.set_simd_width(width)
            G = f.stochastic_gradient(X, 9, seed=4, batches=batches, rep_offset=2, nodes=nodes, rep_period=period)
            for c in range(reps):
                own = f.stochastic_gradient(X[c:c + 1], 9, seed=4, batches=batches, nodes=nodes,
                                            rep_offset=2 + (c % period if period else c))
                np.testing.assert_array_equal(G[c], own[0])
    finally:
        _core.set_num_threads(before)
        _core.set_simd_width(0)


def test_argument_errors():
    with pytest.raises(ValueError, match=r"total = 100 samples must be divisible by n = 3: pass total= a multiple of "
                                         r"it \(e.g. total=99, "):  # (helper 189: the default total on 6 nodes)
        NonconvexLogistic.synthetic(n=3, total=100)
    with pytest.raises(ValueError, match="batch = 50 exceeds"):
        NonconvexLogistic.synthetic(n=4, total=100, batch=50)
    f = NonconvexLogistic.synthetic(n=2, total=40, d=3, batch=5)
    with pytest.raises(ValueError, match=r"X must have shape \(n, d\) = \(2, 3\)"):
        f.stochastic_gradient(np.zeros((3, 3)), 0)
    with pytest.raises(ValueError, match="labels"):
        NonconvexLogistic(np.zeros((4, 2)), np.array([0.0, 1.0, 1.0, 1.0]), 2)
    with pytest.raises(ValueError, match="batches must be >= 1"):
        f.stochastic_gradient(np.zeros((2, 3)), 0, batches=0)
    with pytest.raises(ValueError, match="q must be positive"):
        Quadratic(-np.ones((2, 2)), np.ones((2, 2)))
    # the stream's keys are checked before they reach the kernels (64-bit words), for every objective
    rng = np.random.default_rng(0)
    for obj in (f, Quadratic.random(2, 3, seed=0, sigma=0.1),
                LeastSquares(rng.standard_normal((20, 3)), rng.standard_normal(20), n=2, batch=4)):
        X = np.zeros((2, 3))
        with pytest.raises(ValueError, match=r"seed must be <= 2\^64 - 1"):
            obj.stochastic_gradient(X, 0, seed=2**64)
        with pytest.raises(ValueError, match=r"iteration must be <= 2\^64 - 1"):
            obj.stochastic_gradient(X, 2**64)
        with pytest.raises(ValueError, match="seed must be >= 0"):
            obj.stochastic_gradient(X, 0, seed=-1)
        with pytest.raises(ValueError, match=r"rep_offset must be <= 2\^62"):
            obj.stochastic_gradient(X, 0, rep_offset=2**63)
        with pytest.raises(ValueError, match="batches must be >= 1"):
            obj.stochastic_gradient(X, 0, batches=0)
        with pytest.raises(TypeError, match="seed must be an integer"):
            obj.stochastic_gradient(X, 0, seed="1")
        assert np.isfinite(obj.stochastic_gradient(X, 2**64 - 1, seed=2**64 - 1)).all()


def test_quadratic_and_least_squares():
    q = Quadratic.random(6, 3, seed=1, sigma=0.1)
    G = np.array([q.stochastic_gradient(np.zeros((6, 3)), k) for k in range(4000)])
    np.testing.assert_allclose(G.mean(0), -q.b, atol=0.01)
    rng = np.random.default_rng(0)
    H, y = rng.standard_normal((60, 3)), rng.standard_normal(60)
    ls = LeastSquares(H, y, n=3, batch=20)
    X = rng.standard_normal((3, 3))
    full = np.stack([H[i * 20:(i + 1) * 20].T @ (H[i * 20:(i + 1) * 20] @ X[i] - y[i * 20:(i + 1) * 20]) / 20 for i in range(3)])
    np.testing.assert_allclose(ls.stochastic_gradient(X, 0), full, rtol=1e-12)  # batch = M: exact
    np.testing.assert_allclose(ls.full_gradient(X), full, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5), d=st.integers(1, 4), reps=st.integers(1, 6), batches=st.integers(1, 12),
       period=st.sampled_from([0, 1, 2, 4]), seed=st.sampled_from([0, 3, 2**64 - 1]),
       iteration=st.sampled_from([0, 5, 2**64 - 1]), rep_offset=st.sampled_from([0, 2, 2**40]), data=st.data(),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_quadratic_noise_is_one_draw_per_stream(n, d, reps, batches, period, seed, iteration, rep_offset, data, dtype):
    """Replicas that share a stream (``rep_period``) share its noise, drawn once: bit for bit the replica-by-replica
    transcription (a stream key dropped or shifted fails it)."""
    nodes = data.draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    f = Quadratic.random(n, d, seed=n + d, sigma=0.3, dtype=dtype)
    m = n if nodes is None else len(nodes)
    X = np.random.default_rng(1).standard_normal((reps, m, d)).astype(dtype)
    options = dict(seed=seed, batches=batches, rep_offset=rep_offset, nodes=nodes, rep_period=period)
    G = f.stochastic_gradient(X, iteration, **options)
    np.testing.assert_array_equal(G, _reference.quadratic_stochastic_gradient(f, X, iteration, **options))
    np.testing.assert_array_equal(f.stochastic_gradient(X[0], iteration, **options),
                                  _reference.quadratic_stochastic_gradient(f, X[0], iteration, **options))


@settings(max_examples=60, deadline=None)
@given(entropy=st.lists(st.tuples(*[st.sampled_from([0, 1, 7, 2**32 - 1, 2**32, 2**40 + 3, 2**63 + 5, 2**64 - 1])
                                     | st.integers(0, 2**64 - 1)] * 3), min_size=0, max_size=4))
def test_pcg64_states_are_default_rngs(entropy):
    """``_core.numpy_pcg64_states`` seeds as ``numpy.random.default_rng([seed, rep, iteration])`` does."""
    states = _core.numpy_pcg64_states(np.array(entropy, dtype=np.uint64).reshape(-1, 3))
    assert states.shape == (len(entropy), 4) and states.dtype == np.uint64
    for row, (hi, lo, inc_hi, inc_lo) in zip(entropy, states.tolist()):
        state = np.random.default_rng(list(row)).bit_generator.state["state"]
        assert (hi << 64 | lo, inc_hi << 64 | inc_lo) == (state["state"], state["inc"])


def test_pcg64_states_refuse_other_entropy():
    with pytest.raises(TypeError, match=r"entropy must be uint64 of shape \(keys, 3\), got int64"):
        _core.numpy_pcg64_states(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(TypeError, match=r"of 2 x 2"):
        _core.numpy_pcg64_states(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(ValueError, match="entropy"):
        _core.numpy_pcg64_states(np.zeros(3, dtype=np.uint64))


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 5), M=st.integers(1, 40), d=st.sampled_from([1, 2, 3, 4, 5, 10, 16, 17, 23]),
       reps=st.integers(1, 11), own=st.booleans(), single=st.booleans(), f32=st.booleans(), data=st.data())
def test_least_squares_kernel_is_the_equations(n, M, d, reps, own, single, f32, data):
    """``_core.least_squares_grad``: each node's ``H_i^T (H_i x - y_i) / M`` and ``||H_i x - y_i||^2 / (2M)``
    against the reference transcription; a batch of replicas gives each replica's bits alone, on one thread or two;
    the shared data and each replica's own rows (the mini-batches gathered) alike; any row length (compile-time
    lengths 1..16 and the general one)."""
    dtype = np.float32 if f32 else np.float64
    rng = np.random.default_rng(n * 1000 + M * 10 + d)
    reps = 1 if single else reps
    nodes = None if own else data.draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=n,
                                                            unique=True))
    m = n if nodes is None else len(nodes)
    H = rng.standard_normal((reps, n, M, d) if own else (n, M, d)).astype(dtype)
    y = rng.standard_normal(H.shape[:-1]).astype(dtype)
    X = rng.standard_normal((m, d) if single else (reps, m, d)).astype(dtype)
    ids = None if nodes is None else np.array(nodes, dtype=np.int64)
    G, L = _core.least_squares_grad(H, y, X, ids, with_loss=True)
    assert G.dtype == L.dtype == dtype and G.shape == X.shape and L.shape == X.shape[:-1]
    np.testing.assert_array_equal(G, _core.least_squares_grad(H, y, X, ids))  # (with the losses or without)
    tol = dict(rtol=2e-4, atol=2e-4) if f32 else dict(rtol=1e-12, atol=1e-12)
    Xr, Gr, Lr = X.reshape(reps, m, d), G.reshape(reps, m, d), L.reshape(reps, m)
    for r in range(reps):
        for i in range(m):
            node = i if nodes is None else nodes[i]
            h, t = (H[r, node], y[r, node]) if own else (H[node], y[node])
            want_g, want_l = _reference.least_squares_gradient(h.astype(np.float64), t.astype(np.float64),
                                                               Xr[r, i].astype(np.float64))
            np.testing.assert_allclose(Gr[r, i], want_g, **tol)
            np.testing.assert_allclose(Lr[r, i], want_l, **tol)
        alone = _core.least_squares_grad(H[r:r + 1] if own else H, y[r:r + 1] if own else y, Xr[r:r + 1], ids,
                                         with_loss=True)
        np.testing.assert_array_equal(alone[0][0], Gr[r])
        np.testing.assert_array_equal(alone[1][0], Lr[r])
    threads = _core.get_num_threads()
    try:
        for t in (1, 2):
            _core.set_num_threads(t)
            np.testing.assert_array_equal(_core.least_squares_grad(H, y, X, ids), G)
    finally:
        _core.set_num_threads(threads)


def test_least_squares_evaluates_from_one_pass_on_any_thread_count(monkeypatch):
    """``LeastSquares.evaluate`` (the harness's records) gives ``(full_gradient, loss)`` from one call of the kernel
    (it made two); a block large enough to split over threads gives the same bits on one thread or two."""
    f = LeastSquares.synthetic(64, samples_per_node=128, seed=1)
    X = np.random.default_rng(2).standard_normal((8, 64, 10))
    calls = []
    real = _core.least_squares_grad
    monkeypatch.setattr(_core, "least_squares_grad", lambda *a, **k: calls.append(1) or real(*a, **k))
    G, L = f.evaluate(X)
    assert len(calls) == 1
    np.testing.assert_array_equal(G, f.full_gradient(X))
    np.testing.assert_array_equal(L, f.loss(X))
    threads = _core.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            _core.set_num_threads(t)
            outs.append(real(f.H, f.y, X, with_loss=True))
    finally:
        _core.set_num_threads(threads)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("d,calls", [(LS_KERNEL_MAX_D, 1), (LS_KERNEL_MAX_D + 2, 0)])
def test_least_squares_rows_longer_than_the_kernels_take_numpys_products(monkeypatch, d, calls):
    """Past ``LS_KERNEL_MAX_D`` the kernel (SSE2, its sums out of registers) took 0.35-0.6x NumPy's BLAS: those
    rows take NumPy's products, to rounding the same gradients and losses."""
    f = LeastSquares.synthetic(6, samples_per_node=9, d=d, seed=3)
    X = np.random.default_rng(4).standard_normal((3, 6, d))
    seen = []
    real = _core.least_squares_grad
    monkeypatch.setattr(_core, "least_squares_grad", lambda *a, **k: seen.append(1) or real(*a, **k))
    G, L = f.evaluate(X)
    assert len(seen) == calls
    want_g, want_l = real(f.H, f.y, X, with_loss=True)
    np.testing.assert_allclose(G, want_g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(L, want_l, rtol=1e-12, atol=1e-12)


def test_least_squares_kernel_refuses_what_it_cannot_read():
    """Shapes, dtypes and node ids the kernel cannot read: a clear error naming the argument."""
    H, y, X = np.zeros((3, 4, 2)), np.zeros((3, 4)), np.zeros((3, 2))
    with pytest.raises(ValueError, match="H must be 3-D"):
        _core.least_squares_grad(np.zeros((4, 2)), y, X)
    with pytest.raises(ValueError, match="Y must be 2-D"):
        _core.least_squares_grad(H, np.zeros(4), X)
    with pytest.raises(ValueError, match="Y must have H's shape"):
        _core.least_squares_grad(H, np.zeros((3, 5)), X)
    with pytest.raises(TypeError, match="X must have H's dtype|X"):
        _core.least_squares_grad(H, y, X.astype(np.float32))
    with pytest.raises(TypeError, match="H must be float32 or float64"):
        _core.least_squares_grad(H.astype(np.int64), y.astype(np.int64), X.astype(np.int64))
    with pytest.raises(ValueError, match="X must have 3 rows"):
        _core.least_squares_grad(H, y, np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"nodes\[1\] = 3 is not a node of 0..2"):
        _core.least_squares_grad(H, y, np.zeros((2, 2)), np.array([0, 3]))
    with pytest.raises(ValueError, match="nodes name rows of a shared H"):
        _core.least_squares_grad(H[None], y[None], X[None], np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"H holds the rows of 1 replica\(s\) \(its first axis\) but X has 2"):
        _core.least_squares_grad(H[None], y[None], np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="at least one row per node"):
        _core.least_squares_grad(np.zeros((3, 0, 2)), np.zeros((3, 0)), X)


_least_squares_before = _reference.least_squares_numpy_draws


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), M=st.integers(1, 40), d=st.integers(1, 6), data=st.data(),
       seed=st.sampled_from([0, 1, 7, 2**32 - 1, 2**32, 2**63 + 5, 2**64 - 1]),
       iteration=st.sampled_from([0, 3, 2**32 + 1, 2**64 - 1]), rep_offset=st.sampled_from([0, 2, 2**40]))
def test_least_squares_minibatches_are_numpys_draws(n, M, d, data, seed, iteration, rep_offset):
    """The C++ draws (NumPy's SeedSequence and PCG64) give the gradients of NumPy's own generators: bit for bit
    against the package's former path, to rounding against the reference transcription."""
    batch = data.draw(st.integers(1, M))
    reps = data.draw(st.integers(1, 5))
    batches = data.draw(st.integers(1, 3))
    period = data.draw(st.sampled_from([0, 1, 2, 7]))
    nodes = data.draw(st.none() | st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    rng = np.random.default_rng(seed % 1000 + M)
    f = LeastSquares(rng.standard_normal((n * M, d)), rng.standard_normal(n * M), n=n, batch=batch)
    m = n if nodes is None else len(nodes)
    X = rng.standard_normal((reps, m, d))
    kw = dict(seed=seed, batches=batches, rep_offset=rep_offset, nodes=nodes, rep_period=period)
    G = f.stochastic_gradient(X, iteration, **kw)
    if batch < M:  # (a batch of every row draws nothing: the full gradient's path, as before)
        np.testing.assert_array_equal(G, _least_squares_before(f, X, iteration, **kw))
    want = _reference.least_squares_stochastic_gradient(f.H, f.y, n, batch, X, iteration, **kw)
    np.testing.assert_allclose(G, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gather", [1, 8 * 2 * 5 * 4 * 2, 1 << 30])  # (8 bytes x 2 nodes x 5 x d = 4 x 2 replicas)
def test_least_squares_products_in_blocks_of_replicas_are_the_same(monkeypatch, gather):
    """The replicas' products in blocks of one, two (the last one alone) or all (objectives.GATHER_BYTES): the former
    path's bits."""
    from rowstoch_fast import objectives

    monkeypatch.setattr(objectives, "GATHER_BYTES", gather)
    rng = np.random.default_rng(3)
    f = LeastSquares(rng.standard_normal((3 * 20, 4)), rng.standard_normal(3 * 20), n=3, batch=5)
    X = rng.standard_normal((7, 2, 4))
    kw = dict(seed=9, batches=2, rep_offset=1, nodes=[2, 0], rep_period=3)
    np.testing.assert_array_equal(f.stochastic_gradient(X, 4, **kw), _least_squares_before(f, X, 4, **kw))


def test_numpy_minibatches_are_argsort_of_numpys_uniforms():
    """Each row's indices are argsort's of default_rng([seed, rep, iteration]).random((n, M)), batch after batch."""
    entropy = np.array([[0, 0, 0], [5, 3, 17], [2**64 - 1, 2**33 + 1, 0], [12345678901, 0, 2**32]], dtype=np.uint64)
    idx = _core.numpy_minibatches(entropy, 3, 50, 2, 7, np.array([2, 0], dtype=np.int64))
    assert idx.shape == (4, 2, 2, 7) and idx.dtype == np.int64
    for k, row in enumerate(entropy):
        rng = np.random.default_rng([int(v) for v in row])
        for t in range(2):
            order = rng.random((3, 50)).argsort(axis=1)
            np.testing.assert_array_equal(idx[k, t], order[[2, 0], :7])
    whole = _core.numpy_minibatches(entropy[:1], 1, 9, 1, 9, np.array([0], dtype=np.int64))
    np.testing.assert_array_equal(whole[0, 0, 0], np.random.default_rng([0, 0, 0]).random((1, 9)).argsort(axis=1)[0])
    for M, batch in ((2048, 40), (3000, 2999), (70000, 300), (5, 5)):  # (buckets of the top bits, at most 2^16)
        idx = _core.numpy_minibatches(entropy[1:3], 2, M, 1, batch, np.array([1, 0], dtype=np.int64))
        for k in range(2):
            order = np.random.default_rng([int(v) for v in entropy[1 + k]]).random((2, M)).argsort(axis=1)
            np.testing.assert_array_equal(idx[k, 0], order[[1, 0], :batch])


@pytest.mark.parametrize("call, error, match", [
    (lambda: _core.numpy_minibatches(np.zeros((2, 3), np.int64), 2, 5, 1, 2, np.zeros(1, np.int64)), TypeError,
     "entropy must be uint64"),
    (lambda: _core.numpy_minibatches(np.zeros((2, 2), np.uint64), 2, 5, 1, 2, np.zeros(1, np.int64)), TypeError,
     "shape"),
    (lambda: _core.numpy_minibatches(np.zeros((2, 3), np.uint64), 2, 5, 1, 6, np.zeros(1, np.int64)), ValueError,
     "batch must be in 1..M"),
    (lambda: _core.numpy_minibatches(np.zeros((2, 3), np.uint64), 2, 5, 0, 2, np.zeros(1, np.int64)), ValueError,
     "batches must be >= 1"),
    (lambda: _core.numpy_minibatches(np.zeros((2, 3), np.uint64), 2, 5, 1, 2, np.array([2], np.int64)), ValueError,
     r"own\[0\] = 2 is not in 0..1"),
    (lambda: _core.numpy_minibatches(np.zeros((2, 3), np.uint64), 2, 5, 1, 2, np.zeros(1, np.int32)), TypeError,
     "own must be int64"),
])
def test_numpy_minibatches_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()

@pytest.fixture
def simd_widths():
    """The vector widths this CPU runs (always 2; 4 with AVX2; 8 with AVX-512F); restores automatic choice
    afterwards."""
    yield _core.simd_widths()
    _core.set_simd_width(0)


@pytest.mark.parametrize("d", [1, 3, 4, 5, 10, 16, 17])
def test_gradients_are_the_same_bits_at_every_vector_width(simd_widths, d):
    if len(simd_widths) == 1:
        pytest.skip("this CPU has no AVX2: only the 2-lane path exists here")
    f = NonconvexLogistic.synthetic(n=5, total=5 * 30, d=d, batch=7, seed=2)
    X = 3 * np.random.default_rng(d).standard_normal((19, 5, d))  # (19: groups of 8 and 4 and rows one by one)
    out = {}
    for w in simd_widths:
        _core.set_simd_width(w)
        out[w] = (f.stochastic_gradient(X, 4, batches=2), f.stochastic_gradient(X, 4, batches=2, rep_period=1),
                  f.full_gradient(X), *f.evaluate(X))
    for w in simd_widths[1:]:
        for a, b in zip(out[2], out[w]):
            np.testing.assert_array_equal(a, b)


def test_set_simd_width_rejects_widths_the_cpu_cannot_run():
    for width in (3, 16, -1) + ((8,) if 8 not in _core.simd_widths() else ()):
        with pytest.raises(ValueError, match=r"width must be 0 \(automatic\), 2, 4 where the CPU has AVX2"):
            _core.set_simd_width(width)
    assert _core.get_simd_width() in _core.simd_widths()
    assert _core.simd_widths() in ([2], [2, 4], [2, 4, 8])


def test_logistic_weight_is_accurate_at_extreme_margins_and_keeps_nan():
    """Margins from -1e3 to 1e3 (exp over/underflows) against 40-digit decimal arithmetic; NaN propagates."""
    from decimal import Decimal, localcontext

    z = np.concatenate([np.linspace(-1000, 1000, 4001), [-745.2, -708.5, 708.5, 709.9, 745.2, 0.0, -0.0]])
    n = z.size
    H = z[:, None].copy()  # one sample per node, d = 1, x = 1: the margin is y h x = z
    Y = np.ones(n)
    G = _core.logistic_full_grad(H, Y, n, 0.0, np.ones((n, 1)))[:, 0]
    with localcontext() as ctx:
        ctx.prec = 40
        want = np.array([float(-Decimal(v) / (1 + Decimal(v).exp())) for v in z])  # gradient -z / (1 + e^z)
    np.testing.assert_allclose(G, want, rtol=2.5 * 2.2e-16, atol=2.3e-308 * 1000)
    X = np.ones((n, 1))
    X[3] = np.nan
    assert np.isnan(_core.logistic_full_grad(H, Y, n, 0.0, X)[3, 0])


def test_loss_is_accurate_at_extreme_margins():
    """ln(1 + e^-z) from the one-pass evaluation against 400-digit decimals (exp and log1p are the kernel's own)."""
    from decimal import Decimal, localcontext

    z = np.concatenate([np.linspace(-40, 40, 801), [-800.0, -100.0, -1e-300, 0.0, 1e-300, 0.6931471805599453,
                                                    100.0, 700.0, 708.5, 745.0, 800.0]])
    n = z.size
    _, L = _core.logistic_full_grad(z[:, None].copy(), np.ones(n), n, 0.0, np.ones((n, 1)), with_loss=True)
    with localcontext() as ctx:
        ctx.prec = 400
        want = np.array([float((1 + (-Decimal(v)).exp()).ln()) for v in z])
    np.testing.assert_allclose(L, want, rtol=2.5 * 2.2e-16, atol=2.3e-308 * 1000)


@settings(max_examples=40, deadline=None)
@given(reps=st.integers(1, 11), d=st.integers(1, 18), M=st.integers(1, 600), subset=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_full_gradients_of_many_replicas_are_each_replicas_own_bit_for_bit(reps, d, M, subset, seed):
    """The records' full pass: the gradient alone takes W replicas at once in vector lanes (the rest one by one),
    with its losses one replica at a time; both must be the bits of each replica's own pass, for every row
    length (compile-time 1..16, run-time beyond), chunk split of the samples and subset of the nodes."""
    rng = np.random.default_rng(seed)
    n = 3
    H = rng.standard_normal((n * M, d))
    Y = np.where(rng.random(n * M) < 0.5, -1.0, 1.0)
    nodes = np.array([2, 0]) if subset else None
    X = rng.standard_normal((reps, 2 if subset else n, d)) * rng.choice([0.01, 0.3, 30.0])
    try:
        for width in _core.simd_widths():  # (W replicas a lane each: every width this CPU runs)
            _core.set_simd_width(width)
            G = _core.logistic_full_grad(H, Y, n, 0.01, X, nodes)
            G_loss, L = _core.logistic_full_grad(H, Y, n, 0.01, X, nodes, with_loss=True)
            np.testing.assert_array_equal(G, G_loss)
            for r in range(reps):
                np.testing.assert_array_equal(G[r], _core.logistic_full_grad(H, Y, n, 0.01, X[r:r + 1], nodes)[0])
                own_G, own_L = _core.logistic_full_grad(H, Y, n, 0.01, X[r:r + 1], nodes, with_loss=True)
                np.testing.assert_array_equal(L[r], own_L[0])
    finally:
        _core.set_simd_width(0)


@pytest.mark.parametrize("d", [3, 10, 17])
def test_float32_kernels_agree_with_float64(d):
    """The compiled oracle also takes float32 data (scalar sums in float32, logistic weights in float64)."""
    rng = np.random.default_rng(d)
    n, M, B = 3, 50, 20
    H = rng.standard_normal((n * M, d))
    Y = np.where(rng.random(n * M) < 0.5, -1.0, 1.0)
    X = 0.3 * rng.standard_normal((2, n, d))
    f32 = [a.astype(np.float32) for a in (H, Y, X)]
    G64 = _core.logistic_grad(H, Y, n, 0.01, X, B, 2, 1, 4)
    G32 = _core.logistic_grad(f32[0], f32[1], n, 0.01, f32[2], B, 2, 1, 4)
    assert G32.dtype == np.float32
    np.testing.assert_allclose(G32, G64, rtol=2e-5, atol=2e-6)
    (F64, L64), (F32, L32) = (_core.logistic_full_grad(H, Y, n, 0.01, X, with_loss=True),
                              _core.logistic_full_grad(*f32[:2], n, 0.01, f32[2], with_loss=True))
    np.testing.assert_allclose(F32, F64, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(L32, L64, rtol=2e-6)


def test_logistic_objective_in_float32_follows_float64():
    """NonconvexLogistic(dtype=float32): data, gradients (stochastic and exact) and losses in float32, the same
    mini-batches as float64, values within 1e-5."""
    f64 = NonconvexLogistic.synthetic(12, total=12 * 300, d=7, batch=40, seed=5)
    f32 = NonconvexLogistic.synthetic(12, total=12 * 300, d=7, batch=40, seed=5, dtype=np.float32)
    assert f32.H.dtype == f32.Y.dtype == np.float32 and f32.describe()["dtype"] == "float32"
    assert f32.describe()["data_sha1"] != f64.describe()["data_sha1"]
    X = np.random.default_rng(1).normal(size=(2, 12, 7)) * 0.3
    pairs = [(f.stochastic_gradient(X, 3, seed=2, batches=2), f.full_gradient(X), f.loss(X)) for f in (f64, f32)]
    for a, b in zip(*pairs):
        assert b.dtype == np.float32
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6 * np.abs(a).max())
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        NonconvexLogistic.synthetic(4, total=400, batch=10, dtype=np.int32)


# ---------------------------------------------------------------- the optimum the harness measures against
def test_least_squares_optimum_is_the_least_squares_solution():
    f = LeastSquares.synthetic(6, samples_per_node=5, d=4, heterogeneity=2.0, seed=1)
    H, y = f.H.reshape(-1, 4), f.y.ravel()
    x_star = np.linalg.solve(H.T @ H, H.T @ y)  # the normal equations, dense
    best = f.optimum()
    np.testing.assert_allclose(best.x, x_star, rtol=1e-10, atol=1e-12)
    assert best.value == pytest.approx(0.5 * np.mean((H @ x_star - y) ** 2), rel=1e-12)
    assert f.optimum() is best  # cached: computed once
    # heterogeneous: the nodes' own minimisers differ from x*
    local = [np.linalg.lstsq(f.H[i], f.y[i], rcond=None)[0] for i in range(6)]
    assert min(np.linalg.norm(x - x_star) for x in local) > 0.1


def test_logistic_l2_is_the_logistic_loss_plus_the_ridge_and_its_optimum_is_stationary():
    from scipy.optimize import minimize

    from rowstoch_fast.objectives import LogisticL2

    f = LogisticL2.synthetic(4, total=400, d=3, lam=0.05, batch=10, seed=0, heterogeneity=1.0)
    X = np.random.default_rng(0).standard_normal((4, 3))
    H, Y = f.H.reshape(4, 100, 3), f.Y.reshape(4, 100)
    margins = np.einsum("nmd,nd->nm", H, X) * Y
    loss = np.logaddexp(0, -margins).mean(1) + 0.025 * (X * X).sum(1)
    grad = -np.einsum("nmd,nm->nd", H, Y / (1 + np.exp(margins))) / 100 + 0.05 * X
    G, L = f.evaluate(X)
    np.testing.assert_allclose(L, loss, rtol=1e-12)
    np.testing.assert_allclose(G, grad, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(f.full_gradient(X), grad, rtol=1e-10, atol=1e-13)
    # the mini-batch gradient is the nonconvex one without its regulariser, plus lam x
    plain = NonconvexLogistic(f.H, f.Y, 4, rho=0.0, batch=10)
    np.testing.assert_array_equal(f.stochastic_gradient(X, 3, seed=1), plain.stochastic_gradient(X, 3, seed=1) + 0.05 * X)
    best = f.optimum()
    value, gradient = f.value_and_gradient_at(best.x)
    assert np.linalg.norm(gradient) < 1e-11 and value == best.value
    ref = minimize(lambda x: np.logaddexp(0, -(f.H @ x) * f.Y).mean() + 0.025 * x @ x, np.zeros(3), method="BFGS",
                   options={"gtol": 1e-12})
    np.testing.assert_allclose(best.x, ref.x, atol=1e-6)
    with pytest.raises(ValueError, match="lam must be finite and > 0, got 0.0"):
        LogisticL2(f.H, f.Y, 4, lam=0.0, batch=10)


def test_objectives_without_a_known_minimiser_say_so():
    assert NonconvexLogistic.synthetic(4, total=80, batch=5).optimum() is None
    q = Quadratic.random(5, 3, seed=2)
    np.testing.assert_allclose(q.optimum().x, q.minimizer)


def _objectives_for_gradient_at():
    from rowstoch_fast.composite import L1
    from rowstoch_fast.objectives import LogisticL2

    yield NonconvexLogistic.synthetic(4, total=400, d=6, batch=10, seed=1, heterogeneity=1.0)
    yield NonconvexLogistic.synthetic(4, total=400, d=6, batch=10, seed=1, dtype=np.float32)
    yield LogisticL2.synthetic(4, total=400, d=6, batch=10, seed=2, heterogeneity=1.0)
    yield Quadratic.random(4, 6, seed=3)
    yield LeastSquares.synthetic(4, samples_per_node=9, d=6, seed=4)
    ls = LeastSquares.synthetic(4, samples_per_node=9, d=6, seed=5)
    yield ls + L1(0.1)
    yield ls + Quadratic.random(4, 6, seed=6)
    yield 2.5 * ls


@pytest.mark.parametrize("f", list(_objectives_for_gradient_at()), ids=lambda f: type(f).__name__)
def test_gradient_at_is_the_gradient_of_value_and_gradient_at_bit_for_bit(f):
    """The records take ``gradient_at`` where they need no values: it must be the same bits."""
    x = np.random.default_rng(7).standard_normal((3, f.d))
    np.testing.assert_array_equal(f.gradient_at(x), f.value_and_gradient_at(x)[1])
    np.testing.assert_array_equal(f.gradient_at(x[0]), f.value_and_gradient_at(x[0])[1])


@pytest.mark.parametrize("f", [g for g in _objectives_for_gradient_at() if g.samples_per_node],
                         ids=lambda f: type(f).__name__)
def test_sample_gradients_are_each_samples_gradient_bit_for_bit(f):
    """``sample_gradients(X, samples)``: every listed sample's gradients in one call, equal to one
    ``sample_gradient`` per sample (what the variance-reduced methods' tables and snapshots take, a chunk at a
    time), for every node or a subset, one or several replicas; bad ids named."""
    rng = np.random.default_rng(5)
    m = f.samples_per_node
    for X, nodes in ((rng.standard_normal((f.n, f.d)), None), (rng.standard_normal((3, 2, f.d)), [1, 3])):
        X = X.astype(getattr(f, "dtype", np.float64))
        samples = np.array([m - 1, 0, 2, 2])
        G = f.sample_gradients(X, samples, nodes=nodes)
        assert G.shape == (4,) + X.shape
        for k, s in enumerate(samples):
            np.testing.assert_array_equal(G[k], f.sample_gradient(X, np.full(X.shape[:-1], s), nodes=nodes))
    with pytest.raises(ValueError, match="samples must be sample ids in 0.."):
        f.sample_gradients(X, np.array([m]), nodes=nodes)
    with pytest.raises(ValueError, match="samples must be a 1-D array of integer"):
        f.sample_gradients(X, np.array([[0]]), nodes=nodes)


@pytest.mark.parametrize("name", ["gt-saga", "gt-saga-atc", "gt-svrg", "gt-sarah", "push-saga"])
def test_tables_and_snapshots_by_chunks_equal_one_sample_at_a_time(name, monkeypatch):
    """A variance-reduced method's table / snapshot of all m samples, taken by chunks of samples (chunks of 7,
    the last one short), equals the one taken sample by sample (an oracle without ``sample_gradients``): the same
    states, bit for bit."""
    import rowstoch_fast as rf
    from rowstoch_fast.algorithms import _deferred
    from rowstoch_fast.objectives import SampleOracle
    from rowstoch_fast.runner import build_replicas

    f = NonconvexLogistic.synthetic(6, total=6 * 30, d=4, batch=5, seed=2, heterogeneity=1.0)
    monkeypatch.setattr(_deferred, "SAMPLE_CHUNK", 7)
    states = []
    for oracle in (f.oracle(seed=3), SampleOracle(f.sample_gradient, f.samples_per_node, seed=3)):
        assert hasattr(oracle, "sample_gradients") == (len(states) == 0)
        opt = build_replicas(rf.Algorithm(rf.topology.exponential(6), 0.05, method=name), f, 2)
        opt.initialize(oracle)
        for _ in range(35):  # (GT-SVRG / GT-SARAH take a snapshot every m = 30 iterations)
            opt.step(oracle)
        states.append(opt.state_dict())
    assert states[0].keys() == states[1].keys()
    for key in states[0]:
        if isinstance(states[0][key], np.ndarray) and states[0][key].dtype.kind == "f":
            np.testing.assert_array_equal(states[0][key], states[1][key], err_msg=key)


def test_a_float32_objectives_table_under_a_float64_optimizer_is_taken_by_chunks(monkeypatch):
    """Helper 262: a float32 objective's sample gradients under a float64 optimizer took the per-sample path (its
    checks and counts for each sample, 2.3x the time); its chunks widen exactly, as each sample's copy does: taken
    by chunks now (the per-sample path is not entered), the same states and call counts bit for bit."""
    import rowstoch_fast as rf
    from rowstoch_fast.algorithms import _deferred
    from rowstoch_fast.objectives import SampleOracle
    from rowstoch_fast.runner import build_replicas

    f = NonconvexLogistic.synthetic(6, total=6 * 30, d=4, batch=5, seed=2, heterogeneity=1.0, dtype=np.float32)
    monkeypatch.setattr(_deferred, "SAMPLE_CHUNK", 7)
    per_sample = []
    real = _deferred.FailureHandling._gradient

    def counted(self, grad_fn, *args):
        per_sample.append(getattr(grad_fn, "call_kind", "gradient") == "sample_gradient")
        return real(self, grad_fn, *args)

    monkeypatch.setattr(_deferred.FailureHandling, "_gradient", counted)
    results = []
    for oracle in (f.oracle(seed=3), SampleOracle(f.sample_gradient, f.samples_per_node, seed=3)):
        per_sample.clear()
        opt = build_replicas(rf.Algorithm(rf.topology.exponential(6), 0.05, method="gt-saga"), f, 2)
        assert opt._ops.dtype == np.float64
        opt.initialize(oracle)
        results.append((sum(per_sample), opt.calls))
        for _ in range(5):
            opt.step(oracle)
        results[-1] += (opt.state_dict(), opt.calls)
    assert results[0][0] == 0 and results[1][0] == 30, results  # (the table's 30 samples: by chunks, then one by one)
    assert results[0][1] == results[1][1] and results[0][3] == results[1][3]
    for key, value in results[0][2].items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            np.testing.assert_array_equal(value, results[1][2][key], err_msg=key)


def test_a_chunk_of_samples_that_fails_its_check_is_taken_again_sample_by_sample(monkeypatch):
    """The chunks of a table are checked once each (finite, of their shape) and copied sample by sample; a chunk
    that fails is taken again one sample at a time, which raises what it always did: the same DivergenceError
    as an oracle without ``sample_gradients``, the same message."""
    import rowstoch_fast as rf
    from rowstoch_fast.algorithms import _deferred
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.objectives import SampleOracle
    from rowstoch_fast.runner import build_replicas

    class NaNAt10(LeastSquares):
        def sample_gradient(self, X, idx, nodes=None):
            G = super().sample_gradient(X, idx, nodes)
            G[np.asarray(idx) == 10] = np.nan
            return G

        def sample_gradients(self, X, samples, nodes=None):
            G = super().sample_gradients(X, samples, nodes)
            G[np.asarray(samples) == 10] = np.nan
            return G

    f = NaNAt10.synthetic(4, samples_per_node=30, d=3, seed=4)
    monkeypatch.setattr(_deferred, "SAMPLE_CHUNK", 7)
    said = []
    for oracle in (f.oracle(seed=1), SampleOracle(f.sample_gradient, f.samples_per_node, seed=1)):
        opt = build_replicas(rf.Algorithm(rf.topology.exponential(4), 0.01, method="gt-saga"), f, 2)
        with pytest.raises(DivergenceError) as err:
            opt.initialize(oracle)
        said.append(str(err.value))
    assert said[0] == said[1] and "non-finite gradient at iteration 0" in said[0], said


def test_gradient_at_follows_a_subclass_own_value_and_gradient_at():
    """An objective that defines its own value_and_gradient_at (not gradient_at): the records' gradient is that
    one's, not the base class's full pass."""

    class Doubled(NonconvexLogistic):
        def value_and_gradient_at(self, x):
            f, g = super().value_and_gradient_at(x)
            return f, 2 * g

    f = Doubled.synthetic(4, total=400, d=3, batch=10, seed=1)
    x = np.random.default_rng(0).standard_normal((2, 3))
    np.testing.assert_array_equal(f.gradient_at(x), f.value_and_gradient_at(x)[1])


def test_a_snapshot_takes_its_chunks_within_a_bounded_memory(monkeypatch):
    """GT-SVRG's snapshot of all m samples by chunks: a chunk is sized so that its gradients stay within
    SAMPLE_CHUNK_BYTES (blocks of x's size, not 256 of them whatever x's size), down to one sample a call."""
    import rowstoch_fast as rf
    from rowstoch_fast.algorithms import _deferred
    from rowstoch_fast.runner import build_replicas

    f = LeastSquares.synthetic(4, samples_per_node=40, d=50, seed=4)
    asked = []
    real = LeastSquares.sample_gradients

    def spy(self, X, samples, nodes=None):
        asked.append(len(samples))
        return real(self, X, samples, nodes)

    monkeypatch.setattr(LeastSquares, "sample_gradients", spy)
    for budget, expect in ((3 * 4 * 50 * 8 * 7, 7), (3 * 4 * 50 * 8 - 1, None)):
        monkeypatch.setattr(_deferred, "SAMPLE_CHUNK_BYTES", budget)
        asked.clear()
        opt = build_replicas(rf.Algorithm(rf.topology.exponential(4), 0.01, method="gt-svrg"), f, 3)
        opt.initialize(f.oracle(seed=1))
        assert asked == ([] if expect is None else [7] * 5 + [5]), asked


def _draw_samples_numpy(samples, shape, iteration, seed=0, rep_offset=0, nodes=None, rep_period=0):
    """objectives.draw_samples written out in NumPy: uniform_hash(seed, iteration, replica, node, 2^63 - 1) times
    samples, floored, at most samples - 1."""
    from rowstoch_fast._hashing import uniform_hash

    reps = shape[0] if len(shape) == 2 else 1
    ids = np.arange(shape[-1], dtype=np.int64) if nodes is None else np.asarray(nodes, dtype=np.int64)
    r = np.arange(reps, dtype=np.int64)
    rep_ids = rep_offset + (r % rep_period if rep_period else r)[:, None]
    u = uniform_hash(seed, iteration, rep_ids, ids[None, :], 2**63 - 1)
    return np.minimum((u * samples).astype(np.int64), samples - 1).reshape(shape)


@settings(max_examples=80, deadline=None)
@given(samples=st.one_of(st.integers(1, 7), st.integers(1, 2**40)), n=st.integers(0, 70),
       reps=st.sampled_from([0, 1, 3]), iteration=st.integers(0, 2**62), seed=st.integers(0, 2**64 - 1),
       rep_offset=st.integers(0, 2**40), rep_period=st.integers(0, 3), with_nodes=st.booleans())
def test_compiled_sample_draws_equal_their_numpy_transcription(samples, n, reps, iteration, seed, rep_offset,
                                                               rep_period, with_nodes):
    """draw_samples (compiled since GT-SAGA's step on a GPU spent 45 ms of its 45 in NumPy's draws at 2^20 nodes)
    equals the hash written out in NumPy, for one replica or several, replica periods, offsets, global node ids
    (an MPI rank's, negative ones wrapping as NumPy's cast does) and sample counts past 2^32."""
    from rowstoch_fast.objectives import draw_samples

    shape = (n,) if reps == 0 else (reps, n)
    nodes = np.random.default_rng(n).integers(-2**40, 2**40, n) if with_nodes else None
    got = draw_samples(samples, shape, iteration, seed, rep_offset, nodes, rep_period)
    want = _draw_samples_numpy(samples, shape, iteration, seed, rep_offset, nodes, rep_period)
    assert got.dtype == np.int64 and got.shape == shape
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).all() and (got < samples).all()


@pytest.mark.parametrize("reps", [0, 3])
@pytest.mark.parametrize("with_nodes", [False, True])
def test_sample_draws_on_a_gpu_equal_the_hosts(reps, with_nodes):
    """``draw_samples(..., device=True)`` (the per-sample methods' draws for a CuPy ``X``) on a GPU: a CuPy array of
    the host's draws (the emulated kernel: tests/test_backends.py)."""
    from conftest import cupy_or_reason

    from rowstoch_fast.objectives import draw_samples

    cupy, reason = cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    n = 5000
    shape = (n,) if reps == 0 else (reps, n)
    nodes = np.random.default_rng(2).integers(-2**40, 2**40, n) if with_nodes else None
    for k in (0, 9):
        dev = draw_samples(2**33 + 5, shape, k, seed=4, rep_offset=6, nodes=nodes, device=True)
        assert type(dev).__module__.startswith("cupy") and dev.shape == shape and dev.dtype == np.int64
        np.testing.assert_array_equal(dev.get(), draw_samples(2**33 + 5, shape, k, seed=4, rep_offset=6, nodes=nodes))


def test_compiled_sample_draws_refuse_what_they_cannot_draw():
    from rowstoch_fast.objectives import draw_samples

    with pytest.raises(ValueError, match="samples must be >= 1, got 0"):
        draw_samples(0, (4,), 0)
    with pytest.raises(TypeError, match="samples must be an integer"):
        draw_samples(9.0, (4,), 0)
    with pytest.raises(ValueError, match=r"samples must be <= 2\^63 - 1, got 9223372036854775808"):
        draw_samples(2**63, (4,), 0)
    assert draw_samples(np.int32(3), (4,), 0).dtype == np.int64
    assert draw_samples(3, (0,), 0).shape == (0,) and draw_samples(3, (0, 5), 0).shape == (0, 5)  # (nothing drawn)
    assert draw_samples(3, (2, 0), 0, nodes=[]).shape == (2, 0)
    assert _core.draw_samples(0, np.zeros(0, dtype=np.int64), np.zeros(3, dtype=np.int64), 1, 4).shape == (0, 3)
    with pytest.raises(TypeError, match="must be int64"):
        _core.draw_samples(0, np.zeros(1, dtype=np.int32), np.zeros(3, dtype=np.int64), 1, 4)


class _Own(Objective):
    """An objective of a user's own, written from Objective's Notes: node i minimises |x - b_i|^2 / 2."""

    dtype = np.float64
    convex = True
    stream_free = True

    def __init__(self, n=8, d=3, shift=0.0):
        self.n, self.d, self.shift = n, d, shift
        self.b = np.random.default_rng(1).standard_normal((n, d))

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        return self.full_gradient(X, nodes)

    def full_gradient(self, X, nodes=None):
        return X - (self.b if nodes is None else self.b[nodes])

    def loss(self, X, nodes=None):
        return 0.5 * ((X - (self.b if nodes is None else self.b[nodes])) ** 2).sum(axis=-1)

    def _solve(self):
        return self.b.mean(axis=0) + self.shift


def test_an_objective_of_ones_own_as_the_docstring_says_and_what_it_gets_wrong_is_named():
    """A helper's objectives of their own: without x0() a run failed with a bare AttributeError (the start is now
    the base class's, as the built-in objectives had it); `batch = None` failed deep in a run as "int * NoneType",
    `batch = "full"` filled the samples column with text; an optimum() returning a plain tuple failed as "'tuple'
    object has no attribute 'value'"; and a _solve() off by 1e-3 had every method below f* without a word, a
    biased one tied with the exact ones. Each is now named before anything runs, or warned once."""
    import warnings

    import rowstoch_fast as rf
    from rowstoch_fast import compare as cmp
    from rowstoch_fast.objectives import Optimum

    A = rf.topology.exponential(8)
    f = _Own()
    assert np.array_equal(f.x0(), Quadratic.random(8, 3, seed=0).x0())  # (the same start as the built-in ones)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (a right f*: no warning)
        h = rf.run(rf.Algorithm(A, 0.5, method="push-pull"), f, 60, progress=False)
    assert h.frame["suboptimality"].iloc[-1] < 1e-6 and h.frame["samples"].iloc[-1] == 61  # (+ its batch at x0)
    for batch in (None, "full", 0, True, 2.5):
        f.batch = batch
        for call in (lambda: rf.run(rf.Algorithm(A, 0.5), f, 5, progress=False),
                     lambda: cmp.compare(A, f, "dsgd", 5, lr=0.5, progress=False)):
            with pytest.raises(TypeError, match=r"_Own\.batch must be a positive integer .* got " + re.escape(repr(batch))):
                call()
    for batch in (4, 4.0, np.int32(4)):
        f.batch = batch
        assert rf.run(rf.Algorithm(A, 0.5), f, 5, progress=False).frame["samples"].iloc[-1] == 24  # (6 batches of
        # 4: Pull-Diag-GT's at x0, then one per iteration)

    class Unknown(_Own):
        def optimum(self):
            raise NotImplementedError

    with warnings.catch_warnings():  # (a run that does not record the suboptimality never asks for the optimum)
        warnings.simplefilter("error")
        assert rf.run(rf.Algorithm(A, 0.5), Unknown(), 5, progress=False, metrics=["grad_norm"]).status == "done"

    class Tupled(_Own):
        def optimum(self):
            return (self.b.mean(axis=0), 0.0)

    with pytest.raises(TypeError, match=r"Tupled\.optimum\(\) must return an Optimum\(x, value\)"):
        cmp.compare(A, Tupled(), "dsgd", 5, lr=0.5, progress=False)
    assert isinstance(_Own().optimum(), Optimum)
    with pytest.warns(RuntimeWarning, match=r"_Own: f\(x_bar\) fell below the f\* = .* of its optimum\(\)") as caught:
        cmp.compare(A, _Own(shift=1e-3), "push-pull,pull-diag-gt", 60, lr=0.5, repeats=1, progress=False)
    assert sum("fell below" in str(w.message) for w in caught) == 1  # (once for the comparison)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_strided_view_of_x_is_checked_and_read_as_its_copy(dtype, monkeypatch):
    """An optimizer hands the gradients a strided view of its node-major block ((reps, n, d) by swapaxes); the
    check's fast path copies it as the general path did: the same gradients, and a NaN named at its index of the
    view, not of the block. A view of another rank is still refused by name."""
    f = NonconvexLogistic.synthetic(6, total=240, d=3, rho=0.01, batch=5, seed=1, dtype=dtype)
    block = np.random.default_rng(0).standard_normal((6, 4 * 3)).astype(dtype)
    X = block.reshape(6, 4, 3).swapaxes(0, 1)
    assert not X.flags.c_contiguous
    assert np.array_equal(f.full_gradient(X), f.full_gradient(np.ascontiguousarray(X)))
    assert np.array_equal(f.stochastic_gradient(X, 3), f.stochastic_gradient(np.ascontiguousarray(X), 3))
    from rowstoch_fast import _checks

    def general_path(*args, **kwargs):
        raise AssertionError("a strided view of the dtype took the general path (np.require: 14 us a call)")

    monkeypatch.setattr(_checks.np, "require", general_path)
    f.full_gradient(X)
    block[5, 2 * 3 + 1] = np.nan  # (replica 2, node 5, entry 1)
    with pytest.raises(ValueError, match=re.escape("X must be finite; X[2, 5, 1] = nan")):
        f.full_gradient(X)
    with pytest.raises(ValueError, match="X must be 2-D or 3-D"):
        f.full_gradient(block.reshape(-1)[::2])


def test_a_minimiser_or_f_star_that_is_not_finite_is_refused_by_name(tmp_path):
    """A user's _solve() whose Newton iteration failed returned NaN (helper 112): rf.run recorded a suboptimality
    of NaN and said "done", compare() called every method "diverged at every rate" although the iterates
    converged, or a bare "X must be finite" was all it said. Refused, naming the objective and _solve()."""
    from rowstoch_fast import Algorithm, compare as cmp, run, topology
    from rowstoch_fast.objectives import Optimum, optimum_of

    class NanSolve(Quadratic):
        def _solve(self):
            return np.full(self.d, np.nan)

    class Flat(Quadratic):
        def _solve(self):
            return np.zeros((1, self.d))

    class NanValue(Quadratic):
        def optimum(self):
            return Optimum(np.zeros(self.d), float("nan"))

    A = topology.exponential(8)
    f = NanSolve.random(8, 3, seed=0)
    words = r"NanSolve.optimum\(\)'s minimiser is not finite \(x\[0\] = nan\): its _solve\(\)"
    with pytest.raises(ValueError, match=words):
        run(Algorithm(A, 0.01), f, 10, progress=False)
    with pytest.raises(ValueError, match=words):
        cmp.compare(A, f, "dsgd", 10, repeats=1, progress=False)
    with pytest.raises(ValueError, match=r"minimiser must be a real array of shape \(d,\) = \(3,\), got float64 "
                                         r"of shape \(1, 3\)"):
        optimum_of(Flat.random(8, 3, seed=0))
    with pytest.raises(ValueError, match=r"NanValue.optimum\(\)'s value f\* is nan"):
        optimum_of(NanValue.random(8, 3, seed=0))
    assert optimum_of(Quadratic.random(8, 3, seed=0)).x.shape == (3,)


def test_an_objective_of_ones_own_returning_the_wrong_shapes_is_named():
    """A user's loss summed to a scalar, or left unsummed, and a gradient returned as a list failed deep in the
    harness ("axis -1 is out of bounds for array of dimension 0", "'list' object has no attribute 'mean'"),
    naming neither the objective nor which of its methods (helper 112)."""
    from rowstoch_fast import Algorithm, run, topology
    from rowstoch_fast.objectives import Objective

    class Mine(Objective):
        dtype, convex, stream_free = np.dtype(np.float64), True, True
        mistake = None

        def __init__(self):
            self.n, self.d = 6, 2
            self.b = np.random.default_rng(0).standard_normal((6, 2))

        def full_gradient(self, X, nodes=None):
            G = X - self.b
            return G.tolist() if self.mistake == "list" else G

        def stochastic_gradient(self, X, iteration, **kw):
            return X - self.b

        def loss(self, X, nodes=None):
            L = (X - self.b) ** 2 / 2
            return L.sum() if self.mistake == "scalar" else L if self.mistake == "unsummed" else L.sum(-1)

        def _solve(self):
            return self.b.mean(axis=0)

    for mistake, words in (("scalar", r"Mine\.loss must return the local losses f_i\(x_i\), an array of shape "
                                      r"X\.shape\[:-1\] = \(6,\); got float64"),
                           ("unsummed", r"Mine\.loss .* got ndarray of shape \(6, 2\)"),
                           ("list", r"Mine\.full_gradient must return the local gradients, an array of X's shape "
                                    r"\(6, 2\); got list")):
        f = Mine()
        f.mistake = mistake
        with pytest.raises(TypeError, match=words):
            run(Algorithm(topology.exponential(6), 0.1), f, 5, progress=False)
    f = Mine()
    assert run(Algorithm(topology.exponential(6), 0.1), f, 5, progress=False).frame["suboptimality"].notna().all()


def test_an_optimum_of_ones_own_whose_value_is_not_f_at_its_minimiser_is_warned_about():
    """A user's optimum() that dropped a constant term returned f* 0.5 below f(x*): every suboptimality sat 0.5 too
    high, the tuner and the ranks worked on a saturated metric (Push-Pull 5.000e-01 and DSGD 5.006e-01), and
    nothing said so (helper 112). A RuntimeWarning, once per optimum (not a refusal: a loss of large terms
    cancelling at x* rounds further, helper 113); rounding of the objective's dtype is not warned about."""
    from rowstoch_fast import Algorithm, run, topology
    from rowstoch_fast.objectives import Optimum, optimum_of

    class Off(Quadratic):
        shift = 0.5

        def optimum(self):
            x = Quadratic._solve(self)
            return Optimum(x, float(self.value_and_gradient_at(x)[0]) - self.shift)

    f = Off.random(8, 3, seed=0)
    with pytest.warns(RuntimeWarning, match=r"Off\.optimum\(\)'s value f\* = .* is not f\(x\*\) = .* \(off by -0\.5\)"):
        run(Algorithm(topology.exponential(8), 0.05), f, 5, progress=False)
    f = Off.random(8, 3, seed=0)
    f.shift = 1e-13
    import warnings

    calls = []
    f.value_and_gradient_at = lambda x, at=f.value_and_gradient_at: calls.append(1) or at(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert optimum_of(f).value == optimum_of(f).value and len(calls) == 3  # (its own two, and the check once)


@pytest.mark.parametrize("shift, warned", [(5e-9, True), (1e-20, False)])
def test_an_optimum_of_ones_own_off_in_the_datas_small_units_is_warned_about(shift, warned):
    """Data in small units (f and its start 1e-6 in size): an f* off by 5e-9 is 0.5% of every suboptimality at the
    start, and had been under the bar of 1e-8 x max(1, |f|); rounding is still not warned about."""
    import warnings

    from rowstoch_fast.objectives import Optimum, optimum_of

    class Small(Quadratic):
        def value_and_gradient_at(self, x):
            value, gradient = Quadratic.value_and_gradient_at(self, x)
            return value * 1e-6, gradient * 1e-6

        def optimum(self):
            x = Quadratic._solve(self)
            return Optimum(x, float(self.value_and_gradient_at(x)[0]) - shift)

    f = Small.random(8, 3, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimum_of(f)
    said = [str(w.message) for w in caught if "is not f(x*)" in str(w.message)]
    assert len(said) == warned and (not warned or "off by -5e-09" in said[0])


def test_an_oracle_s_nodes_are_checked_as_the_objective_s():
    """Helper 185: ``oracle(nodes=[1.5])`` read node 1, ``nodes=[True, False]`` (a mask, it seemed) nodes 1 and 0,
    and ``nodes="ab"`` failed in ``int()`` without naming the argument. They are the objective's node ids, checked
    as its gradients check them."""
    from rowstoch_fast.objectives import LeastSquares

    f = LeastSquares.synthetic(4, d=3, seed=0)
    for bad in ([1.5], [True, False], "ab"):
        with pytest.raises(TypeError, match="nodes must be integer node ids"):
            f.oracle(nodes=bad)
    for bad in ([[0, 1]], [4], [-1]):
        with pytest.raises(ValueError, match=r"nodes must be a 1-D array of node ids in 0\.\.3"):
            f.oracle(nodes=bad)
    full = f.oracle()(np.zeros((4, 3)))
    np.testing.assert_array_equal(f.oracle(nodes=[2, 0])(np.zeros((2, 3))), full[[2, 0]])


def test_an_optimums_solve_over_many_rows_goes_by_chunks_to_the_same_minimiser(monkeypatch):
    """Helper 263: f* of logistic-l2 at d = 3,000 spent 36 s a Newton step in one BLAS call, least squares at
    64,000 x 3,000 rows 33 s in one LAPACK call, and neither answered Ctrl-C or SIGTERM meanwhile. Over more rows
    than SOLVE_CALL_WORK allows a call, the Hessian and the least-squares factorisation go a chunk of rows at a
    time: the same minimiser up to rounding (the smallest one where the rows do not determine it), and the problems
    within the bound take the one call they always did."""
    from rowstoch_fast import objectives
    from rowstoch_fast.objectives import LogisticL2

    rng = np.random.default_rng(0)
    problems = [LeastSquares.synthetic(8, samples_per_node=500, d=20, seed=3),
                LogisticL2.synthetic(8, total=8000, d=20, seed=3, batch=10)]
    H = rng.standard_normal((1000, 5))
    H = np.column_stack([H, H[:, 0] + H[:, 1]])  # (rank 5 of 6)
    y = rng.standard_normal(1000)
    whole = [f._solve() for f in problems] + [objectives._least_squares(H, y)]
    np.testing.assert_array_equal(whole[2], np.linalg.lstsq(H, y, rcond=None)[0])  # (one call: LAPACK's own)
    calls = []
    real_qr = np.linalg.qr
    monkeypatch.setattr(objectives.np.linalg, "qr", lambda *a, **k: calls.append("qr") or real_qr(*a, **k))
    monkeypatch.setattr(objectives, "SOLVE_CALL_WORK", 7 * 7 * 150)  # (150 rows of [H y] a call at d = 6, 16 at 20)
    chunked = [f._solve() for f in problems] + [objectives._least_squares(H, y)]
    assert calls.count("qr") == -(-4000 // 16) + -(-1000 // 150), len(calls)
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    w = rng.random(1000)
    np.testing.assert_allclose(objectives._weighted_gram(H, w), (H.T * w) @ H, rtol=1e-13)
    monkeypatch.undo()
    assert objectives._rows_per_call(10) == (1 << 30) // 100 > 204800  # (the default problems: one call)


@pytest.mark.parametrize("budget", [8 << 20, 8 * 3 * 2 * 4 * 7])
def test_the_weighted_grams_of_a_local_prox_are_the_einsums(budget, monkeypatch):
    """Helper 263: logistic-l2's local prox (the ADMM family's step) formed its Newton Hessians with NumPy's
    three-operand einsum, 8-19x BLAS's time (66 s a step at d = 600). BLAS products over chunks of rows now (in one
    chunk, or 7 rows a chunk here): the einsum's values up to rounding, for one or several replicas."""
    from rowstoch_fast import objectives

    monkeypatch.setattr(objectives, "GRAM_CHUNK_BYTES", budget)
    rng = np.random.default_rng(3)
    H = rng.standard_normal((4, 30, 3))
    for w in (rng.random((4, 30)), rng.random((2, 4, 30))):
        np.testing.assert_allclose(objectives._weighted_grams(H, w), np.einsum("nmd,nme,...nm->...nde", H, H, w),
                                   rtol=1e-13, atol=1e-13)


def test_a_user_oracles_float16_or_big_endian_chunks_take_the_per_sample_path():
    """Helper 264: the chunk path took any float dtype that widens into float64, and the compiled finite check then
    refused float16 and big-endian arrays with a TypeError nothing caught (a crash where the per-sample path had
    run). Only native float32 into float64 takes the chunks; the others run as before."""
    import rowstoch_fast as rf
    from rowstoch_fast.algorithms._deferred import _widens
    from rowstoch_fast.runner import build_replicas

    assert _widens(np.dtype(np.float32), np.float64)
    assert not any(_widens(np.dtype(t), np.float64) for t in ("<f2", ">f4", ">f8", "<f8"))
    assert not _widens(np.dtype(np.float32), np.float32)
    f = LeastSquares.synthetic(6, samples_per_node=30, d=4, seed=2)

    class Narrow:
        def __init__(self, oracle, dtype):
            self.oracle, self.dtype = oracle, np.dtype(dtype)

        def __getattr__(self, name):
            return getattr(self.oracle, name)

        def __call__(self, X):
            return self.oracle(X)

        def sample_gradients(self, X, ids):
            return np.ascontiguousarray(self.oracle.sample_gradients(X, ids).astype(self.dtype))

        def sample_gradient(self, X, idx):
            return self.oracle.sample_gradient(X, idx).astype(self.dtype)

    for dtype in ("<f2", ">f4", ">f8"):
        opt = build_replicas(rf.Algorithm(rf.topology.exponential(6), 0.02, method="gt-saga"), f, 2)
        oracle = Narrow(f.oracle(seed=3), dtype)
        opt.initialize(oracle)
        opt.step(oracle)
        assert np.isfinite(opt.gather_x()).all(), dtype


def test_the_datas_fingerprint_hashes_its_bytes_without_a_copy():
    """Helper 263: describe() copied all the data (``tobytes``) for its fingerprint, doubling the memory of 3.3 GB of
    data, at 4.6-9.8 s a call and five calls a comparison. The arrays' own bytes now: the same digests (checkpoints
    and --resume compare them across versions)."""
    import hashlib

    for f in (NonconvexLogistic.synthetic(4, total=400, d=3, batch=5, seed=1),
              NonconvexLogistic.synthetic(4, total=400, d=3, batch=5, seed=1, dtype=np.float32),
              LeastSquares.synthetic(4, samples_per_node=7, d=3, seed=2)):
        digest = hashlib.sha1()
        for arr in f._data_arrays():
            digest.update(np.ascontiguousarray(arr).tobytes())
        assert f.describe()["data_sha1"] == digest.hexdigest()[:16]


def test_logistic_l2s_optimum_is_as_exact_in_small_units():
    # (Newton had stopped at an absolute gradient of 1e-12: features 1e-6 times smaller, lam 1e-12 times, after one
    # step, f* off by 9.2e-12, 36 times the harness's rounding)
    from rowstoch_fast.objectives import LogisticL2

    f = LogisticL2.synthetic(4, total=400, batch=10, seed=2, lam=1e-2)
    H, Y = f.H.reshape(-1, f.d), f.Y.ravel()
    unit = f.optimum().value
    for scale in (1e-6, 1e-8):
        small = LogisticL2(H * scale, Y, 4, lam=1e-2 * scale ** 2, batch=10).optimum()
        assert abs(small.value - unit) < 1e-15, (scale, small.value - unit)


def test_least_squares_optimum_keeps_directions_lapacks_cut_off_drops():
    # (lstsq's cut-off eps max(N, d) s_max had dropped singular values whose directions still lower the loss: at a
    # condition of 1e12 on 65,536 rows f* had been 1.8e-7 above the optimum, 180 times the harness's rounding)
    from rowstoch_fast.objectives import LeastSquares

    rng = np.random.default_rng(0)
    rows, d = 16 * 4096, 10
    U, _ = np.linalg.qr(rng.standard_normal((rows, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    H = (U * np.logspace(0, -12, d) * np.sqrt(rows)) @ V.T
    y = H @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)
    f = LeastSquares(H, y, 16)
    full = np.linalg.lstsq(H, y, rcond=1e-300)[0]
    assert f.optimum().value <= float(f.value_and_gradient_at(full)[0]) + 1e-15
    # dependent columns: the smaller cut-off's point (of norm 1e13) is not taken
    B = rng.standard_normal((256, 4))
    D = np.column_stack([B, B @ rng.standard_normal((4, 2)), np.ones(256), np.ones(256)])
    g = LeastSquares(D, y[:256], 16)
    np.testing.assert_allclose(g.optimum().x, np.linalg.lstsq(D, y[:256], rcond=None)[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("refuse", ["batches", "sums batches"])
def test_an_optimum_of_ones_own_is_checked_with_a_loss_of_one_point_at_a_time(refuse):
    """Helper 274: a loss written for one point (a batch refused, or its values summed) had its rounding measured as
    the sum of 17 values (2.1), and an f* 0.5 too low passed as rounding; one that refused batches lost the start's
    bar with it."""
    import warnings

    from rowstoch_fast.objectives import Optimum, optimum_of

    class Own(Quadratic):
        def value_and_gradient_at(self, x):
            x = np.asarray(x)
            if refuse == "batches" and x.ndim > 1:
                raise ValueError("one point at a time")
            value, gradient = Quadratic.value_and_gradient_at(self, x)
            return (np.sum(value) if x.ndim > 1 else value) * 1e-6, gradient * 1e-6

        def optimum(self):
            x = Quadratic._solve(self)
            return Optimum(x, float(self.value_and_gradient_at(x)[0]) - 5e-9)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimum_of(Own.random(8, 3, seed=0))
    assert any("is not f(x*)" in str(w.message) for w in caught)
