"""Progress bars where someone watches them: one rule for every long call of the package (runs, comparisons,
reproductions).

``enabled`` is False (none), True (only where seen: stderr a terminal, or a Jupyter kernel; never inside the
tables of a log file) or ``"always"`` (the command line's ``--progress``).
"""

from __future__ import annotations

import sys

__all__ = ["bar", "check", "watched"]


def check(enabled, name="progress"):
    """``enabled`` as the long calls take it: True, False (or None, 0, 1) or ``"always"``; a ValueError naming
    ``name`` otherwise (``progress="never"`` was taken as True, a bar where none was asked for)."""
    if enabled is None or enabled is True or enabled is False or (isinstance(enabled, str) and enabled == "always"):
        return enabled
    if type(enabled).__name__ in ("bool", "bool_") or (isinstance(enabled, int) and enabled in (0, 1)):
        return bool(enabled)
    raise ValueError(f"{name} must be True, False or 'always' (a bar even where no one watches), got {enabled!r}")


def watched():
    """True where a progress bar is seen: stderr is a terminal, or the code runs in a Jupyter kernel."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) or "ipykernel" in sys.modules


def bar(enabled, total, initial=0, desc=None, unit="it"):
    """A tqdm bar (``tqdm.auto``: a widget in a notebook), or None where none is wanted or tqdm is missing."""
    enabled = check(enabled)
    if not enabled or (enabled != "always" and not watched()):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency, but stay usable without it
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=False)
