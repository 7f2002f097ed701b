"""Data for the training experiments: splits over nodes and loaders of local MNIST / CIFAR-10 files.

Nothing is downloaded: scikit-learn's bundled digits need no file, and MNIST (the four IDX files, gzipped or
not) and CIFAR-10 (the binary or the "python version" batches) are read from a folder the user already has.

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


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles what a CIFAR-10 batch holds (dicts, lists, strings, numbers, NumPy arrays) and nothing else:
    a pickle names the functions it calls, and one from an untrusted folder could run any code."""

    def find_class(self, module, name):
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name in ("_reconstruct", "scalar"):
            try:
                import numpy._core.multiarray as multiarray  # NumPy >= 2 (no deprecation shim)
            except ImportError:  # pragma: no cover - NumPy 1.x
                import numpy.core.multiarray as multiarray
            return getattr(multiarray, name)
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        if (module, name) == ("_codecs", "encode"):  # bytes pickled by Python 3 at protocol 2
            import codecs

            return codecs.encode
        raise pickle.UnpicklingError(f"refusing to call {module}.{name}: a CIFAR-10 batch holds only arrays, "
                                     "lists and strings")


def _cifar_python_batch(path):
    with _open(path) as f:
        try:
            batch = _BatchUnpickler(f, encoding="bytes").load()
            return batch[b"data"], batch[b"labels"]
        except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError,
                IndexError) as exc:
            raise ValueError(f"{path} is not a CIFAR-10 python batch ({type(exc).__name__}: {exc})") from None


def _cifar_binary_batch(path):
    with _open(path) as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8)
    if raw.size == 0 or raw.size % 3073:
        raise ValueError(f"{path} is not a CIFAR-10 binary batch ({raw.size} bytes, not records of 1 + 3072)")
    records = raw.reshape(-1, 3073)
    return records[:, 1:], records[:, 0]


def load_cifar10(folder):
    """CIFAR-10 from the batches in ``folder``: the "binary version" (``data_batch_1.bin`` .. ``_5.bin``,
    ``test_batch.bin``) when it is there, else the "python version" (``data_batch_1`` .. ``_5``,
    ``test_batch``; read without running code a file might carry), optionally gzipped: ``(Xtr, ytr, Xte, yte)``
    with images of shape (3, 32, 32) in [0, 1]."""
    binary = any(os.path.exists(os.path.join(folder, "data_batch_1.bin" + z)) for z in ("", ".gz"))

    def read(name):
        path = _find(folder, name + ".bin") if binary else _find(folder, name)
        data, labels = (_cifar_binary_batch if binary else _cifar_python_batch)(path)
        data, labels = np.asarray(data), np.asarray(labels)
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or labels.shape != (len(data),):
            raise ValueError(f"{path} holds {data.dtype} data of shape {data.shape} and labels of shape "
                             f"{labels.shape}; expected uint8 (m, 3072) and (m,)")
        if len(labels) and not (np.issubdtype(labels.dtype, np.integer) and 0 <= labels.min() and labels.max() < 10):
            raise ValueError(f"{path}: labels must be classes 0..9")
        X = data.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
        return X, labels.astype(np.int64)

    train = [read(f"data_batch_{k}") for k in range(1, 6)]
    Xte, yte = read("test_batch")
    return np.concatenate([t[0] for t in train]), np.concatenate([t[1] for t in train]), Xte, yte
