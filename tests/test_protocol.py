"""Pull-Diag protocol (eq. 5) and A-protocol (eq. 2) against the dense reference."""

import numpy as np
import pytest

from rowstoch_fast import MixingMatrix, _reference, a_protocol, pull_diag, topology
from conftest import random_primitive


@pytest.mark.parametrize("block", [1, 3, 256])
def test_pull_diag_matches_reference(block):
    rng = np.random.default_rng(0)
    A = random_primitive(10, 0.3, rng)
    Z = rng.standard_normal((10, 3))
    res = pull_diag(A, Z, 30, block=block)
    zs = _reference.pull_diag(A.toarray(), Z, 30)
    ref_err = np.linalg.norm((zs - Z.mean(0)).reshape(31, -1), axis=1)
    np.testing.assert_allclose(res.errors, ref_err, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(res.z, zs[-1], rtol=1e-10)


def test_pull_diag_reaches_the_mean_a_protocol_does_not():
    A = topology.paper_graphs()["grid"]  # kappa 6.25: pi far from uniform
    Z = np.random.default_rng(1).standard_normal(16)
    pd = pull_diag(A, Z, 400)
    ap = a_protocol(A, Z, 400)
    assert pd.errors[-1] < 1e-10
    assert ap.errors[-1] > 1e-3
    pi = A.metrics().pi
    np.testing.assert_allclose(ap.z, np.full(16, pi @ Z), rtol=1e-10)  # the pi-weighted average
    np.testing.assert_allclose(ap.errors, np.linalg.norm(_reference.a_protocol(A.toarray(), Z, 400) - Z.mean(), axis=1))


def test_pull_diag_errors():
    A = MixingMatrix.from_edges(3, [(0, 1), (1, 0), (1, 2), (2, 0)], self_loops=False)
    with pytest.raises(ValueError, match="not invertible"):
        pull_diag(A, np.ones(3), 5)
    with pytest.raises(ValueError, match="Z has 2 rows"):
        pull_diag(topology.ring(3), np.ones(2), 5)
    with pytest.raises(ValueError, match="iterations must be >= 0"):
        a_protocol(topology.ring(3), np.ones(3), -1)
    res = pull_diag(topology.ring(3), np.arange(3.0), 0)
    assert res.errors.shape == (1,)
