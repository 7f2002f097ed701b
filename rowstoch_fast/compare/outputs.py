"""What ``rowstoch compare`` writes: every record, the tables, the rates and the figures, each file replaced
atomically (a reader, or a run killed mid-write, sees the old file or the new one, never half of one)."""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import re

import numpy as np

from .._checks import check_text
from .._files import atomic_write, check_path
from .._files import process_alive as _alive  # (patched in a test)
from ..report import FORMATS, section_title as _title, sections
from .tables import GROUPS, check_frame, frame_metric, summary

__all__ = ["write_outputs", "write_tables", "json_tuning", "plot", "atomic_write", "write_records",
           "ComparisonFolder", "FolderInUse", "FolderLock", "OUTPUTS"]

#: What a comparison writes into its folder (``compare.png`` etc. in every format, ``tuning*.png`` and the
#: ``checkpoints`` folder besides): what ``overwrite`` clears.
OUTPUTS = ("compare.csv", "summary.csv", "summary.md", "summary.tex", "lr.json", "experiment.json")
#: The lock file of a folder a comparison is writing to.
LOCK = ".rowstoch-compare.lock"


class FolderInUse(ValueError):
    """The output folder holds another comparison's results, or another comparison is writing to it."""


class FolderLock:
    """A folder (made if missing) held by one comparison while it runs: a second one on the same folder is
    refused (:class:`FolderInUse`, naming ``option``), and the lock of a process that no longer runs is taken
    over. Use it as a context manager (the lock is released on exit, whatever ends the comparison)."""

    def __init__(self, path, *, option="--out", clean=True, holder="comparison"):
        import socket

        self.holder = holder  # (what holds such a folder, in the refusal's words: a comparison, a run)
        self.path = os.path.abspath(os.fspath(path))
        self.lock = os.path.join(self.path, LOCK)
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise FolderInUse(f"{option} {self.path!r} exists and is not a folder")
        self._held = False
        self._take_lock(socket.gethostname(), option)
        if clean:
            try:
                self.remove_stale_temporaries()
            except BaseException:  # (a Ctrl-C here had left the folder locked by this process for its session)
                self.release()
                raise

    def _ours(self, relative):
        """Whether ``relative`` (a path in the folder) names a file a comparison writes there: a checkpoint."""
        return os.sep not in relative and relative.endswith(".npz")

    def _stale(self, name):
        """Whether the top-level ``name`` is a killed comparison's temporary file (:meth:`remove_stale_temporaries`
        removes it)."""
        stem, dot, pid = name.rpartition(".tmp-")
        return bool(dot and stem and pid.isdigit() and self._ours(stem) and not _alive(int(pid))
                    and os.path.isfile(os.path.join(self.path, name)))

    def remove_stale_temporaries(self):
        """Remove the temporary files of an atomic write (``NAME.tmp-PID``) that a killed comparison left: those
        of files it writes (:meth:`_ours`) whose process no longer runs (this one holds the lock)."""
        for root, _, names in os.walk(self.path):
            for name in names:
                stem, dot, pid = name.rpartition(".tmp-")
                relative = os.path.relpath(os.path.join(root, stem), self.path)
                if dot and stem and pid.isdigit() and self._ours(relative) and not _alive(int(pid)):
                    try:
                        os.remove(os.path.join(root, name))
                    except OSError:
                        pass

    def _take_lock(self, host, option):
        """Hold the folder's lock file: an OS lock on it (``flock``: released by the OS however the process ends,
        and exclusive whatever two processes do at once) where the platform has one, and the holder's ``pid
        host`` in it. On this host the OS lock decides: a lock file it finds free is taken over, whatever process
        its pid now names (a killed comparison's, reused); another host's is respected (its file system may not
        carry the OS lock), the refusal naming the file to remove. Without ``flock``, a live holder is respected."""
        os.makedirs(self.path, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no flock (Windows): the file alone
            fcntl = None
        for _ in range(8):  # (retried when the file was replaced while it was being locked)
            fd = None
            try:  # (whatever raises before the lock is held, a Ctrl-C included, closes fd: it had stayed open and
                # locked, and this process refused itself the folder for the rest of its session)
                if fcntl is None:  # pragma: no cover
                    fd = self._create_lock(host, option)
                    if fd is None:
                        continue
                else:
                    fd = os.open(self.lock, os.O_CREAT | os.O_RDWR, 0o644)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:  # held: a comparison (or a run) is writing the folder
                        pid, owner, kind = self._holder()
                        self._refuse(pid, owner or host, host, option, kind=kind)
                    try:
                        same = os.fstat(fd).st_ino == os.stat(self.lock).st_ino
                    except FileNotFoundError:
                        same = False
                    if not same:  # (its holder released it, removing the file, as this process opened it)
                        os.close(fd)
                        continue
                    pid, owner, kind = self._holder()
                    if pid is not None and pid != os.getpid() and owner != host:  # (another host's, whose lock this
                        # one's file system may not carry: respected. On this host the OS lock just taken says no
                        # comparison holds the folder, whatever process its pid now names: a killed comparison's
                        # pid, reused, had refused the folder for as long as that process lived: helper 168)
                        self._refuse(pid, owner, host, option, unlocked=True, kind=kind)
                    os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {host} {self.holder}".encode())
                os.fsync(fd)
                self._fd, self._held = fd, True
                return
            except BaseException:
                if fd is not None and not self._held:
                    os.close(fd)
                raise
        raise FolderInUse(f"{option} {self.path!r}: could not take its lock {self.lock!r}")

    def _holder(self):
        """``(pid, host, what)`` written in the lock file (``what``: a comparison or a run; a comparison's before
        it was written), ``(None, "", "comparison")`` where it names none."""
        try:
            with open(self.lock) as fh:
                pid, owner, *what = fh.read().split()
            return int(pid), owner, what[0] if what else "comparison"
        except (OSError, ValueError):
            return None, "", "comparison"

    def _refuse(self, pid, owner, host, option, unlocked=False, kind="comparison"):
        who = "" if pid is None else f" (process {pid}{'' if owner == host else ' on ' + owner})"
        stale = (f"; if none runs there, remove its lock file {self.lock!r}" if unlocked else "")
        raise FolderInUse(f"{option} {self.path!r} is being written by {'another' if kind == self.holder else 'a'} "
                          f"{kind}{who}; wait for it, or choose another folder{stale}") from None

    def _create_lock(self, host, option):  # pragma: no cover - platforms without flock
        """The lock file made exclusively (its fd), the dead holder's removed (None: try again)."""
        try:
            return os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid, owner, kind = self._holder()
            if pid is not None and (owner != host or _alive(pid)):
                self._refuse(pid, owner, host, option, unlocked=True, kind=kind)
            try:
                os.remove(self.lock)
            except FileNotFoundError:
                pass
            return None

    def release(self):
        """Give the folder back (the lock file removed while it is still held, then the OS lock released)."""
        if self._held:
            try:
                os.remove(self.lock)
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._held = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class ComparisonFolder(FolderLock):
    """The output folder of a comparison: refused when it already holds results (unless the comparison resumes
    them, ``resume``, or replaces them, ``overwrite``), locked while the comparison runs (:class:`FolderLock`),
    and written as each method finishes, every file atomically.
    """

    def __init__(self, path, *, resume=False, overwrite=False, option="--out"):
        super().__init__(path, option=option, clean=False)
        try:
            found = [name for name in sorted(os.listdir(self.path)) if name != LOCK]
            if found and not (resume or overwrite) and all(map(self._stale, found)):  # (a killed comparison's
                # temporaries alone: the folder is empty to this one; they had made it "not empty, continue with
                # --resume", which then found no experiment.json)
                self.remove_stale_temporaries()
                found = [name for name in sorted(os.listdir(self.path)) if name != LOCK]
            if found and not (resume or overwrite):
                held = f"it holds {', '.join(found[:4])}{', ...' if len(found) > 4 else ''}"
                if "experiment.json" in found:
                    raise FolderInUse(f"{option} {self.path!r} is not empty ({held}): continue that comparison with "
                                      "--resume, replace its results with --overwrite, or choose another folder")
                raise FolderInUse(f"{option} {self.path!r} is not empty ({held}) and holds no comparison (no "
                                  "experiment.json): choose an empty or new folder, or --overwrite to write the "
                                  "comparison beside what it holds (only a comparison's own files are replaced)")
            if overwrite and not resume:
                self._clear()
            self.remove_stale_temporaries()
        except BaseException:
            self.release()
            raise

    def _ours(self, relative):
        """The tables, settings and figures at the top, the methods' checkpoints below ``checkpoints/``."""
        top, _, rest = relative.partition(os.sep)
        if rest:  # (a method's: named after its label, NAME.npz, NAME.tuning-K.npz, ...; a user's a.npz there had
            # been removed by --overwrite, helper 194)
            from ..algorithms import REGISTRY, method_of

            return (top == "checkpoints" and relative.endswith(".npz")
                    and method_of(os.path.basename(relative).split(".", 1)[0]) in REGISTRY)
        return relative in OUTPUTS or relative.startswith((".rowstoch", "summary.", "compare.", "tuning", "live."))

    def _clear(self):
        for name in OUTPUTS:
            path = os.path.join(self.path, name)
            if os.path.isfile(path):
                os.remove(path)
        for name in os.listdir(self.path):  # the figures, by their exact names (a --live comparison's live.png had
            # stayed beside the new results, helper 214; a user's compare.py or tuning_notes.txt stays, helper 217)
            if _figure_name(name) and os.path.isfile(os.path.join(self.path, name)):
                os.remove(os.path.join(self.path, name))
        # the checkpoints the comparison wrote (and their temporaries), then the folders left empty: a file of
        # the user's in checkpoints/ had gone with the folder (helper 192)
        for root, folders, names in os.walk(os.path.join(self.path, "checkpoints"), topdown=False):
            for name in names:
                stem = name.rpartition(".tmp-")[0] if ".tmp-" in name else name
                if self._ours(os.path.relpath(os.path.join(root, stem), self.path)):
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(root, name))
            with contextlib.suppress(OSError):
                os.rmdir(root)  # (only where empty)


#: The most characters of a graph's or setting's label a file name keeps (:func:`slugs`): a file system takes 255
#: bytes a name.
SLUG_CHARS = 100


def slugs(labels, folder=None):
    """``{label: file name}`` of a comparison's graphs and settings (its figures', its checkpoints' folders): each
    character but ``A-Za-z0-9._+-`` a ``_``; where that is longer than :data:`SLUG_CHARS`, or the same for two of
    ``labels``, its first :data:`SLUG_CHARS` characters and 10 hex digits of the label's SHA-256. Helper 233: a
    per-node loss file at a 231-character path made a name past 255 bytes (``OSError: File name too long`` when
    the figures were written, after every method had run, and on every resume), and ``@a b.txt`` and ``@a_b.txt``
    shared one tuning figure and one folder of checkpoints. ``folder``: where an entry of a label's whole name
    exists there already, that name (the checkpoints of a comparison begun before names were bounded, whose resume
    had run them again; helper 236)."""
    import hashlib
    from collections import Counter

    plain = {label: re.sub(r"[^A-Za-z0-9._+-]+", "_", label) for label in labels}
    seen = Counter(plain.values())

    def kept(name):
        return folder is not None and len(name.encode()) <= 255 and os.path.exists(os.path.join(folder, name))

    return {label: name if len(name) <= SLUG_CHARS and seen[name] == 1 or seen[name] == 1 and kept(name) else
            name[:SLUG_CHARS] + "-" + hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:10]
            for label, name in plain.items()}


def _figure_name(name):
    """Whether ``name`` is one of a comparison's figures: ``compare``, ``tuning``, ``tuning-SLUG`` (a graph's or a
    setting's) or ``live``, in one of :data:`~rowstoch_fast.report.FORMATS`."""
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in FORMATS and (stem in ("compare", "tuning", "live") or stem.startswith("tuning-"))


def write_records(frames, folder):
    """compare.csv: every record of ``frames`` (one per graph or setting), replaced atomically."""
    import pandas as pd

    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    atomic_write(os.path.join(folder, "compare.csv"), lambda fh: frame.to_csv(fh, index=False))


def _frame_list(frames):
    """``frames`` as a list: one frame of :func:`~rowstoch_fast.compare.compare`, or several (a bare frame was
    indexed as a list: ``KeyError: 0``)."""
    import pandas as pd

    listed = [frames] if isinstance(frames, pd.DataFrame) else list(frames) if isinstance(frames, (list, tuple)) \
        else None
    if not listed or not all(isinstance(fr, pd.DataFrame) for fr in listed):
        raise TypeError(f"frames must be a DataFrame of compare() or a non-empty list of them, got "
                        f"{type(frames).__name__}" + (" (empty)" if listed == [] else ""))
    return [part for fr in listed for part in _sections(fr)]


def _sections(frame):
    """``frame`` as one frame per graph and setting it holds (in order), each with its ``attrs`` (a compare.csv of
    three settings read back with pandas had been written as one section: its tables' rows three "dsgd" lines
    without their setting, lr.json one entry, the figure their pooled mean; helper 233)."""
    parts = sections(frame)
    if len(parts) <= 1:
        return [frame]
    parts = [part.copy() for _, part in parts]
    for part in parts:
        part.attrs = dict(frame.attrs)
    return parts


def write_outputs(frames, folder, metrics=(), x="rounds", formats=("png",), caption=None, titles=None, kept=None):
    """Write what ``rowstoch compare`` writes for the frames of :func:`~rowstoch_fast.compare.compare` (one per
    graph or communication setting) into ``folder``: compare.csv (every record), summary.csv / .md / .tex (final
    values, ranks, status, diagnosis; ``caption`` for the LaTeX table), lr.json (the rates, their sources and every
    tuning candidate's score) and the figures (``metrics`` beside the ranked one, against ``x``, in ``formats``;
    ``titles``: one per frame; without matplotlib, or with no ``formats``, none); ``kept``: as in
    :func:`write_tables`. Returns the names written."""
    from .. import report

    frames = _frame_list(frames)
    written = write_tables(frames, folder, metrics, caption, kept=kept)
    metric = frames[0].attrs.get("metric") or frame_metric(frames[0])
    shown = list(dict.fromkeys([metric, *metrics]))
    if formats:  # (none: the tables alone, ``--format none``)
        try:
            plt = report.pyplot()
        except ImportError:
            return written
        with report.closing_on_error(plt):
            titles = titles or [_title(fr) for fr in frames]
            fig = report.figure(frames, shown, x, path=os.path.join(folder, "compare"), formats=formats,
                                titles=titles)
            plt.close(fig)
            written += [f"compare.{fmt}" for fmt in formats]
            names = slugs([_title(fr) for fr in frames])
            for fr, title in zip(frames, titles):
                if fr.attrs.get("tuning"):
                    name = "tuning" if len(frames) == 1 else "tuning-" + names[_title(fr)]
                    plt.close(report.tuning_figure(fr.attrs["tuning"], path=os.path.join(folder, name),
                                                   title=str(title)))
                    written.append(name + ".png")
    for stale in sorted(glob.glob(os.path.join(glob.escape(folder), "tuning*.png"))):  # (an interrupted write of one
        # setting's had named it tuning.png, left beside the tuning-<setting>.png of the resumed comparison)
        if os.path.basename(stale) not in written:
            os.remove(stale)
    return written


def table_label(folder):
    """summary.tex's ``\\label``: ``tab:`` and the name of the comparison's folder, each character LaTeX reads
    otherwise in a label (``\\ { } # % ~ $ ^ & _`` and spaces) a hyphen: ``results/paper_fig2`` labels
    ``tab:paper-fig2`` (helper 219: every comparison's table was ``tab:compare``, two in one paper the same)."""
    name = os.path.basename(os.path.realpath(folder))  # (the folder itself, not a link's name: a resume through a
    # link had relabelled the table a paper refers to, helper 222)
    return "tab:" + (re.sub(r"[^A-Za-z0-9.:+-]", "-", name).strip("-") or "compare")


def write_tables(frames, folder, metrics=(), caption=None, kept=None, cache=None):
    """compare.csv, summary.csv / .md / .tex and lr.json of ``frames`` (what :func:`write_outputs` writes but the
    figures; cheap enough to rewrite as each method finishes). ``kept``: records of a resumed comparison that this
    run has not reached yet (compare.csv's rows, its group columns included), written on into compare.csv, and
    their rates and tuning records (``kept.attrs["rates"]``: the earlier lr.json) into lr.json, so that a kill
    while a resume goes through the methods it keeps loses none of them. compare.csv, what ``--resume`` keeps, is
    written last: a kill between two files leaves no method in it whose tuning record lr.json lacks. ``cache``: a
    dict the caller keeps between calls (:func:`~rowstoch_fast.compare.summary`'s: each method's row of the
    summaries computed once). Returns the names written."""
    import pandas as pd

    check_text(caption, "caption", allow_none=True)
    from .. import report

    frames = _frame_list(frames)
    os.makedirs(folder, exist_ok=True)
    metric = frames[0].attrs.get("metric") or frame_metric(frames[0])
    shown = list(dict.fromkeys([metric, *metrics]))
    combined = pd.concat(frames, ignore_index=True)
    if "converged" in frames[0].attrs:  # (concat drops attrs that differ between the settings' frames: a float32
        combined.attrs["converged"] = frames[0].attrs["converged"]  # problem's rounding, or f*'s, was lost)
    table = summary(combined, metric, metrics=shown, cache=cache)
    table.attrs["metric"] = metric
    atomic_write(os.path.join(folder, "summary.csv"), lambda fh: table.to_csv(fh, index=False))
    shown_table = table
    if len(frames) == 1:
        shown_table = table.drop(columns=[g for g in GROUPS if g in table.columns])
    markdown = report.to_markdown(shown_table, shown) + (f"\n{caption}\n" if caption else "")  # (the caption:
    # what a reader of the Markdown table needs too, e.g. that each repetition drew its own network)
    atomic_write(os.path.join(folder, "summary.md"), lambda fh: fh.write(markdown))
    atomic_write(os.path.join(folder, "summary.tex"),
                 lambda fh: fh.write(report.to_latex(shown_table, shown, caption=caption, label=table_label(folder))))
    rates = {_title(fr): {"metric": metric, "metrics": shown, "lr": fr.attrs.get("lr", {}),
                          "source": fr.attrs.get("lr_source", {}), "tuning": json_tuning(fr.attrs.get("tuning", {})),
                          **({"converged": _levels(fr.attrs["converged"])} if "converged" in fr.attrs else {})}
             for fr in frames}  # (converged: the ranks' rounding levels, which compare.csv cannot keep: read_outputs)
    if kept is not None and len(kept):
        _carry_rates(rates, kept, kept.attrs.get("rates") or {})
    atomic_write(os.path.join(folder, "lr.json"), lambda fh: json.dump(rates, fh, indent=1, default=str))
    write_records(frames + ([kept] if kept is not None and len(kept) else []), folder)
    return ["compare.csv", "summary.csv", "summary.md", "summary.tex", "lr.json"]


def whole_lines(path):
    """``path``, or a ValueError where its last line has no end: compare.csv is written whole, each row ending in a
    newline; one cut mid-row can leave a row that reads as numbers (3602400 cut to 360: helper 214)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell():
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) not in (b"\n", b"\r"):
                raise ValueError("its last row has no line end: it was cut mid-row (remove compare.csv and resume "
                                 "to run its methods again)")
    return path


def read_records(path):
    """compare.csv at ``path`` as it was written: every float to its last bit (pandas < 3's default parser reads 4
    floats in 10 an ulp off: lr, the records; 3's is exact and deprecates the option); a ValueError where its last
    row was cut (:func:`whole_lines`)."""
    import pandas as pd

    exact = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
    return pd.read_csv(whole_lines(path), dtype={c: str for c in (*GROUPS, "algorithm")}, keep_default_na=False,
                        na_values=[""], **exact)  # (the labels as written: a setting "0", "001" or "NA" had been
    # read as a number or NaN, and lr.json's entry of "ring / 0" looked up as "ring / 0.0"; helper 236. An empty
    # field, what to_csv writes for NaN, is NaN still)


def read_outputs(folder):
    """The frames of the comparison whose outputs ``folder`` holds (``rowstoch compare --out``, or
    :func:`write_outputs`): one per graph and communication setting, in compare.csv's order, with the ``attrs``
    of :func:`~rowstoch_fast.compare.compare`'s frame that the files keep. So ``summary(read_outputs(folder)[0])``
    ranks as summary.csv did, and ``write_outputs(frames, b, metrics=frames[0].attrs.get("metrics", ()))`` of
    ``frames = read_outputs(a)`` writes ``a``'s compare.csv, summary.csv and lr.json again, its summary.md and
    .tex with the default caption (``caption``: the command line's, summary.md's last paragraph) and its figures
    with the default titles (``titles``).

    Parameters
    ----------
    folder : str or os.PathLike
        A comparison's folder: compare.csv (the records), lr.json (rates, tuning records and the rounding levels
        the ranks used) and experiment.json (the settings) where present.

    Returns
    -------
    list of pandas.DataFrame
        compare.csv's rows of each graph / setting (its ``graph`` and ``setting`` columns kept). ``attrs``:
        ``metric`` (the ranked one), ``metrics`` (the tables' columns, the ranked one first), ``converged`` (the
        fractions of the start below which a metric is at its rounding: the ties' level), ``lr``, ``lr_source``,
        ``tuning`` (lr.json's), ``status``, ``diagnosis`` (compare.csv's), ``rounds_budget``, ``repeats``,
        ``seed`` (experiment.json's) and ``interrupted``.

        A folder written before lr.json kept them has no ``metrics`` nor ``converged``.

    Raises
    ------
    TypeError
        ``folder`` is not a path.
    ValueError
        ``folder`` is not a folder, holds no compare.csv, or a file in it cannot be read (named).

    Warns
    -----
    UserWarning
        Where lr.json keeps no rounding levels (a folder written before they were kept, or without lr.json): the
        ranks then use the default level, :data:`~rowstoch_fast.compare.tuning.CONVERGED` of the start, which a
        float32 problem or a known f* can put elsewhere (the ties at rounding can differ from summary.csv's).
    """
    import warnings

    folder = check_path(folder, "folder")
    if not os.path.isdir(folder):
        raise ValueError(f"folder {folder!r} is not a folder (a comparison's --out folder)")
    path = os.path.join(folder, "compare.csv")
    if not os.path.isfile(path):
        raise ValueError(f"folder {folder!r} holds no compare.csv: it is not a comparison's folder, or none of its "
                         "methods finished")

    def read(name, how):
        try:
            return how(os.path.join(folder, name))
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise ValueError(f"folder {folder!r}: its {name} cannot be read ({exc})") from None

    def read_json(file):
        with open(file, encoding="utf-8") as fh:
            return json.load(fh)

    records = read("compare.csv", read_records)
    rates = read("lr.json", read_json) if os.path.isfile(os.path.join(folder, "lr.json")) else {}
    saved = read("experiment.json", read_json) if os.path.isfile(os.path.join(folder, "experiment.json")) else {}
    if not isinstance(rates, dict) or not isinstance(saved, dict):
        raise ValueError(f"folder {folder!r}: its {'lr.json' if not isinstance(rates, dict) else 'experiment.json'} "
                         "is not a comparison's (not a JSON object)")
    settings = saved.get("settings") if isinstance(saved.get("settings"), dict) else {}
    if "algorithm" not in records.columns:
        raise ValueError(f"folder {folder!r}: its compare.csv has no algorithm column: it is not a comparison's")
    if "diagnosis" in records.columns:  # (none is "", which the CSV reads as NaN)
        records["diagnosis"] = records["diagnosis"].astype(object).where(records["diagnosis"].notna(), "")
    frames, unlevelled = [], False
    for title, part in sections(records):
        part = part.reset_index(drop=True)
        entry = rates.get(title)
        if entry is None and len(rates) == 1:  # (one graph and setting: its entry, whatever its title)
            entry = next(iter(rates.values()))
        entry = entry if isinstance(entry, dict) else {}
        first = part.groupby("algorithm", sort=False).first()

        def column(name):
            return {str(label): value for label, value in first[name].items() if (isinstance(value, str) and value)
                    or (isinstance(value, float) and math.isfinite(value))} if name in first.columns else {}

        part.attrs.update(lr=entry.get("lr") or column("lr"), lr_source=entry.get("source") or column("lr_source"),
                          tuning={label: tuning_from_json(record)
                                  for label, record in (entry.get("tuning") or {}).items()},
                          status=column("status"), diagnosis=column("diagnosis"),
                          interrupted="interrupted" in set(column("status").values()),
                          **{key: settings[key] for key in ("rounds_budget", "repeats", "seed") if key in settings})
        if entry.get("metric"):
            part.attrs["metric"] = entry["metric"]
        if isinstance(entry.get("metrics"), list):
            part.attrs["metrics"] = entry["metrics"]
        if "converged" in entry:
            part.attrs["converged"] = entry["converged"]
        else:
            unlevelled = True
        frames.append(part)
    if unlevelled:
        warnings.warn(f"folder {folder!r}: its lr.json keeps no rounding levels (written before they were kept, or "
                      "missing): summary() ranks these records with the default level, 1e-12 of the start, where the "
                      "comparison's own could differ (the ties at rounding)", UserWarning, stacklevel=2)
    return frames


def _levels(converged):
    """A frame's ``attrs["converged"]`` (a fraction, or one by metric) as JSON numbers."""
    return {str(k): float(v) for k, v in converged.items()} if isinstance(converged, dict) else float(converged)


def _carry_rates(rates, kept, earlier):
    """Into ``rates`` (lr.json's, by graph and setting), the entries of ``earlier`` (the resumed comparison's
    lr.json) of the methods whose records ``kept`` carries on: a resume stopped before it reached them had written
    lr.json without them, and the next one lost their tuning records for good."""
    for title, part in sections(kept):
        old = earlier.get(title)
        if not old:
            continue
        entry = rates.setdefault(title, {"metric": old.get("metric"), "lr": {}, "source": {}, "tuning": {},
                                         **{key: old[key] for key in ("metrics", "converged") if key in old}})
        for label in dict.fromkeys(part["algorithm"].astype(str)):
            for key in ("lr", "source", "tuning"):
                if label in (old.get(key) or {}) and label not in entry[key]:
                    entry[key] = {**entry[key], label: old[key][label]}


def json_tuning(tuning):
    """``frame.attrs["tuning"]`` for JSON: rates as text keys, rejected candidates' scores as null."""
    if not isinstance(tuning, dict):
        raise TypeError(f"tuning must be a dict (frame.attrs['tuning']: label -> the tuner's record), got "
                        f"{type(tuning).__name__}")
    out = {}
    for label, record in tuning.items():
        out[label] = {**{k: v for k, v in record.items() if k != "stages"},
                      **({"kept_climbing": {f"{lr:g}": why for lr, why in record["kept_climbing"].items()}}
                         if record.get("kept_climbing") else {}),  # (its rates as the stages' keys are written)
                      "stages": [{"name": stage["name"],
                                  **({"replicas": stage["replicas"]} if "replicas" in stage else {}),
                                  "scores": {f"{lr:g}": (s if np.isfinite(s) else None)
                                             for lr, s in stage["scores"].items()},
                                  "rejected": {f"{lr:g}": why for lr, why in stage["rejected"].items()},
                                  "curves": {f"{lr:g}": [v if np.isfinite(v) else None for v in curve]
                                             for lr, curve in stage.get("curves", {}).items()}}
                                 for stage in record.get("stages", ())]}
    return out


def tuning_from_json(record):
    """One method's record of :func:`json_tuning` back as ``frame.attrs["tuning"]`` holds it (rates as floats,
    null scores and curve points as NaN): what a resumed comparison carries on for the methods it keeps."""
    def rates(d, value=lambda v: v):
        return {float(lr): value(v) for lr, v in (d or {}).items()}

    def number(v):
        return math.nan if v is None else float(v)

    return {**{k: v for k, v in record.items() if k != "stages"},
            **({"kept_climbing": rates(record["kept_climbing"])} if record.get("kept_climbing") else {}),
            "stages": [{"name": stage["name"], **({"replicas": stage["replicas"]} if "replicas" in stage else {}),
                        "scores": rates(stage.get("scores"), number),
                        "rejected": rates(stage.get("rejected")),
                        "curves": rates(stage.get("curves"), lambda c: [number(v) for v in c])}
                       for stage in record.get("stages", ())]}


def plot(frame, metric=None, ax=None, title=None, path=None, x="rounds"):
    """``metric`` against the ``x`` axis (``rounds``, ``gradients``, ``bytes`` or ``seconds``), one line per
    algorithm (mean over repetitions, a band of one standard deviation; colour-blind-safe colours, markers
    and line styles); needs matplotlib. Returns the Axes; ``path`` saves the figure (300 dpi) and closes it if
    it was made here (:func:`~rowstoch_fast.report.axes_for`)."""
    from .. import report

    metric = check_text(metric, "metric", allow_none=True) or frame_metric(frame)
    check_text(title, "title", allow_none=True)
    check_frame(frame, [metric])
    report.check_one_section(frame)
    report.check_axis(x)
    with report.axes_for(ax, (6.4, 4.2), path) as ax:
        report.draw(ax, frame, metric, x)
        ax.legend(loc="best", fontsize="small")
        if title:
            ax.set_title(title)
    return ax
