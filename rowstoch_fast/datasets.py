"""Data for the training experiments: splits over nodes and loaders of local MNIST / CIFAR-10 files.

Nothing is downloaded: scikit-learn's bundled digits need no file, and MNIST (the four IDX files, gzipped or
not) and CIFAR-10 (the "python version" batches) are read from a folder the user already has.

Examples
--------
>>> import numpy as np
>>> parts = iid_split(12, 3, seed=0)
>>> sorted(np.concatenate(parts).tolist()) == list(range(12))
True
>>> sum(len(p) for p in dirichlet_split(np.repeat([0, 1], 50), 4, alpha=0.1, seed=0))
100
"""

from __future__ import annotations

import gzip
import os
import pickle

import numpy as np

from ._checks import check_int, check_positive_float, make_rng

__all__ = ["iid_split", "dirichlet_split", "load_digits", "load_mnist", "load_cifar10"]


def iid_split(num_samples, n, seed=0):
    """Shuffle ``0 .. num_samples - 1`` and cut it into ``n`` parts of equal size (the remainder is dropped).

    Returns
    -------
    list of ndarray
        The sample indices of each node.
    """
    num_samples = check_int(num_samples, "num_samples", minimum=0)
    n = check_int(n, "n", minimum=1)
    per = num_samples // n
    if per == 0:
        raise ValueError(f"{num_samples} samples cannot give each of {n} nodes one")
    perm = make_rng(seed).permutation(num_samples)
    return [perm[i * per:(i + 1) * per] for i in range(n)]


def dirichlet_split(labels, n, alpha, seed=0, min_size=1):
    """Label-skewed split: for each class, the shares of the ``n`` nodes are drawn from ``Dirichlet(alpha)``
    (small ``alpha``: each node sees few classes; large: close to IID), as the heterogeneous experiments of
    the field do. Redrawn (same generator) until every node holds at least ``min_size`` samples.

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.bool_)):
        raise TypeError(f"labels must be class ids (integers), got dtype {labels.dtype}")
    n = check_int(n, "n", minimum=1)
    alpha = check_positive_float(alpha, "alpha")
    min_size = check_int(min_size, "min_size", minimum=0)
    if min_size * n > len(labels):
        raise ValueError(f"{len(labels)} samples cannot give each of {n} nodes {min_size}")
    rng = make_rng(seed)
    classes = np.unique(labels)
    for _ in range(1000):
        parts = [[] for _ in range(n)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            cuts = (np.cumsum(rng.dirichlet(np.full(n, alpha))) * len(idx)).astype(np.int64)[:-1]
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].append(chunk)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in out) >= min_size:
            return out
    raise ValueError(f"no Dirichlet(alpha={alpha}) split gave every node {min_size} samples in 1000 draws; "
                     "raise alpha or lower min_size")


def load_digits():
    """scikit-learn's bundled 8x8 digits (no download): ``(X, y)``, X of shape (1797, 64) in [0, 1]."""
    from sklearn.datasets import load_digits as sk

    X, y = sk(return_X_y=True)
    return X / 16.0, y.astype(np.int64)


def _open(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _find(folder, stem):
    for name in (stem, stem + ".gz"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{stem}[.gz] not found in {folder!r}")


def _idx(path, kind):
    with _open(path) as f:
        data = f.read()
    magic = int.from_bytes(data[:4], "big")
    expected = 0x803 if kind == "images" else 0x801
    if magic != expected:
        raise ValueError(f"{path} is not an IDX {kind} file (magic {magic:#x}, expected {expected:#x})")
    dims = magic & 0xFF
    shape = tuple(int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(dims))
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path} holds {arr.size} values, its header says {shape}")
    return arr.reshape(shape)


def load_mnist(folder):
    """MNIST from the four IDX files in ``folder`` (``train-images-idx3-ubyte`` etc., optionally ``.gz``):
    ``(Xtr, ytr, Xte, yte)`` with images flattened to 784 values in [0, 1]."""
    out = []
    for split in ("train", "t10k"):
        X = _idx(_find(folder, f"{split}-images-idx3-ubyte"), "images")
        y = _idx(_find(folder, f"{split}-labels-idx1-ubyte"), "labels")
        if len(X) != len(y):
            raise ValueError(f"MNIST {split}: {len(X)} images but {len(y)} labels")
        out += [X.reshape(len(X), -1).astype(np.float32) / 255.0, y.astype(np.int64)]
    return tuple(out)


def load_cifar10(folder):
    """CIFAR-10 from its "python version" batches in ``folder`` (``data_batch_1`` .. ``_5``, ``test_batch``):
    ``(Xtr, ytr, Xte, yte)`` with images of shape (3, 32, 32) in [0, 1]."""
    def read(name):
        with open(_find(folder, name), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        X = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
        return X, np.asarray(batch[b"labels"], dtype=np.int64)

    train = [read(f"data_batch_{k}") for k in range(1, 6)]
    Xte, yte = read("test_batch")
    return np.concatenate([t[0] for t in train]), np.concatenate([t[1] for t in train]), Xte, yte
