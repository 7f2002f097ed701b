"""rowstoch_fast: decentralized optimization over row-stochastic (directed) networks.

Fast C++ kernels (``rowstoch_fast._core``) under a NumPy/SciPy API for the
Pull-Diag protocol, Pull-Diag-GT and MG-Pull-Diag-GT of
"Linear Speedup and Near-Optimal Rates for Decentralized Optimization over
Row-Stochastic Networks" (ICML 2025).
"""

from . import _core, objectives, topology
from .algorithms import DSGD, FROST, SGP, CentralizedSGD, PullDiagGD, PullDiagGT, PushDIGing, PushPull
from .errors import DivergenceError
from .metrics import NetworkMetrics
from .mixing import MixingMatrix
from .protocol import ConsensusResult, a_protocol, pull_diag
from .runner import Algorithm, History, run

__version__ = "0.1.0"

__all__ = [
    "MixingMatrix",
    "NetworkMetrics",
    "PullDiagGT",
    "FROST",
    "PullDiagGD",
    "DSGD",
    "PushPull",
    "PushDIGing",
    "SGP",
    "CentralizedSGD",
    "DivergenceError",
    "pull_diag",
    "a_protocol",
    "ConsensusResult",
    "Algorithm",
    "History",
    "run",
    "objectives",
    "topology",
    "build_info",
    "__version__",
]


def build_info():
    """How the compiled kernels were built (OpenMP, compiler, flags, threads).

    Examples
    --------
    >>> sorted(build_info())[:3]
    ['compiler', 'flags', 'max_threads']
    """
    return dict(_core.build_info())
