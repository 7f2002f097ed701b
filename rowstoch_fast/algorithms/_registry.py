"""The registry of algorithms, and every list of them derived from it.

A subclass of :class:`~rowstoch_fast.algorithms.Optimizer` with a ``name`` registers itself here when its module
is imported (:mod:`rowstoch_fast.algorithms` imports every module of its folder). What the harness, the
experiments, the command line and the tests list comes from here and from each class's attributes
(``order``, ``exact``, ``bias``, ``mg_listed``, ``in_paper_preset``, ``in_robustness``): adding an algorithm
is adding one file (and its dense twin in :mod:`rowstoch_fast._reference`), never editing a list.
"""

from __future__ import annotations

__all__ = ["REGISTRY", "names", "labels", "method_of"]

#: Every algorithm by its name (``"pull-diag-gt"``, ``"frost"``, ...): filled as the modules of this folder load.
REGISTRY = {}


def names(where=None):
    """The registered names in listing order (each class's ``order``, then its name), those whose class
    satisfies ``where(cls)`` when given.

    Examples
    --------
    >>> from rowstoch_fast import algorithms
    >>> algorithms.names()[:3]
    ['pull-diag-gt', 'frost', 'pull-diag-gd']
    >>> [k for k in algorithms.names(lambda c: c.exact)][:2]
    ['pull-diag-gt', 'frost']
    """
    chosen = [cls for cls in REGISTRY.values() if where is None or where(cls)]
    return [cls.name for cls in sorted(chosen, key=lambda cls: (cls.order, cls.name))]


def labels(where=None, every_mg=False):
    """:func:`names` with ``"mg-NAME"`` (``NAME`` with several gossip rounds per iteration) right after
    ``NAME`` for the multi-round methods whose class sets ``mg_listed`` (every multi-round method with
    ``every_mg``): the names ``rowstoch compare`` runs by default (``where=None``), ``--preset paper``
    (``in_paper_preset``) and ``rowstoch reproduce robustness`` (``in_robustness``) run.

    Examples
    --------
    >>> from rowstoch_fast import algorithms
    >>> algorithms.labels()[:3]
    ['pull-diag-gt', 'mg-pull-diag-gt', 'frost']
    """
    out = []
    for name in names(where):
        out.append(name)
        cls = REGISTRY[name]
        if cls.multi_round and (cls.mg_listed or every_mg) and "mg-" + name not in REGISTRY:
            out.append("mg-" + name)
    return out


def method_of(label):
    """The registry name behind a label: ``NAME`` itself, or ``NAME`` of ``"mg-NAME"``."""
    if label.startswith("mg-") and label not in REGISTRY:
        return label[3:]
    return label
