"""Objects as a notebook treats them: copied, pickled, printed, changed after they were built (helper 267)."""

import copy
import importlib
import inspect
import pickle
import pkgutil

import pytest

import rowstoch_fast
from rowstoch_fast.errors import DivergenceError


def _exception_classes():
    found = {}
    for info in pkgutil.walk_packages(rowstoch_fast.__path__, "rowstoch_fast."):
        if any(part in info.name for part in ("torch", "mpi", "cupy", "__main__")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional backend's module
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) \
                    and value.__module__.startswith("rowstoch_fast"):
                found[value.__qualname__] = value
    return found


def test_a_divergence_error_survives_pickle_and_copy_with_what_was_attached():
    # (BaseException rebuilds cls(*args), without the keyword-only arguments: a process pool sweeping rates broke,
    # or waited for ever, at the first divergent rate)
    error = DivergenceError.gradient(7, 3, 6)
    error.history = {"rows": [1, 2]}
    for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error), copy.copy(error)):
        assert type(again) is DivergenceError and str(again) == str(error)
        assert (again.iteration, again.node, again.what, again.history) == (7, 3, "gradient", {"rows": [1, 2]})


def test_every_exception_of_the_package_that_takes_a_message_pickles():
    classes = _exception_classes()
    assert "DivergenceError" in classes and len(classes) >= 8
    for name, cls in classes.items():
        try:
            error = cls("what went wrong")
        except TypeError:  # (one built with other arguments: DivergenceError is tested above)
            continue
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is cls and str(again) == str(error), name
