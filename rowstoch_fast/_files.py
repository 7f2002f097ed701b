"""Files written atomically: what a reader (or a resumed run) sees is the old file or the new one, never half."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib

from ._checks import available_memory, file_kind, lines_within_memory

__all__ = ["TEXT_ENCODING", "atomic_write", "file_target", "is_header", "loadtxt_source", "open_text"]

#: How the text files a user brings (edge lists, CSV data) are read: UTF-8, a byte-order mark (Excel's "CSV UTF-8"
#: writes one) read as nothing; it made the first line a "header", and its edge or sample was dropped.
TEXT_ENCODING = "utf-8-sig"


def check_path(path, name="path"):
    """``path`` (a str or an os.PathLike) as a str, else a TypeError naming ``name`` (os' own "expected str, bytes
    or os.PathLike object" named no argument, and a number was opened as a file descriptor)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {type(path).__name__} {path!r:.60}")
    return os.fspath(path)


def file_target(path, name="path"):
    """Where a file written at ``path`` (a str or os.PathLike) goes, checked before anything is written: the file a
    symbolic link names (written through it: the link stays), else ``path``; a ValueError naming ``name`` where
    that exists and is not a regular file (a device, a FIFO, a socket: the rename of an atomic write replaces it
    by a regular file; helper 218's checkpoint at /dev/null turned a machine's /dev/null into one), an
    IsADirectoryError where it is a folder."""
    path = check_path(path, name)
    target = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.islink(target):  # (a loop of links: realpath stops in it; the rename had replaced the link)
        raise ValueError(f"{name} {path!r} is a symbolic link that leads back to itself; give a file's path")
    kind = file_kind(target)
    if kind == "a folder":
        raise IsADirectoryError(f"{name} {path!r} is a folder; give a file's path in it")
    if kind is not None:
        raise ValueError(f"{name} {path!r} is {kind}" + (f" ({target!r})" if target != path else "")
                         + ": a file written there would replace it; give a regular file's path")
    return target


def atomic_write(path, write, mode="w"):
    """``write(fh)`` into ``path`` through a temporary file in its folder, flushed to disk, then renamed over it; a
    text file in UTF-8, whatever the locale (under ``LANG=C`` the "±" of summary.md ended a comparison whose
    methods had all run). Into the file a symbolic link names; not over a device, FIFO or socket
    (:func:`file_target`)."""
    path = file_target(path)  # (None: a TypeError naming the path)
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):  # (the error had named the temporary file, not the one asked for)
        raise FileNotFoundError(f"cannot write {path!r}: its folder {folder!r} does not exist")
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def is_header(tokens):
    """Whether the first row of a text table (its ``tokens``) is a header: none of them a number. A row of numbers
    with a gap or a word among them (``1.0,,0``, ``0,1,NA``) is a row of data with a missing value, which the
    reader then refuses, not a header whose sample is dropped."""
    def number(token):
        try:
            float(token)
            return True
        except ValueError:
            return False

    return not any(number(t) for t in tokens)


#: The compressed text files :func:`open_text` decompresses, by their names' endings (NumPy's readers decompress
#: the same: an ``.xz`` edge list read as text would be its compressed bytes).
COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, ".lzma": lzma.open}

#: What reading a damaged compressed file raises, beyond OSError (a truncated stream, corrupt data).
DAMAGED = (EOFError, zlib.error, lzma.LZMAError)


def _compression(path):
    """The suffix of :data:`COMPRESSED` that ``path`` ends with, else ``""``."""
    return next((end for end in COMPRESSED if os.fspath(path).endswith(end)), "")


def open_text(path, errors=None):
    """The text file ``path`` opened for reading as :data:`TEXT_ENCODING` (``errors`` as :func:`open`'s),
    decompressed when its name ends as one of :data:`COMPRESSED`."""
    return COMPRESSED.get(_compression(path), open)(os.fspath(path), "rt", newline="", encoding=TEXT_ENCODING,
                                                    errors=errors)


def open_text_for_writing(path):
    """The text file ``path`` opened for writing as :data:`TEXT_ENCODING`, compressed when its name ends as one of
    :data:`COMPRESSED` (what :func:`open_text` reads back: an edge list saved as ``ring.txt.gz`` had been plain
    text under that name, which reading it back refused, helper 185)."""
    return COMPRESSED.get(_compression(path), open)(os.fspath(path), "wt", newline="", encoding="utf-8")  # (not
    # TEXT_ENCODING's utf-8-sig, which reads a byte-order mark: written, it began every file with one, which
    # np.loadtxt cannot read, helper 187)


def uncompressed_name(path):
    """``path`` without the suffix of a compression (:data:`COMPRESSED`): ``edges.csv.gz`` -> ``edges.csv``."""
    path, end = os.fspath(path), _compression(path)
    return path[:-len(end)] if end else path


def loadtxt_source(path, delimiter=None):
    """What ``np.loadtxt`` reads the text file ``path`` from: the path itself (NumPy's fast reader) when its size
    rules out running out of memory (at most one number a byte, read and copied), else its lines
    (:func:`open_text`), refused once the numbers read would not fit
    (:func:`~rowstoch_fast._checks.lines_within_memory`): a compressed file's size does not bound what it holds."""
    avail = available_memory()
    if not _compression(path) and (avail is None or 16 * os.path.getsize(path) <= avail):
        return path
    return _counted_lines(path, delimiter)


def _counted_lines(path, delimiter):
    with open_text(path) as f:  # (closed when the lines end, or when the reader drops them)
        yield from lines_within_memory(f, path, delimiter)


def process_alive(pid):
    """Whether process ``pid`` runs on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
