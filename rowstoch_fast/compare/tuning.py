"""Each method's learning rate: the best stable rate of a grid over the whole budget, at the cost of about one run.

Every candidate rate runs the whole budget as one replica of a single batched run (the engine steps replicas as one
block, each at its own rate: ``lr`` of shape ``(reps, 1, 1)``), on gradient streams that no evaluation repetition
draws. A candidate that diverges (NaN or Inf anywhere: in its iterates, a compressed message, a delay history, a
tracker) is set aside inside the run, its gradients no longer computed, and rejected; the others go on untouched
(replicas share no values). Each candidate is then judged on its whole trajectory (:func:`judge`): its final value
is read from the end of the run (a line fitted to the logarithm of its last quarter), and it is rejected when it
diverged, grew (ended over a thousand times its start), ended above half its start (no progress), or ended more than
:data:`STABILITY_FACTOR` times above the minimum of its smoothed trajectory. Where no candidate of the grid is
stable and their failures say where the rates that work lie (all too large, all too small, or the too small ones
just below the too large ones), the tuner searches there (:func:`_search`: the grid is a guess at the data's units),
and where it finds stable rates, runs a grid's worth of rates on from the first of them (:func:`_moved_grid`). The
best candidate is then refined: the geometric midpoints with its neighbours (a quarter decade of the default grid)
on either side and the points halfway to them (an eighth), and past the edge of what was tried when it is at the
edge, in a second batched run, which also refines around the runner-up where it ends within :data:`RUNNER_UP` of
the best (:func:`_around_runner_up`); where the best then lies in a narrow valley (its neighbours end steeply above it: a
method that converges linearly ends exponentially in its rate), or, where the tuning's trajectories are the
evaluation's (gradients of the whole data, no draws: :func:`exact_tuning`), anywhere but on a plateau, the steps to
them are halved, four times at most (:func:`_fine`; and where it and a neighbour that ends close to it lie
between two such walls, their midpoint is tried: :func:`_between_walls`). Where the gradients or the messages are
random and two streams cannot order the candidates (the relative standard error of their replicas'
final values, pooled, at least :data:`CONFIRM_NOISE`), the contenders (:func:`contenders`: the best, the others
within two standard errors of it, then its neighbours within a grid step) run again on as many more streams as that
noise needs (:func:`confirm_repeats`; in runs no wider than the grid's), their messages drawn anew, are judged on
all of them together (the "confirm" stages; the stability rule reading the median of their streams,
:func:`typical_curve`), and the rate is chosen among them: the noise of two streams then no longer orders rates that
an evaluation of many repetitions orders the other way (bench/RESULTS.md sections 34, 35). Where the fine
refinement ran and the pooled noise confirms nothing, the valley's floor (the best and its neighbours that end
close to it) still runs on more streams (:func:`_valley_floor`): two streams shared by every candidate that agree
at one rate agree at all of them, and at the floor noise is the largest share of the final value. Where no
candidate is stable on two noisy streams, the lowest-ending ones run on more the same way: one stable there is
chosen, else the rate the method is shown at (:class:`NoStableRate`'s fallback) is the lowest-ending of them
(section 36).

No candidate is dropped before the end of the budget: a rate that is slow at first can be the best at the end (a
biased method needs a small rate over the whole budget). Only a candidate that diverged stops costing anything.
"""

from __future__ import annotations

import glob
import json
import math
import os
import time
import warnings
import weakref
import zipfile
import zlib

import numpy as np

from .._checks import MAX_KEY, as_float_array, check_positive_float, precision_of
from .._files import atomic_write
from .._progress import bar as progress_bar
from ..errors import DivergenceError
from ..objectives import Oracle, optimum_of, value_noise
from ..runner import GROWTH_WARNING, agreed_stop, build_replicas, initialize, record_metrics, round_schedule
from ..network import draws, redrawn

__all__ = ["TUNE_SEED_OFFSET", "TUNE_REPEATS", "TUNE_POINTS", "STABILITY_FACTOR", "NO_PROGRESS", "CONVERGED",
           "converged_for", "TAIL",
           "CONFIRM_REPEATS", "CONFIRM_MIN_REPEATS", "CONFIRM_MAX", "CONFIRM_NOISE", "NoStableRate", "UNTUNABLE",
           "judge", "final_estimate", "noise", "contenders", "confirm_repeats",
           "replicas_per_rate", "tune"]

#: The tuning runs draw their mini-batches from ``seed + TUNE_SEED_OFFSET`` (wrapped to 64 bits), and their
#: network's draws from its seeds ``+ TUNE_SEED_OFFSET``: streams that no evaluation repetition of the comparison
#: (``seed``, repetitions 0 .. repeats-1, the network redrawn by the repetition) ever draws.
TUNE_SEED_OFFSET = 0x5EED_0000_0000
#: Replicas per candidate rate (independent gradient streams), judged on their mean; one where they would all run
#: the same trajectory (:func:`replicas_per_rate`: exact gradients, no per-replica draws).
TUNE_REPEATS = 2
#: The relative standard error of the candidates' final values (over their replicas, pooled: :func:`noise`)
#: below which no confirmation runs: ``ln(1.25) / (2 sqrt(2))``, where two candidates whose final values differ
#: by 1.25x (what the evaluation may find between the chosen rate and the best) differ by two standard errors of
#: their difference.
CONFIRM_NOISE = math.log(1.25) / (2.0 * math.sqrt(2.0))
#: The most streams a confirmation stage adds to each contender (streams ``TUNE_REPEATS ..`` of the tuning seed,
#: its network drawn anew: :func:`~rowstoch_fast.network.redrawn`): as many as bring the pooled noise to
#: :data:`CONFIRM_NOISE` (:func:`confirm_repeats`), at least :data:`CONFIRM_MIN_REPEATS`. 30: on a held-out lossy,
#: noisy problem (pooled noise 0.36-0.46) 14 more streams still chose rates 1.3-1.6x off, 30 the best (section 35).
CONFIRM_REPEATS = 30
#: The fewest streams a confirmation stage adds.
CONFIRM_MIN_REPEATS = 6
#: At most this many candidates (the best, the others within two standard errors of it, then its neighbours on
#: the rates' grid) run in a confirmation stage.
CONFIRM_MAX = 5
#: Draws set aside at most in one tuning (:func:`_confirm`): a confirmation's draw of the network and streams on
#: which every contender grew or diverged, all of them stable on the grid's, tells no contender from another (a
#: rare draw: a node of a lossy network that lost every in-link for eight iterations, its push-sum weight at 7e-7,
#: made every contender of a helper's robust gradient-push grow; the rate chosen in their place, judged on two
#: streams only, ended 149x above the best: bench/RESULTS.md section 54). It is replaced by a draw of its own and
#: said; a third such draw is judged as any other. Two: helper 180's robust gradient-push on a bursty lossy ring
#: met two in a row (its draws of the network that undo every rate near the best, about one in ten, met by chance),
#: and the second, judged, left only rates that no draw had tried (3.06x off; :func:`_retested`).
SET_ASIDE_MAX = 2
#: Records per tuning run (evenly spaced, as the evaluation's): the trajectory the stability rule reads.
TUNE_POINTS = 24
#: A candidate whose final value is more than this factor above the minimum of its smoothed trajectory is
#: rejected: a rate that is best at some horizon and then climbs.
STABILITY_FACTOR = 2.0
#: A metric below this fraction of its start has converged (to rounding, for the exact methods): values below it
#: count as equal. In float64; :func:`converged_for` gives a problem's own.
CONVERGED = 1e-12
#: Rounding steps of its dtype (eps) within which a run's metric, relative to its start, is at rounding: 100, so
#: 1.2e-5 in float32 (a hundred times one step of a helper's start, where a thousand had tied a rate still falling
#: at 1.1e-5 with one at 0), and :data:`CONVERGED` in float64 (2.2e-14 is below it). The suboptimality reads its
#: loss's own rounding instead (:data:`VALUE_STEPS`).
ROUNDING_STEPS = 100
#: Steps of the loss's own rounding near f* (:func:`~rowstoch_fast.objectives.value_noise`) within which
#: f(x_bar) - f* is at rounding: 4.
#: Float32 moved f(x_bar) between f* and one step (1.5e-8 at abs(f*) = 0.2; helper 117), and eleven exact methods
#: over 3,000 rounds within one step of f* (bench/RESULTS.md 63a); 100 eps of the start (1.2e-5 at a start of 1)
#: had tied CHOCO-SGD and DGD at 9e-6 with DIGing at 1.5e-8 and chosen their largest rates, 2.8-47.8x above their
#: best (helper 138); ten steps still tied CHOCO-SGD at 2.5e-7 with its best, 1.9e-7 (1.31x).
VALUE_STEPS = 4


def converged_for(objective, metric=None):
    """The fraction of its start below which a run's ``metric`` on ``objective`` has converged (to rounding): the
    larger of :data:`CONVERGED` and :data:`ROUNDING_STEPS` times the eps of the objective's dtype (float64 where
    it has none); for the suboptimality, f(x_bar) - f*, the larger of :data:`CONVERGED` times the smaller of
    ``abs(f*)`` and its start ``f(x0) - f*``, and :data:`VALUE_STEPS` times its loss's rounding near f*
    (:func:`~rowstoch_fast.objectives.value_noise`), over that start: the size of f near its minimum, not a start
    far from x* (from a start 3.98e5 above f* = 13.55, 1e-12 of the start, 4.0e-7, had tied FROST, still falling at
    1.1e-10, with methods at 0 and 1.8e-15, "converged to rounding": helper 180), and the same fraction in any units
    of the data; where f* is about 0 (data a model fits exactly) the measured rounding alone (helper 183: a cut to
    the start below 1e-6 of it had put the floor 1e4 times above an f* of 5.5e-5).

    In float32 the exact methods' suboptimality moved between 0 and 1.5e-8 (one rounding step of f(x_bar)):
    "unstable, climbed back 1.7e4x above its lowest level", and ranks given by one step (helper 117). A constant
    1e4 added to a least-squares loss (start 6.1, the same gradients) ranked DIGing apart on seven rounding
    steps of 1.8e-12 and, at 1e6, tuned Push-Pull's rate on rounding (helper 120).
    """
    eps = float(np.finfo(precision_of(objective)).eps)
    fraction = max(CONVERGED, ROUNDING_STEPS * eps)
    if metric != "suboptimality":
        return fraction
    cached = objective.__dict__.get("_suboptimality_start")  # (two passes over the data: once per objective)
    if cached is None:
        try:
            best = optimum_of(objective)
            x0 = np.asarray(objective.x0(), dtype=np.float64)
            start = float(objective.value_and_gradient_at(x0)[0]) - best.value if best is not None else math.nan
        except Exception:  # noqa: BLE001 - no f*, no loss to evaluate: the dtype's fraction
            best, start = None, math.nan
        try:  # (a loss that refuses points in a batch: :data:`ROUNDING_STEPS` steps of max(1, abs(f*)) instead)
            level = VALUE_STEPS * value_noise(objective, best) if best is not None else math.nan
        except Exception:  # noqa: BLE001
            level = ROUNDING_STEPS * eps * max(1.0, abs(float(best.value)))
        cached = (start, level, abs(float(best.value)) if best is not None else math.nan)
        objective.__dict__["_suboptimality_start"] = cached
    start, level, size = cached
    if not (math.isfinite(start) and start > 0 and math.isfinite(level)):
        return fraction
    return max(CONVERGED * min(start, size), level) / start


#: A candidate that ends above this fraction of its start made no progress (the evaluation's ``no-progress``:
#: :data:`~rowstoch_fast.compare.verdict.NO_PROGRESS`).
NO_PROGRESS = 1.0 / STABILITY_FACTOR
#: The share of the budget at its end from which a trajectory's final value is read (:func:`final_estimate`).
TAIL = 0.25
#: Batched runs of an exact tuning's refinement around the stretches of stable rates and the edges of stability
#: that a refinement drew (:func:`_valleys`: a rejected refined rate that split a stretch, a new edge): two. SGP on a
#: 32-node exponential graph over 10 rounds ended 22.7x above a dip at 0.40-0.45 that rejected rates at 0.56 and
#: 0.75 had parted from the grid's best, 1.0; R-FAST over 9 rounds 5.5x above one at the new edge, 1.12 (helper 139).
VALLEY_STAGES = 2
#: The first refinement also goes around the grid's runner-up (its second-lowest-ending stable rate) where that ends
#: within this factor of the best (:func:`_around_runner_up`): helper 184's MG-Pull-Diag-GT (R = 10) on the paper's
#: ring ended 9.0e-4 at 0.0178, a narrow valley between the grid's 0.01 (1.07e-2 in the tuning) and its runner-up
#: 0.0316 (3.7e-3), where the refinement around the best, 0.1 (2.4e-3), chose 0.133 (2.42e-3 in the evaluation: 2.70x).
RUNNER_UP = 2.0
#: Steps of refinement past the grid's edge, one batched run each, while the best rate is the outermost tried.
MAX_EXTENSIONS = 3
#: And as many more (within :data:`SEARCH_DECADES` of the grid) while it ends :data:`EDGE_GAIN` times below its
#: neighbour: helper 160's K-GT (features x1000) ended 0.086, 0.0049 and 8.3e-4 at the three steps from 1e-5 down to
#: 1e-6 and was run at 1e-6, where 1.8e-7 ends 9.8e-5.
LATER_EXTENSIONS = 16
#: How much lower the largest rate tried must end than the next rate down for the tuner to go above it where it is
#: not the best (:func:`_above_the_top`): helper 248's FROST on the default comparison's problem sat at 0.0558 +- 0.3%
#: from 1 to 1000 (30x above its best, 0.0042), and a top 0.1% lower than its neighbour had run four stages more.
ABOVE_GAIN = 1.1
#: The most stages above the largest rate tried (:func:`_above_the_top`) without a new best: helper 249's ADMM, its
#: top 10 at 1.2e-4 against 8.5e-9 a step down, creeping down less than 1% over its tail, had been sent up to 1e9,
#: 16 stages more, its choice unchanged; three (a decade and a half) lost helper 245's 400-round Push-Pull, ADD-OPT,
#: Push-DIGing and ABm on separable data (a bump of worse rates from 17.8 to ~2,000, rounding past it), and a bound
#: on the top's distance above the next rate down (tenfold) lost its Pull-Diag-GT, FROST and ABm there.
ABOVE_STAGES = 6
#: How much lower the best rate, outermost, must end than its neighbour for the steps past the edge to go on after
#: :data:`MAX_EXTENSIONS` (:func:`_edge_gains`): the 1.25 a tuned rate may miss the best by.
EDGE_GAIN = 1.25
#: Batched runs of the fine refinement (:func:`_fine`) after the quarter and eighth steps: halving the steps to the
#: best's neighbours each time (16th, 32nd, ... 128th decades of the default grid) while it lies in a narrow valley
#: (next to a rate that diverges, NIDS ended 1.6-2x lower a 40th of a decade up: 4.2x off after two halvings).
FINE_STAGES = 4
#: A neighbour of the best rate ends steeply above it (:func:`_fine`) when more than this factor (the
#: evaluation's 1.25x) and further than the rates are apart (on noisy streams, more than two standard errors of
#: their difference too): a method converging linearly ends exponentially in its rate (GT-SVRG on a helper's
#: least squares: 5.6e-5 at the tuned 0.0316, 2.2e-6 at 0.0398, 2.8e-3 at the quarter step up 0.0562).
FINE_GAIN = 1.25
#: The least ratio of the two rates whose midpoint :func:`_between_walls` tries: 1.1, between the default grid's
#: 16th of a decade (1.155x; helper 232's Push-Pull, mini-batches of 8, ended 2.3-2.8x lower at the midpoint of
#: 0.0133 and 0.0154 over 20 repetitions) and its 32nd (1.075x: ABM there, batches of 4, chose the midpoint of
#: 0.0143 and 0.0154 on two streams and ended 1.6x above 0.0154 over 20 repetitions; Push-Pull, batches of 16, 1.18x).
BETWEEN_WALLS_APART = 1.1
#: Where the tuning's trajectories are the evaluation's (:func:`exact_tuning`), a best whose neighbours all end within
#: this factor of it is on a plateau (a bias floor: DSGD's least squares 6.0735e-5 against 6.0745e-5), and the fine
#: refinement stops there; anything steeper is halved toward (:func:`_fine`).
PLATEAU = 1.001
#: The draws of the network the contenders (and the grid's stable rates) run on more where the stages so far saw
#: one (its links' draws, losses, sleep, random delays, are the same for every replica of a stage) and no
#: confirmation ran (exact gradients, or streams that two replicas tell apart): a rate that diverges on 3 in 10 of
#: them is caught with probability 1 - 0.7^7 = 0.92 (a helper's Pull-Diag-GT on a 20% lossy graph: the rate tuned
#: on one draw diverged in 6 of the evaluation's 20).
DRAW_CONFIRMS = 6
#: Batched runs of the search for a stable rate where the grid has none (:func:`_search`).
SEARCH_STAGES = 4
#: Rates a search stage tries past an edge of what was tried, a step apart (the grid's, at most half a decade: two
#: decades a stage).
SEARCH_WIDTH = 4
#: No rate the tuner tries lies more than this many decades past the grid's ends (the default's 1e-4 .. 10:
#: 1e-12 .. 1e9).
SEARCH_DECADES = 8
#: Where the rates from the smallest tried to this many decades above it end alike (within :data:`FLAT` of their
#: median, or two standard errors of a difference where that is wider), the tuner searches below
#: (:func:`_flat_below`).
FLAT_DECADES = 2.0
FLAT = 1.25
#: The least share of those rates that must be stable (one of the default grid's five may be rejected by a draw).
FLAT_STABLE = 0.75
#: A rejected rate whose metric moved by less than this factor from its start moved nothing (:func:`_failure`: on
#: noisy streams a rate too small to move ends a little above or below its start).
UNMOVED = 1.1
#: A rate that went down but not far enough is too small where a neighbouring larger rate ends at least this
#: fraction lower (:func:`_helps`), too large where none does.
RATE_HELPS = 0.01
#: The metric of the iterates a tuning run records beside the ranked one (cheap: no pass over the data), whose
#: runaway (:func:`runaway`) rejects a candidate as diverged.
SPREAD = "consensus_error"
#: An iterate beyond this magnitude has diverged (it would overflow to inf in the next operations); in float32,
#: :func:`diverged_for`.
DIVERGED = 1e100


def diverged_for(objective):
    """The magnitude past which an iterate has diverged for ``objective``'s dtype: :data:`DIVERGED` times the
    iterates' scale (:func:`iterate_scale`, 1 at least), or the square root of the dtype's largest value where that
    is smaller (float32: 1.8e19). A float64 iterate at 1e39 passed the float64 bound and became Inf in a float32
    objective, which refused it: compare() stopped ("X must be finite") on a float32 problem with a float64 matrix
    (helper 118). Least squares whose minimiser lies near 1e110 (helper 167) had every rate "diverged by iteration
    2" at the unscaled 1e100, a given rate running ``ok``."""
    return min(DIVERGED * max(1.0, iterate_scale(objective)), math.sqrt(float(np.finfo(precision_of(objective)).max)))


def iterate_scale(objective):
    """The scale of ``objective``'s iterates: the largest magnitude of its start and of its minimiser where it
    gives one (0 where it gives neither, or neither is finite). Read afresh each time (an objective whose data
    changed in place had kept the scale of its old data: helper 169), once per tuning run and per method."""
    scale = 0.0
    try:
        scale = max(scale, float(np.max(np.abs(np.asarray(objective.x0(), dtype=np.float64)))))
    except Exception:  # noqa: BLE001 - a start it cannot give
        pass
    try:
        best = optimum_of(objective)
        if best is not None:
            scale = max(scale, float(np.max(np.abs(np.asarray(best.x, dtype=np.float64)))))
    except Exception:  # noqa: BLE001 - no minimiser: the start's scale
        pass
    return scale if math.isfinite(scale) else 0.0


#: Times a metric of the iterates grows from its lowest point past the first quarter of a run to the run's end, at
#: a steady or quickening pace, for it to run off (:func:`climbs`).
CLIMB = 10.0
#: Times it grows to run off where its logarithm climbs on a straight line (:func:`climbs`: a fit of
#: :data:`STEADY_FIT` at least over eight records or more, its later half at least :data:`STEADY_PACE` of its
#: earlier half's pace): the tracking methods on a directed 64-node ring, 3.5-9.8x by the end of the budget and
#: 15-44x by twice it, were ``ok`` under the tenfold alone, while over 4,000 repetitions of earlier checks (noise
#: floors, rounding, two nodes) none that did not run off grows on such a line (theirs fit at 0.35-0.77). Twofold
#: (the stability factor), not threefold: Push-Pull, ABM and ADD-OPT on a directed ring of 12 at their tuned rates
#: grew 2.2-2.8x on a line (fit 0.998-0.999, their later half faster than the earlier) over 400 rounds, ranked
#: ``ok`` 2= and 7, and ran off over 1,600 (helper 210).
STEADY_CLIMB = 2.0
#: The least fraction of the variance of the logarithm that a line explains for :data:`STEADY_CLIMB` to apply.
STEADY_FIT = 0.98
#: The least ratio of the later half's slope to the earlier half's for :data:`STEADY_CLIMB` to apply (a steady
#: geometric growth: about 1; a linear ramp: 0.5; a level being approached: less).
STEADY_PACE = 0.75
#: A tuning run saves its checkpoint at a tenth of its budget only where this many seconds passed since the last
#: save (or its start): a variance-reduced method's state holds a table of every sample (hundreds of MB for the
#: tuner's replicas), and a save every tenth cost more than the run. Ctrl-C and SIGTERM always save.
CHECKPOINT_SECONDS = 10.0
#: The most bytes of iterates that the rates run beside a tuning's grid (:func:`_beside`) may add to its block:
#: the comparison's memory was checked for the grid's block alone, and a widening that small fits beside it.
BESIDE_BYTES = 32 * 2**20
#: The rates that the last tuning in this process refined first around its best, with its problem
#: (``[(key, rates)]``, :func:`_problem_key`): the next tuning of the same problem runs them beside its grid, in its
#: block, and where its refinement asks for those same rates, reads their columns instead of running them again
#: (:func:`_beside`).
_REFINED = []
#: ``lr_source`` of a method that no rate of the grid kept stable.
UNTUNABLE = "none stable"


class NoStableRate(ValueError):
    """:func:`tune` found no stable rate (``.record``: every candidate's score and why it was rejected;
    ``.grid``)."""


def _tail(iterations):
    """The records of the last :data:`TAIL` of the iterations (at least three, or all there are)."""
    x = np.asarray(iterations, dtype=np.float64)
    T = x[-1]
    tail = x >= T - TAIL * T
    if tail.sum() < 3:
        tail[-min(3, len(x)):] = True
    return tail


def final_estimate(iterations, values):
    """The value a trajectory ends at, read from its last :data:`TAIL` of the iterations (at least three records).

    Where those records still fall or climb (the slope of a line through their logarithms is more than twice its
    standard error, and so is that of the records of twice as many iterations: a noisy plateau seldom slopes in
    both), the line evaluated at the last iteration, kept within what they span: a trajectory that
    converges linearly ends where its last record is. Where they do not (a plateau, the noise of sampling,
    compression or lost messages), the mean of the records of the whole plateau (the last records back to where
    a line through them would slope, or a record of the fall before them: :func:`_plateau_reaches`): the level
    they fluctuate around (the arithmetic mean, as the evaluation averages its repetitions' final values), not one
    record's draw.
    """
    x = np.asarray(iterations, dtype=np.float64)
    y = np.log(np.asarray(values, dtype=np.float64))
    k = int(_tail(x).sum())
    if k < 3 or len(x) < 3:
        return float(np.exp(y[-1]))
    trend, intercept = _trend(x[-k:] - x[-1], y[-k:])
    if trend and 2 * k <= len(x):  # (the twice longer window too: a plateau's noise seldom slopes in both)
        longer, _ = _trend(x[-2 * k:] - x[-1], y[-2 * k:])
        trend = longer
    if trend:
        return float(np.exp(np.clip(intercept, y[-k:].min(), y[-k:].max())))
    while k + 1 < len(x) and _plateau_reaches(y[:-k], y[-k:]) and not _trend(x[-k - 1:] - x[-1], y[-k - 1:])[0]:
        k += 1  # the plateau reaches further back: its whole stretch averages the noise
    return float(np.exp(y[-k:]).mean())


def _plateau_reaches(before, logs):
    """Whether a plateau (its records' logarithms ``logs``) reaches back over the record before it (``before[-1]``,
    ``before`` the logarithms of the records before the plateau): where that record lies within the plateau's spread
    (no further from its range than the range's width), or above it as a spike does, the record before it being
    lower; not where it is part of a fall (the record before it as high or higher, or none) or lies below it. A
    line's slope alone let a plateau reach back over the last record of the fall before it (one high point at a
    window's edge widens the slope's standard error more than it tilts the slope): a curve at 5e-4..1.4e-3 from its
    fourth record on was read at the mean of its last 23, 5.2e-3, with the third, 0.102, among them, and the tuner
    stopped short of rates 25x better (bench/RESULTS.md 71c). A spike stays in (a plateau cut at every spike before
    its last quarter reads spiky rates low: helper 162's 10x spikes, one record in 20, 68% of estimates 1.25x below
    the level against 37%)."""
    low, high = float(logs.min()), float(logs.max())
    value = before[-1]
    if low - (high - low) <= value <= high + (high - low):
        return True
    return bool(value > high and len(before) > 1 and before[-2] < value)


def _trend(xs, ys):
    """``(falls or climbs, the line's value at xs = 0)``: a line through ``(xs, ys)`` whose slope is more than twice
    its standard error."""
    slope, intercept = np.polyfit(xs, ys, 1)
    residual = ys - (intercept + slope * xs)
    sxx = float(((xs - xs.mean()) ** 2).sum())
    se = math.sqrt(float((residual ** 2).sum()) / max(len(xs) - 2, 1) / sxx) if sxx > 0 else math.inf
    return abs(slope) > 2.0 * se, intercept


def smoothed(values, window=3):
    """The geometric mean of every ``window`` consecutive records (a trailing window; shorter at the start)."""
    logs = np.log(np.asarray(values, dtype=np.float64))
    return np.exp([logs[max(0, i - window + 1):i + 1].mean() for i in range(len(logs))])


def judge(iterations, values, converged=CONVERGED):
    """``(score, why)`` of one candidate's trajectory (``values``: its metric at ``iterations``, the mean over its
    replicas): its final value and None, or inf and why it is rejected.

    Rejected when a value is NaN or -Inf (it diverged) or +Inf (its nodes' iterates ran off: their consensus error
    past :func:`runaway`'s bound, the metric itself finite, :func:`_ran_off`), when it ends above
    :data:`~rowstoch_fast.runner.GROWTH_WARNING` times its start (it grew: the evaluation calls such a run
    diverged), when it ends above :data:`NO_PROGRESS` times its start (no progress), and when the level of its last
    :data:`TAIL` of the iterations (the geometric mean of those records) is more than :data:`STABILITY_FACTOR` times
    the lowest level of any stretch of as many records (unstable: best at some horizon, then climbing; levels over
    stretches, not single records, so that the noise of sampling, compression or lost messages does not reject a
    rate that stays at its floor). Values below
    ``converged`` (:data:`CONVERGED`; :func:`converged_for` the problem's) times the start are equal (converged
    to rounding). The final value is :func:`final_estimate`.
    """
    x = as_float_array(iterations, "iterations", np.float64, ndim=1)
    v = as_float_array(values, "values", np.float64, ndim=1, finite=False)  # (NaN, Inf: a diverged run)
    if x.shape != v.shape or not x.size:
        raise ValueError(f"iterations and values must be two records of the same length (one at least), got "
                         f"lengths {x.size} and {v.size}")
    score, why, _ = _judged(x, v, converged=check_positive_float(converged, "converged", allow_zero=True))
    return score, why


def _judged(iterations, values, typical=None, converged=CONVERGED, last=False):
    """:func:`judge`'s ``(score, why)`` and the final value itself (inf where it diverged). ``typical``: the curve
    the stability rule reads where it is not ``values`` (:func:`typical_curve`: the median of a candidate's
    streams); ``converged``: the fraction of the start at rounding (:func:`converged_for`); ``last``: the final
    value is the last record, not :func:`final_estimate` (the trajectory is the evaluation's: :func:`exact_tuning`;
    there the estimate of a tail that fell and then rose again was its lowest record, 2x below where it ended, and
    the fine refinement chose such rates)."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    if bad.size and bad[0] and int(np.asarray(iterations)[0]) == 0 and bad.all():  # (not finite from the start,
        # the same for every rate: the metric's doing, or the gradient's at x0, not the rate's; it had read
        # "diverged (NaN/Inf by iteration 0)" at every rate of a user metric that returns NaN)
        return math.inf, "its metric is not finite from the start (iteration 0, before any step)", math.inf
    if bad.any():
        at = int(np.asarray(iterations)[np.argmax(bad)])
        if not np.isnan(v).any() and (v[bad] > 0).all():  # (+inf alone: the nodes' iterates ran off, _ran_off)
            return math.inf, f"ran off (its nodes' iterates, by iteration {at})", math.inf
        return math.inf, f"diverged (NaN/Inf by iteration {at})", math.inf
    start = float(v[0])
    floor = max(converged * abs(start), 1e-300)
    v = np.maximum(v, floor)
    end = max(float(v[-1]) if last else final_estimate(iterations, v), floor)
    if start > 0 and end > GROWTH_WARNING * start:  # (what the evaluation calls diverged without a NaN)
        return math.inf, f"grew (ends at {end / start:.3g}x its start)", end
    if start > 0 and end > NO_PROGRESS * start and end > floor:
        return math.inf, f"no progress (ends at {end / start:.3g}x its start)", end
    off = off_its_minimum(iterations, v if typical is None else np.maximum(np.asarray(typical, dtype=np.float64),
                                                                            floor))
    if off is not None:
        return math.inf, f"unstable (ends {off[0]:.3g}x above its minimum, at iteration {off[1]})", end
    return end, None, end


def off_its_minimum(iterations, values, factor=STABILITY_FACTOR):
    """``(ratio, iteration)`` where the level of the last :data:`TAIL` of a trajectory's iterations (the geometric
    mean of those records) is more than ``factor`` times the lowest level of any stretch of as many
    records (best at some horizon, then climbing: the ``iteration`` that stretch ends at); else None. Levels over
    stretches, not single records, so that the noise of sampling, compression or lost messages does not count as a
    climb. The stability rule of the tuner (:func:`judge`) and of the evaluation
    (:func:`~rowstoch_fast.compare.verdict.status_of`)."""
    k = int(_tail(iterations).sum())
    with np.errstate(divide="ignore"):  # (a zero: a level of 0, below which nothing climbs)
        smooth = smoothed(values, k)[k - 1:]  # every window of the tail's length: each stretch's level
    low, level = float(smooth.min()), float(smooth[-1])
    if low > 0 and level > factor * low:
        return level / low, int(np.asarray(iterations)[k - 1 + int(np.argmin(smooth))])
    return None


def rising(xs, logs):
    """Whether the line through ``(xs, logs)`` (three points at least) rises with a slope more than twice its
    standard error."""
    if len(xs) < 3:
        return False
    significant, _ = _trend(np.asarray(xs, dtype=np.float64) - xs[-1], np.asarray(logs, dtype=np.float64))
    return bool(significant and np.polyfit(xs, logs, 1)[0] > 0)


#: Rounding steps of the dtype, times ``sqrt(n d)`` and the iterates' scale, below which a consensus error is
#: rounding (:func:`spread_floor`): 10 (K-GT's at rounding reached 0.3 of one such step; 100 had hidden a float32
#: run-off from 1e-7 to 7.9e-4, helper 169).
SPREAD_STEPS = 10


def spread_floor(objective):
    """The consensus error ``||X - 1 x_bar^T||_F`` of iterates that agree up to rounding: :data:`SPREAD_STEPS`
    eps ``sqrt(n d)`` times their scale (:func:`iterate_scale`, the start's and the minimiser's; eps the objective's
    dtype's); 0 where the objective gives no scale. Below it a consensus error is rounding, whose climb is the
    iterates' own scale growing, not a run-off (:func:`climbs`, :func:`runaway`): on a complete graph of 3 nodes
    K-GT's rose from 1.9e-17 to 2.0e-16, 10.8x, and a run ending level with SCAFFOLD's was ``unstable`` (helper
    167). 9.4e-15 for 18 values of scale 1 in float64; a run-off past it is still one, and the floor scales with
    the problem (least squares scaled by 1e-12 runs off from 1e-13 as the unscaled one does from 0.1)."""
    n, d = int(getattr(objective, "n", 1) or 1), int(getattr(objective, "d", 1) or 1)
    return SPREAD_STEPS * float(np.finfo(precision_of(objective)).eps) * math.sqrt(n * d) * iterate_scale(objective)


def climbs(iterations, values, floor=0.0, steady=None):
    """``(low, end)`` where a positive metric of the iterates (a consensus error), recorded at ``iterations``, runs
    off at the end of the run; else None. Past the first :data:`TAIL` of the iterations (where it rises from a
    shared start; at least six records there), the levels of every three consecutive records (their geometric
    mean): the last level is :data:`CLIMB` times the lowest (``end`` and ``low``), the records from the lowest
    level's first on (five at least) rise, the slope of their logarithm more than twice its standard error, and no
    slower in their later half than half their pace in the earlier (a level being approached slows down; a run
    that runs off does not). A lossy push-sum method's consensus error growing 1.08x an iteration to the end of a
    short budget, its ranked metric not yet touched, far below the thousandfold of :func:`runaway`, was ranked
    ``ok`` at a rate that runs off a few iterations later. Levels of three records, not single records, and the
    consensus error alone (an average over the nodes): a helper's one-dimensional noisy problems, whose ranked
    metric touches 0 at a noise floor, fired on 5-7% of single runs read by pairs of records. Or, short of the
    tenfold, :data:`STEADY_CLIMB` times where eight records or more from the lowest level on climb on a straight
    line in the logarithm (:data:`STEADY_FIT`) at an even pace to the end (their later half, and their last third,
    at :data:`STEADY_PACE` of the pace before at least): a geometric growth that runs off past the budget, where a
    noise floor wanders and a level being approached bends.

    Kicks aside (:func:`_kicks`: past the first quarter, a record tenfold above one of the two before it and one of
    the two after it; a node sampling a heavy-tailed row): each is read as the geometric mean of its neighbours
    that are not kicks, and where the climb then rests on the last two records alone (the records before them do
    not climb, and the two before them stay within tenfold of the lowest level, or the last record falls back to
    half the one before) and the last three reach no higher than a kick before them, the stream has been as high
    and came straight back: not a run-off. One stream of helper 161's heavy-tailed rows, kicked at the same
    iterations at every rate (the candidates share their streams), had rejected every rate above 1e-4 in the
    tuner's confirmation, 7.6x off the best; a run-off with kicks on its way still climbs (helper 163: where one
    kick as high anywhere had been enough to pass, up to 63% of such run-offs passed).

    Values below ``floor`` (a consensus error's rounding, :func:`spread_floor`) read as it; ``steady``: the factor of
    the steady climb where not :data:`STEADY_CLIMB` (a table's note of a smaller one, :func:`~.verdict.status_of`)."""
    x, v = np.asarray(iterations, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if len(v) != len(x) or len(x) < 6:
        return None
    if floor > 0:
        with np.errstate(invalid="ignore"):
            v = np.where(v < floor, floor, v)  # (NaN stays NaN)
    tail = x > x[0] + TAIL * (x[-1] - x[0])
    if not (np.isfinite(v[tail]).all() and (v[tail] > 0).all()):  # (what _climb reads: the tail alone)
        return _climb(x, v, steady)
    with np.errstate(invalid="ignore"):
        every = _kicks(v)
    kicks = every[tail[every]]
    if not kicks.size:
        return _climb(x, v, steady)
    w = v.copy()
    for i in kicks:
        calm = [v[j] for j in (i - 1, i + 1) if 0 <= j < len(v) and j not in every and np.isfinite(v[j])
                and v[j] > 0]
        if calm:
            w[i] = math.exp(sum(math.log(c) for c in calm) / len(calm))
    found = _climb(x, w, steady)
    if found is not None and _climb(x[:-2], w[:-2], steady) is None and (float(w[-4:-2].max()) < CLIMB * found[0]
                                                                  or w[-1] <= 0.5 * w[-2]):
        # (the climb rests on the last two records, the two before them within tenfold of the lowest level, or it
        # falls back at the end, as a kick spread over three records does and a run-off does not; a short geometric
        # run-off, x4 a record over its last four, had passed on an earlier kick as high: helper 166)
        earlier = kicks[kicks < len(v) - 3]
        if earlier.size and float(v[earlier].max()) >= float(v[-3:].max()):
            return None
    return found


def _climb(x, v, steady=None):
    """:func:`climbs` of a series whose kicks were set aside."""
    steady = STEADY_CLIMB if steady is None else steady
    x, v = np.asarray(x, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if len(v) != len(x) or len(x) < 6:
        return None
    past = np.flatnonzero(x > x[0] + TAIL * (x[-1] - x[0]))
    if len(past) < 6:
        return None
    xs, ys = x[past], v[past]
    if not (np.isfinite(ys).all() and (ys > 0).all()):
        return None
    levels = smoothed(ys, 3)[2:]  # (level i: records i .. i + 2)
    j = int(np.argmin(levels))
    low, end = float(levels[j]), float(levels[-1])
    on_line = end >= steady * low and len(xs) - j >= 8  # (the line, checked below)
    if len(xs) - j < 5 or (end < CLIMB * low and not on_line):
        return None
    xs, logs = xs[j:], np.log(ys[j:])
    if not rising(xs, logs):
        return None
    m = len(xs) // 2
    early, late = (float(np.polyfit(xs[a:b], logs[a:b], 1)[0]) for a, b in ((0, m + 1), (m, len(xs))))
    if early > 0 and late < 0.5 * early:
        return None
    if end < CLIMB * low:  # the steady climb: a straight line in the logarithm, as fast late as early, and to the
        # end (a geometric rise that went flat for its last tenth still fits a line; a reviewer's case)
        line = np.polyfit(xs, logs, 1)
        fit = 1.0 - float((logs - np.polyval(line, xs)).var()) / float(logs.var())
        last = max(3, len(xs) // 3)
        tail = float(np.polyfit(xs[-last:], logs[-last:], 1)[0])
        if fit < STEADY_FIT or not (early > 0 and late >= STEADY_PACE * early and tail >= STEADY_PACE * line[0]):
            return None
    return low, end


def _kicks(values):
    """The positions of the kicks of a positive series: records :data:`CLIMB` times one of the two records before
    them and one of the two after them (:func:`climbs`)."""
    v = np.asarray(values, dtype=np.float64)
    before = np.full(len(v), np.inf)
    after = np.full(len(v), np.inf)
    for gap in (1, 2):
        before[gap:] = np.minimum(before[gap:], v[:-gap])
        after[:-gap] = np.minimum(after[:-gap], v[gap:])
    return np.flatnonzero((v >= CLIMB * before) & (v >= CLIMB * after))


def runaway(values, floor=0.0):
    """``(peak, end)`` where a non-negative metric of the iterates recorded at ``values`` (a consensus error) ran
    off: it ended non-finite, or more than :data:`~rowstoch_fast.runner.GROWTH_WARNING` times its largest value
    over the first :data:`TAIL` of the records, the record after the start at least (not its start alone: the
    consensus error starts at 0 from a shared start, or at its rounding, 2.7e-18; helper 164's runs of one to three
    rounds, whose first quarter is the start, were "diverged" at every rate from 1e-12 up: over two records, only
    an end that is not finite runs off); else None. The evaluation's rule for every recorded metric besides the
    ranked one (:func:`~rowstoch_fast.compare.verdict.status_of`), and the tuner's for the consensus error: a
    push-sum method draining on a lossy network, or a rate far past the grid, keeps the ranked metric at the
    average iterate in range while the nodes' iterates run off. The early peak is ``floor`` at least (a consensus
    error's rounding, :func:`spread_floor`)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return None
    early = v[: max(2, int(math.ceil(TAIL * len(v))))]
    early = early[np.isfinite(early)]
    peak, end = (max(float(early.max()), floor) if len(early) else math.nan), float(v[-1])
    if (not math.isfinite(end) and math.isfinite(peak)) or (peak > 0 and end > GROWTH_WARNING * peak):
        return peak, end
    return None


def _ran_off(values, spreads, iterations=None, floor=0.0):
    """``values`` (records x replicas) with each replica whose consensus error (``spreads``, the same shape) ran
    off (:func:`runaway`) set to +inf from its first record past the bound, and one whose consensus error climbs
    off at the end (:func:`climbs`, given the records' ``iterations``) at its last record (a replica
    that diverged is NaN): judged as run off (:func:`judge`). ``floor``: the consensus error's rounding
    (:func:`spread_floor`)."""
    values = np.array(values, dtype=np.float64)
    for c in range(values.shape[1]):
        if np.isnan(values[:, c]).any():  # (diverged, set aside: NaN from there, its consensus error too)
            continue
        found = runaway(spreads[:, c], floor)
        if found is not None:
            with np.errstate(invalid="ignore"):
                past = ~(spreads[:, c] <= GROWTH_WARNING * found[0])
            values[int(np.argmax(past)) if past.any() else -1:, c] = np.inf
        elif iterations is not None and climbs(iterations, spreads[:, c], floor) is not None:  # (at the end only)
            values[-1, c] = np.inf
    return values


def typical_curve(columns):
    """The curve the stability rule reads for a candidate run on the streams ``columns`` (records x streams): their
    mean over at most :data:`TUNE_REPEATS` streams, their median over more (a confirmation's: one heavy-tailed
    stream that climbs late, whose cost the mean score already carries, does not make the typical trajectory
    "unstable"; bench/RESULTS.md section 36)."""
    columns = np.asarray(columns, dtype=np.float64)
    if columns.ndim == 1 or columns.shape[1] <= TUNE_REPEATS:
        return columns if columns.ndim == 1 else columns.mean(axis=1)
    with np.errstate(all="ignore"):
        return np.median(columns, axis=1)


def _bad_replicas(X, group=1, limit=DIVERGED):
    """Which replicas of a user-shaped block ``(reps, rows, d)`` hold a NaN, an Inf or a value past ``limit``
    (:data:`DIVERGED`; :func:`diverged_for` the objective's), whole groups of ``group`` replicas at a time (a
    candidate's): a host bool array (a device block is reduced on its device first)."""
    peak = abs(X).max(axis=(-2, -1)).astype("float64")  # (compared in float32, DIVERGED is inf: an Inf passed)
    bad = ~(peak <= limit)  # (NaN compares False)
    bad = np.asarray(bad.get() if hasattr(bad, "get") else bad)
    return np.repeat(bad.reshape(-1, group).any(axis=1), group) if group > 1 else bad


class _Quarantine:
    """The tuning run's oracle around the objective's. Every candidate's replicas draw the same gradient
    streams (common random numbers: what tells two rates apart is the rate, not their samples), and a candidate
    whose iterate is no longer finite (its rate diverged) gets zero gradients, none computed, so that it costs
    nothing more and never reaches the objective's check of its input. Under MPI each process judges its own
    rows (their gradients are its own)."""

    def __init__(self, inner, objective, group, limit):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "objective", objective)
        object.__setattr__(self, "group", group)  # replicas per candidate: the streams' period
        object.__setattr__(self, "limit", limit)  # (diverged_for: an iterate's bound)
        object.__setattr__(self, "periodic", _takes_period(objective))

    def __getattr__(self, name):  # iteration, last, seed, rep_offset, samples, ...
        return getattr(self.inner, name)

    def __setattr__(self, name, value):
        setattr(self.inner, name, value)

    def _runs(self, bad):
        """The contiguous runs ``(a, b)`` of live replicas (whole candidates)."""
        runs, start = [], None
        for r, dead in enumerate(list(bad) + [True]):
            if not dead and start is None:
                start = r
            elif dead and start is not None:
                runs.append((start, r))
                start = None
        return runs

    def _gradients(self, X, a, b):
        """The gradients of replicas ``a .. b`` (whole candidates), each candidate on streams ``rep_offset ..``."""
        inner, P = self.inner, self.group
        kw = dict(seed=inner.seed, batches=inner.batches, rep_offset=inner.rep_offset, nodes=inner.nodes)
        if self.periodic:
            return self.objective.stochastic_gradient(X[a:b], inner.iteration, rep_period=P, **kw)
        return [self.objective.stochastic_gradient(X[c:c + P], inner.iteration, **kw) for c in range(a, b, P)]

    def __call__(self, X):
        inner = self.inner
        bad = _bad_replicas(X, self.group, self.limit)
        if not isinstance(inner, Oracle):  # another oracle: the diverged replicas measured at 0, then zeroed
            if not bad.any():
                return inner(X)
            G = inner(_zeroed(X, bad))
            G[bad] = 0
            return G
        if not bad.any() and self.periodic:
            G = self._gradients(X, 0, X.shape[0])
        else:
            G = X.copy()
            G[...] = 0
            for a, b in self._runs(bad):
                part = self._gradients(X, a, b)
                if isinstance(part, list):
                    for k, g in enumerate(part):
                        G[a + k * self.group:a + (k + 1) * self.group] = g
                else:
                    G[a:b] = part
        inner.iteration += 1
        inner.last = G
        return G

    def sample(self, X):
        bad = _bad_replicas(X, self.group, self.limit)
        if not bad.any():
            return self.inner.sample(X)
        G, idx = self.inner.sample(_zeroed(X, bad))
        G[bad] = 0
        return G, idx

    def sample_gradient(self, X, idx):
        bad = _bad_replicas(X, self.group, self.limit)
        G = self.inner.sample_gradient(_zeroed(X, bad) if bad.any() else X, idx)
        if bad.any():
            G[bad] = 0
        return G

    @property
    def sample_gradients(self):
        """The inner oracle's, with the diverged replicas set aside (None where it has none: one sample a call)."""
        many = getattr(self.inner, "sample_gradients", None)
        if many is None:
            return None

        def sample_gradients(X, samples):
            bad = _bad_replicas(X, self.group, self.limit)
            G = many(_zeroed(X, bad) if bad.any() else X, samples)
            if bad.any():
                G[:, bad] = 0
            return G

        return sample_gradients


def _takes_period(objective):
    """Whether ``objective.stochastic_gradient`` takes ``rep_period`` (every objective of the package does; one
    written before it existed gets one call per candidate)."""
    import inspect

    try:
        params = inspect.signature(objective.stochastic_gradient).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin
        return False
    return "rep_period" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _zeroed(X, bad):
    """A copy of ``X`` with the replicas ``bad`` set to 0."""
    Xs = X.copy()
    Xs[bad] = 0
    return Xs


def _fingerprint(method, rates, budget, metric, seed, repeats, objective, rep_offset=0):
    """What a tuning run's checkpoint must match to be continued (its matrices are checked when it is loaded)."""
    return json.dumps({"label": method.label, "method": method.method, "rounds": method.rounds,
                       "options": method.options, "rates": [float(r) for r in rates], "budget": budget,
                       "metric": metric, "seed": seed, "repeats": repeats, "rep_offset": rep_offset,
                       "points": TUNE_POINTS, "spread": True,  # (its rows hold the consensus error too)
                       "climbs": [CLIMB, "kicks", "early peak past the start", "rounding floor",
                                  "diverged at the iterates' scale"],  # (a stage judged before the consensus
                       # error's run-off at the end, its kicks, runaway's peak past the start, the consensus error's
                       # rounding or the iterates' scale: again)
                       "objective": objective.describe() if hasattr(objective, "describe") else None},
                      sort_keys=True, default=str)


#: What reading a damaged checkpoint raises (a file cut short: BadZipFile; an empty one: EOFError): it is set aside
#: and its run or stage runs again (helper 168: every --resume had stopped with its traceback).
DAMAGED = (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error)


def _load_tuning(path, algo, fingerprint, objective=None):
    """``(optimizer, oracle iteration, rows)`` of a tuning run's checkpoint that matches, else None."""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:  # (our handle: np.load leaks its
            # own where the archive is damaged)
            saved = {k: data[k] for k in data.files}
        if str(saved.pop("tuning/fingerprint")) != fingerprint:
            return None
        iteration, rows = int(saved.pop("tuning/oracle_iteration")), saved.pop("tuning/rows")
        return algo.resume(saved, objective=objective), iteration, [row for row in rows]
    except DAMAGED:  # damaged, or another run's: the run starts again
        return None


def _save_tuning(path, opt, oracle, rows, fingerprint):
    """The tuning run's state, atomically (one process: the tuner writes on the root)."""
    state = opt.state_dict()  # (collective under MPI)
    if state is None or not path:
        return
    state.update({"tuning/fingerprint": np.array(fingerprint), "tuning/oracle_iteration": np.array(oracle.iteration),
                  "tuning/rows": np.array(rows) if rows else np.zeros((0, 0))})
    try:
        atomic_write(path, lambda fh: np.savez(fh, **state), mode="wb")
    except OSError:  # (the run goes on; only its resumption is lost)
        pass


def trajectories(network, objective, method, rates, budget, metric, *, seed, repeats=1, backend="auto",
                 points=TUNE_POINTS, checkpoint=None, keep=False, rep_offset=0, progress=False, desc=None):
    """One batched run of ``method`` on ``network``: ``repeats`` replicas per rate of ``rates``, the whole ``budget``,
    every rate's ``q``-th replica on the gradient stream of repetition ``rep_offset + q`` of ``seed`` (common random
    numbers), on the network :func:`~rowstoch_fast.network.redrawn` by ``TUNE_SEED_OFFSET + rep_offset``: draws of
    the losses, sleep, delays, compression and noise that no evaluation repetition runs on (repetition ``r`` runs on
    the network redrawn by ``r``), and, as a message's draws follow its replica's position in the block, a run of
    four streams from ``rep_offset`` 2 is not two runs of two put together; ``progress`` and ``desc``: a bar of
    its iterations (:func:`~rowstoch_fast._progress.bar`); ``metric``: a name, or a ranked
    :class:`~rowstoch_fast.user_metrics.Metric`). Returns ``(iterations, values)``: the recorded iterations and
    ``metric`` per record and replica (``(records, len(rates) * repeats)``, replica ``c * repeats + q`` the ``q``-th
    of rate ``c``; NaN where it diverged). With ``checkpoint`` (a path), the run's state is saved there at a tenth
    of the budget where :data:`CHECKPOINT_SECONDS` passed since the last save, and when it is interrupted (Ctrl-C,
    SIGTERM), and a run of the same candidates goes on from it. With ``keep`` too, the finished run's trajectories
    are kept beside it (``.done.npz``, written before the checkpoint is removed; :func:`tune` removes them when it
    ends) and a run of the same candidates returns them (the root's copy, on every process) instead of running.

    A method that draws of its own (:attr:`~rowstoch_fast.compare.plan.Method.draws`: a federated method's
    clients) runs each stream on a draw of its own, as the evaluation runs repetition ``r`` on ``seed + r``: one run
    a stream (:func:`_draw_by_draw`), stream ``rep_offset + q`` on the method and the network redrawn by
    ``TUNE_SEED_OFFSET + rep_offset + q`` (one run of every replica had shared one schedule of clients, so that
    a confirmation on 30 streams had rested on one draw of them: helper 269's FedAvg chose a rate 1.38x above the
    best)."""
    if repeats > 1 and getattr(method, "draws", False):
        return _draw_by_draw(network, objective, method, rates, budget, metric, seed=seed, repeats=repeats,
                             backend=backend, points=points, checkpoint=checkpoint, keep=keep, rep_offset=rep_offset,
                             progress=progress, desc=desc)
    method = method.redrawn(TUNE_SEED_OFFSET + rep_offset)  # (its own draws too: no repetition's)
    T = method.iterations(budget)
    entry, metric = metric, getattr(metric, "name", metric)  # (an extra metric: its Metric, recorded by name)
    lr = np.repeat(np.asarray(rates, dtype=np.float64), repeats)[:, None, None]
    network = redrawn(network, TUNE_SEED_OFFSET + rep_offset)
    algo = method.algorithm(network, lr, backend, check_finite=False)
    due = round_schedule(T, budget, points)
    fingerprint = _fingerprint(method, rates, budget, metric, seed, repeats, objective, rep_offset)
    with agreed_stop(algo.backend, T) as agreed:  # (under MPI a signal stops every process at one iteration)
        return _trajectories(agreed, algo, objective, T, due, fingerprint, entry, metric, seed, repeats, rep_offset,
                             checkpoint, keep, lr, (progress, desc))


def _draw_by_draw(network, objective, method, rates, budget, metric, *, repeats, checkpoint, rep_offset, desc,
                  **kw):
    """:func:`trajectories` of a method that draws of its own, one run of every rate a stream (each on its own draw),
    put together as one run's (replica ``c * repeats + q``: the ``q``-th of rate ``c``); the checkpoints and kept
    trajectories of stream ``q`` beside ``checkpoint`` (:func:`_draw_path`), so that an interruption loses only the
    stream it stopped in."""
    runs = [trajectories(network, objective, method, rates, budget, metric, repeats=1, rep_offset=rep_offset + q,
                         checkpoint=_draw_path(checkpoint, q),
                         desc=desc and f"{desc} [draw {q + 1} of {repeats}]", **kw) for q in range(repeats)]
    iterations, values = runs[0][0], [v for _, v in runs]
    if any(v is None for v in values):  # (a run that recorded nothing: as one run's)
        return iterations, None
    return iterations, np.stack(values, axis=2).reshape(len(iterations), len(rates) * repeats)


def _draw_path(path, q):
    """The checkpoint of stream ``q`` of a run that draws of its own (:func:`_draw_by_draw`) beside ``path``."""
    return path and f"{path[:-len('.npz')]}.draw-{q}.npz"


def _trajectories(agreed, algo, objective, T, due, fingerprint, entry, metric, seed, repeats, rep_offset, checkpoint,
                  keep, lr, shown=(False, None)):
    """:func:`trajectories`' run, under its signal agreement (``agreed``: :func:`~rowstoch_fast.runner.agreed_stop`;
    a signal held at its end interrupts it once its trajectories are kept)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a diverging candidate is judged, not warned about
        found = _load_tuning(checkpoint, algo, fingerprint, objective)
        opt = build_replicas(algo, objective, len(lr)) if found is None else found[0]
        agreed.opt = opt
        if keep and checkpoint:  # (the root decides: collective under MPI)
            kept = opt.share(_load_stage(checkpoint, fingerprint) if opt.is_root else None)
            if kept is not None:
                if agreed.finish():  # (a signal held while it was read: collective)
                    raise KeyboardInterrupt
                return kept
        limit = diverged_for(objective)  # (once a run: the objective's scale read afresh)
        oracle = _Quarantine(objective.oracle(seed=seed, batches=opt.rounds, nodes=opt.local_nodes,
                                              rep_offset=rep_offset, rep_period=repeats), objective, repeats, limit)
        rows = []
        if found is None:
            initialize(opt, oracle)  # (the R mini-batches a gradient averages refused: said of the rounds)
        else:
            oracle.iteration, rows = found[1], found[2]

        def record():
            found = {}

            def set_aside(x):  # the diverged replicas not measured (a pass over the data each), reported as NaN
                found["bad"] = bad = _bad_replicas(x, limit=limit)
                if not bad.any():
                    return x
                if by_name and not bad.all():  # (an extra metric is called with each replica's index: all kept)
                    return x[~bad]
                return _zeroed(x, bad)

            values = record_metrics(opt, objective, oracle, (entry, SPREAD), transform=set_aside)
            if values is not None:
                bad = found["bad"]
                row = np.full((2, len(bad)), np.nan)
                for k, name in enumerate((metric, SPREAD)):
                    measured = values[name]
                    row[k, ~bad] = measured if len(measured) < len(bad) else measured[~bad]  # (the live ones
                    # alone, or all)
                rows.append(row.ravel())  # (the metric's replicas, then their consensus errors)

        by_name = isinstance(entry, str) and entry != "descent_deviation"  # (a metric of the replicas alone)
        marks, every = set(due), max(1, T // 10)
        if len(rows) < sum(k <= opt.iteration for k in due):  # (a record the interruption cut short: taken now)
            record()
        drawn, before = oracle.iteration, None  # (the iteration a step started from, while it runs)
        saved = time.monotonic()
        bar = progress_bar(shown[0], T, opt.iteration, shown[1]) if opt.is_root else None  # (a stage's iterations:
        # helper 189 watched "pull-diag-gt (tuning): 0/1 algorithm" for 75 s at n = 256)
        try:
            agreed.check(opt.iteration, now=True)  # (a signal held during the set-up)
            while opt.iteration < T:
                drawn, before = oracle.iteration, opt.iteration
                try:
                    opt.step(oracle)
                except DivergenceError:  # (what the network does to every candidate at once, whatever its rate: a
                    # Pull-Diag tracker's diagonal below the smallest float; the comparison had stopped on it)
                    rows.extend(np.full(2 * len(lr), np.nan) for k in due if k > opt.iteration)
                    break
                if opt.iteration in marks:
                    record()
                if bar is not None:
                    bar.update(1)
                if checkpoint and opt.iteration % every == 0 and opt.iteration < T and opt.share(
                        time.monotonic() - saved >= CHECKPOINT_SECONDS):  # (the root's clock decides: collective)
                    _save_tuning(checkpoint, opt, oracle, rows, fingerprint)
                    saved = time.monotonic()
                agreed.check(opt.iteration)
        except KeyboardInterrupt:  # (the step commits atomically: the oracle goes back to where it stood, unless
            # the step had committed: an interrupt in its return path)
            if before is not None and opt.iteration == before:
                oracle.iteration = drawn
            if checkpoint:
                _save_tuning(checkpoint, opt, oracle, rows, fingerprint)
            raise
        finally:
            if bar is not None:
                bar.close()
    values = opt.share(np.array(rows) if rows else None)  # (under MPI the root recorded)
    if values is not None:
        half = values.shape[1] // 2
        values = _ran_off(values[:, :half], values[:, half:], due, spread_floor(objective))
    if checkpoint and opt.is_root:  # (under MPI the root wrote it)
        if keep:  # (the trajectories first, then the checkpoint removed: no moment without either)
            _save_stage(checkpoint, fingerprint, due, values)
        try:
            os.remove(checkpoint)
        except FileNotFoundError:
            pass
    if agreed.finish():  # (a signal held since the last agreement, on any process: collective; the trajectories
        # are kept where the stage keeps them, and the checkpoint of an unkept run is gone: it runs again)
        raise KeyboardInterrupt
    return np.asarray(due), values


def _grid_step(grid):
    """The ratio of neighbouring rates of the log-spaced ``grid`` (in any order)."""
    return (max(grid) / min(grid)) ** (1 / (len(grid) - 1)) if len(grid) > 1 else math.sqrt(10)


def _edge_gains(best, stable):
    """Whether ``best``, the outermost of the ``stable`` rates (``{lr: score}``) on its side, ends :data:`EDGE_GAIN`
    times below its neighbour among them (none: True)."""
    rates = sorted(stable)
    if len(rates) < 2:
        return True
    inner = rates[1] if best == rates[0] else rates[-2] if best == rates[-1] else None
    return inner is None or stable[inner] > EDGE_GAIN * stable[best]


def _above_the_top(scores, best, curves, iterations, grid):
    """The rates one and two half grid steps above the largest rate tried (within :data:`SEARCH_DECADES` of the
    grid) where that rate is stable, though not the best (``best``; at the edge the steps past it are
    :func:`_refinements`'), and still getting better: it ends :data:`ABOVE_GAIN` times below the next rate down
    (stable), or its trajectory (``curves[lr]`` at ``iterations``) still falls over its last :data:`TAIL`, at every
    record and on a line (:func:`rising`); else ``[]``. (:func:`_tune_stages` runs :data:`ABOVE_STAGES` of them at
    most without a new best.) Between the best and a rate that ends higher the tuner refines, and it goes no higher:
    what ends worse past the best ends worse still further up, where the rates ending worse are the ones that
    oscillate, a noise floor that grows with the rate, or a drift. Not where the ending worse is a transient that larger rates pass sooner (helper 245:
    Push-Pull on linearly separable logistic data with lam = 1e-5 ended 1.3e-7 at its tuned 6.04, 2.5e-5 at 17.8
    and 4.8e-6 at 31.6, the largest rate tried, still falling fast at the end, and at rounding from 100 on; the
    tuner had stopped at 31.6: 39x over 20 repetitions on mini-batches). Where it runs, a rate above is rejected
    (the edge of stability found: the tuner stops) or ends higher and levels off (it stops too) or becomes the best
    (the steps past the edge go on from it)."""
    top = max(scores)
    if top == best or not math.isfinite(scores[top]):
        return []
    below = [lr for lr in scores if lr < top]
    lower = max(below) if below else None
    better = lower is not None and math.isfinite(scores[lower]) and scores[top] * ABOVE_GAIN < scores[lower]
    curve = np.asarray(curves.get(top, ()), dtype=np.float64)
    falling = False
    if iterations is not None and len(curve) == len(iterations) and len(curve) >= 3:
        tail = _tail(iterations)
        with np.errstate(all="ignore"):
            logs = np.log(curve[tail])
        if np.isfinite(logs).all():  # (at every record of the tail, and on a line: not a noisy plateau's drift)
            falling = bool((np.diff(logs) < 0).all()) and rising(np.asarray(iterations, dtype=np.float64)[tail],
                                                                 -logs)
    if not (better or falling):
        return []
    half = math.sqrt(_grid_step(grid))
    return [lr for lr in (float(f"{top * half:.6g}"), float(f"{top * half * half:.6g}"))
            if lr not in scores and _within_span(lr, grid)]


def _refinements(best, tried, grid):
    """The rates to try around ``best``: the geometric midpoints with its neighbours among ``tried`` and, at the
    edge of what was tried, one grid step past it (and the midpoint). (The first refinement adds the points
    halfway to these: :func:`_tune_stages`.)"""
    tried = sorted(tried)
    i = tried.index(best)
    step = _grid_step(grid)
    out = []
    if i > 0:
        out.append(math.sqrt(best * tried[i - 1]))
    else:
        out += [best / step, best / math.sqrt(step)]
    if i < len(tried) - 1:
        out.append(math.sqrt(best * tried[i + 1]))
    else:
        out += [best * math.sqrt(step), best * step]
    return sorted(float(f"{v:.6g}") for v in out if v not in tried)


def _fine(best, scores, rel=0.0, exact=False):
    """The geometric midpoints of ``best`` with its neighbours among the rates tried (``scores``: their scores, inf
    where rejected) where it lies in a narrow valley: every neighbour ends steeply above it or was rejected, one at
    least steeply. Steeply: further above it than the rates are apart (``score ratio > rate ratio``: a method that
    converges linearly ends exponentially in its rate), by more than :data:`FINE_GAIN` and, where the candidates'
    relative standard error is ``rel`` (:func:`noise`), more than two standard errors of their difference
    (``exp(2 sqrt(2) rel)``, 1.25 at :data:`CONFIRM_NOISE`). A best with a neighbour that ends close to it (a
    noise floor, a bias, a transient: the default comparison's methods, 1.1-1.4x on one side) is left as it is:
    there the halved steps gained 1.11x at most and cost 26-47% of its time (bench/RESULTS.md 58d, 61a), unless
    that neighbour and the best lie between two walls (:func:`_between_walls`): then their midpoint alone; or the
    other neighbour was rejected and the close one still ends more than the gain above the best (the values fall
    toward a rejected rate: :func:`_toward_the_edge`): then the midpoint with the rejected one alone.

    With ``exact`` (the tuning's trajectories are the evaluation's: :func:`exact_tuning`), the midpoints with every
    neighbour, rejected or not, unless each ends within :data:`PLATEAU` of the best: a deterministic method's final
    value can fall by orders of magnitude between two rates that end close to each other (the two walls of a
    valley: a held-out Add-Opt ended 133x above 0.158 at 0.178, its neighbours 1.29x above it and rejected; seven
    more ended 1.3-9.3x off, bench/RESULTS.md 62a), and halving there costs one replica a rate."""
    gain = _fine_gain(rel)
    tried = sorted(scores)
    i = tried.index(best)
    neighbours = [lr for lr in (tried[i - 1] if i > 0 else None, tried[i + 1] if i + 1 < len(tried) else None)
                  if lr is not None]

    def steep(lr, low=best):
        return _steep(scores, lr, low, gain)

    if exact:
        if all(scores[lr] <= PLATEAU * scores[best] for lr in neighbours):  # (inf is not)
            return []
    elif not any(steep(lr) for lr in neighbours) or not all(steep(lr) or not math.isfinite(scores[lr])
                                                              for lr in neighbours):
        return _between_walls(best, tried, scores, steep, gain) or _toward_the_edge(best, tried, scores, gain)
    return _midpoints(best, neighbours, scores)


def _fine_gain(rel):
    """The factor a neighbour of the best ends above it by, at least, to be steep (:func:`_fine`): :data:`FINE_GAIN`,
    or two standard errors of their difference where the candidates' relative standard error is ``rel``."""
    return max(FINE_GAIN, math.exp(2.0 * math.sqrt(2.0) * rel))


def _steep(scores, lr, low, gain):
    """Whether the rate ``lr`` ends steeply above ``low`` (``scores``: inf where rejected): more than ``gain``
    (:func:`_fine_gain`) and further than the two rates are apart."""
    return math.isfinite(scores[lr]) and scores[lr] > max(gain, lr / low, low / lr) * scores[low]


def _toward_the_edge(best, tried, scores, gain):
    """The midpoint of ``best`` with a neighbour that was rejected, more than :data:`BETWEEN_WALLS_APART` from it,
    where its other neighbour ends more than ``gain`` above it (:func:`_fine`'s; the noise's where it is larger):
    the values fall toward the edge of stability, which lies somewhere between the two. Helper 242's Push-Pull on a
    sleepy two-cluster graph ended 4.36, 3.62, 2.94 and 2.35 at 0.075 .. 0.178 on the tuner's streams, 0.316
    rejected; the tuner kept 0.178, 1.42x above 0.274 over 20 repetitions (0.237 and 0.274 were never tried). As
    :func:`_between_walls`, one rate a stage; an exact tuning halves toward a rejected neighbour anyway."""
    i = tried.index(best)
    for side in (-1, 1):
        if not (0 <= i + side < len(tried) and 0 <= i - side < len(tried)):
            continue
        edge, other = tried[i + side], tried[i - side]
        if (not math.isfinite(scores[edge]) and math.isfinite(scores[other]) and scores[other] > gain * scores[best]
                and max(edge, best) / min(edge, best) > BETWEEN_WALLS_APART):
            return _midpoints(best, [edge], scores)
    return []


def _between_walls(best, tried, scores, steep, gain):
    """The midpoint of ``best`` with a neighbour that ends close to it (not ``steep``: :func:`_fine`), more than
    :data:`BETWEEN_WALLS_APART` from it, where the two lie between walls: ``best``'s other neighbour and the close
    one's outer one (the next rate of ``tried`` past it) each end steeply above the rate beside them or were
    rejected, not both rejected, and each that ended rises so fast in the logarithms that, as fast down to the
    pair's midpoint, it would end ``gain`` below the best there (``ln(score ratio) / ln(rate ratio) * ln(the pair's
    rate ratio) / 2 > ln(gain)``). Helper 232's Push-Pull on two directed 16-cycles (mini-batches, 1,500 rounds)
    ended 1.1e-3 at both 0.0133 and 0.0154 on the tuner's streams, 3.2-3.3x below 0.0115 (1.8x at the midpoint by
    that rule) and below a rejected 0.0178; the tuner kept one of them, 2.8-3.0x above their midpoint 0.0143 in the
    evaluation (9.5e-4 or 1.4e-3 against 3.5e-4 or 4.6e-4; seeds 1 and 4 of five). A noise floor, a bias or a
    gentle bowl rises slower: the default comparison's Push-SAGA and GT-SAGA, 1.36x and 1.41x an eighth of a decade
    out (1.17-1.19x by the rule), and DSGD's floor there are left as they are, as is a plateau (its outer neighbour
    not steep). One rate a stage (the default comparison never asks for it). On 156 tunings of another tester's
    problems (helper 240) it fired in 18, all on directed rings, walls of 1.2-1.5x on nonconvex logistic among them,
    and its rate ended lower in 13 of the 14 it changed (1.15-25x over 20 repetitions), level in one."""
    i = tried.index(best)
    if not 0 < i < len(tried) - 1:
        return []

    def wall(lr, low, pair):
        return not math.isfinite(scores[lr]) or (steep(lr, low) and (scores[low] <= 0.0 or math.log(
            scores[lr] / scores[low]) * math.log(pair) > 2.0 * math.log(gain) * abs(math.log(lr / low))))

    for side in (-1, 1):
        close, other, outer = tried[i + side], tried[i - side], i + 2 * side
        if not math.isfinite(scores[close]) or steep(close) or not 0 <= outer < len(tried):
            continue
        pair, outer = max(best, close) / min(best, close), tried[outer]
        if (pair > BETWEEN_WALLS_APART and wall(other, best, pair) and wall(outer, close, pair)
                and (math.isfinite(scores[other]) or math.isfinite(scores[outer]))):
            return _midpoints(best, [close], scores)
    return []


def _valleys(scores, best):
    """The lowest-ending rate of each stretch of consecutive stable rates (``scores``: every rate tried, inf where
    rejected) but ``best``'s own, and the largest rate of each stretch below a rejected one (its edge of
    stability), ``best`` left out. A deterministic method's stable rates can lie in two stretches parted by a band
    of unstable ones, and its best rate in the other one: SGP on a 6-node ring over 8 rounds ended 69x lower at
    0.2 (between 0.1 and an unstable 0.316) than at the grid's best, 1.0, around which alone the tuner had refined;
    and its best can be a dip just before the rates diverge: SGP on a 4-node ring over 15 rounds, 1.5e-4 at 1.41
    (1.78 unstable) where the grid's best, 0.316, ends at 3.0e-4 (helper 138)."""
    stretches, current = [], []
    for lr in sorted(scores):
        if math.isfinite(scores[lr]):
            current.append(lr)
        elif current:
            stretches.append(current)
            current = []
    stretches += [current] if current else []
    lows = [min(run, key=lambda lr: (scores[lr], -lr)) for run in stretches if best not in run]
    edges = [run[-1] for run in stretches if run[-1] < max(scores) and run[-1] not in lows]
    return sorted(set(lows + edges) - {best})


def _width(grid, record):
    """The most rates of a refinement stage: as many as the grid's two streams hold (what the comparison's memory
    was checked for), and at least the eight around one best (quarter and eighth decades on both sides), which a
    refinement has always run at once."""
    return max(2 * len(grid) // max(1, record.get("replicas", 1)), 8)


def _parts(rates, width):
    """``rates`` in runs of at most ``width`` (:func:`_width`): the comparison's memory was checked for the grid's
    two streams (:func:`~rowstoch_fast.compare.plan.make_plan`), and an exact tuning's refinement around every
    stretch and edge of an alternating grid had run 29 rates at once (helper 140)."""
    return [rates[i:i + width] for i in range(0, len(rates), width)]


def _around_valleys(scores, best, refined, grid):
    """The rates to try around each of :func:`_valleys` not in ``refined`` (which they join), as around the best
    in the first refinement: the midpoints with its neighbours (a grid step past the edge of what was tried) and
    halfway to each."""
    more = set()
    for low in _valleys(scores, best):
        if low in refined:
            continue
        refined.add(low)
        around = [lr for lr in _refinements(low, list(scores), grid) if _within_span(lr, grid)]
        more |= set(around) | set(_midpoints(low, around, scores))
    return sorted(more - set(scores))


def _around_runner_up(scores, best, grid):
    """The rates to try around the runner-up of the rates tried so far (``scores``, inf where rejected): the stable
    one that ends lowest but ``best``, where it ends within :data:`RUNNER_UP` times ``best``'s score: the
    midpoints with its neighbours (a grid step past the edge of what was tried), but not between the two where
    they are neighbours (the best's refinement covers that), nor the eighth steps (the fine refinement halves the
    steps from there where it lands in a narrow valley: :func:`_fine`). A method's final value need not be one
    valley in its rate (a Pull-Diag tracker's early scale, a multi-round method's transient): a second valley
    beside the runner-up, away from the best, is as likely as one beside the best, and the grid shows neither.
    Two more replicas a rate of the default grid in the refinement's run (the default comparison's tuning runs:
    4 to 5 rates). Not asked where the best ends at the metric's rounding level (nothing ends lower)."""
    stable = {lr: v for lr, v in scores.items() if math.isfinite(v) and lr != best}
    if not stable or not math.isfinite(scores.get(best, math.inf)):
        return []
    second = min(stable, key=lambda lr: (stable[lr], lr))
    if not stable[second] <= RUNNER_UP * scores[best]:
        return []
    tried = sorted(scores)
    low, high = sorted((second, best))
    beside = tried.index(high) - tried.index(low) == 1
    around = _distinct([lr for lr in _refinements(second, tried, grid) if _within_span(lr, grid)], scores)
    return [lr for lr in around if not (beside and low < lr < high)]


def _midpoints(best, rates, tried):
    """The geometric midpoints of ``best`` with each of ``rates`` (six significant digits), those not in ``tried``."""
    return _distinct({float(f"{math.sqrt(best * lr):.6g}") for lr in rates}, tried)


#: Rates closer than this (relatively) are one rate to the tuner (:func:`_distinct`).
SAME_RATE = 1e-5


def _distinct(rates, tried=()):
    """``rates`` sorted, without those within :data:`SAME_RATE` of one ``tried`` or of a smaller one kept: rates
    rounded to six digits from rates already rounded land a last digit apart (a refinement ran 5.62342e-07, the
    midpoint of 1e-6 and 3.16228e-7, beside 5.62341e-07, half a step below 1e-6: helper 156)."""
    kept, near = [], sorted(tried)
    for lr in sorted(set(rates)):
        if not any(abs(lr - t) <= SAME_RATE * max(lr, t) for t in kept + near):
            kept.append(lr)
    return kept


def exact_tuning(network, objective, method):
    """Whether the tuning's trajectories are the evaluation's (up to the order of sums): gradients of the whole data
    on every stream (:attr:`~rowstoch_fast.objectives.Objective.whole_data`), a method of batch gradients, over a
    network that draws nothing (:func:`~rowstoch_fast.network.draws`). Its rates are then refined wherever a
    neighbour of the best does not end level with it (:func:`_fine`), around every stretch of stable rates and edge
    of stability (:func:`_valleys`, :data:`VALLEY_STAGES`), and searched below the grid where every rate blew up,
    each smaller one later (:func:`_later_when_smaller`)."""
    return bool(getattr(objective, "whole_data", False)) and _batch_gradients(method) and not draws(network) \
        and not getattr(method, "draws", False)  # (nor one that draws of its own: a federated method's clients)


def _batch_gradients(method):
    """Whether ``method`` is a registered method of batch gradients (not per-sample draws: the SAGA family)."""
    from ..algorithms import REGISTRY

    cls = REGISTRY.get(getattr(method, "method", None))
    return cls is not None and getattr(cls, "gradients", "batch") != "samples"


def replicas_per_rate(network, objective, method):
    """The replicas a tuning run gives each candidate rate: :data:`TUNE_REPEATS`, or one where its replicas would
    run the same trajectory (their mean is then each of them, to the bit): gradients that ignore their stream
    (:attr:`~rowstoch_fast.objectives.Objective.stream_free`), a method of batch gradients (not per-sample draws),
    over a network whose rounds draw nothing per replica (no message layer: compression and noise draw per value,
    so per replica; losses and sleep are drawn per link, the same for every replica), by a method that draws
    nothing of its own (a federated method's clients: each stream draws its own, :func:`trajectories`)."""
    same = getattr(objective, "stream_free", False) and _batch_gradients(method) and not hasattr(network, "encode") \
        and not getattr(method, "draws", False)
    return 1 if same else TUNE_REPEATS


def tune(network, objective, method, budget, metric, *, seed=0, backend="auto", grid=None, log=None,
         checkpoint_dir=None, keep_stages=False, progress=False):
    """The best stable rate of ``grid`` for ``method`` over the whole ``budget``, then refined.

    Every stage (the grid, the search past it where none of its rates is stable and their failures point there, the
    refinement around the best (in an exact tuning also around the other stretches of stable rates and the edges of
    stability: :func:`exact_tuning`), steps past the edge while the best is there, and the fine refinement where
    the best lies in a narrow valley) is one batched run whose candidates
    share their gradient streams (the first :data:`TUNE_REPEATS` of ``seed + TUNE_SEED_OFFSET``, which no evaluation
    draws), so that those candidates are judged on the same samples; where two streams cannot order them, the
    contenders run on more streams of their own (the "confirm" stages: :func:`contenders`, :func:`confirm_repeats`)
    and are judged on all of them. With ``checkpoint_dir``, each stage's run keeps a checkpoint there
    (``LABEL.tuning-K.npz``) while it runs, and its trajectories (``LABEL.tuning-K.done.npz``) once it finished,
    until the tuning ends, so that an interrupted tuning goes on where it stopped and runs no finished stage again.
    With ``keep_stages`` too, those trajectories stay after it ended, until :func:`forget_stages` removes them: its
    caller's then once the chosen rate is recorded (an interruption between the tuning and the run at its rate
    then tunes again in no time, and loses nothing). ``progress`` (as the runner's: True where someone watches,
    ``"always"``) shows each stage's iterations as a bar, "LABEL (tuning: grid, 11 rates)".

    Returns
    -------
    lr : float
    record : dict
        ``{"metric", "seed", "chosen", "iterations", "replicas" (per rate: :func:`replicas_per_rate`), "noise"
        (where judged: :func:`noise`), "stages": [{"name", "replicas" (a confirmation's streams), "scores": {lr:
        score}, "rejected": {lr: why}, "ends": {lr: final value}, "curves": {lr: [values]}}]}``: every
        candidate's score (``inf`` where rejected), why it was rejected, where it ended and its trajectory (the
        mean over its replicas at ``iterations``; after a confirmation, over all its streams so far); and
        ``"set_aside": [{"streams": [first, end], "ends": {lr: where it ended}}]`` where a confirmation's draw on
        which every contender grew or diverged was set aside (:func:`_confirm`); ``"floor": {"rates", "noise"}``
        where the floor of a narrow valley was confirmed though the pooled noise asked for nothing
        (:func:`_valley_floor`).

    Raises
    ------
    NoStableRate
        When every candidate is rejected (``.record`` as above; ``.fallback``: the candidate that ended lowest
        without diverging, among those confirmed on more streams where two could not tell them apart; the
        smallest rate tried where every one diverged).
    """
    from .plan import TUNE_GRID

    started = time.perf_counter()
    grid = tuple(sorted(set(grid or TUNE_GRID)))
    tune_seed = (int(seed) + TUNE_SEED_OFFSET) % (MAX_KEY + 1)
    record = {"metric": getattr(metric, "name", metric), "seed": tune_seed, "chosen": None, "stages": []}
    scores, ends, arrival = {}, {}, {}
    columns, finals = {}, {}  # (each rate's replicas: their trajectories, their own final values)
    climbing = {}  # (rates rejected for a climb short of the tenfold or bending, on streams that differ:
    # _keep_far_below)

    finished = []  # (the stages' results kept while the tuning runs: an interrupted tuning does not redo them)

    repeats = record["replicas"] = replicas_per_rate(network, objective, method)
    exact = exact_tuning(network, objective, method)
    at_rounding = converged_for(objective, getattr(metric, "name", metric))

    key = _problem_key(network, objective, budget, metric, tune_seed, grid, repeats)
    spare = {}  # (the columns of rates run beside the grid, on its streams: a later stage of them reads them)

    def stage(name, rates, rep_offset=0, replicas=repeats, may_set_aside=False):
        aside = record.get("set_aside", [])
        path = _stage_checkpoint(checkpoint_dir, method.label, len(record["stages"]) + len(aside))
        shown = {"progress": progress, "desc": f"{method.label} (tuning: {name}, {len(rates)} rate"
                                              f"{'s' if len(rates) != 1 else ''})"} if progress else {}
        served = {lr: spare.pop(lr) for lr in rates if lr in spare} if not rep_offset and replicas == repeats else {}
        # (run beside the grid on these streams already: the same bits as a run of their own, _beside)
        if len(served) == len(rates):
            iterations = served[rates[0]][0]
            values = np.concatenate([served[lr][1] for lr in rates], axis=1)
        else:
            extra, run = [], [lr for lr in rates if lr not in served]
            if name == "grid" and not rep_offset:
                fingerprint = _fingerprint(method, run, budget, getattr(metric, "name", metric), tune_seed,
                                           replicas, objective, rep_offset)
                kept = _kept_beside(path, fingerprint, run)
                extra = kept if kept is not None else _beside(run, _refined_for(key), method, network, objective,
                                                               backend, replicas, metric)
            iterations, values = trajectories(network, objective, method, run + list(extra), budget, metric,
                                              seed=tune_seed, repeats=replicas, backend=backend, checkpoint=path,
                                              keep=True, rep_offset=rep_offset, **shown)
            finished.append(path)
            if values is not None and (extra or served):
                ran = {lr: values[:, k * replicas:(k + 1) * replicas] for k, lr in enumerate(run + list(extra))}
                spare.update((lr, (iterations, ran[lr])) for lr in extra)
                ran.update((lr, block) for lr, (_, block) in served.items())
                values = np.concatenate([ran[lr] for lr in rates], axis=1)
        record["iterations"] = [int(k) for k in iterations]

        def _arrived(lr, curve):
            reached = np.flatnonzero(np.asarray(curve) <= scores[lr] * (1 + 1e-9))
            arrival[lr] = int(iterations[reached[0]]) if reached.size else math.inf

        if may_set_aside and len(aside) < SET_ASIDE_MAX:
            failed = _failed_on(iterations, values, rates, replicas, at_rounding)
            if len(rates) > 1 and len(failed) == len(rates):  # (every contender: the draw tells none from another;
                # one left alone: the draw is the evidence against it, as its rivals' were against them)
                record["set_aside"] = aside + [{"streams": [rep_offset, rep_offset + replicas], "ends": failed}]
                record["seconds"] = time.perf_counter() - started
                return False
        entry = {"name": name, "scores": {}, "rejected": {}, "ends": {}, "curves": {}}
        if rep_offset:
            entry["replicas"] = replicas
        for c, lr in enumerate(rates):
            block = values[:, c * replicas:(c + 1) * replicas]
            if rep_offset and lr in columns:  # (a confirmation adds streams)
                block = np.concatenate([columns[lr], block], axis=1)
            with np.errstate(all="ignore"):
                mean = block.mean(axis=1)
                own = [_judged(iterations, block[:, q], converged=at_rounding)[2] for q in range(-replicas, 0)] \
                    if replicas > 1 else []
            columns[lr] = block
            finals[lr] = (finals.get(lr, []) if rep_offset else []) + own
            typical = typical_curve(block)
            score, why, end = _judged(iterations, mean, typical, converged=at_rounding, last=exact)
            entry["scores"][lr], entry["ends"][lr], entry["curves"][lr] = score, end, [float(v) for v in mean]
            scores[lr], ends[lr] = score, end
            climbing.pop(lr, None)
            record.get("kept_climbing", {}).pop(lr, None)  # (judged again: on more streams; an empty record of them
            # is dropped by _keep_far_below after the stage)
            if why and why.startswith("unstable (ends") and not exact and _short_climb(iterations, typical,
                                                                                     at_rounding):
                climbing[lr] = (entry, why)  # (its streams differ: kept where it ends far below the steady rates)
            arrival.pop(lr, None)
            if math.isfinite(score):  # (when it first reached the level it ends at: converged rates' tie-break)
                _arrived(lr, mean)
            if why:
                entry["rejected"][lr] = why
        record["stages"].append(entry)
        _keep_far_below(climbing, scores, ends, record, _arrived)
        record["seconds"] = time.perf_counter() - started
        return True

    def forget():  # (tuned, or no stable rate: the stages' results are in the record; interrupted: kept)
        if not keep_stages:
            for path in finished:
                _remove_stage(path)

    try:
        chosen = _tune_stages(stage, scores, arrival, ends, finals, record, grid, method, log, at_rounding,
                              redraws=draws(network) or method.draws, exact=exact)
    except NoStableRate:
        forget()
        _remember_refined(key, record)
        raise
    forget()
    _remember_refined(key, record)
    return chosen


def _remember_refined(key, record):
    """File the rates that ``record``'s first refinement ran (its "refine" stages right after the grid) under the
    problem ``key`` (:data:`_REFINED`): the next tuning of the problem runs them beside its grid."""
    names = [entry["name"] for entry in record.get("stages", ())]
    if key is None or names[:1] != ["grid"] or names[1:2] != ["refine"]:
        return
    rates = []
    for entry in record["stages"][1:]:
        if entry["name"] != "refine":
            break
        rates += [float(lr) for lr in entry["scores"]]
    _REFINED[:] = [(key, tuple(rates))]  # (one problem at a time: a comparison's)


def _short_climb(iterations, typical, converged=CONVERGED):
    """Whether a typical curve that the stability rule rejects climbs less than :data:`CLIMB` times above its lowest
    level (the levels of :func:`off_its_minimum`), or climbs further while bending in its logarithm
    (:func:`_bends`): the noise it gathers, not a run-off."""
    v = np.asarray(typical, dtype=np.float64)
    if not (np.isfinite(v).all() and v[0] > 0):
        return False
    v = np.maximum(v, max(converged * float(v[0]), 1e-300))
    return off_its_minimum(iterations, v, CLIMB) is None or _bends(iterations, v)


#: The fewest records from its lowest level to the end that :func:`_bends` reads.
BEND_RECORDS = 12


def _bends(iterations, typical):
    """Whether a positive typical curve's climb from its lowest level (the geometric mean of three records, past the
    start) to the end bends: :data:`BEND_RECORDS` records at least, its logarithm's slope over their later half
    below :data:`STEADY_PACE` of the earlier half's, and a parabola through that logarithm curving down by more than
    twice its standard error (helper 255: of simulated geometric run-offs, 30-1,000x from a dip, with a
    record-to-record noise of 0.2-0.4 in the logarithm, the halves alone passed 0.1-29%, with the curvature 0.1-5%;
    of climbs at an even pace in value, 91-100% pass). Under noise on the messages an exact method's error gathers the
    noise, at a pace in value that does not grow, and its logarithm bends; a geometric run-off climbs on a line in it
    (:func:`climbs`' steady climb), an accelerating one bends upwards. Helper 255: NIDS on a geometric graph of 128
    under noise 1e-3, the mean of two streams at 0.316 climbing 11.4x (1.5e-8 to 5.1e-7, the later half at 0.53 of
    the earlier's pace) and ending 56x below every steady rate, had been rejected (0.0649 chosen, 53x above 0.487's
    1.35e-7 over 20 repetitions, both ``ok``)."""
    x, v = np.asarray(iterations, dtype=np.float64), np.asarray(typical, dtype=np.float64)
    if len(v) < BEND_RECORDS + 4 or not (np.isfinite(v).all() and (v > 0).all()):
        return False
    levels = smoothed(v[1:], 3)[2:]  # (level k: records k + 1 .. k + 3)
    j = int(np.argmin(levels)) + 1
    xs, logs = x[j:], np.log(v[j:])
    if len(xs) < BEND_RECORDS or not rising(xs, logs):
        return False
    m = len(xs) // 2
    early, late = (float(np.polyfit(xs[a:b], logs[a:b], 1)[0]) for a, b in ((0, m + 1), (m, len(xs))))
    if not (early > 0 and late < STEADY_PACE * early):
        return False
    z = (xs - xs.mean()) / xs.std()  # (the bend itself significant: a noisy run-off's halves can differ by chance)
    basis = np.vstack([np.ones_like(z), z, z * z]).T
    coef = np.linalg.lstsq(basis, logs, rcond=None)[0]
    residual = logs - basis @ coef
    with np.errstate(divide="ignore", invalid="ignore"):
        se = math.sqrt(float(residual @ residual) / (len(z) - 3) * float(np.linalg.inv(basis.T @ basis)[2, 2]))
    return bool(coef[2] < -2.0 * se)


def _keep_far_below(climbing, scores, ends, record, arrived):
    """Where a rate rejected for a climb short of the tenfold, or one that bends (:func:`_short_climb`), on streams
    that differ (``climbing``: ``{lr: (the stage's entry, why)}``) ends :data:`CLIMB` times or more below every rate that does not climb, it is a candidate
    after all, scored by where it ends (``record["kept_climbing"]`` says why): its climb costs it less than it gains.
    Read again after every stage: a steady rate found later within the tenfold of a kept one rejects it again, as
    it would have had the grid held it (helper 197). Under noise on the messages, the exact methods' (EXTRA, NIDS,
    LED, ...) error falls to its lowest level early and then grows with the noise it gathers, at every rate, the
    larger ones ending lower: the stability rule kept the rates too small to have reached their lowest level within
    the budget, 460-8,300x above the best (helper 195: EXTRA at 0.0133, 7.2e-3, where 0.316 ends at 1.3e-5; the
    evaluation calls both ``ok``). A climb of a rate that ends near the steady ones is still rejected: there the
    climb decides (helper 188's MG-Pull-Diag-GT under QSGD, 1.9x lower at the budget and ``unstable`` over twice
    it)."""
    kept = record.pop("kept_climbing", {})
    steady = [v for lr, v in scores.items() if math.isfinite(v) and lr not in kept]
    bar = min(steady) / CLIMB if steady else -math.inf  # (no steady rate: no tuning by this rule)
    for lr, (entry, why) in climbing.items():
        end = ends.get(lr, math.inf)
        if math.isfinite(end) and end <= bar:
            if lr not in kept:
                scores[lr] = entry["scores"][lr] = end
                entry["rejected"].pop(lr, None)
                arrived(lr, entry["curves"][lr])
            climb = why.split(" (ends ")[1].split("x")[0]
            kept[lr] = (f"climbed {climb}x above its lowest level but ends {min(steady) / end:.3g}x below every rate "
                        "that does not climb")
        elif lr in kept:  # (a steady rate within its tenfold found since)
            scores[lr] = entry["scores"][lr] = math.inf
            entry["rejected"][lr] = why
            del kept[lr]
    if kept:
        record["kept_climbing"] = kept


def noise(scores, finals):
    """The relative standard error of a candidate's final value over its replicas, pooled over the candidates
    ``scores`` (their values unread: the stable ones where a choice is judged, the rates that did not grow where the
    failures are, :func:`_unmoved_noise`; ``finals``: each one's replicas' own final values; the root mean square
    of their standard errors over their means): 0 where no candidate has two finite replicas."""
    rel = []
    for lr, score in scores.items():
        own = np.asarray([v for v in finals.get(lr, ()) if math.isfinite(v)])
        if len(own) >= 2 and own.max() > 0:
            own = own / own.max()  # (scaled first: a rate that ends at 1e160 would overflow the squares)
            if own.mean() > 0:
                rel.append(own.std(ddof=1) / math.sqrt(len(own)) / own.mean())
    return float(np.sqrt(np.mean(np.square(rel)))) if rel else 0.0


def contenders(scores, finals, arrival=None, most=CONFIRM_MAX, tried=None, step=None):
    """The candidates that two streams cannot tell apart from the best, best first, ``most`` in all; only the best
    where the noise (:func:`noise`, pooled over the stable candidates ``scores``) is below :data:`CONFIRM_NOISE`.

    Where it is not: the best (``scores``: the stable candidates' final values), then the stable others whose
    score less two standard errors reaches the best's plus two, lowest first, then the rates of ``tried``
    (every candidate that did not diverge: ``{lr: final value}``) within one grid ``step`` of it, closest first,
    rejected ones among them (on noisy streams a good rate's mean can climb or end above half its start by
    chance: bench/RESULTS.md section 35). Those the scores cannot tell apart come first: a held-out problem's
    best rate, a decade from the two streams' best and within its reach, was cut by four neighbours."""
    best = _best(scores, arrival)
    rel = noise(scores, finals)
    if rel < CONFIRM_NOISE:
        return [best]
    out = [best] + [lr for lr in _within_reach(scores, scores[best], rel) if lr != best]
    if tried and step:
        out += [lr for lr in _near(best, [lr for lr, end in tried.items() if math.isfinite(end)], step)
                if lr not in out]
    return out[:most]


def _valley_floor(best, scores, finals, rel):
    """``(the rates to confirm, the noise that sizes their confirmation)`` where the fine refinement ran (the best lay
    in a narrow valley) and the pooled noise ``rel`` (:func:`noise`) left ``best`` alone: ``best`` and its
    neighbours among the rates tried (``scores``, inf where rejected) that end close to it (stable, not steeply
    above it: :func:`_fine`'s rule at ``rel``), and the larger of ``rel`` and the noise of these alone; ``[best]``
    where none ends close. Two streams cannot order the floor of a narrow valley however little they differ: its
    final values are the smallest, so the noise is the largest share of them (the walls' are the method's
    transient), and every candidate runs on the same two streams, so that where those two happen to agree they agree
    at every rate (the pooled noise then carries about one draw's worth of evidence, not one per rate). Helper 240's
    ADD-OPT on a directed ring of 20 (nonconvex logistic, mini-batches of 4): streams 0 and 1 ended within 1-2% of
    each other at every rate (pooled noise 0.006), 0.0205 and 0.0221 at 0.0104 both, and 0.0205 was chosen; over 20
    streams their final values spread 15-20% (0.0205: 0.0096, 0.0221: 0.0083), and over 20 repetitions of the
    evaluation 0.0205 ended 1.30x above 0.0221. Its Push-Pull (logistic-l2, directed ring of 24): pooled noise
    0.077, just below :data:`CONFIRM_NOISE`, a spread of 67% at the floor over 30 streams; 0.0093 was chosen over
    0.0096 (1.05x apart on two streams, 1.37x the other way on eight; the evaluation's 1.53x over 5 repetitions,
    1.03x over 20: a tie). :func:`confirm_repeats` streams more each,
    at least :data:`CONFIRM_MIN_REPEATS`: two or three rates on six (the default comparison never refines that
    fine).

    Not at an edge of stability (a rate next to these rejected): there what decides is whether a rate holds on the
    evaluation's draws, which six streams do not settle, and a failure there is the evaluation's retry's to mend
    (:func:`~rowstoch_fast.compare.verdict.next_stable`, a fifth of a decade below). On helper 240's problems the
    floor's confirmation rejected the best at four such edges (of eleven) and chose a rate below it; in three that rate
    failed in the evaluation all the same (ADD-OPT on a directed ring of 32: 0.00316, stable on eight streams,
    unstable over 20 repetitions), and the retry went further down than it had from the best, to rates ending
    1.5x and 2.0x higher (one gained 6.9x: a rate that held)."""
    gain = _fine_gain(rel)
    tried = sorted(scores)
    i = tried.index(best)
    close = [lr for lr in tried[max(i - 1, 0):i + 2] if lr != best and math.isfinite(scores[lr])
             and not _steep(scores, lr, best, gain)]
    if not close:
        return [best], rel
    rivals = [best] + sorted(close, key=lambda lr: (scores[lr], lr))
    low, high = tried.index(min(rivals)), tried.index(max(rivals))
    if not all(math.isfinite(scores[lr]) for lr in tried[max(low - 1, 0):high + 2]):  # (an edge of stability)
        return [best], rel
    rel = max(rel, noise({lr: scores[lr] for lr in rivals}, finals))
    return (rivals, rel) if rel > 0 else ([best], rel)  # (streams that end alike to the last bit, deterministic
    # gradients over fixed delays: six more streams had ended bit for bit as the two, helper 244)


def _near(best, rates, step):
    """The rates of ``rates`` other than ``best`` within one grid ``step`` of it, closest first."""
    return [lr for _, lr in sorted((abs(math.log(lr / best)), lr) for lr in rates
                                   if lr != best and abs(math.log(lr / best)) <= math.log(step) * (1 + 1e-9))]


def _within_reach(values, low, rel):
    """The rates of ``values`` (``{lr: final value}``) that two standard errors (relative ``rel``) cannot tell from
    ``low``: less two standard errors, at most ``low`` plus two; lowest first."""
    reach = low * (1 + 2 * rel)
    return [lr for v, lr in sorted((v, lr) for lr, v in values.items()) if v * max(1 - 2 * rel, 0.0) <= reach]


def confirm_repeats(rel):
    """The streams a confirmation adds where the pooled noise over :data:`TUNE_REPEATS` streams is ``rel``: as
    many as bring it to :data:`CONFIRM_NOISE` (the standard error falls as one over the root of the streams),
    within :data:`CONFIRM_MIN_REPEATS` .. :data:`CONFIRM_REPEATS`."""
    if not math.isfinite(rel):
        return CONFIRM_REPEATS
    total = math.ceil(TUNE_REPEATS * min(rel / CONFIRM_NOISE, 1e3) ** 2) if rel > 0 else 0
    return int(min(max(total - TUNE_REPEATS, CONFIRM_MIN_REPEATS), CONFIRM_REPEATS))


def _tune_stages(stage, scores, arrival, ends, finals, record, grid, method, log, floor=CONVERGED, redraws=False,
                 exact=False):
    """:func:`tune`'s stages: the grid, the search for a stable rate where the grid has none, the refinement and
    the steps past the edge, the fine refinement where the best's neighbours end far above it, the confirmation of
    the contenders, then the choice (``floor``: the metric's rounding level, :func:`converged_for`; ``redraws``:
    the network draws its links, which every replica of a stage sees alike: where no confirmation ran, the
    contenders, and every stable rate of the grid, then run on :data:`DRAW_CONFIRMS` draws of their own; ``exact``:
    :func:`exact_tuning`)."""
    stage("grid", list(grid))
    refined = set()  # (the rates an exact tuning has refined around)
    for _ in range(SEARCH_STAGES):
        if any(math.isfinite(s) for s in scores.values()):
            break
        more = _search(ends, record, grid, lossless=not redraws, rel=_unmoved_noise(ends, finals, record))
        if not more:
            break
        stage("search", more)
    for _ in range(LIFETIME_STAGES):  # (every rate blew up: around the ones that lasted longest)
        if any(math.isfinite(s) for s in scores.values()):
            break
        more = _around_longest_lived(_last_curves(record), grid)
        if not more:
            break
        stage("search", more)
    more = _moved_grid([lr for lr, s in scores.items() if math.isfinite(s)], list(scores), grid)
    if more:
        stage("search", more)
    for _ in range(SEARCH_STAGES):  # (the rates did alike from the grid's smallest up: every one too large)
        more = _flat_below(scores, finals, grid, floor * abs(_start(record)), ends)
        if not more:
            break
        stage("search", more)
    above, above_best = 0, None  # (_above_the_top's stages: ABOVE_STAGES at most without a new best)
    for extension in range(MAX_EXTENSIONS + LATER_EXTENSIONS + 1):
        stable = {lr: s for lr, s in scores.items() if math.isfinite(s)}
        if not stable:
            break
        best = _best(stable, arrival)
        if extension > 0 and best not in (min(scores), max(scores)):
            above = above + 1 if best == above_best else 1  # (the stages above the top since the best last moved)
            above_best = best
            more = _above_the_top(scores, best, _last_curves(record), record.get("iterations"), grid) \
                if above <= ABOVE_STAGES else []
            if not more:
                break
            stage("past the edge", more)  # (the largest rate tried still stable and getting better: above it)
            continue
        if extension > MAX_EXTENSIONS and not _edge_gains(best, stable):
            break
        more = [lr for lr in _refinements(best, list(scores), grid)
                if lr not in scores and (extension == 0 or lr < min(scores) or lr > max(scores))
                and _within_span(lr, grid)]
        if extension == 0:  # (and halfway to each: an eighth of a decade of the default grid)
            more = _distinct(set(more) | set(_midpoints(best, more, scores)), scores)
            if not stable[best] <= floor * abs(_start(record)) * (1 + 1e-9):  # (a second valley; none at rounding)
                more = _distinct(set(more) | set(_around_runner_up(scores, best, grid)), scores)
            if exact:  # (and so around each other stable stretch's best, and each edge of stability)
                refined = {best}
                more = _distinct(set(more) | set(_around_valleys(scores, best, refined, grid)), scores)
        if not more:
            break
        for part in _parts(more, _width(grid, record)):  # (no wider than the memory checked)
            stage("refine" if extension == 0 else "past the edge", part)
    for _ in range(VALLEY_STAGES if exact and refined else 0):  # (the stretches and edges the refinement drew)
        stable = {lr: s for lr, s in scores.items() if math.isfinite(s)}
        more = _around_valleys(scores, _best(stable, arrival), refined, grid) if stable else []
        if not more:
            break
        for part in _parts(more, _width(grid, record)):
            stage("refine", part)
    valley = False  # (a fine stage ran: the best lay in a narrow valley, :func:`_valley_floor`)
    for _ in range(FINE_STAGES):  # (where a neighbour ends far above the best: the best may lie between them)
        stable = {lr: s for lr, s in scores.items() if math.isfinite(s)}
        if not stable:
            break
        best = _best(stable, arrival)
        if stable[best] <= floor * abs(_start(record)) * (1 + 1e-9):  # (at the rounding, ``floor`` of the start:
            # converged, ties told apart by arrival; the floor had been read as a value, and a comparison of data in
            # units a thousand times smaller skipped the fine refinement there)
            break
        more = _fine(best, scores, noise(stable, finals) if record.get("replicas", 1) > 1 else 0.0, exact)
        if not more:
            break
        stage("fine", more)
        valley = True
    stable = {lr: s for lr, s in scores.items() if math.isfinite(s)}
    ended = {lr: e for lr, e in ends.items() if math.isfinite(e)}
    pool = []  # (the rates confirmed on more streams, among which the fallback is chosen where none is stable after
    # all: a rate rejected on the grid's two streams, where it ended lowest, is no rival of rates that every
    # stream judged; Push-Pull over 10% lost messages, its contenders 0.24-0.56 ending at 0.053 on six streams, no
    # progress, was shown at 3.16, unstable on the grid's two streams where it ended at 0.036, and at 0.19 in the
    # evaluation against 0.064 at 0.32: bench/RESULTS.md 97)
    if stable and record.get("replicas", 1) > 1:
        record["noise"] = noise(stable, finals)
        rivals = contenders(stable, finals, arrival, tried=ended, step=_grid_step(grid))
        rel = record["noise"]
        if len(rivals) == 1 and valley and not redraws:  # (two streams that agree everywhere: the valley's floor
            # still runs on more; a network that draws its links runs the best's neighbours on draws of their own)
            rivals, rel = _valley_floor(rivals[0], scores, finals, rel)
            if len(rivals) > 1:
                record["floor"] = {"rates": rivals, "noise": rel}
        if len(rivals) > 1:
            before = dict(stable)
            judged = _confirm(stage, rivals, ends, record, grid, set_aside=True, rel=rel)
            pool = rivals  # (where every one of them turns out unstable: judged on the most streams)
            # the choice among the contenders, each judged on every stream: the others were told apart from the
            # best on the same two streams, and their scores on two streams are not comparable with these (where
            # every contender turned out unstable, the rates below them on the same draws: :func:`_retested`, and
            # the rates around the best of those: :func:`_around_retested`)
            stable = ({lr: scores[lr] for lr in rivals if math.isfinite(scores[lr])}
                      or _around_retested(stage, scores, ends, arrival, before, rivals, judged, record, grid))
    elif record.get("replicas", 1) > 1:
        # no rate stable on two streams that cannot tell: the lowest-ending rates run on more streams, judged on
        # all of them (a noisy good rate can look unstable or without progress on two; and where none is stable
        # after all, the fallback is the lowest-ending of these, not a two-stream draw: bench/RESULTS.md 36)
        rivals, rel = _fallback_rivals(ended, finals, _start(record))
        if len(rivals) > 1:
            record["noise"] = rel
            _confirm(stage, rivals, ends, record, grid)
            stable = {lr: scores[lr] for lr in rivals if math.isfinite(scores[lr])}
            pool = rivals
    if stable and redraws and not any(entry["name"] == "confirm" for entry in record["stages"]):
        # (the grid's draw of a network that draws its links, the same for every replica: the evaluation redraws it
        # for every repetition, and a rate stable on the tuner's one draw diverged on 6 of 20)
        best = _best(stable, arrival)
        rivals, replicas = ([best] + _near(best, stable, _grid_step(grid)))[:CONFIRM_MAX], record.get("replicas", 1)
        # and every stable rate of the grid: one draw can order them otherwise than the evaluation's (a 10% lossy
        # Pull-Diag-GT ended 0.0051 at 0.0032 and 0.0079 at 0.032 on the grid's draw, 0.0148 and 0.0106 on others)
        coarse = {lr for entry in record["stages"] if entry["name"] in ("grid", "search") for lr in entry["scores"]}
        coarse = [lr for lr in stable if lr in coarse and lr not in rivals]
        # with the best stable rate within a grid step of each (helper 205: a second valley's refined 0.0562 had
        # ended below its grid point 0.0316, 0.304 against 0.376, and was never run on another draw: 0.0316 was
        # confirmed, and chosen, 2.9x worse than 0.0487 over 20 repetitions)
        nearby = {min([lr, *_near(lr, stable, _grid_step(grid))], key=stable.get) for lr in coarse}
        rivals += sorted(set(coarse) | nearby - set(rivals))
        done = skipped = 0
        before, judged = dict(stable), []
        while done < DRAW_CONFIRMS:
            alive = [lr for lr in rivals if math.isfinite(scores[lr])]
            if not alive:
                break
            offset = replicas * (1 + done + skipped)
            kept = stage("confirm", alive, rep_offset=offset, replicas=replicas, may_set_aside=True)
            done, skipped = (done + 1, skipped) if kept is not False else (done, skipped + 1)
            if kept is not False:
                judged.append((offset, replicas))
        confirmed = {lr: scores[lr] for lr in rivals if math.isfinite(scores[lr])}
        pool = pool or rivals
        stable = confirmed or _around_retested(stage, scores, ends, arrival, before, rivals, judged, record, grid)
    if not stable:
        exc = NoStableRate(f"tune: {method.label} diverged, grew, made no progress or was unstable at every learning "
                           f"rate tried ({min(scores):g} .. {max(scores):g}); give its lr (--lr {method.label}=VALUE)")
        ended = {lr: e for lr, e in ends.items() if math.isfinite(e)}
        start = _start(record)
        confirmed = {lr: ended[lr] for lr in pool if ended.get(lr, math.inf) < start}  # (judged on the
        # most streams, and below their start: where each grew there, a rate that made progress on the grid's
        # streams is shown rather than one that grew on every other, helper 278)
        exc.record, exc.grid = record, grid
        exc.fallback = _best(confirmed or ended) if ended else min(scores)
        # (what the diagnosis says of it: where every rate diverged or ran off, none ended anywhere)
        record["fallback"] = ("the one that ended lowest of the rates run on the most streams" if confirmed
                              else "the one that ended lowest in the tuning runs" if len(ended) > 1 else
                              "the only one whose tuning runs ended finite (every other rate diverged or ran off)"
                              if ended else "the smallest rate tried (every rate diverged or ran off)")
        alike = _alike(_last_curves(record), exc.fallback)
        if alike[-1] >= 10.0 * alike[0] * (1 - 1e-9):  # (a decade or more of rates that did the same: helper
            # 153's Push-DIGing under message noise and lost mass ended at 737, 736, 736, 736 at 1e-6 .. 1e-12, and
            # the table showed 3.2e-12, the lowest by a hair): the smallest of them within the grid's span is shown,
            # else the one nearest to it, and said to be one of them
            inside = [lr for lr in alike if min(grid) * (1 - 1e-9) <= lr <= max(grid) * (1 + 1e-9)]
            exc.fallback = inside[0] if inside else alike[-1] if alike[-1] < min(grid) else alike[0]
            record["alike"] = [alike[0], alike[-1]]
            record["fallback"] = (f"one of the rates from {alike[0]:.3g} to {alike[-1]:.3g} whose tuning runs were "
                                  f"alike (within {ALIKE:.0%} record by record): no rate in that range changed what "
                                  "it did")
        raise exc
    record["chosen"] = _best(stable, arrival)
    if log is not None:
        log(f"tuned {method.label}: lr = {record['chosen']:g}"  # (its time: the tables' wall s is the evaluation's,
            # helper 202)
            + (f" ({record['seconds']:.1f} s)" if "seconds" in record else "") + "".join(
            f" (streams {a}..{b - 1} set aside: every contender grew or diverged on that draw)"
            for a, b in (d["streams"] for d in record.get("set_aside", ()))) + _retest_note(record.get("retested")))
    return record["chosen"], record


def _last_curves(record):
    """Each rate's last curve in ``record`` (a confirmation's replaces the grid's)."""
    return {lr: curve for entry in record.get("stages", ()) for lr, curve in entry.get("curves", {}).items()}


def _failure(curve, end, start):
    """How a rejected rate failed, from its curve and where it ended:

    - ``"dip"``: it went :data:`STABILITY_FACTOR` times below its start (the geometric mean of up to three
      consecutive records, or where it ended): it made progress, then failed;
    - ``"large"``: it diverged or ended more than :data:`UNMOVED` times above its start;
    - ``"small"``: it moved less than :data:`UNMOVED` times either way, at every record (on noisy streams a rate
      too small to move ends a little above or below its start; one that ends there after records further away
      moved: a bounded metric at a rate too large jitters about a level near its start, helper 277's Pull-Diag-GT
      from 0.82x to 1.09x its start at 1e-4 and ending at 0.97x, where every larger rate ended 1.1-1.17x above
      it; read "small", it set the search between 1e-4 and 3.2e-4, where 1.8e-6 converges);
    - ``"down"``: it went down, not far enough: too small where a larger rate goes further, too large where it
      does not (a bounded metric at too large a rate sits at one level whatever the rate: the logistic
      gradient's norm): :func:`_search` tells which;
    - None without a positive start."""
    if not math.isfinite(start) or start <= 0:
        return None
    v = np.asarray(curve, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    low = min(float(smoothed(v).min()) if v.size else math.inf, end)  # (where it ended counts too)
    if STABILITY_FACTOR * low < start:
        return "dip"
    if not math.isfinite(end) or end > UNMOVED * start:
        return "large"
    still = v.size == 0 or (v.max() <= UNMOVED * start and v.min() * UNMOVED >= start)
    return "small" if end * UNMOVED >= start and still else "down"


def _helps(ends, tried, i, rel=0.0, down=()):
    """Whether the rates near ``tried[i]`` show a larger rate ending lower: by :data:`RATE_HELPS` at least, and on
    noisy streams (``rel``: :func:`noise`, the relative standard error of an end) by two standard errors of the
    difference of two ends. Where neither neighbour differs by that much on noisy streams, the trend of the ends
    of the rates that went down (``down``: their indices in ``tried``) over the logarithm of the rate tells: lower
    the larger the rate by two standard errors of its slope (too small: :func:`_falls_with_the_rate`). Helper 277's
    Pull-Diag-GT on a skewed digraph (kappa 128), a nonconvex logistic loss ranked by its gradient's norm on
    features 30x its data's units, ended at 0.75-0.88x its start at every grid rate from 3.2e-4 to 10 and at 0.54x
    at 1e-4 (two streams, 1.7-5.4% apart): a bounded metric at rates too large, its level the same whatever the
    rate. Neighbours 1-9% apart by chance read as larger rates helping, the failures pointed nowhere, no search
    ran, and the method was shown no-progress at 1e-4 (2.9 and 7.6 against FROST's 0.23-0.30) where 1.8e-6 ends
    ok."""
    margin = max(RATE_HELPS, 2.0 * math.sqrt(2.0) * rel)
    lower = [(tried[j], tried[j + 1]) for j in (i - 1, i) if 0 <= j and j + 1 < len(tried)]
    if any(ends[big] < ends[small] * (1 - margin) for small, big in lower):
        return True
    if rel <= 0 or any(ends[small] < ends[big] * (1 - margin) for small, big in lower):
        return False
    return _falls_with_the_rate(ends, [tried[j] for j in down], rel)


def _falls_with_the_rate(ends, rates, rel):
    """Whether ``ends`` over ``rates`` fall with the logarithm of the rate by more than two standard errors of the
    least-squares slope, each end's standard error ``rel`` of the ends' mean (three rates at least), and by
    :data:`RATE_HELPS` of their mean at least from one rate to the next (their mean spacing): the floor of the
    pairs' reading, however quiet the streams (a level drifting 0.3% a step on streams apart by rounding had read
    as rates too small, helper 278)."""
    if len(rates) < 3:
        return False
    x = np.log10(np.asarray(rates, dtype=np.float64))
    y = np.asarray([ends[lr] for lr in rates], dtype=np.float64)
    if not np.all(np.isfinite(y)):
        return False
    spacing = float(x.max() - x.min()) / (len(x) - 1)
    if not spacing > 0:
        return False
    x = x - x.mean()
    slope = float(x @ (y - y.mean()) / (x @ x))
    return slope < -max(2.0 * rel / math.sqrt(float(x @ x)), RATE_HELPS / spacing) * float(y.mean())


def _search(ends, record, grid, lossless=False, rel=0.0):
    """The rates to try where no rate tried so far is stable and the failures (:func:`_failure`) say where the
    rates that work lie: every rate too small (:data:`SEARCH_WIDTH` rates above, a step apart: the grid's, at most
    half a decade), every one too large (as many below), or the too small ones below the too large ones (the
    geometric midpoint of the two at the border); one rate at the border may have made progress before it failed
    (a rate just past the largest that works dips, then climbs), several where too small ones lie below them. None
    otherwise: where rates across the range made progress and then failed, the failure is not the rates' scale (a
    lossy push-sum method converges at every rate until its lost mass blows it up: a rate small enough would only
    push the blow-up past the budget), and on noisy streams such a rate may be the best there is (the confirmation
    of :func:`_fallback_rivals` judges it);
    but with ``lossless`` (a network that draws nothing: no lost mass to blow a method up), where every rate blew
    up, each later as it shrank (:func:`_later_when_smaller`), every one is too large (on the whole data and on
    noisy streams alike). ``rel``: the noise of the ends on noisy streams (:func:`noise`), which a rate that went
    down but not far enough must exceed to be told too small (:func:`_helps`).
    Within :data:`SEARCH_DECADES` of the grid's ends. The grid's range is a guess at the problem's scale: the same
    data in other units (features 100x larger, a loss scaled) move every rate that works by one factor, and the
    verdict must not depend on the units (bench/RESULTS.md section 37)."""
    curves = _last_curves(record)
    start = _start(record)
    tried = sorted(ends)
    how = [_failure(curves.get(lr, ()), ends[lr], start) for lr in tried]
    down = [i for i, kind in enumerate(how) if kind == "down"]

    def read(noisy):  # (on a network that draws nothing, a larger rate that went further down and then failed makes
        # a rate that went down too small: the rates that work lie between the two; helper 160's Push-Pull on a
        # 48-node ring went down to 0.73x its start at 1e-4 and dipped to 0.37x at 3.2e-4 before its consensus error
        # ran off, and was shown at 1e-4 where 2.7e-4 is ok. Not where it draws: a lossy push-sum method's blow-up
        # only comes later at a smaller rate, and none of them works)
        return [("small" if _helps(ends, tried, i, noisy, down) or lossless and how[i + 1:i + 2] == ["dip"]
                 else "large") if kind == "down" else kind for i, kind in enumerate(how)]

    told = read(0.0)  # (each pair of neighbours by RATE_HELPS first: where that points somewhere, it holds; a rate
    # that went down 3% below its smaller neighbour, just below rates that diverge, is the border of stability, and
    # on streams 1.5% apart the noise alone had called it too large and searched the wrong border, helper 278)
    if rel > 0 and down and _ordered(told) is None:  # (pointing nowhere, on noisy streams: read beyond the noise,
        # and where that points nowhere either, one verdict for every rate that went down, from their trend; ten
        # pairs of neighbours at two standard errors each tell one apart by chance: helper 277's Pull-Diag-GT, every
        # grid rate at 0.69-0.75x its start, went 8.4% lower from 3.2e-4 to 1e-3, which read as too small between
        # rates too large, and no search ran, 11x off)
        told = read(rel)
        if _ordered(told) is None:
            one = "small" if _falls_with_the_rate(ends, [tried[i] for i in down], rel) else "large"
            told = [one if kind == "down" else verdict for kind, verdict in zip(how, told)]
    if rel > 0 and _one_level(ends, tried, rel):  # (a bounded metric at rates too large: its level the same
        # whatever the rate, below its start, near it or above it; helper 277's Pull-Diag-GT on skewed digraphs, a
        # nonconvex loss's gradient norm ending at 0.94-0.98x its start at every rate, read "unmoved" (too small)
        # and was searched up to 1e9, 14.6x off; at 0.58-0.61x, some rates "dipped" by chance, and no search ran)
        told = ["large"] * len(tried)
    if lossless and _later_when_smaller([curves.get(lr, ()) for lr in tried], start, [ends[lr] for lr in tried]):
        # (all too large, dips or not; on noisy streams too: helper 151's FROST on a 256-node sparse digraph ran off
        # at every grid rate, each later as it shrank, and was shown diverged at 1e-4 where 5.6e-5 converges. Not
        # where the network draws: over 15% lost messages Push-DIGing's blow-up also came later at smaller rates,
        # down to 1e-10, its lost mass, not its rate)
        told = ["large"] * len(tried)
    shape = _ordered(told) if tried else None
    if shape is None:
        return []
    small = shape[0]
    step = _search_step(grid)
    if small == 0:
        out = [tried[0] / step ** k for k in range(SEARCH_WIDTH, 0, -1)]
    elif small == len(tried):
        out = [tried[-1] * step ** k for k in range(1, SEARCH_WIDTH + 1)]
    else:
        a, b = tried[small - 1], tried[small]  # (halved down to a quarter of the step, in the logarithm: an eighth
        # of a decade on the default grid; helper 160's Push-Pull made no progress at 1.8e-4 and ran off at 3.2e-4,
        # and 2.4e-4 is stable. 1e-4 of slack: rates are kept to six digits)
        out = [math.sqrt(a * b)] if b / a > step ** 0.25 * (1 + 1e-4) else []
    return _untried(out, tried, grid)


#: The least number of rates tried, and the widest spread of their ends in standard errors of one end, that read as
#: one level of a metric at every rate (:func:`_one_level`).
LEVEL_RATES = 5
LEVEL_WIDTH = 6.0


def _one_level(ends, tried, rel):
    """Whether the rates ``tried`` (:data:`LEVEL_RATES` at least, every one ended finite) ended at one level: within
    :data:`LEVEL_WIDTH` standard errors of an end (``rel``: :func:`noise`, relative) of one another, not falling with
    the rate (:func:`_falls_with_the_rate`). The rates too large of a bounded metric end so, whatever the rate;
    rates too small move their iterates, and the ends, less the smaller the rate, and their streams barely part:
    their ends fall with the rate by many standard errors (helper 277: good rates 1-4 decades above the grid,
    every grid rate too small, none read as one level)."""
    if len(tried) < LEVEL_RATES:
        return False
    y = np.asarray([ends[lr] for lr in tried], dtype=np.float64)
    if not np.all(np.isfinite(y)) or not y.mean() > 0:
        return False
    return float(y.max() - y.min()) <= LEVEL_WIDTH * rel * float(y.mean()) and not _falls_with_the_rate(
        ends, tried, rel)


def _unmoved_noise(ends, finals, record):
    """The noise (:func:`noise`) of the ends of the rates that did not grow past :data:`UNMOVED` times their start
    (those :func:`_search` compares), 0 with one replica a rate: a rate that grew to 20x on one stream and 2x on the
    other had made every rate's noise 60x the ones compared, and told nothing apart (helper 278)."""
    if record.get("replicas", 1) <= 1:
        return 0.0
    start = _start(record)
    return noise({lr: 0.0 for lr, end in ends.items() if end <= UNMOVED * start}, finals)


def _ordered(how):
    """``(small, border)`` where the failures ``how`` (ascending rates) read too small, then dipped, then too large:
    ``small`` rates too small, then ``border`` rates that dipped (only where some are too small: a rate just past
    the largest that works dips, then climbs; helper 151's ABm on a 64-node ring made no progress at 1e-5 and ran
    off from 3.2e-5 up, each after a dip, and 1.8e-5 converges; else the first one only); None otherwise."""
    small = how.count("small")
    border = int(how[small:small + 1] == ["dip"])
    if small and border:
        while small + border < len(how) and how[small + border] == "dip":
            border += 1
    if how != ["small"] * small + ["dip"] * border + ["large"] * (len(how) - small - border):
        return None
    return small, border


#: Rates whose tuning curves agree within this, relatively, record by record (NaN/Inf at the same records) did
#: alike (:func:`_alike`).
ALIKE = 0.05


def _alike(curves, lr):
    """The rates of ``curves`` (``{lr: curve}``) whose curve agrees with ``lr``'s record by record within
    :data:`ALIKE` (non-finite at the same records; three finite records at least), ``lr`` among them, ascending.
    Where the network draws, a replica's draws follow its place in its stage, so that rates that ran in other
    places differ by their draws and are left out unless the draws hardly matter (helper 154: under heavy link
    noise the rates of the stages' first place only, 1e-12 .. 1e-4 a decade apart, were found alike): the range
    said is that of the rates compared alike, a lower bound of the rates that did alike."""
    ref = np.asarray(curves.get(lr, ()), dtype=np.float64)
    finite = np.isfinite(ref)
    if len(ref) < 3 or finite.sum() < 3:
        return [lr]
    out = []
    for other, curve in curves.items():
        v = np.asarray(curve, dtype=np.float64)
        if len(v) == len(ref) and np.array_equal(np.isfinite(v), finite) and bool(np.all(
                np.abs(v[finite] - ref[finite]) <= ALIKE * np.maximum(np.abs(v[finite]), np.abs(ref[finite])))):
            out.append(other)
    return sorted(set(out) | {lr})


def _later_when_smaller(curves, start, ends=None):
    """Whether every one of ``curves`` (the rates' in ascending order) blew up (:func:`_blew_up_at`), the smaller
    rates no sooner (by record), the smallest later than the largest: rates too large, each blowing up later as it
    shrinks, whatever progress they made first. Pull-Diag-GT on a 32-node directed ring (its tracker's
    1/[A^k]_ii near 2^k early on) dipped at 1e-4, 3e-3, 1e-2 and 3e-2 before it blew up at records 3, 2, 2 and 2
    (1 at 0.1 and above): no search ran, and 4e-10 ends at 0.039 (helper 139). Read over a network that draws
    nothing only (:func:`_search`'s ``lossless``): over 15% lost messages Push-DIGing's blow-up came later at smaller
    rates too, and a search down to 1e-10 found none stable (its lost mass, not its rate). ``ends``: where each
    ended (:func:`_judged`; default: its last record). False without a positive start (a blow-up is read against
    it, as :func:`_failure` reads the failures)."""
    if len(curves) < 2 or not (math.isfinite(start) and start > 0):
        return False
    first = [_blew_up_at(curve, start, end) for curve, end in zip(curves, ends or [None] * len(curves))]
    if None in first:
        return False
    return all(a >= b for a, b in zip(first, first[1:])) and first[0] > first[-1]


def _blew_up_at(curve, start, end=None):
    """The record where a tuning curve began its last rise past ``start`` where it turned non-finite there or ended
    (``end``: where :func:`_judged` reads it ended, else its last record) more than :data:`UNMOVED` times above its
    start (blew up), else None. A rise that came back below the start is a transient, not a blow-up: helper 275's
    Pull-Diag-GT and FROST on a skewed digraph (kappa 128) rose past their start at the second record at every rate
    (the mixing's transient), the smallest rates by a hair before they went down; every rate was read as too large,
    the search walked down, and no rate between the too small 3.2e-5 and the too large 1e-4 was tried (1.4-2.5x
    off in 7 of 20 cases)."""
    v = np.asarray(curve, dtype=np.float64)
    if not v.size:
        return None
    bad = ~np.isfinite(v)
    with np.errstate(invalid="ignore"):
        above = bad | (v > start)
    if bad.any():
        last = int(np.flatnonzero(bad)[0])
    elif (v[-1] if end is None else end) > UNMOVED * start:
        last = len(v) - 1
    else:
        return None
    while last > 0 and above[last - 1]:
        last -= 1
    return last


#: Batched runs of the search around the rates that lasted longest where every rate tried blew up
#: (:func:`_around_longest_lived`).
LIFETIME_STAGES = 2


def _lifetime(curve):
    """The records a tuning curve lasted before it turned non-finite (NaN: diverged; inf: its iterates ran off), or
    None where it stayed finite (it failed otherwise: no progress, unstable, grew)."""
    v = np.asarray(curve, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(v))
    return int(bad[0]) if bad.size else None


def _around_longest_lived(curves, grid):
    """Where every rate tried (``curves``: ``{lr: its last tuning curve}``) blew up (:func:`_lifetime`), the
    geometric midpoints of each rate that lasted longer than both its neighbours (at the ends: than its one
    neighbour) with those neighbours, untried: a band of rates that works can lie between two that blow up, the
    one that lasts longer nearest to it. Helper 191's NIDS and Exact Diffusion on a torus of 49 with delays of 2
    rounds and link noise blew up at every grid rate, the small ones late (2,288 of 2,500 iterations, whatever the
    rate), 0.1 and 0.316 by 728 and 936, 1 by 1,872, 3.16 by 208: 0.56-0.85 converge (0.143 .. 0.074), and no
    search had run (the failures came after progress at every rate: :func:`_search` reads that as no scale of the
    rate). Neighbours that lasted alike are one stretch, compared with the rates beside its ends. Nothing where a
    rate failed otherwise (no progress, unstable, grew), fewer than three were tried, or the curves differ in
    length (the records are compared by index)."""
    tried = sorted(curves)
    life = [_lifetime(curves[lr]) for lr in tried]
    if len(tried) < 3 or any(t is None for t in life) or len({len(curves[lr]) for lr in tried}) > 1:
        return []  # (curves of another length: records of another schedule, not comparable by index)
    out, i = [], 0
    while i < len(tried):  # (a stretch of rates that lasted alike, one plateau: compared at its ends, helper 194's
        # [5, 7, 18, 18, 2, 1] had found no rate longer-lived than both neighbours)
        j = i
        while j + 1 < len(tried) and life[j + 1] == life[i]:
            j += 1
        beside = [(k, edge) for k, edge in ((i - 1, i), (j + 1, j)) if 0 <= k < len(tried)]
        if beside and all(life[i] > life[k] for k, _ in beside):
            out += [math.sqrt(tried[edge] * tried[k]) for k, edge in beside]
        i = j + 1
    return _untried(out, tried, grid)


def _moved_grid(stable, tried, grid):
    """Where the search found stable rates past the grid (``stable``): the rates of a grid moved there, as many as
    the grid's and a search step apart, from the first stable rate found on into the direction searched (up from
    the smallest where it searched up, down from the largest where it searched down), those not ``tried`` yet. The
    first stable rate found is the edge of the range of rates that work, not its best: a held-out check found a
    method tuned 3.2x worse at 3,000x its data's units than at its own, the best rate 1.5 decades past where the
    refinement could reach, and two methods swapping ranks where a band of unstable rates lay between the first
    stable one and the best. Empty where the grid itself has a stable rate."""
    if not stable or min(grid) <= max(stable) and min(stable) <= max(grid):
        return []
    step = _search_step(grid)
    if min(stable) > max(grid):
        out = [min(stable) * step ** k for k in range(1, len(grid))]
    else:
        out = [max(stable) / step ** k for k in range(1, len(grid))]
    return _untried(out, tried, grid)


def _flat_below(scores, finals, grid, rounding=0.0, ends=None):
    """Where the smallest rate tried does alike with :data:`FLAT_STABLE` of the rates up to :data:`FLAT_DECADES`
    above it (three at least stable), none of the stable ones ending above :data:`FLAT` (or two standard errors of a
    difference, :func:`noise`) times their median, the smallest not above :data:`FLAT` times it (not the slow end
    of a slope, however noisy: helper 157), and the median within that band squared of the best stable score, the
    best above the rounding level ``rounding``: the next :data:`SEARCH_WIDTH` rates below it, a search step apart;
    else empty. A rate does alike where it is stable, or, rejected, where it ended (``ends``) within that band of
    the median: a level that straddles half the start, some rates just below it (stable) and some just above (no
    progress); helper 277's FROST on a skewed digraph, a nonconvex loss's gradient norm at 0.47-0.51x its start at
    every rate from 1e-4 to 10, was shown ok at 0.032, 9.7x above where 2.7e-6 ends, its smallest rate rejected.
    Rates that do alike over decades are all too large where the gradients are bounded: a logistic
    loss whose features are in units a thousand times too large saturates at every rate of the default grid (DSGD
    ended at 118-184 from 1e-4 to 10, its gradient norm at a quarter of its start, and was tuned to 1.0: at 1e-6 it
    ends at 8.8), where methods that diverged there were searched below it. The search goes on while the smallest
    rate does alike; a rate below that ends better becomes the best at the edge, which the refinement then
    extends past (:data:`MAX_EXTENSIONS`)."""
    stable = {lr: sc for lr, sc in scores.items() if math.isfinite(sc)}
    low = min(scores, default=None)
    if not stable or low <= min(grid) / 10.0 ** SEARCH_DECADES * (1 + 1e-6):
        return []
    best = min(stable.values())
    if best <= rounding * (1 + 1e-9) or best <= 0:  # (converged: every rate ties at the rounding level)
        return []
    band = max(FLAT, math.exp(2.0 * math.sqrt(2.0) * noise(stable, finals)))
    top = low * 10.0 ** FLAT_DECADES  # (rates rounded to six digits: within SAME_RATE of it is it)
    near = [lr for lr in scores if lr <= top * (1 + SAME_RATE)]
    level = [stable[lr] for lr in near if lr in stable]
    if max(near) < top * (1 - SAME_RATE) or len(level) < 3:
        return []
    typical = float(np.median(level))
    ended = {lr: stable.get(lr, (ends or {}).get(lr, math.inf)) for lr in near}
    alike = [lr for lr in near if lr in stable or typical / band <= ended[lr] <= band * typical]
    if len(alike) < math.ceil(FLAT_STABLE * len(near)) or low not in alike:
        return []
    if max(level) > band * typical or ended[low] > FLAT * typical or typical > band * band * best:  # (one low
        # draw among them, or elsewhere in the grid, does not stop it: a saturated Pull-Diag-GT's grid ended at
        # 121-126 but for 97.6 at 0.01)
        return []
    step = _search_step(grid)
    return _untried([low / step ** k for k in range(1, SEARCH_WIDTH + 1)], list(scores), grid)


def _search_step(grid):
    """The ratio of the search's neighbouring rates: the grid's, at most half a decade."""
    return min(_grid_step(grid), math.sqrt(10.0))


def _untried(rates, tried, grid):
    """``rates`` to 6 significant digits (as every rate the tuner tries), within the span, not ``tried`` (nor within
    :data:`SAME_RATE` of one), sorted."""
    return _distinct({float(f"{v:.6g}") for v in rates if _within_span(v, grid)}, tried)


def _within_span(lr, grid):
    """Whether a rate lies within :data:`SEARCH_DECADES` of the ends of ``grid`` (what the tuner ever tries)."""
    reach = 10.0 ** SEARCH_DECADES
    return min(grid) / reach * (1 - 1e-6) <= lr <= max(grid) * reach * (1 + 1e-6)


def _start(record):
    """The metric at iteration 0 of the tuning's runs (the same for every candidate), or NaN."""
    for entry in record.get("stages", ()):
        for curve in entry.get("curves", {}).values():
            if len(curve) and math.isfinite(curve[0]):
                return float(curve[0])
    return math.nan


def _fallback_rivals(ended, finals, start):
    """Where no candidate is stable: ``(those worth more streams, the noise that says so)``, the rates
    lowest-ending first (at most :data:`CONFIRM_MAX`):
    none where two streams agree (a pooled noise below :data:`CONFIRM_NOISE` over the candidates that ended below
    ``start``), else the ones that ended below ``start`` (one that ended above it cannot turn out to make
    progress; a held-out problem's EXTRA ended at 1e163) and within two standard errors of the lowest."""
    hopeful = {lr: e for lr, e in ended.items() if not e >= start}  # (a NaN start: every one)
    rel = noise(hopeful, finals)
    if not hopeful or rel < CONFIRM_NOISE:
        return [], rel
    return _within_reach(hopeful, min(hopeful.values()), rel)[:CONFIRM_MAX], rel


def _confirm(stage, rivals, ends, record, grid, set_aside=False, rel=None):
    """The confirmation stages of the candidates ``rivals``: :func:`confirm_repeats` more streams each (for the
    noise ``rel``, else ``record["noise"]``), in runs no wider than the grid's (the comparison's memory was checked
    for that one: five contenders on thirty streams would be seven times as wide), each on streams of its own; a
    candidate that diverged runs no more. With ``set_aside`` (contenders stable on the grid's streams), a draw on
    which every contender, two or more, grew or diverged is set aside, at most :data:`SET_ASIDE_MAX` of them
    (``record["set_aside"]``: its streams and where each ended), and replaced by one of its own. ``stage`` returns
    False for a draw it set aside."""
    total, done, skipped, judged = confirm_repeats(record["noise"] if rel is None else rel), 0, 0, []
    per = max(1, len(grid) * record["replicas"] // len(rivals))
    while done < total:
        alive = [lr for lr in rivals if math.isfinite(ends.get(lr, math.inf))]
        if not alive:
            break
        count, offset = min(per, total - done), record["replicas"] + done + skipped
        kept = stage("confirm", alive, rep_offset=offset, replicas=count, may_set_aside=set_aside)
        if kept is False:  # (a draw on which every contender grew or diverged, set aside: one of its own instead)
            skipped += count
        else:
            done += count
            judged.append((offset, count))
    return judged


def _retest_note(retested):
    """What the log says of :func:`_retested`'s rates (``record["retested"]``) where one of them was chosen, else
    ``""``."""
    if not retested or not retested["stayed"]:
        return ""
    stayed, rates = retested["stayed"], retested["rates"]
    return (" (every contender failed on the confirmation's draws; "
            + (f"{len(stayed)} of the {len(rates)} rates below them stayed" if len(rates) > 1 else
               "the rate below them stayed") + " stable there)")


def _retested(stage, scores, ends, before, rivals, judged, record):
    """Where every contender ``rivals`` ended rejected on the confirmation's draws (``judged``: each stage's
    ``(rep_offset, replicas)``, the draws set aside left out): the stable rates below them (``before``: every
    candidate's score before the confirmation), :data:`CONFIRM_MAX` at most, largest first, run on the same draws
    (as the contenders did: each while it has not diverged, ``ends``) and judged on them with their own streams (a
    smaller step is what survives a draw that undoes larger ones): those that stayed stable there, or none
    (:class:`NoStableRate`, as where no rate lies below them). Those rates had been chosen from untried (helper
    180: robust gradient-push on a bursty lossy, sleepy, delayed ring of 48, whose contenders 0.0075 .. 0.0133 ran
    off on the second confirmation draw: 0.0056, judged on the grid's two streams, was chosen, 3.06x above 0.01
    over the evaluation's repetitions, and ran off on that draw too). Said in ``record["retested"]`` (the rates,
    the streams, those that stayed; :func:`tune`'s log says it)."""
    below = sorted((lr for lr, s in before.items() if math.isfinite(s) and lr < min(rivals)), reverse=True)
    below = below[:CONFIRM_MAX]
    for offset, count in judged if below else ():
        alive = [lr for lr in below if math.isfinite(ends.get(lr, math.inf))]
        if not alive:
            break
        stage("confirm", alive, rep_offset=offset, replicas=count)
    stayed = {lr: scores[lr] for lr in below if math.isfinite(scores[lr])}
    record["retested"] = {"rates": below, "streams": [[a, a + b] for a, b in judged], "stayed": sorted(stayed)}
    return stayed


def _around_retested(stage, scores, ends, arrival, before, rivals, judged, record, grid):
    """The rates of :func:`_retested` (its arguments) that stayed stable, and the rates around the best of them as the first
    refinement runs them around the grid's best (the midpoints with its neighbours among the rates tried, a grid
    step past the edge of what was tried, and halfway to each): run on the grid's streams, then on each judged draw
    of ``judged`` while they have not diverged (``ends``; in runs no wider than the grid's, as :func:`_confirm`'s),
    they are judged on the same streams as the rates retested, and the choice is among all of them
    (``record["retested"]["refined"]``: the rates run). None where none stayed. The rates below the contenders are
    the grid's, where the refinement had gone around the contenders' valley: helper 245's FROST on a directed
    exponential graph of 16 (separable logistic data, mini-batches) had its best, 10 .. 17.8, run off on the
    confirmation's draws and 1.0 on the retest's, and the grid's 0.316 was chosen, 2.27e-5 over 20 repetitions
    where 0.422 ends 1.11e-5 (2.05x) and 0.375 1.51e-5. Now 0.562, its midpoint with 1.0, is chosen (4.7e-6 on
    the nine streams): 1.38e-5 over 100 repetitions, 1.65x below 0.316 (0.487: 7.6e-6); 4 of the 100 end at
    7e-5 .. 4e-4, the others at 2.4e-6 .. 5.1e-6, and 2 of them among the first 20 (2.65e-5 there: 1.17x above)."""
    stayed = _retested(stage, scores, ends, before, rivals, judged, record)
    if not stayed:
        return stayed
    best = _best(stayed, arrival)
    around = [lr for lr in _refinements(best, list(scores), grid) if _within_span(lr, grid)]
    more = _distinct(set(around) | set(_midpoints(best, around, scores)), scores)
    for part in _parts(more, _width(grid, record)):
        stage("refine", part)
    for offset, count in judged if more else ():
        alive = [lr for lr in more if math.isfinite(ends.get(lr, math.inf))]
        for part in _parts(alive, max(1, len(grid) * record.get("replicas", 1) // count)):  # (as a confirmation's)
            stage("confirm", part, rep_offset=offset, replicas=count)
    record["retested"]["refined"] = more
    return {**stayed, **{lr: scores[lr] for lr in more if math.isfinite(scores[lr])}}


def _failed_on(iterations, values, rates, replicas, converged=CONVERGED):
    """``{lr (as text): where it ended}`` for each of ``rates`` whose streams in ``values`` (records x rates *
    ``replicas``) alone grew or diverged (:func:`_judged`): None where it diverged."""
    failed = {}
    for c, lr in enumerate(rates):
        with np.errstate(all="ignore"):
            _, why, end = _judged(iterations, np.asarray(values)[:, c * replicas:(c + 1) * replicas].mean(axis=1),
                                  converged=converged)
        if why and why.startswith(("grew", "diverged", "ran off")):
            failed[f"{lr:g}"] = float(end) if math.isfinite(end) else None
    return failed


def _problem_key(network, objective, budget, metric, seed, grid, replicas):
    """What :data:`_REFINED` files a tuning under: its problem (the objects themselves, held weakly: a comparison's
    methods share them, and another problem is never taken for one that is gone), budget, metric, streams and grid;
    only how fast a tuning runs depends on it, never what it chooses. None where the objects cannot be held so."""
    try:
        held = (weakref.ref(network), weakref.ref(objective))
    except TypeError:
        return None
    return held + (budget, str(getattr(metric, "name", metric)), seed, tuple(grid), replicas)


def _refined_for(key):
    """The rates :data:`_REFINED` holds for the problem ``key`` (:func:`_problem_key`), else none."""
    if key is None:
        return ()
    for (network, objective, *rest), rates in _REFINED:
        if network() is key[0]() is not None and objective() is key[1]() is not None and tuple(rest) == key[2:]:
            return rates
    return ()


def _beside(rates, planned, method, network, objective, backend, replicas, metric):
    """The rates of ``planned`` (the last refinement of the same problem, :data:`_REFINED`) not in ``rates`` that the
    grid's block may run beside its own. Every rate of a block runs on the streams it would run on alone, and its
    replicas' arithmetic is their own (``tests/test_tune_beside.py``: the default comparison's 19 methods, bit for
    bit), except where a replica's position in the block counts: a message layer's draws and a network's draws of
    its links (none run beside then), and a metric of the user's, called with each replica's index (none either);
    none under MPI or on a device, where that is not checked, or where they would add more than
    :data:`BESIDE_BYTES` of iterates; none for a method of per-sample gradients (the SAGA family: its table of every
    sample, m times the iterates, had been left out of that bound, and a tuning that fit alone ran out of memory
    beside, helper 249); none where the replicas may share a loop (:func:`_own_arithmetic`). Checked bit for bit: 4 methods in the tests, every registered method on directed and
    undirected problems of d = 10 and 100 in a sweep (bench/RESULTS.md 89e)."""
    from .._device import is_device_array

    extra = [lr for lr in planned if lr not in rates]
    if not extra or not _batch_gradients(method) or not _own_arithmetic(method, objective) \
            or backend not in ("auto", "cpu") or not isinstance(metric, str) or hasattr(network, "encode") \
            or draws(network) or method.draws:
        return []
    if backend == "auto" and any(is_device_array(v) for v in vars(objective).values()):
        return []
    d, n = getattr(objective, "d", None), getattr(network, "n", None)
    if not isinstance(d, (int, np.integer)) or not isinstance(n, (int, np.integer)) \
            or 16 * 8 * int(n) * int(d) * replicas * len(extra) > BESIDE_BYTES:
        return []
    return extra


#: The package's methods whose replicas share a loop over the block (ADMM's local solve, Newton's for a logistic
#: objective, iterates until every replica of the block has converged: a rate's last bits depend on the rates beside
#: it, 1.4e-16 on an undirected ring of 8): none run beside the grid (:func:`_beside`).
BLOCKWISE = frozenset({"admm"})


def _own_arithmetic(method, objective):
    """Whether every replica of ``method`` on ``objective`` computes what it would alone, whatever the block: a
    method of the package not in :data:`BLOCKWISE`, on an objective of the package (a method, an objective or a
    regularizer of the user's may compute across the block: unchecked, so none run beside)."""
    from ..algorithms import REGISTRY

    cls = REGISTRY.get(getattr(method, "method", None))
    return (cls is not None and cls.__module__.startswith("rowstoch_fast.algorithms.")
            and method.method not in BLOCKWISE and type(objective).__module__ == "rowstoch_fast.objectives")


def _kept_beside(path, fingerprint, rates):
    """The rates a kept run of this stage (its checkpoint or its finished trajectories at ``path``) ran beside
    ``rates``, where one did (an interrupted tuning resumed in another process: the run goes on as it was); else
    None."""
    if not path:
        return None
    ours = json.loads(fingerprint)
    for file, key in ((_stage_path(path), "fingerprint"), (path, "tuning/fingerprint")):
        if not os.path.isfile(file):
            continue
        try:
            with open(file, "rb") as fh, np.load(fh, allow_pickle=False) as data:
                theirs = json.loads(str(data[key]))
        except DAMAGED + (json.JSONDecodeError,):
            continue
        ran = theirs.get("rates", [])
        if (isinstance(ran, list) and len(ran) >= len(rates) and ran[:len(rates)] == ours["rates"]
                and {k: v for k, v in theirs.items() if k != "rates"} == {k: v for k, v in ours.items()
                                                                           if k != "rates"}):
            return ran[len(rates):]  # (none: it ran them alone)
    return None


def _stage_checkpoint(checkpoint_dir, label, k):
    """The checkpoint of stage ``k`` of the tuning of the method ``label`` (None without a folder)."""
    return None if checkpoint_dir is None else os.path.join(checkpoint_dir, f"{label}.tuning-{k}.npz")


def forget_stages(checkpoint_dir, label, record):
    """Remove the finished stages' trajectories that :func:`tune` kept (``keep_stages``) in ``checkpoint_dir`` for
    the method ``label`` (``record``: the tuning's record, or a :class:`NoStableRate`'s)."""
    for k in range(len(record.get("stages", ())) + len(record.get("set_aside", ()))):
        _remove_stage(_stage_checkpoint(checkpoint_dir, label, k))


def _stage_path(path):
    """Where a finished stage's trajectories are kept beside its run's checkpoint ``path``."""
    return path[:-len(".npz")] + ".done.npz"


def _load_stage(path, fingerprint):
    """``(iterations, values)`` of a finished stage of the same candidates (kept by :func:`_save_stage`), else
    None."""
    if not path or not os.path.isfile(_stage_path(path)):
        return None
    try:
        with open(_stage_path(path), "rb") as fh, np.load(fh, allow_pickle=False) as data:
            if str(data["fingerprint"]) != fingerprint:
                return None
            return data["iterations"], data["values"]
    except DAMAGED:  # damaged: the stage runs again
        return None


def _save_stage(path, fingerprint, iterations, values):
    """A finished stage's trajectories, atomically, until the tuning ends: an interruption in a later stage
    goes on from there (the root writes them)."""
    if not path or values is None:
        return
    try:
        atomic_write(_stage_path(path), lambda fh: np.savez(fh, fingerprint=np.array(fingerprint),
                                                            iterations=np.asarray(iterations),
                                                            values=np.asarray(values)), mode="wb")
    except OSError:  # (only the resumption is lost)
        pass


def _remove_stage(path):
    """Remove the kept trajectories of the stage whose checkpoint is ``path``, and those of its streams where it ran
    them one at a time (:func:`_draw_by_draw`)."""
    if path:
        prefix = glob.escape(path[:-len(".npz")])
        for file in [_stage_path(path)] + glob.glob(prefix + ".draw-*.done.npz"):
            try:
                os.remove(file)
            except FileNotFoundError:
                pass


def _best(scores, arrival=None):
    """The rate with the smallest score; among scores equal to rounding (converged rates), the one that got there
    first (``arrival``: the first recorded iteration at that level), then the largest."""
    low = min(scores.values())
    tied = [lr for lr, s in scores.items() if s <= low * (1 + 1e-9)]
    arrival = arrival or {}
    return min(tied, key=lambda lr: (arrival.get(lr, math.inf), -lr))
