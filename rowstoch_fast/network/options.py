"""The communication options of ``rowstoch run`` / ``rowstoch compare`` and of an experiment file's
``[communication]`` table, gathered from the layers: each layer declares its own (:class:`Option`: name, type,
default, choices, help) and how it reads them (``check_options``, ``options_in_use``, ``from_options``,
``unread_options``, ``options_words``, ``options_record``, and for a sweepable option ``sweep`` /
``sweep_label``), so that a new layer's options appear in ``--help``, the TOML schema, the checks, the
experiment record and the captions without an edit here or in the command line.

``ns`` below is an ``argparse.Namespace`` (or anything with the options as attributes); ``given`` the options
written on the command line. Errors are :class:`~rowstoch_fast.errors.UsageError` naming the option.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from .._checks import check_regular_file, load_npy_file, seed_option
from ..errors import UsageError
from .base import LAYERS

__all__ = ["Option", "NETWORK_SEED", "NodeValues", "add_arguments", "build", "check", "declared", "ends", "in_use",
           "names", "node_files", "node_spec", "node_values", "owner", "record", "refused", "refused_node",
           "set_apart", "setting_key", "settings", "shown", "spellings", "toml_choices", "toml_schema", "unread",
           "words"]


@dataclass(frozen=True)
class Option:
    """One option of a layer, spelled ``--NAME`` on the command line (``_`` written ``-``) and ``NAME`` in
    ``[communication]`` unless it declares other spellings (``cli``, ``toml``): ``--help``, the TOML schema and
    choices, an experiment file's settings and the refusals of its values read them from here.

    Parameters
    ----------
    name : str
        The option's destination (``args.NAME``, the run's record, experiment.json's settings).
    kind : type or str
        ``float``, ``int``, ``str``, ``bool`` (a flag), or ``"float|list"`` / ``"str|list"`` (a sweep: one setting
        per item of a comma-separated list, or of a TOML list).
    default : object
    help : str
    choices : tuple of str, optional
        Checked by the command line and the file (``"str|list"``: the part of each item before a colon).
    metavar : str, optional
    cli_type : callable, optional
        The command line's converter where it is not ``kind`` (sweeps stay text; a checked integer).
    item_help : str, optional
        A sweep's items in words, where they take more than a choice (an experiment file's error says it).
    cli : str, optional
        Its command-line flag (``"--..."``), where not ``--NAME`` with ``_`` written ``-``.
    toml : str, optional
        Its key in an experiment file's ``[communication]`` table, where not ``NAME``.
    toml_kind : str, optional
        What its key takes in an experiment file where not ``kind``: ``"float|nodes"`` / ``"int|nodes"`` (a number,
        or a string giving one per node: :func:`node_spec`).
    """

    name: str
    kind: object = float
    default: object = None
    help: str = ""
    choices: tuple = None
    metavar: str = None
    cli_type: object = None
    item_help: str = None
    cli: str = None
    toml: str = None
    toml_kind: str = None

    def __post_init__(self):
        if not (isinstance(self.name, str) and re.fullmatch(r"[a-z][a-z0-9_]*", self.name)):
            raise ValueError(f"Option name must be a lower-case identifier (an argparse destination), got "
                             f"{self.name!r}")
        if self.cli is not None and not (isinstance(self.cli, str) and re.fullmatch(r"--[a-z][a-z0-9-]*", self.cli)):
            raise ValueError(f"Option {self.name!r}: cli must be a flag such as '--my-option', got {self.cli!r}")
        if self.toml is not None and not (isinstance(self.toml, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*",
                                                                                      self.toml)):
            raise ValueError(f"Option {self.name!r}: toml must be a bare TOML key such as 'my_option', got "
                             f"{self.toml!r}")

    @property
    def flag(self):
        """Its command-line flag: ``cli``, or ``--NAME`` with ``_`` written ``-``."""
        return self.cli or "--" + self.name.replace("_", "-")

    @property
    def key(self):
        """Its ``[communication]`` key: ``toml``, or ``NAME``."""
        return self.toml or self.name



# ---- one value per node on the command line and in an experiment file (heterogeneous devices)

#: How a value per node is written, for the options' help and the errors.
NODE_VALUES_HELP = ("one number, or one per node: FIRST..LAST (evenly spread from node 0 to node n-1) or @FILE (n "
                    "numbers, .npy or text separated by spaces, commas or lines)")


@dataclass(frozen=True)
class NodeValues:
    """A layer parameter given one per node from the command line or an experiment file: ``FIRST..LAST`` (evenly
    spread over the nodes, node 0 ``FIRST``, node ``n - 1`` ``LAST``, in the order written; integers rounded to the
    nearest) or ``@FILE`` (the ``n`` values of a 1-D ``.npy`` file or a text file of numbers, node 0 first).
    ``text`` is what was written (the settings' record, labels and captions; a resume compares it as written),
    ``low`` / ``high`` the smallest and largest value (the layers' range checks); :meth:`of` gives the array a layer
    takes. Two are equal where they give the same values (``0..0.2`` and ``0.0..0.2``; a file by its values): a
    sweep's repeated settings are found by :func:`setting_key`."""

    text: str = field(compare=False)
    values: object = field(default=None, compare=False, repr=False)  # (a file's values)
    first: float = field(default=None, compare=False)
    last: float = field(default=None, compare=False)
    key: tuple = field(default=(), repr=False)  # (what equality and hashing go by)

    def __str__(self):
        return self.text

    @property
    def low(self):
        return float(self.values.min()) if self.values is not None else min(self.first, self.last)

    @property
    def high(self):
        return float(self.values.max()) if self.values is not None else max(self.first, self.last)

    def of(self, n, flag, integer=False):
        """The ``n`` values (float64; ``integer``: rounded to int64), or a :class:`UsageError` naming ``flag``
        where a file holds another number of them."""
        if self.values is None:
            if n < 2 and self.first != self.last:  # (one node took the first value, the last silently dropped)
                raise UsageError(f"{flag} {self.text}: a spread from {self.first:g} to {self.last:g} needs at least "
                                 f"two nodes; with one, give its value")
            out = np.linspace(self.first, self.last, n)
        else:
            if len(self.values) != n:
                raise UsageError(f"{flag} {self.text}: the file holds {len(self.values)} values, one per node of "
                                 f"the {n} nodes is needed")
            out = np.array(self.values, dtype=np.float64)
        return np.rint(out).astype(np.int64) if integer else out


#: The longest word a text file of one value per node may hold (a float64 written out takes 24 characters).
LONGEST_WORD = 64


def _text_values(path, chunk=1 << 20):
    """The numbers of a text file (separated by spaces, commas or line breaks), read a chunk at a time: a word
    that is not a number is refused as soon as it is read, quoted to 40 characters, and one longer than
    :data:`LONGEST_WORD` as soon as it is (helper 218: a file of 20 MB of NUL bytes, one word, was read whole and
    quoted whole, an 84 MB error line; 200 MB took 4.4 GB of memory before it failed)."""
    def number(word):
        try:
            return float(word)
        except ValueError:
            raise ValueError(f"{word[:40]!r}{'...' if len(word) > 40 else ''} is not a number") from None

    values, carry = [], ""
    with open(path, encoding="utf-8") as fh:
        while text := fh.read(chunk):
            words = (carry + text).replace(",", " ").split()
            carry = words.pop() if words and not (text[-1].isspace() or text[-1] == ",") else ""
            if len(carry) > LONGEST_WORD:
                raise ValueError(f"{carry[:40]!r}... is not a number (a word of more than {LONGEST_WORD} characters)")
            values += [number(w) for w in words]
    return values + ([number(carry)] if carry else [])


@functools.lru_cache(maxsize=16)
def _file_values(path, stamp):
    """The numbers of a ``.npy`` file (1-D) or a text file, as a read-only 1-D float64 array (``stamp``: its size
    and time, so that a changed file is read again)."""
    if path.lower().endswith(".npy"):  # (read as every .npy the package reads: an empty file, an .npz or a text
        # under that name, a header declaring more than memory holds, each said; NumPy's EOFError, AttributeError,
        # pickle advice or "Unable to allocate 74.5 GiB" had named neither the option nor the file)
        values = load_npy_file(path, "the file")
        if values.ndim != 1:
            raise ValueError(f"a .npy file of one value per node must be 1-D, this one has shape {values.shape}")
        if values.dtype.kind not in "fiub":
            raise ValueError(f"it holds {values.dtype}, not numbers")
    else:
        values = _text_values(path)
    values = np.array(values, dtype=np.float64)
    values.flags.writeable = False
    return values


def node_spec(value, flag, integer=False):
    """One value of an option that takes one per node, read: a number as it is (an ``int`` where ``integer``), a
    string that is a number as that number, ``FIRST..LAST`` or ``@FILE`` as a :class:`NodeValues`. Anything else is
    a :class:`UsageError` naming ``flag`` and saying what is taken."""
    if isinstance(value, NodeValues) or value is None:
        return value
    kind = "an integer" if integer else "a number"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            finite = math.isfinite(value)
        except OverflowError:  # (an integer past the floats: an experiment file's)
            finite = integer
        if not finite:
            raise UsageError(f"{flag} must be a finite number or one per node, got {value!r}")
        if integer and value != int(value):
            raise UsageError(f"{flag} must be an integer or one per node, got {value!r}")
        return int(value) if integer else float(value)
    if not isinstance(value, str):
        raise UsageError(f"{flag} must be {NODE_VALUES_HELP.replace('one number', kind)}, got {value!r}")
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        return node_spec(number, flag, integer)
    if text.startswith("@"):
        path = text[1:]
        try:
            check_regular_file(path, "the file")  # (a FIFO had blocked the read for good, helper 222)
            stat = os.stat(path)
            values = _file_values(path, (stat.st_size, stat.st_mtime_ns))
        except OSError as exc:
            raise UsageError(f"{flag} {text}: the file cannot be read ({exc.strerror or exc})") from None
        except MemoryError as exc:
            raise UsageError(f"{flag} {text}: {exc}") from None
        except ValueError as exc:
            raise UsageError(f"{flag} {text}: not a file of numbers ({exc})") from None
        if values.size == 0 or not np.isfinite(values).all():
            raise UsageError(f"{flag} {text}: the file must hold finite numbers, one per node"
                             + (f"; value {int(np.argmin(np.isfinite(values)))} is {values[~np.isfinite(values)][0]}"
                                if values.size else ", it holds none"))
        if integer and not np.all(values == np.rint(values)):
            i = int(np.argmax(values != np.rint(values)))
            raise UsageError(f"{flag} {text}: value {i} (node {i}'s) must be an integer, got {values[i]:g}")
        equal = bool((values == values[0]).all())  # (one value for every node: the key of that number)
        return NodeValues(text, values, key=("one", float(values[0])) if equal else ("file", tuple(values.tolist())))
    first, sep, last = text.partition("..")
    try:
        spread = (float(first), float(last)) if sep else None
    except ValueError:
        spread = None
    if spread is None or not all(math.isfinite(v) for v in spread) or \
            (integer and any(v != int(v) for v in spread)):
        raise UsageError(f"{flag} must be {NODE_VALUES_HELP.replace('one number', kind)}, got {value!r}")
    if spread[0] == spread[1]:  # (one value for every node: that number)
        return node_spec(spread[0], flag, integer)
    return NodeValues(text, first=spread[0], last=spread[1], key=("spread", *spread))


def split_items(text, is_file=os.path.isfile):
    """The comma-separated items of a sweep (``--loss 0.1,@rates.txt``), an ``@FILE`` item keeping the commas of
    a file name that holds them: the longest run of pieces from an ``@`` on that ``is_file`` names a file (``@a,b.txt``
    is one item where ``a,b.txt`` is a file, two where it is not)."""
    raw = str(text).split(",")
    out, i = [], 0
    while i < len(raw):
        end = i + 1
        if raw[i].strip().startswith("@"):
            end = next((k for k in range(len(raw), i + 1, -1) if is_file(",".join(raw[i:k]).strip()[1:])), end)
        out.append(",".join(raw[i:end]).strip())
        i = end
    return out


def node_files(ns):
    """``{"--flag @FILE": digest}`` of every file of values per node the options of ``ns`` name (an item of a sweep
    too): what a resumed comparison checks its files against (the text names a file, not what it holds)."""
    from .base import _sha1

    out = {}
    for opt in declared():
        value = getattr(ns, opt.name, None)
        if not isinstance(value, (str, NodeValues)):
            continue
        for item in split_items(value) if isinstance(opt.kind, str) else [str(value)]:
            item = item.strip()
            if item.startswith("@"):
                spec = node_spec(item, opt.flag, integer=opt.kind is int)
                out[f"{opt.flag} {item}"] = _sha1(np.asarray(spec.values, dtype=np.float64))
    return out


def setting_key(value):
    """What tells two settings of an option apart: a number, or the values a :class:`NodeValues` gives (a file of
    one value for every node is that number)."""
    if isinstance(value, NodeValues):
        return value.key
    return ("one", float(value))


def refused_node(value, accept):
    """The first node of a file of values whose value ``accept`` (vectorised) refuses, in words (``node 3's value
    1.2``), or None (a number, a spread, a file whose values it takes)."""
    if isinstance(value, NodeValues) and value.values is not None:
        with np.errstate(invalid="ignore"):
            bad = ~np.asarray(accept(np.asarray(value.values)), dtype=bool)
        if bad.any():
            i = int(np.argmax(bad))
            return f"node {i}'s value {value.values[i]:g}"
    return None


def refused(value, accept):
    """An option's value as its refusal shows it: as written, and for a file the first node whose value ``accept``
    refuses: ``@drops.txt (node 3's value 1.2)``."""
    node = refused_node(value, accept)
    return str(value) if node is None else f"{value} ({node})"


def ends(value):
    """``(smallest, largest)`` of an option's value: a number twice, a :class:`NodeValues`' low and high."""
    return (value.low, value.high) if isinstance(value, NodeValues) else (value, value)


def node_values(value, n, flag, integer=False):
    """What a layer takes of an option's value on ``n`` nodes: the number, or the ``n`` values of a
    :class:`NodeValues`."""
    return value.of(n, flag, integer) if isinstance(value, NodeValues) else value


def recorded(value):
    """An option's value in a setting's record (JSON, compared on ``--resume``): a :class:`NodeValues` as written."""
    return value.text if isinstance(value, NodeValues) else value


def shown(value):
    """An option's value in a caption or label: ``0.1``, ``0..0.3 per node``, ``@drops.txt per node``."""
    return f"{value} per node" if isinstance(value, NodeValues) else f"{value:g}"


def node_option(flag, integer=False):
    """An ``argparse`` type of an option that takes one value per node (:func:`node_spec`): argparse's refusal
    then says ``argument FLAG: ...`` with the rest of :func:`node_spec`'s message."""
    def convert(text):
        try:
            return node_spec(text, flag, integer)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None
    convert.__name__ = "int or per-node values" if integer else "number or per-node values"
    return convert


#: The seed every layer's draws come from (one for the whole network).
NETWORK_SEED = Option("network_seed", int, 0, "seed of the losses, sleep, compression and noise", cli_type=seed_option)


def _layers(listed=False):
    """The registered layers in composition order (innermost first), or in their options' listing order
    (``listed``: ``--help``, the TOML schema, the messages)."""
    return sorted(LAYERS.values(), key=lambda cls: (cls.listed if listed else cls.order, cls.__name__))


def add_arguments(parser):
    """Every layer's options (and ``--network-seed``) in one argument group of ``parser``."""
    group = parser.add_argument_group("communication (rowstoch_fast.network)")
    for opt in [*declared(), NETWORK_SEED]:
        if opt.kind is bool:
            group.add_argument(opt.flag, dest=opt.name, action=argparse.BooleanOptionalAction, default=False,
                               help=opt.help)  # (--no-FLAG: an experiment file's key = true off)
            continue
        kw = {"dest": opt.name, "default": opt.default, "help": opt.help}
        cli_type = opt.cli_type
        if cli_type is not None:
            kw["type"] = cli_type
        elif opt.kind in (int, float):
            kw["type"] = _one_number(opt.kind)
        if opt.choices and not isinstance(opt.kind, str):
            kw["choices"] = list(opt.choices)
        if opt.metavar:
            kw["metavar"] = opt.metavar
        group.add_argument(opt.flag, **kw)
    return group


def _one_number(kind):
    """An ``argparse`` type of an option that takes one number: ``kind``, and for a value per node (``FIRST..LAST``,
    ``@FILE``) a refusal that names the options that take one."""
    def convert(text):
        try:
            return kind(text)
        except ValueError:
            if ".." in text or text.startswith("@"):
                per_node = [o.flag for o in declared() if o.toml_kind and o.toml_kind.endswith("|nodes")]
                raise argparse.ArgumentTypeError(
                    f"takes one {'integer' if kind is int else 'number'}, got {text!r}; a value per node is taken by "
                    f"--loss, {', '.join(per_node)}") from None
            raise
    convert.__name__ = kind.__name__  # (argparse's "invalid int value" for the rest)
    return convert


def declared():
    """Every layer's options in their listing order (``--network-seed`` not among them). Two options spelled
    alike (a name, flag or key another layer's option has) are refused, naming both layers."""
    out, seen = [], {}
    for cls in _layers(listed=True):
        for opt in cls.OPTIONS:
            for spelling in (("name", opt.name), ("flag", opt.flag), ("key", opt.key)):
                owner = seen.setdefault(spelling, cls)
                if owner is not cls:
                    raise TypeError(f"{cls.__qualname__}: its option {opt.name!r} has the {spelling[0]} "
                                    f"{spelling[1]!r} of an option of {owner.__qualname__}; spell it otherwise "
                                    f"(a subclass declares OPTIONS of its own)")
            out.append(opt)
    for spelling in (("name", NETWORK_SEED.name), ("flag", NETWORK_SEED.flag), ("key", NETWORK_SEED.key)):
        if spelling in seen:
            raise TypeError(f"{seen[spelling].__qualname__}: an option has the {spelling[0]} {spelling[1]!r} of "
                            f"the network seed; spell it otherwise")
    return out


def owner(spelling):
    """The layer class whose option has the flag or the name (destination) ``spelling``, or None."""
    return next((cls for cls in _layers(listed=True) for opt in cls.OPTIONS
                 if spelling in (opt.flag, opt.name, f"--no-{opt.flag[2:]}")), None)


def spellings():
    """``[(name, flag, key)]`` of every layer's option and ``--network-seed``: its destination, its command-line
    flag and its ``[communication]`` key, as declared."""
    return [(opt.name, opt.flag, opt.key) for opt in [*declared(), NETWORK_SEED]]


def names():
    """The options' names (destinations), ``network_seed`` last."""
    return [opt.name for opt in declared()] + [NETWORK_SEED.name]


def toml_schema():
    """``[communication]``'s keys: ``{key: (destination, kind)}``."""
    return {opt.key: (opt.name, opt.toml_kind or opt.kind) for opt in [*declared(), NETWORK_SEED]}


def toml_choices():
    """``{key: choices}`` of the keys that have them (a ``"str|list"`` key: what each item names before a colon)."""
    return {opt.key: tuple(opt.choices) for opt in declared() if opt.choices}


def toml_item_help():
    """``{key: item_help}`` of the sweeps whose items take more than a choice."""
    return {opt.key: opt.item_help for opt in declared() if opt.item_help}


def set_apart(ns):
    """The names of the layers whose options ``ns`` sets apart from their defaults (a sweep's too), sorted."""
    return sorted(cls.layer for cls in _layers() if any(getattr(ns, opt.name, opt.default) != opt.default
                                                       for opt in cls.OPTIONS))


def in_use(ns):
    """The layers that one setting ``ns`` builds, innermost first."""
    return [cls for cls in _layers() if cls.options_in_use(ns)]


def check(ns, d=None):
    """Every layer's checks of one setting's values (``d``: the models' size where known), before anything is
    built."""
    for cls in _layers(listed=True):
        cls.check_options(ns, d)


def build(A, ns):
    """``A`` wrapped in the layers one setting ``ns`` asks for (``A`` itself without them), innermost first."""
    net = A
    for cls in in_use(ns):
        net = cls.from_options(net, ns, ns.network_seed)
    return net


def unread(ns):
    """``(flags, unread, why)`` of the options one setting ``ns`` would not read (refused when written)."""
    seeded = [flag for cls in _layers(listed=True) for flag in cls.SEED_FLAGS]
    why = "without " + (", ".join(seeded[:-1]) + " or " + seeded[-1] if len(seeded) > 1 else "".join(seeded))
    rules = [((NETWORK_SEED.flag,), not any(cls.options_seeded(ns) for cls in _layers()), why)]
    return rules + [rule for cls in _layers(listed=True) for rule in cls.unread_options(ns)]


def words(ns):
    """The communication model of one setting in words (the tables' captions, the figures' titles)."""
    parts = [text for cls in _layers() for text in [cls.options_words(ns)] if text]
    return ", ".join(parts) if parts else "reliable links"


def drawn(ns):
    """What the setting ``ns`` draws, in words (``["losses", "sleep"]``): what a comparison's repetitions draw one
    by one."""
    return [w for cls in _layers() for w in [cls.options_drawn(ns)] if w]


def record(ns):
    """What identifies one setting's network in a run's configuration (compared on ``--resume``)."""
    out = {}
    for cls in _layers():
        out.update(cls.options_record(ns))
    out[NETWORK_SEED.name] = ns.network_seed
    return out


def settings(args, given=(), dropped=None):
    """``[(label, namespace of one setting)]``: every combination of the sweepable options' items (each layer's
    ``sweep``; one setting, labelled ``""``, where nothing is swept), every one checked (:func:`check`); an option
    that no setting reads is refused when written (:func:`unread`), unless ``dropped(written, why)`` drops it
    (returns True: the CLI's options an experiment file set that the command line's choice leaves unread)."""
    for _ in range(len(given) + 1):  # (again where options were dropped: the settings without them)
        axes = [(cls, items) for cls in _layers() for items in [cls.sweep(args, given)] if items is not None]
        spaces = []
        for combo in itertools.product(*[items for _, items in axes]):
            ns = argparse.Namespace(**vars(args))
            for updates in combo:
                for key, value in updates.items():
                    setattr(ns, key, value)
            spaces.append(ns)
        # an option is refused when no setting reads it (the rules told apart by their flags)
        per_setting = [{flags: (unread_, why) for flags, unread_, why in unread(ns)} for ns in spaces]
        unread_here = [([o for o in flags if o in given], why) for flags, (_, why) in per_setting[0].items()
                       if all(rules.get(flags, (True, why))[0] for rules in per_setting)]
        unread_here = [(written, why) for written, why in unread_here if written]
        if not unread_here:
            break
        written, why = unread_here[0]
        if dropped is None or not dropped(written, why):
            raise UsageError(f"{' and '.join(written)} {'is' if len(written) == 1 else 'are'} not read {why}")
    several = any(len(items) > 1 for _, items in axes)
    out = []
    for ns in spaces:
        check(ns, d=None if getattr(ns, "data_file", None) else getattr(ns, "d", None))
        parts = [cls.sweep_label(ns) for cls, items in axes if len(items) > 1]
        out.append((" + ".join(parts) if several else "", ns))
    return out
