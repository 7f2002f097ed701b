"""The ``rowstoch`` command line: one module per command (:mod:`.run`, :mod:`.compare`, :mod:`.reproduce`,
:mod:`.info`), the parser (:mod:`.parser`) and what they share (:mod:`._common`); this module runs one.

``rowstoch demo`` runs the main job on an embedded default; ``rowstoch metrics``
prints the network metrics of a topology or a matrix file. Bad arguments end
with a one-line message and exit status 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

from ..errors import UsageError
from ..metrics import BetaNotConverged
from ..io import load_matrix  # noqa: F401 (the command line's readers, as before the split)
from ..topology import by_name as build_topology  # noqa: F401
from ..network import options as network_options
from ..report import check_backend
from ._common import (_as_options, _created, _error, configure_logging, drop_turned_off, last_stage,
                      outside_the_raised, parsed_settings, remove_created)
from .parser import make_parser

__all__ = ["main", "make_parser"]


class _Terminated:
    """SIGTERM, as a job scheduler sends it, and SIGHUP, as a closed terminal or a dropped ssh session sends it,
    handled like Ctrl-C (the run in progress saves its checkpoint and what finished is written) and remembered, so
    that the command ends with 143 (129) instead of 130. A SIGHUP ignored (``nohup``) stays ignored. (A SIGHUP had
    ended ``rowstoch run`` with nothing written, helper 185.)"""

    def __init__(self):
        self.received = None  # (the signal, once one came)
        self.previous = {}

    def __enter__(self):
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            def terminate(signum, frame):
                self.received = self.received or signum
                raise KeyboardInterrupt

            for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
                if signum is not None and (signum == signal.SIGTERM or signal.getsignal(signum) is not signal.SIG_IGN):
                    self.previous[signum] = signal.signal(signum, terminate)
        return self

    def __exit__(self, *exc):
        import signal

        for signum, previous in self.previous.items():
            signal.signal(signum, previous)
        return False


#: Python keywords in the library's messages and the options that set them on the command line.
_KEYWORD_OPTIONS = {"tracker='perron'": "--tracker perron", "tracker='exact'": "--tracker exact",
                    "or raise max_bytes": "or raise ROWSTOCH_TRACKER_MAX_BYTES",
                    "raise max_work / ROWSTOCH_TRACKER_MAX_WORK": "raise ROWSTOCH_TRACKER_MAX_WORK",
                    "; lower repeats": "; lower --repeats", "e.g. weights='metropolis'": "e.g. --undirected --weights "
                    "metropolis", "iterations must be <= 2^62": "--iterations must be <= 2^62",  # (helper 261)
                    "lower total, test_samples or d": "lower --total, --test-samples or --d"}  # (helper 263)
#: A value the library refused by its parameter's name at the start of a message, and the option that sets it.
_REFUSED_NAMES = {"lr": "--lr", "q": "--awake", "rate": "--rate", "noise": "--noise"}
#: The same, a command's own (``alpha``: reproduce's Dirichlet ``--alpha``; run's is FedDyn's or SONATA's, given as
#: ``--hyper alpha=...``, helper 262).
_COMMAND_REFUSED_NAMES = {"reproduce": {"alpha": "--alpha"}, "run": {"alpha": "--hyper alpha"}}
#: The same, where the command names it its own way (a multi-round method's rounds: ``--mg-rounds`` of compare).
_COMMAND_OPTIONS = {"run": {"lower rounds or the batch": "lower --rounds or --batch",
                            "lower the rounds": "lower --rounds"},
                    "compare": {"lower rounds or the batch": "lower --mg-rounds or --batch",
                                "lower the rounds": "lower --mg-rounds"}}


def _in_option_words(text, command=None):
    """The library's advice in ``text`` in the command line's words (:data:`_KEYWORD_OPTIONS`, and
    :data:`_COMMAND_OPTIONS` of ``command``), outside what the user's code raised (helper 262)."""
    keywords = {**_KEYWORD_OPTIONS, **_COMMAND_OPTIONS.get(command, {})}
    names = {**_REFUSED_NAMES, **_COMMAND_REFUSED_NAMES.get(command, {})}

    def rewrite(head):
        for keyword, option in keywords.items():
            head = head.replace(keyword, option)
        return re.sub(r"^(\w+)(?= = \S+ is subnormal)", lambda m: names.get(m.group(1), m.group(1)), head)

    return outside_the_raised(text, rewrite)


def _utf8_bytes(exc):
    """An encoding error handler: what a stream's codec cannot encode written as its UTF-8 bytes (and escaped
    bytes, lone surrogates, as themselves)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return exc.object[exc.start:exc.end].encode("utf-8", "surrogateescape"), exc.end


@contextlib.contextmanager
def _console_writes_any_text():
    """Under the C locale with Python's UTF-8 mode off, stdout and stderr are ASCII: a file's name, read as UTF-8
    for the outputs (:func:`._common.file_label`), is printed as the UTF-8 bytes the terminal gave (printing it
    ended a comparison: "'ascii' codec can't encode character '\\xe2'"). The streams' error handlers are put
    back when the command ends (a program calling :func:`main` keeps its own)."""
    import codecs

    codecs.register_error("rowstoch.utf8_bytes", _utf8_bytes)
    changed = []
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if encoding and hasattr(stream, "reconfigure") and codecs.lookup(encoding).name != "utf-8" \
                and stream.errors in ("strict", "surrogateescape", "backslashreplace"):
            changed.append((stream, stream.errors))
            stream.reconfigure(errors="rowstoch.utf8_bytes")
    try:
        yield
    finally:
        for stream, errors in changed:
            try:
                stream.reconfigure(errors=errors)
            except (ValueError, OSError):  # (a stream closed meanwhile)
                pass


def main(argv=None):
    """Entry point of the ``rowstoch`` command."""
    with _console_writes_any_text():
        return _main(argv)


def _main(argv):
    last_stage[0] = None  # (a set-up line of an earlier call in this process is not this one's)
    parser = make_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        bad = _bad_value(argv, parser)
        if bad is not None:  # (an unset "$CONFIG" in a script: --config '' ran the whole default comparison)
            parser.error(bad)
        args = parser.parse_args(_negative_values_glued(argv, parser))
    except SystemExit as exc:
        _end_the_launch(argv, exc.code)
        raise
    args.argv = list(argv)  # (what a command records as its own: main's arguments, not the interpreter's)
    # the options written out (abbreviations are off, so each appears as itself)
    args.given = {str(token).split("=", 1)[0] for token in argv if str(token).startswith("--")}
    args.parsed = parsed_settings(args)  # (what the ranks compare: the parse and the options written, not the words)
    command = parser._subparsers._group_actions[0].choices.get(getattr(args, "command", None))
    args.command_defaults = {a.dest: a.default for a in command._actions} if command is not None else {}  # (what a
    # command reads of them: an experiment file's soundness, cli.compare._file_reads_its_keys)
    undo_logging = configure_logging(args)
    _created.clear()
    with _Terminated() as terminated:  # every command: SIGTERM (a job scheduler's) ends it as Ctrl-C does
        try:
            code = _call(args, terminated)
        finally:
            undo_logging()
        if code == 130 and terminated.received:  # (a command that saved what finished returns 130)
            import signal

            code = 128 + int(terminated.received)
            _error("terminated (SIGTERM)" if terminated.received == signal.SIGTERM else "hung up (SIGHUP)")
        return code


def _end_the_launch(argv, code):
    """A command refused before it initialized MPI (by its parser, or reading its experiment file) on one rank of an
    MPI launch (``--backend mpi``, or a ``--resume`` of such a comparison): the launch aborted with the refusal's
    exit code. The rank had left before initializing MPI, and the others waited in MPI's initialization for it,
    in C, past every SIGTERM and SIGINT (a helper's MPMD launch with an unknown option on one rank: 13 minutes,
    until SIGKILL; a ``--config`` missing on one rank: 11 minutes)."""
    from ._common import _launched

    tokens = [str(t) for t in argv]
    mpi = any(t == "--backend=mpi" or t == "--backend" and k + 1 < len(tokens) and tokens[k + 1] == "mpi"
              for k, t in enumerate(tokens)) or any(t.split("=", 1)[0] == "--resume" for t in tokens)
    if code in (0, None) or not mpi or _launched()[0] < 2:
        return
    try:
        from mpi4py import MPI
    except ImportError:  # (the run's own check says it needs mpi4py)
        return
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(code if isinstance(code, int) else 2)


#: A number written with underscores (Python's digit grouping: ``float("0_01")`` is 1.0, not the 0.01 meant).
_GROUPED_NUMBER = re.compile(r"[+-]?[0-9][0-9_]*(\.[0-9_]*)?([eE][+-]?[0-9_]+)?")


#: The options whose values are paths or names, never numbers.
_PATH_OPTIONS = ("--out", "--checkpoint", "--resume", "--config", "--matrix", "--data-file", "--data-dir",
                 "--metrics-module", "--data", "--preset")


def _options_taking_values(parser):
    """Every option of every command of ``parser`` that takes a value (not a flag such as ``--overwrite``)."""
    import argparse

    out, parsers = set(), [parser]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.nargs != 0:
                out.update(o for o in action.option_strings if o.startswith("--"))
    return out


#: A value that starts with a minus sign and a digit or point (``-0.1..0.2``, ``-1e-3``): argparse reads a token
#: that looks like neither a number nor a known option as an option, and ``--loss -0.1..0.2`` ended "expected one
#: argument" instead of what is wrong with the value.
_NEGATIVE_VALUE = re.compile(r"-[0-9.]")


def _negative_values_glued(argv, parser):
    """``argv`` with each value written after an option that takes one and starting as a negative number does
    glued to it (``--loss=-0.1..0.2``): the option's own check then says what is wrong with it."""
    argv, takes, out = [str(token) for token in argv], _options_taking_values(parser), []
    skip = False
    for k, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if token == "--":
            return out + argv[k:]
        if token in takes and k + 1 < len(argv) and _NEGATIVE_VALUE.match(argv[k + 1]):
            out.append(f"{token}={argv[k + 1]}")
            skip = True
        else:
            out.append(token)
    return out


def _bad_value(argv, parser):
    """Why the first option written with a value no option reads as meant is refused, or None: an empty value
    (``--config ''``, ``--config=``: several options read it as not given) or a number with underscores
    (``--noise 0_01`` was 1.0)."""
    argv = [str(token) for token in argv]
    takes = _options_taking_values(parser)
    for k, token in enumerate(argv):
        if token == "--":
            return None
        if not token.startswith("--"):
            continue
        option, eq, value = token.partition("=")
        if option not in takes:  # (a flag, or no option: argparse says so)
            continue
        if not eq:
            if k + 1 >= len(argv) or argv[k + 1].startswith("--"):
                continue
            value = argv[k + 1]
        if value == "":
            return f"{option} was given an empty value: give it one, or leave the option out"
        if option in _PATH_OPTIONS:  # (a folder named 2026_12_01 is a name, not a number)
            continue
        pieces = [piece.strip() for item in value.split(",") for piece in re.split(r"=|:|\.\.", item)]
        grouped = [piece for piece in pieces if "_" in piece and _GROUPED_NUMBER.fullmatch(piece)]  # (NAME=V, A..B,
        # METHOD:P too)
        if grouped:
            return (f"{option} {value!r}: {grouped[0]!r} is a number written with underscores, which would be read as "
                    f"{grouped[0].replace('_', '')}; write it without them")
    return None


#: The commands that write tables (pandas), whose first import :func:`_whole_imports` makes whole.
_TABLE_COMMANDS = ("compare", "run", "reproduce", "demo")


def _whole_imports():
    """pandas imported with Ctrl-C and SIGTERM held (:func:`~rowstoch_fast._signals.signals_held`), the held signal
    raised once it is in. A signal that landed inside its first import, in a comparison's first method, left it
    partially initialized, and the interrupted comparison's own writing of what had finished then failed with
    "partially initialized module 'pandas' has no attribute '_pandas_datetime_CAPI'": exit 1 and a traceback,
    nothing written (helper 168: 5 of 41 signals sent in the first 0.6 s)."""
    from .._signals import signals_held

    with signals_held():
        import pandas  # noqa: F401


def _call(args, terminated):
    """The command ``args.func`` run, its exceptions turned into one line and an exit code."""
    try:
        try:
            if getattr(args, "command", None) in _TABLE_COMMANDS:
                _whole_imports()  # (a signal held through it is raised here: "interrupted", 130 or 143)
            if getattr(args, "command", None) != "compare":  # (compare checks it once its formats are known:
                # --format none without --live draws nothing)
                check_backend()  # (before the work: the figures come last)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return args.func(args)
    except UsageError as exc:
        remove_created()  # (an --out made before the refusal: nothing is left behind)
        text = drop_turned_off(_in_option_words(str(exc), getattr(args, "command", None)),
                               getattr(args, "given", ()))[0]
        _error(f"error: {text}")
        if getattr(args, "before_mpi", False):  # (refused before MPI's initialization, maybe on this rank alone)
            _end_the_launch(getattr(args, "argv", []), 2)
        return 2
    except MemoryError as exc:
        remove_created()
        text = _in_option_words(_as_options(str(exc), {o.name: o.flag for o in network_options.declared()
                                                        if "_" in o.name}), getattr(args, "command", None))
        # (the library's names, as options: "use a smaller max_delay"; the tracker's advice too, "use
        # tracker='perron' ... or raise max_bytes" had reached the command line as it was, helper 231)
        if not text.strip():  # (NumPy's bare MemoryError: "out of memory: " and nothing, helper 263)
            during = last_stage[0]
            text = (f"an allocation failed{f' during {during}' if during else ''} (the error gave no size); lower the "
                    "sizes (--d, --total, --samples-per-node, --n, --repeats) or free memory")
        if getattr(args, "file_name", None):  # (sizes an experiment file set: its keys, as its other refusals say
            # them; "lower --repeats" had answered a file's repeats, helper 266)
            from .compare import _as_in_the_file

            text = str(_as_in_the_file(args, UsageError(text)))
        _error(f"error: out of memory: {text}")
        return 2
    except KeyboardInterrupt:
        if terminated.received:
            return 130  # (main says "terminated" and returns 143)
        _error("interrupted")
        return 130
    except BetaNotConverged as exc:  # (a network whose gap the sparse method cannot resolve in time: said why)
        remove_created()
        _error(f"error: {exc}")
        return 2
    except BrokenPipeError:  # the reader went away (rowstoch metrics | head): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141
