"""The examples run (small budgets) and do what they claim."""

import os
import runpy
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")


def test_digits_mlp_learns(monkeypatch):
    pytest.importorskip("sklearn")
    sys.path.insert(0, EXAMPLES)
    try:
        mod = runpy.run_path(os.path.join(EXAMPLES, "digits_mlp.py"))
    finally:
        sys.path.remove(EXAMPLES)
    results = mod["main"](["--rounds-budget", "200", "--graphs", "grid"])
    loss, acc = results[("grid", 1)]
    assert acc > 0.5  # ten classes: chance is 0.1
    assert loss < 2.0


GALLERY = os.path.join(EXAMPLES, "gallery")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(GALLERY) if f.startswith("plot_")))
def test_the_gallery_examples_run(name, monkeypatch):
    """Each example of the documentation's gallery runs as the docs build runs it (seconds each)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        runpy.run_path(os.path.join(GALLERY, name), run_name="__main__")
        assert plt.get_fignums(), f"{name} drew no figure"
    finally:
        plt.close("all")
