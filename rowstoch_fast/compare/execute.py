"""Running a :class:`~rowstoch_fast.compare.plan.Plan`: each method tuned, evaluated and judged
(:func:`~rowstoch_fast.compare.method.run_method`), one after the other or in parallel processes
(:func:`execute`, ``jobs``: :mod:`.processes`), with the same results either way.

A Ctrl-C or a SIGTERM stops the comparison cleanly: the method running keeps what it recorded (its evaluation run
writes a checkpoint, and its status is ``interrupted``), and the finished ones are returned for the caller to
write; a SIGTERM that a script left to its default then ends the process instead (:func:`sigterm_as_interrupt`:
what finished is what ``on_outcome`` was given). An error in one method's run goes out with the methods that
finished before it.
"""

from __future__ import annotations

from .. import backends
from .._progress import bar as progress_bar
from .._signals import signals_held, sigterm_as_interrupt
from .method import Outcome, run_method
from ..runner import held_between_runs
from .processes import default_jobs, execute_in_processes, remove_stale_plan_files

__all__ = ["Outcome", "run_method", "execute", "default_jobs"]


def execute(plan, *, jobs=1, progress=False, log=None, on_outcome=None):
    """Run every method of ``plan``: ``(outcomes, interrupted, error)``.

    ``outcomes`` are in the plan's order (the methods that finished, and the one interrupted), ``interrupted``
    says whether a Ctrl-C or SIGTERM stopped the comparison, ``error`` is the exception one method's run raised
    (the others' outcomes kept), or None. ``on_outcome(outcome)`` is called as each method finishes (to write
    the results as they come). ``jobs > 1`` runs the methods in that many processes (each with its share of the
    cores' threads); the outcomes are those of a serial run.
    """
    log = log or (lambda line: None)
    remove_stale_plan_files()
    if jobs > 1 and len(plan.methods) > 1:
        return execute_in_processes(plan, jobs, progress=progress, log=log, on_outcome=on_outcome)
    outcomes, interrupted, error = [], False, None
    bar = _bar(progress, len(plan.methods))
    try:
        with sigterm_as_interrupt(_ranks_together(plan.backend)), held_between_runs(plan.backend):  # (under MPI:
            # see held_between_runs)
            for method in plan.methods:
                if bar is not None:
                    bar.set_description(method.label + ("" if method.lr is not None else " (tuning)"))
                outcome = run_method(plan, method, progress=progress, log=log)
                outcomes.append(outcome)
                if on_outcome is not None:
                    with signals_held():  # (the caller writes what finished: a signal waits until it is written)
                        on_outcome(outcome)
                if outcome.status == "interrupted":  # the runner caught the interruption: stop here
                    interrupted = True
                    break
                if bar is not None:
                    bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:  # noqa: BLE001 - one method's run failed: the finished ones go with the error
        error = exc
    finally:
        if bar is not None:
            bar.close()
    return outcomes, interrupted, error


def _ranks_together(backend):
    """Under MPI, what a rank does before a script's SIGTERM ends it (:func:`sigterm_as_interrupt`): wait, a minute
    at most, until every rank has come, so that none ends the job (mpiexec ends every rank once one ends by a
    signal) while rank 0 still takes the results (``on_outcome``: what the caller writes). None with one process.
    (A SIGTERM that reaches one rank between the two contexts' entries stops that rank alone: a window of a few
    statements.)"""
    return None if backends.one_process(backend) else lambda: backends.every_process_here(backend, timeout=60.0)


def _bar(enabled, total):
    return progress_bar(enabled, total, unit="algorithm")
