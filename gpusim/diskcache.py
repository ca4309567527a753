"""The on-disk cache of parsed-and-validated data files (the hardware database, the model catalogue).

Every CLI start would otherwise parse the same YAML files and validate them with pydantic (0.1-0.3 s for the
hardware database, ~40 ms for the catalogue, most of a cold start). The validated result is pickled under a key
that hashes everything it depends on: the bytes and paths of every file read, the source of the code that
builds it (schema, loader, the classes pickled), and the Python/pydantic versions. Any change gives a new key:
a miss, a parse, a new file. A cache file that cannot be read (corrupt, truncated, written by another version)
is ignored and rewritten; one that cannot be written (read-only home, full disk) is skipped. Files are written
atomically (:func:`gpusim.fsutil.atomic_write_bytes`), so concurrent starts never see half a file. Callers cache
only results without problems: errors are always found by parsing.

Where: ``$GPUSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpusim``, else ``~/.cache/gpusim``; ``GPUSIM_CACHE=0``
turns it off.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

CACHE_ENV_VAR = "GPUSIM_CACHE"
CACHE_DIR_ENV_VAR = "GPUSIM_CACHE_DIR"
#: cache files kept per kind (the few most recent: several checkouts, several --hwdb sets)
KEEP_FILES = 8


def cache_dir() -> Path | None:
    """``$GPUSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpusim``, else ``~/.cache/gpusim``; None when
    ``GPUSIM_CACHE=0`` (never inside the installed package, which may be read-only)."""
    if os.environ.get(CACHE_ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    explicit = os.environ.get(CACHE_DIR_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpusim"


def content_key(sources: Iterable[Path], files: Iterable[Path], extra: str = "") -> str | None:
    """A 32-hex-digit hash of the code ``sources`` (bytes), the data ``files`` (paths and bytes), ``extra``,
    and the Python and pydantic versions; None when a file cannot be read (then the caller parses)."""
    import hashlib
    import sys

    import pydantic

    h = hashlib.sha256(f"{sys.version}|{pydantic.VERSION}|{extra}".encode())
    try:
        for src in sources:
            h.update(b"\0src\0" + Path(src).read_bytes())
        for path in files:
            data = Path(path).read_bytes()
            h.update(b"\0file\0" + str(path).encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    except OSError:
        return None
    return h.hexdigest()[:32]


def cache_path(kind: str, key: str | None) -> Path | None:
    """Where the ``kind`` result under ``key`` lives (None: caching is off or there is no key)."""
    directory = cache_dir()
    return directory / f"{kind}-{key}.pickle" if directory is not None and key else None


def read(path: Path | None, expected_type: type):
    """The object pickled at ``path`` if it is an ``expected_type``, else None (missing, corrupt, another
    version's)."""
    import pickle

    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
    except Exception:  # missing, truncated, corrupt, written by another version: parse instead
        return None
    return obj if isinstance(obj, expected_type) else None


def write(path: Path | None, obj) -> None:
    """Pickle ``obj`` to ``path`` atomically and keep the newest :data:`KEEP_FILES` of its kind; any failure
    is ignored (the cache is only an optimisation)."""
    import pickle

    from gpusim.fsutil import atomic_write_bytes

    if path is None:
        return
    try:
        atomic_write_bytes(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        kind = path.name.rsplit("-", 1)[0]
        old = sorted(path.parent.glob(f"{kind}-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
        for p in old[KEEP_FILES:]:
            p.unlink(missing_ok=True)
    except Exception:  # read-only or full disk, races with another process
        pass
