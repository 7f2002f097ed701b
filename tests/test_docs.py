"""Run the numpydoc Examples sections of every public module as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import rowstoch_fast

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(rowstoch_fast.__path__, "rowstoch_fast.") if not m.name.endswith("_core")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    if name == "rowstoch_fast.torch":
        pytest.importorskip("torch", reason="PyTorch not installed (rowstoch_fast[torch])")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
