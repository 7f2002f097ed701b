"""Guards on an optimizer's attributes: one thread at a time inside it, ``lr`` checked when assigned between
steps, the other hyperparameters fixed once it is built."""

from __future__ import annotations

import functools
import threading

__all__ = ["exclusive", "derived"]

_OWNER_LOCK = threading.Lock()


def exclusive(method):
    """Let one thread at a time into an optimizer's ``method``.

    An optimizer holds one state; two threads stepping it at once would
    interleave half-steps and silently lose iterations. A call made while
    another thread is inside ``step``/``initialize``/``state_dict`` of the same
    optimizer raises RuntimeError instead. (Calls from the same thread nest.)
    """
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        me = threading.get_ident()
        with _OWNER_LOCK:
            owner, depth = self.__dict__.get("_owner"), self.__dict__.get("_owner_depth", 0)
            if owner is not None and owner != me:
                raise RuntimeError(
                    f"{type(self).__name__}.{method.__name__}() called from a second thread while another thread "
                    "is using this optimizer; an optimizer is not thread-safe: give each thread its own "
                    "(they may share one MixingMatrix), or serialise the calls with a lock")
            self._owner, self._owner_depth = me, depth + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            with _OWNER_LOCK:
                self._owner_depth -= 1
                if self._owner_depth == 0:
                    self._owner = None

    return guarded


class _StepSize:
    """``opt.lr``: assigned between steps (a schedule), it is checked and what the state derives from it is
    recomputed (:meth:`Optimizer._lr_changed`)."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__["lr"]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__} has no lr yet") from None

    def __set__(self, obj, value):
        if obj.__dict__.get("_built"):
            if obj.__dict__.get("_owner") is not None:  # inside step/initialize (grad_fn) or another thread's
                raise RuntimeError("lr can change between steps only, not while a step runs (e.g. from grad_fn): "
                                   "half of the step would use the old value")
            obj._set_lr(value)
        else:  # the constructor's _check_hyper
            obj.__dict__["lr"] = value


class _Fixed:
    """A hyperparameter other than ``lr`` (``rounds``, ``tracker``, ...): set by the constructor, fixed once the
    optimizer is built (its buffers and tracker depend on it). Reads give the constructor's value (what
    ``state_dict`` saves), or the class default."""

    def __init__(self, default=None):
        self.default = default

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.default
        values = obj.__dict__
        if self.name in values:
            return values[self.name]
        return values.get("_hyper", {}).get(self.name, self.default)

    def __set__(self, obj, value):
        if obj.__dict__.get("_built"):
            raise AttributeError(f"{self.name} cannot change once {type(obj).__name__} is built (its buffers and "
                                 f"tracker depend on it); build a new optimizer with the {self.name} you want")
        obj.__dict__[self.name] = value


class derived:
    """A capability tag read off what a class is, unless the class (or a parent below the base) says otherwise:
    ``in_paper_preset = derived(lambda cls: ...)`` on the base class; a subclass that writes
    ``in_paper_preset = False`` overrides it, one that writes nothing gets the rule applied to itself (its own
    ``matrices``, ``gradients``, ...), never a default inherited from the base's answer."""

    def __init__(self, rule):
        self.rule = rule
        self.__doc__ = rule.__doc__

    def __get__(self, obj, owner):
        return self.rule(owner)
