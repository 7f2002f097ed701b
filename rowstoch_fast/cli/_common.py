"""What the commands share: the options' checks and the rules that refuse an option a command would not read,
the network and objective built from the options, the output folders, one-line errors.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import sys

import numpy as np

from ..algorithms import labels, REGISTRY
from ..backends.mpi import polled_barrier
from ..errors import UsageError
from ..io import DATA_OBJECTIVES as OBJECTIVES, load_data_file, load_matrix, weights_said
from ..network import options as network_options
from ..topology import PAPER_WEIGHTS, by_name as build_topology


def _topology_n(args):
    """``--n`` (16 when not given); a paper graph refuses any other n instead of ignoring it."""
    if args.topology.startswith("paper-") and args.n not in (None, 16):
        raise UsageError(f"--topology {args.topology} is the paper's 16-node graph; it takes no other --n (got "
                         f"{args.n})")  # (by_name's words: checked here too, before what reads n first)
    return 16 if args.n is None else args.n


def _is_square(n):
    return int(round(np.sqrt(n))) ** 2 == n


def _writable_folder(path, option):
    """Create ``path`` if needed and prove it writable now (before any computation); its absolute path."""
    import tempfile

    _refuse_empty(path, option)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path!r} exists and is not a folder")
    missing, folder = [], os.path.abspath(path)
    while folder and not os.path.exists(folder):  # (removed again if the command is refused: remove_created)
        missing.append(folder)
        folder = os.path.dirname(folder)
    try:
        os.makedirs(path, exist_ok=True)
        _created.extend(missing)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rowstoch-write-test-"):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path!r} is not writable: {exc.strerror or exc}") from None
    return os.path.abspath(path)


_created = []  # the folders this command made (deepest first within each call)


def remove_created():
    """Remove the folders the command made that are still empty: a refused command leaves nothing behind."""
    for folder in _created:
        try:
            os.rmdir(folder)
        except OSError:  # (not empty, or gone)
            pass
    _created.clear()


def _writable_file(path, option):
    """The folder of ``path`` must be writable (checked before the run, not after it)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path!r} is a folder; give a file name such as {os.path.join(path, 'ck.npz')!r}")
    _writable_folder(folder, option + " (its folder)")


def file_label(path):
    """The name of the file ``path`` as titles, tables and captions show it: its base name, its bytes read as
    UTF-8 (under the C locale with Python's UTF-8 mode off a non-ASCII name arrives with its bytes escaped as
    lone surrogates, which no figure can draw and no UTF-8 file can hold: a comparison's outputs were lost)."""
    return os.fsencode(os.path.basename(path)).decode("utf-8", "replace")


@contextlib.contextmanager
def _named_in_memory_errors(option, path):
    """A MemoryError while the file of ``option`` is read names it (a file declaring 10^10 rows gave "out of
    memory: Unable to allocate 74.5 GiB", naming no option)."""
    try:
        yield
    except MemoryError as exc:
        if str(exc).startswith(option):  # (named already)
            raise
        raise MemoryError(f"{option} {path!r}: {exc or 'the file does not fit in memory'}") from None


def load_matrix_option(path, normalize):
    """``--matrix``: :func:`~rowstoch_fast.io.load_matrix` of the network's row-stochastic A, its refusal of a
    column-stochastic file in the command line's words (it named the API's ``stochastic='column'``, helper 187)."""
    try:
        with _named_in_memory_errors("--matrix", path):
            return load_matrix(path, normalize)
    except UsageError as exc:
        said = "read it as one with stochastic='column'; normalize=True would rescale its rows into another matrix"
        advice = "pass normalize=True (--normalize)"  # (the library's: in the command line's words, which a
        # --no-normalize written makes "drop --no-normalize", helper 266)
        if advice in str(exc):
            raise UsageError(str(exc).replace(advice, "add --normalize")) from None
        if said not in str(exc):
            raise
        raise UsageError(str(exc).replace(said, "--matrix takes the network's row-stochastic A, from whose graph the "
                                                "push methods build their C; --normalize would rescale its rows into "
                                                "another matrix")) from None


def _matrix_from_args(args):
    if args.matrix:
        return load_matrix_option(args.matrix, args.normalize)
    return build_topology(args.topology, _topology_n(args), args.seed, undirected=getattr(args, "undirected", False),
                          weights=getattr(args, "weights", "in-degree"))


def _check_objective_size(args, n):
    """The synthetic logistic data's size on ``n`` nodes checked (:func:`_fitted_size`) before anything is built."""
    if not args.objective.startswith("logistic") or getattr(args, "data_file", None):  # (a file: when it is read)
        return
    _fitted_size(args, n)


def _fitted_size(args, n):
    """``(total, batch)`` of the synthetic logistic data on ``n`` nodes: ``--total`` divisible by ``n``, ``--batch``
    within the samples per node. Where they were not given (on the command line or in an experiment file), their
    defaults are fitted to ``n``: the most samples up to :data:`DEFAULT_TOTAL` that ``n`` nodes share evenly
    (``--n 12`` had been refused for an option nobody wrote), the default batch lowered to the samples per node.
    The options keep what was asked (a comparison's graphs of other sizes, and its resume, fit them alike)."""
    total, given = args.total, getattr(args, "given", None)
    if given is not None and "--total" not in given and total == DEFAULT_TOTAL:
        if n > DEFAULT_TOTAL:
            raise UsageError(f"--total's default ({DEFAULT_TOTAL} samples) gives less than one sample to each of the "
                             f"{n} nodes; give --total (a multiple of {n})")
        total = n * (DEFAULT_TOTAL // n)
    if total % n:
        raise UsageError(f"--total {total} samples must be divisible by the {n} nodes (e.g. --total {n * max(1, total // n)})")
    return total, _batch_for(args, total // n, "(--total / n)")


def progress_option(args):
    """What the library's ``progress=`` gets: False (``-q``, ``--no-progress``), ``"always"`` (``--progress``) or
    True (bars where someone watches: a terminal or a notebook, never inside a log file's tables)."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return False
    return "always" if getattr(args, "progress", False) else True


#: What MPI launchers tell each process: the number of processes and this one's rank (MPICH's Hydra, Open MPI).
_LAUNCHED = (("PMI_SIZE", "PMI_RANK"), ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"))


def warn_unshared_launch(args):
    """A warning where ``mpiexec -n P`` started the command without ``--backend mpi``: each of the P processes
    ran the whole problem (and wrote the same outputs), with nothing said. Printed by the launch's first process."""
    if getattr(args, "backend", None) == "mpi":
        return
    size, rank = _launched()
    if size > 1 and rank == 0:
        print(f"rowstoch: warning: started by an MPI launcher with {size} processes but without --backend "
              "mpi: each process runs the whole problem; pass --backend mpi to share it between them",
              file=sys.stderr)


def refuse_shared_launch(command):
    """UsageError on every process where an MPI launcher started ``command`` (one that runs in one process: the
    reproductions, the demo) with several: they would all write the same files, and refuse or remove each other's."""
    size, _ = _launched()
    if size > 1:
        raise UsageError(f"{command} runs in one process, but an MPI launcher started {size}: they would write the "
                         "same files; run it without mpiexec")


def _launched():
    """``(processes, rank)`` of an MPI launch as its environment says (``(1, 0)`` outside one)."""
    for size_key, rank_key in _LAUNCHED:
        size = os.environ.get(size_key, "")
        if size.isdigit():
            rank = os.environ.get(rank_key, "0")
            return int(size), int(rank) if rank.isdigit() else 0
    return 1, 0


def narrator(args, root=True):
    """``say(*lines)``: the command's narration (what it is doing, what it wrote), silent with ``-q`` and on the MPI
    ranks other than the root. Results, warnings and errors are printed whatever ``-q`` says."""
    if getattr(args, "quiet", False) or not root:
        return lambda *a, **k: None
    return print


def configure_logging(args):
    """The ``rowstoch_fast`` logger on stderr: WARNING, INFO with ``-v``, DEBUG with ``-vv``, ERROR with ``-q``.
    Returns a function that undoes it (a command run from Python leaves the logger as it found it)."""
    import logging

    logger = logging.getLogger("rowstoch_fast")
    verbose = getattr(args, "verbose", 0) or 0
    level = logging.ERROR if getattr(args, "quiet", False) else (logging.DEBUG if verbose > 1 else logging.INFO
                                                                   if verbose else logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rowstoch: %(levelname)s: %(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)

    def undo():
        logger.removeHandler(handler)
        logger.setLevel(previous)

    return undo


def _stage(enabled):
    """``stage(text)`` shows what the set-up is doing on stderr at once (the run's own bar follows);
    ``stage(None)`` clears the line."""
    if not enabled:
        return lambda text: None
    shown = _shown_stage

    def stage(text):
        line = "" if text is None else f"rowstoch: {text} ..."
        sys.stderr.write("\r" + line.ljust(shown[0]) + ("\r" if text is None else ""))
        sys.stderr.flush()
        shown[0] = len(line)
        if text is not None:
            last_stage[0] = text

    return stage


_shown_stage = [0]  # the length of the set-up line on stderr now (0: none)
#: The last set-up line shown (what an error without words of its own happened during), or None.
last_stage = [None]


def drop_turned_off(text, given):
    """``(text, dropped)``: each "add --X" of a refusal where ``--no-X`` is among the options ``given`` written
    "drop --no-X" (helper 181: "(add [network] undirected)" to a file that has the key, after --no-undirected; helper
    183: ``rowstoch run``'s "(add --undirected)" there), and the set of those ``--no-X``."""
    dropped = set()

    def drop(m):
        off = f"--no-{m.group(1)}"
        if off not in given:
            return m.group(0)
        dropped.add(off)
        return f"drop {off}"

    return re.sub(r"\badd --([a-z][\w-]*)", drop, text), dropped


def as_written(args, settings):
    """``settings`` (``{option: value}``, True for a flag: ``{"--undirected": True, "--weights": "metropolis"}``) as
    the user would write them: as options (``--undirected --weights metropolis``), or, those an experiment file can
    set and the command line does not write (``args.file_spelling``: :func:`.compare._read_experiment_file`), as
    the file's keys, table by table (``[network] undirected = true, weights = "metropolis"``): advice in the words
    of the route that sets what it advises on (helper 219: a file's refusal had read "[network] undirected [network]
    weights metropolis")."""
    import json

    spelled = getattr(args, "file_spelling", None) or {}
    flags, tables = [], {}
    for option, value in settings.items():
        if option in spelled:
            table, key = spelled[option].split(" ", 1)
            tables.setdefault(table, []).append(f"{key} = {json.dumps(value)}")
        else:
            flags.append(option if value is True else f"{option} {value}")
    return " and ".join(filter(None, [" ".join(flags), "; ".join(f"{table} {', '.join(keys)}"
                                                                    for table, keys in tables.items())]))


#: The library's advice to build a network with an undirected graph's doubly stochastic W (compare.plan: a method
#: that runs on one, an objective that only such methods take): Python's words, before the command line's; and what
#: it sets.
_UNDIRECTED_IN_PYTHON = "directed=False, weights='metropolis'; on the command line "
_UNDIRECTED = {"--undirected": True, "--weights": "metropolis"}
#: The mixing matrix's advice where a doubly stochastic W is needed (mixing._check_sums): Python's words.
_METROPOLIS_IN_PYTHON = "weights='metropolis' builds such a W from an undirected graph"


def advice_as_written(args, text):
    """``text``, a library's refusal, with its advice to build an undirected network's doubly stochastic W in the
    words of the route that sets the network (:func:`as_written`): ``--undirected --weights metropolis`` on the
    command line, ``[network] undirected = true, weights = "metropolis"`` in an experiment file; Python's
    ``directed=False`` dropped (helper 219: a file's refusal had read "build it with directed=False, [network] weights
    = 'metropolis'; on the command line [network] undirected [network] weights metropolis")."""
    return text.replace(_UNDIRECTED_IN_PYTHON, "").replace(as_written(argparse.Namespace(), _UNDIRECTED),
                                                           as_written(args, _UNDIRECTED)) \
        .replace(_METROPOLIS_IN_PYTHON, f"{as_written(args, _UNDIRECTED)} build such a W")


def _error(text):
    """Print ``rowstoch: text`` on a line of its own (a set-up line still shown is cleared first)."""
    if _shown_stage[0]:
        sys.stderr.write("\r" + " " * _shown_stage[0] + "\r")
        _shown_stage[0] = 0
    print(f"rowstoch: {text}", file=sys.stderr)


def default_lr(method, n):
    """``rowstoch run``'s step size without ``--lr``: the paper's ``0.05 / n`` for methods whose tracker follows
    the sum of the gradients (the Pull-Diag family), 0.05 for the others."""
    return REGISTRY[method].default_lr(n)


def _objective_from_args(args, n):
    """The objective of the options (``--split``: the training samples over the nodes by a named split)."""
    f = _objective_of(args, n)
    split = getattr(args, "split", None) or "contiguous"
    if split == "contiguous" or not args.objective.startswith("logistic"):  # (others refused: _problem_rules)
        return f
    from ..datasets import split_samples
    from ..objectives import _handed_over

    try:
        H, Y = split_samples(f.H, f.Y, n, split, seed=args.data_seed)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--split {split}: {exc}") from None
    if len(Y) < len(f.Y) and _launched()[1] == 0:  # (classes:K cuts each node to the smallest's size: helper 180's
        # 1,600 samples with 5% positives became 144, half of them positive, and nothing said so)
        print(f"rowstoch: warning: --split {split} keeps {len(Y)} of the {len(f.Y)} training samples ({len(Y) // n} "
              "per node: each node cut to the smallest node's size)" + _classes_kept(f.Y, Y), file=sys.stderr)
    _handed_over(H, Y)  # (the split's own arrays: kept without a copy, helper 268)
    again = type(f)(H, Y, n, batch=_batch_for(args, len(Y) // n, f"after --split {split}"), dtype=f.dtype,
                    test_data=f.test_data, **f._regulariser())
    if hasattr(f, "x_opt"):
        again.x_opt = f.x_opt
    # (what made the data, and how it was split: experiment.json's objective had dropped the generator, its seed,
    # total and heterogeneity under --split iid|sorted, helper 261)
    again.source = {**getattr(f, "source", {}), "split": split,
                    **({} if split == "sorted" else {"split_seed": args.data_seed})}  # ("sorted" draws nothing)
    return again


def _classes_kept(before, after):
    """``"; labels ..."``: each label's share of the samples before and after a split that dropped some, where it
    changed by more than a percent point, else ""."""
    labels = np.unique(before)
    if len(labels) > 10:  # (more classes than a line reads)
        return ""
    old = [float(np.mean(before == c)) for c in labels]
    new = [float(np.mean(after == c)) for c in labels]
    if max(abs(a - b) for a, b in zip(old, new)) <= 0.01:
        return ""
    return "; labels " + ", ".join(f"{c:g} {a:.0%} -> {b:.0%}" for c, a, b in zip(labels, old, new))


#: ``--batch``'s default: the mini-batch per node and gradient of the logistic objectives.
DEFAULT_BATCH = 200

#: ``--total``'s default: the synthetic logistic data's samples in all (the paper's, Appendix E.2), lowered to the
#: nearest multiple of the nodes where it was not given (:func:`_fitted_size`).
DEFAULT_TOTAL = 204800


def _batch_for(args, rows, where):
    """``--batch`` for nodes of ``rows`` samples each: the default (:data:`DEFAULT_BATCH`) lowered to ``rows``
    where they are fewer; a batch given above them refused (it was lowered, unsaid: a file's ``batch = 20`` ran
    at 10)."""
    given = "--batch" in args.given if hasattr(args, "given") else args.batch != DEFAULT_BATCH
    if args.batch > rows and given:
        raise UsageError(f"--batch {args.batch} exceeds the {rows} samples per node {where} (give --batch {rows} or "
                         "fewer)")
    return min(args.batch, rows)


def _objective_of(args, n):
    from ..composite import L1
    from ..objectives import LeastSquares, LogisticL2, NonconvexLogistic, Quadratic, _handed_over

    if args.objective == "lasso":  # least squares + l1 ||x||_1: the proximal methods' problem
        smooth = _objective_of(argparse.Namespace(**{**vars(args), "objective": "least-squares"}), n)
        return smooth + L1(args.l1)

    dtype = np.float32 if getattr(args, "dtype", "float64") == "float32" else np.float64
    if getattr(args, "data_file", None):  # the nodes share the file's rows evenly, node i the i-th block
        with _named_in_memory_errors("--data-file", args.data_file):
            H, y, test, unread = load_data_file(args.data_file, args.objective, test=True)
        if unread:
            print(f"rowstoch: warning: --data-file {args.data_file!r} holds {', '.join(unread)}, which it does not "
                  "read (it reads H and y, and H_test and y_test: a held-out test set)", file=sys.stderr)
        if len(y) % n:
            raise UsageError(f"--data-file {args.data_file!r} has {len(y)} rows, which the {n} nodes cannot share "
                             f"evenly (node i takes the i-th of {n} equal blocks of its rows)")
        batch = _batch_for(args, len(y) // n, f"of --data-file {args.data_file!r}") \
            if args.objective != "least-squares" else None
        _handed_over(H, y, *(test or ()))  # (the file's arrays, the objective's alone: kept without a copy)
        try:  # (the file's arrays refused by the objective: "H must be finite" named no option)
            if args.objective == "least-squares":
                f = LeastSquares(H, y, n, test_data=test)
            elif args.objective == "logistic-l2":
                f = LogisticL2(H, y, n, lam=args.lam, batch=batch, dtype=dtype, test_data=test)
            else:
                f = NonconvexLogistic(H, y, n, rho=args.rho, batch=batch, dtype=dtype, test_data=test)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"--data-file {args.data_file!r}: {exc}") from None
        return _finite_at_start(f, args.data_file, H, y)
    test = getattr(args, "test_samples", 0) or 0  # (held-out samples of the synthetic law)
    if args.objective.startswith("logistic"):
        total, batch = _fitted_size(args, n)
    if args.objective == "logistic":
        return NonconvexLogistic.synthetic(n, total=total, d=args.d, rho=args.rho, batch=batch,
                                           seed=args.data_seed, heterogeneity=args.heterogeneity, dtype=dtype,
                                           test_samples=test)
    if args.objective == "logistic-l2":
        return LogisticL2.synthetic(n, total=total, d=args.d, lam=args.lam, batch=batch,
                                    seed=args.data_seed, heterogeneity=args.heterogeneity, dtype=dtype,
                                    test_samples=test)
    if args.objective == "least-squares":
        return LeastSquares.synthetic(n, samples_per_node=args.samples_per_node, d=args.d,
                                      heterogeneity=args.heterogeneity, seed=args.data_seed, test_samples=test)
    return Quadratic.random(n, args.d, seed=args.data_seed, sigma=args.sigma, dtype=dtype)


def _finite_at_start(f, path, H, y=None):
    """``f``, where its loss and gradient at its start are finite; else a UsageError naming the data file (helper
    180: features of 1e200 overflowed the loss at the start, and every method ran and was reported `diverged`,
    "not finite from the start", exit 0)."""
    with np.errstate(all="ignore"):
        value, grad = f.value_and_gradient_at(np.asarray(f.x0(), dtype=np.float64))
        finite = bool(np.isfinite(value)) and bool(np.isfinite(np.asarray(grad)).all())
    if not finite:
        raise UsageError(f"--data-file {path!r}: the loss or its gradient at the start is not finite (loss {value:g}) "
                         f"in {np.dtype(f.dtype).name}: its rows overflow ({_largest(H, y)}); rescale them")
    from ..objectives import optimum_of

    try:  # (its solver's failure, cached where it succeeds: "LogisticL2.optimum()'s minimiser is not finite" had
        with np.errstate(all="ignore"):  # named neither the file nor what to do, helper 180's features of 1e200)
            optimum_of(f)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        raise UsageError(f"--data-file {path!r}: its optimum x* could not be computed ({str(exc).split(': ')[0]}); "
                         f"{_largest(H, y)}: rescale its rows") from None
    return f


def _largest(H, y):
    """"the largest entry of H is ..." (and of y, where it is the larger: y = 1e300 had been blamed on H's 3.77,
    helper 185)."""
    h = float(np.max(np.abs(H))) if np.size(H) else 0.0
    said = f"the largest entry of H is {h:.3g}"
    if y is not None and np.size(y) and float(np.max(np.abs(y))) > h:
        said += f", of y {float(np.max(np.abs(y))):.3g}"
    return said


def _metrics_module(args):
    """``--metrics-module FILE``: run it (its register_metric calls) and return the names it registered; its
    errors as one line. The option then holds the file's absolute path (what experiment.json records)."""
    path = getattr(args, "metrics_module", None)
    if not path:
        return ()
    from .._checks import check_regular_file
    from ..user_metrics import load_metrics_module

    try:  # (a folder, a device or a FIFO said as such, not as the file's own failure: helper 218)
        check_regular_file(path, "--metrics-module", "give the Python file in it")
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    try:
        names = load_metrics_module(path)
    except Exception as exc:  # noqa: BLE001 - the file's own error, in one line
        raise UsageError(f"--metrics-module {path!r} failed: {type(exc).__name__}: {exc}") from None
    if not names:
        raise UsageError(f"--metrics-module {path!r} registers no metric (call rowstoch_fast.register_metric(name, fn) "
                         "in it)")
    args.metrics_module = os.path.abspath(path)
    return names


def _check_objective_args(args):
    """The objective's options: defaults that depend on ``--objective`` filled in, values checked."""
    if args.heterogeneity is None:
        args.heterogeneity = 0.0 if args.objective in ("logistic", "quadratic") else 1.0
    # (lasso: least squares' defaults)
    dtype = getattr(args, "dtype", None) or "float64"
    top = math.sqrt(float(np.finfo(dtype).max)) * 1e-6  # (the loss, a sum over the samples, scales as the square
    # of these: 1.3e152 left f within 40x of overflow, and the figure's ticks failed on it: helper 169)
    for name in ("rho", "heterogeneity", "sigma"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value >= 0):
            raise UsageError(f"--{name} must be a finite number >= 0, got {value}")
        if value > top:  # (1e308 failed as "y must be finite; y[0] = inf", 1e200 as "f* is inf", --sigma 1e300 ran
            # every rate into NaN: helper 167)
            raise UsageError(f"--{name} must be at most {top:.3g} in {dtype} (the loss grows as its square, which "
                             f"would overflow), got {value:g}")
    if not (np.isfinite(args.lam) and args.lam > 0):
        raise UsageError(f"--lam must be a finite number > 0, got {args.lam}")
    if args.lam > top:  # (1e308 ran, and diverged at every rate: exit 3, helper 185)
        raise UsageError(f"--lam must be at most {top:.3g} in {dtype} (the ridge term lam ||x||^2 / 2 would overflow "
                         f"at |x| of order 1), got {args.lam:g}")
    if not (np.isfinite(args.l1) and args.l1 >= 0):
        raise UsageError(f"--l1 must be a finite number >= 0, got {args.l1}")
    if args.objective in ("least-squares", "lasso") and getattr(args, "dtype", "float64") != "float64":
        raise UsageError(f"--objective {args.objective} runs in float64 only (drop --dtype)")


def outside_the_raised(message, rewrite):
    """``rewrite(text)`` of ``message`` up to what the user's code raised, quoted after ``raised ValueError: ``,
    which is kept as it was (a metric's "metric fails" had read "--metric fails", helper 261)."""
    quoted = re.search(r" raised [A-Za-z_][\w.]*: ", message)
    return rewrite(message[:quoted.end()]) + message[quoted.end():] if quoted else rewrite(message)


def _as_options(message, options):
    """An error of the Python API as the command line's: the argument names it mentions (``rounds_budget =
    5 ...``) become the options that set them (``--rounds-budget = 5 ...``), outside what the user's code raised
    (:func:`outside_the_raised`)."""
    pattern = re.compile(r"(?<![\w-])(" + "|".join(options) + r")(?![\w-])")
    return outside_the_raised(message, lambda text: pattern.sub(lambda m: options[m.group(1)], text))


def refuse_on_every_rank(args, refused):
    """Raise the root's refusal (a message, or None) on every process: under ``--backend mpi`` it is broadcast, so
    that every rank stops or none does (the others would wait in the run's first collective)."""
    if args.backend == "mpi":
        from mpi4py import MPI

        refused = MPI.COMM_WORLD.bcast(refused, root=0)
    if refused:
        raise UsageError(refused)


def parsed_settings(args):
    """``{dest: value}`` of a parsed command line, as the ranks compare it (:func:`refuse_different_arguments`): the
    values the parser made, so that ``--out=o`` and ``--out o``, or the same options in another order, are the
    same command; a function the parser set (the subcommand's) by its name; and ``given``, the options written out
    (``args.given``: what the command reads besides their values, which settings of a file they override)."""
    out = {key: (value.__qualname__ if callable(value) else value) for key, value in sorted(vars(args).items())
           if key not in ("given", "parsed", "argv")}
    out["given"] = sorted(getattr(args, "given", ()))
    return out


def _as_written(key, value, other):
    """One parsed setting as an option would give it: ``--rounds-budget 600``, ``--no-progress``, ``no --lr``;
    for ``given``, the first option written on one rank and not on the other (``other``'s list)."""
    if key == "command":
        return f"the command {value}"
    if key == "given":
        extra = [option for option in value if option not in other]
        return f"{extra[0]} written" if extra else "nothing more written"
    option = "--" + key.replace("_", "-")
    if value is None or value is False:
        return f"no {option}"
    if value is True:
        return option
    return f"{option} {','.join(map(str, value)) if isinstance(value, (list, tuple)) else value}"


class RanksDiffer(UsageError):
    """The MPI ranks' parsed commands differ (:func:`refuse_different_arguments`): worded as each rank's command
    line has it, never reworded as an experiment file's keys (a setting one rank wrote as ``--n 8`` and the other
    took from its file)."""


def refuse_different_arguments(args):
    """Under ``--backend mpi``, the command's parsed arguments compared between the ranks, refused on every rank
    where one differs, naming it: an MPMD launch (``mpiexec -n 1 rowstoch compare ... : -n 1 rowstoch compare ...
    --rounds-budget 600``) ran two problems whose collectives never matched, both ranks spinning past any signal.
    What is compared is the parse (:func:`parsed_settings`), not the words: ``--out=o`` on one rank and ``--out o``
    on another had been refused. Values are compared as JSON (a NaN equals a NaN: it is refused by the command's
    own check, on every rank)."""
    if getattr(args, "backend", None) != "mpi":
        return
    from ..backends import first_difference

    mine = getattr(args, "parsed", None)
    if mine is None:  # (a namespace made without main: parsed here, as main would have)
        mine = parsed_settings(args)
    every = _every_rank(mine)
    found = first_difference(every)
    if found is not None:
        rank, key = found
        theirs, first = every[rank].get(key), every[0].get(key)
        raise RanksDiffer(f"the MPI ranks were given different arguments: rank {rank} has "
                          f"{_as_written(key, theirs, first or [])!r} where rank 0 has "
                          f"{_as_written(key, first, theirs or [])!r}; launch every rank with the same command")


def _every_rank(mine):
    """``mine`` of every MPI rank, in rank order, once all have come (:func:`polled_barrier`: a rank that never
    comes leaves the others waiting where a signal still reaches them)."""
    from mpi4py import MPI

    polled_barrier()
    return MPI.COMM_WORLD.allgather(mine)


def on_every_rank(args, fn, *a):
    """``fn(*a)`` on every process: under ``--backend mpi`` a refusal on one rank is raised on all (a data file or a
    metrics module only one rank could read left the others waiting in the run's first collective): as a usage
    error where it was one (:data:`_REFUSED_ON_A_RANK`), else as the :class:`~rowstoch_fast.errors.RemoteError`
    that names it (a bug on one rank read as a usage error on the others)."""
    if getattr(args, "backend", None) != "mpi":
        return fn(*a)
    try:
        from mpi4py import MPI
    except ImportError:  # (said by the command's own check)
        return fn(*a)
    from ..backends.mpi import collective
    from ..errors import RemoteError

    try:
        return collective(MPI.COMM_WORLD, fn, *a)
    except RemoteError as exc:  # ("rank 1 failed: UsageError: --data-file ..." -> "rank 1: --data-file ...")
        refused = re.sub(_REFUSED_ON_A_RANK, r"\1: ", str(exc))
        if refused == str(exc):  # (another rank's unexpected error, a bug: not a one-line usage error here)
            raise
        raise UsageError(refused) from None


#: Another rank's error that is a refusal of what it was given (said as one line on every rank); any other is
#: raised as it is (a traceback, exit 1).
_REFUSED_ON_A_RANK = r"^(rank \d+) failed: (UsageError|ValueError|MemoryError|FileNotFoundError|PermissionError): "


def _refuse_empty(path, option):
    """An empty folder name is a mistake, not the current folder."""
    if not str(path).strip():
        raise UsageError(f"{option} is empty: give a folder (e.g. {option} results)")


def _check_out_folder(path, option="--out"):
    """``path`` can be created or written (checked without creating anything: a folder appears only when there
    is something to write in it)."""
    _refuse_empty(path, option)
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path!r} exists and is not a folder")
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path!r} is not writable ({parent!r} is not a writable folder)")
    return path


def _list_option(text, option, choices):
    """A comma-separated option's values, each among ``choices`` (one line naming the option otherwise)."""
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    bad = [v for v in values if v not in choices]
    if bad or not values:
        raise UsageError(f"{option} must be a comma-separated list of {', '.join(choices)}; got "
                         f"{', '.join(map(repr, bad)) if bad else 'nothing'}")
    return list(dict.fromkeys(values))


#: Options that go with one value of another (a layer's model and its parameters): ``{(option, value): options}``.
_GO_WITH = {("--loss-model", "gilbert-elliott"): ("--p-bad", "--p-recover")}


def _settings(args):
    """``[(label, args of one setting)]``: the communication settings the sweepable options list (one, labelled
    "", without lists), every one checked (:func:`rowstoch_fast.network.options.settings`); a parameter given
    without the model it goes with (:data:`_GO_WITH`) refused first, naming that model in the route's words
    (:func:`as_written`: the layer's "--loss-model gilbert-elliott needs --p-bad and --p-recover" had read, to a
    file with p_bad alone, as if it set loss_model, helper 219)."""
    for (option, value), parameters in _GO_WITH.items():
        given = [p for p in parameters if getattr(args, p[2:].replace("-", "_"), None) is not None]
        if given and getattr(args, option[2:].replace("-", "_"), None) != value:
            raise UsageError(f"{' and '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                             f"{as_written(args, {option: value})} (they go with that model only)")
    return network_options.settings(args, args.given, dropped=lambda written, why: dropped_unread(args, written, why))


def _one_setting(args):
    """``rowstoch run``'s one communication setting: each sweepable option (``--loss``, ``--compress``) a single
    value."""
    settings = _settings(args)
    if len(settings) > 1:
        swept = " and one ".join(o.flag for o in network_options.declared() if isinstance(o.kind, str))
        raise UsageError(f"rowstoch run takes one {swept} item; rowstoch compare takes several")
    ns = settings[0][1]
    for name in network_options.names():
        setattr(args, name, getattr(ns, name))


TOPOLOGY_HELP = {
    "exponential": "directed exponential graph: i sends to i + 2^k (mod n); the paper's graph for any n",
    "ring": "directed ring: i sends to i + 1 (mod n); --undirected: i - 1, i, i + 1",
    "grid": "undirected sqrt(n) x sqrt(n) grid (n must be a square)",
    "torus": "undirected sqrt(n) x sqrt(n) torus: the grid wrapped around (n must be a square)",
    "geometric": "random geometric graph in the unit square (radius ~ 2 sqrt(ln n / n), --seed)",
    "nearest_neighbor": "each node linked both ways to its 3 nearest random neighbours (--seed)",
    "erdos_renyi": "directed Erdos-Renyi graph, p = 2 ln n / n, repaired to be strongly connected (--seed); "
                   "--undirected: redrawn until connected",
    "complete": "complete graph, A = 1 1^T / n",
    "star": "undirected star around node 0",
    "paper-ring": "the paper's 16-node directed ring (Appendix E.1)",
    "paper-grid": "the paper's 16-node grid (Appendix E.1)",
    "paper-geometric": "the paper's 16-node geometric graph (Appendix E.1)",
    "paper-nearest_neighbor": "the paper's 16-node nearest-neighbour graph (Appendix E.1)",
}


def _algorithm_names():
    return labels(every_mg=True)


def _refuse_unread(args, rules):
    """UsageError for an option written on the command line that the run would not read: ``rules`` holds
    ``(options, unread, why)`` (ignoring it would run something other than what was asked for); an experiment
    file's options that a choice of the command line leaves unread are dropped instead (:func:`dropped_unread`)."""
    for options, unread, why in rules:
        written = [o for o in options if o in args.given]
        if written and unread and not dropped_unread(args, written, why):
            raise UsageError(f"{' and '.join(written)} {'is' if len(written) == 1 else 'are'} not read {why}")


def dropped_unread(args, written, why):
    """Whether the options ``written``, which the run would not read (``why``, naming the options that decide it),
    were all set by an experiment file while an option that ``why`` names was written on the command line: then
    they are dropped (their defaults back, no longer given) and said (``args.dropped_keys``: ``(option, why)``).
    The command line wins over the file, and so over the file's keys that went with the choice it replaced: a file's
    ``compress = "topk"``, ``k = 2`` beside ``--compress qsgd:4`` had been refused ("[communication] k is not read
    without --compress topk or randk"), as had its ``cost_weights`` beside ``--x rounds``, its
    ``samples_per_node`` beside another ``--objective`` and its ``topology`` beside ``--matrix`` (helper 266). A
    file's key that the file itself leaves unread is still refused."""
    from_file, command_line = getattr(args, "file_defaults", {}), getattr(args, "command_line", set())
    if not written or not all(o in from_file for o in written) \
            or not set(re.findall(r"(?<![\w-])--[a-z][\w-]*", why)) & command_line:
        return False
    for option in written:
        dest, default = from_file[option]
        setattr(args, dest, default)
        args.given.discard(option)
        args.dropped_keys = getattr(args, "dropped_keys", []) + [(option, why)]
    return True


def _matrix_rules(args, network_options=("--topology", "--n")):
    """``--normalize`` needs ``--matrix``; the options that build a network are not read with one."""
    return [(("--normalize",), not args.matrix, "without --matrix"),
            ((*network_options, "--undirected", "--weights"), bool(args.matrix),
             "with --matrix (the file is the network)")]


def _problem_rules(args):
    """What ``run`` and ``compare`` share: the objective's options and the network's."""
    obj = f"with --objective {args.objective}"
    return [(("--total", "--batch"), not args.objective.startswith("logistic"), obj),
            (("--rho",), args.objective != "logistic", obj),
            (("--lam",), args.objective != "logistic-l2", obj),
            (("--samples-per-node",), args.objective not in ("least-squares", "lasso"), obj),
            (("--l1",), args.objective != "lasso", obj),
            (("--heterogeneity",), args.objective == "quadratic", obj),
            (("--data-file",), args.objective == "quadratic", obj),
            (("--test-samples",), args.objective == "quadratic", obj + " (it has no data to hold out)"),
            (("--split",), (getattr(args, "split", None) or "contiguous") != "contiguous"
             and not args.objective.startswith("logistic"), obj + " (it splits by class labels)"),
            (("--test-samples",), bool(getattr(args, "data_file", None)),
             "with --data-file (it draws held-out samples of the synthetic data)"),
            (("--total", "--heterogeneity", "--data-seed", "--samples-per-node", "--d"),
             bool(getattr(args, "data_file", None)), "with --data-file (the file is the data)"),
            (("--sigma",), args.objective != "quadratic", obj + " (its noise is the mini-batch)"
             if args.objective.startswith("logistic") else obj),
            *_matrix_rules(args)]


def _objective_words(args):
    """The problem in words (the objective and its size)."""
    words = {"logistic": "nonconvex logistic regression", "logistic-l2": "L2-regularised logistic regression",
             "least-squares": "least squares", "lasso": f"lasso (least squares + {args.l1:g} ||x||_1)",
             "quadratic": "a random quadratic"}[args.objective]
    if getattr(args, "data_file", None):
        return f"{words} on {file_label(args.data_file)}"
    return f"{words} (d = {args.d})"


#: How ``--weights`` reads in a caption or a figure's title.
_WEIGHTS_SAID = {"in-degree": "in-degree weights", "metropolis": "Metropolis weights"}


def _graph_words(args, gname, A):
    """``(graph, as a noun, weights)`` as a title and a caption say them: directed or undirected (whether every link
    has its reverse) with the topology's name or the file's ("directed ring", "directed ring graph"), and how the
    weights were made. A directed and an undirected ring read the same, "the ring graph (n = 12)", in the tables
    and figures: only experiment.json told them apart."""
    pattern = A.csr != 0
    kind = "undirected" if (pattern != pattern.T).nnz == 0 else "directed"
    if args.matrix:
        said = f"{kind} graph {gname}"
        return said, said, weights_said(os.fspath(args.matrix), args.normalize)
    if gname in PAPER_WEIGHTS:
        return f"{kind} {gname}", f"{kind} {gname} graph", PAPER_WEIGHTS[gname]
    return (f"{kind} {gname}", f"{kind} {gname} graph",
            _WEIGHTS_SAID.get(getattr(args, "weights", "in-degree"), "in-degree weights"))
