"""The algorithms: one module per algorithm, each written once over the backend operations.

Every module of this folder is imported here, and every :class:`~._base.Optimizer` subclass with a ``name``
registers itself in :data:`REGISTRY` and is exported here (and from :mod:`rowstoch_fast`) under its class name:
adding an algorithm is adding one file. The lists of algorithms (``rowstoch compare``'s default, the paper
preset, the robustness experiment, the tests) come from :func:`names` and :func:`labels`.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._base import Optimizer, exclusive, matrix_from_state
from ._registry import REGISTRY, labels, method_of, names

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

#: The class name of every registered algorithm (``"PullDiagGT"``, ``"DSGD"``, ...), in listing order.
CLASSES = tuple(REGISTRY[name].__name__ for name in names())
globals().update({REGISTRY[name].__name__: REGISTRY[name] for name in names()})

__all__ = ["REGISTRY", "Optimizer", "exclusive", "matrix_from_state", "names", "labels", "method_of", "CLASSES",
           *CLASSES]
