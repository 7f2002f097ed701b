"""Data for the training experiments: splits over nodes and loaders of local MNIST / CIFAR-10 files.

Nothing is downloaded: scikit-learn's bundled digits need no file, and MNIST (the four IDX files in LeCun's or
torchvision's layout, gzipped or not, or Keras's ``mnist.npz``) and CIFAR-10 (the binary or the "python version"
batches) are read from a folder the user already has. :func:`load_dataset` reads any other data set (arrays,
``.npz`` / ``.npy`` / ``.csv`` / LIBSVM files, a PyTorch-style dataset); the splits (IID, stratified, Dirichlet,
label quantity, shards, skewed sizes) give each node its samples, and :func:`node_arrays` stacks them node by
node as the objectives take them.

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

import csv
import gzip
import io
import os
import pickle
import warnings
import zipfile

import numpy as np

from ._checks import (as_array, bounded_lines, check_int, check_positive_float, check_regular_file, make_rng,
                      require_memory, require_npz_memory)
from ._files import DAMAGED, TEXT_ENCODING, is_header, loadtxt_source, open_text

__all__ = ["iid_split", "stratified_split", "dirichlet_split", "label_quantity_split", "shard_split", "split_samples", "SPLITS",
           "size_skewed_split", "node_arrays", "load_dataset", "load_digits", "load_mnist", "load_cifar10",
           "synthetic_cifar10", "MNIST_LAYOUTS"]


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
    require_memory(8 * num_samples, f"iid_split(num_samples={num_samples}) (a permutation of the samples)")
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


def _apportion(total, weights):
    """Integer counts summing to ``total`` in proportion to ``weights`` (the largest remainders round up, ties to
    the lower index). Exact for integer weights: then no count exceeds its weight when ``total <= sum(weights)``."""
    w = np.asarray(weights)
    if w.dtype.kind in "iu":
        s = int(w.sum())
        num = [int(v) * total for v in w]
        counts = np.array([v // s for v in num], dtype=np.int64)
        frac = np.array([(v % s) / s for v in num])
    else:
        q = w * (total / w.sum())
        counts = np.floor(q).astype(np.int64)
        frac = q - counts
    counts[np.argsort(-frac, kind="stable")[:total - int(counts.sum())]] += 1
    return counts


def _by_class(labels):
    """The classes of ``labels`` (sorted) and the indices of each, in one stable sort."""
    classes, counts = np.unique(labels, return_counts=True)
    return classes, np.split(np.argsort(labels, kind="stable"), np.cumsum(counts)[:-1])


def stratified_split(labels, n, seed=0):
    """Stratified split: every node gets ``len(labels) // n`` samples (the remainder, fewer than ``n``, is
    dropped) with each class in its global proportion, the classes' samples shuffled.

    Node ``i`` holds ``c_i`` samples of a class of ``m`` samples with ``|c_i - m * per / len(labels)| < 1``
    (``per = len(labels) // n``): the nodes' counts of a class differ by one at most. The homogeneous (IID)
    reference of the label-skewed splits, without the sampling noise of :func:`iid_split`.

    Parameters
    ----------
    labels : array_like of int, shape (m,)
        The class of each sample.
    n : int
        Number of nodes.
    seed : int, optional
        Seeds the shuffles (the same seed, the same split).

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted), disjoint, ``len(labels) // n`` each.

    Raises
    ------
    ValueError
        Fewer samples than nodes.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.repeat([0, 1, 2], [30, 20, 10])
    >>> parts = stratified_split(labels, 5, seed=0)
    >>> [np.bincount(labels[p]).tolist() for p in parts]
    [[6, 4, 2], [6, 4, 2], [6, 4, 2], [6, 4, 2], [6, 4, 2]]
    """
    labels = _check_labels(labels)
    n = check_int(n, "n", minimum=1)
    per = len(labels) // n
    if per == 0:
        raise ValueError(f"{len(labels)} samples cannot give each of {n} nodes one")
    rng = make_rng(seed)
    classes, groups = _by_class(labels)
    keep = _apportion(n * per, np.array([len(g) for g in groups]))
    dealt = np.concatenate([rng.permutation(g)[:k] for g, k in zip(groups, keep)])
    owner = rng.permutation(n)  # (which node gets the extra sample of a class that does not divide evenly)
    return [np.sort(dealt[owner[i]::n]) for i in range(n)]


def label_quantity_split(labels, n, classes_per_node, seed=0):
    """Label-quantity skew, the "#C=k" split (Li et al., 2022, "Federated learning on non-IID data silos: an
    experimental study"): each node holds exactly ``classes_per_node`` classes, node ``i`` class ``i mod C``
    of the ``C`` classes (in a shuffled order, so that ``n >= C`` nodes cover them all) and the rest drawn at
    random; each class's samples are shuffled and cut into equal parts (within one), one per node holding it.

    Sizes differ from node to node; a class no node drew is not used (only when ``n * classes_per_node`` is
    small), every other sample is. Give the objectives equal parts with :func:`node_arrays` (``equalize=
    "truncate"``).

    Parameters
    ----------
    labels, n, seed
        As in :func:`stratified_split`.
    classes_per_node : int
        ``k``, the classes each node holds (1 .. the number of classes).

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted), disjoint.

    Raises
    ------
    ValueError
        ``classes_per_node`` above the number of classes, fewer samples than ``n * classes_per_node`` (at once,
        before any draw), or a class with fewer samples than the nodes that drew it (the message names it).

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.repeat(np.arange(10), 20)
    >>> parts = label_quantity_split(labels, 8, classes_per_node=2, seed=0)
    >>> [len(np.unique(labels[p])) for p in parts]
    [2, 2, 2, 2, 2, 2, 2, 2]
    """
    labels = _check_labels(labels)
    n = check_int(n, "n", minimum=1)
    k = check_int(classes_per_node, "classes_per_node", minimum=1)
    classes, groups = _by_class(labels)
    C = len(classes)
    if k > C:
        raise ValueError(f"classes_per_node = {k} exceeds the {C} classes in labels")
    if n * k > len(labels):  # (each node needs a sample of each of its classes: found after n draws, in time
        # proportional to n, 8.8 s at n = 10^6, helper 204)
        raise ValueError(f"{len(labels)} samples cannot give each of {n} nodes {k} classes (a sample of each: "
                         f"n * classes_per_node = {n * k} samples at least)")
    rng = make_rng(seed)
    order = rng.permutation(C)
    held = np.zeros((n, C), dtype=bool)
    for i in range(n):
        first = order[i % C]
        held[i, first] = True
        held[i, rng.choice(np.delete(np.arange(C), first), k - 1, replace=False)] = True
    holders = held.sum(axis=0)
    short = np.flatnonzero(holders > np.array([len(g) for g in groups]))
    if len(short):
        c = short[0]
        raise ValueError(f"class {classes[c].item()!r} has {len(groups[c])} samples, fewer than the {holders[c]} "
                         f"nodes that drew it: lower n or classes_per_node")
    parts = [[np.zeros(0, dtype=np.int64)] for _ in range(n)]
    for c, g in enumerate(groups):
        nodes = np.flatnonzero(held[:, c])
        for i, chunk in zip(nodes, np.array_split(rng.permutation(g), max(len(nodes), 1))):
            parts[i].append(chunk)
    return [np.sort(np.concatenate(p)) for p in parts]


def size_skewed_split(num_samples, n, power=None, *, alpha=None, min_size=1, seed=0):
    """Quantity skew: unequal numbers of samples per node, each a uniform draw (IID labels); every sample used.

    The sizes are ``min_size`` plus the rest shared in proportion to ``1, 2^-power, 3^-power, ...`` (a power
    law; ``power=0`` is equal sizes) given to the nodes in a random order, or, with ``alpha``, to shares drawn
    from ``Dirichlet(alpha)`` (the quantity skew of Li et al., 2022; small ``alpha``: a few nodes hold most).

    The objectives give every node the same number of rows: pass these parts to :func:`node_arrays` with
    ``equalize="truncate"`` (each node keeps as many as the smallest holds), or use them in a simulator of
    your own.

    Parameters
    ----------
    num_samples : int
        The samples ``0 .. num_samples - 1`` to share.
    n : int
        Number of nodes.
    power : float, optional
        The power law's exponent (>= 0; 1.0 when neither it nor ``alpha`` is given).
    alpha : float, optional
        Dirichlet concentration (> 0) instead of the power law.
    min_size : int, default 1
        The fewest samples a node gets.
    seed : int, optional
        Seeds the order, the shares and the shuffle (the same seed, the same split).

    Returns
    -------
    list of ndarray
        The sample indices of each node (sorted), disjoint, together all ``num_samples``.

    Raises
    ------
    ValueError
        Both ``power`` and ``alpha`` given, or fewer than ``n * min_size`` samples.

    Examples
    --------
    >>> parts = size_skewed_split(100, 4, power=1.0, seed=0)
    >>> sorted(len(p) for p in parts)
    [13, 16, 24, 47]
    >>> sum(len(p) for p in size_skewed_split(100, 4, alpha=0.5, seed=0))
    100
    """
    num_samples = check_int(num_samples, "num_samples", minimum=0)
    n = check_int(n, "n", minimum=1)
    min_size = check_int(min_size, "min_size", minimum=0)
    if power is not None and alpha is not None:
        raise ValueError("give power (a power law) or alpha (Dirichlet shares), not both")
    if min_size * n > num_samples:
        raise ValueError(f"{num_samples} samples cannot give each of {n} nodes {min_size}")
    rng = make_rng(seed)
    if alpha is None:
        power = 1.0 if power is None else check_positive_float(power, "power", allow_zero=True)
        shares = rng.permutation(np.arange(1, n + 1, dtype=np.float64) ** -power)
    else:
        shares = rng.dirichlet(np.full(n, check_positive_float(alpha, "alpha")))
        if not (np.all(np.isfinite(shares)) and shares.sum() > 0):  # (every share underflowed: tiny alpha)
            shares = np.eye(n)[rng.integers(n)]
    sizes = min_size + _apportion(num_samples - n * min_size, shares)
    perm = rng.permutation(num_samples)
    return [np.sort(p) for p in np.split(perm, np.cumsum(sizes)[:-1])]


#: What :func:`node_arrays` does with parts of unequal sizes.
_EQUALIZE = ("error", "truncate")


#: The splits :func:`split_samples` (and ``rowstoch compare --split``, ``[objective] split``) name.
SPLITS = ("contiguous", "iid", "sorted", "classes:K")


def split_samples(X, y, n, split="contiguous", seed=0):
    """A data set's samples over ``n`` nodes by a named split, stacked node by node as the objectives take them
    (:func:`node_arrays`): the one-word form of the splits, for the command line and experiment files.

    Parameters
    ----------
    X : array_like, shape (m, ...)
    y : array_like, shape (m,)
        Labels (class ids, or -1 / +1 for the logistic problems); read as classes by the label-skewed splits.
    n : int
    split : str, default "contiguous"
        ``"contiguous"``: node ``i`` the ``i``-th block of the samples as they are (the remainder dropped);
        ``"iid"``: the same after a shuffle (:func:`iid_split`); ``"sorted"``: the ``i``-th block of the samples
        sorted by label (the strongest label skew of equal sizes: with two classes, each node but one sees one
        label only); ``"classes:K"``: ``K`` classes per node (:func:`label_quantity_split`), each node cut to
        the smallest node's size (``node_arrays(..., equalize="truncate")``). (A Dirichlet split, whose sizes
        differ widely, is :func:`dirichlet_split` with :func:`node_arrays` in Python.)
    seed : int, default 0
        Seeds the shuffle, the classes and the cuts.

    Returns
    -------
    H : ndarray, shape (n * M, ...)
    Y : ndarray, shape (n * M,)

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat([-1.0, 1.0], 8)
    >>> H, Y = split_samples(np.arange(16.0)[:, None], y[::-1], 4, "sorted")
    >>> Y.reshape(4, 4).mean(axis=1).tolist()  # two nodes see only -1, two only +1
    [-1.0, -1.0, 1.0, 1.0]
    """
    X, y = np.asarray(X), np.asarray(y)
    n = check_int(n, "n", minimum=1)
    for arr, name in ((X, "X"), (y, "y")):  # (a number had met len())
        if arr.ndim == 0:
            raise ValueError(f"{name} must hold one entry per sample (shape (m, ...)), got a scalar")
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} samples but y has {len(y)} labels")
    if not isinstance(split, str):
        raise TypeError(f"split must be one of {', '.join(SPLITS)}, got {type(split).__name__}")
    kind, _, value = split.partition(":")
    if (kind in ("contiguous", "iid", "sorted")) == bool(value) or kind not in ("contiguous", "iid", "sorted", "classes"):
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    per = len(y) // n
    if per == 0:
        raise ValueError(f"{len(y)} samples cannot give each of {n} nodes one")
    if kind == "contiguous":
        return X[:per * n], y[:per * n]
    if kind == "iid":
        return node_arrays(X, y, iid_split(len(y), n, seed=seed))
    classes = np.unique(y, return_inverse=True)[1].reshape(-1)
    if kind == "sorted":
        order = np.argsort(classes, kind="stable")[:per * n]
        return X[order], y[order]
    try:
        k = int(value)
    except ValueError:
        raise ValueError(f"split {split!r}: K must be an integer >= 1") from None
    return node_arrays(X, y, label_quantity_split(classes, n, k, seed=seed), equalize="truncate", seed=seed)


def node_arrays(X, y, parts, equalize="error", seed=0):
    """The samples of each node stacked node by node, as the objectives take them: ``(H, Y)`` with node ``i``
    owning rows ``i M .. (i+1) M - 1`` (``M`` samples each) of ``H = X[...]`` and ``Y = y[...]``.

    :class:`~rowstoch_fast.objectives.LogisticL2`, :class:`~rowstoch_fast.objectives.NonconvexLogistic` and
    :class:`~rowstoch_fast.objectives.LeastSquares` give every node the same number of rows; parts of unequal
    sizes (:func:`label_quantity_split`, :func:`size_skewed_split`, :func:`dirichlet_split`) need
    ``equalize="truncate"``. (The logistic objectives take labels in {-1, +1}: map class ids yourself, e.g.
    ``np.where(Y == 0, -1.0, 1.0)``.)

    Parameters
    ----------
    X : array_like, shape (m, ...)
        Features, one row (or array) per sample.
    y : array_like, shape (m,)
        Labels.
    parts : sequence of array_like of int
        The sample indices of each node (what the splits return).
    equalize : {"error", "truncate"}, default "error"
        Parts of unequal sizes: refused, naming the smallest and the largest (``"error"``), or cut to the
        smallest's size, each keeping a random subset (``seed``) in its order (``"truncate"``).
    seed : int, optional
        Seeds the subsets ``"truncate"`` keeps.

    Returns
    -------
    H : ndarray, shape (n * M, ...)
    Y : ndarray, shape (n * M,)

    Raises
    ------
    ValueError
        Unequal parts with ``equalize="error"``, an empty part, an index out of range, lengths of ``X`` and
        ``y`` that differ.
    TypeError
        Indices that are not integers.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast.objectives import LeastSquares
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(100, 3)), rng.integers(0, 4, 100)
    >>> H, Y = node_arrays(X, y, stratified_split(y, 4, seed=0))
    >>> H.shape, Y.shape, LeastSquares(H, Y, n=4).M
    ((100, 3), (100,), 25)
    >>> H, Y = node_arrays(X, y, size_skewed_split(100, 4, seed=0), equalize="truncate")
    >>> H.shape
    (52, 3)
    """
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim == 0 or y.ndim != 1:
        raise ValueError(f"X must hold one row per sample and y be 1-D, got shapes {X.shape} and {y.shape}")
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} samples but y has {len(y)} labels")
    if equalize not in _EQUALIZE:
        raise ValueError(f"equalize must be 'error' or 'truncate', got {equalize!r}")
    if isinstance(parts, np.ndarray) and parts.ndim < 2 and parts.dtype != object or len(parts) == 0:
        raise ValueError("parts must be a list of index arrays, one per node (what the splits return)")
    idx = []
    for i, p in enumerate(parts):
        p = np.asarray(p)
        if p.ndim != 1 or not (np.issubdtype(p.dtype, np.integer) or p.size == 0):
            raise TypeError(f"parts[{i}] must be a 1-D array of sample indices (integers), got dtype {p.dtype} "
                            f"shape {p.shape}")
        if p.size and (p.min() < 0 or p.max() >= len(X)):
            bad = p[(p < 0) | (p >= len(X))][0]
            raise ValueError(f"parts[{i}] holds index {bad.item()}, outside 0 .. {len(X) - 1}")
        idx.append(p.astype(np.int64))
    sizes = np.array([len(p) for p in idx])
    small, large = int(np.argmin(sizes)), int(np.argmax(sizes))
    if sizes[small] == 0:
        raise ValueError(f"node {small} holds no samples: the objectives need one per node at least")
    if sizes[small] != sizes[large]:
        if equalize == "error":
            raise ValueError(f"the parts have unequal sizes (node {small} holds {sizes[small]} samples, node {large} "
                             f"{sizes[large]}) but the objectives give every node the same number of rows: pass "
                             f"equalize='truncate' to keep {sizes[small]} of each")
        rng = make_rng(seed)
        M = sizes[small]
        idx = [p if len(p) == M else p[np.sort(rng.choice(len(p), M, replace=False))] for p in idx]
    rows = np.concatenate(idx)
    return X[rows], y[rows]


def load_digits():
    """scikit-learn's bundled 8x8 digits (no download; scikit-learn is in the ``torch``, ``test`` and ``all``
    extras, not the base install): ``(X, y)``, X of shape (1797, 64) in [0, 1]."""
    try:
        from sklearn.datasets import load_digits as sk
    except ImportError as exc:  # (a bare "No module named 'sklearn.datasets'" after a plain install)
        raise ImportError("the digits data set comes with scikit-learn: pip install scikit-learn (or "
                          "rowstoch_fast[torch])") from exc

    X, y = sk(return_X_y=True)
    return X / 16.0, y.astype(np.int64)


def _folder(folder, what):
    """``folder`` as a str, or a TypeError naming it (None had met os.fspath's "expected str, bytes or os.PathLike
    object", helper 204)."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder must be the path of {what}'s folder, got {type(folder).__name__} {folder!r:.60}")
    return os.fspath(folder)


def _open(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _find(folder, stem):
    for name in (stem, stem + ".gz"):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{stem}[.gz] not found in {folder!r}")


#: What reading a damaged file raises (a truncated or corrupt gzip stream, an unreadable file).
_READ_ERRORS = (OSError, *DAMAGED)


def _read(path, chunk=1 << 24):
    """The bytes of ``path`` (gunzipped if it ends in .gz, as a bytearray), or a ValueError naming it; read in
    chunks, and refused (MemoryError) as soon as they and their values as float32 (five bytes a byte) would not
    fit: a gzipped file's size does not bound what it holds."""
    try:
        data = bytearray()
        with _open(path) as f:
            while part := f.read(chunk):
                require_memory(5 * (len(data) + len(part)), f"{path} (at least {len(data) + len(part):,} bytes "
                               "decompressed) and its values as float32")
                data += part
        return data
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


def _npz_arrays(path, pick):
    """The arrays ``pick(names)`` names (a list of the archive's member names in, the ones to read out; it
    raises a ValueError starting with ``path`` to refuse) from the .npz archive ``path``, read without running
    code a file might carry; a file that is not such an archive refused naming ``path``."""
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":  # (NumPy would try it as a pickle and blame "object data")
            raise ValueError(f"{path} is not an .npz archive (not a zip file)")
        f.seek(0)
        try:
            with np.load(f, allow_pickle=False) as z:  # (no pickled objects: a file could run code)
                keys = pick(z.files)
                require_npz_memory(z, keys, f"the arrays {', '.join(keys)} of {path}")
                return [z[k] for k in keys]
        except (*_READ_ERRORS, zipfile.BadZipFile) as exc:  # (a damaged zip, or a member that is not an array)
            raise ValueError(f"{path} is not an .npz archive ({type(exc).__name__}: {exc})") from None
        except ValueError as exc:  # (an array of Python objects: NumPy refuses it without allow_pickle)
            if str(exc).startswith(str(path)):
                raise
            raise ValueError(f"{path}: {exc}") from None


def _mnist_npz(path):
    keys = ("x_train", "y_train", "x_test", "y_test")

    def pick(files):
        missing = [k for k in keys if k not in files]
        if missing:
            raise ValueError(f"{path} is not Keras's mnist.npz: it lacks {', '.join(missing)} (holds "
                             f"{', '.join(files) or 'nothing'})")
        return keys

    x_train, y_train, x_test, y_test = _npz_arrays(path, pick)
    return (*_mnist_checked(x_train, y_train, f"{path} (x_train, y_train)"),
            *_mnist_checked(x_test, y_test, f"{path} (x_test, y_test)"))


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
    folder = _folder(folder, "MNIST")
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
    noise = check_positive_float(noise, "noise", allow_zero=True)  # (NaN had made NaN images)
    require_memory(3072 * (4 * (train + test) + 32 * max(train, test)), f"synthetic_cifar10(train={train}, "
                   f"test={test}) (images of 3 x 32 x 32)")  # (the images kept, and a draw's float64 steps:
    # NumPy's "Unable to allocate 74.5 GiB" had named neither, helper 204)
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
    folder = _folder(folder, "CIFAR-10")
    if not os.path.isdir(folder):  # (a file had been "data_batch_1 not found in" it, helper 204)
        raise (NotADirectoryError(f"CIFAR-10 folder {folder!r} is a file: give the folder of its batches")
               if os.path.exists(folder) else FileNotFoundError(f"CIFAR-10 folder {folder!r} does not exist"))
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


# ---------------------------------------------------------------------------- any data set: load_dataset
#: The members :func:`load_dataset` takes from an .npz, the first present, when ``x_key`` / ``y_key`` are not given.
_NPZ_FEATURES = ("x", "X", "data", "features", "inputs")
_NPZ_LABELS = ("y", "Y", "labels", "label", "targets", "target")
#: The header names :func:`load_dataset` takes for a CSV file's labels (any case) when ``label_column`` is not given.
_CSV_LABELS = ("label", "labels", "y", "target", "class")
#: File formats by extension (CSV and LIBSVM also compressed: ``.gz``, ``.bz2``).
_EXTENSIONS = {".npz": "npz", ".csv": "csv", ".svm": "libsvm", ".svmlight": "libsvm", ".libsvm": "libsvm"}
_FORMATS = ("npz", "csv", "libsvm")


def load_dataset(source, *, format=None, x_key=None, y_key=None, label_column=None, delimiter=",", flatten=False):
    """A data set as ``(X, y)`` NumPy arrays, one sample per row of ``X``, from arrays, a file or a dataset object.

    Parameters
    ----------
    source
        One of:

        * ``(X, y)``: a tuple of two arrays (or array-likes), or of two ``.npy`` files (features, labels);
        * a path to an ``.npz`` archive (the members ``x_key`` and ``y_key``; by default the first of ``x``,
          ``X``, ``data``, ``features``, ``inputs`` and of ``y``, ``Y``, ``labels``, ``label``, ``targets``,
          ``target``), read without unpickling;
        * a path to a ``.csv`` file (optionally ``.gz`` / ``.bz2``) of numbers, with or without a header row
          (one is recognised by a value that is not a number); the labels are ``label_column``; a line that
          starts with ``#`` is a comment; a missing value is NaN (imputed by you: the objectives refuse
          non-finite data);
        * a path to a LIBSVM / svmlight text file (``.svm``, ``.svmlight``, ``.libsvm``, optionally compressed,
          or any name with ``format="libsvm"``), read by scikit-learn and made dense (its indices 1-based as the
          format's, 0-based where a 0 appears: scikit-learn's rule, file by file; its columns up to the largest
          index present);
        * a PyTorch-style dataset: any object with ``__len__`` and ``__getitem__`` whose items are ``(sample,
          label)`` pairs, a ``torch.utils.data.Dataset`` included (tensors through ``.numpy()``, anything else
          through ``np.asarray``; PyTorch is not imported). A list of pairs is one too.
    format : {"npz", "csv", "libsvm"}, optional
        The file's format, when its extension does not say it.
    x_key, y_key : str, optional
        The members of an ``.npz`` to read (refused for another format).
    label_column : int or str, optional
        A CSV file's label column, by index (negative from the end) or by its header's name. By default the
        column named ``label``, ``labels``, ``y``, ``target`` or ``class`` (any case), else the last one.
    delimiter : str, default ","
        A CSV file's separator (``label_column`` and ``delimiter`` refused for another format).
    flatten : bool, default False
        Reshape ``X`` to ``(m, features)`` (images into rows, as the objectives take them).

    Returns
    -------
    X : ndarray, shape (m, ...)
        Numeric features as given (a CSV or LIBSVM file's as float64).
    y : ndarray, shape (m,)
        Numeric labels as given; a text file's as int64 when they are all whole numbers, else float64.

    Raises
    ------
    FileNotFoundError
        A path that does not exist.
    IsADirectoryError
        A folder (:func:`load_mnist` and :func:`load_cifar10` read theirs).
    ValueError
        An unknown extension, lengths that differ, a file that is not what its name says, no samples, a path
        that is not a regular file (a device, a FIFO).
    TypeError
        Non-numeric features or labels, a source of another kind, items that are not pairs.
    ImportError
        A LIBSVM file without scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = load_dataset((np.zeros((4, 2, 2)), [0, 1, 0, 1]), flatten=True)
    >>> X.shape, y.tolist()
    ((4, 4), [0, 1, 0, 1])
    >>> class Pairs:  # any (sample, label) dataset, e.g. torchvision's
    ...     def __len__(self):
    ...         return 3
    ...     def __getitem__(self, i):
    ...         return np.full(2, float(i)), i % 2
    >>> X, y = load_dataset(Pairs())
    >>> X.tolist(), y.tolist()
    ([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]], [0, 1, 0])
    """
    if isinstance(source, tuple):
        if len(source) != 2:
            raise ValueError(f"a tuple source must be (features, labels), got {len(source)} items")
        X, y = (_npy(s) if isinstance(s, (str, os.PathLike)) else s for s in source)
        what = " and ".join(os.fspath(s) for s in source if isinstance(s, (str, os.PathLike))) or "(X, y)"
    elif isinstance(source, (str, os.PathLike)):
        what = os.fspath(source)
        X, y = _dataset_file(what, format, x_key, y_key, label_column, delimiter)
    elif isinstance(source, np.ndarray):
        raise TypeError("an array alone has no labels: give (X, y), a file or a dataset of (sample, label) pairs")
    elif isinstance(source, dict) or hasattr(source, "columns"):  # (a dict of arrays, a pandas DataFrame)
        raise TypeError(f"a {type(source).__name__} is not a dataset of (sample, label) pairs: give its features and "
                        "labels as a tuple (X, y)")
    elif hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        what = f"the {type(source).__name__} dataset"
        X, y = _dataset_items(source)
    else:
        raise TypeError(f"source must be (X, y), a file path or a dataset with __len__ and __getitem__ (a "
                        f"torch.utils.data.Dataset), got {type(source).__name__}")
    X, y = _checked_xy(X, y, what)
    return (X.reshape(len(X), -1) if flatten else X), y


def _checked_xy(X, y, what):
    """``X`` and ``y`` as numeric arrays of as many samples, ``y`` 1-D, or an error naming ``what``."""
    arrays = []
    for value, name in ((X, "features"), (y, "labels")):
        try:
            arrays.append(as_array(value))
        except ValueError as exc:  # (rows of different lengths: NumPy's "inhomogeneous shape", helper 204)
            raise ValueError(f"{what}: the {name} must be an array of one shape (every row as long), got "
                             f"{type(value).__name__} ({exc})") from None
    X, y = arrays
    for arr, name in ((X, "features"), (y, "labels")):
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{what}: the {name} must be numeric, got dtype {arr.dtype}")
    if X.ndim == 0:
        raise ValueError(f"{what}: the features must hold one row per sample, got a scalar")
    if y.ndim != 1:
        raise ValueError(f"{what}: the labels must be 1-D, got shape {y.shape}")
    if len(X) != len(y):
        raise ValueError(f"{what}: {len(X)} samples of features but {len(y)} labels")
    if len(y) == 0:
        raise ValueError(f"{what} holds no samples")
    return X, y


def _existing_file(path):
    """``path`` if it is a file, else FileNotFoundError / IsADirectoryError / ValueError (a device, a FIFO: it had
    "not existed", helper 218) naming it."""
    return check_regular_file(path, "data file", "give a file (.npz, .csv, a LIBSVM file, or a pair of .npy; "
                                                 "load_mnist and load_cifar10 read the folders of those)")


def _npy(path):
    """The array of the .npy file ``path`` (no unpickling), or an error naming it."""
    path = _existing_file(os.fspath(path))
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise ValueError(f"{path} is not a .npy file (no NumPy header)")
        f.seek(0)
        try:
            return np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, *_READ_ERRORS) as exc:
            raise ValueError(f"{path}: {exc}") from None


def _file_format(path, format):
    """The format of ``path`` (``format`` if given) and whether it is compressed, or a ValueError."""
    name = path.lower()
    compressed = name.endswith((".gz", ".bz2"))
    ext = os.path.splitext(os.path.splitext(name)[0] if compressed else name)[1]
    if format is None:
        if ext == ".npy" and not compressed:
            raise ValueError(f"{path}: a .npy file holds one array: give the pair (features.npy, labels.npy)")
        if ext not in _EXTENSIONS:
            raise ValueError(f"{path}: unknown extension {ext or '(none)'!r}; load_dataset reads .npz, .csv and "
                             ".svm / .svmlight / .libsvm (CSV and LIBSVM also .gz or .bz2), or any name with "
                             "format='npz', 'csv' or 'libsvm'")
        format = _EXTENSIONS[ext]
    elif format not in _FORMATS:
        raise ValueError(f"format must be 'npz', 'csv' or 'libsvm', got {format!r}")
    if compressed and format == "npz":
        raise ValueError(f"{path}: an .npz archive is compressed already: give it uncompressed")
    return format


def _dataset_file(path, format, x_key, y_key, label_column, delimiter):
    format = _file_format(_existing_file(path), format)
    for name, value, default, kind in (("x_key", x_key, None, "npz"), ("y_key", y_key, None, "npz"),
                                       ("label_column", label_column, None, "csv"), ("delimiter", delimiter, ",", "csv")):
        if value != default and format != kind:  # (each format's own: one given for another had been ignored
            # without a word, helper 193)
            raise ValueError(f"{name} is read from {'an .npz' if kind == 'npz' else 'a CSV'} file; {path} is read as "
                             f"{'LIBSVM' if format == 'libsvm' else format.upper()}")
    if format == "npz":
        return _npz_arrays(path, lambda files: [_npz_member(path, files, x_key, _NPZ_FEATURES, "x_key"),
                                                _npz_member(path, files, y_key, _NPZ_LABELS, "y_key")])
    if format == "csv":
        return _dataset_csv(path, label_column, delimiter)
    return _dataset_libsvm(path)


def _npz_member(path, files, key, defaults, argname):
    """The member ``key`` of an archive holding ``files``, else the first of ``defaults`` there; a ValueError
    naming ``path`` when there is none."""
    if key is not None:
        if key not in files:
            raise ValueError(f"{path} has no array {key!r} ({argname}); it holds {', '.join(files) or 'nothing'}")
        return key
    found = next((k for k in defaults if k in files), None)
    if found is None:
        raise ValueError(f"{path} has none of {', '.join(defaults)}; it holds {', '.join(files) or 'nothing'}: "
                         f"name the one to read with {argname}=")
    return found


def _class_ids(y):
    """Labels read from text: int64 when every one is a whole number, else as they are (float64)."""
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    return y


def _dataset_csv(path, label_column, delimiter):
    try:
        with open_text(path) as f:
            first, at = None, 0  # (the first line that is no comment, and its index: a comment line above a
            # header had been read as the header)
            for at, line in enumerate(bounded_lines(f, path)):  # (a line that never ends: not read whole, helper 218)
                if line.strip() and not line.lstrip().startswith("#"):  # (a blank line too, helper 194)
                    first = next(csv.reader([line], delimiter=delimiter), None)
                    break
    except (*_READ_ERRORS, UnicodeDecodeError, csv.Error) as exc:  # (csv.Error: a field past its 128 KiB)
        raise ValueError(f"{path} cannot be read as text ({type(exc).__name__}: {exc})") from None
    if not first:
        raise ValueError(f"{path} holds no samples (its first line is empty)")
    names = [v.strip() for v in first] if is_header(first) else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # ("input contained no data": refused below)
            data = np.loadtxt(loadtxt_source(path, delimiter), delimiter=delimiter,
                              skiprows=at + 1 if names is not None else 0,
                              ndmin=2, dtype=np.float64, encoding=TEXT_ENCODING)
    except (ValueError, *_READ_ERRORS) as exc:
        raise ValueError(f"{path}: {exc} (a CSV file for load_dataset holds numbers only, under an optional header "
                         "row of names, none of them a number)") from None
    if data.size == 0:
        raise ValueError(f"{path} holds no samples")
    cols = data.shape[1]
    if names is not None and len(names) != cols:
        raise ValueError(f"{path}: its header names {len(names)} columns, its rows hold {cols}")
    if cols < 2:
        raise ValueError(f"{path} has one column: load_dataset needs features and a label column")
    if label_column is None:
        lower = [v.lower() for v in names or ()]
        column = next((lower.index(c) for c in _CSV_LABELS if c in lower), cols - 1)
    elif isinstance(label_column, str):
        if names is None:
            raise ValueError(f"label_column={label_column!r} names a column but {path} has no header row: give "
                             "its index")
        if label_column not in names:
            raise ValueError(f"{path} has no column {label_column!r}; its header: {', '.join(names)}")
        column = names.index(label_column)
    else:
        column = check_int(label_column, "label_column")
        if not -cols <= column < cols:
            raise ValueError(f"label_column = {column} is outside the {cols} columns of {path}")
        column %= cols
    return np.delete(data, column, axis=1), _class_ids(data[:, column])


def _dataset_libsvm(path):
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError as exc:
        raise ImportError("reading a LIBSVM / svmlight file needs scikit-learn: pip install scikit-learn") from exc
    try:
        X, y = load_svmlight_file(path)
    except OverflowError as exc:  # (an index of 1e11: a bare OverflowError, helper 204)
        raise ValueError(f"{path}: a feature index is past what scikit-learn reads ({exc}); a LIBSVM file's indices "
                         "are column numbers") from None
    except (ValueError, *_READ_ERRORS) as exc:
        raise ValueError(f"{path} is not a LIBSVM / svmlight file ({type(exc).__name__}: {exc})") from None
    require_memory(X.shape[0] * X.shape[1] * 8, f"the dense features of {path} ({X.shape[0]} x {X.shape[1]})",
                   "read it with sklearn.datasets.load_svmlight_file to keep it sparse")
    return X.toarray(), _class_ids(y)


def _as_numpy(value):
    """A tensor (through ``.detach().cpu().numpy()``) or anything else (``np.asarray``) as an array."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _dataset_items(data):
    """``(X, y)`` from a dataset of ``(sample, label)`` pairs, or an error naming the first bad item."""
    X, y = [], []
    for i in range(len(data)):
        item = data[i]
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            size = f" of {len(item)} items" if isinstance(item, (tuple, list)) else ""
            raise TypeError(f"dataset[{i}] must be a (sample, label) pair, got a {type(item).__name__}{size}")
        sample, label = _as_numpy(item[0]), _as_numpy(item[1])
        if not X:  # (the samples gathered, then stacked: two copies; 10^9 of them had been read until the
            # operating system killed the process, helper 204)
            shape = f"shape {sample.shape}" if sample.ndim else "one number"
            require_memory(len(data) * (2 * sample.nbytes + 2 * label.nbytes + 200),
                           f"the {type(data).__name__} dataset of {len(data):,} samples of {shape} ({sample.dtype})")
        elif sample.shape != X[0].shape:
            raise ValueError(f"dataset[{i}] holds a sample of shape {sample.shape}, dataset[0] one of {X[0].shape}")
        if label.size != 1:
            raise ValueError(f"dataset[{i}] has a label of shape {label.shape}: load_dataset takes one number a sample")
        X.append(sample)
        y.append(label.reshape(()))
    if not X:
        raise ValueError(f"the {type(data).__name__} dataset holds no samples")
    return np.stack(X), np.stack(y)
