"""Experiments as files: the TOML that ``rowstoch compare --config`` reads.

A file names a network (or several: ``topology = ["paper-ring", "paper-grid"]``), an objective and its data,
the algorithms with their own settings, the budget, seeds and outputs; every key and value is checked before
anything runs, and an error names the file, the table and the key::

    [network]
    topology = "ring"          # or matrix = "graph.npz"; a list runs one comparison per graph
    n = 16
    undirected = true
    weights = "metropolis"

    [objective]
    kind = "least-squares"     # logistic | logistic-l2 | least-squares | lasso | quadratic
    heterogeneity = 1.0

    [communication]            # optional: losses, sleep, compression, noise (rowstoch_fast.network)
    loss = 0.1                 # a list runs one comparison per value: loss = [0.0, 0.1]
    compress = "topk"          # likewise: compress = ["none", "qsgd:4", "topk:2"]
    k = 2

    [run]
    rounds_budget = 2000
    repeats = 5

    [outputs]
    metrics = ["suboptimality", "consensus_error"]
    formats = ["png", "pdf"]

    [algorithms.dsgd]
    lr = 0.05                  # given: the table says so ("given", or lr_source = "...")
    [algorithms.push-pull]     # no lr: tuned

``--preset paper`` is the shipped file ``presets/paper.toml``.
"""

from __future__ import annotations

import math
import os
import sys

from ._checks import check_not_subnormal, check_regular_file, did_you_mean
from ._files import check_path
from .network import options as network_options

__all__ = ["load", "preset_path", "schema", "SCHEMA"]

#: The tables and keys a file may hold besides ``[communication]`` (whose keys are the network layers' options:
#: :func:`schema`): ``(option's dest, kind)``; kind is a Python type, ``"list"`` (a string or a list of strings,
#: maybe empty) or ``"str|list"`` (one not empty).
SCHEMA = {
    "network": {"topology": ("topology", "str|list"), "n": ("n", int), "matrix": ("matrix", str),
                "normalize": ("normalize", bool), "undirected": ("undirected", bool), "weights": ("weights", str)},
    "objective": {"kind": ("objective", str), "total": ("total", int), "batch": ("batch", int),
                  "samples_per_node": ("samples_per_node", int), "d": ("d", int), "rho": ("rho", float),
                  "lam": ("lam", float), "l1": ("l1", float), "heterogeneity": ("heterogeneity", float), "sigma": ("sigma", float),
                  "data_seed": ("data_seed", int), "data_file": ("data_file", str), "split": ("split", str),
                  "test_samples": ("test_samples", int)},
    "run": {"rounds_budget": ("rounds_budget", int), "repeats": ("repeats", int), "seed": ("seed", int),
            "tracker": ("tracker", str), "backend": ("backend", str), "mg_rounds": ("mg_rounds", int),
            "algorithms": ("algorithm_set", "str|list")},
    "outputs": {"metrics": ("metric", "str|list"), "x": ("x", str), "cost_weights": ("cost_weights", str),
                "formats": ("format", "list")},
}
#: The keys that hold seeds (the hashed streams take 64-bit keys), by their options' destinations.
SEEDS = ("seed", "data_seed", "network_seed")
#: The keys of one ``[algorithms.NAME]`` table that every algorithm has; any other key is a hyperparameter of
#: the algorithm's constructor, passed through (and refused, naming the key, where the algorithm has none such).
ALGORITHM_KEYS = {"lr": float, "lr_source": str, "tracker": str, "rounds": int}
#: The ranges of those keys: ``(bound, bound allowed, words)``.
ALGORITHM_RANGES = {"lr": (0.0, False, "a finite number > 0"), "rounds": (1, True, "an integer >= 1")}
#: ``[run] algorithms = "..."``: a set of algorithms read from the registry when the file is loaded (so a file
#: names no algorithm by hand; ``[algorithms.NAME]`` tables then add settings, or more algorithms); or the
#: algorithms' names, as a list or one string separated by commas (as ``--algorithms``).
ALGORITHM_SETS = {"all": lambda cls: True, "paper": lambda cls: cls.in_paper_preset,
                  "proximal": lambda cls: cls.composite, "federated": lambda cls: cls.federated}
#: Choices checked here, so that the error names the key rather than a command-line option.
CHOICES = {("network", "weights"): ("in-degree", "metropolis"),
           ("objective", "kind"): ("logistic", "logistic-l2", "least-squares", "lasso", "quadratic"),
           ("run", "tracker"): ("exact", "perron"), ("run", "backend"): ("cpu", "cupy", "mpi"),
           ("outputs", "x"): ("rounds", "gradients", "bytes", "seconds", "cost")}


def schema():
    """Every table and key a file may hold: :data:`SCHEMA`, and ``[communication]`` read from the network layers'
    registry when asked (a layer registered later is in; each option under its key as the layer declares it,
    :attr:`rowstoch_fast.network.options.Option.key`), in the order of the tables of a file."""
    first = ("network", "objective")
    return {**{k: SCHEMA[k] for k in first}, "communication": network_options.toml_schema(),
            **{k: v for k, v in SCHEMA.items() if k not in first}}


def _choices():
    return {**CHOICES, **{("communication", key): c for key, c in network_options.toml_choices().items()}}


class ConfigError(ValueError):
    """A file that cannot be run as it is: the message names the file, the table and the key."""


def preset_path(name):
    """The shipped file of a preset (``"paper"``)."""
    if not isinstance(name, str):  # (None had given presets/None.toml)
        raise TypeError(f"name must be a preset's name (str), got {type(name).__name__} {name!r}")
    if not name:
        raise ValueError("name must be a preset's name, got ''")
    return os.path.join(os.path.dirname(__file__), "presets", f"{name}.toml")


def _toml():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python < 3.11
        import tomli as tomllib
    return tomllib


def _hyperparameters(label):
    """The hyperparameters the algorithm ``label`` (``NAME`` or ``mg-NAME``) passes through, or None for a name
    that is no algorithm (the comparison names it with the algorithms there are)."""
    from .algorithms import REGISTRY, method_of
    from .runner import algorithm_options

    method = method_of(label)
    return algorithm_options(method) if method in REGISTRY else None


def _all_labels():
    """Every algorithm's name as a file may write it (``NAME``, and ``mg-NAME`` for the multi-round ones)."""
    from .algorithms import labels

    return labels(ALGORITHM_SETS["all"])


def _kind_name(kind):
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string",
            "list": "a string or a list of strings (empty: none)",
            "str|list": "a string or a list of strings",
            "float|list": "a number, a string giving one per node (FIRST..LAST or @FILE), or a list of them",
            "float|nodes": "a number or a string giving one per node (FIRST..LAST or @FILE)",
            "int|nodes": "an integer or a string giving one per node (FIRST..LAST or @FILE)"}[kind]


def _check_value(where, value, kind):
    ok = {int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          bool: lambda v: isinstance(v, bool), str: lambda v: isinstance(v, str),
          "list": lambda v: isinstance(v, str) or isinstance(v, list) and all(isinstance(x, str) for x in v),
          "str|list": lambda v: isinstance(v, str) or (isinstance(v, list) and bool(v)
                                                         and all(isinstance(x, str) for x in v)),
          "float|list": lambda v: _number(v) or isinstance(v, str) or (isinstance(v, list) and bool(v) and all(
              _number(x) or isinstance(x, str) for x in v)),
          "float|nodes": lambda v: _number(v) or isinstance(v, str),
          "int|nodes": lambda v: isinstance(v, (int, str)) and not isinstance(v, bool)}
    if not ok[kind](value):
        raise ConfigError(f"{where} must be {_kind_name(kind)}, got {type(value).__name__} {value!r}")
    return float(value) if kind is float else value


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _names(value):
    """The names a ``"str|list"`` key gives (``[run] algorithms``, ``[outputs] metrics``): a list of strings, or one
    string separated by commas (as the command line's options), each stripped; an empty one kept (the caller
    refuses it, naming its key)."""
    return [part.strip() for item in (value if isinstance(value, list) else [value]) for part in item.split(",")]


def load(path, named_elsewhere=False):
    """The settings of an experiment file, checked (a file that names no algorithm refused, unless
    ``named_elsewhere``: the command line's ``--algorithms`` names them).

    Returns
    -------
    options : dict
        ``{dest: value}`` of the ``rowstoch compare`` options the file sets.
    algorithms : dict
        ``{name: {"lr": ..., "lr_source": ..., "tracker": ...}}`` in the file's order.
    raw : dict
        The file as read (saved beside the results).

    Raises
    ------
    ConfigError
        A missing or unreadable file, a TOML syntax error, an unknown table or
        key, a value of the wrong type or outside its choices: one message naming
        the file and the key.
    """
    name = check_path(path)
    try:  # (a FIFO or a device had "not existed", helper 222)
        check_regular_file(name, "--config", "give the experiment file (TOML) in it")
    except (OSError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    try:
        with open(name, "rb") as fh:
            text = fh.read().decode("utf-8-sig")  # (a byte-order mark, which some editors write, read as nothing)
    except OSError as exc:
        raise ConfigError(f"--config {name!r} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--config {name!r} is not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from None
    try:
        raw = _toml().loads(text)
    except Exception as exc:  # tomllib.TOMLDecodeError: its message says the line and column
        raise ConfigError(f"--config {name!r} is not valid TOML: {exc}") from None
    options, algorithms = {}, {}
    tables, choices_of, item_help = schema(), _choices(), network_options.toml_item_help()
    for table, body in raw.items():
        if not isinstance(body, dict) and table not in tables and table != "algorithms":  # (a key above every table)
            home = [t for t, keys in tables.items() if table in keys]
            raise ConfigError(f"{name}: {table} = {body!r} stands outside any table: "
                              + (f"put it under [{home[0]}]" if home else f"no table has a key {table!r}"
                                 + did_you_mean(table, [k for keys in tables.values() for k in keys]))
                              + f"; the tables are {', '.join([*tables, 'algorithms'])}")
        if table == "algorithms":
            if not isinstance(body, dict) or not body:
                raise ConfigError(f"{name}: [algorithms] must hold one table per algorithm, e.g. [algorithms.dsgd]")
            for algo, settings in body.items():
                if algo != algo.strip():  # (its settings had been dropped without a word: the name was stripped
                    # where it joined the algorithms' list, not where its settings are looked up, helper 192)
                    raise ConfigError(f"{name}: [algorithms]: unknown algorithm {algo!r}: a space around the name "
                                      f"(write [algorithms.{algo.strip()}])")
                if not isinstance(settings, dict):
                    raise ConfigError(f"{name}: algorithms.{algo} must be a table ([algorithms.{algo}]), got "
                                      f"{type(settings).__name__}")
                takes = _hyperparameters(algo)
                for key, value in settings.items():
                    if key in ALGORITHM_KEYS:
                        settings[key] = _check_value(f"{name}: [algorithms.{algo}] {key}", value, ALGORITHM_KEYS[key])
                        low = ALGORITHM_RANGES.get(key)  # (the range too, here: the error names the file)
                        if low is not None and not (math.isfinite(settings[key]) and settings[key] >= low[0]
                                                    and (settings[key] > low[0] or low[1])):
                            raise ConfigError(f"{name}: [algorithms.{algo}] {key} must be {low[2]}, got {value!r}")
                        if key == "lr":  # (it had been refused as "--lr = 5e-324 is subnormal", a flag the
                            # user never gave, helper 192)
                            try:
                                check_not_subnormal(settings[key], "lr")
                            except ValueError as exc:
                                raise ConfigError(f"{name}: [algorithms.{algo}] {exc}") from None
                    elif takes is not None and key not in takes:
                        raise ConfigError(f"{name}: [algorithms.{algo}] {key}: unknown key"
                                          f"{did_you_mean(key, [*ALGORITHM_KEYS, *takes])}; the keys are "
                                          f"{', '.join([*ALGORITHM_KEYS, *takes])}")
                    elif isinstance(value, dict) or isinstance(value, list) and not all(
                            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                        raise ConfigError(f"{name}: [algorithms.{algo}] {key} must be a number, string, boolean or a "
                                          f"list of numbers (one per node, e.g. client_steps), got "
                                          f"{type(value).__name__}{' ' + repr(value) if isinstance(value, list) else ''}")
                if "lr_source" in settings and "lr" not in settings:
                    raise ConfigError(f"{name}: [algorithms.{algo}] lr_source needs lr")
                algorithms[algo] = dict(settings)
            continue
        if table not in tables:
            raise ConfigError(f"{name}: [{table}]: unknown table{did_you_mean(table, [*tables, 'algorithms'])}; the "
                              f"tables are {', '.join([*tables, 'algorithms'])}")
        if not isinstance(body, dict):
            raise ConfigError(f"{name}: {table} must be a table ([{table}]), got {type(body).__name__}")
        for key, value in body.items():
            if key not in tables[table]:
                home = [t for t, keys in tables.items() if key in keys]  # (a key of another table)
                raise ConfigError(f"{name}: [{table}] {key}: unknown key"
                                  + (f" here; it belongs under [{home[0]}]" if home else
                                     did_you_mean(key, tables[table]))
                                  + f"; the keys are {', '.join(tables[table])}")
            dest, kind = tables[table][key]
            value = _check_value(f"{name}: [{table}] {key}", value, kind)
            if value == "" or (isinstance(value, list) and "" in value):  # (matrix = "" had been read as the
                # file's folder, "[Errno 21] Is a directory"; the command line's words)
                raise ConfigError(f"{name}: [{table}] {key} was given an empty value: give it one, or leave the key "
                                  "out")
            if dest in SEEDS and isinstance(value, int) and not 0 <= value <= 2**64 - 1:  # (checked here: the
                # library's refusal says "seed", which names another key)
                raise ConfigError(f"{name}: [{table}] {key} must be a seed in [0, 2^64 - 1], got {value}")
            choices = choices_of.get((table, key))
            items = value if isinstance(value, list) else [value]
            if table == "communication" and isinstance(kind, str) and kind.endswith("|list"):  # (a string is a
                # comma list, as on the command line: compress = "none,qsgd:4" had been refused, "got 'none,qsgd:4'",
                # where loss = "0,0.1" ran two settings; helper 233)
                items = [part for item in items for part in
                         (network_options.split_items(item) if isinstance(item, str) else [item])]
            for item in items:
                hint = item_help.get(key) if table == "communication" else None  # (a sweep's METHOD:P items)
                head = item.split(":")[0] if hint and isinstance(item, str) else item
                if choices and head not in choices:
                    raise ConfigError(f"{name}: [{table}] {key} must be one of {', '.join(choices)}"
                                      + (f" ({hint})" if hint else "") + f", got {item!r}")
            if table == "communication" and isinstance(kind, str) and kind.endswith("|list"):  # (several: one
                # comparison per setting, the options' comma lists)
                value = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
            options[dest] = value
    chosen = options.pop("algorithm_set", None)
    if chosen is not None:
        from .algorithms import labels

        named = []  # (sets and names, as --algorithms takes them: helper 189's list had been refused, "must be a
        # string"; a set within a list, helper 190, "must be one of all, ..., got 'all'")
        for label in _names(chosen):
            if label in ALGORITHM_SETS:
                named += labels(ALGORITHM_SETS[label])
            elif label and _hyperparameters(label) is not None:
                named.append(label)
            else:
                raise ConfigError(f"{name}: [run] algorithms must be one of {', '.join(ALGORITHM_SETS)} or "
                                  f"algorithms' names (a list, or one string separated by commas), got {label!r}"
                                  f"{did_you_mean(label, [*ALGORITHM_SETS, *_all_labels()]) if label else ''}")
        algorithms = {**{label: {} for label in named}, **algorithms}
    if not algorithms and not named_elsewhere:
        raise ConfigError(f"{name}: no [algorithms.NAME] table and no [run] algorithms: name the algorithms to "
                          f"compare (there, or with --algorithms)")
    if "metric" in options:  # (as [run] algorithms: a list, or one string separated by commas; a string had been
        # refused, helper 219; the names are checked with --metrics-module's, by the command)
        options["metric"] = ",".join(_names(options["metric"]))
    if "format" in options:
        options["format"] = ",".join(_names(options["format"])) or "none"  # (formats = []: the tables alone; a
        # string as [outputs] metrics takes, helper 219's formats = "pdf")
    return options, algorithms, raw
