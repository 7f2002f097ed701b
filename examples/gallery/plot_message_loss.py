"""
Gradient tracking under message loss
====================================

Ten percent of the messages of a 24-node directed network are lost (Bernoulli, seeded). Push-sum (SGP) loses the
mass of every lost message; Push-Pull's trackers drift; the running-sum methods, robust gradient-push and R-FAST,
deliver a lost message's content with the next one that arrives: robust gradient-push keeps its lossless ``O(lr)``
accuracy, and R-FAST (gradient tracking) still converges to the minimiser itself.
"""

import textwrap

import matplotlib.pyplot as plt
import numpy as np

import rowstoch_fast as rf
from rowstoch_fast.errors import DivergenceError
from rowstoch_fast.network import Lossy

A = rf.topology.erdos_renyi(24, 0.25, seed=1)
f = rf.objectives.Quadratic.random(24, 3, seed=0)
x_star = f.optimum().x
net = Lossy(A, 0.1, seed=0)

fig, ax = plt.subplots(figsize=(6, 3.5))
for name in ("sgp", "push-pull", "robust-gradient-push", "r-fast"):
    cls = rf.algorithms.REGISTRY[name]
    opt = cls.build(net, f.x0(), 0.02)
    errors, label = [], name
    try:
        for _ in range(600):
            opt.step(f.full_gradient)
            errors.append(np.abs(opt.x - x_star).max())
    except DivergenceError as exc:  # SGP's weights drain: it says so, naming the lost messages
        print(textwrap.fill(f"{name}: {exc}", 100))
        label = f"{name} (weights drained: stopped at {exc.iteration})"
    errors = np.array(errors)
    ax.semilogy(np.where(errors < 10, errors, np.nan), label=label)
ax.set_xlabel("iteration")
ax.set_ylabel("max_i ||x_i - x*||")
ax.set_title("10% of the messages lost", fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
