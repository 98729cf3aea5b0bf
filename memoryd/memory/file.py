"""MEMORY.md on disk: `MemoryFile`, the service behind the memory API.

The file is the user's: edits made in an editor while the daemon runs are picked up (the
file is re-read whenever its stat changes, and always before a write), and a write never
overwrites an edit it has not seen. Writes are atomic (temp file in the same directory,
fsync, rename, fsync the directory) under an asyncio lock plus an fcntl lock on
`.MEMORY.md.lock` beside the file, for other processes. All file I/O runs in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from memoryd.errors import ConflictError, MemorydError, StorageFullError
from memoryd.events import EventBus
from memoryd.memory.document import (
    FILENAME,
    MAX_BYTES,
    MAX_ENTRIES,
    AddResult,
    Document,
    Entry,
    MemoryIOError,
    MemoryLockedError,
    MemoryUnreadableError,
    SearchOutcome,
    VersionConflictError,
    format_lines,
    newest_first,
    parse,
    plan_add,
    plan_delete,
    search,
    stats,
    validate_content,
)
from memoryd.paths import Paths, mkdir_private, tighten_dir

log = logging.getLogger(__name__)

CAS_RETRIES = 3
RACY_NS = 2_000_000_000

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    """What the file held when last read, parsed (in the reading thread). `key` is its
    stat (None: no file); `version` a hash of its bytes, for compare-and-swap by clients."""
    key: tuple[int, ...] | None
    raw: bytes
    parsed: Document | None
    bad_byte: int | None = None  # not UTF-8 from this offset

    @classmethod
    def of(cls, key: tuple[int, ...] | None, raw: bytes) -> Snapshot:
        try:
            return cls(key, raw, parse(raw.decode("utf-8")))
        except UnicodeDecodeError as e:
            return cls(key, raw, None, e.start)

    @property
    def version(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()[:16]

    @property
    def doc(self) -> Document:
        if self.parsed is None:
            raise MemoryUnreadableError(f"MEMORY.md is not valid UTF-8 (byte {self.bad_byte}); "
                                        "fix it in an editor or replace it")
        return self.parsed


def _key(st: os.stat_result) -> tuple[int, ...]:
    # mtime_ns must stay at index 3 (see MemoryFile._load)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class MemoryFile:
    """MEMORY.md. `start()` begins polling for edits made outside memoryd (every
    `poll_interval` seconds; 0: only on access); every read and write checks too."""

    def __init__(self, path: Path, *, events: EventBus | None = None,
                 max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 today: Callable[[], date] = date.today, poll_interval: float = 2.0,
                 lock_timeout: float = 5.0,
                 redact: Callable[[str], str | None] | None = None) -> None:
        self.path = path
        self.redact = redact  # secrets written through the API never reach the file
        self.lock_path = path.parent / f".{path.name}.lock"
        self.events = events
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.today = today
        self.poll_interval = poll_interval
        self.lock_timeout = lock_timeout
        self._lock = asyncio.Lock()
        self._snap: Snapshot | None = None
        self._task: asyncio.Task[None] | None = None
        self._look: asyncio.Task[None] | None = None  # a look `notice()` asked for
        self._last_poll_error: str | None = None

    @classmethod
    def from_paths(cls, paths: Paths, **kw: Any) -> MemoryFile:
        return cls(paths.memory_dir / FILENAME, **kw)

    async def start(self) -> None:
        try:
            await self._in_thread(self._clean_temps)
            await self.snapshot()  # the baseline: not reported as a change
        except MemorydError as e:  # a broken file is reported by each request, not fatal
            log.warning("%s: %s", self.path, e.message)
        if self.poll_interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._poll(), name="memoryd-memory-poll")

    async def stop(self) -> None:
        if self._look is not None:
            self._look.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._look
            self._look = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # reads

    async def snapshot(self) -> Snapshot:
        async with self._lock:
            changed = await self._in_thread(self._load)
            snap = self._snap
        assert snap is not None
        if changed:
            self._changed("external", snap)
        return snap

    async def document(self) -> Document:
        return (await self.snapshot()).doc

    async def recent(self, count: int) -> list[Entry]:
        return newest_first((await self.document()).entries)[:count]

    async def stats(self) -> dict[str, Any]:
        return stats(await self.document(), self.max_entries)

    async def search(self, keywords: Sequence[str], mode: Literal["or", "and"] = "or",
                     max_results: int = 15) -> SearchOutcome:
        return search(await self.document(), keywords, mode, max_results)

    # writes

    async def replace(self, content: str, version: str | None = None) -> Snapshot:
        if self.redact is not None:
            content = self.redact(content) or ""
        await asyncio.to_thread(validate_content, content, max_entries=self.max_entries,
                                max_bytes=self.max_bytes)
        return (await self._mutate("replace", lambda _s: (content, None), version))[1]

    async def add(self, content: str, source: str = "manual") -> AddResult:
        if self.redact is not None:
            content = self.redact(content) or ""
        day = self.today()
        if isinstance(day, datetime):
            day = day.date()

        def plan(s: Snapshot) -> tuple[str | None, AddResult]:
            lines, result = plan_add(s.doc, content, source, day,
                                     max_entries=self.max_entries, max_bytes=self.max_bytes)
            return (None if lines is None else format_lines(lines)), result

        return (await self._mutate("add", plan))[0]

    async def rewrite(self, op: str, plan: Callable[[Document], tuple[list[str] | None, T]]
                      ) -> T:
        """Apply `plan` (run in a thread, under the file lock) to the file as it is on
        disk now: a change the user made since the last read is planned on, never
        overwritten. `plan` returns the new lines (None: leave the file) and a result;
        it may run again if the file changes while it plans."""
        def on_snapshot(s: Snapshot) -> tuple[str | None, T]:
            lines, result = plan(s.doc)
            return (None if lines is None else format_lines(lines)), result

        return (await self._mutate(op, on_snapshot))[0]

    async def delete(self, lines: Sequence[int], version: str | None = None) -> Snapshot:
        """Delete entry lines (1-based, as numbered in the file now)."""
        return (await self._mutate("delete", lambda s: (format_lines(plan_delete(s.doc, lines)),
                                                        None), version))[1]

    async def _mutate(self, op: str, plan: Callable[[Snapshot], tuple[str | None, T]],
                      version: str | None = None) -> tuple[T, Snapshot]:
        async with self._lock:
            result, external, wrote = await self._in_thread(self._mutate_sync, plan, version)
            snap = self._snap
        assert snap is not None
        if external:
            self._changed("external", snap)
        if wrote:
            self._changed("api", snap, op=op)
        return result, snap

    @staticmethod
    async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` in a thread; if the caller is cancelled, wait for the thread before
        letting go of the asyncio lock, so two file operations never overlap."""
        task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait([task])
            raise

    # the thread side

    def _mutate_sync(self, plan: Callable[[Snapshot], tuple[str | None, T]],
                     version: str | None) -> tuple[T, bool, bool]:
        """Under the file lock: re-read (never trusting the stat), apply the change to what
        is on disk now, and write only if the file is still what was read."""
        with self._file_lock():
            external = self._load(force=True)
            for _ in range(CAS_RETRIES):
                snap = self._snap
                assert snap is not None
                if version is not None and version != snap.version:
                    raise VersionConflictError(
                        f"MEMORY.md changed since version {version} (now {snap.version}); "
                        "read it again", field="version")
                text, result = plan(snap)
                if text is None:
                    return result, external, False
                data = text.encode("utf-8")
                if data == snap.raw:
                    return result, external, False
                if self._stat() != snap.key:  # edited while we planned: redo on top of it
                    external = self._load(force=True) or external
                    continue
                self._write(data)
                return result, external, True
        raise ConflictError("MEMORY.md kept changing on disk while memoryd tried to write it; "
                            "try again")

    def _stat(self) -> tuple[int, ...] | None:
        try:
            return _key(os.stat(self.path))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise MemoryIOError(f"cannot stat {self.path}: {e}") from None

    def _load(self, force: bool = False) -> bool:
        """Refresh the snapshot; True when the content changed under an earlier one."""
        if not force and self._snap is not None:
            now = self._stat()
            # File times are coarse (a kernel tick): an edit in the same tick as the last
            # read can keep size and times, so a recent file is compared by content.
            if now == self._snap.key and (now is None or time.time_ns() - now[3] > RACY_NS):
                return False
        try:
            with open(self.path, "rb") as f:
                key: tuple[int, ...] | None = _key(os.fstat(f.fileno()))
                raw = f.read()
        except FileNotFoundError:
            key, raw = None, b""
        except OSError as e:
            raise MemoryIOError(f"cannot read {self.path}: {e}") from None
        old, self._snap = self._snap, Snapshot.of(key, raw)
        return old is not None and old.raw != raw

    def _clean_temps(self) -> None:
        """Remove the temp files of writes a kill -9 cut short (`.MEMORY.md.*.tmp`). Every
        write holds the file lock while its temp file exists, so one found under the lock
        is a dead writer's, never another daemon's sharing the folder."""
        target = Path(os.path.realpath(self.path))
        if not target.parent.is_dir():
            return
        with self._file_lock():
            for tmp in target.parent.glob(f".{target.name}.*.tmp"):
                with contextlib.suppress(OSError):
                    tmp.unlink()
                    log.info("%s: removed %s, left by a write that was cut short",
                             self.path, tmp.name)

    def _write(self, data: bytes) -> None:
        target = Path(os.path.realpath(self.path))  # keep a symlinked MEMORY.md a symlink
        try:
            self._ensure_dir()
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                    key = _key(os.fstat(f.fileno()))
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFullError(f"cannot write {self.path}: the disk is full ({e}); "
                                       "the file is unchanged") from None
            raise MemoryIOError(f"cannot write {self.path}: {e}") from None
        # The pre-rename stat may differ from the final one (rename touches ctime): that
        # costs one re-read next time, and can never hide an edit made after ours.
        self._snap = Snapshot.of(key, data)

    def _ensure_dir(self) -> None:
        d = self.path.parent
        mkdir_private(d)
        tighten_dir(d)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        try:
            self._ensure_dir()
        except OSError as e:
            raise MemoryIOError(f"cannot open {self.lock_path}: {e}") from None
        with hold_lock(self.lock_path, self.lock_timeout):
            yield

    # events

    def _changed(self, origin: str, snap: Snapshot, **data: Any) -> None:
        if origin == "external":
            log.info("%s changed on disk; reloaded", self.path)
        if self.events is None:
            return
        try:
            total: int | None = len(snap.doc.entries)
        except MemoryUnreadableError:
            total = None
        self.events.publish("memory_changed", origin=origin, total=total,
                            version=snap.version, **data)

    def notice(self) -> None:
        """The folder changed (the daemon's watcher saw it): look at the file now, once
        for a burst of changes."""
        if self._look is None or self._look.done():
            self._look = asyncio.get_running_loop().create_task(self._check(),
                                                                name="memoryd-memory-look")

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            await self._check()

    async def _check(self) -> None:
        try:
            await self.snapshot()
            self._last_poll_error = None
        except Exception as e:
            msg = e.message if isinstance(e, MemorydError) else repr(e)
            if msg != self._last_poll_error:
                log.warning("watching %s: %s", self.path, msg,
                            exc_info=not isinstance(e, MemorydError))
            self._last_poll_error = msg


@contextlib.contextmanager
def hold_lock(lock: Path, timeout: float) -> Iterator[None]:
    """An exclusive fcntl lock on `lock` (created 0600), waited for up to `timeout`
    seconds in a worker thread (never the loop). Each holder opens the file anew, so two
    threads of one process exclude each other as two processes do."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise MemoryIOError(f"cannot open {lock}: {e}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise MemoryLockedError(f"another process holds {lock} (waited "
                                            f"{timeout:g}s); try again") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock
