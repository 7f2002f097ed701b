"""The row-stochastic mixing matrix A of a directed network (Assumption 1 of the paper)."""

from __future__ import annotations

import re
import threading
import warnings

import numpy as np
import scipy.sparse as sp

from . import _core
from ._checks import (MAX_ROUNDS, as_array, as_float_array, caller_outside, check_bool, check_choice,
                      check_coo_arrays, check_csr_arrays, check_dtype, check_int, check_out, check_positive_float,
                      fmt_value, require_memory)
from ._device import device_operations, is_device_array
from ._hashing import MAX_T
from .metrics import compute_metrics, perron_vector

__all__ = ["MixingMatrix", "STOCHASTIC", "as_matrix", "metropolis_weights", "out_degree_weights"]

#: The two kinds of mixing matrix: ``"row"`` (rows sum to 1, a node weights what it receives; the paper's A)
#: and ``"column"`` (columns sum to 1, a node splits what it sends; push-sum's C).
STOCHASTIC = ("row", "column")

#: Row sums must equal 1 to this relative tolerance.
ROW_SUM_RTOL = 1e-12
#: The same for weights written in float32 (a matrix of that dtype, or a float32 array or sparse matrix): sums of
#: float32 weights are 1 to within a few of its ulps (1.2e-7), not float64's.
ROW_SUM_RTOL_FLOAT32 = 1e-6
#: Peak bytes per stored weight while a matrix is built and validated (COO/CSR copies, int64 and float64
#: intermediates; measured ~125 for the exponential graph at n = 2^20), for the memory guard.
BUILD_BYTES_PER_ENTRY = 140
#: The same for the degree rule (``from_edges(..., "in-degree")`` and the topology builders): sorted int64 keys,
#: then the CSR, then the validation's transposed copy.
DEGREE_BUILD_BYTES_PER_ENTRY = 48


class MixingMatrix:
    """A validated row-stochastic (or column-stochastic) mixing matrix on ``n`` nodes.

    ``A[i, j] > 0`` means node ``j`` sends to node ``i`` (row ``i`` weights what
    node ``i`` receives from its in-neighbours), as in Section 2 of the paper.
    The matrix must be square, finite, non-negative, row-stochastic, strongly
    connected and primitive (Assumption 1). A missing self loop is allowed,
    but :meth:`metrics` reports it, since Assumption 4 (bounded diagonals of
    ``A^k``) then fails.

    Parameters
    ----------
    W : array_like, scipy.sparse matrix, networkx graph or MixingMatrix
        The weights, dense or sparse, ``n x n``. A networkx graph (directed or
        undirected; nodes numbered in ``G.nodes`` order, an edge ``u -> v``
        meaning ``u`` sends to ``v``, an undirected edge both ways): with a
        ``"weight"`` attribute on its edges, those are the entries
        ``A[v, u]`` (self loops as listed; ``normalize=True`` rescales rows),
        without weights the paper's in-degree rule with a self loop at every
        node (:meth:`from_networkx` offers the other rules).
    normalize : bool, default False
        Divide each row by its sum first, turning raw non-negative weights into
        a row-stochastic matrix.
    dtype : {float64, float32}, default float64
        Value type of the stored matrix and of the arrays it mixes. Weights
        written in float32 (a float32 array, sparse matrix or MixingMatrix)
        have their sums checked at float32's tolerance; stored as float64
        they are then rescaled in float64 so that each row (column for
        ``stochastic="column"``) sums to 1 to float64's rounding, as float64
        weights must (a doubly stochastic ``W`` is kept as given). Pass
        ``dtype=np.float32`` to mix in float32 with the weights as they are.
    validate : bool, default True
        Check strong connectivity and primitivity (O(nnz)). Sign, finiteness
        and row sums are always checked.
    stochastic : {"row", "column", "doubly"}, default "row"
        ``"row"``: rows sum to 1 (``A``, what the Pull-Diag family mixes with).
        ``"column"``: columns sum to 1 (``C``, what push-sum, Push-Pull,
        Push-DIGing and SGP mix with); ``normalize`` then rescales columns,
        and :attr:`pi` is the right Perron vector, ``C pi = pi``.
        ``"doubly"``: rows and columns sum to 1 (``W``, what the methods of
        undirected graphs mix with: DGD, EXTRA, NIDS, ...), both checked;
        ``normalize`` is refused (it cannot make both sum to 1).

    Raises
    ------
    TypeError
        If ``W`` is not numeric or ``dtype`` is not a float type.
    ValueError
        If ``W`` breaks Assumption 1; the message names the first offending
        row or node.

    Notes
    -----
    A ``MixingMatrix`` is immutable: its CSR arrays (:attr:`csr`) are
    read-only and cannot be made writeable, so the kernels can read them
    without the GIL. Mixing, metrics and trackers may be used from several
    threads at once; metrics and trackers are computed once per matrix.

    It behaves as the sparse matrix it is where NumPy and SciPy users expect
    it to: ``A @ X`` mixes (:meth:`mix`; a CuPy ``X`` on its GPU, a SciPy
    sparse ``X`` gives a sparse product), ``X @ A`` multiplies from the
    left, and :attr:`shape`, :attr:`nnz`, ``len(A)``, :meth:`tocsr` and
    :meth:`toarray` are those of the matrix (``A.toarray()`` is the dense
    copy: a sparse matrix is never made dense behind the user's back).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import MixingMatrix
    >>> A = MixingMatrix([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    >>> A.shape, A.nnz
    ((3, 3), 6)
    >>> A @ np.array([1.0, 2.0, 3.0])
    array([1.5, 2.5, 2. ])
    >>> import networkx as nx
    >>> MixingMatrix(nx.cycle_graph(4, create_using=nx.DiGraph))
    MixingMatrix(n=4, nnz=8, dtype=float64)
    """

    # NumPy defers ``ndarray @ A`` to :meth:`__rmatmul__` instead of turning ``A`` into an object array
    __array_ufunc__ = None

    def __init__(self, W, *, normalize=False, dtype=np.float64, validate=True, stochastic="row"):
        dtype = check_dtype(dtype)
        normalize = check_bool(normalize, "normalize")  # (a string "False" had normalized)
        validate = check_bool(validate, "validate")
        check_choice(stochastic, "stochastic", STOCHASTIC + ("doubly",),
                     f"stochastic must be 'row', 'column' or 'doubly', got {stochastic!r}")
        doubly = stochastic == "doubly" or (isinstance(W, MixingMatrix) and W.doubly and stochastic == "row")
        if stochastic == "doubly":
            if normalize:
                raise ValueError("normalize=True rescales rows or columns, not both: it cannot make W doubly "
                                 "stochastic (build one with weights='metropolis' from an undirected graph)")
            stochastic = "row"
        source = np.dtype(np.float64)  # the precision the weights were written in (their sums' tolerance)
        if _is_networkx(W):
            W = _networkx_weights(W, dtype)
        if isinstance(W, MixingMatrix):
            csr = W._csr.astype(np.float64)
            source = W.dtype
        elif sp.issparse(W):
            _check_sparse_structure(W)
            n = W.shape[0]
            if W.shape[1] != n:  # (before the conversion: a header of 2e9 x 1999999999 had made arrays of n)
                raise ValueError(f"W must be square, got shape {W.shape}")
            if W.nnz < n:  # (before any array of n: a Matrix Market header of 2e9 x 2e9 over
                # three entries had been converted, 23 GB, until the process was killed)
                coo = W.tocoo()  # (arrays of nnz: the first empty one found without any of n)
                held = np.unique(coo.row if stochastic == "row" else coo.col)
                gaps = np.flatnonzero(held != np.arange(len(held)))
                empty = int(gaps[0]) if len(gaps) else len(held)
                kind = "doubly" if doubly else stochastic
                raise ValueError(f"W has {W.nnz} stored entries for its {n} {stochastic}s: {stochastic} {empty} has "
                                 f"none, and every {stochastic} of a {kind}-stochastic matrix needs one (its "
                                 "weights sum to 1)")
            require_memory(W.nnz * BUILD_BYTES_PER_ENTRY, f"validating a {n} x {W.shape[1]} matrix with {W.nnz} "
                           "entries")  # (at least n of them: the arrays of n are counted)
            source = np.dtype(W.dtype) if W.dtype == np.float32 else source
            csr = sp.csr_array(W, dtype=np.float64, copy=True)
        else:
            try:
                arr = as_array(W)
            except ValueError as exc:  # (a ragged list of rows: NumPy's "inhomogeneous shape" named no argument)
                try:
                    lengths = sorted({len(row) for row in W})
                except TypeError:  # (a row without a length: a number beside lists)
                    lengths = []
                raise ValueError(f"W must be a square matrix: its rows have different lengths ({lengths})"
                                 if len(lengths) > 1 else "W must be a 2-D array of numbers: an entry of it is a "
                                 "sequence" if lengths else f"W must be a square matrix of numbers, its rows of "
                                 f"equal length: {exc}") from None
            if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
                raise TypeError(f"W must be a numeric array or scipy sparse matrix, got dtype {arr.dtype}")
            if np.iscomplexobj(arr):
                raise TypeError(f"W must be real, got complex dtype {arr.dtype}")
            if arr.ndim != 2:
                raise ValueError(f"W must be 2-D, got {arr.ndim}-D with shape {arr.shape}")
            source = arr.dtype if arr.dtype == np.float32 else source
            csr = sp.csr_array(arr.astype(np.float64))
        if csr.shape[0] != csr.shape[1]:
            raise ValueError(f"W must be square, got shape {csr.shape}")
        if csr.shape[0] == 0:
            raise ValueError("W must have at least one node, got shape (0, 0)")
        csr.sum_duplicates()
        _check_entries(csr)
        csr.eliminate_zeros()
        csr.sort_indices()
        axis = 1 if stochastic == "row" else 0
        if normalize:
            with np.errstate(over="ignore"):
                sums = np.asarray(csr.sum(axis=axis)).ravel()
            empty = np.flatnonzero(sums <= 0)
            if empty.size:
                raise ValueError(f"cannot normalize: {stochastic} {empty[0]} (node {empty[0]}) has no positive weight")
            huge = np.flatnonzero(~np.isfinite(sums))
            if huge.size:  # (weights of 1e308: their sum overflowed, every weight became 0 after NumPy's warnings,
                # and the refusal said "pass normalize=True", which was given, helper 185)
                raise ValueError(f"cannot normalize: the weights of {stochastic} {huge[0]} sum past the largest float "
                                 f"({np.max(csr.data):.3g} the largest weight): rescale them")
            _divide_by_sums(csr, sums, axis)
        rtol = ROW_SUM_RTOL if source != np.float32 else ROW_SUM_RTOL_FLOAT32
        _check_sums(csr, stochastic, doubly, rtol)
        if doubly:
            _check_sums(csr, "column", doubly, rtol)
        elif source == np.float32 and dtype != np.float32 and not normalize:
            # float32 weights run in float64: their sums, 1 to float32's rounding only (3.7e-8 off), are made 1 to
            # float64's as a float64 matrix's must be (they had been used as they were: gossip drifted off pi^T z)
            _divide_by_sums(csr, np.asarray(csr.sum(axis=axis)).ravel(), axis)
        if validate:
            _check_primitive(csr, dtype)
        self._csr = _freeze(_compact_indices(csr.astype(dtype)))
        self._stochastic = stochastic
        self._doubly = doubly
        self._init_caches()

    def _as_kind(self, kind, name="A"):
        """This matrix as a ``kind``-stochastic one (:func:`require_stochastic`): what a module that cannot import
        this one (the trackers) calls on the matrix it is given."""
        return require_stochastic(self, kind, name)

    @classmethod
    def _from_valid_csr(cls, indptr, indices, data, n, stochastic="row", doubly=False):
        """A matrix from CSR arrays that a builder made valid by construction (sorted, no duplicates, rows summing
        to 1, strongly connected and primitive): no O(nnz) re-validation. :mod:`topology` calls it (its tests
        compare every such builder with the validated path), and :mod:`network` for the matrices of single
        gossip rounds, which need not be connected on their own (or, under loss, column-stochastic)."""
        A = cls.__new__(cls)
        A._csr = _freeze(sp.csr_array((data, indices, indptr), shape=(n, n), copy=False))
        A._stochastic = stochastic
        A._doubly = bool(doubly)
        A._init_caches()
        return A

    def _init_caches(self):
        self._metrics = None
        self._pi = None
        self._diag_cache = {}
        self._row_view = None  # a column-stochastic C's metrics are those of the row-stochastic C^T
        # one lock per matrix: metrics and exact trackers are built once, even when asked from several threads
        self._cache_lock = threading.RLock()

    def __getstate__(self):
        c = self._csr
        return {"shape": c.shape, "data": c.data, "indices": c.indices, "indptr": c.indptr,
                "stochastic": self._stochastic, "doubly": self._doubly}

    def __setstate__(self, state):
        # an unpickled matrix was validated when first built; its arrays are frozen again
        self._csr = _freeze(sp.csr_array((state["data"], state["indices"], state["indptr"]), shape=state["shape"]))
        self._stochastic = state.get("stochastic", "row")
        self._doubly = bool(state.get("doubly", False))
        self._init_caches()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edges(cls, n, edges, weights="in-degree", *, self_loops=True, normalize=None,
                   dtype=np.float64, validate=True, stochastic="row"):
        """Build ``A`` from a list of directed edges.

        Parameters
        ----------
        n : int
            Number of nodes.
        edges : array_like of shape (m, 2)
            Edge ``(j, i)`` means node ``j`` sends to node ``i``, i.e. ``A[i, j] > 0``.
            Duplicates are merged (raw weights added; under ``"in-degree"`` and
            ``"uniform"`` an edge counts once); ``(i, i)`` is a self loop.
        weights : "in-degree", "uniform" or array_like of shape (m,)
            ``"in-degree"`` (the paper's rule, Section 2.1) sets
            ``a_ij = 1 / (1 + d_i^in)`` over the in-neighbours and the self loop;
            ``"uniform"`` is the same rule written as raw ones and normalised;
            an array gives raw non-negative weights per edge (normalised unless
            ``normalize=False``).
        self_loops : bool, default True
            Add a self loop (weight 1 before normalisation) at every node that
            has none; self loops given in ``edges`` keep their weights.
        normalize : bool, optional
            Defaults to True for raw weights; ignored for ``"in-degree"``.
        dtype, validate
            As in :class:`MixingMatrix`.
            With ``"in-degree"``/``"uniform"`` the CSR is written directly from one
            sorted int64 key per edge: O(m log m) time, ~30 bytes per edge
            (1e8 edges in ~20 s); raw weights go through a SciPy COO matrix.
        stochastic : {"row", "column"}, default "row"
            ``"column"`` normalises columns instead: ``"in-degree"`` then becomes the
            out-degree rule (sender ``j`` gives ``1 / (1 + d_j^out)`` to each receiver).

        Examples
        --------
        >>> A = MixingMatrix.from_edges(3, [(0, 1), (1, 2), (2, 0)])
        >>> A.toarray()
        array([[0.5, 0. , 0.5],
               [0.5, 0.5, 0. ],
               [0. , 0.5, 0.5]])
        """
        n = check_int(n, "n", minimum=1)
        e = np.asarray(edges)
        per_entry = DEGREE_BUILD_BYTES_PER_ENTRY if isinstance(weights, str) else BUILD_BYTES_PER_ENTRY
        require_memory((e.size // 2 + n) * per_entry,
                       f"building a network of n = {n} nodes and {e.size // 2} edges",
                       "check n (a node id in the edge list sets n to the largest id + 1)")
        if e.size == 0:
            e = np.zeros((0, 2), dtype=np.int64)
        if e.ndim != 2 or e.shape[1] != 2:
            raise ValueError(f"edges must have shape (m, 2), got {e.shape}")
        if not np.issubdtype(e.dtype, np.integer):
            raise TypeError(f"edges must hold integer node ids, got dtype {e.dtype}")
        bad = np.flatnonzero((e < 0).any(axis=1) | (e >= n).any(axis=1))
        if bad.size:
            raise ValueError(f"edges[{bad[0]}] = {tuple(int(v) for v in e[bad[0]])} names a node outside 0..{n - 1}")
        e = e.astype(np.int64, copy=False)  # (ids in 0..n - 1: uint64 ones had failed in the keys' int64 sums)
        if isinstance(weights, str):
            if weights not in ("in-degree", "uniform"):
                raise ValueError(f"weights must be 'in-degree', 'uniform' or an array, got {weights!r}")
            check_choice(stochastic, "stochastic", STOCHASTIC,
                         f"stochastic must be 'row' or 'column', got {stochastic!r}")
            validate, self_loops = check_bool(validate, "validate"), check_bool(self_loops, "self_loops")
            if normalize is not None:  # (ignored here, but checked: normalize='x' had passed, helper 185)
                check_bool(normalize, "normalize")
            indptr, indices, data = _degree_weighted_csr(n, e[:, 0], e[:, 1], self_loops, stochastic)
            csr = sp.csr_array((data, indices, indptr), shape=(n, n), copy=False)
            if validate:
                _check_primitive(csr)
            return cls._from_valid_csr(indptr, indices, data.astype(check_dtype(dtype), copy=False), n, stochastic)
        src, dst = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
        # (float32 weights stay float32: their sums are checked to float32's precision)
        w = as_float_array(weights, "weights", np.float32 if getattr(weights, "dtype", None) == np.float32
                           else np.float64, ndim=1)
        if w.shape[0] != len(src):
            raise ValueError(f"weights has {w.shape[0]} entries but edges has {len(src)}")
        normalize = True if normalize is None else check_bool(normalize, "normalize")
        rows, cols = dst, src
        if self_loops:
            has_loop = np.zeros(n, dtype=bool)
            has_loop[src[src == dst]] = True
            missing = np.flatnonzero(~has_loop)
            rows = np.concatenate([rows, missing])
            cols = np.concatenate([cols, missing])
            w = np.concatenate([w, np.ones(missing.size, w.dtype)])
        raw = sp.coo_array((w, (rows, cols)), shape=(n, n)).tocsr()
        return cls(raw, normalize=normalize, dtype=dtype, validate=validate, stochastic=stochastic)

    @classmethod
    def from_networkx(cls, G, weights="in-degree", *, self_loops=True, dtype=np.float64, validate=True):
        """Build ``A`` from a networkx graph (nodes relabelled 0..n-1 in ``G.nodes`` order).

        A directed edge ``u -> v`` means ``u`` sends to ``v``; an undirected edge
        goes both ways. ``weights`` is ``"in-degree"``, ``"uniform"`` or the name of
        an edge attribute holding raw weights (normalised per row; an edge
        without the attribute counts as 1, and a name that no edge has raises
        ValueError). Self loops of ``G`` keep their weights; ``self_loops=True``
        adds one (weight 1) only at the nodes that have none.

        Examples
        --------
        >>> import networkx as nx
        >>> A = MixingMatrix.from_networkx(nx.cycle_graph(4, create_using=nx.DiGraph))
        >>> A.n
        4
        """
        if not (hasattr(G, "nodes") and hasattr(G, "edges")):
            raise TypeError(f"G must be a networkx graph, got {type(G).__name__}")
        attribute = None if weights in ("in-degree", "uniform") else weights
        n, edges, raw = _networkx_edges(G, attribute or "weight")
        if attribute is not None and edges.size and all(v is _MISSING for v in raw):
            seen = sorted({k for _, _, data in G.edges(data=True) for k in data})
            raise ValueError(f"no edge of G has the attribute {weights!r} (edge attributes: "
                             f"{', '.join(map(repr, seen)) or 'none'}); pass weights='in-degree' or 'uniform' "
                             "for unweighted graphs")
        w = weights if attribute is None else np.asarray([1.0 if v is _MISSING else v for v in raw], dtype=np.float64)
        return cls.from_edges(n, edges, w, self_loops=self_loops, dtype=dtype, validate=validate)

    # ------------------------------------------------------------------ properties
    @property
    def n(self):
        """Number of nodes."""
        return self._csr.shape[0]

    @property
    def shape(self):
        """``(n, n)``."""
        return self._csr.shape

    @property
    def ndim(self):
        """2, as for any matrix."""
        return 2

    def __len__(self):
        return self.n

    @property
    def nnz(self):
        """Number of stored (positive) weights, self loops included."""
        return self._csr.nnz

    @property
    def dtype(self):
        """Value type (float64 or float32)."""
        return self._csr.dtype

    @property
    def stochastic(self):
        """``"row"`` (rows sum to 1) or ``"column"`` (columns sum to 1); a doubly stochastic matrix is ``"row"``
        with :attr:`doubly` set."""
        return self._stochastic

    @property
    def doubly(self):
        """True for a matrix validated on both sums (``stochastic="doubly"``, :func:`metropolis_weights`): an
        undirected baseline's ``W``, its own column-stochastic matrix (:func:`out_degree_weights` returns it)."""
        return self._doubly

    @property
    def csr(self):
        """The matrix as a read-only ``scipy.sparse.csr_array``."""
        return self._csr

    def toarray(self):
        """Dense ``n x n`` copy of ``A``."""
        return self._csr.toarray()

    def tocsr(self, copy=False):
        """The matrix as a ``scipy.sparse.csr_array``: :attr:`csr` itself (read-only), or a writeable copy with
        ``copy=True`` (SciPy's convention: ``copy=False`` may share memory)."""
        return self._csr.copy() if copy else self._csr

    def __matmul__(self, X):
        """``A @ X``: :meth:`mix` for an array (NumPy or CuPy, ``(n,)`` or ``(n, d)``; in the matrix's dtype, as
        every mixing step), the sparse product for a SciPy sparse ``X``."""
        if isinstance(X, MixingMatrix):
            raise TypeError("A @ B of two MixingMatrix objects is not a mixing step: multiply their sparse "
                            "matrices (A.csr @ B.csr), or mix twice (A @ (B @ X))")
        if sp.issparse(X):
            if X.shape[0] != self.n:
                raise ValueError(f"A @ X: X has {X.shape[0]} rows but A has {self.n} nodes")
            return self._csr @ X
        return self.mix(X)

    def __rmatmul__(self, X):
        """``X @ A`` for an array or SciPy sparse ``X`` with ``n`` columns (a host product, not a mixing
        step: it multiplies by the transpose of what nodes do)."""
        if is_device_array(X):
            raise TypeError("X @ A with a CuPy X is not supported: use (A.csr.T @ X.T).T on the host, or mix with "
                            "A @ X")
        if sp.issparse(X):
            if X.shape[-1] != self.n:
                raise ValueError(f"X @ A: X has {X.shape[-1]} columns but A has {self.n} nodes")
            return X @ self._csr
        dtype = np.result_type(np.asarray(X).dtype if hasattr(X, "dtype") else np.float64, self.dtype)
        arr = as_float_array(X, "X", dtype if dtype.kind == "f" else np.float64, ndim=(1, 2), finite=False)
        if arr.shape[-1] != self.n:
            raise ValueError(f"X @ A: X has {arr.shape[-1]} columns but A has {self.n} nodes")
        return np.asarray(self._csr.T.astype(arr.dtype) @ arr.T).T

    @property
    def self_loops(self):
        """Boolean mask of the nodes that have a self loop ``a_ii > 0``."""
        return self._csr.diagonal() > 0

    def astype(self, dtype):
        """The same matrix with values of ``dtype`` (float32 or float64).

        In float32 every weight rounds on its own, so a row's sum is 1 only to its rounding, alike in every row of
        a regular graph (1/3 rounds to 0.33333334: a ring's rows sum to 1 + 3e-8). Methods that add their
        corrections up over the whole past drift from the minimiser by that every iteration: on a ring of 8 the
        float32 EXTRA, NIDS, SimpleGT and ADMM were 3e-5 - 7e-5 from it after 300 steps and 1.6e-3 - 7.7e-3
        after 30,000 (Compressed Push-Pull 8.8e-4), where gradient tracking (DIGing, Pull-Diag-GT) levels off at
        3e-7 (bench/RESULTS.md section 57). Setting each self loop to 1 minus the rest of its row removes most of
        it, but leaves a regular graph's rows unequal, which its fast kernels need; run such methods long in
        float64.
        """
        return MixingMatrix(self, dtype=dtype, validate=False, stochastic="doubly" if self._doubly else self._stochastic)

    def __repr__(self):
        kind = ", stochastic='doubly'" if self._doubly else ", stochastic='column'" if self._stochastic == "column" else ""
        return f"MixingMatrix(n={self.n}, nnz={self.nnz}, dtype={self.dtype}{kind})"

    def _as_row(self):
        """The row-stochastic matrix whose metrics these are: ``self``, or ``C^T`` for a column-stochastic ``C``."""
        if self._stochastic == "row":
            return self
        if self._row_view is None:
            t = sp.csr_array(self._csr.T)
            t.sort_indices()
            self._row_view = MixingMatrix._from_valid_csr(t.indptr, t.indices, t.data, self.n)
        return self._row_view

    # ------------------------------------------------------------------ mixing
    def _prep(self, X, name="X"):
        arr = as_float_array(X, name, self.dtype, ndim=(1, 2), finite=False)
        if arr.shape[0] != self.n:
            raise ValueError(f"{name} has {arr.shape[0]} rows but A has {self.n} nodes")
        return arr

    def mix(self, X, t=None, rounds=1, out=None):
        """One gossip step of the A-protocol (eq. 2): ``A @ X`` (``A^rounds @ X`` with ``rounds``).

        With ``t`` (ignored: the matrix is the same at every iteration) this is
        the network protocol of :mod:`rowstoch_fast.network`, so a static
        matrix is a network.

        Parameters
        ----------
        X : array_like, shape (n,) or (n, d)
            One row per node; converted once to ``self.dtype``, C order. A CuPy
            array is mixed on its GPU (and the result is a CuPy array).
        t : int, optional
            The iteration (networks that vary in time use it).
        rounds : int, default 1
            Gossip steps.
        out : ndarray, optional (keyword)
            Where to write the result: same shape as ``X``, dtype ``self.dtype``,
            C-contiguous, not sharing memory with ``X``.

        Returns
        -------
        ndarray
            ``A @ X``, of the shape of ``X``.
        """
        if t is not None and (type(t) is not int or not 0 <= t <= MAX_T):
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"A.mix(X, t, rounds, out): t is the iteration (an int), got {type(t).__name__}; "
                                "pass out as a keyword: A.mix(X, out=Y)")
            check_int(t, "t", minimum=0, maximum=MAX_T)  # (as every network's: -5 and 2**100 had been taken)
        return self.mix_power(X, check_int(rounds, "rounds", minimum=0, maximum=MAX_ROUNDS), out=out)

    def matrix(self, t=0, r=0):
        """The matrix of gossip round ``r`` of iteration ``t``: ``self`` (the network protocol of
        :mod:`rowstoch_fast.network`)."""
        return self

    def mix_power(self, X, R, out=None):
        """``R`` gossip steps: ``A^R @ X`` (one multi-gossip phase of eq. 12).

        Parameters
        ----------
        X : array_like, shape (n,) or (n, d)
        R : int, >= 0
        out : ndarray, optional
            As in :meth:`mix`.

        Examples
        --------
        >>> from rowstoch_fast import topology
        >>> A = topology.ring(4)
        >>> A.mix_power([1.0, 0.0, 0.0, 0.0], 2)
        array([0.25, 0.5 , 0.25, 0.  ])
        """
        R = check_int(R, "R", minimum=0, maximum=MAX_ROUNDS)
        if is_device_array(X):  # a device array: the CuPy backend
            self._warn_if_long(R, X.shape[1] if X.ndim == 2 else 1)
            return device_operations().mix_power(self, X, R, out)
        arr = self._prep(X)
        check_out(out, "out", arr.shape, self.dtype)
        X2 = arr.reshape(self.n, -1)
        self._warn_if_long(R, X2.shape[1])
        out2 = None if out is None else out.reshape(self.n, -1)
        c = self._csr
        if R == 1:
            Y = _core.mix(c.indptr, c.indices, c.data, X2, out2, check_indices=False)
        else:
            Y = _core.mix_power(c.indptr, c.indices, c.data, X2, R, out2, check_indices=False)
        return out if out is not None else Y.reshape(arr.shape)

    def _warn_if_long(self, R, columns):
        """A RuntimeWarning, at the caller of :meth:`mix` or :meth:`mix_power`, before ``R`` rounds past
        :data:`LONG_GOSSIP` multiply-adds (``R = 10**12`` on a 16-node ring ran about 18 hours without a word);
        a ValueError naming ``R`` past :data:`MAX_GOSSIP` (``R = 10**12`` on a larger network: weeks to years,
        helper 218)."""
        work = R * self.nnz * columns
        limit = "1 pi^T X (A.pi)" if self.stochastic == "row" else "a rank-one limit"
        if work > MAX_GOSSIP:
            raise ValueError(f"R = {R} rounds of {self.nnz} weights x {columns} columns is about {work:.1g} "
                             f"multiply-adds, but the limit of one call is {MAX_GOSSIP:.0e} (hours of a CPU core); "
                             f"on a primitive network A^R X tends to {limit} as R grows: use that, or fewer rounds")
        if work > LONG_GOSSIP:
            warnings.warn(f"A^R X: R = {R} rounds of {self.nnz} weights x {columns} columns is about {work:.1g} "
                          f"multiply-adds (minutes to days); on a primitive network it tends to {limit} as R "
                          "grows; Ctrl-C stops the call", RuntimeWarning, stacklevel=caller_outside())

    # ------------------------------------------------------------------ metrics
    @property
    def pi(self):
        """The Perron (equilibrium) vector: ``pi^T A = pi^T``, ``sum(pi) = 1`` (read-only, computed once).

        Much cheaper than :meth:`metrics` at large ``n`` (no ``beta``); the same
        values as ``A.metrics().pi``.

        Examples
        --------
        >>> from rowstoch_fast import topology
        >>> topology.exponential(4).pi
        array([0.25, 0.25, 0.25, 0.25])
        """
        if self._stochastic == "column":
            return self._as_row().pi  # pi^T C^T = pi^T  <=>  C pi = pi
        if self._pi is None:
            with self._cache_lock:
                if self._pi is None:
                    self._pi = perron_vector(self)
        return self._pi

    @property
    def kappa(self):
        """Equilibrium skewness ``max(pi) / min(pi)`` (Section 2.2), from :attr:`pi` alone."""
        pi = self.pi
        return float(pi.max() / pi.min())

    def metrics(self):
        """Network metrics of Section 2.2 (``pi``, ``beta``, ``kappa``, ...), computed once.

        Returns
        -------
        NetworkMetrics

        Examples
        --------
        >>> from rowstoch_fast import topology
        >>> m = topology.exponential(8).metrics()
        >>> round(m.beta, 6), round(m.kappa, 6)
        (0.5, 1.0)
        """
        if self._stochastic == "column":
            return self._as_row().metrics()  # beta and kappa of C are those of the row-stochastic C^T
        if self._metrics is None:
            with self._cache_lock:
                if self._metrics is None:
                    self._metrics = compute_metrics(self)
        return self._metrics

    # ------------------------------------------------------------------ picture
    def draw(self, ax=None, layout="circular", path=None, *, labels=True, max_nodes=200, seed=0, node_size=300,
             node_color="C0", edge_color="0.2"):
        """Draw the network with matplotlib: an arrow ``j -> i`` for every weight ``A[i, j] > 0`` off the
        diagonal (self loops omitted), wider and more opaque the larger the weight, the nodes numbered.

        Two-way links are drawn as two arcs bent apart. Returns the Axes: in a script call
        ``matplotlib.pyplot.show()`` to see it, or pass ``path`` to save the figure there (PNG, PDF, SVG by
        its suffix).

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Draw into it; a new figure otherwise.
        layout : {"circular", "spring"} or array_like of shape (n, 2), default "circular"
            Where the nodes go: evenly on a circle (node 0 at the top, counter-clockwise), networkx's spring
            layout (needs networkx; ``seed`` fixes it), or the given positions.
        path : str or os.PathLike, optional
            Save the figure to this file (a figure ``draw`` made is then closed in pyplot: the Axes is returned
            still).
        labels : bool, default True
            Write each node's number on it.
        max_nodes : int, default 200
            The largest network drawn with the ``"circular"`` or ``"spring"`` layout (a picture of more is
            unreadable); give positions, or raise it, to draw a larger one.
        seed : int, default 0
            Seeds the spring layout.
        node_size, node_color, edge_color
            The nodes' marker area (points^2) and colour, and the arrows' colour.

        Returns
        -------
        matplotlib.axes.Axes

        Raises
        ------
        ValueError
            More than ``max_nodes`` nodes with a named layout, an unknown layout, positions of another shape
            or not finite.
        ImportError
            Without matplotlib, or ``layout="spring"`` without networkx.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from rowstoch_fast import topology
        >>> ax = topology.ring(5).draw()
        >>> len(ax.patches), len(ax.texts)  # 5 arrows (the self loops omitted), 5 numbers
        (5, 5)
        >>> import matplotlib.pyplot as plt
        >>> plt.close(ax.figure)
        """
        max_nodes = check_int(max_nodes, "max_nodes", minimum=1)
        node_size = check_positive_float(node_size, "node_size", allow_zero=True)
        pos = _layout(self, layout, max_nodes, seed)
        try:
            import matplotlib.pyplot as plt
            from matplotlib.patches import FancyArrowPatch
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("MixingMatrix.draw needs matplotlib, a dependency of rowstoch_fast that this install "
                              "lacks: pip install matplotlib") from exc
        _check_drawing(ax, path, node_color, edge_color)
        made = ax is None
        if made:
            side = min(8.0, 3.0 + 0.05 * self.n)
            _, ax = plt.subplots(figsize=(side, side))
        coo = self._csr.tocoo()
        off = coo.row != coo.col
        rows, cols, weights = coo.row[off], coo.col[off], coo.data[off].astype(np.float64)
        scale = weights / weights.max() if len(weights) else weights
        radius = np.sqrt(node_size) / 2  # points: the arrows stop at the markers' edges
        for i, j, s in zip(rows, cols, scale):
            ax.add_patch(FancyArrowPatch(pos[j], pos[i], arrowstyle="-|>", mutation_scale=10,
                                         connectionstyle="arc3,rad=0.12", shrinkA=radius, shrinkB=radius + 1,
                                         linewidth=0.4 + 2.0 * s, alpha=0.3 + 0.7 * s, color=edge_color, zorder=1))
        ax.scatter(pos[:, 0], pos[:, 1], s=node_size, c=node_color, edgecolors="white", zorder=2)
        if check_bool(labels, "labels"):
            font = max(5.0, min(10.0, np.sqrt(node_size) / 2))
            for k, (px, py) in enumerate(pos):
                ax.text(px, py, str(k), ha="center", va="center", fontsize=font, color="white", zorder=3)
        ax.set_aspect("equal")
        ax.margins(0.08)
        ax.set_axis_off()
        if path is not None:
            ax.figure.tight_layout()
            ax.figure.savefig(path, dpi=120)
            if made:  # (saved: pyplot lets it go, the Axes stays usable; figures left open pile up)
                plt.close(ax.figure)
        return ax


def _check_drawing(ax, path, node_color, edge_color):
    """:meth:`MixingMatrix.draw`'s Axes, file and colours checked before anything is drawn (helper 199: ``ax=5`` met
    an AttributeError, ``path="x.xyz"`` and ``node_color="notacolor"`` matplotlib's errors after the drawing)."""
    import os

    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.colors import is_color_like

    if ax is not None and not hasattr(ax, "add_patch"):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    if path is not None and not hasattr(path, "write"):  # (a file object: savefig writes PNG there)
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise TypeError(f"path must be a file name (str or os.PathLike) or a file object, got "
                            f"{type(path).__name__} {path!r:.60}")
        kinds = FigureCanvasBase.get_supported_filetypes()
        kind = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
        if kind and kind not in kinds:
            raise ValueError(f"path {os.fspath(path)!r}: matplotlib cannot write .{kind} files; use one of "
                             f"{', '.join('.' + k for k in sorted(kinds))}")
    for name, colour in (("node_color", node_color), ("edge_color", edge_color)):
        if isinstance(colour, str) and not is_color_like(colour):
            raise ValueError(f"{name} {colour!r} is not a matplotlib colour (a name such as 'red', 'C0', '#1f77b4' "
                             f"or a grey level '0.2')")


#: The multiply-adds past which :meth:`MixingMatrix.mix_power` warns that it will run long (about 10-20 minutes
#: of one CPU core).
LONG_GOSSIP = 1e12
#: The most multiply-adds one :meth:`MixingMatrix.mix_power` call takes (about 5 hours of one CPU core, at the
#: 18 hours that 3.2e13 took): past it the call is refused, naming ``R``.
MAX_GOSSIP = 1e13

#: The named layouts of :meth:`MixingMatrix.draw`.
_LAYOUTS = ("circular", "spring")


def _layout(A, layout, max_nodes, seed):
    """The ``(n, 2)`` node positions :meth:`MixingMatrix.draw` uses, or a clear error."""
    n = A.n
    if isinstance(layout, str):
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be 'circular', 'spring' or an (n, 2) array of positions, got {layout!r}")
        if n > max_nodes:
            raise ValueError(f"A has {n} nodes, more than max_nodes = {max_nodes} drawn with a {layout} layout "
                             f"(unreadable): pass max_nodes={n} to draw it anyway, or layout= an ({n}, 2) array "
                             "of positions")
        if layout == "circular":
            angle = np.pi / 2 + 2 * np.pi * np.arange(n) / n
            return np.column_stack([np.cos(angle), np.sin(angle)])
        try:
            import networkx as nx
        except ImportError as exc:
            raise ImportError("layout='spring' needs networkx: pip install networkx (or use layout='circular', "
                              "or give positions)") from exc
        if hasattr(nx, "from_scipy_sparse_array"):
            G = nx.from_scipy_sparse_array(sp.csr_array(A.csr), create_using=nx.DiGraph)
        else:  # networkx < 2.7 (its spelling of the same, removed in 3.0)
            G = nx.from_scipy_sparse_matrix(sp.csr_matrix(A.csr), create_using=nx.DiGraph)
        spring = nx.spring_layout(G, seed=check_int(seed, "seed", minimum=0))
        return np.array([spring[k] for k in range(n)], dtype=np.float64)
    pos = as_float_array(layout, "layout", np.float64, finite=True)
    if pos.shape != (n, 2):
        raise ValueError(f"layout positions must have shape ({n}, 2), one (x, y) per node, got {pos.shape}")
    return pos


# ---------------------------------------------------------------------- validation helpers
def _is_networkx(W):
    """True for a networkx graph (found by its type's module, so networkx need not be installed)."""
    return type(W).__module__.startswith("networkx.") and hasattr(W, "is_directed") and hasattr(W, "edges")


def _networkx_edges(G, attribute):
    """``(n, edges, values)`` of a networkx graph: nodes numbered in ``G.nodes`` order, ``edges`` ``(m, 2)`` as
    ``(sender, receiver)`` (an undirected edge both ways) and each one's ``attribute`` (``_MISSING`` where none)."""
    index = {u: k for k, u in enumerate(G.nodes)}
    edges, values = [], []
    for u, v, value in G.edges(data=attribute, default=_MISSING):
        both = [(index[u], index[v])] + ([(index[v], index[u])] if not G.is_directed() and u != v else [])
        edges += both
        values += [value] * len(both)
    return len(index), np.asarray(edges, dtype=np.int64).reshape(-1, 2), values


def _networkx_weights(G, dtype):
    """What ``MixingMatrix(G)`` stands for: the sparse matrix of ``G``'s ``"weight"`` attributes (``A[v, u]``
    for ``u -> v``), or, for an unweighted graph, the in-degree rule with self loops."""
    n, edges, values = _networkx_edges(G, "weight")
    weighted = [w is not _MISSING for w in values]
    if not any(weighted):
        return MixingMatrix.from_networkx(G, dtype=dtype, validate=False)
    nodes = list(G.nodes)
    if not all(weighted):
        u, v = (nodes[k] for k in edges[weighted.index(False)])
        raise ValueError(f"W is a networkx graph whose edges are weighted, but edge ({u!r}, {v!r}) has no 'weight' "
                         "attribute: give every edge one, or build with MixingMatrix.from_networkx(G, weights=...)")
    vals = np.empty(len(values))
    for k, w in enumerate(values):
        try:
            vals[k] = float(w)
        except (TypeError, ValueError):
            u, v = (nodes[i] for i in edges[k])
            raise TypeError(f"W is a networkx graph whose edge ({u!r}, {v!r}) has weight {w!r}, not a number") \
                from None
    return sp.coo_array((vals, (edges[:, 1], edges[:, 0])), shape=(n, n))


def _compact_indices(csr):
    """int32 indices whenever they fit (as scipy does): a third less CSR traffic than int64 at d = 1."""
    if csr.nnz < 2**31 and csr.shape[0] < 2**31 and csr.indices.dtype != np.int32:
        csr = sp.csr_array((csr.data, csr.indices.astype(np.int32), csr.indptr.astype(np.int32)), shape=csr.shape)
    return csr


_MISSING = object()


def _frozen(a):
    """A read-only copy of ``a`` backed by immutable bytes: ``setflags(write=True)`` cannot undo it."""
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype=a.dtype).reshape(a.shape)


def _freeze(csr):
    return sp.csr_array((_frozen(csr.data), _frozen(csr.indices), _frozen(csr.indptr)), shape=csr.shape, copy=False)


def _check_sparse_structure(W):
    """The index arrays of a SciPy sparse matrix are sound (a malformed one crashes SciPy itself)."""
    if len(W.shape) != 2:
        raise ValueError(f"W must be 2-D, got shape {W.shape}")
    if np.iscomplexobj(W.dtype.type(0)):  # SciPy would drop the imaginary parts with a warning (the dtype: a DOK
        # or LIL matrix has no .data array, helper 239)
        raise TypeError(f"W must be real, got complex dtype {W.dtype}")
    if not (np.issubdtype(W.dtype, np.number) or W.dtype == bool):
        raise TypeError(f"W must be a numeric sparse matrix, got dtype {W.dtype}")
    rows, cols = W.shape
    fmt = W.format
    if fmt == "csr":
        check_csr_arrays(W.indptr, W.indices, rows, cols, "W (CSR)", W.data)
    elif fmt == "csc":
        check_csr_arrays(W.indptr, W.indices, cols, rows, "W (CSC)", W.data)
    elif fmt == "coo":
        row, col = W.coords if hasattr(W, "coords") else (W.row, W.col)
        check_coo_arrays(row, col, W.shape, "W (COO)", W.data)
    elif fmt == "bsr":
        br, bc = W.blocksize
        check_csr_arrays(W.indptr, W.indices, rows // br, cols // bc, "W (BSR)")


def _first_entry(csr, mask):
    """(row, col) of the first stored entry where ``mask`` holds."""
    p = int(np.flatnonzero(mask)[0])
    row = int(np.searchsorted(csr.indptr, p, side="right") - 1)
    return row, int(csr.indices[p])


def _check_entries(csr):
    bad = ~np.isfinite(csr.data)
    if bad.any():
        i, j = _first_entry(csr, bad)
        raise ValueError(f"W must be finite; W[{i}, {j}] = {csr.data[bad][0]}")
    neg = csr.data < 0
    if neg.any():
        i, j = _first_entry(csr, neg)
        raise ValueError(f"W must be non-negative; W[{i}, {j}] = {csr.data[neg][0]} (row {i})")


def _cached(M, key, compute):
    """``compute(M)`` once per (immutable) matrix ``M``, kept with its other derived data."""
    cache = M._diag_cache
    if key not in cache:
        cache[key] = compute(M)
    return cache[key]


def columns_sum_to_one(A):
    """``A``'s columns sum to 1 too (a doubly stochastic matrix), at the tolerance its construction checks rows
    at; computed once per matrix (``rowstoch compare`` asks it of every undirected method)."""
    return A.doubly or _cached(A, "columns_sum_to_one", lambda A: off_sums(A.csr, "column")[0].size == 0)


def first_asymmetry(W):
    """The first ``(i, j, W[i, j], W[j, i])`` where the matrix ``W`` is not symmetric (beyond rounding), or None;
    computed once per matrix."""
    return _cached(W, "asymmetry", _first_asymmetry)


def asymmetric_rounds(bad):
    """Why the rounds of losses or sleep over ``W`` do not stay doubly stochastic, ``bad`` being
    :func:`first_asymmetry`'s finding (one message: the undirected methods' and :meth:`Network.undirected`'s)."""
    i, j, wij, wji = bad
    return (f"the rounds of losses or sleep over W stay doubly stochastic only for a symmetric W (an undirected "
            f"graph's weights): W[{i}, {j}] = {wij:.6g} but W[{j}, {i}] = {wji:.6g}")


def _first_asymmetry(W):
    csr = W.csr
    diff = abs(csr - csr.T).tocoo()
    bad = diff.data > 1e-12 * max(1.0, float(abs(csr).max()))
    if not bad.any():
        return None
    k = int(np.flatnonzero(bad)[np.lexsort((diff.col[bad], diff.row[bad]))[0]])
    i, j = int(diff.row[k]), int(diff.col[k])
    return i, j, float(csr[i, j]), float(csr[j, i])


def _divide_by_sums(csr, sums, axis):
    """Each row's (``axis`` 1) or column's (0) entries of ``csr`` divided by its sum in ``sums``, in place."""
    csr.data /= np.repeat(sums, np.diff(csr.indptr)) if axis == 1 else sums[csr.indices]


def off_sums(csr, stochastic="row", rtol=None):
    """``(the rows (or columns) whose sums are not 1 within rtol, their sums)`` of a CSR matrix (``stochastic``:
    ``"row"`` or ``"column"``; ``rtol``: the dtype's tolerance by default): empty where it is that stochastic."""
    if rtol is None:
        rtol = ROW_SUM_RTOL_FLOAT32 if csr.dtype == np.float32 else ROW_SUM_RTOL
    with np.errstate(over="ignore"):
        sums = np.asarray(csr.sum(axis=1 if stochastic == "row" else 0)).ravel()
    # (a sum past the largest float is inf, and |inf - 1| > rtol * inf is not: weights of 1e308 passed, helper 192)
    return np.flatnonzero(~np.isfinite(sums) | (np.abs(sums - 1.0) > rtol * np.maximum(1.0, np.abs(sums)))), sums


def _check_sums(csr, stochastic="row", doubly=False, rtol=ROW_SUM_RTOL):
    bad, sums = off_sums(csr, stochastic, rtol)
    if bad.size:
        i = int(bad[0])
        if doubly:
            raise ValueError(f"W must be doubly stochastic: {stochastic} {i} sums to {fmt_value(sums[i])}, not 1 "
                             f"({bad.size} such {stochastic}s); weights='metropolis' builds such a W from an "
                             "undirected graph")
        name, other = ("A", "column") if stochastic == "row" else ("C", "row")
        if not np.isfinite(sums[i]):  # (normalize=True is refused there too: it divides by the sum)
            raise ValueError(f"{name} must be {stochastic}-stochastic: {stochastic} {i} sums to {sums[i]}, past the "
                             f"largest float ({np.max(np.abs(csr.data)):.3g} the largest weight): rescale the weights")
        if not off_sums(csr, other, rtol)[0].size:  # (the other way round: normalize=True, which the message had
            # suggested, made another matrix of it, helper 185)
            raise ValueError(f"{name} must be {stochastic}-stochastic: {stochastic} {i} sums to {fmt_value(sums[i])}, "
                             f"not 1, but every {other} sums to 1: it is {other}-stochastic (read it as one with "
                             f"stochastic={other!r}; normalize=True would rescale its {stochastic}s into another "
                             "matrix)")
        raise ValueError(
            f"{name} must be {stochastic}-stochastic: {stochastic} {i} sums to {fmt_value(sums[i])}, not 1 "
            f"({bad.size} such {stochastic}s); pass normalize=True to rescale raw weights"
        )


def out_degree_weights(A):
    """The column-stochastic matrix on the graph of ``A`` (its self loops included): sender ``j`` gives
    ``1 / (1 + out-degree of j)`` to itself and to each out-neighbour.

    For a matrix built with in-degree weights this is the same network weighted by its senders, which is
    what push-based methods (push-sum, Push-Pull, Push-DIGing, SGP) run on. A doubly stochastic ``W``
    (:attr:`MixingMatrix.doubly`) is returned as it is, as a column-stochastic matrix.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> C = out_degree_weights(topology.ring(3))
    >>> C.stochastic, C.toarray().sum(axis=0).tolist()
    ('column', [1.0, 1.0, 1.0])
    """
    A = as_matrix(A)
    if A.stochastic == "column":
        return A
    c = A.csr
    if A.doubly:  # W is column-stochastic too: the push-based methods of an undirected baseline run on W itself
        return MixingMatrix._from_valid_csr(c.indptr, c.indices, c.data, A.n, stochastic="column", doubly=True)
    counts = np.bincount(c.indices, minlength=A.n).astype(np.float64)
    data = (1.0 / counts[c.indices]).astype(A.dtype)
    return MixingMatrix._from_valid_csr(c.indptr, c.indices, data, A.n, stochastic="column")


def as_matrix(M, name="A", *, stochastic="any", **options):
    """``M`` as a :class:`MixingMatrix` (itself when it is one; else ``MixingMatrix(M, **options)``), a refusal
    naming the caller's argument ``name`` (MixingMatrix's own messages say ``W``, its parameter: a negative entry
    of an algorithm's ``A`` was reported as ``W[0, 1]``). A network that never changes is its matrix; one whose
    rounds vary is refused: the caller needs a fixed matrix.

    ``stochastic`` is the kind the caller needs: ``"row"`` or ``"column"`` (a matrix of the other kind is refused,
    naming ``name``, unless it is doubly stochastic: :func:`require_stochastic`; the Pull-Diag protocols take a
    row-stochastic A, and a column-stochastic C given to them had run and answered wrong), or ``"any"`` (an array is
    read as row-stochastic)."""
    check_choice(stochastic, "stochastic", ("any", "row", "column"))
    if isinstance(M, MixingMatrix):
        return M if stochastic == "any" else require_stochastic(M, stochastic, name)
    if getattr(M, "stochastic", None) is not None and hasattr(M, "mix"):  # (a Network)
        if getattr(M, "static", None) is not None:  # (one that never changes: its matrix, as the algorithms take)
            return as_matrix(M.static, name, stochastic=stochastic)
        raise TypeError(f"{name} must be a fixed matrix (a MixingMatrix or an array), got {type(M).__name__}, a "
                        "network whose rounds vary: pass its base matrix")
    try:
        return MixingMatrix(M, stochastic="row" if stochastic == "any" else stochastic, **options)
    except (ValueError, TypeError) as exc:
        if name == "W":
            raise
        raise type(exc)(re.sub(r"\bW(?=[ \[])", name, str(exc))) from None


def require_stochastic(M, kind="row", name="A"):
    """The MixingMatrix ``M`` if it is ``kind``-stochastic (``"row"`` or ``"column"``); a doubly stochastic one of
    the other kind as a ``kind`` one (the same numbers and dtype); else a ValueError naming ``name``, in the words
    the algorithms refuse the other kind with."""
    if M.stochastic == kind:
        return M
    off, sums = off_sums(M.csr, kind)
    if off.size:
        hint = "; mixing.out_degree_weights(A) gives a column-stochastic C of A's graph" if kind == "column" else ""
        raise ValueError(f"{name} must be a {kind}-stochastic MixingMatrix, got a {M.stochastic}-stochastic one whose "
                         f"{kind} {int(off[0])} sums to {sums[off[0]]:.6g} (pass a {kind}-stochastic matrix: "
                         f"MixingMatrix(W, stochastic={kind!r}) of weights whose {kind}s sum to 1{hint})")
    c = M.csr
    return MixingMatrix._from_valid_csr(c.indptr, c.indices, c.data, M.n, stochastic=kind, doubly=True)


def metropolis_weights(A):
    """The Metropolis-Hastings matrix ``W`` on the undirected graph of ``A``: doubly stochastic and symmetric.

    ``w_ij = 1 / (1 + max(d_i, d_j))`` for every edge ``i - j`` (``d`` the degrees, self loops not counted) and
    ``w_ii = 1 - sum_j w_ij``: the standard mixing matrix of the undirected baselines (DSGD, gradient tracking,
    EXTRA, ...), built without networkx.

    Raises
    ------
    ValueError
        When the graph of ``A`` is directed (an edge ``j -> i`` without ``i -> j``), naming that edge.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> W = metropolis_weights(topology.star(3))
    >>> W.doubly, W.toarray().round(3).tolist()
    (True, [[0.333, 0.333, 0.333], [0.333, 0.667, 0.0], [0.333, 0.0, 0.667]])
    """
    A = as_matrix(A)
    n = A.n
    coo = A.csr.tocoo()
    off = coo.row != coo.col
    rows, cols = coo.row[off].astype(np.int64), coo.col[off].astype(np.int64)
    keys = np.unique(rows * n + cols)  # the edges j -> i as keys i n + j (values dropped: the pattern only)
    back = np.isin(cols * n + rows, keys)
    if not back.all():
        k = int(np.flatnonzero(~back)[0])
        raise ValueError(f"weights='metropolis' needs an undirected graph: {cols[k]} sends to {rows[k]} but "
                         f"{rows[k]} does not send to {cols[k]}")
    rows, cols = keys // n, keys % n
    deg = np.bincount(rows, minlength=n).astype(np.float64)
    w = 1.0 / (1.0 + np.maximum(deg[rows], deg[cols]))
    diag = 1.0 - np.bincount(rows, weights=w, minlength=n)
    everything = np.arange(n, dtype=np.int64)
    W = sp.csr_array((np.concatenate([w, diag]), (np.concatenate([rows, everything]),
                                                  np.concatenate([cols, everything]))), shape=(n, n))
    return MixingMatrix(W, stochastic="doubly", dtype=A.dtype)


def _degree_weighted_csr(n, src, dst, self_loops, stochastic):
    """The sorted CSR of the degree rule on edges ``src -> dst`` in O(m log m) time and ~30 bytes per edge:
    one int64 key ``dst * n + src`` per edge, sorted in place, duplicates dropped, no COO matrix. Rows
    (``stochastic="row"``) or columns get ``1 / count``: the same bits as normalising ones."""
    keys = dst.astype(np.int64) * n
    keys += src
    if self_loops:
        has_loop = np.zeros(n, dtype=bool)
        loops = src == dst
        has_loop[src[loops]] = True
        del loops
        missing = np.flatnonzero(~has_loop)
        keys = np.concatenate([keys, missing * (n + 1)])
    keys.sort()
    if keys.size > 1:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        if not keep.all():
            keys = keys[keep]  # duplicate edges count once under the degree rule
        del keep
    itype = np.int32 if keys.size < 2**31 and n < 2**31 else np.int64
    indptr = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * n).astype(itype)
    indices = (keys % n).astype(itype)
    del keys
    if stochastic == "row":
        counts = np.diff(indptr)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(f"cannot normalize: row {empty[0]} (node {empty[0]}) has no positive weight")
        data = np.repeat(1.0 / counts, counts)
    else:
        counts = np.bincount(indices, minlength=n)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            raise ValueError(f"cannot normalize: column {empty[0]} (node {empty[0]}) has no positive weight")
        data = 1.0 / counts[indices]
    return indptr, indices, data


#: A weight at or below this (in float64; in float32 as many of its rounding units, about 5.4e-4) is too small to
#: carry a network's mixing across it: a matrix strongly connected only through such links behaves as a reducible
#: one (its Perron vector is accurate to about ``eps / weight``: with blocks joined by 1e-13, kappa read 1.0067
#: where it is 1).
NEARLY_ZERO = 1e-12


def _warn_if_nearly_reducible(csr, dtype=np.float64):
    """RuntimeWarning where ``csr`` (strongly connected) is strongly connected only through weights at or below
    :data:`NEARLY_ZERO` (scaled to ``dtype``'s rounding), naming the largest such weight."""
    from scipy.sparse import csgraph

    eps = float(np.finfo(dtype).eps)
    bound = NEARLY_ZERO * eps / float(np.finfo(np.float64).eps)
    tiny = np.abs(csr.data) <= bound
    if not tiny.any():
        return
    kept = sp.csr_array((csr.data[~tiny], csr.indices[~tiny], np.r_[0, np.cumsum(~tiny)][csr.indptr]),
                        shape=csr.shape)  # (new arrays: csr's are the matrix's own)
    n = csr.shape[0]
    if (csgraph.breadth_first_order(kept, 0, directed=True, return_predecessors=False).size == n and
            csgraph.breadth_first_order(sp.csr_array(kept.T), 0, directed=True, return_predecessors=False).size == n):
        return
    rows = np.repeat(np.arange(n), np.diff(csr.indptr))
    k = int(np.flatnonzero(tiny)[np.argmax(np.abs(csr.data[tiny]))])
    import warnings

    warnings.warn(f"A is strongly connected only through weights at or below {bound:.2g} (A[{rows[k]}, "
                  f"{csr.indices[k]}] = {csr.data[k]:.3g}): {np.dtype(dtype).name} mixes it as a reducible matrix, "
                  f"and its Perron vector (kappa, the Pull-Diag trackers' limits) is accurate only to about "
                  f"{eps:.2g} / that weight; raise those weights or drop the links", RuntimeWarning, stacklevel=4)


def _first_missing(reached, n):
    """The smallest node of ``0 .. n - 1`` not in ``reached``: a mask, O(n) (``np.setdiff1d`` hashed and sorted all n
    ids, 179 s of a refusal of ``from_edges(10**8, [(0, 1), (1, 0)])``)."""
    seen = np.zeros(n, dtype=bool)
    seen[reached] = True
    return int(np.argmin(seen))


def graph_period(sends):
    """The period of the strongly connected graph ``sends`` (an edge ``u -> v`` for ``sends[u, v] != 0``): the gcd
    over its edges of ``level[u] + 1 - level[v]``, BFS levels from node 0."""
    from scipy.sparse import csgraph

    order, pred = csgraph.breadth_first_order(sends, 0, directed=True, return_predecessors=True)
    level = np.zeros(sends.shape[0], dtype=np.int64)
    for v in order[1:]:
        level[v] = level[pred[v]] + 1
    coo = sp.coo_array(sends)
    return int(np.gcd.reduce(np.abs(level[coo.row] + 1 - level[coo.col])))


def _check_primitive(csr, dtype=np.float64):
    """Strongly connected and aperiodic, or raise naming a node that breaks it."""
    from scipy.sparse import csgraph  # (here: it imports scipy.sparse.linalg and scipy.linalg, 80 ms a start)

    n = csr.shape[0]
    if n == 1:
        return
    # Edge j -> i for A[i, j] > 0, so the "sends to" graph is A^T.
    sends = sp.csr_array(csr.T)
    reached = csgraph.breadth_first_order(sends, 0, directed=True, return_predecessors=False)
    if reached.size < n:
        missing = _first_missing(reached, n)
        raise ValueError(
            f"A must be strongly connected: node {missing} never receives information from node 0"
        )
    back = csgraph.breadth_first_order(csr, 0, directed=True, return_predecessors=False)
    if back.size < n:
        missing = _first_missing(back, n)
        raise ValueError(f"A must be strongly connected: node {missing} cannot send information to node 0")
    _warn_if_nearly_reducible(csr, dtype)
    if (csr.diagonal() > 0).any():
        return  # strongly connected with a self loop: aperiodic
    period = graph_period(sends)
    if period != 1:
        raise ValueError(
            f"A must be primitive (aperiodic), but its graph has period {period}: "
            "every cycle length is a multiple of it; add a self loop at any node"
        )
