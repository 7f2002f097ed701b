"""Compressed messages: :class:`Compressed` (QSGD, sign, top-k, rand-k, rounding).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_choice, check_int, MAX_KEY, per_node_text, per_node_values
from ..errors import UsageError
from .base import _own_draws, as_network
from .messages import _Messages
from .options import ends, node_option, node_spec, node_values, NodeValues, Option, recorded, refused
from .queries import base_matrix, out_links


class Compressed(_Messages):
    """Every message compressed by its sender (see :class:`_Messages` for what a round computes).

    Parameters
    ----------
    A : MixingMatrix or network
        The network whose messages are compressed (losses, sleep and schedules go inside).
    method : {"qsgd", "sign", "topk", "randk", "round"}
        - ``"qsgd"`` (Alistarh et al. 2017): ``bits`` per value, ``s = 2^bits - 1`` levels of ``|v_c| /
          ||v||_2``, stochastic rounding (unbiased: ``E[Q(v)] = v``) or, ``unbiased=False``, the nearest level;
          ``bits + 1`` bits per value and the norm;
        - ``"sign"``: ``sign(v_c) ||v||_1 / d`` (biased; 1 bit per value and the norm);
        - ``"topk"``: the ``k`` values of largest magnitude, the others 0 (biased; ``k`` values and their
          32-bit indices);
        - ``"randk"``: ``k`` values at positions drawn from the shared seed (receivers draw them too: ``k``
          values), times ``d / k`` when ``unbiased`` (default);
        - ``"round"``: every value rounded to ``bits`` significant bits (deterministic, biased; sign, exponent
          and ``bits - 1`` bits). A float32 run with ``bits >= 24`` sends its values unchanged.
    bits : int in 1..32, or an array of n of them
        ``"qsgd"`` and ``"round"``. An array gives each node its own (heterogeneous devices: what node ``j``
        sends is compressed with ``bits[j]``; equal values are the single number's messages, bit for bit).
    k : int in 1..d, or an array of n of them
        ``"topk"`` and ``"randk"`` (checked against the model's ``d`` when a run starts); an array: each
        sender's, as ``bits``.
    unbiased : bool, optional
        ``"qsgd"`` and ``"randk"`` (default True); the others are biased.
    seed : int
        Seed of the random choices (``"qsgd"``, ``"randk"``).

    Notes
    -----
    ``topk`` with ``k = d``, ``randk`` with ``k = d`` and ``round`` of a float32 run with ``bits >= 24`` (its
    precision; ``bits`` stops at 32, below float64's 53) send every value unchanged: the iterates equal the base network's, bit for bit (tests). The bytes an optimizer's
    ``traffic()`` (and ``rowstoch compare``'s tables) count are those of the compressed messages (with per-node
    ``bits`` or ``k``: each sender's messages at its own size, the links counted sender by sender;
    :meth:`message_bytes` alone gives the mean size over the links of the matrix under the layers). With per-node
    values, :meth:`omega` and :meth:`delta` (CHOCO-SGD's and compressed Push-Pull's constants) are the worst
    node's, and the CuPy backend's kernels read each sender's. A plain algorithm under compression
    shows its degradation; :class:`~rowstoch_fast.CHOCOSGD` compresses the
    differences to replicas it keeps, and converges. Definitions: ``_reference.compress``.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Compressed
    >>> net = Compressed(topology.ring(4), "topk", k=1)  # node 0: half its own x, half what node 3 sends
    >>> net.mix(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]), t=0)[0].tolist()  # 3 sends [0, 8]
    [0.5, 5.0]
    """

    layer = "compressed"
    order = 50
    keeps_symmetry = True
    alters_messages = True
    draws_per_value = True
    DRAWN = "compression"

    METHODS = {"qsgd": 0, "sign": 1, "topk": 2, "randk": 3, "round": 4}
    _TAKES = {"qsgd": ("bits", "unbiased"), "sign": (), "topk": ("k",), "randk": ("k", "unbiased"),
              "round": ("bits",)}

    def __init__(self, A, method, *, bits=None, k=None, unbiased=None, seed=0):
        self.base = as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        check_choice(method, "method", tuple(self.METHODS))
        given = {"bits": bits, "k": k, "unbiased": unbiased}
        extra = [key for key, v in given.items() if v is not None and key not in self._TAKES[method]]
        if extra:
            takes = ", ".join(self._TAKES[method]) or "no parameter"
            raise ValueError(f"compression {method!r} takes {takes}, not {', '.join(extra)}")
        self.method = method
        self.bits = self.k = self.unbiased = None
        if "bits" in self._TAKES[method]:
            if bits is None:
                raise ValueError(f"compression {method!r} needs bits (1..32)")
            self.bits = self._count(bits, "bits", 32, "an integer in 1..32")
        if "k" in self._TAKES[method]:
            if k is None:
                raise ValueError(f"compression {method!r} needs k (1..d)")
            self.k = self._count(k, "k", 2**31 - 1, "an integer >= 1 (and at most d)")
        if "unbiased" in self._TAKES[method]:
            if unbiased is not None and not isinstance(unbiased, (bool, np.bool_)):
                raise TypeError(f"unbiased must be True or False, got {unbiased!r}")
            self.unbiased = True if unbiased is None else bool(unbiased)
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        _own_draws(self)

    def _count(self, value, name, top, words):
        """``bits`` or ``k``: one integer in ``1..top``, or ``n`` of them (a read-only int64 array)."""
        each = per_node_values(value, name, self.n, lambda v: (v >= 1) & (v <= top) & (v == np.floor(v)), words)
        if each is None:
            return check_int(value, name, minimum=1, maximum=top)
        each = each.astype(np.int64)
        each.flags.writeable = False
        return each

    @property
    def draws(self):
        return self.method == "randk" or (self.method == "qsgd" and self.unbiased)  # (stochastic rounding)

    @property
    def draw_key(self):  # (qsgd's and randk's draws have tags of their own: compress.hpp)
        return (self.layer, self.method)

    @property
    def per_node(self):
        """Whether the nodes compress with parameters of their own (``bits`` or ``k`` an array)."""
        return np.ndim(self.bits if self.bits is not None else self.k) != 0

    def _parameters(self):
        return {"method": self.method, "seed": self.seed,
                **{key: getattr(self, key) for key in self._TAKES[self.method]}}

    def _kernel_arguments(self):
        param = self.bits if self.bits is not None else self.k if self.k is not None else 0
        return self.METHODS[self.method], param, 0.0, bool(self.unbiased)

    def _per_node(self, of, values):
        """``of(bits, k)`` for each of ``values`` (a node's bits or k, as the method takes)."""
        return [of(int(v), None) if self.bits is not None else of(None, int(v)) for v in values]

    def _worst(self, of, worst):
        """``of(bits, k)`` of one node, or ``worst`` (max or min) of it over the nodes' distinct values."""
        if not self.per_node:
            return of(self.bits, self.k)
        return worst(self._per_node(of, np.unique(self.bits if self.bits is not None else self.k)))

    def _omega(self, bits, k, d):
        """:meth:`omega` of a node compressing with ``bits`` or ``k``."""
        if self.method == "qsgd" and self.unbiased:
            s = 2.0**bits - 1
            return min(d / s**2, d**0.5 / s)
        if self.method == "randk" and self.unbiased:
            return d / min(k, d) - 1.0
        return 0.0

    def omega(self, d):
        """The variance bound of an unbiased compression of ``d`` values, ``E||Q(v) - v||^2 <= omega ||v||^2``
        (``"qsgd"``: ``min(d / s^2, sqrt(d) / s)``, Alistarh et al. 2017; ``"randk"``: ``d / k - 1``); 0 for
        the biased ones. Per-node ``bits`` or ``k``: the largest of the nodes'."""
        return self._worst(lambda bits, k: self._omega(bits, k, d), max)

    def delta(self, d):
        """A contraction ``delta`` in (0, 1] of the (rescaled) compression of ``d`` values, ``||Q(v) / (1 +
        omega) - v||^2 <= (1 - delta) ||v||^2`` (Koloskova et al. 2019): ``k / d`` for top-k and biased rand-k,
        ``1 / d`` for sign, ``1 / (1 + omega)`` for the unbiased ones; nearest-level qsgd and rounding: 1 / 2.
        Per-node ``bits`` or ``k``: the smallest of the nodes'."""
        def one(bits, k):
            if self.method in ("topk", "randk") and not (self.method == "randk" and self.unbiased):
                return min(k, d) / d
            if self.method == "sign":
                return 1.0 / d
            if self.unbiased:
                return 1.0 / (1.0 + self._omega(bits, k, d))
            return 0.5
        return self._worst(one, min)

    def _bits(self, L, itemsize):
        """Bits of one compressed message of ``L`` values (per-node ``bits`` or ``k``: an array, each sender's)."""
        value = 8 * itemsize

        def one(bits, k):
            if self.method == "qsgd":
                return L * (bits + 1) + value
            if self.method == "sign":
                return L + value
            if self.method in ("topk", "randk"):
                k = min(k, L)
                return k * (value + 32) if self.method == "topk" else k * value
            exponent = 8 if itemsize == 4 else 11  # "round": sign, exponent, the significand's stored bits
            return L * min(value, 1 + exponent + bits - 1)

        if not self.per_node:
            return one(self.bits, self.k)
        return np.array(self._per_node(one, self.bits if self.bits is not None else self.k), dtype=np.int64)

    def mean_over_links(self, per_sender):
        """The mean of ``per_sender`` (a value per node) over the links, each sender weighted by its out-links in
        the matrix under the layers: the size of one message where the nodes compress with their own ``bits`` or
        ``k``."""
        out_links = self._out_links()
        return float(per_sender @ out_links / out_links.sum()) if out_links.sum() else float(per_sender.mean())

    def _out_links(self):
        """Each node's out-links in the matrix under the layers (a schedule's first), kept."""
        cached = self.__dict__.get("_out_link_counts")
        if cached is None:  # (losses and sleep do not change who may send to whom)
            cached = self._out_link_counts = out_links(base_matrix(self)).astype(np.float64)
        return cached

    @property
    def effect(self):
        """In a diagnosis's words (:attr:`Network.effect`)."""
        args = ", ".join(f"{key} = {per_node_text(getattr(self, key))}" for key in self._TAKES[self.method]
                         if not (key == "unbiased" and self.unbiased))  # (the default said by nothing)
        return f"compresses its messages ({self.method}{', ' + args if args else ''})"

    def __repr__(self):
        args = "".join(f", {key}={per_node_text(getattr(self, key))}" for key in self._TAKES[self.method])
        return f"Compressed({self.base!r}, {self.method!r}{args}, seed={self.seed})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    listed = 30
    SEED_FLAGS = ("--compress",)
    OPTIONS = (
        Option("compress", "str|list", None,
               "compress every message (network.Compressed): qsgd (--bits, stochastic rounding), sign, topk / randk "
               "(--k values of d), round (--bits significant bits), or none; the bits or k may follow a colon "
               "(qsgd:4, topk:2); compare: several, comma-separated (--compress none,qsgd:4: one setting each, a "
               "column of the table); bytes are counted compressed", choices=("none", *METHODS),
               metavar="METHOD[:P][,...]", item_help="a list: one setting each; qsgd:4 gives the bits, topk:2 k"),
        Option("bits", int, None, "qsgd and round: bits per value, 1..32; one per node (the sender's): FIRST..LAST "
                                  "or @FILE", cli_type=node_option("--bits", integer=True), toml_kind="int|nodes"),
        Option("k", int, None, "topk and randk: values kept per message, 1..d; one per node (the sender's): "
                               "FIRST..LAST or @FILE", cli_type=node_option("--k", integer=True),
               toml_kind="int|nodes"),
        Option("biased", bool, False, "qsgd: the nearest level instead of stochastic rounding; randk: no d/k "
                                      "rescaling"),
    )

    @classmethod
    def examples(cls, base):
        return {"qsgd": cls(base, "qsgd", bits=4, seed=6), "topk": cls(base, "topk", k=1),
                "per-node-bits": cls(base, "qsgd", bits=np.resize([2, 3, 4, 8], base.n), seed=10)}  # (each sender's)

    @classmethod
    def _with(cls, key):
        """The methods that take ``key``, as a message says them (``qsgd or round``)."""
        return " or ".join(m for m, takes in cls._TAKES.items() if key in takes)

    @classmethod
    def options_in_use(cls, ns):
        return ns.compress is not None

    @classmethod
    def options_drawn(cls, ns):  # (QSGD's stochastic rounding, rand-k's positions; the others draw nothing)
        return cls.DRAWN if ns.compress == "randk" or ns.compress == "qsgd" and not ns.biased else None

    @classmethod
    def check_options(cls, ns, d=None):
        takes = cls._TAKES.get(ns.compress, ())
        ns.bits, ns.k = node_spec(ns.bits, "--bits", integer=True), node_spec(ns.k, "--k", integer=True)
        if "bits" in takes and ns.bits is None:  # (helper 202: "got None" read as Python's, and the short form
            # went unsaid)
            raise UsageError(f"--compress {ns.compress} needs --bits in 1..32 (e.g. --compress {ns.compress}:4)")
        if "bits" in takes and not (1 <= ends(ns.bits)[0] and ends(ns.bits)[1] <= 32):
            raise UsageError(f"--compress {ns.compress} needs --bits in 1..32, got "
                             f"{refused(ns.bits, lambda v: (v >= 1) & (v <= 32))}")
        if "k" in takes and ns.k is None:
            raise UsageError(f"--compress {ns.compress} needs --k in 1..d{f' (d = {d})' if d else ''} (e.g. --compress "
                             f"{ns.compress}:2)")
        if "k" in takes and (ends(ns.k)[0] < 1 or (d is not None and ends(ns.k)[1] > d)):
            raise UsageError(f"--compress {ns.compress} needs --k in 1..d{f' (d = {d})' if d else ''}, got "
                             f"{refused(ns.k, lambda v: (v >= 1) & (v <= (d or np.inf)))}")

    @classmethod
    def from_options(cls, net, ns, seed):
        takes = cls._TAKES[ns.compress]
        kw = {key: node_values(node_spec(getattr(ns, key), f"--{key}", integer=True), net.n, f"--{key}", integer=True)
              for key in ("bits", "k") if key in takes}
        if "unbiased" in takes:
            kw["unbiased"] = not ns.biased
        return cls(net, ns.compress, seed=seed, **kw)

    @classmethod
    def unread_options(cls, ns):
        return [((f"--{key}",), key not in cls._TAKES.get(ns.compress, ()), f"without --compress {cls._with(key)}")
                for key in ("bits", "k")] + [
            (("--biased",), "unbiased" not in cls._TAKES.get(ns.compress, ()),
             f"without --compress {cls._with('unbiased')}")]

    @classmethod
    def options_words(cls, ns):
        if ns.compress is None:
            return None
        detail = {"qsgd": f"{ns.bits}-bit QSGD", "round": f"{ns.bits}-bit rounding", "sign": "sign",
                  "topk": f"top-{ns.k}", "randk": f"rand-{ns.k}"}[ns.compress]
        if any(isinstance(getattr(ns, key), NodeValues) for key in ("bits", "k") if key in cls._TAKES[ns.compress]):
            detail += " (per node)"
        if "unbiased" in cls._TAKES[ns.compress] and ns.biased:
            detail += " (biased)"
        return f"{detail} messages"

    @classmethod
    def options_record(cls, ns):
        return {k: recorded(getattr(ns, k)) for k in ("compress", "bits", "k", "biased")} if ns.compress is not None \
            else {}

    @classmethod
    def sweep(cls, ns, given):
        """``--compress`` as one setting per item: ``none``, ``METHOD`` or ``METHOD:BITS`` / ``METHOD:K``."""
        if ns.compress is None:
            return None
        text, items = ns.compress, []
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                raise UsageError(f"--compress {text!r} has an empty item; write e.g. none,qsgd:4,topk:2")
            method, sep, param = part.partition(":")
            if method == "none":
                if sep:
                    raise UsageError(f"--compress item {part!r}: none takes no parameter")
                items.append((None, None))
                continue
            if method not in cls.METHODS:
                raise UsageError(f"--compress item {part!r}: the method must be one of none, "
                                 f"{', '.join(cls.METHODS)}")
            if sep and method == "sign":
                raise UsageError(f"--compress item {part!r}: sign takes no parameter")
            try:
                value = int(param) if sep else None
            except ValueError:
                key = "bits" if "bits" in cls._TAKES[method] else "k"
                raise UsageError(f"--compress item {part!r}: {param!r} is not an integer ({key}"
                                 + (f"; one per node: --compress {method} --{key} {param}" if ".." in param or
                                    param.startswith("@") else "") + ")") from None
            items.append((method, value))
        if len(items) != len(set(items)):
            raise UsageError(f"--compress {text!r} names a setting twice")
        out = []
        for method, value in items:
            updates = {"compress": method}
            if value is not None:
                key = "bits" if "bits" in cls._TAKES[method] else "k"
                if f"--{key}" in given and getattr(ns, key) != value:
                    raise UsageError(f"--compress {method}:{value} and --{key} {getattr(ns, key)} disagree; give "
                                     f"{'the bits' if key == 'bits' else 'k'} once")
                updates[key] = value
            out.append(updates)
        settings = []  # (as run: `qsgd` takes --bits, so `qsgd:4,qsgd --bits 4` is one setting twice)
        for updates in out:
            takes = cls._TAKES.get(updates["compress"], ()) if updates["compress"] else ()
            key = "bits" if "bits" in takes else "k" if "k" in takes else None
            settings.append((updates["compress"], str(updates.get(key, getattr(ns, key))) if key else None))
        if len(settings) != len(set(settings)):
            raise UsageError(f"--compress {text!r} names a setting twice")
        return out

    @classmethod
    def sweep_label(cls, ns):
        if ns.compress is None:
            return "none"
        takes = cls._TAKES[ns.compress]
        return ns.compress + (f":{ns.bits}" if "bits" in takes else f":{ns.k}" if "k" in takes else "")
