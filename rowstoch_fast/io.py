"""Reading the files users bring: mixing matrices (.npz, .mtx, .npy, edge lists) and data sets (.npz).

Every reader validates what it reads by hand (SciPy and NumPy crash or hang on some malformed files) and raises
:class:`~rowstoch_fast.errors.UsageError` (a ValueError) naming the file and what is wrong with it; the command
line prints that as one line and exits with status 2.
"""

from __future__ import annotations

import inspect
import os
import re
import textwrap
import warnings

import numpy as np
import scipy.sparse as sp

from ._checks import (bounded_lines, check_bool, check_choice, check_coo_arrays, check_csr_arrays, file_kind,
                      load_npy_file, load_npz_file)
from ._files import (DAMAGED, TEXT_ENCODING, check_path, file_target, is_header, loadtxt_source, open_text,
                     open_text_for_writing, uncompressed_name)
from .errors import UsageError
from .mixing import as_matrix, MixingMatrix

__all__ = ["EDGE_LIST_HELP", "load_data_file", "load_matrix", "save_matrix"]

EDGE_LIST_HELP = (
    "edge list: a text file (compressed when its name ends in .gz, .bz2, .xz or .lzma), one edge per line, "
    "'src dst' or 'src dst weight', 0-based integer node ids "
    "separated by whitespace or by commas (CSV, one header line allowed), '#' starts a comment; src sends to dst "
    "(A[dst, src] > 0); n is the largest id + 1. "
    "Without weights the paper's in-degree rule is used and every node gets a self loop; with weights they "
    "are the entries A[dst, src] themselves (self loops as listed), each edge listed once; an edge listed twice "
    "without weights is one edge")


def _mmread(path):
    # SciPy's Matrix Market reader (1.12+) crashes the process on a NUL byte in the body (found: SciPy 1.17.1
    # writing float32 values with precision=17 pads them with NULs): refuse those files first
    with open(path, "rb") as f:
        offset = 0
        while chunk := f.read(1 << 20):
            if b"\0" in chunk:
                at = offset + chunk.index(b"\0")
                raise UsageError(f"matrix file {path!r} has a NUL byte at offset {at}: "
                                 "not a Matrix Market text file (damaged?)")
            offset += len(chunk)
    import scipy.io  # (here, not at import: 15 ms of every start)

    if "spmatrix" in inspect.signature(scipy.io.mmread).parameters:  # SciPy >= 1.12: ask for a sparse array
        return scipy.io.mmread(path, spmatrix=False)
    return scipy.io.mmread(path)


def _load_npz_matrix(path):
    """A scipy.sparse .npz (save_npz) read and validated by hand: SciPy itself crashes on a malformed one."""
    z = load_npz_file(path, "matrix file")
    fmt = z.get("format")
    fmt = fmt.item().decode("ascii", "replace") if isinstance(fmt, np.ndarray) and fmt.dtype.kind == "S" else str(fmt)
    if "shape" not in z or "data" not in z:
        raise UsageError(f"matrix file {path!r} is not a scipy.sparse .npz (save_npz): it lacks 'shape' or 'data'")
    stored = np.asarray(z["shape"])
    if stored.dtype.kind not in "iu":  # (a float shape [2.7, 2.2] had been cut to 2 nodes)
        said = stored.tolist() if stored.size <= 4 else f"{stored.size} values"
        raise UsageError(f"matrix file {path!r} has shape {said} of dtype {stored.dtype}: a scipy.sparse .npz "
                         "stores its shape as integers (damaged?)")
    shape = tuple(int(v) for v in stored.ravel())
    if len(shape) != 2 or min(shape) < 0:
        raise UsageError(f"matrix file {path!r} has shape {shape}; a mixing matrix is 2-D")
    data = np.asarray(z["data"])
    if fmt in ("csr", "csc"):
        rows, cols = shape if fmt == "csr" else shape[::-1]
        indptr, indices = z.get("indptr", np.zeros(0, np.int64)), z.get("indices", np.zeros(0, np.int64))
        check_csr_arrays(indptr, indices, rows, cols, f"matrix file {path!r}", data)
        return (sp.csr_array if fmt == "csr" else sp.csc_array)((data, indices, indptr), shape=shape)
    if fmt == "coo":
        row, col = z.get("row", np.zeros(0, np.int64)), z.get("col", np.zeros(0, np.int64))
        check_coo_arrays(row, col, shape, f"matrix file {path!r}", data)
        return sp.coo_array((data, (row, col)), shape=shape)
    raise UsageError(f"matrix file {path!r} has sparse format {fmt!r}; save it as CSR, CSC or COO")


def _edge_list_layout(path):
    """(delimiter, lines to skip, columns) of an edge list: commas when its first line of data has one, and that
    line skipped when it is a header (no number in it: ``src,dst,weight``; :func:`~rowstoch_fast._files.
    is_header`); the columns of that first line."""
    with open_text(path, errors="replace") as f:
        for number, line in enumerate(_edge_lines(f, path)):
            data = line.split("#", 1)[0].strip()
            if not data:
                continue
            delimiter = "," if "," in data else None
            tokens = data.split(delimiter)
            header = delimiter is not None and is_header(tokens)  # (whitespace-separated: no header, an error)
            return delimiter, number + 1 if header else 0, len(tokens)
    return None, 0, 0


#: The longest line of an edge list read (``src dst weight`` and a comment take far fewer characters).
MAX_EDGE_LINE = 2**20


def _edge_lines(f, path):
    """The lines of the open edge list ``f`` (the file ``path``), a UsageError naming it for one longer than
    :data:`MAX_EDGE_LINE` characters (a file of NUL bytes had been read whole as its first line: an OOM kill,
    helper 218)."""
    return bounded_lines(f, f"edge list {path!r}", MAX_EDGE_LINE, UsageError)


def _extension(path):
    """``".npz"``, ``".mtx"`` or ``".npy"`` where ``path``'s name ends so, in any case (``m.NPY``: it had been written
    as an edge list, which np.load then failed to read), else ``""`` (an edge list)."""
    end = os.path.splitext(os.fspath(path))[1].lower()
    return end if end in (".npz", ".mtx", ".npy") else ""


def weights_said(path, normalize=False):
    """How :func:`load_matrix` makes the weights of the matrix in ``path``, in a caption's words: ``"the file's
    weights"`` (``", rows normalized"`` with ``normalize``), or ``"in-degree weights"`` for an edge list that
    lists no weights (``src dst``), whose weights it makes."""
    try:
        if not _extension(path) and _edge_list_layout(path)[2] == 2:
            return "in-degree weights: the file lists none"
    except (OSError, *DAMAGED):  # (read once already: gone or damaged since, its words are the general ones)
        pass
    return "the file's weights" + (", rows normalized" if normalize else "")


#: Node ids of an edge list are below this (int64 keys ``dst * n + src`` are formed from them).
MAX_NODE_ID = 2**62


def _load_edge_list(path, normalize, dtype=np.float64, stochastic="row"):
    delimiter, header, _ = _edge_list_layout(path)  # (its UsageError as it is)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            rows = np.loadtxt(loadtxt_source(path, delimiter), ndmin=2, comments="#", delimiter=delimiter,
                              skiprows=header, encoding=TEXT_ENCODING)
    except ValueError as exc:  # (NumPy's advice to pass `usecols` is loadtxt's, not the user's: helper 189)
        said = re.sub(r"; use `usecols` to select a subset and avoid this error",
                      ": every line must list the same columns", str(exc)).rstrip(".")
        raise UsageError(f"edge list {path!r} cannot be read: {said}. Expected: {EDGE_LIST_HELP}") from None
    if rows.size == 0:
        raise UsageError(f"edge list {path!r} holds no edges")
    ids = rows[:, :2]
    with np.errstate(invalid="ignore"):
        off = (~np.isfinite(ids) | (ids != np.round(ids)) | (ids < 0)).any(axis=1)
    dense = (f"; a dense {rows.shape[0]} x {rows.shape[1]} matrix? save it as .npy (numpy.save), .mtx or .npz, "
             "which load_matrix reads as matrices" if rows.shape[0] == rows.shape[1] > 1
             and (rows.shape[1] > 3 or off.sum() > 1) else "")  # (helper 189: a 3 x 3 matrix in .csv read "edge 0
    # (0.5 0.5) is not a pair of ... node ids", a 4 x 4 one "got 4 columns"; not asked of a 3-edge list with one
    # typo, helper 190)
    if rows.shape[1] not in (2, 3):
        raise UsageError(f"edge list {path!r} must have 2 or 3 columns (src dst [weight]), got {rows.shape[1]}{dense}")
    edges = rows[:, :2]
    with np.errstate(invalid="ignore"):  # (ids past int64, 1e300, had been cast with NumPy's warning to node
        # -9223372036854775808)
        wrong = ~np.isfinite(edges).all(1) | (edges != np.round(edges)).any(1) | (edges < 0).any(1) | \
            (edges >= MAX_NODE_ID).any(1)
    if wrong.any():
        bad = int(np.flatnonzero(wrong)[0])
        line = _data_line_numbers(path, {bad}).get(bad)
        where = f"edge list {path!r}{f', line {line}' if line else ''}: edge {bad} ({rows[bad, 0]:g} {rows[bad, 1]:g})"
        if np.isfinite(rows[bad, :2]).all() and (rows[bad, :2] >= MAX_NODE_ID).any():
            raise UsageError(f"{where} names node {rows[bad, :2].max():g}, past the largest node id an edge list "
                             f"takes (2^{MAX_NODE_ID.bit_length() - 1} - 1)")
        raise UsageError(f"{where} is not a pair of non-negative integer node ids (0-based){dense}")
    edges = edges.astype(np.int64)
    if edges.min() > 0:  # (node 0 in no edge: isolated, and a 1-based list was refused as "not strongly connected")
        raise UsageError(f"edge list {path!r}: node 0 appears in no edge, the smallest id is {int(edges.min())}: node "
                         "ids are 0-based (a 1-based list: subtract 1 from every id)")
    n = int(edges.max()) + 1
    if rows.shape[1] == 3:
        _refuse_repeated_weights(path, edges)
    if rows.shape[1] == 2:
        return MixingMatrix.from_edges(n, edges, "in-degree", stochastic=stochastic)
    return MixingMatrix.from_edges(n, edges, rows[:, 2].astype(dtype), self_loops=False, normalize=normalize,
                                   dtype=dtype, stochastic=stochastic)


def _data_line_numbers(path, rows):
    """``{row: its line in the file (1-based)}`` for the data rows ``rows`` of an edge list (0-based, as read:
    comments, blank lines and a header line skipped)."""
    _, header, _ = _edge_list_layout(path)
    out, k = {}, -1
    with open_text(path, errors="replace") as f:
        for number, line in enumerate(_edge_lines(f, path), start=1):
            if number <= header or not line.split("#", 1)[0].strip():
                continue
            k += 1
            if k in rows:
                out[k] = number
                if len(out) == len(rows):
                    break
    return out


def _refuse_repeated_weights(path, edges):
    """Refuse a weighted edge list that lists an edge twice: its weights would be added (what SciPy does with a
    repeated entry), a row of weights written to sum to 1 would then not, or, normalized, be a different matrix
    than written, without a word (a file concatenated from two was read so)."""
    order = np.lexsort((edges[:, 0], edges[:, 1]))
    ordered = edges[order]
    same = np.flatnonzero((ordered[1:] == ordered[:-1]).all(axis=1))
    if same.size:
        src, dst = ordered[same[0]]
        where = np.flatnonzero((edges == ordered[same[0]]).all(axis=1))
        lines = _data_line_numbers(path, set(where[:4].tolist()))  # (the file's lines, not the rows' indices)
        raise UsageError(f"edge list {path!r}: the edge {src} -> {dst} is listed {where.size} times (lines "
                         f"{', '.join(str(lines.get(k, '?')) for k in where[:4])}{', ...' if where.size > 4 else ''}"
                         f"{f'; {same.size} repeats in all' if same.size > 1 else ''}): with weights, list each "
                         "edge once (the weights of a repeated edge would be added)")


_FORMATS = """
    The format follows the file's extension:

    ``.npz``
        A SciPy sparse matrix as written by ``scipy.sparse.save_npz`` (CSR, CSC or COO).
    ``.mtx``
        Matrix Market (``scipy.io.mmwrite``).
    ``.npy``
        A dense ``n x n`` NumPy array (``numpy.save``).
    anything else (``.txt``, ``.csv``, ``.edges``, ...)
""" + textwrap.fill("An " + EDGE_LIST_HELP + ".", width=116, initial_indent=" " * 8, subsequent_indent=" " * 8)


def load_matrix(path, normalize=False, dtype=np.float64, stochastic="row"):
    """Read a mixing matrix from .npz (scipy sparse), .mtx (Matrix Market), .npy (dense) or an edge list.

    Parameters
    ----------
    path : str or path-like
        The file; its extension names the format (below).
    normalize : bool, default False
        Divide each row by its sum; otherwise rows must already sum to 1.
    dtype : {float64, float32}, default float64
        The matrix's value type. ``float32`` reads the weights as float32
        values, whose sums are 1 to float32's precision (what
        :func:`save_matrix` writes for a float32 matrix in a text format).
    stochastic : {"row", "column"}, default "row"
        ``"column"`` reads a column-stochastic matrix (a push method's C, what
        ``save_matrix`` writes of one); its columns must sum to 1
        (``normalize`` rescales columns, and a two-column edge list takes the
        out-degree rule).

    Returns
    -------
    MixingMatrix
        Validated (Assumption 1 of the paper).

    Raises
    ------
    UsageError
        (a ValueError) naming the file and what is wrong with it.

    Notes
    -----
    FORMATS

    Examples
    --------
    >>> import os, tempfile
    >>> from rowstoch_fast import io, topology
    >>> path = os.path.join(tempfile.mkdtemp(), "ring.txt")
    >>> io.save_matrix(path, topology.ring(4))
    >>> io.load_matrix(path)
    MixingMatrix(n=4, nnz=8, dtype=float64)
    """
    path = check_path(path)
    if not os.path.exists(path):
        raise UsageError(f"matrix file {path!r} does not exist")
    if file_kind(path) is not None:  # (a folder: the OS's "[Errno 21] Is a directory"; a FIFO: a read that blocked)
        raise UsageError(f"matrix file {path!r} is {file_kind(path)}: give a matrix file's path")
    normalize = check_bool(normalize, "normalize")  # (a string "False" had normalized)
    check_choice(stochastic, "stochastic", ("row", "column"),
                 f"stochastic must be 'row' or 'column', got {stochastic!r}")
    try:
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        kind = _extension(path)
        if kind == ".npz":
            W = _load_npz_matrix(path)
        elif kind == ".mtx":
            W = _mmread(path)
        elif kind == ".npy":
            W = load_npy_file(path, "matrix file")
        else:
            return _load_edge_list(path, normalize, dtype, stochastic)
        if dtype == np.float32 and np.dtype(W.dtype).kind == "f":
            W = W.astype(np.float32)  # (float32 weights: their sums are checked to float32's precision)
        return MixingMatrix(W, normalize=normalize, dtype=dtype, stochastic=stochastic)
    except UsageError:
        raise
    except (ValueError, TypeError, OSError, IndexError, *DAMAGED) as exc:
        msg = f"{type(exc).__name__}: {exc}" if isinstance(exc, DAMAGED) else str(exc)  # (a truncated .gz: a traceback)
        if "row-stochastic" in msg:
            msg = msg.replace("pass normalize=True", "pass normalize=True (--normalize)")
        raise UsageError(f"cannot use matrix file {path!r}: {msg}") from None




load_matrix.__doc__ = load_matrix.__doc__.replace("    FORMATS\n", _FORMATS.lstrip("\n") + "\n")


def save_matrix(path, A):
    """Write a mixing matrix in the format :func:`load_matrix` reads back, chosen by the extension of ``path``.

    Parameters
    ----------
    path : str or path-like
        ``.npz``, ``.mtx``, ``.npy`` or an edge list (any other extension; written with weights, ``src dst
        weight`` per line, so that :func:`load_matrix` reads the same entries back).
    A : MixingMatrix or anything ``MixingMatrix`` accepts

    Notes
    -----
    A float32 matrix is written with its float32 values exactly: read a text format back with
    ``load_matrix(path, dtype=np.float32)`` (their sums are 1 to float32's precision, not float64's).

    FORMATS
    """
    path = file_target(path)  # (a FIFO had blocked the write for good, a device been written to; through a link,
    # helper 222)
    A = as_matrix(A)
    csr = A.csr
    kind = _extension(path)
    if kind == ".npz":
        with open(path, "wb") as fh:  # (a handle: NumPy appends ".npz" to a name ending ".NPZ")
            sp.save_npz(fh, sp.csr_array(csr), compressed=True)
    elif kind == ".mtx":
        # float64 values, 17 digits: read back exactly (SciPy 1.17 writes float32 values at precision 17 as
        # garbage padded with NUL bytes)
        import scipy.io

        with open(path, "wb") as fh:  # (a handle: SciPy appends ".mtx" to a name ending ".MTX")
            scipy.io.mmwrite(fh, sp.coo_array(csr, dtype=np.float64), precision=17)
    elif kind == ".npy":
        with open(path, "wb") as fh:
            np.save(fh, A.toarray())
    else:
        coo = sp.coo_array(csr)
        sep = "," if uncompressed_name(path).endswith(".csv") else " "
        with open_text_for_writing(path) as f:  # (compressed where its name says so, as load_matrix reads it)
            f.write(f"# {A!r}: src{sep}dst{sep}weight (src sends to dst, A[dst, src] = weight)\n")
            for i, j, w in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist()):
                f.write(f"{j}{sep}{i}{sep}{w!r}\n")


save_matrix.__doc__ = save_matrix.__doc__.replace("    FORMATS\n", _FORMATS.lstrip("\n") + "\n")


#: The objectives :func:`load_data_file` reads a data file for (``rowstoch``'s ``--objective``).
DATA_OBJECTIVES = ("logistic", "logistic-l2", "least-squares", "lasso", "quadratic")


def load_data_file(path, objective, option="--data-file", test=False):
    """``(H, y)`` of ``--data-file``: an .npz archive with a 2-D ``H`` (one sample per row) and a 1-D ``y`` (labels
    -1 / +1 for the logistic problems); with ``test``, ``(H, y, test_data, unread)``: ``(H_test, y_test)`` where
    the archive holds them (a held-out test set, as ``H`` and ``y``; one without the other is refused), else None,
    and the names of its other arrays, which are not read (the caller says so: helper 193's ``H_test`` and
    ``y_test`` had been ignored without a word). ``objective``: one of :data:`DATA_OBJECTIVES` (the logistic
    ones check the labels)."""
    check_choice(objective, "objective", DATA_OBJECTIVES)  # (None had met an AttributeError, and a misspelt
    # "logstic" skipped the check of the labels)
    try:
        data = load_npz_file(path, option)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    missing = [k for k in ("H", "y") if k not in data]
    if missing:
        raise UsageError(f"{option} {path!r} has no array {' or '.join(missing)} (it needs H, one sample per "
                         f"row, and y, one target per row; it holds {', '.join(sorted(data)) or 'nothing'})")
    H, y = data["H"], data["y"]
    if H.ndim != 2 or y.ndim != 1 or len(H) != len(y):
        raise UsageError(f"{option} {path!r}: H must be 2-D and y 1-D with one entry per row of H, got shapes "
                         f"{H.shape} and {y.shape}")
    if objective.startswith("logistic") and not np.isin(y, (-1, 1)).all():
        raise UsageError(f"{option} {path!r}: --objective {objective} needs labels y in {{-1, +1}}")
    half = [k for k in ("H_test", "y_test") if (k in data) != ("H_test" in data and "y_test" in data)]
    if half:
        raise UsageError(f"{option} {path!r} holds {half[0]} without {'y_test' if half[0] == 'H_test' else 'H_test'}:"
                         " a held-out test set is both or neither")
    unread = sorted(set(data) - {"H", "y", "H_test", "y_test"})  # (said by the caller: a file may keep its
    # feature names beside the data, helper 194)
    if not test:
        return H, y
    if "H_test" not in data:
        return H, y, None, unread
    H_test, y_test = data["H_test"], data["y_test"]
    if H_test.ndim != 2 or y_test.ndim != 1 or len(H_test) != len(y_test) or H_test.shape[1] != H.shape[1]:
        raise UsageError(f"{option} {path!r}: H_test must be 2-D with H's {H.shape[1]} columns and y_test 1-D with "
                         f"one entry per row of it, got shapes {H_test.shape} and {y_test.shape}")
    if objective.startswith("logistic") and not np.isin(y_test, (-1, 1)).all():
        raise UsageError(f"{option} {path!r}: --objective {objective} needs test labels y_test in {{-1, +1}}")
    return H, y, (H_test, y_test), unread
