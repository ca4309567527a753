"""Files that are never half-written: write to a temporary file in the same directory, fsync, rename.

Readers see the old file or the new one, never part of one (``os.replace`` is atomic on POSIX and
Windows within one filesystem).
"""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; returns the path. Creates the parent directory.

    Only a regular file or a new path is written: a device (``/dev/null``), a directory or a FIFO is refused
    with :class:`gpusim.errors.GpusimError` (replacing a device with a regular file would break the system).
    """
    from gpusim.checks import output_path

    path = output_path(path, "output")
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here, not at the top: tempfile pulls in shutil and random (~4 ms of a CLI start)

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, then rename); returns the path.

    For caches and other files gpusim owns (no device check, no fsync: losing a cache on a crash costs a re-parse)."""
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
