"""The memory folder's other files (the daily notes, HISTORY.md) are edited under the
rule MEMORY.md keeps (DESIGN §2, memory files; `memoryd.memory.file`):

- an fcntl lock on a file beside them (`.notes.lock` for every daily note, one lock
  file that never goes away; `.HISTORY.md.lock`), which orders two daemons sharing the
  folder and memoryd's own threads (each edit opens the lock file anew, so two threads
  of one process exclude each other too);
- under it the file is read again and the change is planned on what is on disk now;
- it is written (atomically: temp file, fsync, rename) only if the file still holds
  what was planned on: an editor that saved meanwhile gets its text planned on again,
  never overwritten.

Locks are taken in one order (MEMORY.md's, then the notes', then HISTORY.md's) so two
holders never wait on each other. All of this runs in a worker thread, never the loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from memoryd.memory.atomic import remove_durably, write_atomic
from memoryd.errors import ConflictError
from memoryd.memory.document import MemoryIOError
from memoryd.memory.file import hold_lock

T = TypeVar("T")
log = logging.getLogger(__name__)
LOCK_TIMEOUT_S = 5.0
RETRIES = 5

# (the file's text now, None when there is none) -> (what it should hold, None to
# remove it; a result for the caller)
Edit = Callable[[str | None], tuple[str | None, T]]


def edit_locked(path: Path, lock: Path, edit: Edit[T], *, errors: str = "strict",
                timeout: float = LOCK_TIMEOUT_S) -> T:
    with hold(lock, timeout):
        for _ in range(RETRIES):
            raw = _read(path)
            text = None if raw is None else raw.decode("utf-8", errors)
            want, result = edit(text)
            if want == text:
                return result
            if _read(path) != raw:  # saved in an editor while we planned: plan again
                continue
            if want is None:
                remove_durably(path)
            else:
                write_atomic(path, want.encode("utf-8"))
            return result
    raise ConflictError(f"{path.name} kept changing on disk while memoryd tried to write "
                        "it; try again")


def clean_temps(lock: Path, pattern: str, timeout: float = LOCK_TIMEOUT_S) -> list[str]:
    """Remove the temp files (`pattern`, a glob beside `lock`) of writes a kill -9 cut
    short. Every write of those files holds `lock` while its temp file exists, so one
    found under the lock is a dead writer's, never a live one's (another thread, or
    another daemon sharing the folder). The names removed."""
    if not lock.parent.is_dir():
        return []
    gone = []
    with hold(lock, timeout):
        for tmp in lock.parent.glob(pattern):
            with contextlib.suppress(OSError):
                tmp.unlink()
                gone.append(tmp.name)
                log.info("%s: removed %s, left by a write that was cut short",
                         lock.parent, tmp.name)
    return gone


@contextlib.contextmanager
def hold(lock: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    try:
        lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise MemoryIOError(f"cannot open {lock}: {e}") from None
    with hold_lock(lock, timeout):
        yield


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
