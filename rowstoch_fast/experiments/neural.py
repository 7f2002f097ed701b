"""The paper's neural-network experiments (through PyTorch): Figure 3's MLP on MNIST."""

from __future__ import annotations

import math
import os

import numpy as np

from .. import topology
from .._checks import MAX_KEY, check_choice, check_int, check_text, require_memory
from .._progress import bar as progress_bar
from ..errors import DivergenceError
from ._common import (COMPARE_RULE, _finish, _plt, _save, _stop_if, _stopped, compare_windows, make_out_dir,
                      window_stats, write_table, writes_before_sigterm)
from .synthetic import MULTI_GOSSIP_LR, _checked_graphs, check_rounds

def mlp(inputs, classes=10, hidden=(64, 32, 16)):
    """The four-layer fully connected network of the paper's MNIST experiment (ReLU between layers)."""
    import torch

    inputs, classes = check_int(inputs, "inputs", minimum=1), check_int(classes, "classes", minimum=1)  # (True
    # and 0 had built Linear(True, ...) and a net with no output)
    if isinstance(hidden, (str, bytes)) or not hasattr(hidden, "__iter__"):  # (3: "'int' object is not
        # iterable", helper 204)
        raise TypeError(f"hidden must be a sequence of layer widths, e.g. (64, 32, 16), got {type(hidden).__name__} "
                        f"{hidden!r:.60}")
    hidden = tuple(check_int(h, "hidden", minimum=1) for h in hidden)
    sizes = (inputs, *hidden, classes)
    _require_parameters(sum((a + 1) * b for a, b in zip(sizes, sizes[1:])),
                        f"mlp({inputs}, classes={classes}, hidden={hidden})")
    layers = []
    for k in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def _require_parameters(count, what):
    """A MemoryError naming ``what`` where its ``count`` float32 parameters do not fit in memory."""
    require_memory(4 * count, f"{what}, of {count:,} parameters", "a smaller model")


#: The widest :func:`resnet18` (64 times ResNet-18's channels, 4.6e10 parameters: past any memory, yet within
#: PyTorch's sizes; ``width = 10^8`` overflowed them).
MAX_WIDTH = 4096


def resnet18(width=64, classes=10):
    """ResNet-18 for 32 x 32 images (He et al., 2016, as CIFAR-10 experiments use it: a 3 x 3 stem, no max-pool,
    four stages of two basic blocks with ``width``, 2, 4 and 8 times ``width`` channels, batch norm, global
    average pooling). ``width = 64`` is ResNet-18 (11.2 M parameters); a smaller width is the same network,
    narrower (``width = 8``: 0.18 M, for a CPU)."""
    import torch
    from torch import nn

    width = check_int(width, "width", minimum=1, maximum=MAX_WIDTH)
    classes = check_int(classes, "classes", minimum=1)  # (0 had built a net with no output, helper 204)
    count, cin = 29 * width, width  # (the parameters, counted before any is made: 10^10 classes had met torch's
    # allocator, helper 204)
    for cout in (width, 2 * width, 4 * width, 8 * width):
        for c in (cin, cout):  # (the stage's two blocks: a shortcut where the channels change)
            count += 9 * c * cout + 9 * cout * cout + 4 * cout + (c * cout + 2 * cout if c != cout else 0)
        cin = cout
    _require_parameters(count + (cin + 1) * classes, f"resnet18(width={width}, classes={classes})")

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    layers = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for stage, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
        layers += [Block(cin, cout, 1 if stage == 0 else 2), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


#: The horizontal axes of :func:`reproduce_mnist_mlp`.
MNIST_AXES = ("batches", "rounds", "both")


@writes_before_sigterm
def reproduce_mnist_mlp(out_dir, data="digits", data_dir=None, communication_rounds=2000, repeats=3,
                        rounds=(1, 10), batch=16, alpha=None, record_every=50, graphs=None, seed=0, progress=True,
                        log=print, axis="batches", split=None, stem="mnist_mlp", evaluate_on=10000):
    """The paper's MNIST experiment (Figure 3 / Appendix E): a four-layer MLP on each of 16 nodes, Pull-Diag-GT
    (R = 1) against MG-Pull-Diag-GT (R = 10), on the paper's four 16-node graphs, trained through
    :class:`rowstoch_fast.torch.Replicas` (needs PyTorch); ends with a verdict per graph on the paper's claim
    ("MG-Pull-Diag-GT outperforms on all topologies": a lower final training loss).

    Parameters
    ----------
    data : {"digits", "mnist"}
        scikit-learn's bundled 8x8 digits (no download; the default here) or
        MNIST read from the IDX files in ``data_dir``.
    communication_rounds : int
        The budget of every run, on ``axis``.
    axis : {"batches", "rounds"}
        ``"batches"``, the paper's axis (Appendix E: "at the end of each batch
        (that is, communication round)"): every method runs
        ``communication_rounds`` iterations of one mini-batch of ``batch``
        samples per node, MG-Pull-Diag-GT gossiping ``R`` rounds in each.
        ``"rounds"``, equal communication (eq. 12 as Section 5 charges it):
        ``T = communication_rounds / R`` iterations, each averaging ``R``
        mini-batches. ``"both"``: the two, side by side (a column ``axis``).
    alpha : float, optional
        Split the training data over the nodes with Dirichlet(``alpha``) label
        skew instead of IID (not the paper's heterogeneous construction: see
        :func:`reproduce_mnist_heterogeneous`).
    split : {None, "iid", "dirichlet", "shards"}
        How the training data is split over the nodes: IID (the default;
        Dirichlet when ``alpha`` is given), or label-sorted shards
        (:func:`rowstoch_fast.datasets.shard_split`).
    stem : str
        The stem of the files written (``<name>.csv``, ``<name>_verdict.csv``,
        ``<name>.png``).
    evaluate_on : int or None
        Record the training loss on this many training samples, a fixed random
        subset drawn by ``seed`` (default 10,000: on MNIST a record over all
        60,000 costs 16 passes over them; the digits have fewer, so all);
        None: all of them.
    record_every : int
        Communication rounds between two records (train loss of every node's
        model on the whole training set, averaged; test accuracy of the nodes'
        models, averaged, and of their pi-weighted average). A run that diverges
        ends with a row marked ``diverged`` (train loss ``inf``).

    Returns
    -------
    pandas.DataFrame
        One row per record and repeat (also written to ``<name>.csv``, with
        ``<name>.png``).
    """
    check_choice(axis, "axis", tuple(MNIST_AXES))
    check_rounds(rounds, communication_rounds)
    graphs = _check_training(batch, record_every, repeats, graphs, seed, stem)
    make_out_dir(out_dir)
    Xtr, ytr, Xte, yte = _mnist_data(data, data_dir, seed)
    parts = _split(ytr, 16, split, alpha, seed)
    return _train_on_graphs(out_dir, lambda: mlp(Xtr.shape[1]), (Xtr, ytr, Xte, yte), parts, f"MLP on {data}",
                            communication_rounds=communication_rounds, repeats=repeats, rounds=rounds, batch=batch,
                            record_every=record_every, graphs=graphs, seed=seed, progress=progress, log=log,
                            axis=axis, stem=stem, evaluate_on=_subset(len(ytr), evaluate_on, seed))


def _check_training(batch, record_every, repeats, graphs, seed, stem="stem"):
    """The neural figures' shared arguments checked before any work, as the command line checks its own: batch
    0 had divided by zero, record_every 0 after the CSVs were written, repeats 0 written empty outputs, graphs
    ['foo'] met a KeyError, 'ring' been read letter by letter, stem 'a/b' an OSError (helper 204). Returns the
    graphs to run (None: the four)."""
    for value, name in ((batch, "batch"), (record_every, "record_every"), (repeats, "repeats")):
        check_int(value, name, minimum=1)
    check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
    if not check_text(stem, "stem") or os.sep in stem or "/" in stem or stem in (".", ".."):
        raise ValueError(f"stem must be a file name's stem (the files go in out_dir), got {stem!r}")
    return None if graphs is None else _checked_graphs(graphs, tuple(MULTI_GOSSIP_LR))


def _subset(count, size, seed):
    """``size`` sorted sample indices of ``count`` drawn by ``seed`` (None when ``size`` is None or covers all)."""
    if size is None or check_int(size, "evaluate_on", minimum=1) >= count:
        return None
    return np.sort(np.random.default_rng(seed).choice(count, size, replace=False))


#: The memory an evaluation of every node's model may take at once: the samples it passes together are chosen to
#: fit (at 4,096 samples, ResNet-18 on 16 nodes held 17 GB in each layer's output).
EVALUATION_BYTES = 1 << 30


def model_sizes(model_fn, batch, sample_shape):
    """``(parameters, outputs, largest)`` of ``model_fn()`` from its shapes on PyTorch's meta device (no memory):
    its parameter count, the values of every layer's output for a batch of ``batch`` samples of
    ``sample_shape``, and the values a sample has in the largest layer output."""
    import torch

    outputs = []
    with torch.device("meta"):
        model = model_fn()
        for module in model.modules():
            if next(module.children(), None) is None:
                module.register_forward_hook(lambda module, args, out: outputs.append(out.numel()))
        model(torch.zeros((batch, *sample_shape)))
    return sum(p.numel() for p in model.parameters()), sum(outputs), max(outputs, default=0) // batch


def evaluation_batch(largest, n):
    """How many samples an evaluation of ``n`` models passes at once: :data:`~rowstoch_fast.torch.EVALUATION_BATCH`
    at most, fewer where 5 copies of the largest layer's output (``largest`` values a sample, float32: what a
    forward pass without gradients holds at its peak, measured 4.90-4.92 on the VM) would pass
    :data:`EVALUATION_BYTES`. The choice depends on the model alone, never on the machine: the records are the
    same everywhere."""
    from ..torch import EVALUATION_BATCH

    return int(max(1, min(EVALUATION_BATCH, EVALUATION_BYTES // max(1, 5 * 4 * n * largest))))


def training_bytes(model_fn, n, batch, sample_shape):
    """About the memory of training ``model_fn()`` on ``n`` nodes at mini-batch ``batch`` of samples of
    ``sample_shape`` (:func:`model_sizes`): per node its parameters in 8 float32 copies (weights, gradients,
    the algorithm's blocks), and the larger of 3 copies of every layer's outputs for a batch (what the backward
    pass keeps; measured on the VM: 2.77 GB training ResNet-18 of width 16 on 16 nodes at batch 32, where this
    term says 2.6 GB) and an evaluation (:func:`evaluation_batch`). ``--width 100000`` asked for 3.6e11 bytes in
    one tensor, a traceback out of PyTorch."""
    return _training_bytes(model_sizes(model_fn, batch, sample_shape), n)


def _training_bytes(sizes, n):
    """:func:`training_bytes` from the model's :func:`model_sizes`."""
    params, outputs, largest = sizes
    return 4 * n * 8 * params + max(4 * n * 3 * outputs, 5 * 4 * n * largest * evaluation_batch(largest, n))


def _train_on_graphs(out_dir, model_fn, data, parts, what, communication_rounds, repeats, rounds, batch, record_every,
                     graphs, seed, progress, log, axis, stem, evaluate_on=None):
    """What the neural-network figures share: ``model_fn()`` replicated on the 16 nodes of each of the paper's
    graphs (``graphs``: a subset of their names), Pull-Diag-GT with each R of ``rounds`` at the paper's rates,
    ``parts[i]`` node i's training samples of ``data = (Xtr, ytr, Xte, yte)``; records (training loss on
    ``Xtr[evaluate_on]``, default all of it; test accuracy), verdicts, the CSVs and the figure, named ``stem``."""
    import pandas as pd
    import torch

    from ..algorithms import PullDiagGT
    from ..torch import Replicas, accuracy

    Xtr, ytr, Xte, yte = data
    rounds = check_rounds(rounds, communication_rounds)
    n = len(parts)
    sizes = model_sizes(model_fn, batch, np.shape(Xtr)[1:])
    require_memory(_training_bytes(sizes, n), f"training {what} on {n} nodes at batch {batch}",
                   "a smaller model (reproduce cifar10-resnet: a narrower --width)")
    chunk = evaluation_batch(sizes[2], n)
    Xtr_t, ytr_t = torch.as_tensor(Xtr, dtype=torch.float32), torch.as_tensor(ytr)
    Xte_t, yte_t = torch.as_tensor(Xte, dtype=torch.float32), torch.as_tensor(yte)
    Xev_t, yev_t = (Xtr_t, ytr_t) if evaluate_on is None else (Xtr_t[evaluate_on], ytr_t[evaluate_on])
    all_graphs = topology.paper_graphs()
    names = list(all_graphs) if graphs is None else list(graphs)
    rows = []
    log(f"{what} ({len(ytr)} training samples over {n} nodes), "
        + (f"{communication_rounds} batches (the paper's axis; MG gossips R rounds per batch)" if axis == "batches"
           else f"{communication_rounds} communication rounds (MG: R rounds and R mini-batches per iteration)")
        + f", {repeats} repeats")
    log(f"{'graph':<18}{'R':>4}{'train loss':>12}{'test accuracy':>15}   (means over the last tenth of records)")
    views = ("batches", "rounds") if axis == "both" else (axis,)
    total = len(names) * len(rounds) * repeats * len(views)
    bar = progress_bar(progress, total, 0, stem.replace("_", "-"))
    interrupted, error = False, None
    try:
        for view, name in [(view, name) for view in views for name in names]:
            A = all_graphs[name].astype(np.float32)
            pi = A.pi
            for R in rounds:
                lr = MULTI_GOSSIP_LR[name][R]
                for rep in range(repeats):
                    torch.manual_seed(seed + rep)
                    replicas = Replicas(model_fn(), n)
                    gen = np.random.default_rng([seed, rep, R])

                    draws = R if view == "rounds" else 1  # mini-batches per iteration (averaged: eq. 12b)

                    def batch_fn(node, t, gen=gen):
                        idx = parts[node][gen.integers(0, len(parts[node]), batch)]
                        return Xtr_t[idx], ytr_t[idx]

                    grad_fn = replicas.grad_fn(batch_fn, rounds=draws)
                    opt = PullDiagGT(A, replicas.x0(), lr=lr, rounds=R)
                    opt.growth_limit = None  # (a diverging run is recorded as one, below)
                    T = communication_rounds // R if view == "rounds" else communication_rounds
                    every = max(1, record_every // R) if view == "rounds" else record_every
                    for t in range(T + 1):
                        if t % every == 0 or t == T:
                            replicas.set_params(opt.gather_x())
                            losses, _ = replicas.evaluate(Xev_t, yev_t, batch_size=chunk)
                            _, acc = replicas.evaluate(Xte_t, yte_t, batch_size=chunk)
                            central = accuracy(replicas.module(weights=pi), Xte_t, yte_t, batch_size=chunk)
                            rows.append({"axis": view, "graph": name, "R": R, "repeat": rep, "iteration": t,
                                         "communication_rounds": t * R, "batches": t * draws,
                                         "samples": t * draws * batch,
                                         "train_loss": float(np.mean(losses)), "test_accuracy": float(np.mean(acc)),
                                         "test_accuracy_centroid": central, "diverged": False})
                        if t == T:
                            break
                        try:
                            opt.step(grad_fn)
                        except DivergenceError as exc:
                            rows.append({"axis": view, "graph": name, "R": R, "repeat": rep,
                                         "iteration": exc.iteration,
                                         "communication_rounds": exc.iteration * R,
                                         "batches": exc.iteration * draws, "samples": exc.iteration * draws * batch,
                                         "train_loss": math.inf, "test_accuracy": math.nan,
                                         "test_accuracy_centroid": math.nan, "diverged": True})
                            break
                    if bar is not None:
                        bar.update(1)
                mine = pd.DataFrame([r for r in rows if r["axis"] == view and r["graph"] == name and r["R"] == R])
                final = _final_stats(mine)
                log(f"{name:<18}{R:>4}{final['train_loss']:>12.4f}{final['test_accuracy']:>15.3f}"
                    + (f"   ({view})" if len(views) > 1 else ""))
    except KeyboardInterrupt:  # Ctrl-C: write the records so far, then stop
        interrupted = True
    except Exception as exc:  # noqa: BLE001 - write the records so far, then re-raise (_stop_if)
        error = exc
    if bar is not None:
        bar.close()
    frame = pd.DataFrame(rows, columns=["axis", "graph", "R", "repeat", "iteration", "communication_rounds",
                                        "batches", "samples", "train_loss", "test_accuracy",
                                        "test_accuracy_centroid", "diverged"])
    write_table(frame, out_dir, f"{stem}.csv", log)
    verdict = pd.concat([_mnist_verdict(frame[frame["axis"] == view], names, rounds, repeats).assign(axis=view)
                         for view in views], ignore_index=True)
    stopped = _stopped(interrupted, error, f"{len(rows)} records")
    if stopped is not None:  # partial records decide no claim
        verdict["verdict"] = f"not decided ({stopped})"
    write_table(verdict, out_dir, f"{stem}_verdict.csv", log)

    def side(loss, spread, ran, diverged):  # (the runs it has records of: a stopped reproduction's side that
        # never ran read "inf +- nan (0 of 1 diverged)")
        return "not run" if ran + diverged == 0 else (f"{loss:.4f} +- {spread:.4f} ({diverged} of {ran + diverged} "
                                                      "diverged)")

    for v in verdict.itertuples():
        log(f"{v.graph}{' (' + v.axis + ')' if len(views) > 1 else ''}: the paper's claim (MG-Pull-Diag-GT, R = "
            f"{v.R_mg}, ends with a lower training loss than Pull-Diag-GT) {v.verdict} on this run: "
            f"{side(v.train_loss_mg, v.spread_mg, v.repeats_mg, v.diverged_mg)} against "
            f"{side(v.train_loss_plain, v.spread_plain, v.repeats_plain, v.diverged_plain)}; test "
            f"accuracy {v.test_accuracy_mg:.3f} against {v.test_accuracy_plain:.3f}")
    if len(verdict) and stopped is None:
        log(f"(the rule: {DIVERGED_RULE + COMPARE_RULE})")
    plt = _plt()
    if plt is not None and len(frame):
        fig, axes = plt.subplots(2 * len(views), len(names), figsize=(3 * len(names), 5.5 * len(views)),
                                 squeeze=False)
        for v, view in enumerate(views):
            top, bottom = axes[2 * v], axes[2 * v + 1]
            for k, name in enumerate(names):
                for R in rounds:
                    part = frame[(frame["axis"] == view) & (frame["graph"] == name) & (frame["R"] == R)]
                    label = "Pull-Diag-GT" if R == 1 else f"MG-Pull-Diag-GT (R = {R})"
                    failed = part[part["diverged"]]
                    if len(failed):  # say so where the curve stops (or is missing)
                        top[k].text(0.02, 0.02 + 0.08 * rounds.index(R), f"{label}: diverged in {len(failed)} of "
                                    f"{repeats} runs", transform=top[k].transAxes, fontsize=7)
                    part = part[~part["diverged"]]
                    x = "batches" if view == "batches" else "communication_rounds"
                    mean = part.groupby(x)[["train_loss", "test_accuracy"]].mean()
                    top[k].plot(mean.index, mean["train_loss"], label=label)
                    bottom[k].plot(mean.index, mean["test_accuracy"], label=label)
                top[k].set_title(name + (f" ({view})" if len(views) > 1 else ""))
                top[k].set_yscale("log")
                bottom[k].set_xlabel("batches (the paper's axis)" if view == "batches" else "communication rounds")
            top[0].set_ylabel("training loss (nodes' mean)")
            bottom[0].set_ylabel("test accuracy (nodes' mean)")
        _finish(plt, fig, axes, out_dir, f"{stem}.png", log)
    _stop_if(interrupted, log, f"{len(rows)} records", error)
    return frame


@writes_before_sigterm
def reproduce_cifar10_resnet(out_dir, data_dir=None, synthetic=False, width=64, communication_rounds=2000,
                             repeats=3, rounds=(1, 10), batch=32, record_every=50, evaluate_on=2000, graphs=None,
                             seed=0, progress=True, log=print, axis="batches"):
    """The paper's CIFAR-10 experiment (Figure 4 / Appendix E): ResNet-18 on each of 16 nodes (its own batch-norm
    statistics), Pull-Diag-GT (R = 1) against MG-Pull-Diag-GT (R = 10) on the paper's four 16-node graphs at the
    paper's rates (:data:`MULTI_GOSSIP_LR`, as for MNIST), the training data split evenly (IID); the training
    loss and test accuracy per graph, and the verdict per graph ("MG-Pull-Diag-GT outperforms on all
    topologies", by :data:`COMPARE_RULE`).

    Parameters
    ----------
    data_dir : str, optional
        CIFAR-10's batches (:func:`rowstoch_fast.datasets.load_cifar10`: the python or binary version).
    synthetic : bool
        Train on :func:`rowstoch_fast.datasets.synthetic_cifar10` instead (no files; for a quick check).
    width : int
        64: ResNet-18; smaller: the same network narrower (:func:`resnet18`), what a CPU can train.
    batch : int
        Mini-batch per node and iteration (the paper does not state it).
    evaluate_on : int or None
        The training loss is recorded on this many training images (a fixed random subset; None: all 50,000,
        which costs 16 forward passes of the whole set per record).

    Other parameters as :func:`reproduce_mnist_mlp`. Writes ``cifar10_resnet.csv``, ``cifar10_resnet.png`` and
    ``cifar10_resnet_verdict.csv``.
    """
    from .. import datasets

    check_choice(axis, "axis", tuple(MNIST_AXES))
    check_rounds(rounds, communication_rounds)
    graphs = _check_training(batch, record_every, repeats, graphs, seed)
    if synthetic == (data_dir is not None):
        raise ValueError("give data_dir (CIFAR-10's batches) or synthetic=True, one of the two")
    data = datasets.synthetic_cifar10(seed=seed) if synthetic else datasets.load_cifar10(data_dir)
    width = check_int(width, "width", minimum=1, maximum=MAX_WIDTH)
    make_out_dir(out_dir)
    parts = datasets.iid_split(len(data[1]), 16, seed=seed)
    subset = _subset(len(data[1]), evaluate_on, seed)
    what = f"ResNet-18{'' if width == 64 else f' (width {width})'} on {'synthetic images' if synthetic else 'CIFAR-10'}"
    return _train_on_graphs(out_dir, lambda: resnet18(width), data, parts, what,
                            communication_rounds=communication_rounds, repeats=repeats, rounds=rounds, batch=batch,
                            record_every=record_every, graphs=graphs, seed=seed, progress=progress, log=log,
                            axis=axis, stem="cifar10_resnet", evaluate_on=subset)


#: How :func:`reproduce_mnist_mlp` may split the training data over the nodes.
SPLITS = ("iid", "dirichlet", "shards")


def _mnist_data(data, data_dir, seed):
    """``(Xtr, ytr, Xte, yte)``: the digits (a sixth held out for testing, drawn by ``seed``) or MNIST from
    ``data_dir`` (any layout :func:`rowstoch_fast.datasets.load_mnist` reads)."""
    from .. import datasets

    if data == "digits":
        X, y = datasets.load_digits()
        perm = np.random.default_rng(seed).permutation(len(y))
        n_test = len(y) // 6
        return X[perm[n_test:]], y[perm[n_test:]], X[perm[:n_test]], y[perm[:n_test]]
    if data == "mnist":
        if data_dir is None:
            raise ValueError("data='mnist' reads MNIST from data_dir (nothing is downloaded)")
        return datasets.load_mnist(data_dir)
    raise ValueError(f"data must be 'digits' or 'mnist', got {data!r}")


def _split(labels, n, split, alpha, seed):
    """The nodes' sample indices: ``split`` of :data:`SPLITS` (None: IID, or Dirichlet when ``alpha`` is given)."""
    from .. import datasets

    split = split or ("iid" if alpha is None else "dirichlet")
    check_choice(split, "split", tuple(SPLITS))
    if (alpha is not None) != (split == "dirichlet"):
        raise ValueError("alpha is the Dirichlet split's and needs it" if split != "dirichlet"
                         else "the Dirichlet split needs alpha")
    if split == "iid":
        return datasets.iid_split(len(labels), n, seed=seed)
    if split == "dirichlet":
        return datasets.dirichlet_split(labels, n, alpha, seed=seed)
    return datasets.shard_split(labels, n)


def label_counts(labels, parts, classes=10):
    """The heat map's numbers: ``counts[i, c]``, how many samples of class ``c`` node ``i`` holds (``parts[i]``:
    node ``i``'s sample indices, integers in ``0..len(labels) - 1``)."""
    classes = check_int(classes, "classes", minimum=1)  # (0 had given counts of shape (n, 0), helper 204)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu" or labels.ndim != 1:  # (float labels, negative ones: NumPy's own words)
        raise TypeError(f"labels must be a 1-D array of class ids (integers), got {labels.dtype} of shape "
                        f"{labels.shape}")
    if labels.size and not 0 <= labels.min() <= labels.max() < classes:
        bad = labels.min() if labels.min() < 0 else labels.max()
        raise ValueError(f"labels must be class ids in 0..{classes - 1} (classes = {classes}), got {int(bad)}")
    parts = [np.asarray(p) for p in parts]
    for i, p in enumerate(parts):  # (an index past the labels had been NumPy's IndexError)
        if p.ndim != 1 or (p.size and p.dtype.kind not in "iu"):
            raise TypeError(f"parts[{i}] must be a 1-D array of sample indices (integers), got {p.dtype} of shape "
                            f"{p.shape}")
        if p.size and p.min() < 0:  # (-1 had counted the last sample's class, helper 218)
            raise ValueError(f"parts[{i}] holds sample {int(p.min())}: sample indices are 0..{len(labels) - 1}")
        if p.size and p.max() >= len(labels):
            raise ValueError(f"parts[{i}] holds sample {int(p.max())}, past the {len(labels)} labels")
    return np.stack([np.bincount(labels[p.astype(np.intp)], minlength=classes)[:classes] for p in parts])


@writes_before_sigterm
def reproduce_mnist_heterogeneous(out_dir, data="digits", data_dir=None, communication_rounds=2000, repeats=3,
                                  rounds=(1, 10), batch=16, record_every=50, graphs=None, seed=0, progress=True,
                                  log=print, axis="batches", evaluate_on=10000):
    """The paper's heterogeneous MNIST experiment (Appendix E, its heat map and the figure after it): the MLP of
    :func:`reproduce_mnist_mlp`, Pull-Diag-GT against MG-Pull-Diag-GT (R = 10) on the four 16-node graphs, with
    each node holding its own label distribution.

    The paper shows the distribution as a heat map and does not say how it was drawn; this uses label-sorted
    shards (:func:`rowstoch_fast.datasets.shard_split`: two shards of equal size per node, node ``i`` the
    ``i``-th and ``(i + 16)``-th; on MNIST every node holds 3,750 images of two to four digits). Writes
    ``mnist_heterogeneous_split.png`` (the heat maps of the uniform split and this one, side by side, as the
    paper's figure), ``mnist_heterogeneous_split.csv`` (the counts), and what :func:`reproduce_mnist_mlp` writes,
    named ``mnist_heterogeneous*``, with its verdict per graph. The parameters are :func:`reproduce_mnist_mlp`'s.
    """
    import pandas as pd

    check_choice(axis, "axis", tuple(MNIST_AXES))
    check_rounds(rounds, communication_rounds)
    graphs = _check_training(batch, record_every, repeats, graphs, seed)
    arrays = _mnist_data(data, data_dir, seed)
    ytr = arrays[1]
    uniform, skewed = (label_counts(ytr, _split(ytr, 16, kind, None, seed)) for kind in ("iid", "shards"))
    make_out_dir(out_dir)
    write_table(pd.DataFrame(skewed, columns=[f"digit_{c}" for c in range(10)]).rename_axis("node"), out_dir,
                "mnist_heterogeneous_split.csv", log, index=True)
    plt = _plt()
    if plt is not None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
        for ax, counts, title in ((axes[0], uniform, "uniform (IID) split"),
                                  (axes[1], skewed, "heterogeneous split (label-sorted shards)")):
            image = ax.imshow(counts, aspect="auto", cmap="viridis")
            ax.set_xlabel("digit")
            ax.set_ylabel("node")
            ax.set_xticks(range(10))
            ax.set_title(f"{title}, {data}", fontsize=9)
            fig.colorbar(image, ax=ax, label="samples")
        log(f"wrote {_save(fig, out_dir, 'mnist_heterogeneous_split.png')}")
        plt.close(fig)
    parts = _split(ytr, 16, "shards", None, seed)
    return _train_on_graphs(out_dir, lambda: mlp(arrays[0].shape[1]), arrays, parts,
                            f"MLP on {data}, label-sorted shards", communication_rounds=communication_rounds,
                            repeats=repeats, rounds=rounds, batch=batch, record_every=record_every, graphs=graphs,
                            seed=seed, progress=progress, log=log, axis=axis, stem="mnist_heterogeneous",
                            evaluate_on=_subset(len(ytr), evaluate_on, seed))


def _final_stats(part):
    """One configuration's final (its rows: every repeat's records): the training loss, the mean over repeats of
    each repeat's mean over its last tenth of records (infinite if a repeat diverged), its spread, how many repeats
    it is over, the test accuracy over the same windows, how many repeats diverged, the window's first
    iteration."""
    if not len(part):
        return {"train_loss": math.inf, "spread": math.nan, "repeats": 0, "test_accuracy": math.nan, "diverged": 0,
                "window_from": math.nan}
    with np.errstate(invalid="ignore"):  # (a repeat whose loss is no longer finite diverged too, flagged or not:
        # an infinite loss read "inf +- nan (0 of 1 diverged)")
        failed = part.groupby("repeat")["diverged"].any() | ~part.groupby("repeat")["train_loss"].apply(
            lambda v: bool(np.isfinite(np.asarray(v, dtype=np.float64)[-1:]).all()))
    ended = part[~part["repeat"].isin(failed[failed].index)]
    diverged = int(failed.sum())
    if len(ended):
        mean, width, start, repeats = window_stats(ended, "train_loss")
        accuracy_mean = window_stats(ended, "test_accuracy")[0]
    else:
        mean, width, start, repeats, accuracy_mean = math.inf, math.nan, math.nan, 0, math.nan
    return {"train_loss": math.inf if diverged else mean, "spread": width, "repeats": repeats,
            "test_accuracy": accuracy_mean, "diverged": diverged, "window_from": start}


#: How the neural figures' verdicts treat runs that diverged, beside :data:`COMPARE_RULE`.
DIVERGED_RULE = ("where a side has runs that diverged, the side with fewer wins ('inconclusive' with as many); "
                 "otherwise ")


def _mnist_verdict(frame, names, rounds, repeats):
    """Per graph and per ``R > 1`` (never the best of several R): the final training loss of plain Pull-Diag-GT
    (R = 1) and of MG-Pull-Diag-GT at that R (:func:`_final_stats`), their spreads, and the verdict: the side with
    fewer diverged runs wins where either has some, else :data:`COMPARE_RULE` ("inconclusive" within the
    interval)."""
    import pandas as pd

    rows = []
    for name in names:
        p = _final_stats(frame[(frame["graph"] == name) & (frame["R"] == 1)])
        for R in rounds:
            if R == 1:
                continue
            m = _final_stats(frame[(frame["graph"] == name) & (frame["R"] == R)])
            if m["diverged"] or p["diverged"]:
                verdict = ("holds" if m["diverged"] < p["diverged"] else "does not hold"
                           if m["diverged"] > p["diverged"] else "inconclusive")
            else:
                verdict = compare_windows(m["train_loss"], m["spread"], m["repeats"], p["train_loss"], p["spread"],
                                          p["repeats"])
            rows.append({"claim": f"{name}: MG-Pull-Diag-GT (R = {R}) ends with a lower training loss than "
                                  "Pull-Diag-GT", "graph": name, "R_mg": R,
                         "lr_mg": MULTI_GOSSIP_LR[name][R], "lr_plain": MULTI_GOSSIP_LR[name][1],
                         "train_loss_plain": p["train_loss"], "train_loss_mg": m["train_loss"],
                         "spread_plain": p["spread"], "spread_mg": m["spread"],
                         "repeats_plain": p["repeats"], "repeats_mg": m["repeats"],
                         "test_accuracy_plain": p["test_accuracy"], "test_accuracy_mg": m["test_accuracy"],
                         "diverged_plain": p["diverged"], "diverged_mg": m["diverged"],
                         "window_from_iteration": p["window_from"], "rule": DIVERGED_RULE + COMPARE_RULE,
                         "verdict": verdict})
    return pd.DataFrame(rows, columns=["claim", "graph", "R_mg", "lr_mg", "lr_plain", "train_loss_plain",
                                       "train_loss_mg", "spread_plain", "spread_mg", "repeats_plain", "repeats_mg",
                                       "test_accuracy_plain", "test_accuracy_mg", "diverged_plain", "diverged_mg",
                                       "window_from_iteration", "rule", "verdict"])
