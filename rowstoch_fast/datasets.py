"""Data for the training experiments: splits over nodes and loaders of local MNIST / CIFAR-10 files.

Nothing is downloaded: scikit-learn's bundled digits need no file, and MNIST (the four IDX files in LeCun's or
torchvision's layout, gzipped or not, or Keras's ``mnist.npz``) and CIFAR-10 (the binary or the "python version"
batches) are read from a folder the user already has.

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
import io
import os
import pickle
import zipfile
import zlib

import numpy as np

from ._checks import check_int, check_positive_float, make_rng

__all__ = ["iid_split", "dirichlet_split", "shard_split", "load_digits", "load_mnist", "load_cifar10", "synthetic_cifar10", "MNIST_LAYOUTS"]


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


def _check_labels(labels):
    """``labels`` as a 1-D array of class ids (integers or booleans), or a clear error."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if not (np.issubdtype(labels.dtype, np.integer) or np.issubdtype(labels.dtype, np.bool_)):
        raise TypeError(f"labels must be class ids (integers), got dtype {labels.dtype}")
    return labels


def dirichlet_split(labels, n, alpha, seed=0, min_size=1):
    """Label-skewed split: for each class, the shares of the ``n`` nodes are drawn from ``Dirichlet(alpha)``
    (small ``alpha``: each node sees few classes; large: close to IID), as the heterogeneous experiments of
    the field do. Redrawn (same generator) until every node holds at least ``min_size`` samples.

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted).
    """
    labels = _check_labels(labels)
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


def shard_split(labels, n, shards_per_node=2):
    """Label-sorted shards (the "pathological non-IID" split of McMahan et al., 2017, made deterministic): sort the
    samples by label (stably), cut them into ``n * shards_per_node`` shards of equal size (the remainder is
    dropped), and give node ``i`` the shards ``i, i + n, i + 2n, ...``. On MNIST with 16 nodes and 2 shards each,
    every node holds 3,750 images of two to four digits (shard ``i`` from the lower digits, ``i + 16`` from the
    upper ones; a shard may cross from one digit to the next).

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted).

    Examples
    --------
    >>> parts = shard_split(np.repeat([0, 1, 2, 3], 4), 2)
    >>> [sorted(set(np.repeat([0, 1, 2, 3], 4)[p].tolist())) for p in parts]
    [[0, 2], [1, 3]]
    """
    labels = _check_labels(labels)
    n = check_int(n, "n", minimum=1)
    shards_per_node = check_int(shards_per_node, "shards_per_node", minimum=1)
    count = n * shards_per_node
    size = len(labels) // count
    if size == 0:
        raise ValueError(f"{len(labels)} samples cannot make {count} shards ({n} nodes x {shards_per_node})")
    order = np.argsort(labels, kind="stable")
    shards = order[:size * count].reshape(count, size)
    return [np.sort(shards[i::n].ravel()) for i in range(n)]


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
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{stem}[.gz] not found in {folder!r}")


#: What reading a damaged file raises (a truncated or corrupt gzip stream, an unreadable file).
_READ_ERRORS = (OSError, EOFError, zlib.error)


def _read(path):
    """The bytes of ``path`` (gunzipped if it ends in .gz), or a ValueError naming it."""
    try:
        with _open(path) as f:
            return f.read()
    except _READ_ERRORS as exc:
        raise ValueError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from None


def _idx(path, kind):
    data = _read(path)
    magic = int.from_bytes(data[:4], "big")
    expected = 0x803 if kind == "images" else 0x801
    if magic != expected:
        raise ValueError(f"{path} is not an IDX {kind} file (magic {magic:#x}, expected {expected:#x})")
    dims = magic & 0xFF
    if len(data) < 4 + 4 * dims:
        raise ValueError(f"{path} ends inside its IDX header ({len(data)} bytes)")
    shape = tuple(int.from_bytes(data[4 + 4 * k:8 + 4 * k], "big") for k in range(dims))
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path} holds {arr.size} values, its header says {shape}")
    return arr.reshape(shape)


#: Where :func:`load_mnist` looks under the folder it is given: the folder itself, torchvision's layouts.
_MNIST_SUBFOLDERS = ("", "raw", os.path.join("MNIST", "raw"))
#: The names of each IDX file: ``train-images-idx3-ubyte`` (LeCun's) or ``train-images.idx3-ubyte`` (a widespread
#: mirror's), either gzipped.
_MNIST_NAMES = ("{split}-{kind}-{idx}-ubyte", "{split}-{kind}.{idx}-ubyte")
#: What :func:`load_mnist` reads, for its errors.
MNIST_LAYOUTS = ("the four IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                 "t10k-labels-idx1-ubyte (or with '.idx3-ubyte' / '.idx1-ubyte', each optionally .gz) in the folder, "
                 "its raw/ or its MNIST/raw/ (torchvision's), or Keras's mnist.npz (the file, or in the folder)")


def _mnist_idx_files(folder, partial=None):
    """The four IDX files under ``folder`` in one of the layouts (dict ``(split, kind) -> path``), or None; the
    folders holding some but not all of them are listed in ``partial`` (a list) with what they hold."""
    for sub in _MNIST_SUBFOLDERS:
        where = os.path.join(folder, sub)
        found = {}
        for split in ("train", "t10k"):
            for kind, idx in (("images", "idx3"), ("labels", "idx1")):
                for pattern in _MNIST_NAMES:
                    name = pattern.format(split=split, kind=kind, idx=idx)
                    path = next((os.path.join(where, name + z) for z in ("", ".gz")
                                 if os.path.isfile(os.path.join(where, name + z))), None)
                    if path:
                        found[(split, kind)] = path
                        break
        if len(found) == 4:
            return found
        if found and partial is not None:
            missing = [f"{split}-{kind}-{idx}-ubyte[.gz]" for split in ("train", "t10k")
                       for kind, idx in (("images", "idx3"), ("labels", "idx1")) if (split, kind) not in found]
            partial.append(f"{os.path.normpath(where)!r} holds {', '.join(os.path.basename(p) for p in found.values())}"
                           f" but no {' or '.join(missing)}")
    return None


def _mnist_checked(X, y, what):
    """Images ``(m, 28, 28)`` uint8 and labels ``(m,)`` in 0..9 from ``what``, as ``(m, 784)`` floats in [0, 1]
    and int64 labels; anything else refused naming ``what``."""
    if X.dtype != np.uint8 or X.ndim != 3 or X.shape[1:] != (28, 28):
        raise ValueError(f"{what}: images must be uint8 of shape (m, 28, 28), got {X.dtype} {X.shape}")
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"{what}: {len(X)} images but labels of shape {y.shape}")
    if len(y) and not (np.issubdtype(y.dtype, np.integer) and 0 <= y.min() and y.max() <= 9):
        raise ValueError(f"{what}: labels must be digits 0..9")
    return X.reshape(len(X), -1).astype(np.float32) / 255.0, y.astype(np.int64)


def _mnist_npz(path):
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":  # (NumPy would try it as a pickle and blame "object data")
            raise ValueError(f"{path} is not an .npz archive (not a zip file)")
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as z:  # (no pickled objects: a file could run code)
                missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in z.files]
                if missing:
                    raise ValueError(f"{path} is not Keras's mnist.npz: it lacks {', '.join(missing)} (holds "
                                     f"{', '.join(z.files) or 'nothing'})")
                arrays = {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}
        except (*_READ_ERRORS, zipfile.BadZipFile) as exc:  # (a damaged zip, or a member that is not an array)
            raise ValueError(f"{path} is not an .npz archive ({type(exc).__name__}: {exc})") from None
        except ValueError as exc:  # (an array of Python objects: NumPy refuses it without allow_pickle)
            if str(exc).startswith(str(path)):
                raise
            raise ValueError(f"{path}: {exc}") from None
    return (*_mnist_checked(arrays["x_train"], arrays["y_train"], f"{path} (x_train, y_train)"),
            *_mnist_checked(arrays["x_test"], arrays["y_test"], f"{path} (x_test, y_test)"))


def load_mnist(folder):
    """MNIST from local files in any of its common layouts: ``(Xtr, ytr, Xte, yte)``, images flattened to 784
    values in [0, 1], labels int64.

    Parameters
    ----------
    folder : str or os.PathLike
        A folder holding the four IDX files (``train-images-idx3-ubyte`` or ``train-images.idx3-ubyte``,
        optionally ``.gz``; also found in its ``raw/`` or ``MNIST/raw/``, torchvision's layout), or Keras's
        ``mnist.npz`` (the file itself, or in the folder). Each file is checked by its header and size (28 x 28
        images, as many labels as images, digits 0..9).

    Raises
    ------
    FileNotFoundError
        No layout found; the message lists what the folder holds.
    ValueError
        A file that is not what its name says.
    """
    folder = os.fspath(folder)
    if os.path.isfile(folder):
        if folder.endswith(".npz"):
            return _mnist_npz(folder)
        raise FileNotFoundError(f"{folder!r} is a file that is not an .npz: give the folder of MNIST's IDX files "
                                "or Keras's mnist.npz")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"MNIST folder {folder!r} does not exist")
    partial = []
    files = _mnist_idx_files(folder, partial)
    if files is None:
        npz = os.path.join(folder, "mnist.npz")
        if os.path.isfile(npz):
            return _mnist_npz(npz)
        if partial:
            raise FileNotFoundError(f"MNIST in {folder!r} is incomplete: " + "; ".join(partial))
        held = sorted(os.listdir(folder))
        raise FileNotFoundError(f"no MNIST in {folder!r}: it holds "
                                + (", ".join(held[:12]) + (f" and {len(held) - 12} more" if len(held) > 12 else "")
                                   if held else "nothing") + f"; expected {MNIST_LAYOUTS}")
    out = []
    for split in ("train", "t10k"):
        X = _idx(files[(split, "images")], "images")
        y = _idx(files[(split, "labels")], "labels")
        out += _mnist_checked(X, y, f"{files[(split, 'images')]} and {files[(split, 'labels')]}")
    return tuple(out)


def synthetic_cifar10(train=1600, test=320, seed=0, noise=0.15):
    """A CIFAR-10-shaped stand-in (no download): ten smooth random colour templates, one per class, each image its
    class's template plus Gaussian noise (``noise``), clipped to [0, 1]. ``(Xtr, ytr, Xte, yte)`` as
    :func:`load_cifar10` returns them (images ``(3, 32, 32)`` float32, labels int64, classes balanced)."""
    train = check_int(train, "train", minimum=10)
    test = check_int(test, "test", minimum=10)
    rng = make_rng(seed)
    coarse = rng.uniform(0, 1, (10, 3, 4, 4))
    templates = np.repeat(np.repeat(coarse, 8, axis=2), 8, axis=3)  # 4x4 blocks blown up to 32x32

    def draw(m):
        y = np.arange(m) % 10
        X = templates[y] + rng.normal(0, noise, (m, 3, 32, 32))
        return np.clip(X, 0, 1).astype(np.float32), y.astype(np.int64)

    return (*draw(train), *draw(test))


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
    data = _read(path)
    try:
        batch = _BatchUnpickler(io.BytesIO(data), encoding="bytes").load()
        return batch[b"data"], batch[b"labels"]
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError,
            IndexError) as exc:
        raise ValueError(f"{path} is not a CIFAR-10 python batch ({type(exc).__name__}: {exc})") from None


def _cifar_binary_batch(path):
    raw = np.frombuffer(_read(path), dtype=np.uint8)
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
