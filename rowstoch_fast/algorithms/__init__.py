"""The algorithms: one module per algorithm, each written once over the backend operations.

Every module of this folder is imported here, and every :class:`~._base.Optimizer` subclass with a
``name`` registers itself in :data:`REGISTRY`: adding an algorithm is adding one file.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._base import REGISTRY, Optimizer, exclusive, matrix_from_state

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")

from .centralized import CentralizedSGD  # noqa: E402
from .dsgd import DSGD  # noqa: E402
from .frost import FROST  # noqa: E402
from .pull_diag_gd import PullDiagGD  # noqa: E402
from .pull_diag_gt import PullDiagGT  # noqa: E402
from .push_diging import PushDIGing  # noqa: E402
from .push_pull import PushPull  # noqa: E402
from .sgp import SGP  # noqa: E402

__all__ = ["REGISTRY", "Optimizer", "PullDiagGT", "FROST", "PullDiagGD", "DSGD", "PushPull", "PushDIGing", "SGP",
           "CentralizedSGD", "exclusive", "matrix_from_state"]
