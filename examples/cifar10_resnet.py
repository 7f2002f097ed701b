"""The paper's CIFAR-10 experiment: a CNN on each of 16 nodes, Pull-Diag-GT against MG-Pull-Diag-GT.

A GPU job (with a CUDA build of PyTorch, CuPy and torchvision)::

    python examples/cifar10_resnet.py --data-dir ~/data/cifar-10-batches-py --model resnet18 --device cuda \\
        --rounds-budget 5000 --graphs ring,grid,geometric,nearest_neighbor

reads CIFAR-10's "python version" batches (nothing is downloaded), keeps the 16 replicas of torchvision's
ResNet-18 (batch-norm statistics per replica) on the GPU through :class:`rowstoch_fast.torch.Replicas`, and
runs the optimizer on the CuPy backend (the CUDA parameter block crosses through DLPack, no copies). It
prints the nodes' mean training loss, test accuracy and the seconds since the run's start every
``--record-every`` communication rounds and writes ``cifar10.csv``. ``--model small-cnn`` (two convolutions
with batch norm, no torchvision) and ``--synthetic`` (random images shaped like CIFAR-10) make a CPU smoke run
of the same code.
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np


def small_cnn(classes=10):
    import torch

    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(16, classes))


def build_model(name):
    if name == "small-cnn":
        return small_cnn()
    if name == "resnet18":
        from torchvision.models import resnet18  # pip install torchvision (matching the torch build)

        return resnet18(num_classes=10)
    raise ValueError(f"--model must be small-cnn or resnet18, got {name!r}")


def main(argv=None):
    import torch

    from rowstoch_fast import DivergenceError, PullDiagGT, topology
    from rowstoch_fast.datasets import iid_split, load_cifar10
    from rowstoch_fast.experiments import MULTI_GOSSIP_LR
    from rowstoch_fast.torch import Replicas

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", help="folder of CIFAR-10's python batches (data_batch_1..5, test_batch)")
    p.add_argument("--synthetic", type=int, default=0, help="use N random images instead of --data-dir")
    p.add_argument("--model", default="resnet18", choices=["resnet18", "small-cnn"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--rounds-budget", type=int, default=5000, help="communication rounds per run")
    p.add_argument("--rounds", default="1,10", help="gossip rounds R per iteration, comma-separated")
    p.add_argument("--graphs", default="ring,grid,geometric,nearest_neighbor")
    p.add_argument("--batch", type=int, default=32, help="mini-batch per node and gossip round")
    p.add_argument("--record-every", type=int, default=500)
    p.add_argument("--out", default="results")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.synthetic:
        rng = np.random.default_rng(args.seed)
        Xtr = rng.random((args.synthetic, 3, 32, 32), dtype=np.float32)
        ytr = rng.integers(0, 10, args.synthetic)
        Xte, yte = Xtr[: args.synthetic // 4], ytr[: args.synthetic // 4]
    elif args.data_dir:
        Xtr, ytr, Xte, yte = load_cifar10(args.data_dir)
    else:
        p.error("give --data-dir (CIFAR-10's python batches) or --synthetic N")
    n = 16
    parts = iid_split(len(ytr), n, seed=args.seed)
    dev = torch.device(args.device)
    Xtr_t, ytr_t = torch.as_tensor(Xtr).to(dev), torch.as_tensor(ytr).to(dev)
    Xte_t, yte_t = torch.as_tensor(Xte).to(dev), torch.as_tensor(yte).to(dev)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in args.graphs.split(","):
        A = topology.paper_graphs()[name].astype(np.float32)
        for R in (int(r) for r in args.rounds.split(",")):
            torch.manual_seed(args.seed)
            replicas = Replicas(build_model(args.model), n, device=dev)
            gen = torch.Generator(device="cpu").manual_seed(args.seed)

            def batch_fn(node, t):
                idx = torch.as_tensor(parts[node])[torch.randint(len(parts[node]), (args.batch,), generator=gen)]
                return Xtr_t[idx.to(dev)], ytr_t[idx.to(dev)]

            opt = PullDiagGT(A, replicas.x0(), lr=MULTI_GOSSIP_LR[name].get(R, MULTI_GOSSIP_LR[name][1]), rounds=R)
            grad_fn = replicas.grad_fn(batch_fn, keep_loss=True, rounds=R)  # R mini-batches averaged (eq. 12b)
            T = args.rounds_budget // R
            started = time.perf_counter()
            for t in range(1, T + 1):
                try:
                    opt.step(grad_fn)
                except DivergenceError as exc:
                    print(f"{name} R={R}: diverged at iteration {exc.iteration}")
                    break
                if (t * R) % args.record_every < R or t == T:
                    replicas.set_params(opt.gather_x())
                    _, acc = replicas.evaluate(Xte_t, yte_t, batch_size=512)
                    row = {"graph": name, "R": R, "communication_rounds": t * R,
                           "train_loss": float(np.mean(grad_fn.last_loss)), "test_accuracy": float(np.mean(acc)),
                           "seconds": time.perf_counter() - started}
                    rows.append(row)
                    print(row, flush=True)
    path = os.path.join(args.out, "cifar10.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["graph", "R", "communication_rounds", "train_loss", "test_accuracy",
                                          "seconds"])
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
