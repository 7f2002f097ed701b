"""A comparison's table: one row per method (and setting), its final values, status, diagnosis and rank."""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_names, check_positive_float, check_text
from ..report import (_GROUPS, _check_summary as check_summary, _said as said, check_records, rate_text,
                      single_runs, table_notes, tie_note)
from ..runner import METRICS, check_metric
from ..user_metrics import COUNTS, RESERVED, higher_is_better, unranked
from .tuning import CONVERGED
from .verdict import hint_outcomes, ranks_told

__all__ = ["summary", "format_summary", "frame_metric", "check_frame", "require_frame", "status_of_rows",
           "empirical_rate", "GROUPS"]

#: Columns that tell the comparisons of one frame apart (one table section each): the graph and the setting (the
#: report's, which draws and notes by them too).
GROUPS = _GROUPS


#: A tie is said to be wide (:func:`_wide_ties`) where the method's mean ends this many times above that of a method
#: the tests do not tell better than it.
WIDE_TIE = 10.0


#: The key of a row's repetition numbers beside its metrics' final values (:func:`summary`'s ``finals``).
_REPS = "__rep__"


def _wide_ties(table, section, finals, metric, rank, shared, higher, rounding, told):
    """``[(section, algorithm, ratio, repetitions)]``: the methods of a shared rank whose mean final value is at least
    :data:`WIDE_TIE` times (``ratio``, the largest) that of a method the tests did not tell better than them
    (``told``: ``{row: the rows told better}``, :func:`~.verdict.ranks_told`'s) in their section (a metric that
    falls: none where ``higher``), where the tie is the spread's: two repetitions or more on both sides, those of
    one side at least differing, its mean above the section's rounding level (``rounding``: ``{section: level}``, as
    :func:`~.verdict.ranks` reads it; one repetition ties every method, and means at rounding tie: the footnote says
    both, helper 190). Helper 189: over two repetitions GT-SAGA (8.3e-6 +- 6.3e-6) ranked 1= and ABM (3.5e-9) 14=:
    its repetitions spread too widely for Holm's tests to tell it from any, while deterministic methods told each
    other apart; the footnote's rule says so, the table did not. Helper 202: the default comparison's GT-SAGA,
    Push-SAGA, GT-SVRG and GT-SARAH, 10-13x above 20 methods at 1= in every repetition, ranked 4= (three told better
    of the 20, over 325 pairs at five repetitions) and were not said."""
    import pandas as pd

    if higher or not len(table):
        return []
    wide = []
    for s in dict.fromkeys(section):
        rows = [i for i in range(len(table)) if section.iloc[i] == s and not pd.isna(rank.iloc[i])]
        means = {i: float(np.mean(finals[i][metric])) for i in rows}
        level = (rounding or {}).get(s, 0.0)
        for i in rows:
            own = np.asarray(finals[i][metric], dtype=np.float64)
            if not bool(shared.iloc[i]) or not means[i] > level or not means[i] > 0 or own.size < 2:
                continue
            below = [means[i] / max(means[j], level) for j in rows if j != i and j not in told.get(i, ())
                     and means[j] > 0  # (one at rounding raised to it, as ranks reads it: a method at 1.05x the
                     # level had been said "2.1e10x" above one at f*, a tie of the margin, helper 262)
                     and np.size(finals[j][metric]) >= 2  # (one of a single repetition ties every method: its own)
                     and (np.ptp(own) > 0 or np.ptp(finals[j][metric]) > 0)]  # (either's spread: DGD, the same in
            # every repetition, tied with GT-SVRG 164x lower, whose repetitions spread 15x, was not said, helper 260)
            ratio = max(below, default=0.0)
            if ratio >= WIDE_TIE:
                wide.append((s.replace("|", " / "), str(table["algorithm"].iloc[i]), ratio,
                             int(np.size(finals[i][metric]))))
    return wide


def _paced(records, table, section, finals, metric, rank, higher, rounding):
    """``[(section, algorithm, round, rate, level)]``: the ranked methods of each section where two or more ended at
    its rounding level (``rounding``: ``{section: level}``, as :func:`~.verdict.ranks` reads it; every repetition's
    final value at or below it), which their final values cannot order (they share a rank): the communication
    round of the first record from which every repetition stayed at or below that level (not the first to touch
    it: NIDS at 1.5e-12 at round 143, above 1.9e-12 again at 191, under it for good from 215, helper 229), and
    ``rate`` (:func:`empirical_rate`, the table's column), how fast it got there; ordered by that round, then by the
    worst repetition's record just before it (the lower the nearer), then the rate. A method whose every record is
    at the level (a start already at rounding) got nowhere and is left out (it had read "by round 0"). None for a
    metric that rises (``higher``). ``rowstoch compare --objective least-squares --rounds-budget 300`` on an
    undirected ring of 8: EXTRA, DIGing and Push-Pull all end at rounding, tied 1=, EXTRA there by round 72 and
    DIGing by 156, which the table had not said. ``records``: each row's records (its group of the frame)."""
    if higher or not len(table):
        return []
    paced = []
    for s in dict.fromkeys(section):
        level = max((rounding or {}).get(s, 0.0), 1e-300)
        rows = [i for i in range(len(table)) if section.iloc[i] == s and not _missing(rank.iloc[i])
                and bool((np.asarray(finals[i][metric], dtype=np.float64) <= level).all())]
        if len(rows) < 2:
            continue
        said = []
        for i in rows:
            with np.errstate(invalid="ignore"):
                worst = records[i].groupby("communication_rounds", sort=True)[metric].max()
            values = worst.to_numpy(dtype=np.float64)
            above = np.flatnonzero(~(values <= level))  # (NaN in every repetition: not at the level)
            if not above.size or above[-1] + 1 >= values.size:  # (never above it, or not below it at the end)
                continue
            said.append((s.replace("|", " / "), str(table["algorithm"].iloc[i]), int(worst.index[above[-1] + 1]),
                         float(table["rate"].iloc[i]), level, float(values[above[-1]])))
        if len(said) >= 2:
            said.sort(key=lambda p: (p[2], p[5] if math.isfinite(p[5]) else math.inf,
                                     p[3] if math.isfinite(p[3]) else math.inf))
            paced.extend(p[:5] for p in said)
    return paced


def require_frame(frame, name, what="the records compare() returns"):
    """``frame`` as a pandas DataFrame, or a TypeError naming ``name`` (it had been an AttributeError on
    ``.columns`` or ``.attrs``)."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame ({what}), got {type(frame).__name__}")
    return frame


def frame_metric(frame):
    """The default metric of a comparison's frame: the one it was tuned on (``frame.attrs["metric"]``), or for a
    frame read back from CSV ``suboptimality`` where it was recorded, else ``grad_norm_mean``."""
    require_frame(frame, "frame")
    metric = getattr(frame, "attrs", {}).get("metric")
    if metric:
        return metric
    cols = getattr(frame, "columns", ())
    if "suboptimality" in cols and frame["suboptimality"].dtype.kind in "biuf" and \
            np.isfinite(frame["suboptimality"].to_numpy(dtype=np.float64)).any():
        return "suboptimality"
    return "grad_norm_mean" if "grad_norm_mean" in cols else "grad_norm"


def check_frame(frame, metrics):
    """``frame`` is what :func:`~rowstoch_fast.compare.compare` returns (a History's frame has no ``algorithm``
    column) and ``metrics`` among its metrics (:data:`~rowstoch_fast.runner.METRICS`, or an extra metric's column
    of the frame)."""
    cols = getattr(frame, "columns", ())
    extra = tuple(c for c in cols if isinstance(c, str) and c not in RESERVED and c not in METRICS
                  and not c.endswith(("_std", "_best")) and frame[c].dtype.kind == "f")
    for metric in metrics:
        check_metric(metric, choices=METRICS + extra)
    needed = ("algorithm", "lr", "rounds_per_iteration", "iteration", "communication_rounds", *metrics)
    missing = [c for c in needed if c not in getattr(frame, "columns", ())]
    if missing:
        raise ValueError(f"frame must be the table compare() returns; it has no column {', '.join(missing)}")
    if not len(frame):  # (its summary, a table of no columns, was refused by format_summary as "not a summary")
        raise ValueError("frame holds no records: there is nothing to summarize")
    check_records(frame, "frame", metrics)  # (text in a metric's column too: "could not convert string to float")


def status_of_rows(runs):
    """The status of one method's records (``done``, from older versions, is ``ok``)."""
    if "status" in runs.columns:
        status = str(runs["status"].iloc[0])
        return "ok" if status == "done" else status
    return "diverged" if bool(runs["diverged"].iloc[0]) else "ok"


def empirical_rate(runs, metric, x="communication_rounds", converged=CONVERGED):
    """The empirical linear rate of ``metric`` over the second half of a method's records before it reached rounding:
    ``10^slope``, the slope of the least-squares line through ``log10`` of its mean over the repetitions against
    ``x`` (a contraction factor per communication round: 0.9 means 10% less each round; 1.0 a plateau, above 1
    growth). The records from the first mean at or below ``converged`` (:data:`CONVERGED`, 1e-12, the tuner's; a
    float32 problem's: :func:`~rowstoch_fast.compare.tuning.converged_for`) times the first are left out (a
    method that reached rounding at round 50 of 200 is fitted on rounds 25 .. 50, not on its floor; where the second
    half holds one record, on the last two before rounding). NaN where there are fewer than two records or a mean
    that is not positive and finite (a metric that does not fall to 0, a run that diverged).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> r = np.arange(0, 101, 10)
    >>> runs = pd.DataFrame({"communication_rounds": r, "grad_norm": 0.9 ** r})
    >>> round(empirical_rate(runs, "grad_norm"), 12)
    0.9
    """
    require_frame(runs, "runs", "one method's records")
    check_text(metric, "metric")
    check_text(x, "x")
    converged = check_positive_float(converged, "converged", allow_zero=True)
    missing = [c for c in (x, metric) if c not in runs.columns]
    if missing:
        raise ValueError(f"empirical_rate: the records have no column {missing[0]!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        mean = runs.groupby(x, sort=True)[metric].mean()
    xs, ys = mean.index.to_numpy(dtype=np.float64), mean.to_numpy(dtype=np.float64)
    if xs.size and np.isfinite(ys[0]) and ys[0] > 0:  # (up to the first record at rounding, not the floor)
        floor = np.flatnonzero(ys <= converged * ys[0])
        if floor.size:
            xs, ys = xs[:floor[0]], ys[:floor[0]]
    half = xs >= xs.max() / 2 if xs.size else xs.astype(bool)
    if half.sum() < 2 <= xs.size:  # (a method at rounding by its third record: its last two before it; the second
        # half had left one record and no rate, where the rounding note most needs one, helper 229)
        half = np.arange(xs.size) >= xs.size - 2
    xs, ys = xs[half], ys[half]
    if xs.size < 2 or np.ptp(xs) == 0 or not (np.isfinite(ys).all() and (ys > 0).all()):
        return float("nan")
    slope = np.polyfit(xs, np.log10(ys), 1)[0]
    return float(10.0 ** slope)


def summary(frame, metric=None, metrics=(), *, cache=None):
    """One row per algorithm (per graph and setting where the frame holds several): the final ``metric`` (mean and
    spread over repetitions), its rank, its status and what it cost.

    Parameters
    ----------
    frame : pandas.DataFrame
        What :func:`~rowstoch_fast.compare.compare` returns.
    metric : str, optional
        The ranked metric (default :func:`frame_metric`: the comparison's own,
        ``suboptimality`` where ``f*`` is known).
    metrics : sequence of str
        More metrics to report beside it (columns ``<metric>`` and ``<metric>_std``).
    cache : dict, optional
        Kept by the caller between calls on frames that grow (``rowstoch compare``'s tables, rewritten as each
        method finishes, whose finished methods' records do not change): each method's row is computed once for
        its records, keyed by their count and a hash of the columns the row reads most (iteration, rep, lr,
        status, diagnosis and the metrics shown), and only the ranks again; the same table as without it.

    Returns
    -------
    pandas.DataFrame
        Columns ``algorithm``, ``lr``, ``lr_source``, ``rounds_per_iteration``,
        ``iterations``, ``communication_rounds``, ``final`` and ``final_std``
        (``metric``), ``<m>`` and ``<m>_std`` for ``metric`` and each of
        ``metrics``, ``messages``, ``bytes``, ``gradient_evaluations``,
        ``wall_seconds``, ``rate`` (:func:`empirical_rate` of ``metric``), ``diverged``, ``status`` (``ok``, ``diverged``,
        ``no-progress``, ``unstable`` or ``interrupted``), ``diagnosis`` (one line
        for a run that is not ``ok``), ``rank`` (only for ``ok`` runs: 1 + the
        number of runs distinguishably better, so runs that the repetitions cannot
        tell apart share it), ``rank_shared`` and ``<m>_best`` (rank 1 under
        ``m``: the largest first for a metric where higher is better, e.g.
        ``test_accuracy``); a ``graph`` / ``setting`` column first where the frame
        has one, the ranks within each. ``table.attrs["metric"]`` names ``metric``.
    """
    import pandas as pd

    metric = check_text(metric, "metric", allow_none=True) or frame_metric(frame)
    shown = list(dict.fromkeys([metric, *check_names(metrics, "metrics", allow_none=True)]))
    check_frame(frame, shown)
    if cache is not None and not isinstance(cache, dict):  # ("argument of type 'int' is not iterable", helper 193)
        raise TypeError(f"cache must be a dict (kept between calls) or None, got {type(cache).__name__}")
    groups = [g for g in GROUPS if g in frame.columns]
    at_rounding = getattr(frame, "attrs", {}).get("converged", CONVERGED)  # (compare's: a float32 problem's, f*'s)

    def converged(m):
        return at_rounding.get(m, at_rounding.get("", CONVERGED)) if isinstance(at_rounding, dict) else at_rounding

    rows, finals, records = [], [], []
    by = [*groups, "algorithm"]
    for key, runs in frame.groupby(by if len(by) > 1 else by[0], sort=False):  # (pandas 1.5 warns on a list of one)
        key = key if isinstance(key, tuple) else (key,)
        records.append(runs)  # (each row's records: _paced reads them)
        if cache is not None:  # (a method's row for its records as they are: the hash of the columns its row reads
            # most, not the object; every column's hash cost as much as the row)
            read = [c for c in ("iteration", "rep", "lr", "status", "diagnosis", *shown) if c in runs.columns]
            try:
                held = (key, metric, tuple(shown), repr(at_rounding), len(runs),
                        int(pd.util.hash_pandas_object(runs[read], index=False).sum()))
            except (TypeError, ValueError):  # (a cell that does not hash, a list: that row computed, not kept)
                held = None
            if held in cache:
                row, final = cache[held]
                rows.append(dict(row))
                finals.append(final)
                continue
        status = status_of_rows(runs)
        reached = runs["iteration"].max()
        if status == "interrupted" and "rep" in runs.columns:  # (where the interrupted repetition stopped, not the
            # budget that the repetitions before it ran: its rounds, messages and bytes so far; the last one, which
            # was running: an earlier one that diverged alone on its network draw stopped before it)
            reached = runs.loc[runs["rep"] == runs["rep"].max(), "iteration"].max()
        end = runs[runs["iteration"] == reached]
        last = runs.sort_values("iteration", kind="stable").groupby("rep", sort=False).tail(1) \
            if "rep" in runs.columns else end  # (each repetition's last record: one that diverged alone, run on a
        # network drawn for it, stopped before the others, and is in the mean with its last finite values)
        row = dict(zip(groups, key[:-1]))
        row.update({"algorithm": key[-1], "lr": float(runs["lr"].iloc[0]),
                    "lr_source": str(runs["lr_source"].iloc[0]) if "lr_source" in runs.columns else "",
                    "rounds_per_iteration": int(runs["rounds_per_iteration"].iloc[0]),
                    "iterations": int(end["iteration"].iloc[0]),
                    "communication_rounds": int(end["communication_rounds"].iloc[0])})
        with np.errstate(invalid="ignore", over="ignore"):  # a diverged run's records hold inf
            for m in shown:
                row[m], row[m + "_std"] = float(last[m].mean()), _spread(last[m]) if len(last) > 1 \
                    else math.nan  # (one repetition shows no spread: not "+- 0")
        row["final"], row["final_std"] = row[metric], row[metric + "_std"]
        row["rate"] = empirical_rate(runs, metric, converged=converged(metric))
        row.update({c: _mean_count(end, c) for c in ("messages", "bytes", "gradient_evaluations")})
        row.update({"wall_seconds": float(runs["total_wall_seconds"].iloc[0]) if "total_wall_seconds" in runs.columns
                    else float("nan"),
                    "diverged": status == "diverged", "status": status,
                    "diagnosis": (str(runs["diagnosis"].astype(object).fillna("").iloc[0])
                                  if "diagnosis" in runs.columns else "")})
        rows.append(row)
        finals.append({m: last[m].to_numpy(dtype=np.float64) for m in shown})
        finals[-1][_REPS] = last["rep"].to_numpy() if "rep" in last.columns else None  # (pairs them in ranks)
        if cache is not None and held is not None:
            cache[held] = (dict(row), finals[-1])
    table = pd.DataFrame(rows)
    sections = table.groupby(groups if len(groups) > 1 else groups[0], sort=False) if groups and len(table) else \
        [((), table)]
    for _, part in sections:  # (a hint beside what became of the methods it suggests, in the same section)
        if not len(part):
            continue
        outcomes = dict(zip(part["algorithm"], part["status"]))
        for i in part.index[(part["status"] != "ok") & (part["diagnosis"] != "")]:
            table.at[i, "diagnosis"] = hint_outcomes(table.at[i, "diagnosis"], outcomes, table.at[i, "algorithm"])
    scales = {m: {} for m in shown}  # per section: the largest start of its ok runs
    unmoved = []  # the sections whose ok runs' records of the ranked metric all equal one value (a start optimal)
    for key, runs in frame.groupby(groups if len(groups) > 1 else groups[0], sort=False) if groups else [((), frame)]:
        key = "|".join(map(str, key if isinstance(key, tuple) else (key,))) if groups else ""
        good = runs[runs["status"].isin(["ok", "done"])] if "status" in runs.columns else runs
        ranked = good[metric].to_numpy(dtype=np.float64)
        if ranked.size and good["algorithm"].nunique() > 1 and (good["iteration"] > 0).any() \
                and np.isfinite(ranked[0]) and (ranked == ranked[0]).all():
            unmoved.append((key.replace("|", " / "), float(ranked[0])))
        runs_of = ["algorithm", "rep"] if "rep" in good.columns else ["algorithm"]
        starts = good[good["iteration"] == good.groupby(runs_of, sort=False)["iteration"].transform("min")] \
            if len(good) else good
        for m in shown:  # (the runs' starts, the tuner's scale: the largest record had been one run's spike, 4.2e9,
            # whose 1e-12 tied two methods 1.46e-3 apart, helper 184; where every start is at rounding of the runs'
            # typical records, the largest run's median record: nodes that start at one point have a consensus
            # error of 0, or 1.8e-17, which had told 2.2e-16 from 1.2e-15 after it rose to 0.2, helper 219)
            v = starts[m].to_numpy(dtype=np.float64)
            v = np.abs(v[np.isfinite(v)])
            with np.errstate(invalid="ignore"):
                typical = good[m].abs().replace(np.inf, np.nan).groupby([good[c] for c in runs_of], sort=False) \
                    .median().to_numpy(dtype=np.float64) if len(good) else np.empty(0)
            typical = typical[np.isfinite(typical)]
            if typical.size and (not v.size or not v.max() > converged(m) * typical.max()):
                v = typical
            if not v.size or not v.max() > 0:
                v = good[m].to_numpy(dtype=np.float64)
                v = np.abs(v[np.isfinite(v)])
            scales[m][key] = float(v.max()) if v.size else None
    wide, paced = [], []  # (the shared ranks of methods far above one they rank with: report.wide_ties; the methods
    # that ended at rounding, and when: report.rounding_pace)
    if len(table):
        ok = (table["status"] == "ok").to_numpy()
        section = table[groups].astype(str).agg("|".join, axis=1) if groups else pd.Series([""] * len(table))
        for m in shown:
            rank = pd.Series(pd.NA, index=table.index, dtype="Int64")
            shared, undecided = pd.Series(False, index=table.index), set()
            told = {}  # (the rows told better than each: the wide ties' note)
            for s in dict.fromkeys(section) if not unranked(m) else ():  # (a count ranks nothing: none is best)
                idx = [i for i in range(len(table)) if section.iloc[i] == s and ok[i]
                       and np.isfinite(finals[i][m]).all()]
                higher = higher_is_better(m, getattr(frame, "attrs", {}).get("extra_metrics"))
                placed, better = ranks_told({i: finals[i][m] for i in idx}, scales[m].get(s), higher, converged(m),
                                            reps={i: finals[i].get(_REPS) for i in idx},
                                            margin=None if m == metric else SHOWN_MARGIN)  # (the tuned
                # metric's resolution; an accuracy of 0.95 against 0.87 had tied under it, helper 208)
                told.update(better)
                for i, (r, tie) in placed.items():
                    rank.iloc[i], shared.iloc[i] = r, tie
                if len(idx) > 1:  # a run of one repetition beside others is no best (it ties every method), and
                    # one run each: none is (every one was bolded; a method ranked 3= over ten repetitions, left
                    # with one beside them, had been bold, helper 260)
                    undecided.update(i for i in idx if np.size(finals[i][m]) < 2)
            table[m + "_best"] = (rank == 1).fillna(False).astype(bool) & ~table.index.isin(sorted(undecided))
            if m == metric:
                table["rank"], table["rank_shared"] = rank, shared
                higher = higher_is_better(m, getattr(frame, "attrs", {}).get("extra_metrics"))
                levels = {s: converged(m) * (scales[m].get(s) or 0.0) for s in dict.fromkeys(section)}
                wide = _wide_ties(table, section, finals, m, rank, shared, higher, levels, told)
                paced = _paced(records, table, section, finals, m, rank, higher, levels)
    table.attrs["wide_ties"] = wide  # (report.wide_ties' note)
    table.attrs["paced"] = paced  # (report.rounding_pace's note)
    table.attrs["metric"] = metric
    table.attrs["unmoved"] = unmoved  # (report.unmoved_start's note)
    counts = [np.size(f[metric]) for f in finals]
    table.attrs["repeats"] = (min(counts, default=0), max(counts, default=0))  # (to_latex's default caption)
    sizes = [v for v in scales.get("suboptimality", {}).values() if v]
    table.attrs["rounding"] = converged("suboptimality") * max(sizes) if sizes else 0.0  # (the footnote's)
    return table


def _mean_count(end, column):
    """The mean over the repetitions' records ``end`` (each one's at the iteration the row reports) of the count
    ``column`` (0 where the records have none), rounded: repetitions that drew other clients, links or coins count
    other messages, bytes and gradients, and the table had given repetition 0's (helper 273)."""
    if column not in end.columns or not len(end):
        return 0
    v = float(end[column].astype("float64").mean())
    return int(round(v)) if math.isfinite(v) else 0


def _ranked_said(table, metric):
    """The name of the metric a summary ``table`` ranks (its ``final`` column), ``metric`` where given: refused
    where the table ranks another (its ``attrs``, or its column of that name not the final values) or has no such
    column. Helper 193: ``format_summary(table, metric="consensus_error")`` headed the suboptimality "consensus_error
    (final)", and ``metric="bogus"`` printed a "bogus (final)" column."""
    import pandas as pd

    ranked = table.attrs.get("metric")
    if metric is None or metric == ranked:
        return ranked or "final"
    if ranked is not None or metric not in table.columns or not np.allclose(
            pd.to_numeric(table[metric], errors="coerce"), table["final"], rtol=1e-12, atol=0.0, equal_nan=True):
        raise ValueError(f"metric: the table ranks {ranked or 'another metric'} (its final column), not {metric!r}; "
                         f"summary(frame, metric={metric!r}) ranks that one")
    return metric


def format_summary(table, metric=None):
    """The summary as an aligned text table (what ``rowstoch compare`` prints): a shared rank is written ``1=``,
    and every run that is not ``ok`` (or is, at the next stable rate of its tuning, or near the no-progress bar) gets
    its diagnosis on a line below the table."""
    check_summary(table)
    metric = _ranked_said(table, check_text(metric, "metric", allow_none=True))
    groups = [g for g in GROUPS if g in table.columns]
    width = max([9, *(len(s) + 2 for s in table["lr_source"] if s)]) if len(table) else 9  # a long source fits
    gw = {g: max([len(g), *(len(str(v)) for v in table[g])]) for g in groups}
    extra = [c[:-len("_std")] for c in table.columns  # (the metrics :func:`summary` reports beside the ranked one)
             if c.endswith("_std") and c not in ("final_std", f"{metric}_std") and c[:-len("_std")] in table.columns]
    ew = {m: max(len(m), 10) for m in extra}
    lw = max([8, *(len(rate_text(v)) for v in table["lr"])])  # (the rates to six digits, a refined one's own)
    head = ("".join(f"{g:<{gw[g]}}  " for g in groups)
            + f"{'algorithm':<22} {'rank':>4} {'lr':>{lw}} {'(source)':<{width}} {'R':>3} {'rounds':>7} "
            f"{metric + ' (final)':>24} " + "".join(f"{m:>{ew[m]}} " for m in extra)
            + f"{'messages':>10} {'bytes':>10} {'grad evals':>11} {'wall s':>7}  status")
    lines = [head, "-" * len(head)]
    for r in table.itertuples():
        final = f"{r.final:.3e}"
        if math.isfinite(r.final_std):
            final += f" +- {r.final_std:.1e}"
        elif r.final_std == math.inf:  # (repetitions whose spread overflowed: it was shown as "(1 run)")
            final += " +- inf"
        elif math.isfinite(r.final):  # (several finite repetitions always have a spread: this is a single run)
            final += " (1 run)"
        rank = "-" if _missing(r.rank) else f"{int(r.rank)}{'=' if getattr(r, 'rank_shared', False) else ''}"
        source = f"({r.lr_source})" if r.lr_source else ""
        beside = "".join(f"{_beside(table.at[r.Index, m], m):>{ew[m]}} " for m in extra)
        lines.append("".join(f"{str(getattr(r, g)):<{gw[g]}}  " for g in groups)
                     + f"{r.algorithm:<22} {rank:>4} {rate_text(r.lr):>{lw}} {source:<{width}} "
                     f"{r.rounds_per_iteration:>3} {r.communication_rounds:>7} {final:>24} {beside}{_si(r.messages):>10} "
                     f"{_si(r.bytes):>10} {_si(r.gradient_evaluations):>11} {r.wall_seconds:>7.1f}  {r.status}")
    if "rank_shared" in table.columns and table["rank_shared"].any():
        lines.append(f"{'=':>{len(head.split('rank')[0]) + 4}} "
                     + tie_note(single_runs(table), "--repeats 2 or more"))
    for note in (_packed_note(table), *table_notes(table, [metric, *extra], metric=metric)):  # (the notes of
        # summary.md too: helper 210 found two missing here)
        if note:
            lines.append("  " + note)
    notes = [r for r in table.itertuples() if said(getattr(r, "diagnosis", ""))]  # (an ok run at the next stable
    # rate too)
    for r in notes:
        where = "".join(f"{getattr(r, g)} " for g in groups)
        lines.append(f"  {where}{r.algorithm}: {r.status}: {r.diagnosis}")
    return "\n".join(lines)


#: The least ratio of two methods' final values that the ranks (and bold cells) of the metrics shown beside the
#: ranked one tell apart: what the tables' three significant digits show (a test mean squared error of 6.62 told
#: apart from 6.63, 0.13% and consistent, had lost its bold to 6.95 +- 0.14, helper 210). The ranked metric's is
#: :data:`~rowstoch_fast.report.TIE_MARGIN`, a tuned rate's resolution.
SHOWN_MARGIN = 1.01


def _spread(values):
    """The sample standard deviation of a metric's final values; exactly 0 where they are one value (pandas' two
    passes had given 5.1e-25 of three equal values, and the note of repetitions that ended equal went unsaid,
    helper 210)."""
    v = values.to_numpy(dtype=np.float64)
    if np.isfinite(v).all() and v.min() == v.max():
        return 0.0
    kept = v[~np.isnan(v)]  # (pandas' rule: NaN left out)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        sd = float(values.std(ddof=1))
        scale = float(np.abs(kept).max()) if kept.size else 0.0
        if kept.size < 2 or not np.isfinite(kept).all() or 1e-150 < scale < 1e150:
            return sd
        return float(np.std(kept / scale, ddof=1) * scale)  # (in units of the largest: the squares of values past
    # 1e154 had overflowed, "6.8e+247 +- inf", helper 273; those of values below 1e-154 underflowed to "+- 0", 276)


def _packed_note(table):
    """A line under the table where its methods' messages carry different numbers of bytes (FROST sends x and y
    together: half Pull-Diag-GT's messages, the same bytes), else ``""``: the messages column counts exchanges."""
    per = {}
    for r in table.itertuples():
        if r.messages and r.bytes and math.isfinite(r.messages) and math.isfinite(r.bytes):
            per.setdefault(r.algorithm, r.bytes / r.messages)
    if len(per) < 2:
        return ""
    least = min(per, key=per.get)
    more = [f"{a} {v / per[least]:.3g}x" for a, v in per.items() if v >= 1.5 * per[least]]
    if not more:
        return ""
    return (f"messages count one per link and exchange, whatever each carries; per message, {', '.join(more)} the "
            f"bytes of {least} (blocks sent in the same exchange are packed into one message; compressed ones are "
            "smaller): the bytes column compares what the network carried.")


def _beside(v, metric):
    """A metric printed beside the ranked one: its final mean (a count as the others are)."""
    if _missing(v):
        return "-"
    return _si(float(v)) if metric in COUNTS else f"{float(v):.3e}"


def _missing(v):
    return v is None or v is np.nan or str(v) == "<NA>" or (isinstance(v, float) and np.isnan(v))


def _si(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f}{unit}"
    return f"{v:.0f}"

