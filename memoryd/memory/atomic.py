"""Crash-safe file writes: a temp file in the same directory, fsync, rename, fsync the
directory. A kill -9 at any point leaves the old file or the new one, never half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    sync_dir(path.parent)


def remove_durably(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    sync_dir(path.parent)
    return True


def sync_dir(d: Path) -> None:
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def clean_temps(d: Path) -> int:
    """Remove temp files a killed write left behind (`.<name>.*.tmp`)."""
    n = 0
    with contextlib.suppress(FileNotFoundError):
        for p in d.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()
                n += 1
    return n
