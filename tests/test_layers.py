"""The network layers' registry: every layer, and every composition the order allows, against its dense
definition (rowstoch_fast._reference.LAYER_TWINS); every layer's options on the command line and in files."""

import numpy as np
import pytest

from rowstoch_fast import _reference as ref
from rowstoch_fast import network, topology

BASES = {"row": lambda: topology.erdos_renyi(10, 0.3, seed=2),
         "column": lambda: topology.erdos_renyi(10, 0.3, seed=2, stochastic="column")}


def test_every_layer_has_a_dense_definition():
    missing = [cls.__name__ for cls in network.layers() if cls.layer not in ref.LAYER_TWINS]
    assert not missing, f"layers without a dense definition in _reference.LAYER_TWINS: {missing}"
    assert [cls.layer for cls in network.layers()][:3] == ["schedule", "lossy", "sleepy"]


@pytest.mark.parametrize("kind", sorted(BASES))
@pytest.mark.parametrize("label", sorted(network.examples(BASES["row"]())))
def test_every_example_mixes_as_its_definition(kind, label):
    net = network.examples(BASES[kind]())[label]
    rng = np.random.default_rng(0)
    Xs = [rng.standard_normal((10, 3)) for _ in range(5)]
    expected = ref.network_run(net, Xs, d=3)
    for t, X in enumerate(Xs):
        Y = net.mix(X, t, d=3) if hasattr(net, "encode") else net.mix(X, t)
        np.testing.assert_allclose(Y, expected[t], rtol=1e-12, atol=1e-12, err_msg=f"{label} over {kind} at t = {t}")
        if not hasattr(net, "encode"):
            np.testing.assert_allclose(net.matrix(t).toarray(), ref.network_matrix(net, t), rtol=1e-12, atol=1e-14)


def _problem(n, d=3):
    rng = np.random.default_rng(4)
    b = rng.standard_normal((n, d))
    return (lambda X: X - b), rng.standard_normal((n, d))


EXAMPLE_LABELS = sorted(network.examples(BASES["row"]()))


@pytest.mark.parametrize("label", EXAMPLE_LABELS)
def test_every_example_runs_every_algorithm_that_applies_and_resumes_bit_for_bit(label):
    """Each registered algorithm that applies (directed methods over the row-stochastic example, undirected ones
    over the same layers on an undirected graph's weights): four steps, finite, and a state_dict taken after two
    continues as the uninterrupted run, bit for bit (the layers' state, delayed messages included)."""
    from rowstoch_fast.algorithms import REGISTRY

    bases = {"directed": BASES["row"](), "undirected": topology.ring(10, directed=False, weights="metropolis")}
    grad, x0 = _problem(10)
    ran = []
    for cls in REGISTRY.values():
        if not cls.matrices or cls.gradients != "batch":  # (no network; a per-sample oracle: test_algorithms)
            continue
        net = network.examples(bases["undirected" if "W" in cls.matrices else "directed"])[label]
        if not cls.applies_to(net):
            continue
        mats = cls.problem_matrices(net)
        if cls.per_link_state and not all(network.fixed_links(M) for M in mats.values()):
            continue  # (running sums per link need a fixed set of links: a schedule has none; refused by name)
        opt = cls(x0=x0, lr=0.01, **mats)
        for _ in range(2):
            opt.step(grad)
        state = opt.state_dict()
        for _ in range(2):
            opt.step(grad)
        again = cls.from_state_dict(state, **mats)
        for _ in range(2):
            again.step(grad)
        assert np.isfinite(opt.x).all(), f"{cls.name} on {label}"
        np.testing.assert_array_equal(again.x, opt.x, err_msg=f"{cls.name} on {label}: resumed")
        ran.append(cls.name)
    assert len(ran) >= 8, ran  # (the directed family at least runs on every layer)
