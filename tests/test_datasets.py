"""Splits over nodes and the loaders of local MNIST / CIFAR-10 files (on tiny generated files)."""

import gzip
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast.datasets import dirichlet_split, iid_split, load_cifar10, load_digits, load_mnist


def test_iid_split_partitions_a_shuffle():
    parts = iid_split(103, 4, seed=1)
    assert [len(p) for p in parts] == [25] * 4
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == 100 and flat.max() < 103
    assert not np.array_equal(flat, np.sort(flat))
    with pytest.raises(ValueError, match="cannot give each of 5 nodes one"):
        iid_split(4, 5)


def test_dirichlet_split_skews_labels_with_small_alpha():
    labels = np.repeat(np.arange(10), 100)
    skewed = dirichlet_split(labels, 8, alpha=0.05, seed=0)
    even = dirichlet_split(labels, 8, alpha=1000.0, seed=0)
    for parts in (skewed, even):
        assert sorted(np.concatenate(parts).tolist()) == list(range(1000))  # every sample once
    def classes(parts):  # classes holding 90% of a node's samples, averaged over nodes
        out = []
        for p in parts:
            counts = np.sort(np.bincount(labels[p], minlength=10))[::-1]
            out.append(np.searchsorted(np.cumsum(counts) / counts.sum(), 0.9) + 1)
        return np.mean(out)
    assert classes(skewed) < 4 < classes(even)
    with pytest.raises(ValueError, match="cannot give each of 8 nodes"):
        dirichlet_split(labels[:10], 8, alpha=1.0, min_size=2)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_split(labels, 8, alpha=0.0)
    with pytest.raises(TypeError, match="labels must be class ids \\(integers\\), got dtype float64"):
        dirichlet_split(labels + 0.5, 8, alpha=1.0)


def _idx_file(path, arr, magic, compress):
    header = magic.to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    data = header + arr.astype(np.uint8).tobytes()
    with (gzip.open(path, "wb") if compress else open(path, "wb")) as f:
        f.write(data)


@pytest.mark.parametrize("compress", [False, True])
def test_mnist_loader_reads_idx_files(tmp_path, compress):
    rng = np.random.default_rng(0)
    for split, m in (("train", 7), ("t10k", 3)):
        ext = ".gz" if compress else ""
        _idx_file(tmp_path / f"{split}-images-idx3-ubyte{ext}", rng.integers(0, 256, (m, 28, 28)), 0x803, compress)
        _idx_file(tmp_path / f"{split}-labels-idx1-ubyte{ext}", rng.integers(0, 10, (m,)), 0x801, compress)
    Xtr, ytr, Xte, yte = load_mnist(str(tmp_path))
    assert Xtr.shape == (7, 784) and Xte.shape == (3, 784) and ytr.shape == (7,) and yte.dtype == np.int64
    assert 0.0 <= Xtr.min() and Xtr.max() <= 1.0
    (tmp_path / f"t10k-labels-idx1-ubyte{'.gz' if compress else ''}").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_mnist(str(tmp_path))


def test_mnist_loader_refuses_a_wrong_file(tmp_path):
    for split in ("train", "t10k"):
        _idx_file(tmp_path / f"{split}-images-idx3-ubyte", np.zeros((2, 2, 2)), 0x801, False)
        _idx_file(tmp_path / f"{split}-labels-idx1-ubyte", np.zeros(2), 0x801, False)
    with pytest.raises(ValueError, match="not an IDX images file"):
        load_mnist(str(tmp_path))


def test_cifar10_loader_reads_python_batches(tmp_path):
    rng = np.random.default_rng(1)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (4, 3072)).astype(np.uint8), b"labels": list(rng.integers(0, 10, 4))}
        with open(tmp_path / name, "wb") as f:
            pickle.dump(batch, f)
    Xtr, ytr, Xte, yte = load_cifar10(str(tmp_path))
    assert Xtr.shape == (20, 3, 32, 32) and Xte.shape == (4, 3, 32, 32) and ytr.shape == (20,)


def _cifar_folder(tmp_path, binary=False, compress=False, m=4):
    rng = np.random.default_rng(2)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        data, labels = rng.integers(0, 256, (m, 3072)).astype(np.uint8), rng.integers(0, 10, m)
        if binary:
            raw, name = np.concatenate([labels[:, None].astype(np.uint8), data], axis=1).tobytes(), name + ".bin"
        else:
            raw = pickle.dumps({b"data": data, b"labels": [int(v) for v in labels]}, protocol=2)
        with (gzip.open if compress else open)(tmp_path / (name + (".gz" if compress else "")), "wb") as f:
            f.write(raw)
    return data, labels  # the test batch


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("compress", [False, True])
def test_cifar10_binary_and_gzipped_batches(tmp_path, binary, compress):
    """The binary version too, and gzipped batches of either (a .gz python batch was opened without gzip)."""
    data, labels = _cifar_folder(tmp_path, binary, compress)
    Xtr, ytr, Xte, yte = load_cifar10(str(tmp_path))
    assert Xtr.shape == (20, 3, 32, 32) and ytr.shape == (20,)
    np.testing.assert_array_equal(Xte, data.reshape(-1, 3, 32, 32) / np.float32(255.0))
    np.testing.assert_array_equal(yte, labels)


def test_cifar10_batches_cannot_run_code(tmp_path):
    """A python batch is a pickle, and a pickle names the functions it calls: one that asks for anything but
    NumPy's array reconstruction is refused, unrun."""
    _cifar_folder(tmp_path)
    witness = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(witness), "w"))

    (tmp_path / "data_batch_3").write_bytes(pickle.dumps({b"data": Payload(), b"labels": []}))
    with pytest.raises(ValueError, match="data_batch_3 is not a CIFAR-10 python batch .*refusing to call "
                                         "(builtins|_?io).open"):  # (_io: Python >= 3.12)
        load_cifar10(str(tmp_path))
    assert not witness.exists()


@pytest.mark.parametrize("content, fragment", [
    (b"", "is not a CIFAR-10 python batch"), (b"\x80\x02garbage", "is not a CIFAR-10 python batch"),
    (pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1]}), r"labels of shape \(1,\)"),
    (pickle.dumps({b"data": np.zeros((2, 3072)), b"labels": [1, 2]}), "float64 data"),
    (pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}), "labels must be classes 0..9"),
    (pickle.dumps([1, 2]), "is not a CIFAR-10 python batch")])
def test_cifar10_damaged_batches_are_named(tmp_path, content, fragment):
    _cifar_folder(tmp_path)
    (tmp_path / "test_batch").write_bytes(content)
    with pytest.raises(ValueError, match=fragment):
        load_cifar10(str(tmp_path))


def test_cifar10_binary_batch_of_a_wrong_size(tmp_path):
    _cifar_folder(tmp_path, binary=True)
    (tmp_path / "data_batch_2.bin").write_bytes(b"\0" * 3000)
    with pytest.raises(ValueError, match="data_batch_2.bin is not a CIFAR-10 binary batch \\(3000 bytes"):
        load_cifar10(str(tmp_path))


def test_digits_need_no_download():
    pytest.importorskip("sklearn")
    X, y = load_digits()
    assert X.shape == (1797, 64) and X.max() <= 1.0 and set(np.unique(y)) == set(range(10))


def _tiny_mnist(rng, m):
    return rng.integers(0, 256, (m, 28, 28)), rng.integers(0, 10, (m,))


@pytest.mark.parametrize("sub", ["", "raw", "MNIST/raw"])
@pytest.mark.parametrize("sep", ["-", "."])
@pytest.mark.parametrize("compress", [False, True])
def test_mnist_loader_reads_every_common_layout(tmp_path, sub, sep, compress):
    """LeCun's names and the dotted mirror names, gzipped or not, in the folder, its raw/ or torchvision's
    MNIST/raw/: the same arrays."""
    rng = np.random.default_rng(3)
    where = tmp_path / sub
    where.mkdir(parents=True, exist_ok=True)
    data = {}
    for split, m in (("train", 6), ("t10k", 4)):
        X, y = _tiny_mnist(rng, m)
        data[split] = (X, y)
        ext = ".gz" if compress else ""
        _idx_file(where / f"{split}-images{sep}idx3-ubyte{ext}", X, 0x803, compress)
        _idx_file(where / f"{split}-labels{sep}idx1-ubyte{ext}", y, 0x801, compress)
    Xtr, ytr, Xte, yte = load_mnist(tmp_path)
    np.testing.assert_array_equal(Xtr, data["train"][0].reshape(6, -1).astype(np.float32) / 255)
    np.testing.assert_array_equal(ytr, data["train"][1])
    assert Xte.shape == (4, 784) and yte.dtype == np.int64


def test_mnist_loader_reads_keras_npz(tmp_path):
    rng = np.random.default_rng(4)
    (xtr, ytr), (xte, yte) = _tiny_mnist(rng, 5), _tiny_mnist(rng, 3)
    np.savez(tmp_path / "mnist.npz", x_train=xtr.astype(np.uint8), y_train=ytr.astype(np.uint8),
             x_test=xte.astype(np.uint8), y_test=yte.astype(np.uint8))
    for where in (tmp_path, tmp_path / "mnist.npz"):  # the folder, or the file itself
        Xtr, Ytr, Xte, Yte = load_mnist(str(where))
        np.testing.assert_array_equal(Ytr, ytr)
        np.testing.assert_array_equal(Yte, yte)
        assert Xtr.shape == (5, 784) and Xte.shape == (3, 784) and Xtr.max() <= 1
    np.savez(tmp_path / "other.npz", x_train=xtr.astype(np.uint8))
    with pytest.raises(ValueError, match=r"other.npz is not Keras's mnist.npz: it lacks y_train, x_test, y_test"):
        load_mnist(str(tmp_path / "other.npz"))
    np.savez(tmp_path / "objects.npz", x_train=np.array([None, 1], dtype=object), y_train=ytr, x_test=xte,
             y_test=yte)
    with pytest.raises(ValueError, match="objects.npz: .*allow_pickle"):  # no code from a file is run
        load_mnist(str(tmp_path / "objects.npz"))
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"broken.npz is not an .npz archive \(not a zip file\)"):
        load_mnist(str(tmp_path / "broken.npz"))


@pytest.mark.parametrize("damage, message", [
    ("shape", r"images must be uint8 of shape \(m, 28, 28\), got uint8 \(6, 27, 28\)"),
    ("count", "6 images but labels of shape"),
    ("label", "labels must be digits 0..9"),
    ("short", "ends inside its IDX header"),
    ("gzip", "cannot be read"),
])
def test_mnist_loader_checks_headers_and_sizes(tmp_path, damage, message):
    rng = np.random.default_rng(5)
    for split in ("train", "t10k"):
        X, y = _tiny_mnist(rng, 6)
        if split == "train" and damage == "shape":
            X = X[:, 1:, :]
        if split == "train" and damage == "count":
            y = y[:5]
        _idx_file(tmp_path / f"{split}-images-idx3-ubyte", X, 0x803, False)
        _idx_file(tmp_path / f"{split}-labels-idx1-ubyte", y, 0x801, False)
    if damage == "label":
        _idx_file(tmp_path / "train-labels-idx1-ubyte", np.full(6, 12), 0x801, False)
    if damage == "short":
        (tmp_path / "train-images-idx3-ubyte").write_bytes((0x803).to_bytes(4, "big") + b"\0\0")
    if damage == "gzip":
        (tmp_path / "train-images-idx3-ubyte").unlink()
        (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"plain bytes, not gzip")
    with pytest.raises(ValueError, match=message):
        load_mnist(str(tmp_path))


def test_mnist_loader_names_what_it_found(tmp_path):
    (tmp_path / "train-images.csv").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"no MNIST in .*: it holds notes.txt, train-images.csv; "
                                                r"expected the four IDX files"):
        load_mnist(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mnist(str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="is a file that is not an .npz"):
        load_mnist(str(tmp_path / "notes.txt"))


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(st.integers(0, 9), min_size=1, max_size=300), n=st.integers(1, 12),
       shards=st.integers(1, 3))
def test_shard_split_is_a_disjoint_equal_split_of_sorted_labels(labels, n, shards):
    from rowstoch_fast.datasets import shard_split

    labels = np.array(labels)
    if len(labels) < n * shards:
        with pytest.raises(ValueError, match="cannot make"):
            shard_split(labels, n, shards)
        return
    parts = shard_split(labels, n, shards)
    size = len(labels) // (n * shards)
    flat = np.concatenate(parts)
    assert len(parts) == n and all(len(p) == size * shards for p in parts)
    assert len(np.unique(flat)) == flat.size  # disjoint
    order = np.argsort(labels, kind="stable")[:size * n * shards]
    assert sorted(flat.tolist()) == sorted(order.tolist())  # the first shards of the label-sorted order
    for i, p in enumerate(parts):  # node i: shards i, i + n, ...
        assert sorted(p.tolist()) == sorted(order.reshape(n * shards, size)[i::n].ravel().tolist())


def test_damaged_files_are_refused_naming_them(tmp_path):
    """A gzip stream damaged in its middle (zlib.error), a zip signature over no zip (BadZipFile), a damaged CIFAR
    batch, a folder where a batch should be: each a ValueError or FileNotFoundError naming the file, never another
    exception (the command line turns those two into one line and exit 2)."""
    rng = np.random.default_rng(6)
    for split in ("train", "t10k"):
        X, y = _tiny_mnist(rng, 50)
        _idx_file(tmp_path / f"{split}-images-idx3-ubyte.gz", X, 0x803, True)
        _idx_file(tmp_path / f"{split}-labels-idx1-ubyte.gz", y, 0x801, True)
    raw = bytearray((tmp_path / "train-images-idx3-ubyte.gz").read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = bytes(64)  # the deflate stream broken in its middle
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.gz cannot be read"):
        load_mnist(str(tmp_path))
    fake = tmp_path / "fake.npz"
    fake.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(ValueError, match="fake.npz is not an .npz archive"):
        load_mnist(str(fake))
    cifar = tmp_path / "cifar"
    cifar.mkdir()
    (cifar / "data_batch_1").mkdir()  # a folder, not a batch
    with pytest.raises(FileNotFoundError, match=r"data_batch_1\[.gz\] not found"):
        load_cifar10(str(cifar))
    (cifar / "data_batch_1").rmdir()
    (cifar / "data_batch_1.gz").write_bytes(gzip.compress(rng.bytes(5000))[:400])  # truncated gzip
    with pytest.raises(ValueError, match="data_batch_1.gz cannot be read"):
        load_cifar10(str(cifar))


def test_an_incomplete_mnist_is_named(tmp_path):
    """Three of the four files in torchvision's MNIST/raw: the error names the folder, what it holds and what is
    missing (it said only that the top folder held "MNIST")."""
    rng = np.random.default_rng(7)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    X, y = _tiny_mnist(rng, 4)
    _idx_file(raw / "train-images-idx3-ubyte", X, 0x803, False)
    _idx_file(raw / "train-labels-idx1-ubyte", y, 0x801, False)
    _idx_file(raw / "t10k-images-idx3-ubyte", X, 0x803, False)
    with pytest.raises(FileNotFoundError, match=r"MNIST in .* is incomplete: .*MNIST/raw' holds train-images-idx3-"
                                                r"ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte but no "
                                                r"t10k-labels-idx1-ubyte\[.gz\]"):
        load_mnist(str(tmp_path))


# ---------------------------------------------------------------------------- stratified, label quantity, sizes
def _assert_disjoint_within(parts, m):
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == flat.size  # disjoint
    assert flat.size == 0 or (flat.min() >= 0 and flat.max() < m)
    assert all(np.array_equal(p, np.sort(p)) and p.dtype.kind == "i" for p in parts)


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(st.integers(0, 6), min_size=1, max_size=300), n=st.integers(1, 12), seed=st.integers(0, 99))
def test_stratified_split_gives_every_node_the_global_proportions(labels, n, seed):
    from rowstoch_fast.datasets import stratified_split

    labels = np.array(labels)
    if len(labels) < n:
        with pytest.raises(ValueError, match=f"cannot give each of {n} nodes one"):
            stratified_split(labels, n, seed=seed)
        return
    parts = stratified_split(labels, n, seed=seed)
    per = len(labels) // n
    assert len(parts) == n and all(len(p) == per for p in parts)
    _assert_disjoint_within(parts, len(labels))
    counts = np.array([np.bincount(labels[p], minlength=7) for p in parts])  # (node, class)
    target = np.bincount(labels, minlength=7) * per / len(labels)
    assert np.all(np.abs(counts - target) < 1)  # within one sample per class of the global proportion
    assert np.all(counts.max(axis=0) - counts.min(axis=0) <= 1)
    assert all(np.array_equal(a, b) for a, b in zip(parts, stratified_split(labels, n, seed=seed)))


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(st.integers(0, 7), min_size=1, max_size=300), n=st.integers(1, 12),
       k=st.integers(1, 9), seed=st.integers(0, 99))
def test_label_quantity_split_gives_every_node_exactly_k_classes(labels, n, k, seed):
    from rowstoch_fast.datasets import label_quantity_split

    labels = np.array(labels)
    classes, counts = np.unique(labels, return_counts=True)
    if k > len(classes):
        with pytest.raises(ValueError, match=f"classes_per_node = {k} exceeds the {len(classes)} classes"):
            label_quantity_split(labels, n, k, seed=seed)
        return
    try:
        parts = label_quantity_split(labels, n, k, seed=seed)
    except ValueError as exc:  # a class drawn by more nodes than it has samples
        if n * k > len(labels):  # (fewer samples than the nodes' classes: said before any draw, helper 204)
            assert f"{len(labels)} samples cannot give each of {n} nodes {k} classes" in str(exc)
            return
        assert "fewer than the" in str(exc) and "nodes that drew it" in str(exc)
        assert counts.min() < n
        return
    assert len(parts) == n
    _assert_disjoint_within(parts, len(labels))
    assert all(len(np.unique(labels[p])) == k for p in parts)  # exactly k classes each
    used = np.concatenate(parts)
    held = np.unique(labels[used])
    assert sorted(used.tolist()) == np.flatnonzero(np.isin(labels, held)).tolist()  # a drawn class: all of it
    if n >= len(classes):
        assert len(held) == len(classes)  # node i holds class i mod C: every class covered
    for c in held:  # each class cut into equal parts (within one) over the nodes holding it
        per_node = [np.sum(labels[p] == c) for p in parts if np.any(labels[p] == c)]
        assert max(per_node) - min(per_node) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(parts, label_quantity_split(labels, n, k, seed=seed)))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(0, 400), n=st.integers(1, 12), power=st.floats(0, 4), alpha=st.floats(0.01, 100),
       use_alpha=st.booleans(), min_size=st.integers(0, 5), seed=st.integers(0, 99))
def test_size_skewed_split_uses_every_sample_once(m, n, power, alpha, use_alpha, min_size, seed):
    from rowstoch_fast.datasets import size_skewed_split

    kwargs = dict(alpha=alpha) if use_alpha else dict(power=power)
    if m < n * min_size:
        with pytest.raises(ValueError, match=f"cannot give each of {n} nodes {min_size}"):
            size_skewed_split(m, n, min_size=min_size, seed=seed, **kwargs)
        return
    parts = size_skewed_split(m, n, min_size=min_size, seed=seed, **kwargs)
    assert len(parts) == n and min(len(p) for p in parts) >= min_size
    _assert_disjoint_within(parts, m)
    assert sum(len(p) for p in parts) == m  # every sample used
    again = size_skewed_split(m, n, min_size=min_size, seed=seed, **kwargs)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_size_skewed_split_follows_its_power_law():
    from rowstoch_fast.datasets import size_skewed_split

    sizes = sorted((len(p) for p in size_skewed_split(10_000, 5, power=2.0, min_size=0, seed=3)), reverse=True)
    expected = 10_000 * np.arange(1, 6) ** -2.0 / np.sum(np.arange(1, 6) ** -2.0)
    assert np.all(np.abs(np.array(sizes) - expected) < 1)
    assert len({len(p) for p in size_skewed_split(100, 4, power=0.0)}) == 1  # power 0: equal sizes
    skewed = sorted(len(p) for p in size_skewed_split(10_000, 10, alpha=0.1, seed=0))
    even = sorted(len(p) for p in size_skewed_split(10_000, 10, alpha=1000.0, seed=0))
    assert skewed[-1] > 3000 and even[-1] < 1300


def test_the_splits_depend_on_their_seed():
    from rowstoch_fast.datasets import label_quantity_split, size_skewed_split, stratified_split

    labels = np.repeat(np.arange(5), 40)
    for split in (lambda s: stratified_split(labels, 4, seed=s), lambda s: label_quantity_split(labels, 4, 2, seed=s),
                  lambda s: size_skewed_split(200, 4, seed=s)):
        assert any(not np.array_equal(a, b) for a, b in zip(split(0), split(1)))


def test_the_new_splits_refuse_bad_arguments():
    from rowstoch_fast.datasets import label_quantity_split, size_skewed_split, stratified_split

    labels = np.repeat([0, 1, 2], 4)
    with pytest.raises(ValueError, match="cannot give each of 13 nodes one"):
        stratified_split(labels, 13)
    with pytest.raises(ValueError, match="n must be >= 1"):
        stratified_split(labels, 0)
    with pytest.raises(TypeError, match="n must be an integer"):
        stratified_split(labels, 2.0)
    with pytest.raises(TypeError, match="labels must be class ids"):
        stratified_split(labels + 0.5, 2)
    with pytest.raises(ValueError, match="labels must be 1-D"):
        label_quantity_split(labels.reshape(3, 4), 2, 1)
    with pytest.raises(ValueError, match="classes_per_node = 4 exceeds the 3 classes in labels"):
        label_quantity_split(labels, 2, 4)
    with pytest.raises(ValueError, match="classes_per_node must be >= 1"):
        label_quantity_split(labels, 2, 0)
    with pytest.raises(ValueError, match=r"class 0 has 2 samples, fewer than the 3 nodes that drew it"):
        label_quantity_split(np.repeat([0, 1, 2], [2, 5, 5]), 3, 3)
    with pytest.raises(ValueError, match=r"12 samples cannot give each of 20 nodes 2 classes"):  # (at once: helper 204)
        label_quantity_split(labels, 20, 2)
    with pytest.raises(ValueError, match="seed"):
        label_quantity_split(labels, 2, 1, seed=-1)
    with pytest.raises(ValueError, match="give power .* or alpha .*, not both"):
        size_skewed_split(100, 4, power=1.0, alpha=1.0)
    with pytest.raises(ValueError, match="power must be finite and >= 0"):
        size_skewed_split(100, 4, power=-1.0)
    with pytest.raises(ValueError, match="alpha must be finite and > 0"):
        size_skewed_split(100, 4, alpha=0.0)
    with pytest.raises(ValueError, match="3 samples cannot give each of 4 nodes 1"):
        size_skewed_split(3, 4)
    with pytest.raises(ValueError, match="num_samples must be >= 0"):
        size_skewed_split(-1, 4)
    with pytest.raises(ValueError, match="min_size must be >= 0"):
        size_skewed_split(10, 4, min_size=-1)


# ---------------------------------------------------------------------------- node_arrays
def test_node_arrays_stack_the_parts_node_by_node():
    from rowstoch_fast.datasets import label_quantity_split, node_arrays, size_skewed_split, stratified_split
    from rowstoch_fast.objectives import LeastSquares, LogisticL2

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(120, 3)), np.repeat(np.arange(4), 30)
    parts = stratified_split(y, 4, seed=1)
    H, Y = node_arrays(X, y, parts)
    assert H.shape == (120, 3) and Y.shape == (120,)
    for i, p in enumerate(parts):  # node i owns rows i M .. (i+1) M - 1
        np.testing.assert_array_equal(H[i * 30:(i + 1) * 30], X[p])
        np.testing.assert_array_equal(Y[i * 30:(i + 1) * 30], y[p])
    f = LeastSquares(H, Y.astype(float), n=4)
    np.testing.assert_array_equal(f.H[2], X[parts[2]])
    LogisticL2(H, np.where(Y < 2, -1.0, 1.0), n=4, batch=5)

    skewed = size_skewed_split(120, 4, seed=0)
    with pytest.raises(ValueError, match=r"unequal sizes \(node \d holds \d+ samples, node \d \d+\).*"
                                         r"equalize='truncate' to keep \d+ of each"):
        node_arrays(X, y, skewed)
    H, Y = node_arrays(X, y, skewed, equalize="truncate", seed=0)
    M = min(len(p) for p in skewed)
    assert H.shape == (4 * M, 3)
    for i, p in enumerate(skewed):  # a subset of each part, in its order
        rows = [int(np.flatnonzero((X == h).all(axis=1))[0]) for h in H[i * M:(i + 1) * M]]
        assert set(rows) <= set(p.tolist()) and rows == sorted(rows)
    H2, _ = node_arrays(X, y, skewed, equalize="truncate", seed=0)
    np.testing.assert_array_equal(H, H2)
    H, Y = node_arrays(X, y, label_quantity_split(y, 4, 1, seed=0), equalize="truncate")
    assert all(len(np.unique(Y[i * (len(Y) // 4):(i + 1) * (len(Y) // 4)])) == 1 for i in range(4))


def test_node_arrays_refuse_bad_inputs():
    from rowstoch_fast.datasets import node_arrays

    X, y = np.zeros((10, 2)), np.arange(10)
    with pytest.raises(ValueError, match="X has 10 samples but y has 9 labels"):
        node_arrays(X, y[:9], [np.arange(5)])
    with pytest.raises(ValueError, match="y be 1-D"):
        node_arrays(X, y.reshape(5, 2), [np.arange(5)])
    with pytest.raises(ValueError, match="equalize must be 'error' or 'truncate', got 'drop'"):
        node_arrays(X, y, [np.arange(5)], equalize="drop")
    with pytest.raises(ValueError, match="parts must be a list of index arrays"):
        node_arrays(X, y, [])
    with pytest.raises(ValueError, match="parts must be a list of index arrays"):
        node_arrays(X, y, np.arange(4))
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.arange(3), np.arange(3, 6)
    assert node_arrays(X, y, ragged)[1].tolist() == [0, 1, 2, 3, 4, 5]
    with pytest.raises(TypeError, match=r"parts\[1\] must be a 1-D array of sample indices"):
        node_arrays(X, y, [np.arange(2), np.array([0.5, 1.0])])
    with pytest.raises(ValueError, match=r"parts\[0\] holds index 10, outside 0 \.\. 9"):
        node_arrays(X, y, [np.array([3, 10])])
    with pytest.raises(ValueError, match=r"parts\[0\] holds index -1"):
        node_arrays(X, y, [np.array([-1, 2])])
    with pytest.raises(ValueError, match="node 1 holds no samples"):
        node_arrays(X, y, [np.arange(3), np.array([], dtype=np.int64)], equalize="truncate")
    with pytest.raises(ValueError, match=r"node 1 holds 2 samples, node 0 3"):
        node_arrays(X, y, [np.arange(3), np.array([5, 6])])


# ---------------------------------------------------------------------------- load_dataset
def test_load_dataset_from_arrays_and_npy_pairs(tmp_path):
    from rowstoch_fast.datasets import load_dataset

    X, y = np.arange(12.0).reshape(6, 2), np.array([0, 1, 0, 1, 2, 2])
    X2, y2 = load_dataset((X, y))
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)
    np.save(tmp_path / "X.npy", X.reshape(6, 1, 2))
    np.save(tmp_path / "y.npy", y)
    X3, y3 = load_dataset((tmp_path / "X.npy", str(tmp_path / "y.npy")), flatten=True)
    assert X3.shape == (6, 2) and y3.tolist() == y.tolist()
    X4, _ = load_dataset((tmp_path / "X.npy", y))
    assert X4.shape == (6, 1, 2)
    with pytest.raises(ValueError, match="features but 5 labels"):
        load_dataset((X, y[:5]))
    with pytest.raises(ValueError, match=r"X\.npy and .*y\.npy: 6 samples of features but 3 labels"):
        np.save(tmp_path / "y.npy", y[:3])
        load_dataset((tmp_path / "X.npy", tmp_path / "y.npy"))
    with pytest.raises(TypeError, match="the features must be numeric, got dtype <U1"):
        load_dataset((np.array([["a"], ["b"]]), [0, 1]))
    with pytest.raises(TypeError, match="the labels must be numeric, got dtype <U3"):
        load_dataset((X[:2], ["cat", "dog"]))
    with pytest.raises(TypeError, match="features must be numeric, got dtype complex128"):
        load_dataset((X[:2] + 1j, [0, 1]))
    with pytest.raises(ValueError, match=r"labels must be 1-D, got shape \(6, 1\)"):
        load_dataset((X, y[:, None]))
    with pytest.raises(ValueError, match="holds no samples"):
        load_dataset((np.zeros((0, 2)), np.zeros(0)))
    with pytest.raises(ValueError, match="a tuple source must be \\(features, labels\\), got 3 items"):
        load_dataset((X, y, y))
    with pytest.raises(TypeError, match="an array alone has no labels"):
        load_dataset(X)
    with pytest.raises(TypeError, match="source must be .*, got int"):
        load_dataset(3)
    with pytest.raises(TypeError, match="a dict is not a dataset of \\(sample, label\\) pairs: .*tuple \\(X, y\\)"):
        load_dataset({"x": X, "y": y})
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match="bad.npy is not a .npy file"):
        load_dataset((tmp_path / "bad.npy", y))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}] * 6, dtype=object))
    with pytest.raises(ValueError, match="obj.npy: .*pickle"):
        load_dataset((X, tmp_path / "obj.npy"))
    with pytest.raises(ValueError, match="a .npy file holds one array: give the pair"):
        load_dataset(tmp_path / "X.npy")


def test_load_dataset_from_an_npz(tmp_path):
    from rowstoch_fast.datasets import load_dataset

    X, y = np.arange(8.0).reshape(4, 2), np.array([1, 0, 1, 0])
    np.savez(tmp_path / "d.npz", data=X, labels=y)
    X2, y2 = load_dataset(tmp_path / "d.npz")
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)
    np.savez(tmp_path / "keras.npz", x_train=X, y_train=y, x=X[:1])
    X3, y3 = load_dataset(str(tmp_path / "keras.npz"), x_key="x_train", y_key="y_train")
    assert X3.shape == (4, 2) and y3.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="keras.npz has none of y, Y, labels.*it holds x_train, y_train, x: name the "
                                         "one to read with y_key="):
        load_dataset(tmp_path / "keras.npz")
    with pytest.raises(ValueError, match="keras.npz has no array 'x_test' \\(x_key\\); it holds"):
        load_dataset(tmp_path / "keras.npz", x_key="x_test", y_key="y_train")
    (tmp_path / "fake.npz").write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="fake.npz is not an .npz archive"):
        load_dataset(tmp_path / "fake.npz")
    np.savez(tmp_path / "obj.npz", x=X, y=np.array([None] * 4, dtype=object))
    with pytest.raises(ValueError, match="obj.npz: .*pickle"):
        load_dataset(tmp_path / "obj.npz")


def test_load_dataset_from_a_csv(tmp_path):
    from rowstoch_fast.datasets import load_dataset

    (tmp_path / "plain.csv").write_text("0.5,1.5,1\n2.5,3.5,0\n4.0,5.0,1\n")
    X, y = load_dataset(tmp_path / "plain.csv")  # no header: the last column
    assert X.tolist() == [[0.5, 1.5], [2.5, 3.5], [4.0, 5.0]] and y.tolist() == [1, 0, 1] and y.dtype == np.int64
    X, y = load_dataset(tmp_path / "plain.csv", label_column=0)
    assert X.tolist() == [[1.5, 1.0], [3.5, 0.0], [5.0, 1.0]] and y.tolist() == [0.5, 2.5, 4.0]
    assert y.dtype == np.float64  # not whole numbers: a regression target
    (tmp_path / "head.csv").write_text("Label,a,b\n3,1,2\n4,5,6\n")
    X, y = load_dataset(tmp_path / "head.csv")  # the column named label (any case)
    assert X.tolist() == [[1, 2], [5, 6]] and y.tolist() == [3, 4]
    X, y = load_dataset(tmp_path / "head.csv", label_column="b")
    assert X.tolist() == [[3, 1], [4, 5]] and y.tolist() == [2, 6]
    X, y = load_dataset(tmp_path / "head.csv", label_column=-2)
    assert y.tolist() == [1, 5]
    (tmp_path / "semi.csv").write_text("1;2;0\n3;4;1\n")
    assert load_dataset(tmp_path / "semi.csv", delimiter=";")[1].tolist() == [0, 1]
    with gzip.open(tmp_path / "z.csv.gz", "wt") as f:
        f.write("f,target\n1,0\n2,1\n")
    X, y = load_dataset(tmp_path / "z.csv.gz")
    assert X.tolist() == [[1.0], [2.0]] and y.tolist() == [0, 1]
    (tmp_path / "table.txt").write_text("1,0\n2,1\n")
    assert load_dataset(tmp_path / "table.txt", format="csv")[1].tolist() == [0, 1]

    for name, kwargs, exc, match in (
            ("head.csv", dict(label_column="c"), ValueError, "head.csv has no column 'c'; its header: Label, a, b"),
            ("plain.csv", dict(label_column="b"), ValueError,
             "label_column='b' names a column but .*plain.csv has no header row"),
            ("plain.csv", dict(label_column=3), ValueError, "label_column = 3 is outside the 3 columns"),
            ("plain.csv", dict(label_column=1.0), TypeError, "label_column must be an integer"),
            # (helper 193: another format's option ignored; NaN and inf taken, which --data-file refuses)
            ("plain.csv", dict(x_key="H"), ValueError, "x_key is read from an .npz file; .*plain.csv is read as CSV")):
        with pytest.raises(exc, match=match):
            load_dataset(tmp_path / name, **kwargs)
    (tmp_path / "commented.csv").write_text("# a comment\n1,2,0\n#5,6,1\n7,8,1\n")  # ('#' starts a comment)
    assert load_dataset(tmp_path / "commented.csv")[1].tolist() == [0, 1]
    (tmp_path / "noted.csv").write_text("# made by hand\n\nf,label\n1,0\n2,1\n")  # (a comment and a blank line
    # above the header)
    X, y = load_dataset(tmp_path / "noted.csv")
    assert X.tolist() == [[1.0], [2.0]] and y.tolist() == [0, 1]
    (tmp_path / "gap.csv").write_text("1,2,0\nnan,3,1\n")  # (a missing value: NaN, imputed by the user; a
    # reviewer, helper 194, had its refusal block that)
    assert np.isnan(load_dataset(tmp_path / "gap.csv")[0][1, 0])
    for name, content, match in (
            ("words.csv", "a,b\n1,x\n2,3\n", "words.csv: .*'x'.*holds numbers only"),
            ("ragged.csv", "1,2,3\n4,5\n", "ragged.csv: "),
            ("one.csv", "1\n2\n", "one.csv has one column"),
            ("empty.csv", "", "empty.csv holds no samples"),
            ("header_only.csv", "a,label\n", "header_only.csv holds no samples"),
            ("short_header.csv", "a,label\n1,2,3\n", "its header names 2 columns, its rows hold 3"),
            ("broken.csv.gz", b"\x1f\x8b\x08\x00garbage", "broken.csv.gz cannot be read")):
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(ValueError, match=match):
            load_dataset(tmp_path / name)


def test_a_csv_with_a_byte_order_mark_or_a_gap_in_its_first_row_loses_no_sample(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte-order mark: the first row was taken for a header (its sample
    dropped; under a header the label column not found, another used as the labels); a gap in the first row
    (``1.0,,0``) also made it a "header", where a gap in a later row was refused."""
    from rowstoch_fast.datasets import load_dataset

    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf0.5,1.5,1\n2.5,3.5,0\n4.0,5.0,1\n")
    X, y = load_dataset(tmp_path / "bom.csv")
    assert X.tolist() == [[0.5, 1.5], [2.5, 3.5], [4.0, 5.0]] and y.tolist() == [1, 0, 1]
    (tmp_path / "bom_head.csv").write_bytes(b"\xef\xbb\xbflabel,f1,f2\n0,1,2\n1,3,4\n")
    X, y = load_dataset(tmp_path / "bom_head.csv")
    assert X.tolist() == [[1, 2], [3, 4]] and y.tolist() == [0, 1]
    assert load_dataset(tmp_path / "bom_head.csv", label_column="label")[1].tolist() == [0, 1]
    for content, where in (("1.0,,0\n2.0,3.0,1\n", "row 0"), ("1.0,NA,0\n2.0,3.0,1\n", "row 0")):
        (tmp_path / "gap.csv").write_text(content)
        # (NumPy < 1.23's loadtxt names no row: "could not convert string to float: ''")
        with pytest.raises(ValueError, match=f"gap.csv: could not convert string .*( at {where}|: '(NA)?' ).*none of "
                                             "them a number"):
            load_dataset(tmp_path / "gap.csv")


def test_load_dataset_from_a_libsvm_file(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    from rowstoch_fast.datasets import load_dataset

    (tmp_path / "a.svm").write_text("1 1:0.5 3:2\n-1 2:1.5\n1 1:1\n")
    X, y = load_dataset(tmp_path / "a.svm")
    assert X.tolist() == [[0.5, 0, 2], [0, 1.5, 0], [1, 0, 0]] and y.tolist() == [1, -1, 1] and y.dtype == np.int64
    (tmp_path / "a9a.t").write_text("0 1:1\n1 2:1\n")
    assert load_dataset(tmp_path / "a9a.t", format="libsvm")[0].shape == (2, 2)
    (tmp_path / "bad.libsvm").write_text("1 1:x\n")
    with pytest.raises(ValueError, match="bad.libsvm is not a LIBSVM / svmlight file"):
        load_dataset(tmp_path / "bad.libsvm")
    monkeypatch.setitem(__import__("sys").modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="needs scikit-learn: pip install scikit-learn"):
        load_dataset(tmp_path / "a.svm")


def test_load_dataset_names_a_missing_file_a_folder_and_an_unknown_format(tmp_path):
    from rowstoch_fast.datasets import load_dataset

    with pytest.raises(FileNotFoundError, match="data file .*nowhere.npz' does not exist"):
        load_dataset(tmp_path / "nowhere.npz")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset((tmp_path / "nowhere.npy", np.zeros(2)))
    with pytest.raises(IsADirectoryError, match="is a folder: give a file"):
        load_dataset(tmp_path)
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    with pytest.raises(ValueError, match="unknown extension '.parquet'; load_dataset reads .npz, .csv"):
        load_dataset(tmp_path / "data.parquet")
    (tmp_path / "noext").write_text("1,2\n")
    with pytest.raises(ValueError, match="unknown extension '\\(none\\)'"):
        load_dataset(tmp_path / "noext")
    with pytest.raises(ValueError, match="format must be 'npz', 'csv' or 'libsvm', got 'xlsx'"):
        load_dataset(tmp_path / "noext", format="xlsx")
    (tmp_path / "d.npz.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="compressed already"):
        load_dataset(tmp_path / "d.npz.gz")


class _Pairs:
    """A PyTorch-style dataset without PyTorch: ``__len__`` and ``__getitem__`` returning ``(sample, label)``."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def test_load_dataset_from_a_dataset_of_pairs():
    from rowstoch_fast.datasets import load_dataset

    rng = np.random.default_rng(0)
    images = rng.random((5, 1, 2, 2)).astype(np.float32)
    X, y = load_dataset(_Pairs([(images[i], i % 3) for i in range(5)]))
    assert X.shape == (5, 1, 2, 2) and X.dtype == np.float32 and y.tolist() == [0, 1, 2, 0, 1]
    X, _ = load_dataset(_Pairs([(images[i].tolist(), np.int64(1)) for i in range(5)]), flatten=True)
    assert X.shape == (5, 4)
    X, y = load_dataset([(np.ones(2), 0), (np.zeros(2), 1)])  # a list of pairs is a dataset too
    assert X.shape == (2, 2) and y.tolist() == [0, 1]
    with pytest.raises(TypeError, match=r"dataset\[1\] must be a \(sample, label\) pair, got a dict"):
        load_dataset(_Pairs([(np.ones(2), 0), {"x": 1}]))
    with pytest.raises(TypeError, match=r"dataset\[0\] must be a \(sample, label\) pair, got a tuple of 3 items"):
        load_dataset(_Pairs([(np.ones(2), 0, 1)]))
    with pytest.raises(ValueError, match=r"dataset\[1\] holds a sample of shape \(3,\), dataset\[0\] one of \(2,\)"):
        load_dataset(_Pairs([(np.ones(2), 0), (np.ones(3), 1)]))
    with pytest.raises(ValueError, match=r"dataset\[0\] has a label of shape \(2,\)"):
        load_dataset(_Pairs([(np.ones(2), [0, 1])]))
    with pytest.raises(ValueError, match="the _Pairs dataset holds no samples"):
        load_dataset(_Pairs([]))
    with pytest.raises(TypeError, match="the _Pairs dataset: the labels must be numeric"):
        load_dataset(_Pairs([(np.ones(2), "cat")]))
    with pytest.raises(TypeError, match="the features must be numeric"):
        load_dataset(_Pairs([("abc", 0)]))


def test_load_dataset_from_a_torch_dataset():
    torch = pytest.importorskip("torch")
    from torch.utils.data import Dataset, TensorDataset

    from rowstoch_fast.datasets import load_dataset

    X = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    X.requires_grad_(True)  # (converted through .detach())
    y = torch.tensor([0, 1, 1, 0])
    X2, y2 = load_dataset(TensorDataset(X, y))
    assert isinstance(X2, np.ndarray) and X2.dtype == np.float32 and X2.shape == (4, 3)
    assert y2.dtype == np.int64 and y2.tolist() == [0, 1, 1, 0]

    class Images(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.full((1, 2, 2), float(i)), i

    X3, y3 = load_dataset(Images(), flatten=True)
    assert X3.shape == (3, 4) and X3[2].tolist() == [2.0] * 4 and y3.tolist() == [0, 1, 2]


# ----------------------------------------------------------------- split_samples: the named splits
def test_the_named_splits_give_equal_nodes_and_the_label_skew_they_name():
    from rowstoch_fast.datasets import split_samples

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(1001, 3)), np.where(rng.random(1001) < 0.4, -1.0, 1.0)
    H, Y = split_samples(X, y, 8, "contiguous")
    np.testing.assert_array_equal(H, X[:1000])
    H, Y = split_samples(X, y, 8, "iid", seed=2)
    assert H.shape == (1000, 3) and len({tuple(r) for r in H}) == 1000 and set(map(tuple, H)) <= set(map(tuple, X))
    H, Y = split_samples(X, y, 8, "sorted")
    means = Y.reshape(8, -1).mean(axis=1)
    assert (np.abs(means) == 1).sum() == 7 and np.all(np.diff(means) >= 0)  # every node but one a single label
    np.testing.assert_array_equal(H[Y < 0], X[y < 0][:(Y < 0).sum()])  # (stable: the data's order within a label)
    H, Y = split_samples(X, y, 8, "classes:1", seed=1)
    assert set(np.abs(Y.reshape(8, -1).mean(axis=1))) == {1.0} and len(Y) % 8 == 0


@pytest.mark.parametrize("split,match", [("x", "split must be one of contiguous, iid, sorted, classes:K"),
                                         ("iid:2", "split must be one of"), ("classes", "split must be one of"),
                                         ("classes:a", "K must be an integer"), ("classes:3", "exceeds the 2 classes"),
                                         (3, "split must be one of")])
def test_a_bad_split_is_named(split, match):
    from rowstoch_fast.datasets import split_samples

    with pytest.raises((ValueError, TypeError), match=match):
        split_samples(np.zeros((10, 2)), np.repeat([-1.0, 1.0], 5), 2, split)


def test_the_digits_without_scikit_learn_say_where_they_come_from(monkeypatch):
    """After a plain install (scikit-learn is in the extras only) the digits ended in a bare "No module named
    'sklearn.datasets'"."""
    from rowstoch_fast.datasets import load_digits

    monkeypatch.setitem(__import__("sys").modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"the digits data set comes with scikit-learn: pip install scikit-learn"):
        load_digits()


def test_compressed_files_are_refused_before_they_fill_memory(tmp_path, monkeypatch):
    """A compressed file whose size does not bound what it holds (a zip or gzip "bomb": here 16 MB of zeros in a
    few kB) is refused, naming it, once what it holds cannot fit: before any member of an .npz is decompressed
    (the sizes its entries declare), as a CSV is read (the numbers so far), as an IDX file is read (the bytes
    so far); the same files load where memory allows, a large uncompressed CSV through the counted lines too."""
    from rowstoch_fast.datasets import load_dataset

    np.savez_compressed(tmp_path / "bomb.npz", x=np.zeros((10**6, 1)), y=np.zeros(10**6, np.int64))
    with gzip.open(tmp_path / "bomb.csv.gz", "wt") as f:
        f.write("0,0\n" * 10**6)
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write((0x803).to_bytes(4, "big") + b"".join(k.to_bytes(4, "big") for k in (20408, 28, 28)))
        f.write(bytes(20408 * 784))
    assert all(p.stat().st_size < 100_000 for p in tmp_path.iterdir())
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(4 << 20))
    with pytest.raises(MemoryError, match="the arrays x, y of .*bomb.npz needs about 15.3 MiB of memory but only "
                                          "4.0 MiB"):
        load_dataset(tmp_path / "bomb.npz")
    with pytest.raises(MemoryError, match="bomb.csv.gz holds at least 262,14[0-9] numbers \\(read so far\\), which "
                                          "need more than the 4.0 MiB of memory available"):
        load_dataset(tmp_path / "bomb.csv.gz")
    with pytest.raises(MemoryError, match="train-images-idx3-ubyte.gz \\(at least [0-9,]+ bytes decompressed\\) "
                                          "and its values as float32 needs about [0-9.]+ MiB"):
        from rowstoch_fast.datasets import _idx

        _idx(str(tmp_path / "train-images-idx3-ubyte.gz"), "images")
    plain = tmp_path / "plain.csv"  # (16 x its size past the limit: read through the counted lines, and it fits)
    plain.write_text("".join(f"{k / 7:.15f},{k % 2}\n" for k in range(20000)))
    X, y = load_dataset(plain)
    assert X.shape == (20000, 1) and y.tolist() == [k % 2 for k in range(20000)]
    monkeypatch.delenv("ROWSTOCH_MEMORY_LIMIT")
    np.testing.assert_array_equal(load_dataset(plain)[0], X)
    assert load_dataset(tmp_path / "bomb.npz")[0].shape == (10**6, 1)
    assert load_dataset(tmp_path / "bomb.csv.gz")[0].shape == (10**6, 1)


def test_a_dataset_too_large_for_memory_and_an_impossible_label_quantity_split_are_refused_at_once(monkeypatch):
    """Helper 204: a dataset of 10^9 samples was read item by item until the operating system killed the process
    (now refused from its len() and first item, before anything is gathered); label_quantity_split with more nodes
    than samples took time in proportion to n (8.8 s at 10^6) before refusing."""
    from rowstoch_fast.datasets import label_quantity_split, load_dataset

    class Huge:
        read = 0

        def __len__(self):
            return 10**9

        def __getitem__(self, i):
            Huge.read += 1
            assert Huge.read < 5, "read on: nothing checked the size first"
            return np.zeros(100), 0

    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2**30))
    with pytest.raises(MemoryError, match=r"the Huge dataset of 1,000,000,000 samples of shape \(100,\) \(float64\) "
                                          r"needs about 1\.\d TiB of memory but only 1\.0 GiB is available"):
        load_dataset(Huge())
    assert Huge.read == 1
    X, y = load_dataset(_Pairs([(np.ones(2), 0), (np.zeros(2), 1)]))  # (small: as before)
    assert X.shape == (2, 2) and y.tolist() == [0, 1]
    labels = np.repeat(np.arange(10), 20)
    with pytest.raises(ValueError, match=r"200 samples cannot give each of 100000 nodes 2 classes \(a sample of each: "
                                         r"n \* classes_per_node = 200000 samples at least\)"):
        label_quantity_split(labels, 10**5, 2)
    assert sum(map(len, label_quantity_split(labels, 10, 2, seed=0))) == 200


def test_the_loaders_name_what_they_cannot_read(tmp_path, monkeypatch):
    """Helper 204: a LIBSVM index of 1e11 met a bare OverflowError; rows of different lengths NumPy's
    "inhomogeneous shape"; a folder of None os.fspath's words; a file as CIFAR-10's folder "data_batch_1 not found
    in ..."; synthetic_cifar10(train=10**10) NumPy's "Unable to allocate 74.5 GiB"."""
    from rowstoch_fast.datasets import load_dataset, synthetic_cifar10

    if __import__("importlib").util.find_spec("sklearn") is not None:
        (tmp_path / "far.svm").write_text("1 100000000000:1\n0 1:2\n")
        with pytest.raises(ValueError, match="far.svm: a feature index is past what scikit-learn reads"):
            load_dataset(tmp_path / "far.svm")
    with pytest.raises(ValueError, match=r"\(X, y\): the features must be an array of one shape \(every row as "
                                         r"long\), got list"):
        load_dataset(([[1, 2], [3]], [0, 1]))
    for load, what in ((load_mnist, "MNIST"), (load_cifar10, "CIFAR-10")):
        with pytest.raises(TypeError, match=f"folder must be the path of {what}'s folder, got NoneType None"):
            load(None)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NotADirectoryError, match="CIFAR-10 folder .*notes.txt' is a file: give the folder of its "
                                                 "batches"):
        load_cifar10(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError, match="CIFAR-10 folder .*missing' does not exist"):
        load_cifar10(tmp_path / "missing")
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2**30))
    with pytest.raises(MemoryError, match=r"synthetic_cifar10\(train=10000000000, test=320\) \(images of 3 x 32 x "
                                          r"32\) needs about"):
        synthetic_cifar10(train=10**10)
    Xtr, ytr, Xte, yte = synthetic_cifar10(train=20, test=10)
    assert Xtr.shape == (20, 3, 32, 32) and yte.shape == (10,)
