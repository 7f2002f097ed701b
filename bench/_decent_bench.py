"""What the side-by-side scripts with decent-bench 0.3.0 share (bench/decent_bench_{prox,local,vr,fed}.py): its import
(Python >= 3.13), the least-squares problem, our gradients of it, decent-bench's network on our W (or its federated
star network), its models.

One problem for all: ``n`` nodes of ``m`` rows, ``f_i(x) = ||A_i x - b_i||^2 / (2 m)`` (the scaling of
decent-bench's ``LinearRegressionCost``), a sparse ``x_true``, one random start row per node.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

try:
    from decent_array import interoperability as iop

    iop.set_backend("numpy", "cpu")
    import decent_bench
    import decent_bench.algorithms.federated as dbf
    import decent_bench.algorithms.p2p as dbp
    from decent_bench.agents import Agent
    from decent_bench.costs import L1RegularizerCost, LinearRegressionCost
    from decent_bench.networks import FedNetwork, P2PNetwork
except ImportError as exc:  # pragma: no cover - environment guard
    raise SystemExit(f"needs decent-bench (Python >= 3.13): {exc}") from exc

__all__ = ["iop", "decent_bench", "dbp", "dbf", "Agent", "L1RegularizerCost", "LinearRegressionCost", "P2PNetwork",
           "FedNetwork", "CHECKPOINTS", "make_problem", "grad_fn_for", "make_network", "make_fed_network", "db_x",
           "db_server"]

#: The iterations (or rounds) the scripts compare at.
CHECKPOINTS = (1, 10, 100, 1000)


def make_problem(n: int, d: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A, b, X0)``: ``A`` of shape (n, m, d), ``b`` (n, m), the start ``X0`` (n, d)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, m, d))
    x_true = np.where(rng.random(d) < 0.5, 0.0, rng.standard_normal(d))
    b = np.einsum("imd,d->im", A, x_true) + 0.5 * rng.standard_normal((n, m))
    X0 = rng.standard_normal((n, d))
    return A, b, X0


def grad_fn_for(A: np.ndarray, b: np.ndarray):
    """Our ``grad_fn(X)``: row ``i``, ``(1/m) A_i^T (A_i x_i - b_i)``."""
    m = A.shape[1]

    def grad(X: np.ndarray) -> np.ndarray:
        return np.einsum("imd,im->id", A, np.einsum("imd,id->im", A, X) - b) / m

    return grad


def make_network(A: np.ndarray, b: np.ndarray, W: np.ndarray, cost=None) -> P2PNetwork:
    """decent-bench's network of the problem on the undirected cycle, with our ``W`` (its own Metropolis weights
    checked against it). ``cost(i, data)``: agent ``i``'s cost from its ``[(a_k, b_k)]`` rows (default
    ``LinearRegressionCost(data)``)."""
    n, m, _ = A.shape
    cost = cost or (lambda i, data: LinearRegressionCost(data))
    agents = [Agent(cost(i, [(iop.from_numpy(A[i, k]), iop.from_numpy(b[i, k: k + 1])) for k in range(m)]))
              for i in range(n)]
    net = P2PNetwork(nx.cycle_graph(n), agents)  # node k of the cycle <-> agents[k] <-> row k of W
    default_W = np.asarray(iop.to_numpy(net.weights))  # decent-bench's own Metropolis-Hastings weights
    if not np.allclose(default_W, W, atol=1e-15):
        print(f"  note: decent-bench's default W differs from ours by {np.max(np.abs(default_W - W)):.2e}; using ours")
    net.weights = iop.from_numpy(W)
    return net


def make_fed_network(A: np.ndarray, b: np.ndarray, cost=None) -> FedNetwork:
    """decent-bench's federated network of the problem: client ``i`` (``agents()[i]``) holds ``A_i, b_i``, the server
    is its default (zero cost, always active). ``cost(i, data)`` as in :func:`make_network`."""
    n, m, _ = A.shape
    cost = cost or (lambda i, data: LinearRegressionCost(data))
    clients = [Agent(cost(i, [(iop.from_numpy(A[i, k]), iop.from_numpy(b[i, k: k + 1])) for k in range(m)]))
               for i in range(n)]
    net = FedNetwork(clients)
    assert net.clients() == clients  # client k <-> row k of ours
    return net


def db_server(net: FedNetwork) -> np.ndarray:
    """decent-bench's server model, (d,)."""
    return np.array(iop.to_numpy(net.server().x), dtype=float, copy=True)


def db_x(net: P2PNetwork) -> np.ndarray:
    """decent-bench's models, (n, d)."""
    return np.stack([np.asarray(iop.to_numpy(a.x), dtype=float) for a in net.agents()])
