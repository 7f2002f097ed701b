"""The paper's experiments, reproduced: Figure 1 (Pull-Diag), Figure 2 (linear speedup, both halves), multi-gossip,
the MNIST MLP (Figure 3, and the heterogeneous MNIST figure of Appendix E), ResNet-18 on CIFAR-10 (Figure 4), and
the algorithms under message loss and compression; and one published figure of a local-update method (K-GT's
synthetic experiment: :mod:`.local_updates`).

Each function writes a CSV and (with matplotlib) a PNG into ``out_dir``,
returns its numbers, and is what ``rowstoch reproduce ...`` and
``rowstoch demo`` call.
"""

from __future__ import annotations

from ._common import COMPARE_RULE, DATA_SEED, FINAL_WINDOW, SLOPE_TOLERANCE
from .local_updates import (KGT_DIFFERENCES, KGT_FIGURE, KGT_HETEROGENEITY, KGT_LOCAL_STEPS, KGT_METHODS,
                            KGT_MIN_ROUNDS, KGT_PAPER, KGT_REPEATS, KGT_ROUNDS, KGT_RULE, heterogeneous_quadratics,
                            kgt_local_steps_verdicts, reproduce_kgt_local_steps)
from .neural import (MNIST_AXES, SPLITS, label_counts, mlp, reproduce_cifar10_resnet, reproduce_mnist_heterogeneous,
                     reproduce_mnist_mlp, resnet18)
from .robustness import COMMUNICATION_ALGORITHMS, reproduce_communication, reproduce_robustness
from .synthetic import (LINEAR_SPEEDUP_ITERATIONS, LINEAR_SPEEDUP_LR, LINEAR_SPEEDUP_SIZES, MULTI_GOSSIP_LR,
                        PAPER_RATE_CONSTANT, RATES, RING_RATE_CONSTANT, demo, linear_speedup_rate,
                        reproduce_linear_speedup, reproduce_multi_gossip, reproduce_pull_diag)

__all__ = ["LINEAR_SPEEDUP_LR", "LINEAR_SPEEDUP_SIZES", "LINEAR_SPEEDUP_ITERATIONS", "PAPER_RATE_CONSTANT",
           "RING_RATE_CONSTANT", "RATES", "MULTI_GOSSIP_LR", "DATA_SEED", "SLOPE_TOLERANCE", "FINAL_WINDOW",
           "COMPARE_RULE", "MNIST_AXES", "SPLITS", "COMMUNICATION_ALGORITHMS", "linear_speedup_rate", "label_counts",
           "reproduce_pull_diag", "reproduce_linear_speedup", "reproduce_multi_gossip", "reproduce_mnist_mlp",
           "reproduce_mnist_heterogeneous", "reproduce_cifar10_resnet", "reproduce_robustness",
           "reproduce_communication", "mlp", "resnet18", "demo", "KGT_PAPER", "KGT_FIGURE", "KGT_DIFFERENCES",
           "KGT_LOCAL_STEPS", "KGT_HETEROGENEITY", "KGT_METHODS", "KGT_ROUNDS", "KGT_REPEATS", "KGT_MIN_ROUNDS",
           "KGT_RULE", "heterogeneous_quadratics", "kgt_local_steps_verdicts", "reproduce_kgt_local_steps"]
