"""Argument checks shared by the Python API: each raises a clear exception naming the argument."""

from __future__ import annotations

import contextlib
import math
import numbers
import os

import numpy as np

from . import _core

FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


#: The largest seed or counter the hashed random streams take (a 64-bit word).
MAX_KEY = 2**64 - 1
#: The words an on/off environment variable takes (case and surrounding blanks aside); nothing set is off.
YES, NO = frozenset({"1", "true", "yes", "on"}), frozenset({"", "0", "false", "no", "off"})
#: The most gossip rounds one call takes (the kernels count them in int64).
MAX_ROUNDS = 2**62


def check_int(value, name, *, minimum=None, maximum=None):
    """Return ``value`` as a Python int, or raise TypeError/ValueError naming ``name``."""
    if type(value) is int and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return value  # the common case, once per step on a GPU's hot path: no ABC checks
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {fmt_value(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        limit = str(maximum) if maximum < 2**31 else f"2^{maximum.bit_length()} - 1" if (maximum + 1) & maximum == 0 \
            else f"2^{maximum.bit_length() - 1}" if maximum & (maximum - 1) == 0 else str(maximum)  # (the powers:
        # for the type-sized limits; record_at past iterations = 3 had been "<= 2^2 - 1")
        raise ValueError(f"{name} must be <= {limit}, got {value}")
    return value


def check_bool(value, name):
    """Return ``value`` as a bool (True / False, NumPy's too, a 0-d boolean array), or raise TypeError naming
    ``name``: a string such as ``"False"`` is refused, not read as true, and an array of several."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == np.bool_:
        return bool(value)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {fmt_value(value)}")
    return bool(value)


def check_names(value, name, *, allow_none=False):
    """``value`` as a list of strings: one string is a list of one (not read letter by letter), None an empty list
    where ``allow_none``; anything else a TypeError naming ``name``."""
    if value is None and allow_none:
        return []
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(v, str) for v in names):
        raise TypeError(f"{name} must be a name or a sequence of names (str), got {type(value).__name__} "
                        f"{fmt_value(value)}")
    return names


#: The diagonal trackers of the Pull-Diag methods: ``D_t = Diag(A^(tR))`` as in the paper, or its limit diag(pi).
TRACKERS = ("exact", "perron")


def check_tracker(kind, name="tracker"):
    """``kind`` if it is one of :data:`TRACKERS`, else a ValueError naming ``name``."""
    if not isinstance(kind, str) or kind not in TRACKERS:
        raise ValueError(f"{name} must be 'exact' or 'perron', got {kind!r}")
    return kind


def did_you_mean(name, choices):
    """``" (did you mean 'x'?)"`` for the choice closest to a mistyped ``name`` (the same letters and digits in
    another case or spelling, ``PullDiagGT`` / ``pull_diag_gt`` for ``pull-diag-gt``, or a near miss), else ``""``."""
    import difflib
    import re

    def key(text):
        return re.sub(r"[^a-z0-9]", "", str(text).lower())

    keys = {}
    for choice in choices:
        keys.setdefault(key(choice), choice)
    k = key(name)
    match = k if k in keys else next(iter(difflib.get_close_matches(k, list(keys), n=1, cutoff=0.75)), None)
    return f" (did you mean {keys[match]!r}?)" if match is not None and keys[match] != name else ""


def check_text(value, name, *, allow_none=False):
    """``value`` if it is a string (or None where ``allow_none``), else a TypeError naming ``name``: a metric's or an
    axis's name, a caption (an array had raised "unhashable type" or NumPy's "truth value ... is ambiguous")."""
    if not (isinstance(value, str) or (allow_none and value is None)):
        raise TypeError(f"{name} must be a string{' or None' if allow_none else ''}, got {type(value).__name__} "
                        f"{fmt_value(value)}")
    return value


def check_caption(value, name, *, allow_none=True):
    """``value`` if it is a string matplotlib can draw as a figure's title or legend label (or None where
    ``allow_none``), else an error naming ``name``, before anything is drawn or written: a TypeError for what is
    not a string (5 had met textwrap's "'int' object has no attribute 'expandtabs'"), a ValueError where the text
    between two unescaped ``$`` (which matplotlib reads as TeX math) does not parse ("cost in $ and x_$" had failed
    in the figure's drawing, after the files before it were written, naming nothing, helper 218). Without
    matplotlib the string is taken as it is."""
    check_text(value, name, allow_none=allow_none)
    if value is None or value.count("$") - value.count(r"\$") < 2:  # (matplotlib's test: an even count > 0)
        return value
    try:
        from matplotlib import cbook
        from matplotlib.mathtext import MathTextParser
    except ImportError:
        return value
    if not cbook.is_math_text(value):
        return value
    try:
        MathTextParser("path").parse(value)
    except ValueError as exc:
        lines = str(exc).splitlines()  # (matplotlib's: "", the math, a caret under the fault, pyparsing's words)
        where = f" ({lines[1].strip()!r})" if len(lines) > 1 and lines[1].strip() else ""
        raise ValueError(f"{name} {value!r} cannot be drawn: matplotlib reads the text between two '$' as TeX math, "
                         f"and that math{where} does not parse; write a literal dollar sign as '\\$'") from None
    return value


def check_choice(value, name, choices, words=None):
    """``value`` if it is one of ``choices`` (names), else an error naming ``name``: a TypeError for a value that
    is not a string (an array had raised NumPy's "truth value of an array ... is ambiguous", a list "unhashable
    type"), a ValueError for another string (``words``, or the choices and the nearest of them)."""
    listed = ", ".join(map(repr, choices))
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {listed}, got {type(value).__name__} {fmt_value(value)}")
    if value not in choices:
        raise ValueError(words or f"{name} must be one of {listed}, got {value!r}{did_you_mean(value, choices)}")
    return value


def make_rng(seed, name="seed"):
    """``np.random.default_rng(seed)`` for a seed NumPy takes (None, an integer >= 0, a sequence of them, a
    ``SeedSequence`` or a ``Generator``), or a TypeError/ValueError naming ``name`` (NumPy's own do not)."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(seed)
    if isinstance(seed, (list, tuple, np.ndarray)):
        for k, s in enumerate(np.asarray(seed, dtype=object).ravel()):
            check_int(s, f"{name}[{k}]", minimum=0)
        return np.random.default_rng([int(s) for s in np.asarray(seed, dtype=object).ravel()])
    return np.random.default_rng(check_int(seed, name, minimum=0))


def check_positive_float(value, name, *, allow_zero=False):
    """Return ``value`` as a finite float > 0 (or >= 0), or raise naming ``name``. A 0-d NumPy array of a real
    number counts as the number (as a step size does); a value that must be > 0 (one divided by) is refused
    subnormal (below 2.2e-308, where a float keeps fewer digits: FedDyn's h / alpha went 0.38 off at 5e-324); one
    that may be 0 takes it (a tiny weight, a power law's exponent)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {fmt_value(value)}")
    value = finite_float(value, name)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    if not allow_zero:
        check_not_subnormal(value, name)
    return value


def finite_float(value, name):
    """``float(value)`` for a real number, or a ValueError naming ``name`` where it is an integer too large for a
    float (``10**400``: Python's bare "OverflowError: int too large to convert to float" had named nothing)."""
    try:
        return float(value)
    except OverflowError:
        what = f"{type(value).__name__} beyond a float's range (about 1.8e308)"
        if isinstance(value, numbers.Integral):
            bits = abs(int(value)).bit_length()  # (its digits, without str(), which refuses past 4300 of them)
            digits = len(str(abs(int(value)))) if bits < 14000 else f"about {int(bits * math.log10(2)) + 1}"
            what = f"an integer of {digits} digits"
        raise ValueError(f"{name} must be a finite number, got {what}") from None


def check_not_subnormal(value, name, zero_too=False):
    """A ValueError where ``value`` is subnormal, above 0 and below 2.2e-308, where a float keeps fewer digits (the
    words end "use 0 or a value of at least that" with ``zero_too``, for a value that may be 0)."""
    tiny = float(np.finfo(np.float64).tiny)
    if 0 < value < tiny:
        raise ValueError(f"{name} = {value!r} is subnormal (below {tiny:.3g}, where a float loses its digits): use "
                         f"{'0 or ' if zero_too else ''}a value of at least that")


#: NumPy's warning for a ragged nested sequence before 1.24 (an object array then; a ValueError since).
_RAGGED_WARNING = getattr(getattr(np, "exceptions", None), "VisibleDeprecationWarning", None) \
    or getattr(np, "VisibleDeprecationWarning", Warning)


def as_array(value):
    """``np.asarray(value)``, with a ragged nested sequence (rows of different lengths) a ValueError on every NumPy we
    support: NumPy 1.22-1.23 made it an object array with a VisibleDeprecationWarning (an error where warnings are,
    and another message than NumPy 1.24's ValueError: ``.ci/oldest``)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", _RAGGED_WARNING)
        try:
            return np.asarray(value)
        except _RAGGED_WARNING as exc:
            raise ValueError(f"setting an array element with a sequence: the array would have an inhomogeneous "
                             f"shape ({exc})") from None


def per_node_values(value, name, n, accept, bounds):
    """A network layer's parameter given one per node (heterogeneous devices): None where ``value`` is one number
    (the caller checks it as before), else ``n`` finite values each passing ``accept`` (a vectorised test, e.g.
    ``lambda v: (0 <= v) & (v < 1)``; ``bounds`` says it in words) as a read-only float64 array of shape ``(n,)``.
    A TypeError or ValueError names ``name`` and, for a value out of range, the first node that has one."""
    try:
        arr = as_array(value)
    except ValueError as exc:  # (a ragged list: NumPy's words named no argument)
        raise ValueError(f"{name} must be one number or one per node (shape ({n},)), got a ragged sequence "
                         f"({exc})") from None
    if arr.ndim == 0:
        return None
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real number or one per node, got dtype {arr.dtype}")
    if arr.shape != (n,):
        raise ValueError(f"{name} must be one number or one per node (shape ({n},)), got shape {arr.shape}")
    arr = np.array(arr, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(arr) & np.asarray(accept(arr), dtype=bool))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] (node {i}'s) must be {bounds}, got {float(arr[i])!r}")
    arr.flags.writeable = False
    return arr


def per_node_text(value):
    """A per-node parameter as a repr shows it: the number, or ``<n values in [min, max]>``."""
    if np.ndim(value) == 0:
        return f"{value}"
    return f"<{len(value)} values in [{value.min():g}, {value.max():g}]>"


def check_step_size(lr, name="lr"):
    """A step size: one finite number > 0 (a float), or one per replica as an array of shape ``(reps, 1, 1)``
    (it broadcasts against the replicas' axis of ``x``, shape ``(reps, n, d)``): a read-only float64 array of
    finite values > 0. Any other shape is refused, naming the ones taken."""
    if np.ndim(lr) == 0:
        return check_positive_float(lr.item() if isinstance(lr, np.ndarray) else lr, name)
    arr = np.asarray(lr)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a real number or an array of them, got dtype {arr.dtype}")
    if arr.ndim != 3 or arr.shape[1:] != (1, 1) or arr.shape[0] < 1:
        raise ValueError(f"{name} must be one number, or one per replica as an array of shape (reps, 1, 1) (it "
                         f"broadcasts against x's (reps, n, d)), got shape {arr.shape}")
    arr = np.array(arr, dtype=np.float64)
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        k = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name} must be finite and > 0 for every replica, got {float(arr.ravel()[k])!r} for replica {k}")
    arr.flags.writeable = False
    return arr


def check_dtype(dtype, name="dtype"):
    """Return ``dtype`` as float32 or float64, or raise TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {dt}")
    return dt


def precision_of(obj):
    """The value type ``obj`` (an array, a matrix or network, an objective) computes in: float32 where its
    ``dtype`` is, else float64 (the package's two; an object without a dtype, or of another, is float64)."""
    return np.dtype(np.float32) if getattr(obj, "dtype", None) == np.float32 else np.dtype(np.float64)


def as_float_array(x, name, dtype, *, ndim=None, copy=False, finite=True):
    """C-contiguous float array of ``dtype`` from ``x``; raise if it is not numeric (or, with ``finite``, has NaN/Inf)."""
    if (type(x) is np.ndarray and x.dtype == dtype and x.flags.aligned and not copy and x.size > 0 and x.ndim
            and (ndim is None or x.ndim == ndim or (type(ndim) is tuple and x.ndim in ndim))):
        # fast path, the usual case in a run: an array of the dtype, C-ordered or (an optimizer's user view of its
        # node-major block) a strided view copied as the general path below would copy it
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if finite and _core.first_nonfinite(x.reshape(-1, x.shape[-1])) >= 0:
            _raise_nonfinite(x, name)
        return x
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        if hasattr(x, "tocsr") and hasattr(x, "nnz"):  # (a SciPy sparse matrix: "got dtype object", helper 193)
            raise TypeError(f"{name} is a SciPy sparse matrix: pass a dense array ({name}.toarray())")
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    if ndim is not None and arr.ndim not in np.atleast_1d(ndim):
        want = " or ".join(f"{k}-D" for k in np.atleast_1d(ndim))
        raise ValueError(f"{name} must be {want}, got {arr.ndim}-D with shape {arr.shape}")
    # native byte order (dtype is), C order and aligned: the kernels load whole elements
    with np.errstate(over="ignore") if finite else contextlib.nullcontext():  # (a value beyond the dtype's range is
        # said below: NumPy's "overflow encountered in cast" had been printed above the one-line error, helper 193)
        out = np.array(arr, dtype=dtype, order="C", copy=True) if copy else np.require(arr, dtype, ["C", "A"])
    if finite and not np.all(np.isfinite(out)):
        _raise_nonfinite(out, name, arr)
    return out


def _raise_nonfinite(arr, name, source=None):
    """The ValueError of ``arr``'s first NaN or Inf; where ``source`` (what ``arr`` was converted from) is finite
    there, the conversion overflowed ``arr``'s dtype: said so, and the error's ``overflow`` and ``dtype`` attributes
    hold the index and that dtype (a float64 optimizer's iterate beyond a float32 objective's range: its divergence,
    not a bad X)."""
    bad = tuple(np.argwhere(~np.isfinite(arr))[0])
    where = f"{name}[{', '.join(map(str, bad))}]"
    if source is not None:
        value = np.asarray(source)[bad]
        if np.isfinite(value):
            exc = ValueError(f"{name} must be finite in {arr.dtype}; {where} = {value:.6g} is beyond its range "
                             f"(largest {float(np.finfo(arr.dtype).max):.6g})")
            exc.overflow, exc.dtype = bad, arr.dtype
            raise exc
    raise ValueError(f"{name} must be finite; {where} = {arr[bad]}")


def check_out(out, name, shape, dtype):
    """Validate a caller-supplied output array: exact dtype/shape, C-contiguous, writeable."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError(f"{name} must be writeable")
    return out


def fmt_value(v):
    """A number for a message: ``0.4``, not NumPy's ``np.float64(0.4)``."""
    if isinstance(v, (np.integer, np.bool_)):
        return repr(v.item())
    if isinstance(v, np.floating):
        return repr(float(v))
    return repr(v)


def fmt_bytes(nbytes):
    """``1.5 GiB`` and the like."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} B"


def env_number(name, what, default=None, allow_inf=False):
    """The environment variable ``name`` as a number >= 0, finite unless ``allow_inf`` (``inf``: no cap;
    ``default`` where it is unset or blank), or a :class:`~rowstoch_fast.errors.UsageError` naming it and ``what``
    it holds."""
    from .errors import UsageError

    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 and (allow_inf or np.isfinite(value))):
        raise UsageError(f"the environment variable {name} must be {what} (a {'' if allow_inf else 'finite '}number "
                         f">= 0{', or inf' if allow_inf else ''}), got {text!r}")
    return value


def available_memory():
    """Bytes this process may still allocate: ``ROWSTOCH_MEMORY_LIMIT`` if set, else the smallest of
    the kernel's MemAvailable, the cgroup's free quota and what the address-space limit (``ulimit -v``, as a
    cluster's job may set) leaves of this process's size (Linux); None when unknown."""
    limit = env_number("ROWSTOCH_MEMORY_LIMIT", "a number of bytes")
    if limit is not None:
        return int(limit)
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        if cap != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                limits.append(int(cap) - int(f.read().strip()))
    except (OSError, ValueError):
        pass
    room = _address_space_left()
    if room is not None:
        limits.append(room)
    if not limits:
        try:
            limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return None
    return max(0, min(limits))


def _address_space_left():
    """``RLIMIT_AS`` less this process's virtual size (``VmSize``), or None where there is no such limit: past it
    an allocation fails (``std::bad_alloc`` out of a compiled library, with no size) though memory is free."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        return soft - size
    except (ImportError, OSError, ValueError, StopIteration):
        return None


def require_memory(nbytes, what, hint=""):
    """Raise MemoryError at once when ``what`` needs about ``nbytes`` and that is more than is available.

    Called before large allocations, so an impossible request fails with a
    message instead of being killed by the operating system minutes later.
    """
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise MemoryError(f"{what} needs about {fmt_bytes(nbytes)} of memory but only {fmt_bytes(avail)} is "
                          f"available{'; ' + hint if hint else ''}")


def require_npz_memory(archive, keys, what):
    """Raise MemoryError before any of the members ``keys`` of the open ``np.load`` archive ``archive`` is
    decompressed when together they would not fit: the sizes their zip entries declare, which bound what
    ``zipfile`` decompresses (a few MB of deflated zeros can declare gigabytes)."""
    names = {name[:-4] if name.endswith(".npy") else name: name for name in archive.zip.namelist()}
    nbytes = sum(archive.zip.getinfo(names[key]).file_size for key in keys if key in names)
    require_memory(nbytes, what)


#: The fewest characters a line of a text file may hold wherever memory would allow fewer (:func:`bounded_lines`).
MIN_LINE_LIMIT = 2**20


def line_limit():
    """The longest line :func:`bounded_lines` reads by default: a sixteenth of the memory available (a line of
    numbers costs several times its characters once split), at least :data:`MIN_LINE_LIMIT` characters; 2^30
    where the memory available is unknown."""
    avail = available_memory()
    return 2**30 if avail is None else max(MIN_LINE_LIMIT, avail // 16)


def bounded_lines(f, what, limit=None, error=MemoryError):
    """The lines of the open text file ``f``, none read past ``limit`` characters (default :func:`line_limit`):
    a longer one is an ``error`` naming ``what`` and the line. A line that never ends (a file of NUL bytes, a
    binary file) had been read whole into memory by ``for line in f``: a gigabyte of NULs took 6 GB and an OOM
    kill, or a MemoryError with no words (helper 218)."""
    limit = line_limit() if limit is None else limit
    number = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:
            raise error(f"{what}: line {number} is longer than {limit:,} characters (no line end in them: a binary "
                        f"file, or one of NUL bytes?); a text file of numbers has shorter lines")
        yield line


def lines_within_memory(lines, what, delimiter=None, copies=2):
    """The lines of a text file (an open file is read by :func:`bounded_lines`), passed through while the numbers
    they hold so far (``delimiter``-separated; whitespace-separated when None) fit in memory ``copies`` times as
    float64 (the array read and one copy of it); else a MemoryError naming ``what``. For a compressed file, whose
    size on disk does not bound what it holds (a few MB of gzip decompress to gigabytes of ``0,0``), and for an
    uncompressed one too large to rule out by its size."""
    if hasattr(lines, "readline"):  # (one line read whole had been its whole file where none ended, helper 218)
        lines = bounded_lines(lines, what)
    avail = available_memory()
    if avail is None:
        yield from lines
        return
    numbers = 0
    for line in lines:
        numbers += line.count(delimiter) + 1 if delimiter is not None else len(line.split())
        if numbers * 8 * copies > avail:
            raise MemoryError(f"{what} holds at least {numbers:,} numbers (read so far), which need more than the "
                              f"{fmt_bytes(avail)} of memory available")
        yield line


def _index_array(arr, what, name):
    arr = np.asarray(arr)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name}: {what} must be a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
    return arr


def _check_in_range(idx, bound, what, name):
    if idx.size:
        bad = np.flatnonzero((idx < 0) | (idx >= bound))
        if bad.size:
            raise ValueError(f"{name}: {what} index {idx[bad[0]].item()} (entry {bad[0]}) is outside 0..{bound - 1}")


def _check_data_size(data, size, name):
    if data is not None and (np.ndim(data) != 1 or np.size(data) != size):
        raise ValueError(f"{name}: data must be 1-D with {size} entries (one per index), got shape {np.shape(data)}")


def check_csr_arrays(indptr, indices, n_rows, n_cols, name="the CSR matrix", data=None):
    """Validate a CSR structure before SciPy or the kernels see it (malformed ones crash both).

    ``indptr`` must be 1-D integer of length ``n_rows + 1``, start at 0, never
    decrease and end at ``indices.size``; every column index must lie in
    ``0..n_cols-1``; ``data``, when given, holds one value per index. Raises
    ValueError naming ``name`` and the first fault.
    """
    indptr, indices = _index_array(indptr, "indptr", name), _index_array(indices, "indices", name)
    if indptr.size != n_rows + 1:
        raise ValueError(f"{name}: indptr has {indptr.size} entries, expected {n_rows + 1} (rows + 1)")
    if indptr[0] != 0:
        raise ValueError(f"{name}: indptr[0] must be 0, got {indptr[0].item()}")
    if indptr[-1] != indices.size:
        raise ValueError(f"{name}: indptr[-1] = {indptr[-1].item()} but there are {indices.size} column indices")
    falls = np.flatnonzero(np.diff(indptr) < 0)
    if falls.size:
        raise ValueError(f"{name}: indptr must be non-decreasing; it falls at row {falls[0]}")
    _check_in_range(indices, n_cols, "column", name)
    _check_data_size(data, indices.size, name)


def check_coo_arrays(row, col, shape, name="the COO matrix", data=None):
    """Validate COO coordinates (1-D integers of equal length, inside ``shape``) before SciPy sees them."""
    row, col = _index_array(row, "row", name), _index_array(col, "col", name)
    if row.size != col.size:
        raise ValueError(f"{name}: row has {row.size} entries but col has {col.size}")
    _check_in_range(row, shape[0], "row", name)
    _check_in_range(col, shape[1], "column", name)
    _check_data_size(data, row.size, name)


def nodes_first(x0, n, name="x0", xp=np):
    """``x0`` of shape (d,) as (n, d) (one vector for every node); (n, d) and (reps, n, d) unchanged.

    A 1-D ``x0`` of length ``n`` (with ``n > 1``) is refused as ambiguous:
    :meth:`MixingMatrix.mix` reads a 1-D array as one value per node, the
    optimizers as one vector shared by every node.
    """
    if x0.ndim != 1:
        return x0
    if x0.shape[0] == n and n > 1:
        raise ValueError(
            f"{name} has shape ({n},), which is ambiguous with n = {n} nodes: for one value per node (d = 1) "
            f"pass {name}[:, None] (shape ({n}, 1)); for one vector of length {n} shared by every node pass "
            f"np.broadcast_to({name}, ({n}, {n}))")
    return xp.broadcast_to(x0, (n, x0.shape[0]))


def load_npz_file(path, what="file"):
    """Every array of an ``.npz`` archive, as a dict; one clear error for a bad file.

    Raises FileNotFoundError when ``path`` does not exist, and ValueError naming
    ``what`` and the file when it is empty, truncated, corrupted, pickled or
    not an ``.npz`` archive.
    """
    obj = _load_numpy_file(path, what)
    if not isinstance(obj, dict):
        raise ValueError(f"cannot read {what} {path!r}: it holds a single array (.npy), not an .npz archive")
    return obj


def load_npy_file(path, what="file"):
    """The array of an ``.npy`` file; errors as :func:`load_npz_file`."""
    obj = _load_numpy_file(path, what)
    if isinstance(obj, dict):
        raise ValueError(f"cannot read {what} {path!r}: it is an .npz archive, not a single array (.npy)")
    return obj


def _require_npy_memory(fh, what):
    """MemoryError naming ``what`` where the array the .npy header of the open file ``fh`` declares would not fit in
    memory (a header claiming shape (10000000000,) had met NumPy's "Unable to allocate 74.5 GiB", naming nothing);
    ``fh`` is left at its start. A header that cannot be read is left to ``np.load``, whose error is reported."""
    try:
        fmt = np.lib.format
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}[fmt.read_magic(fh)]
        shape, _, dtype = read(fh)
        nbytes = math.prod(shape) * dtype.itemsize
    except Exception:  # noqa: BLE001 - a damaged header: np.load says it below
        nbytes = 0
    fh.seek(0)
    require_memory(nbytes, f"{what} (its header declares that many values)")


def file_kind(path):
    """What ``path`` is where it exists and is not a regular file (nor a link to one): ``"a folder"``, ``"a
    device"``, ``"a FIFO (named pipe)"``, ``"a socket"`` or ``"not a regular file"``; None for a regular file and
    where nothing is (a reader then says "does not exist": of a device it had said so too, helper 218)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return ("a folder" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")


def check_regular_file(path, what, folder="give a file's path"):
    """``path`` if it is a regular file (or a link to one), else an error naming ``what`` and ``path``: a
    FileNotFoundError where nothing is there, an IsADirectoryError for a folder (``folder``: what to give
    instead), a ValueError saying what else it is (a device, a FIFO: a read of which never ends or blocks)."""
    kind = file_kind(path)
    if kind == "a folder":
        raise IsADirectoryError(f"{what} {path!r} is a folder: {folder}")
    if kind is not None:
        raise ValueError(f"{what} {path!r} is {kind}, not a regular file: give a file's path")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    return path


def _load_numpy_file(path, what):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    kind = file_kind(path)
    if kind is not None:  # (a device or a FIFO had been opened and read: without end, or blocked)
        raise ValueError(f"cannot read {what} {path!r}: it is {kind}")
    try:
        with open(path, "rb") as fh:  # our handle: np.load leaks its own when the archive is damaged
            head = fh.read(6)
            fh.seek(0)
            if not head or head.startswith((b"\x93NUMPY", b"PK")):  # (NumPy's words for any other file are
                # pickle's, "load it unsafely using allow_pickle=": said below instead, helper 192)
                if head.startswith(b"\x93NUMPY"):
                    _require_npy_memory(fh, f"{what} {path!r}")
                obj = np.load(fh, allow_pickle=False)
                if isinstance(obj, np.ndarray):
                    return obj
                with obj:
                    require_npz_memory(obj, obj.files, f"{what} {path!r}")
                    return {k: obj[k] for k in obj.files}
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file raises BadZipFile, EOFError, ValueError, zlib.error ...
        size = os.path.getsize(path)
        why = "it is empty" if size == 0 else f"it is truncated, corrupted or not a NumPy file ({type(exc).__name__}: {exc})"
        raise ValueError(f"cannot read {what} {path!r}: {why}") from None
    raise ValueError(f"cannot read {what} {path!r}: it is not a NumPy file (.npy or .npz): it begins {head!r}")


def caller_outside():
    """The ``stacklevel`` of the first frame outside this package, for a warning raised below it (an
    optimizer's ``step``, or ``tell`` of ask/tell, which steps; ``A.mix`` through ``mix_power``)."""
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, frame = 1, sys._getframe(2)  # (the caller of the function that warns)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level + 1


def outside_package(cls):
    """Whether the class ``cls`` is defined outside this package (a user's method or network layer)."""
    return not cls.__module__.startswith(__name__.split(".")[0] + ".")


def int_option(minimum, what):
    """An ``argparse`` type: an integer >= ``minimum`` (``what`` names it in the error)."""
    import argparse

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


positive_int = int_option(1, "a positive integer")
nonnegative_int = int_option(0, "a non-negative integer")


def seed_option(text):
    """An ``argparse`` type: a seed, an integer in [0, 2^64 - 1] (the hashed streams take 64-bit keys)."""
    import argparse

    value = nonnegative_int(text)
    if value > MAX_KEY:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, 2^64 - 1], got {value}")
    return value
