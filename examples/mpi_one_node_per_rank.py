"""One network node per MPI process: each rank trains its own model with Pull-Diag-GT.

Run with, e.g.::

    mpiexec -n 4 python -m mpi4py examples/mpi_one_node_per_rank.py

The ranks form a directed ring with one chord (rank i listens to i-1, and rank
n/2 also to rank 0). Every rank owns a private least-squares problem and a
model; ``opt.step(grad_fn)`` gossips over MPI and ``grad_fn`` only ever sees
this rank's row. With PyTorch installed the model is a ``torch.nn.Linear``
whose gradient comes from autograd; otherwise a NumPy gradient is used. At the
end every rank holds (nearly) the minimiser of the *average* loss, not of its
own: the Pull-Diag correction removes the bias of the row-stochastic weights.
"""

import numpy as np
from mpi4py import MPI

from rowstoch_fast import MixingMatrix, PullDiagGT

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
d = 5

# The network, the same on every rank: j -> j+1, and 0 -> n/2 (row-stochastic, not doubly stochastic).
edges = [(j, (j + 1) % n) for j in range(n)] + ([(0, n // 2)] if n > 2 else [])
A = MixingMatrix.from_edges(n, edges)

# This rank's private data.
rng = np.random.default_rng(rank)
H = rng.standard_normal((50, d))
b = H @ np.ones(d) + rank + 0.1 * rng.standard_normal(50)

try:
    import torch

    model = torch.nn.Linear(d, 1, bias=False, dtype=torch.float64)
    Ht, bt = torch.from_numpy(H), torch.from_numpy(b)

    def local_gradient(w):
        with torch.no_grad():
            model.weight.copy_(torch.from_numpy(np.array(w)).reshape(1, d))
        model.zero_grad()
        loss = 0.5 * ((model(Ht).squeeze(1) - bt) ** 2).mean()
        loss.backward()
        return model.weight.grad.numpy().reshape(d).copy()

    backend_note = "torch.nn.Linear + autograd"
except ImportError:

    def local_gradient(w):
        return H.T @ (H @ w - b) / len(b)

    backend_note = "NumPy gradient"

opt = PullDiagGT(A, np.zeros(d), lr=0.05, rounds=2, backend="mpi")
assert list(opt.local_nodes) == [rank]  # one node per rank


def grad_fn(X):  # X: this rank's row, shape (1, d)
    return local_gradient(X[0])[None, :]


for _ in range(400):
    opt.step(grad_fn)

# Check against the minimiser of the average loss, solved centrally on rank 0.
Hs, bs = comm.gather(H, root=0), comm.gather(b, root=0)
x = opt.gather_x()
if rank == 0:
    M = sum(h.T @ h / len(bb) for h, bb in zip(Hs, bs))
    v = sum(h.T @ bb / len(bb) for h, bb in zip(Hs, bs))
    x_star = np.linalg.solve(M, v)
    err = np.abs(x - x_star).max()
    print(f"{n} ranks ({backend_note}): max |x_i - x*| = {err:.2e}, messages sent by rank 0: {opt.messages}, "
          f"bytes: {opt.bytes_sent}")
