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
import itertools
import re
from dataclasses import dataclass

from .._checks import seed_option
from ..errors import UsageError
from .base import LAYERS

__all__ = ["Option", "NETWORK_SEED", "add_arguments", "build", "check", "declared", "in_use", "names", "record", "settings",
           "spellings", "toml_choices", "toml_schema", "unread", "words"]


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
            group.add_argument(opt.flag, dest=opt.name, action="store_true", help=opt.help)
            continue
        kw = {"dest": opt.name, "default": opt.default, "help": opt.help}
        cli_type = opt.cli_type
        if cli_type is not None:
            kw["type"] = cli_type
        elif opt.kind in (int, float):
            kw["type"] = opt.kind
        if opt.choices and not isinstance(opt.kind, str):
            kw["choices"] = list(opt.choices)
        if opt.metavar:
            kw["metavar"] = opt.metavar
        group.add_argument(opt.flag, **kw)
    return group


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


def spellings():
    """``[(name, flag, key)]`` of every layer's option and ``--network-seed``: its destination, its command-line
    flag and its ``[communication]`` key, as declared."""
    return [(opt.name, opt.flag, opt.key) for opt in [*declared(), NETWORK_SEED]]


def names():
    """The options' names (destinations), ``network_seed`` last."""
    return [opt.name for opt in declared()] + [NETWORK_SEED.name]


def toml_schema():
    """``[communication]``'s keys: ``{key: (destination, kind)}``."""
    return {opt.key: (opt.name, opt.kind) for opt in [*declared(), NETWORK_SEED]}


def toml_choices():
    """``{key: choices}`` of the keys that have them (a ``"str|list"`` key: what each item names before a colon)."""
    return {opt.key: tuple(opt.choices) for opt in declared() if opt.choices}


def toml_item_help():
    """``{key: item_help}`` of the sweeps whose items take more than a choice."""
    return {opt.key: opt.item_help for opt in declared() if opt.item_help}


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


def record(ns):
    """What identifies one setting's network in a run's configuration (compared on ``--resume``)."""
    out = {}
    for cls in _layers():
        out.update(cls.options_record(ns))
    out[NETWORK_SEED.name] = ns.network_seed
    return out


def settings(args, given=()):
    """``[(label, namespace of one setting)]``: every combination of the sweepable options' items (each layer's
    ``sweep``; one setting, labelled ``""``, where nothing is swept), every one checked (:func:`check`); an option
    that no setting reads is refused when written (:func:`unread`)."""
    axes = [(cls, items) for cls in _layers() for items in [cls.sweep(args, given)] if items is not None]
    several = any(len(items) > 1 for _, items in axes)
    spaces = []
    for combo in itertools.product(*[items for _, items in axes]):
        ns = argparse.Namespace(**vars(args))
        for updates in combo:
            for key, value in updates.items():
                setattr(ns, key, value)
        spaces.append(ns)
    # an option is refused when no setting reads it (the rules told apart by their flags)
    per_setting = [{flags: (unread_, why) for flags, unread_, why in unread(ns)} for ns in spaces]
    for flags, (_, why) in per_setting[0].items():
        written = [o for o in flags if o in given]
        if written and all(rules.get(flags, (True, why))[0] for rules in per_setting):
            raise UsageError(f"{' and '.join(written)} {'is' if len(written) == 1 else 'are'} not read {why}")
    out = []
    for ns in spaces:
        check(ns, d=None if getattr(ns, "data_file", None) else getattr(ns, "d", None))
        parts = [cls.sweep_label(ns) for cls, items in axes if len(items) > 1]
        out.append((" + ".join(parts) if several else "", ns))
    return out
