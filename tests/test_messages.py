"""Compressed, noisy and delayed messages (rowstoch_fast.network.Compressed / Noisy / Delayed) and CHOCO-SGD: the
compiled encoder, delays and rounds against the dense definitions of _reference, identities bit for bit, bytes,
resume, bad input."""

import functools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import cli_resumes_like_one_run, csr_and_block, feed, for_algorithm

import rowstoch_fast as rf
from rowstoch_fast import _reference as ref
from rowstoch_fast import topology
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy, Schedule, Sleepy

METHODS = [dict(method="qsgd", bits=3), dict(method="qsgd", bits=2, unbiased=False), dict(method="sign"),
           dict(method="topk", k=2), dict(method="randk", k=2), dict(method="randk", k=3, unbiased=False),
           dict(method="round", bits=5)]


def _params(kw):
    return {k: v for k, v in kw.items() if k != "method"}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", METHODS, ids=lambda kw: "-".join(map(str, kw.values())))
def test_encoded_messages_equal_the_definitions(kw, dtype):
    """Each method's messages (models of d = 4 values, two replicas per row; a narrow block is one message) are
    _reference.compress's, value for value, also for an MPI rank's rows (global ids)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((9, 8)).astype(dtype)
    X[2] = 0.0  # (a zero message: qsgd's norm 0)
    X[4, :4] = [1.0, -1.0, 1.0, -1.0]  # (ties: top-k keeps the lower columns)
    net = Compressed(topology.ring(9).astype(dtype), seed=11, **kw)
    out = np.empty_like(X)
    net.encode(X, out, 7, 1, d=4)
    expected = ref.compress(X, kw["method"], 4, 11, 7, 1, **_params(kw))
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 1e-15, atol=0)
    ids = np.array([5, 0, 8, 1, 7, 2, 6, 3, 4], dtype=np.int64)  # rows of other nodes
    net.encode(X, out, 7, 1, d=4, row_ids=ids)
    for row, node in enumerate(ids):
        np.testing.assert_allclose(out[row], [v for c0 in (0, 4) for v in ref.compress_message(
            X[row, c0:c0 + 4], kw["method"], node, c0, 11, 7, 1, **_params(kw))], rtol=1e-6, atol=0)
    narrow = np.empty((9, 1), dtype=dtype)
    net.encode(X[:, :1].copy(), narrow, 3, 0, d=4)
    np.testing.assert_allclose(narrow, ref.compress(X[:, :1], kw["method"], 4, 11, 3, 0, **_params(kw)), rtol=1e-6)


@pytest.mark.parametrize("method", ["qsgd", "sign"])
def test_the_encoders_twin_adds_in_the_kernels_order_on_every_python(monkeypatch, method):
    """The NumPy twin of the encoders sums a message's squares (qsgd) and magnitudes (sign) left to right, as the
    kernels do, whatever ``sum`` does: Python 3.12 made ``sum`` of floats compensated, and the twin (which called
    it) then differed from the kernels in the last place on the lent GPU machine's Python 3.12 (three tests)."""
    import builtins
    import math

    monkeypatch.setattr(builtins, "sum", lambda values, start=0: math.fsum(values) + start)  # (correctly rounded)
    differ = 0
    for seed in range(40):
        X = np.random.default_rng(seed).standard_normal((9, 8))
        params = {"bits": 1} if method == "qsgd" else {}
        net = Compressed(topology.ring(9), method, seed=seed % 97, **params)
        out = np.empty_like(X)
        net.encode(X, out, 3, 0, d=4)
        np.testing.assert_array_equal(out, ref.compress(X, method, 4, seed % 97, 3, 0, **params))
        rows = X.reshape(-1, 4)
        differ += sum(1 for v in rows if math.fsum(v * v) != float(np.add.reduce(v * v, dtype=np.float64)))
    assert differ or method == "sign"  # (the patched sum gives other values for some of these messages)


@settings(max_examples=60, deadline=None)
@given(exponent=st.integers(-1010, 1018), seed=st.integers(0, 2**20), bits=st.sampled_from([1, 2, 4, 8]),
       tiny_row=st.booleans())
def test_qsgd_is_exact_over_the_whole_finite_range(exponent, seed, bits, tiny_row):
    """QSGD's norm from squares that overflow (entries above ~1.3e154) or underflow (below ~1e-140): a finite
    message is encoded, as the definition says, within norm / s of each value, at every scale 2^-1000 ..
    2^1000 (a message of 1e160 turned into NaN, one of 1e-170 into zeros); the batched and the one-message
    paths (9 rows: two batches of four and one alone)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((9, 8)) * 2.0**exponent
    if tiny_row:
        X[3] *= 2.0**-60  # (one message at another scale than its batch)
    net = Compressed(topology.ring(9), "qsgd", bits=bits, seed=seed % 97)
    out = np.empty_like(X)
    net.encode(X, out, 3, 0, d=4)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, ref.compress(X, "qsgd", 4, seed % 97, 3, 0, bits=bits))
    for row in range(9):
        for c0 in (0, 4):
            v, q = X[row, c0:c0 + 4], out[row, c0:c0 + 4]
            bound = max(abs(x) for x in v) * 2.0 / (2**bits - 1)  # (norm / s, the norm at most 2 max|v| here)
            assert np.all(np.abs(q - v) <= bound * (1 + 1e-12))
            if bits >= 4:  # (the largest value keeps at least level s / 2: a message never becomes zeros)
                assert (q != 0).any() == (v != 0).any()


def _range_ends(dtype, rows=48, seed=0):
    """Messages of 4 values at the ends of ``dtype``'s range (the largest finite value F, F / 2, the smallest
    subnormal, -0.0, zeros, ones, of both signs): the all-zero, all -0.0, all-F and all-subnormal messages, [F, 0,
    0, 0], then rows of these values drawn at random."""
    f = np.finfo(dtype)
    ends = np.array([f.max, f.max / 2, f.smallest_subnormal, 0.0, 1.0], dtype=dtype)
    ends = np.concatenate([ends, -ends])
    fixed = [[0.0] * 4, [-0.0] * 4, [f.max] * 4, [f.max, -f.max, f.max, f.max], [f.smallest_subnormal] * 4,
             [f.max, 0.0, 0.0, 0.0], [-f.max, -0.0, f.smallest_subnormal, 1.0]]
    drawn = np.random.default_rng(seed).choice(ends, size=(rows - len(fixed), 4))
    return np.concatenate([np.array(fixed, dtype=dtype), drawn]).astype(dtype)


def _bits(a):
    return np.asarray(a).view(np.uint64 if np.asarray(a).dtype == np.float64 else np.uint32)


RANGE_METHODS = METHODS + [dict(method="qsgd", bits=1), dict(method="qsgd", bits=32), dict(method="randk", k=1),
                           dict(method="round", bits=1), dict(method="topk", k=4)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", RANGE_METHODS, ids=lambda kw: "-".join(map(str, kw.values())))
def test_every_encoder_sends_a_finite_message_as_finite_at_the_ends_of_the_range(kw, dtype):
    """At the largest finite value F, subnormals, -0.0 and zeros, every encoder's messages are finite and
    _reference.compress's, bit for bit (the sign of a zero too). Where the exact encoding is past F (QSGD's level
    times ||v|| / s reaches sqrt(L) max|v|; unbiased rand-k's v L / k; round near F) it saturates at the
    largest value the encoding sends: QSGD of [F, 0, 0, 0] was [inf, 0, 0, 0] on every backend."""
    X = _range_ends(dtype)
    f = np.finfo(dtype)
    net = Compressed(topology.ring(len(X)).astype(dtype), seed=5, **kw)
    out = np.empty_like(X)
    net.encode(X, out, 3, 1, d=4)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(_bits(out), _bits(ref.compress(X, kw["method"], 4, 5, 3, 1, **_params(kw))))
    zero = (X == 0).all(axis=1)
    assert (out[zero] == 0).all()  # (an all-zero message, also of -0.0, sends zeros)
    if kw["method"] == "round":  # (the largest value of `bits` bits at F; -0.0 stays -0.0)
        assert out[5, 0] == np.ldexp(dtype(2**kw["bits"] - 1), f.maxexp - kw["bits"]) and np.signbit(out[1]).all()
    if kw["method"] in ("qsgd", "sign", "topk") and kw.get("unbiased", True):
        assert np.abs(out[2]).max() == f.max  # ([F] * 4: its norm 2F; the top levels held at F)


def test_the_encoders_at_the_ends_of_the_range_on_the_emulated_device_equal_the_cpu(cuda_on_host, monkeypatch):
    """compress_rows of kernels.cu (on the host emulation) at the range's ends: the CPU's messages bit for bit,
    every method and both precisions (the sign of a message whose sum of |v| overflows was +-inf on the GPU)."""
    from test_backends import _emulated_device

    from rowstoch_fast.backends.cupy import CupyBackend

    fake = _emulated_device(cuda_on_host, monkeypatch)
    for dtype in (np.float64, np.float32):
        X = _range_ends(dtype, seed=1)
        A = topology.ring(len(X)).astype(dtype)
        backend = CupyBackend()
        backend.attach(len(X), dtype, [A])
        backend.message_d = 4
        for kw in RANGE_METHODS:
            net = Compressed(A, seed=5, **kw)
            want = net.encode(X, np.empty_like(X), 3, 1, d=4)
            got = backend._encode(net, fake.asarray(X), fake.zeros(X.shape, dtype), 3, 1)
            assert np.isfinite(want).all(), kw
            np.testing.assert_array_equal(_bits(np.asarray(got)), _bits(want), err_msg=str(kw))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), kw=st.sampled_from(RANGE_METHODS), wide=st.booleans())
def test_encoders_are_finite_and_their_definition_over_the_whole_finite_range(data, kw, wide):
    """Any finite message (values of any magnitude, subnormals and signed zeros among them) is encoded as the
    definition says, and finite."""
    dtype = np.float64 if wide else np.float32
    value = st.floats(allow_nan=False, allow_infinity=False, width=64 if wide else 32)
    X = np.array(data.draw(st.lists(st.lists(value, min_size=4, max_size=4), min_size=1, max_size=6)), dtype=dtype)
    out = np.empty_like(X)
    Compressed(topology.ring(len(X)).astype(dtype), seed=2, **kw).encode(X, out, 1, 0, d=4)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(_bits(out), _bits(ref.compress(X, kw["method"], 4, 2, 1, 0, **_params(kw))))


def test_noise_equals_its_definition_and_is_standard_normal():
    X = np.zeros((2000, 5))
    out = np.empty_like(X)
    Noisy(topology.ring(2000), sigma=0.5, seed=2, per="message").encode(X, out, 4, 0)
    np.testing.assert_allclose(out[:20], ref.compress(X[:20], "noise", 5, 2, 4, 0, sigma=0.5), rtol=1e-14)
    assert abs(out.mean()) < 0.02 and abs(out.std() - 0.5) < 0.02


@pytest.mark.parametrize("kw", [dict(method="qsgd", bits=2), dict(method="randk", k=1)])
def test_unbiased_compressions_are_unbiased(kw):
    """E[Q(v)] = v: the mean over 4000 iterations' draws is v to a few standard errors."""
    v = np.array([[0.3, -1.2, 0.7, 0.05]])
    net = Compressed(rf.MixingMatrix(np.ones((1, 1))), seed=5, **kw)
    out = np.empty_like(v)
    draws = np.array([net.encode(v, out, t, 0).copy()[0] for t in range(4000)])
    assert np.abs(draws.mean(axis=0) - v[0]).max() < 5 * draws.std(axis=0).max() / np.sqrt(4000) + 1e-12


NETWORKS = {
    "static": lambda A: A,
    "lossy": lambda A: Lossy(A, 0.3, seed=1),
    "bursty": lambda A: Lossy(A, 0.9, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
    "sleepy-lossy": lambda A: Sleepy(Lossy(Schedule([A, topology.ring(12)]), 0.2, seed=3), 0.7, seed=4),
    "nested-sleep": lambda A: Sleepy(Sleepy(A, 0.6, seed=1), 0.8, seed=2),  # (no compiled pass: NumPy)
}


@pytest.mark.parametrize("network", sorted(NETWORKS))
@pytest.mark.parametrize("kw", [dict(method="qsgd", bits=3), dict(method="topk", k=2)], ids=["qsgd", "topk"])
def test_a_compressed_round_equals_its_definition(network, kw):
    """y_i = m_ii x_i + sum_{j != i} m_ij q_j with M the base network's round (losses, renormalisation, sleep
    included), over two rounds; and noise composed under compression."""
    A = topology.erdos_renyi(12, 0.3, seed=2)
    base = NETWORKS[network](A)
    X = np.random.default_rng(1).standard_normal((12, 6))
    for net in (Compressed(base, seed=9, **kw), Compressed(Noisy(base, 0.1, seed=4, per="message"), seed=9, **kw)):
        Y = net.mix(X, 5, rounds=2, d=3)
        expected = X
        for r in range(2):
            Q = ref.compress(expected, kw["method"], 3, 9, 5, r, **_params(kw))
            if isinstance(net.base, Noisy):
                Q = ref.compress(Q, "noise", 3, 4, 5, r, sigma=0.1)
            expected = ref.compressed_round(base.matrix(5, r).toarray(), expected, Q)
        np.testing.assert_allclose(Y, expected, rtol=1e-12, atol=1e-13)


@settings(max_examples=60, deadline=None)
@given(case=csr_and_block(max_n=9, max_d=20), p=st.sampled_from([0.0, 0.1, 0.5, 1.0]), sleep=st.booleans(),
       rule=st.sampled_from(["row", "column", "symmetric"]), key=st.integers(0, 2**64 - 1), gated=st.booleans())
def test_a_lossy_round_of_messages_reads_the_stacked_block_in_the_fast_cases(case, p, sleep, rule, key, gated):
    """_core.mix_lossy(..., stacked=True) (a self loop reads its own row, the others their sender's message, the
    draws on the node ids: the pass's fast cases) gives the bits of the general case it replaced (own_and_messages'
    index over the stacked block with its node ids) and the dense definition y_i = m_ii x_i + sum_{j != i} m_ij q_j,
    M the lossy round's matrix (_reference.lossy_round of the identity): any CSR (empty rows, duplicates, self loops
    or none), widths 1..20, float32 and float64, int32 and int64 indices, losses, sleep, Gilbert-Elliott gates,
    each rule."""
    from rowstoch_fast import _core
    from rowstoch_fast.network import own_and_messages

    A, X = case
    n = A.shape[0]
    Q = np.random.default_rng(key % 2**32 + 2).standard_normal(X.shape).astype(X.dtype)
    ext = np.concatenate([X, Q])
    awake = (np.random.default_rng(key % 2**32).random(n) < 0.7) if sleep else None
    renormalise, symmetric = rule == "row", rule == "symmetric"
    bad = np.random.default_rng(key % 2**32 + 1).integers(0, 4 if symmetric else 2, A.nnz).astype(np.uint8) \
        if gated else None
    kw = dict(seed=key, t=key % 1000, r=1, p=p, renormalise=renormalise, awake=awake, symmetric=symmetric, bad=bad)
    got = _core.mix_lossy(A.indptr, A.indices, A.data, ext, None, stacked=True, **kw)
    index = own_and_messages(A.indptr, A.indices, None, None, n)
    nodes = np.arange(n, dtype=np.int64)
    before = _core.mix_lossy(A.indptr.astype(index.dtype), index, A.data, ext, None, row_ids=nodes,
                             col_ids=np.concatenate([nodes, nodes]), ncols=2 * n, **kw)
    np.testing.assert_array_equal(got, before)
    split = _core.mix_lossy(A.indptr, A.indices, A.data, X, None, messages=Q, **kw)  # (the own rows apart)
    np.testing.assert_array_equal(split, got)
    M = ref.lossy_round(A.indptr, A.indices, A.data.astype(np.float64), np.eye(n), key, key % 1000, 1, p,
                        renormalise, awake, symmetric=symmetric, bad=bad)
    rtol = 1e-12 if X.dtype == np.float64 else 2e-5
    scale = 1 + np.abs(A.data).sum() * max(np.abs(ext).max(initial=0), 1)
    np.testing.assert_allclose(got, ref.compressed_round(M, X, Q), rtol=0, atol=rtol * scale * 4)


def test_a_stacked_lossy_round_refuses_ids_and_a_block_of_the_wrong_height():
    """stacked=True reads [own rows; messages] of a square matrix: node ids or ncols, or an X that is not 2 n rows,
    are refused by name."""
    from rowstoch_fast import _core

    c = topology.ring(6).csr
    X = np.zeros((12, 2))
    ids = np.arange(6, dtype=np.int64)
    with pytest.raises(ValueError, match="stacked"):
        _core.mix_lossy(c.indptr, c.indices, c.data, X, p=0.1, stacked=True, row_ids=ids, col_ids=ids)
    with pytest.raises(ValueError, match="stacked"):
        _core.mix_lossy(c.indptr, c.indices, c.data, X, p=0.1, stacked=True, ncols=12)
    with pytest.raises(ValueError, match="X has 6 rows"):
        _core.mix_lossy(c.indptr, c.indices, c.data, np.zeros((6, 2)), p=0.1, stacked=True)
    own, Q = np.zeros((6, 2)), np.ones((6, 2))  # (messages=Q: X the own rows, Q the messages, apart)
    for kw, error, match in (({"stacked": True}, ValueError, "messages: the indices name the n nodes"),
                             ({"row_ids": ids, "col_ids": ids}, ValueError, "messages: the indices name"),
                             ({"ncols": 6}, ValueError, "messages: the indices name"),
                             ({"messages": np.ones((5, 2))}, ValueError, "messages"),
                             ({"messages": np.ones((6, 2), np.float32)}, TypeError, "messages"),
                             ({"messages": np.ones(6)}, ValueError, "messages must be 2-D"),
                             ({"out": Q}, ValueError, "out shares memory with messages")):
        with pytest.raises(error, match=match):
            _core.mix_lossy(c.indptr, c.indices, c.data, own, **{"p": 0.1, "messages": Q, **kw})


@pytest.mark.parametrize("network", ["lossy", "bursty", "sleepy-lossy"])
def test_a_compressed_lossy_run_takes_the_stacked_pass_and_keeps_its_bits(network, monkeypatch):
    """Compressed networks over losses and sleep: a run through the stacked fast pass (STACKED, the default) equals,
    bit for bit, the run through own_and_messages' index (the general case before), and a run resumed mid-way
    from its state equals the run straight through."""
    from rowstoch_fast import _core

    calls = {"split": 0, "stacked": 0, "general": 0}
    plain = _core.mix_lossy

    def spy(*args, stacked=False, messages=None, **kwargs):
        calls["split" if messages is not None else "stacked" if stacked else "general"] += 1
        return plain(*args, stacked=stacked, messages=messages, **kwargs)

    monkeypatch.setattr(_core, "mix_lossy", spy)
    A = topology.erdos_renyi(12, 0.3, seed=2)
    b = np.random.default_rng(0).standard_normal((12, 3))

    def networks(path):
        net = Compressed(NETWORKS[network](A), "qsgd", bits=3, seed=7)
        pushed = net.map(rf.mixing.out_degree_weights)  # (column-stochastic: the lost mass lost)
        net.STACKED = pushed.STACKED = path != "general"
        net.SPLIT = pushed.SPLIT = path == "split"
        return {"A": net, "C": pushed}

    def run(path, steps=12, resume_at=None):
        opt = rf.PushPull(**networks(path), x0=np.zeros(3), lr=0.05)
        for k in range(steps):
            if k == resume_at:
                opt = rf.PushPull.from_state_dict(opt.state_dict(), **networks(path))
            opt.step(lambda X: X - b)
        return opt.x

    fast = run("split")
    assert calls["split"] > 0 and calls["stacked"] == calls["general"] == 0  # (every round: own rows read apart)
    np.testing.assert_array_equal(fast, run("stacked"))
    assert calls["stacked"] > 0 and calls["general"] == 0
    np.testing.assert_array_equal(fast, run("general"))
    assert calls["general"] > 0
    np.testing.assert_array_equal(fast, run("split", resume_at=5))


IDENTITIES = {"topk k=d": lambda A: Compressed(A, "topk", k=3), "randk k=d": lambda A: Compressed(A, "randk", k=3),
              "biased randk k=d": lambda A: Compressed(A, "randk", k=3, unbiased=False),
              "noise 0": lambda A: Noisy(A, 0.0, seed=3),
              "round 24 bits (float32)": lambda A: Compressed(A.astype(np.float32), "round", bits=24)}


@pytest.mark.parametrize("identity", sorted(IDENTITIES))
@pytest.mark.parametrize("name", ["dsgd", "push-pull", "sgp", "pull-diag-gt", "diging", "robust-gradient-push",
                                  "r-fast"])
def test_identity_compressions_are_the_base_network_bit_for_bit(identity, name):
    """Top-k and rand-k with k = d, noise 0 and rounding at the run's precision send every value unchanged: the
    iterates equal the base network's, bit for bit (the base a lossy network, so that both take the network
    paths)."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    if "W" in cls.matrices:
        net, plain = IDENTITIES[identity](A), A
        plain = plain.astype(np.float32) if "float32" in identity else plain
    else:
        plain = Lossy(A.astype(np.float32) if "float32" in identity else A, 0.2, seed=1)
        net = IDENTITIES[identity](Lossy(A, 0.2, seed=1)) if "float32" not in identity else \
            Compressed(plain, "round", bits=24)
    dtype = np.float32 if "float32" in identity else np.float64
    b = np.random.default_rng(0).standard_normal((10, 3)).astype(dtype)
    runs = [cls.build(M, np.zeros(3, dtype=dtype), 0.05) for M in (net, plain)]
    for opt in runs:
        for _ in range(15):
            opt.step(lambda X: X - b)
    if name == "diging":  # (the static W runs the plain kernels, the compressed one the network pass)
        np.testing.assert_allclose(runs[0].x, runs[1].x, rtol=1e-13, atol=1e-15)
    else:
        np.testing.assert_array_equal(runs[0].x, runs[1].x)


def test_traffic_counts_the_compressed_bytes():
    A = topology.exponential(16)
    links = A.nnz - 16
    for kw, per_message in [(dict(method="topk", k=2), 2 * (8 + 4)), (dict(method="qsgd", bits=4), (10 * 5 + 64) // 8 + 1),
                            (dict(method="sign"), (10 + 64) // 8 + 1), (dict(method="randk", k=3), 3 * 8),
                            (dict(method="round", bits=8), 10 * (1 + 11 + 7) // 8 + 1)]:
        opt = rf.DSGD(Compressed(A, **kw), np.zeros(10), lr=0.1)
        for _ in range(3):
            opt.step(lambda X: X)
        assert opt.traffic() == {"messages": 3 * links, "bytes": 3 * links * per_message}, kw
    plain = rf.DSGD(Noisy(A, 0.1), np.zeros((2, 16, 10)), lr=0.1)  # noise: no smaller; 2 replicas
    plain.step(lambda X: X)
    assert plain.traffic()["bytes"] == links * 2 * 10 * 8
    # a push-sum message packs 3 replicas' models and the weight: 3 top-2 messages and the weight sent plain
    sgp = rf.SGP(Compressed(rf.mixing.out_degree_weights(A), "topk", k=2), np.zeros((3, 16, 10)), lr=0.1)
    sgp.step(lambda X: X)
    assert sgp.traffic() == {"messages": links, "bytes": links * (3 * 2 * (8 + 4) + 8)}


def test_choco_sgd_equals_its_twin_under_compression():
    W = topology.ring(10, directed=False, weights="metropolis")
    b = np.random.default_rng(2).standard_normal((10, 4))
    net = Compressed(W, "qsgd", bits=2, seed=3)
    opt = rf.CHOCOSGD(net, np.zeros(4), lr=0.05)
    omega = net.omega(4)
    assert opt.gamma == pytest.approx(1 / (1 + omega))
    xs = ref.choco_sgd(W.csr.toarray(), np.zeros((10, 4)), 0.05, lambda X: X - b, 40, gamma=opt.gamma,
                       compress=lambda V, t: ref.compress(V, "qsgd", 4, 3, t, 0, bits=2) / (1 + omega))
    for _ in range(40):
        opt.step(lambda X: X - b)
    np.testing.assert_allclose(opt.x, xs[-1], rtol=1e-12, atol=1e-13)


def test_choco_sgd_over_delays_and_noisy_copies_equals_its_twin():
    """CHOCO-SGD over Compressed(Noisy(Delayed(W))): q compressed once, the neighbours' copies x_hat mixed through
    the links (each receiver's copy as of the newest message that arrived, noise on each received copy); the
    twin with the network's own mix of the links (to 1e-12); the delays change the run."""
    from rowstoch_fast.network import links_of

    W = topology.ring(10, directed=False, weights="metropolis")
    b = np.random.default_rng(2).standard_normal((10, 4))
    net = Compressed(Noisy(Delayed(W, 2, seed=4), 0.01, seed=5), "topk", k=2)
    assert rf.CHOCOSGD.applies_to(net) and type(links_of(net)) is Noisy and links_of(net).base.base is W
    opt = rf.CHOCOSGD(net, np.zeros(4), lr=0.05)
    twin, state = links_of(net.map(lambda M: M)), {"quantity": 1}  # (the copies: the step's second quantity)
    xs = ref.choco_sgd(W.csr.toarray(), np.zeros((10, 4)), 0.05, lambda X: X - b, 30, gamma=opt.gamma,
                       compress=lambda V, t: ref.compress(V, "topk", 4, 0, t, 0, k=2),
                       mix=lambda V, t: twin.mix(V, t, d=4, state=state))
    for _ in range(30):
        opt.step(lambda X: X - b)
    np.testing.assert_allclose(opt.x, xs[-1], rtol=1e-12, atol=1e-13)
    plain = rf.CHOCOSGD(Compressed(W, "topk", k=2), np.zeros(4), lr=0.05)
    for _ in range(30):
        plain.step(lambda X: X - b)
    assert np.abs(plain.x - opt.x).max() > 1e-6


def test_choco_sgd_converges_where_plain_dgd_under_the_same_compression_does_not():
    """Top-k with k = d / 4 on a ring: CHOCO-SGD's error feedback brings it within 1.5x of uncompressed DGD's
    O(lr) neighbourhood; DGD over the same compressed messages stays more than 2x further."""
    n, d = 16, 20
    W = topology.ring(n, directed=False, weights="metropolis")
    b = np.random.default_rng(0).standard_normal((n, d))

    def error(opt):
        for _ in range(3000):
            opt.step(lambda X: X - b)
        return np.linalg.norm(opt.x - b.mean(axis=0)) / np.sqrt(n)

    exact = error(rf.DGD(W, np.zeros(d), lr=0.01))
    choco = error(rf.CHOCOSGD(Compressed(W, "topk", k=5), np.zeros(d), lr=0.01, gamma=0.5))
    plain = error(rf.DGD(Compressed(W, "topk", k=5), np.zeros(d), lr=0.01))
    assert choco < 1.8 * exact and plain > 2 * exact, (exact, choco, plain)


def test_a_compressed_run_resumes_bit_for_bit():
    net = Compressed(Lossy(topology.exponential(12), 0.2, seed=1), "randk", k=2, seed=5)
    b = np.random.default_rng(0).standard_normal((12, 4))
    a = rf.PushPull(net, net.map(rf.mixing.out_degree_weights), np.zeros(4), lr=0.05)
    for _ in range(10):
        a.step(lambda X: X - b)
    state = a.state_dict()
    for _ in range(10):
        a.step(lambda X: X - b)
    resumed = rf.PushPull.from_state_dict(state, A=net, C=net.map(rf.mixing.out_degree_weights))
    for _ in range(10):
        resumed.step(lambda X: X - b)
    np.testing.assert_array_equal(resumed.x, a.x)
    with pytest.raises(ValueError, match="k"):
        rf.PushPull.from_state_dict(state, A=Compressed(Lossy(topology.exponential(12), 0.2, seed=1), "randk", k=3,
                                                      seed=5), C=net.map(rf.mixing.out_degree_weights))


@pytest.mark.parametrize("call,match", [
    (lambda A: Compressed(A, "qsgd", bits=0), "bits"), (lambda A: Compressed(A, "qsgd", bits=33), "bits"),
    (lambda A: Compressed(A, "qsgd", bits=2.5), "bits"), (lambda A: Compressed(A, "topk", k=0), "k"),
    (lambda A: Compressed(A, "topk"), "needs k"), (lambda A: Compressed(A, "sign", k=2), "takes no parameter"),
    (lambda A: Compressed(A, "qsgd", bits=4, k=2), "not k"), (lambda A: Compressed(A, "zip"), "method"),
    (lambda A: Compressed(A, "randk", k=2, unbiased="yes"), "unbiased"), (lambda A: Noisy(A, -1.0), "sigma"),
    (lambda A: Lossy(Compressed(A, "sign"), 0.1), "outermost"), (lambda A: Sleepy(Noisy(A, 0.1), 0.5), "outermost"),
    (lambda A: rf.DSGD(Compressed(A, "topk", k=5), np.zeros(4), lr=0.1), "k = 5 .* 4 values"),
    (lambda A: rf.RobustGradientPush(Compressed(Schedule([rf.mixing.out_degree_weights(A)] * 2), "sign"),
                                     np.zeros(2), lr=0.1), "static column-stochastic matrix or a Lossy or Sleepy"),
    (lambda A: rf.CHOCOSGD(Compressed(topology.erdos_renyi(8, 0.4, seed=1), "sign"), np.zeros(2), lr=0.1),
     "doubly|columns"),
])
def test_bad_compression_input_is_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(topology.exponential(8))


def test_the_command_line_runs_compressed_networks_and_refuses_bad_options(tmp_path, capsys):
    """rowstoch run: --compress / --bits / --k / --biased / --noise build the network (the run differs from the
    plain one, resumes bit for bit, and is what the checkpoint identifies); bad values: one line, exit 2."""
    from rowstoch_fast import cli

    base = ["run", "--n", "16", "--objective", "quadratic", "--d", "8", "--algorithm", "push-pull", "--compress",
            "qsgd", "--bits", "3", "--noise", "0.01", "--network-seed", "4", "--record-every", "10", "--no-progress"]
    ck, _ = cli_resumes_like_one_run(base, tmp_path)
    other = [v if v != "3" else "4" for v in base]
    assert cli.main(other + ["--iterations", "40", "--resume", ck, "--out", str(tmp_path / "d")]) == 2
    assert "bits" in capsys.readouterr().err
    for bad, message in ((["--compress", "qsgd", "--bits", "0"], "--compress qsgd needs --bits in 1..32, got 0"),
                         (["--compress", "round", "--bits", "33"], "needs --bits in 1..32, got 33"),
                         (["--compress", "topk"], "--compress topk needs --k in 1..d"),
                         (["--compress", "randk", "--k", "9", "--objective", "quadratic", "--d", "8"],
                          "needs --k in 1..d (d = 8), got 9"),
                         (["--bits", "4"], "--bits is not read without --compress qsgd or round"),
                         (["--compress", "sign", "--k", "2"], "--k is not read without --compress topk or randk"),
                         (["--compress", "topk", "--k", "1", "--biased"], "--biased is not read without"),
                         (["--noise", "-1"], "--noise must be a finite number >= 0")):
        assert cli.main(["run", "--out", str(tmp_path / "x")] + bad) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()
    capsys.readouterr()
    assert cli.main(["run", "--compress", "zip"]) == 2
    assert "--compress item 'zip': the method must be one of none, qsgd" in capsys.readouterr().err
    assert cli.main(["run", "--compress", "none,qsgd:4"]) == 2
    assert "rowstoch run takes one --loss and one --compress item" in capsys.readouterr().err


@pytest.mark.parametrize("dtype,sigma,bound", [(np.float64, 1e308, "2.097e+307"), (np.float64, 2.1e307, "2.097e+307"),
                                               (np.float32, 1e38, "3.97e+37")])
def test_noise_too_large_to_represent_is_refused_naming_sigma(tmp_path, capsys, dtype, sigma, bound):
    """sigma z with |z| up to Z_MAX = 8.57 (the normal draws' largest) must stay finite in the network's dtype:
    a larger sigma (1e308 had been accepted, its noise infinite) is refused by the layer, and by rowstoch run and
    compare in one line with exit 2, before anything is written; sigma at the bound sends finite messages."""
    from rowstoch_fast import cli
    from rowstoch_fast.network.noisy import Z_MAX

    A = topology.ring(4).astype(dtype)
    with pytest.raises(ValueError, match=rf"^sigma must be at most {re.escape(bound)} for {np.dtype(dtype).name} "
                                         rf"values .* got {re.escape(f'{sigma:g}')}$"):
        Noisy(A, sigma)
    top = float(np.finfo(dtype).max) / Z_MAX
    for per in ("message", "link"):
        net = Noisy(A, top, seed=1, per=per)
        assert np.isfinite(net.mix(np.zeros((4, 3000), dtype=dtype), 2)).all()
    extra = ["--dtype", "float32"] if dtype == np.float32 else []
    for command in ("run",) if extra else ("run", "compare"):  # (compare runs in float64)
        assert cli.main([command, "--noise", f"{sigma:g}", "--out", str(tmp_path / "x"), *extra]) == 2
        err = capsys.readouterr().err
        assert f"--noise must be at most {bound}" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()


def test_compare_takes_the_communication_options_and_the_toml_table(tmp_path, capsys):
    """rowstoch compare --compress ... and a file's [communication] table: the bytes of its tables are the
    compressed ones (top-1 of 8 float64 values: 12 bytes a message instead of 64)."""
    import pandas as pd

    from rowstoch_fast import cli

    common = ["compare", "--topology", "ring", "--n", "8", "--objective", "quadratic", "--d", "8", "--algorithms",
              "dsgd,choco-sgd", "--lr", "0.05", "--rounds-budget", "20", "--repeats", "1", "--no-progress"]
    assert cli.main(common + ["--out", str(tmp_path / "plain")]) == 0
    assert cli.main(common + ["--compress", "topk", "--k", "1", "--out", str(tmp_path / "topk")]) == 0
    plain, topk = (pd.read_csv(tmp_path / k / "summary.csv").set_index("algorithm") for k in ("plain", "topk"))
    assert topk.loc["dsgd", "bytes"] * 64 == plain.loc["dsgd", "bytes"] * 12
    toml = tmp_path / "exp.toml"
    toml.write_text('[network]\ntopology = "ring"\nn = 8\n[objective]\nkind = "quadratic"\nd = 8\n'
                    '[communication]\ncompress = "topk"\nk = 1\n[run]\nrounds_budget = 20\nrepeats = 1\n'
                    '[algorithms.dsgd]\nlr = 0.05\n[algorithms.choco-sgd]\nlr = 0.05\n')
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "file"), "--no-progress"]) == 0
    from_file = pd.read_csv(tmp_path / "file" / "summary.csv").set_index("algorithm")
    assert from_file.loc["dsgd", "bytes"] == topk.loc["dsgd", "bytes"]
    toml.write_text(toml.read_text().replace("k = 1", "k = 0"))
    capsys.readouterr()
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "bad"), "--no-progress"]) == 2
    assert "[communication] compress topk needs k in 1..d" in capsys.readouterr().err  # (the file's key, not the flag)



def test_a_file_of_values_per_node_is_read_a_chunk_at_a_time_and_a_bad_word_quoted_short(tmp_path):
    """Helper 218: a text file of values per node was read whole and its first word that is not a number quoted
    whole: 20 MB of NUL bytes (one word) made an 84 MB error line; 200 MB took 4.4 GB of memory before it failed.
    A word is refused as soon as it is read, quoted to 40 characters, one longer than a number can be as soon as
    it is that long; numbers split across chunks read as written."""
    from rowstoch_fast.network import options as network_options

    (tmp_path / "ok.txt").write_text("0.125, 0.25\n0.5 1e-3")
    assert network_options._text_values(tmp_path / "ok.txt", chunk=3) == [0.125, 0.25, 0.5, 1e-3]
    (tmp_path / "nul.txt").write_bytes(b"\0" * 3_000_000)
    with pytest.raises(ValueError, match=r"^'(\\x00){40}'\.\.\. is not a number \(a word of more than 64 "):
        network_options._text_values(tmp_path / "nul.txt")
    (tmp_path / "word.txt").write_text("0.5 " + "y" * 50)
    with pytest.raises(ValueError, match=r"^'y{40}'\.\.\. is not a number$"):
        network_options._text_values(tmp_path / "word.txt")
    with pytest.raises(network_options.UsageError, match=r"--loss @.*nul.txt: not a file of numbers \('"):
        network_options.node_spec(f"@{tmp_path / 'nul.txt'}", "--loss")


def test_the_command_line_and_a_file_give_values_per_node(tmp_path, capsys):
    """--loss / --awake / --rate / --noise / --bits / --k and their [communication] keys take one value per node:
    ``FIRST..LAST`` (evenly spread, rounded for bits and k) and ``@FILE`` (.npy or text) build the layers with those
    arrays; a run with them resumes bit for bit and a comparison puts them in its captions and experiment.json;
    a file of another length, an unreadable one, a value out of range or not an integer: one line, exit 2."""
    import json

    from rowstoch_fast import cli
    from rowstoch_fast.cli import make_parser
    from rowstoch_fast.network import Lossy, Sleepy
    from rowstoch_fast.network import options as network_options

    awake = tmp_path / "awake.txt"
    awake.write_text("0.5, 0.6 0.7\n0.8 0.9 1 1 1\n")
    np.save(tmp_path / "two.npy", np.full((2, 4), 0.5))
    (tmp_path / "halves.txt").write_text(" ".join(["0.5"] * 8))  # (one value for every node: the number 0.5)
    (tmp_path / "zero.txt").write_text("0.5 0.5 0.5 0 0.5 0.5 0.5 0.5")
    assert network_options.node_spec("0.2..0", "--loss").of(3, "--loss").tolist() == [0.2, 0.1, 0.0]  # (as written)
    assert network_options.node_spec("8..2", "--bits", integer=True).of(4, "--bits", True).tolist() == [8, 6, 4, 2]
    assert network_options.node_spec("0.1..0.1", "--loss") == 0.1  # (one value for all: that number)
    np.save(tmp_path / "sigma.npy", np.linspace(0.0, 0.01, 8))
    args = make_parser().parse_args(["run", "--loss", "0..0.35", "--awake", f"@{awake}", "--compress", "qsgd",
                                      "--bits", "2..8", "--noise", f"@{tmp_path / 'sigma.npy'}"])
    (_, ns), = network_options.settings(args, {"--loss", "--awake", "--compress", "--bits", "--noise"})
    net = network_options.build(topology.ring(8), ns)
    layers = {}
    while not isinstance(net, rf.MixingMatrix):
        layers[type(net).__name__] = net
        net = net.base
    np.testing.assert_array_equal(layers["Lossy"].p, np.linspace(0.0, 0.35, 8))
    np.testing.assert_array_equal(layers["Sleepy"].q, [0.5, 0.6, 0.7, 0.8, 0.9, 1, 1, 1])
    np.testing.assert_array_equal(layers["Compressed"].bits, np.rint(np.linspace(2, 8, 8)))
    np.testing.assert_array_equal(layers["Noisy"].sigma, np.linspace(0.0, 0.01, 8))
    args = make_parser().parse_args(["run", "--activation", "poisson", "--rate", "0.5..2", "--compress", "topk",
                                      "--k", "1..3"])
    (_, ns), = network_options.settings(args, {"--activation", "--rate", "--compress", "--k"})
    net = network_options.build(topology.ring(8), ns)
    np.testing.assert_array_equal(net.k, np.rint(np.linspace(1, 3, 8)))
    assert isinstance(net.base, Sleepy) and np.array_equal(net.base.rate, np.linspace(0.5, 2, 8))
    base = ["run", "--n", "8", "--topology", "ring", "--objective", "quadratic", "--d", "4", "--algorithm", "push-pull",
            "--loss", "0..0.3", "--compress", "qsgd", "--bits", "2..8", "--awake", f"@{awake}", "--record-every", "10",
            "--no-progress"]
    cli_resumes_like_one_run(base, tmp_path)
    assert cli.main(base + ["--metric", "messages_dropped,node_max_distance", "--iterations", "20", "--out",
                            str(tmp_path / "m")]) == 0  # (rowstoch run records the message counters asked for)
    import pandas as pd

    history = pd.read_csv(tmp_path / "m" / "history.csv")
    assert history["messages_dropped"].iloc[-1] > 0 and history["node_max_distance"].notna().all()
    capsys.readouterr()
    assert cli.main(["run", "--metric", "bogus", "--out", str(tmp_path / "n")]) == 2
    err = capsys.readouterr().err
    assert "--metric must be one of" in err and "messages_dropped" in err and err.count("\n") == 1
    common = ["compare", "--topology", "ring", "--n", "8", "--objective", "quadratic", "--d", "4", "--algorithms",
              "dsgd", "--lr", "0.05", "--rounds-budget", "10", "--repeats", "1", "--no-progress"]
    assert cli.main(common + ["--loss", "0.1,0..0.2", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "messages lost with probability 0..0.2 per node (the sender's)" in out
    settings = json.loads((tmp_path / "c" / "experiment.json").read_text())
    assert settings["settings"]["loss"] == "0.1,0..0.2" and "ring / loss 0..0.2 per node" in settings["graphs"]
    assert settings["argv"] == common + ["--loss", "0.1,0..0.2", "--out", str(tmp_path / "c")]  # (main's own, not
    # the interpreter's command line)
    drops = tmp_path / "drops.txt"  # (a resumed comparison refuses a file whose values changed)
    drops.write_text(" ".join(map(str, np.linspace(0, 0.3, 8))))
    assert cli.main(common + ["--loss", f"@{drops}", "--out", str(tmp_path / "r")]) == 0
    drops.write_text(" ".join(map(str, np.linspace(0.3, 0, 8))))
    capsys.readouterr()
    assert cli.main(["compare", "--resume", str(tmp_path / "r"), "--repeats", "2", "--no-progress"]) == 2
    assert f"--loss @{drops} holds other values than when the comparison started" in capsys.readouterr().err
    toml = tmp_path / "exp.toml"
    toml.write_text('[network]\ntopology = "ring"\nn = 8\n[objective]\nkind = "quadratic"\nd = 4\n'
                    f'[communication]\nloss = [0.1, "0..0.2"]\nnoise = "@{tmp_path / "sigma.npy"}"\n'
                    '[run]\nrounds_budget = 10\nrepeats = 1\n[algorithms.dsgd]\nlr = 0.05\n')
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "f"), "--no-progress"]) == 0
    assert "message noise sigma @" in capsys.readouterr().out
    for bad, message in ((["--loss", f"@{tmp_path / 'none.txt'}"], "--loss @"),
                         (["--awake", f"@{awake}", "--n", "16"], "the file holds 8 values, one per node of the 16"),
                         (["--loss", "0..1"], "--loss must be in [0, 1)"),
                         (["--loss", "0..x"], "--loss must be a number, or one per node: FIRST..LAST"),
                         (["--compress", "qsgd", "--bits", "2..40"],
                          "--compress qsgd needs --bits in 1..32, got 2..40"),
                         (["--compress", "qsgd", "--bits", "2.5..4"], "argument --bits: must be an integer"),
                         (["--awake", "0..1"], "--awake must be in (0, 1], got 0..1"),
                         (["--noise=-1..0"], "--noise must be a finite number >= 0"),
                         (["--compress", "qsgd", "--bits", "inf"], "argument --bits: must be a finite number"),
                         (["--compress", "qsgd", "--bits", "nan"], "argument --bits: must be a finite number"),
                         (["--awake", f"@{tmp_path}"], f"argument --awake: @{tmp_path}: the file cannot be read"),
                         (["--awake", f"@{tmp_path / 'two.npy'}"], "a .npy file of one value per node must be 1-D"),
                         (["--loss", "0.1,0.1..0.1"], "--loss '0.1,0.1..0.1' names a rate twice"),
                         (["--loss", "0..0.2,0.0..0.2"], "names a rate twice"),
                         (["--loss", f"0.5,@{tmp_path / 'halves.txt'}"], "names a rate twice"),
                         (["--loss", "1e400"], "--loss must be a finite number"),
                         (["--awake", f"@{tmp_path / 'zero.txt'}"], "got @" + str(tmp_path / "zero.txt") +
                          " (node 3's value 0)"),
                         (["--compress", "qsgd:2..8"], "(bits; one per node: --compress qsgd --bits 2..8)"),
                         (["--activation", "markov", "--p-sleep", "0.1..0.5", "--p-wake", "0.5"],
                          "argument --p-sleep: takes one number, got '0.1..0.5'; a value per node is taken by --loss")):
        try:
            code = cli.main(["run", *([] if "--n" in bad else ["--n", "8"]), "--out", str(tmp_path / "x")] + bad)
        except SystemExit as exc:  # (argparse's refusal of a value its type does not take)
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, (bad, err)
    assert not (tmp_path / "x").exists()
    toml.write_text(toml.read_text().replace('noise = "@', 'noise = "@/nowhere'))
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "g"), "--no-progress"]) == 2
    assert "[communication] noise @/nowhere" in capsys.readouterr().err  # (the file's key, not the flag)
    toml.write_text(toml.read_text().replace('noise = "@/nowhere', 'compress = "qsgd"\nbits = 1' + "0" * 400 +
                                             '\nnoise = "@/nowhere'))
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "i"), "--no-progress"]) == 2
    assert "[communication] compress qsgd needs bits in 1..32" in capsys.readouterr().err  # (an int past the floats)
    toml.write_text(toml.read_text().replace('loss = [0.1, "0..0.2"]', "loss = [true]"))
    assert cli.main(["compare", "--config", str(toml), "--out", str(tmp_path / "h"), "--no-progress"]) == 2
    assert "loss must be a number, a string giving one per node" in capsys.readouterr().err
    assert Lossy  # (the layer the file builds)


@pytest.mark.parametrize("D,fixed", [(1, False), (3, False), (4, True), (0, False)])
def test_delay_ages_equal_their_definition(D, fixed):
    """The compiled ages (the newest message that has arrived, per link) are _reference.delay_ages', also on an MPI
    rank's rows (global ids); they are bounded by min(D, t), 0 on self loops, and the row each entry reads is in
    the block of iteration t - age."""
    from rowstoch_fast import _core

    c = topology.erdos_renyi(15, 0.3, seed=1).csr
    for t in (0, 1, 2, 5, 50):
        ages = _core.delay_ages(c.indptr, c.indices, 7, t, 1, D, fixed=fixed)
        np.testing.assert_array_equal(ages, ref.delay_ages(c.indptr, c.indices, 7, t, 1, D, fixed=fixed))
        assert ages.max() <= min(D, t)
        rows = np.repeat(np.arange(15), np.diff(c.indptr))
        assert (ages[rows == c.indices] == 0).all()
        index = _core.delay_ages(c.indptr, c.indices, 7, t, 1, D, fixed=fixed, layout=(15, 15, 2))
        own = rows == c.indices
        np.testing.assert_array_equal(index[own], rows[own])
        np.testing.assert_array_equal(index[~own], 15 + c.indices[~own] * (D + 1) * 2 + ((t - ages[~own]) % (D + 1)) * 2 + 1)
    ids = np.array([3, 7, 11], dtype=np.int64)  # rows 3, 7, 11 of the matrix, held by one rank
    sub = c[ids]
    got = _core.delay_ages(sub.indptr.astype(np.int64), sub.indices.astype(np.int64), 7, 9, 0, D, fixed=fixed,
                           row_ids=ids, col_ids=np.arange(15, dtype=np.int64))
    whole = ref.delay_ages(c.indptr, c.indices, 7, 9, 0, D, fixed=fixed)
    np.testing.assert_array_equal(got, np.concatenate([whole[c.indptr[i]:c.indptr[i + 1]] for i in ids]))


@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_delayed_rounds_equal_their_definition(network):
    """Ten iterations of Delayed (and of top-k under Delayed): y_i = m_ii x_i(t) + sum_j m_ij q_j(t - a_ij) with the
    messages of every iteration and the ages of _reference, the round's weights those of the base network."""
    A = topology.erdos_renyi(12, 0.3, seed=2)
    base = NETWORKS[network](A)
    rng = np.random.default_rng(0)
    full = A.csr
    for net in (Delayed(base, 3, seed=5), Compressed(Delayed(base, 2, seed=5), "topk", k=2),
                Delayed(base, 2, delay="fixed")):
        history = []
        delayed = net.delayed()
        for t in range(10):
            X = rng.standard_normal((12, 3))
            Y = net.mix(X, t, d=3)
            history.append(ref.compress(X, "topk", 3, 0, t, 0, k=2) if isinstance(net, Compressed) else X)
            links_of = topology.ring(12).csr if network == "sleepy-lossy" and t % 2 else full  # (the schedule's)
            ages = np.zeros((12, 12), dtype=int)
            ages[np.repeat(np.arange(12), np.diff(links_of.indptr)), links_of.indices] = ref.delay_ages(
                links_of.indptr, links_of.indices, delayed.seed, t, 0, delayed.max_delay, fixed=delayed.delay == "fixed")
            M = net.matrix(t, 0).toarray()
            np.testing.assert_allclose(Y, ref.delayed_mix(M, X, history, t, ages), rtol=1e-12, atol=1e-13,
                                       err_msg=f"{net!r} at t = {t}")


@pytest.mark.parametrize("D", [1, 3, 16, 17])
def test_a_delayed_rounds_drawn_ages_are_its_index_bit_for_bit_at_every_vector_width(D):
    """The ages a uniformly delayed round draws in its mixing pass (eight links at a time on AVX-512, where the
    CPU runs it: rows of eight links or more) are those of delay_ages' index, bit for bit, at every vector width
    the CPU runs, for windows of ages up to 16 (the masked draws) and past them, over losses too."""
    from rowstoch_fast import _core

    A = topology.erdos_renyi(40, 0.5, seed=3)  # (about 20 links a row)
    X = np.random.default_rng(1).standard_normal((40, 3))
    widths = _core.simd_widths()  # (2, and 4 and 8 where the CPU runs them)
    assert 2 in widths
    try:
        for base in (A, Lossy(A, 0.2, seed=4)):
            via_index = Delayed(base, D, seed=5)
            via_index.FUSED = {"uniform": False, "fixed": False}
            _core.set_simd_width(0)
            want = [via_index.mix(X + t, t) for t in range(D + 4)]  # (each iteration sends its own block)
            for w in widths:
                _core.set_simd_width(w)
                fused = Delayed(base, D, seed=5)
                for t, expected in enumerate(want):
                    np.testing.assert_array_equal(fused.mix(X + t, t), expected,
                                                  err_msg=f"{base!r}, D = {D}, t = {t}, width {w}")
    finally:
        _core.set_simd_width(0)


@pytest.mark.parametrize("name", ["dsgd", "push-pull", "sgp", "pull-diag-gt", "diging", "robust-gradient-push",
                                  "r-fast"])
def test_max_delay_zero_is_the_base_network_bit_for_bit(name):
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    plain = A if "W" in cls.matrices else Lossy(A, 0.2, seed=1)
    b = np.random.default_rng(0).standard_normal((10, 3))
    runs = [cls.build(M, np.zeros(3), 0.05) for M in (Delayed(plain, 0, seed=2), plain)]
    for opt in runs:
        for _ in range(15):
            opt.step(lambda X: X - b)
    if name == "diging":
        np.testing.assert_allclose(runs[0].x, runs[1].x, rtol=1e-13, atol=1e-15)
    else:
        np.testing.assert_array_equal(runs[0].x, runs[1].x)


@pytest.mark.parametrize("name", ["push-pull", "pull-diag-gt", "push-diging", "extra", "robust-gradient-push",
                                  "r-fast"])
def test_a_delayed_run_resumes_bit_for_bit_and_each_quantity_keeps_its_history(name, tmp_path):
    """state_dict saves the messages in flight (one history per quantity the algorithm mixes: Push-Pull's x and y
    apart; the robust methods' running sums, compressed and noisy too, with their pending mass); from_state_dict,
    through an .npz, continues bit for bit. The delays change the run."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(12, 0.35, seed=4))
    fixed = name in ("extra", "r-fast")  # (their histories iteration by iteration in memory, node by node saved)
    net = Delayed(A if "W" in cls.matrices else Lossy(A, 0.1, seed=1), 3, seed=6, delay="fixed" if fixed else "uniform")
    if cls.per_link_state:
        net = Compressed(Noisy(net, 0.05, seed=6), "topk", k=2)
    mats = {k: (net.map(rf.mixing.out_degree_weights) if k == "C" else net) for k in cls.matrices}
    b = np.random.default_rng(0).standard_normal((12, 3))
    opt = cls.build(net, np.zeros(3), 0.02)
    for _ in range(7):
        opt.step(lambda X: X - b)
    np.savez(tmp_path / "s.npz", **opt.state_dict())
    for _ in range(9):
        opt.step(lambda X: X - b)
    resumed = cls.from_state_dict(dict(np.load(tmp_path / "s.npz")), **mats)
    for _ in range(9):
        resumed.step(lambda X: X - b)
    np.testing.assert_array_equal(resumed.x, opt.x)
    plain = cls.build(net.base, np.zeros(3), 0.02)
    for _ in range(16):
        plain.step(lambda X: X - b)
    assert np.abs(plain.x - opt.x).max() > 1e-6
    if name == "push-pull":
        assert len(opt._ops._channels) == 2
    assert {state["ring"].order for state in resumed._ops._channels.values()} == {"iteration" if fixed else "node"}


DAMAGES = {  # what a damaged or partial delayed-message history is refused with (the key named)
    "no history": (lambda st, k: {n: v for n, v in st.items() if not n.startswith("delayed/")},
                   r"^state has no delayed-message history \(keys 'delayed/...'\)"),
    "no last": (lambda st, k: {n: v for n, v in st.items() if n != k + "last"},
                r"state has '.*' but no 'delayed/.*/last': the delayed-message history is incomplete"),
    "no layout": (lambda st, k: {n: v for n, v in st.items() if n != k + "layout"}, r"but no 'delayed/.*/layout'"),
    "a NaN": (lambda st, k: {**st, k + "messages": np.where(np.arange(st[k + "messages"].size).reshape(
        st[k + "messages"].shape) == 5, np.nan, st[k + "messages"])}, r"messages'\] holds a NaN or Inf: the delayed"),
    "a row short": (lambda st, k: {**st, k + "messages": st[k + "messages"][:-1]},
                    r"messages'\] must be a numeric array of \d+ rows \(layout"),
    "a bad layout": (lambda st, k: {**st, k + "layout": np.array([3, 1])}, r"layout'\] must be 3 integers"),
    "a stray key": (lambda st, k: {**st, "delayed/step/x/messages": st[k + "messages"]},
                    r"not a delayed-message history's key"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_damaged_or_missing_delayed_history_is_refused_naming_the_key(name, damage):
    """A saved state of a delayed network without its messages in flight used to be accepted (and continue
    differently from the uninterrupted run); a damaged one gave NumPy broadcast errors naming no key, or a NaN
    blamed on the learning rate. Every algorithm that runs on a delayed network, every kind of damage."""
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    net = Delayed(A if "W" in cls.matrices else Lossy(A, 0.1, seed=1), 2, seed=5)
    if not cls.applies_to(net):
        pytest.skip(f"{name} does not run on a delayed network")
    mats = {k: (net.map(rf.mixing.out_degree_weights) if k == "C" else net) for k in cls.matrices}
    b = np.random.default_rng(1).standard_normal((10, 2))
    opt = cls.build(net, np.zeros(2), 0.02)
    oracle = feed(cls, lambda X: X - b)
    for _ in range(4):
        opt.step(oracle)
    state = opt.state_dict()
    if not any(n.startswith("delayed/") for n in state):
        pytest.skip(f"{name} sends no messages through the network")
    first = sorted(n for n in state if n.startswith("delayed/"))[0].rsplit("/", 1)[0] + "/"
    cls.from_state_dict(dict(state), **mats)  # (the whole state is accepted)
    broken, match = DAMAGES[damage]
    with pytest.raises(ValueError, match=match):
        cls.from_state_dict(broken(dict(state), first), **mats)


RESHAPED = {  # a history of another layout, found at its first use (it was replaced by a fresh one, silently)
    "a column short": lambda st, k: {**st, k + "messages": st[k + "messages"][:, :-1]},
    "a column more": lambda st, k: {**st, k + "messages": np.hstack([st[k + "messages"]] * 2)},
    "the rows relabelled": lambda st, k: {**st, k + "layout": np.array([len(st[k + "messages"]), 0, 1])},
}


@pytest.mark.parametrize("damage", sorted(RESHAPED))
@pytest.mark.parametrize("name", ["dsgd", "push-pull", "pull-diag-gt"])
def test_a_delayed_history_of_another_layout_is_refused_at_its_first_use(name, damage):
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    net = Delayed(Lossy(A, 0.1, seed=1), 2, seed=5)
    mats = {k: (net.map(rf.mixing.out_degree_weights) if k == "C" else net) for k in cls.matrices}
    b = np.random.default_rng(1).standard_normal((10, 3))
    opt = cls.build(net, np.zeros(3), 0.02)
    for _ in range(4):
        opt.step(lambda X: X - b)
    state = opt.state_dict()
    first = sorted(n for n in state if n.startswith("delayed/step/"))[0].rsplit("/", 1)[0] + "/"
    again = cls.from_state_dict(RESHAPED[damage](dict(state), first), **mats)
    x = again.x.copy()
    with pytest.raises(ValueError, match=r"^state\['%smessages'\] / \['%slayout'\]: a history of .* the state is "
                                         r"not this run's" % (first, first)):
        again.step(lambda X: X - b)
    np.testing.assert_array_equal(again.x, x)
    with pytest.raises(ValueError, match="a history of"):  # (and again: never replaced by a fresh one)
        again.step(lambda X: X - b)


@pytest.mark.parametrize("call,match", [
    (lambda A: Delayed(A, -1), "max_delay"), (lambda A: Delayed(A, 1.5), "max_delay must be an integer"),
    (lambda A: Delayed(A, True), "max_delay must be an integer"), (lambda A: Delayed(A, "3"), "integer"),
    (lambda A: Delayed(A, 2, delay="poisson"), "delay must be"),
    (lambda A: Delayed(Delayed(A, 1), 2), "one Delayed layer"), (lambda A: Lossy(Delayed(A, 1), 0.1), "outermost"),
])
def test_bad_delays_are_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(topology.exponential(8))


def test_a_delay_bound_whose_history_cannot_fit_is_refused_before_allocating():
    """The messages of the last max_delay + 1 iterations are checked against the memory limit first: MemoryError
    naming max_delay, nothing allocated."""
    net = Delayed(topology.exponential(4096), 2**20 - 1)
    with pytest.raises(MemoryError, match="max_delay"):
        rf.DSGD(net, np.zeros(64), lr=0.1).step(lambda X: X)


def test_the_command_line_runs_delayed_networks_and_resumes_them(tmp_path, capsys):
    """rowstoch run --max-delay: the messages in flight are in the checkpoint (the resumed run's records equal the
    uninterrupted run's); another delay bound is refused on --resume; bad values: one line, exit 2."""
    from rowstoch_fast import cli

    base = ["run", "--n", "16", "--objective", "quadratic", "--algorithm", "push-pull", "--max-delay", "3",
            "--loss", "0.1", "--record-every", "10", "--no-progress"]
    ck, _ = cli_resumes_like_one_run(base, tmp_path)
    other = [v if v != "3" else "2" for v in base]
    assert cli.main(other + ["--iterations", "40", "--resume", ck, "--out", str(tmp_path / "d")]) == 2
    assert "max_delay" in capsys.readouterr().err
    for bad, message in ((["--max-delay", "-1"], "--max-delay must be an integer in 0..1048576 (iterations), got -1"),
                         (["--max-delay", "1048576", "--n", "1024", "--objective", "quadratic", "--d", "100"],
                          "out of memory: the histories of the delayed messages (--max-delay=1048576"),
                         (["--delay", "fixed"], "--delay is not read without --max-delay")):
        assert cli.main(["run", "--out", str(tmp_path / "x"), "--no-progress"] + bad) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "x").exists()  # nothing written


def test_compressed_push_pull_equals_its_twin_and_stays_exact_under_compression():
    """CPP (Song, Shi, Pu & Yan): the dense twin with the same compressed messages (to 1e-12); under 2-bit QSGD on a
    directed graph it reaches x* to 1e-8 where Push-Pull over the same messages stays 0.1 away; the tracker sum
    is the gradient sum."""
    A = topology.exponential(16)
    net = Compressed(A, "qsgd", bits=2, seed=3)
    C = net.map(rf.mixing.out_degree_weights)
    b = np.random.default_rng(2).standard_normal((16, 6))
    opt = rf.CompressedPushPull(net, C, np.zeros(6), lr=0.05)
    omega, delta = net.contraction(6)
    assert opt.a == pytest.approx(1 / (1 + omega)) and opt.gamma == pytest.approx(delta / (1 + min(1, omega)))
    xs = ref.compressed_push_pull(A.csr.toarray(), C.matrix(0).toarray(), np.zeros((16, 6)), 0.05, lambda X: X - b,
                                  30, gamma=opt.gamma, a=opt.a,
                                  compress_A=lambda V, t: ref.compress(V, "qsgd", 6, 3, t, 0, bits=2),
                                  compress_C=lambda V, t: ref.compress(V, "qsgd", 6, 3, t, 2**32, bits=2))
    # (the trackers' messages the step's second quantity: their draws as round 2^32, content_round)
    for _ in range(30):
        opt.step(lambda X: X - b)
    np.testing.assert_allclose(opt.x, xs[-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(opt._cur["y"].sum(axis=0), (opt.x - b).sum(axis=0), rtol=1e-10, atol=1e-10)
    for _ in range(2500):
        opt.step(lambda X: X - b)
    plain = rf.PushPull(net, C, np.zeros(6), lr=0.05)
    for _ in range(2530):
        plain.step(lambda X: X - b)
    assert np.abs(opt.x - b.mean(axis=0)).max() < 1e-8
    assert np.abs(plain.x - b.mean(axis=0)).max() > 0.05


@pytest.mark.parametrize("network", ["lossy-sleepy", "delayed-noisy", "schedule"])
def test_compressed_push_pull_over_the_links_equals_its_twin(network):
    """CPP over losses, sleep, schedules, delays and noise on each received copy: its messages ``q`` compressed
    once by the sender, ``v_hat_w`` the mixture of the receivers' copies of ``v_hat = h + q`` through the links
    (``links_of``: the network's own mix, checked against its dense definition elsewhere); equal to the twin to
    1e-12; the links change the run."""
    from rowstoch_fast.network import Schedule, Sleepy, links_of

    A = topology.exponential(12)
    base = {"lossy-sleepy": Sleepy(Lossy(A, 0.2, seed=1), 0.8, seed=2),
            "delayed-noisy": Noisy(Delayed(Lossy(A, 0.1, seed=1), 2, seed=5), 0.01, seed=6),
            "schedule": Schedule([A, topology.ring(12), topology.erdos_renyi(12, 0.4, seed=1)])}[network]
    net = Compressed(base, "qsgd", bits=4, seed=3)
    C = net.map(rf.mixing.out_degree_weights)
    assert rf.CompressedPushPull.applies_to(net) and links_of(net) is links_of(net)
    b = np.random.default_rng(2).standard_normal((12, 3))
    opt = rf.CompressedPushPull(net, C, np.zeros(3), lr=0.05)
    twin_nets = {"x": net.map(lambda M: M), "y": C.map(lambda M: M)}  # (their own delay histories)
    # the step's quantities, in order: Q(x - h_x), the copies of x through the links when a message layer is left
    # there (delays, noisy copies), Q(y - h_y), the copies of y (each its own draws: content_round)
    through = hasattr(links_of(net), "encode")
    states = {"x": {"quantity": 1}, "y": {"quantity": 3}}
    y_round = (2 if through else 1) * 2**32

    def mix(key):
        links = links_of(twin_nets[key])
        if hasattr(links, "encode"):  # (a message layer left: delays, noisy copies)
            return lambda V, t: links.mix(V, t, d=3, state=states[key])
        return lambda V, t: links.mix(V, t)

    xs = ref.compressed_push_pull(A.csr.toarray(), C.matrix(0).toarray(), np.zeros((12, 3)), 0.05, lambda X: X - b,
                                  25, gamma=opt.gamma, a=opt.a,
                                  compress_A=lambda V, t: ref.compress(V, "qsgd", 3, 3, t, 0, bits=4),
                                  compress_C=lambda V, t: ref.compress(V, "qsgd", 3, 3, t, y_round, bits=4),
                                  mix_A=mix("x"), mix_C=mix("y"), copies=True)
    for _ in range(25):
        opt.step(lambda X: X - b)
    np.testing.assert_allclose(opt.x, xs[-1], rtol=1e-12, atol=1e-12)
    plain = Compressed(A, "qsgd", bits=4, seed=3)
    static = rf.CompressedPushPull(plain, plain.map(rf.mixing.out_degree_weights), np.zeros(3), lr=0.05)
    for _ in range(25):
        static.step(lambda X: X - b)
    assert np.abs(static.x - opt.x).max() > 1e-6


@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_noise_on_each_received_copy_equals_its_definition(network):
    """Noisy(per="link"), under top-k and over delays too: y_i = m_ii x_i + sum_{j != i} m_ij (q_j(s) + sigma
    z_ij(s)), z drawn per link and value for the iteration s the message was sent (_reference.link_noise), the
    weights those of the base network's round."""
    A = topology.erdos_renyi(12, 0.3, seed=2)
    base = NETWORKS[network](A)
    rng = np.random.default_rng(0)
    for net in (Noisy(base, 0.2, seed=4), Compressed(Noisy(base, 0.2, seed=4), "topk", k=2, seed=9),
                Noisy(Delayed(base, 2, seed=5), 0.2, seed=4)):
        delayed = net.delayed()
        history = []
        for t in range(6):
            X = rng.standard_normal((12, 3))
            Y = net.mix(X, t, d=3)
            history.append(ref.compress(X, "topk", 3, 9, t, 0, k=2) if isinstance(net, Compressed) else X)
            M = net.matrix(t, 0).toarray()
            links = topology.ring(12).csr if network == "sleepy-lossy" and t % 2 else A.csr  # (the schedule's)
            ages = np.zeros((12, 12), dtype=int)
            rows = np.repeat(np.arange(12), np.diff(links.indptr))
            if delayed is not None:
                ages[rows, links.indices] = ref.delay_ages(links.indptr, links.indices, 5, t, 0, 2)

            def noise_of(i, j):
                return _one_link_noise(4, t - ages[i, j], 0, i, j, 3)

            expected = ref.delayed_mix(M, X, history, t, ages) + (
                ref.noisy_round(M, X, np.zeros_like(X), noise_of, 0.2) - ref.compressed_round(M, X, np.zeros_like(X)))
            np.testing.assert_allclose(Y, expected, rtol=1e-12, atol=1e-12, err_msg=f"{net!r} at t = {t}")


def _one_link_noise(seed, s, r, i, j, w):
    """_reference.link_noise of the single link j -> i sent in iteration s."""
    import math

    from rowstoch_fast._hashing import uniform_hash

    return np.array([math.sqrt(-2.0 * math.log(1.0 - float(uniform_hash(seed, s, r, i, j, 3, c))))
                     * math.cos(6.283185307179586 * float(uniform_hash(seed, s, r, i, j, 4, c))) for c in range(w)])


def test_noise_on_received_copies_is_independent_per_receiver():
    """Two receivers of one message get different noise (per link), of the expected spread: a node hearing from
    two others with weight 1/3 each gets noise of variance 2 (sigma / 3)^2."""
    A = topology.exponential(512, directed=False, weights="metropolis")
    X = np.zeros((512, 4))
    Y = Noisy(A, 0.3, seed=1).mix(X, 3)
    W = A.csr.toarray()
    off = (W ** 2).sum(axis=1) - np.diag(W) ** 2
    z = Y / (0.3 * np.sqrt(off))[:, None]
    assert abs(z.std() - 1) < 0.05 and abs(z.mean()) < 0.05
    assert np.unique(np.round(Y[:, 0], 12)).size > 500  # (not one draw per sender)


def test_a_comparison_goes_on_when_no_rate_keeps_a_method_stable():
    """On a harsh network (top-k messages over lossy links) the push-sum methods diverge or stall at every rate the
    tuner tries: compare shows them at the rate that ended lowest, says so in the lr source ("none stable"), their
    status and its diagnosis (which rates failed and how), and ranks the others."""
    import pandas as pd

    from rowstoch_fast import compare as cmp
    from rowstoch_fast.objectives import LeastSquares

    net = Compressed(Lossy(topology.exponential(16), 0.1, seed=1), "topk", k=3)
    f = LeastSquares.synthetic(16, d=8, seed=3)
    frame = cmp.compare(net, f, ["sgp", "dsgd"], 200, repeats=1, progress=False)
    table = cmp.summary(frame).set_index("algorithm")
    assert frame.attrs["lr_source"] == {"sgp": cmp.UNTUNABLE, "dsgd": "tuned"}
    assert table.loc["sgp", "status"] in ("diverged", "unstable", "no-progress")
    assert table.loc["sgp", "diagnosis"].startswith("no rate in 0.0001..10 was stable over the budget (")
    assert pd.isna(table.loc["sgp", "rank"])
    assert table.loc["dsgd", "rank"] == 1 and np.isfinite(table.loc["dsgd", "final"])


ROBUST_NETWORKS = {
    "qsgd-lossy": lambda A: Compressed(Lossy(A, 0.2, seed=1), "qsgd", bits=3, seed=4),
    "delayed-lossy": lambda A: Delayed(Lossy(A, 0.2, seed=1), 3, seed=5),
    "noisy-delayed": lambda A: Noisy(Delayed(A, 2, seed=5), 0.05, seed=6),
    "all": lambda A: Compressed(Noisy(Delayed(Lossy(A, 0.2, seed=1), 3, seed=5), 0.05, seed=6), "topk", k=2),
    "sleepy-lossy": lambda A: Sleepy(Lossy(A, 0.1, seed=1), seed=2, model="markov", p_sleep=0.1, p_wake=0.5),
    "sleepy-all": lambda A: Compressed(Noisy(Delayed(Sleepy(Lossy(A, 0.1, seed=1), 0.9, seed=2), 2, seed=5), 0.01,
                                             seed=6), "qsgd", bits=4, seed=3),
}


@pytest.mark.parametrize("network", sorted(ROBUST_NETWORKS))
def test_robust_gradient_push_over_message_networks_equals_its_running_sums(network):
    """Robust gradient-push under compression, delays, noise on the received running sums and sleep (a sleeping
    node's links silent): its per-link pending mass (one pass) against the twin that keeps every link's running
    sums and the last one each receiver got (``r_new = s_ij(k - age) + noise``, take ``r_new - r_old``), to 1e-10
    over 25 iterations."""
    from rowstoch_fast import _hashing

    A = topology.erdos_renyi(9, 0.4, seed=3)
    net = ROBUST_NETWORKS[network](A).map(rf.mixing.out_degree_weights)
    C, Cm = rf.network.weights_of(net), rf.network.base_matrix(net)
    b = np.random.default_rng(0).standard_normal((9, 3))
    opt = rf.RobustGradientPush(net, np.zeros(3), lr=0.05)
    for _ in range(25):
        opt.step(lambda X: X - b)
    indptr, indices = Cm.csr.indptr, Cm.csr.indices
    entry = {(i, int(indices[q])): q for i in range(9) for q in range(indptr[i], indptr[i + 1])}
    layers, layer = {}, net
    while hasattr(layer, "encode"):
        layers[type(layer).__name__] = layer
        layer = layer.base
    delayed, noisy, compressed = (layers.get(k) for k in ("Delayed", "Noisy", "Compressed"))

    @functools.lru_cache(maxsize=None)
    def ages(k):
        return ref.delay_ages(indptr, indices, delayed.seed, k, 0, delayed.max_delay)

    @functools.lru_cache(maxsize=None)
    def noise_rows(k, q, w):  # (the q-th quantity of the step, the weights q = 1: drawn as round q 2^32)
        return ref.link_noise(indptr, indices, noisy.seed, k, q * 2**32, w, ages=None if delayed is None else ages(k))

    def age(k, i, j):
        return 0 if delayed is None else int(ages(k)[entry[(i, j)]])

    def noise(k, i, j):
        zx, zw = (np.asarray(noise_rows(k, q, w)[entry[(i, j)]]) for q, w in ((0, 3), (1, 1)))
        return noisy.sigma * zx, noisy.sigma * zw

    def message(k, V, q):
        params = {key: getattr(compressed, key) for key in compressed._TAKES[compressed.method]}
        return ref.compress(V, compressed.method, 3, compressed.seed, k, q * 2**32, **params)

    sleepy = C if isinstance(C, Sleepy) else None
    lossy = C.base if sleepy is not None else C

    def lost(k, i, j):  # (a lost message, or a sleeping end: its links are silent)
        gone = isinstance(lossy, Lossy) and _hashing.uniform_hash(lossy.seed, k, 0, i, j) < lossy.p
        return gone or (sleepy is not None and not (sleepy.awake(k)[i] and sleepy.awake(k)[j]))

    zs = ref.robust_gradient_push(Cm.csr.toarray(), np.zeros((9, 3)), 0.05, lambda X: X - b, 25, lost=lost,
                                  message=None if compressed is None else message,
                                  age=None if delayed is None else age, noise=None if noisy is None else noise,
                                  awake=None if sleepy is None else sleepy.awake)
    np.testing.assert_allclose(opt.x, zs[-1], rtol=1e-10, atol=1e-12)
    plain = rf.RobustGradientPush(C if C is not net else C.base, np.zeros(3), lr=0.05)
    for _ in range(25):
        plain.step(lambda X: X - b)
    assert np.abs(plain.x - opt.x).max() > 1e-6  # (the layers act)


@pytest.mark.parametrize("network", ["delayed-lossy", "noisy-delayed", "sleepy-lossy"])
def test_robust_methods_lose_no_mass_to_delays_noise_or_sleep(network):
    """Delays and sleep keep the mass on the links and the noise on a received running sum telescopes: robust
    gradient-push's weights plus their undelivered mass stay n, R-FAST's trackers plus theirs the sum of the
    gradients, to rounding, after 40 iterations."""
    A = topology.erdos_renyi(10, 0.4, seed=3)
    net = ROBUST_NETWORKS[network](A)
    C = net.map(rf.mixing.out_degree_weights)
    b = np.random.default_rng(0).standard_normal((10, 3))
    rgp = rf.RobustGradientPush(C, np.zeros(3), lr=0.05)
    fast = rf.RFAST(net, C, np.zeros(3), lr=0.05)
    for _ in range(40):
        rgp.step(lambda X: X - b)
        fast.step(lambda X: X - b)
    extra = rgp._save_extra()
    assert float(rgp._cur["w"].sum() + extra["pending_w"].sum()) == pytest.approx(10.0, abs=1e-11)
    mass = fast._cur["y"].sum(axis=0) + fast._save_extra()["pending_C"].sum(axis=0)
    np.testing.assert_allclose(mass, (fast.x - b).sum(axis=0), atol=1e-10)


GPU_CASES = {"robust-gradient-push": "sleepy-all", "r-fast": "all", "choco-sgd": None, "compressed-push-pull": "all",
             "pull-diag-gt": "sleepy-all", "dsgd": "all"}


@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_message_networks_on_a_gpu_equal_the_cpu(name):
    """On a machine with a GPU: every kind of method over compressed, noisy, delayed (and sleeping) links through
    the CuPy backend (its message kernels, the running sums' generic operations on the device) gives the CPU's
    iterates (to 1e-9: the device's log / cos in the Gaussian noise differ by an ulp)."""
    from conftest import cupy_or_reason

    cupy, reason = cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(12, 0.4, seed=3))
    net = (Compressed(Noisy(Delayed(A, 2, seed=5), 0.01, seed=6), "topk", k=2) if GPU_CASES[name] is None else
           ROBUST_NETWORKS[GPU_CASES[name]](A))
    x0 = np.random.default_rng(9).standard_normal((12, 4))
    b = np.random.default_rng(10).standard_normal((12, 4))
    cpu = cls.build(net, x0, 0.02)
    gpu = cls.build(net, cupy.asarray(x0), 0.02)
    assert gpu.backend == "cupy"
    bd = cupy.asarray(b)
    for _ in range(15):
        cpu.step(lambda X: X - b)
        gpu.step(lambda X: X - bd)
    np.testing.assert_allclose(gpu.gather_x(), cpu.gather_x(), rtol=1e-9, atol=1e-11)


def test_each_quantity_of_a_step_draws_its_own_compression_and_noise():
    """The quantities an optimizer mixes in one iteration (Push-Pull's x and y) are different messages: the same
    block sent as the step's first and second quantity gets other quantization draws and other noise on each
    received copy (content_round: round r + q 2^32), while the losses and delays hit both alike; the first is
    the network's own mix; independent draws: their noises correlate at most by chance."""
    from rowstoch_fast._hashing import content_round
    from rowstoch_fast.backends.cpu import CpuBackend

    A = topology.exponential(256)
    net = Compressed(Noisy(Lossy(A, 0.2, seed=1), 0.5, seed=4), "qsgd", bits=2, seed=3)
    X = np.random.default_rng(0).standard_normal((256, 6))
    ops = CpuBackend()
    ops.attach(256, np.float64, [A])
    ops.message_d, ops.t, ops.phase, ops.calls = 6, 5, "step", 0
    first, second = np.empty_like(X), np.empty_like(X)
    ops.mix(net, X, first)
    ops.mix(net, X, second)
    np.testing.assert_array_equal(first, net.mix(X, 5, d=6))
    np.testing.assert_array_equal(second, net.mix(X, 5, d=6, state={"quantity": 1}))
    assert content_round(0, {"quantity": 1}) == 2**32 and content_round(3, None) == 3
    plain = Lossy(A, 0.2, seed=1).mix(X, 5)  # (the losses: the same for both)
    e1, e2 = (first - plain).ravel(), (second - plain).ravel()
    assert abs(np.corrcoef(e1, e2)[0, 1]) < 0.2  # (the same draws gave 1.0)
    ops.phase, ops.calls = "step", 0  # the next iteration starts its quantities over
    again = np.empty_like(X)
    ops.mix(net, X, again)
    np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize("make", [lambda A: Compressed(Lossy(A, 0.2, seed=1), "topk", k=2),
                                  lambda A: Noisy(A, 0.1, per="message"), lambda A: Noisy(Sleepy(A, 0.7), 0.1)])
def test_a_round_of_messages_mixes_in_place(make):
    """out may be X itself (the own rows are read while out is written: the pass gets a copy), for one round
    and several: the values of a separate output."""
    A = topology.exponential(16)
    net = make(A)
    X = np.random.default_rng(0).standard_normal((16, 4))
    for rounds in (1, 3):
        want = net.mix(X.copy(), 3, rounds=rounds)
        inplace = X.copy()
        assert net.mix(inplace, 3, rounds=rounds, out=inplace) is inplace
        np.testing.assert_array_equal(inplace, want)


def test_device_gilbert_elliott_chains_far_ahead_read_backwards(cuda_on_host, monkeypatch):
    """The CuPy backend's bursty chains (emulated device): a jump of at most GE_DEVICE_STEPS iterations walks
    forward on the device (ge_advance of kernels.cu), a farther one (t = 10^9, 10^12, from the start or from a
    recent call) is read backwards from t by the CPU's pass and uploaded: every state equals the CPU's, and no
    far t is refused (the forward walk had been held by the 10^10-step bound, and took minutes below it)."""
    import time

    from test_backends import _emulated_device

    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.network import Lossy

    fake = _emulated_device(cuda_on_host, monkeypatch)
    A = topology.erdos_renyi(23, 0.3, seed=4)
    c = A.csr
    Ap, Aj = c.indptr.astype(np.int32), c.indices.astype(np.int32)
    on_device = fake.asarray(Ap), fake.asarray(Aj), fake.asarray(c.data)  # (one share: the chains are kept per share)
    monkeypatch.setattr(backend, "device_csr", lambda M: on_device)
    device_chain = Lossy(A, 0.9, seed=5, model="gilbert-elliott", p_bad=0.3, p_recover=0.2)
    host_chain = Lossy(A, 0.9, seed=5, model="gilbert-elliott", p_bad=0.3, p_recover=0.2)
    for t in (3, 40, 40 + backend.GE_DEVICE_STEPS, 5000, 10**9, 10**9 + 7, 10**12):
        start = time.perf_counter()
        device = np.array(backend._device_bad_states(device_chain, A, t))
        assert time.perf_counter() - start < 5.0, t
        np.testing.assert_array_equal(device, host_chain.bad_states(c.indptr, c.indices, t), err_msg=str(t))
    assert 0 < device.mean() < 1
    ran = [k for k in fake.launched if k.startswith("ge_advance")]
    assert len(ran) == 4  # (t = 3 from the start, 40, the jump of exactly GE_DEVICE_STEPS, and 10^9 + 7)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), width=st.integers(1, 12), D=st.integers(0, 3), rounds=st.integers(1, 2),
       order=st.sampled_from(["node", "iteration"]), dtype=st.sampled_from([np.float32, np.float64]),
       rows=st.sampled_from(["all", "slice", "index"]), layout=st.sampled_from(["C", "F", "strided", "other dtype"]),
       seed=st.integers(0, 2**16))
def test_a_history_keeps_each_message_as_the_plain_assignment_would(n, width, D, rounds, order, dtype, rows, layout,
                                                                  seed):
    """History.put copies a round's messages into their slot as bytes (one element per message where the rows
    are contiguous: section 36's faster copy): the same slots as NumPy's assignment, for any order, dtype, share
    of rows (a slice, an MPI rank's index) and messages laid out any way (the plain assignment where not)."""
    from rowstoch_fast._history import History

    rng = np.random.default_rng(seed)
    ring = History(2, n, width, D, rounds, dtype, order=order)
    expect = np.zeros((n, D + 1, rounds, width), dtype=dtype)
    share = {"all": slice(None), "slice": slice(n // 2, n), "index": rng.permutation(n)[: max(1, n // 2)]}[rows]
    count = len(np.arange(n)[share])
    for t in range(D + 3):
        ring.start(t)
        for r in range(rounds):
            values = rng.standard_normal((count, width))
            messages = {"C": values.astype(dtype), "F": np.asfortranarray(values.astype(dtype)),
                        "strided": np.repeat(values.astype(dtype), 2, axis=1)[:, ::2],
                        "other dtype": values.astype(np.float64 if dtype == np.float32 else np.float32)}[layout]
            if ring.fresh:
                expect[share, :, r] = messages[:, None]
            else:
                expect[share, t % (D + 1), r] = messages
            ring.put(t, r, messages, rows=share)
        ring.done(t)
        np.testing.assert_array_equal(ring.slots(), expect)


def test_the_networks_own_history_of_messages_warns_where_calls_skip_or_go_back():
    """Helper 199: fixed delays of 2 mixed outside an optimizer at t = 0, 2, 4, 6 read x(t) (0, 2, 4, 6) where the
    definition reads x(t - 2) (0, 1, 3, 5), going back, widening the block or adding rounds started the history
    again, unsaid.
    Calls in order, a new run from t = 0 and an optimizer's own state say nothing."""
    import warnings

    from rowstoch_fast.network import Delayed

    net = Delayed(topology.ring(4), max_delay=2, delay="fixed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [float(net.mix(np.full((4, 1), float(t)), t)[0, 0]) for t in range(4)] == [0.0, 0.5, 1.0, 2.0]
        assert [float(net.mix(np.full((4, 1), float(t)), t)[0, 0]) for t in range(4)] == [0.0, 0.5, 1.0, 2.0]
        own = {}
        for t in (0, 2, 4):
            net.mix(np.ones((4, 1)), t, state=own)
    with pytest.warns(RuntimeWarning, match=r"\.mix: iteration 2 after 0: the network's own history of messages "
                                            r"starts again from iteration 2's"):
        net.mix(np.ones((4, 1)), 0), net.mix(np.ones((4, 1)), 2)
    with pytest.warns(RuntimeWarning, match=r"\.mix: a block of 3 values a node after 1: the network's own"):
        net.mix(np.ones((4, 1)), 3), net.mix(np.ones((4, 3)), 4)
    with pytest.warns(RuntimeWarning, match=r"\.mix: rounds = 2 after 1: the network's own"):
        net.mix(np.ones((4, 3)), 5, 2)
    # helper 252: x, then y, at one iteration (gradient tracking by hand) shared one history, each reading the
    # other's delayed messages; with a state each, nothing is said and the two histories are apart
    with pytest.warns(RuntimeWarning, match=r"\.mix: a second call at iteration 1: .* pass state=\{\} per quantity"):
        again = Delayed(topology.ring(4), max_delay=2, delay="fixed")
        again.mix(np.ones((4, 1)), 0), again.mix(np.ones((4, 1)), 1), again.mix(np.zeros((4, 1)), 1)
    fresh, x_state, y_state = Delayed(topology.ring(4), max_delay=2, delay="fixed"), {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in range(4):
            x = fresh.mix(np.full((4, 1), float(t)), t, state=x_state)
            y = fresh.mix(np.full((4, 1), -1.0), t, state=y_state)
    assert float(x[0, 0]) == 2.0 and float(y[0, 0]) == -1.0
