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
                                         "(builtins|io).open"):
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
        np.testing.assert_array_equal(Ytr, ytr) and np.testing.assert_array_equal(Yte, yte)
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
