"""16 PyTorch replicas per step through rowstoch_fast.torch vs a Python loop over 16 nn.Modules (issue 15).

Usage::

    python bench/torch_replicas.py [--nodes 16] [--batch 16] [--rounds 5]

The digits setting of ``examples/digits_mlp.py``: an MLP 64 -> 32 -> 10 (2,410 parameters) per node,
mini-batches of 16, the paper's 16-node ring. Contenders, interleaved (``_harness.interleaved``), one
iteration each:

* ``loop``: 16 ``nn.Module`` objects, each with its own ``torch.optim.SGD``; per node ``zero_grad``,
  forward, ``backward``, ``step``; then a manual gossip (``x_i <- sum_j a_ij x_j`` over every parameter
  tensor, through ``torch.no_grad``): D-SGD written the way research code writes it;
* ``replicas-dsgd``: the same D-SGD through ``Replicas.grad_fn`` and the package's ``DSGD`` (one vmapped
  gradient call, the compiled mixing kernel);
* ``replicas-pull-diag-gt``: Pull-Diag-GT (gradient tracking: two gossip passes) the same way.

``--model cnn --device cuda --nodes 64`` is the GPU case of issue 15 (64 replicas of a small CNN with batch
norm on 32 x 32 images; the optimizers then run on the CuPy backend, the block crossing through DLPack).

Prints the medians and the speed-ups; the command, machine and numbers go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402


def main(argv=None):
    import torch

    from rowstoch_fast import DSGD, PullDiagGT, topology
    from rowstoch_fast.torch import Replicas

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    n, B, lr = args.nodes, args.batch, 0.01
    dev = torch.device(args.device)
    torch.manual_seed(0)
    if args.model == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        shape = (64,)
    else:
        nn = torch.nn
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(16, 10))
        shape = (3, 32, 32)
    model = model.to(dev)
    A = topology.paper_graphs()["ring"] if n == 16 else topology.exponential(n)
    A32 = A.astype(np.float32)
    Ad = torch.as_tensor(A.toarray(), dtype=torch.float32, device=dev)
    rng = np.random.default_rng(0)
    data = torch.as_tensor(rng.random((n, 200) + shape), dtype=torch.float32, device=dev)
    labels = torch.as_tensor(rng.integers(0, 10, (n, 200)), device=dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    it = [0]

    def batch(node, t):
        lo = (t * B) % (200 - B)
        return data[node, lo:lo + B], labels[node, lo:lo + B]

    models = [copy.deepcopy(model) for _ in range(n)]
    opts = [torch.optim.SGD(m.parameters(), lr=lr) for m in models]

    def loop():
        t = it[0]
        it[0] += 1
        for i, (m, o) in enumerate(zip(models, opts)):
            o.zero_grad()
            x, y = batch(i, t)
            torch.nn.functional.cross_entropy(m(x), y).backward()
            o.step()
        with torch.no_grad():  # gossip every parameter tensor
            for params in zip(*(m.parameters() for m in models)):
                stacked = torch.stack(params)
                mixed = torch.tensordot(Ad, stacked, dims=1)
                for q, v in zip(params, mixed):
                    q.copy_(v)

    reps = Replicas(model, n, device=dev)
    reps2 = Replicas(model, n, device=dev)
    dsgd = DSGD(A32, reps.x0(), lr=lr)
    gt = PullDiagGT(A32, reps2.x0(), lr=lr)
    g1, g2 = reps.grad_fn(batch), reps2.grad_fn(batch)

    def timed(f):
        def run():
            f()
            sync()
        return run
    med, _ = interleaved({"loop": timed(loop), "replicas-dsgd": timed(lambda: dsgd.step(g1)),
                          "replicas-pull-diag-gt": timed(lambda: gt.step(g2))}, rounds=args.rounds, min_time=0.2)
    info = machine_info()
    print(f"# {info['cpu']} ({info['cores']} cores), torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{n} replicas of a {reps.d}-parameter {args.model} on {dev}, batch {B}, backend {dsgd.backend}")
    print("| contender | ms/iteration | speed-up over the loop |")
    print("|---|---|---|")
    for k in ("loop", "replicas-dsgd", "replicas-pull-diag-gt"):
        print(f"| {k} | {med[k] * 1e3:.3f} | {med['loop'] / med[k]:.2f}x |")


if __name__ == "__main__":
    main()
