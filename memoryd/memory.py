"""MEMORY.md, the long-term memory file: one entry per line,
`YYYY-MM-DD|source|item1；item2` (items separated by the full-width `；`, U+FF1B).

The file is the user's: lines that are not entries (headings, blank lines, prose) are
kept verbatim, edits made in an editor while the daemon runs are picked up (the file is
re-read whenever its stat changes, and always before a write), and a write never
overwrites an edit it has not seen. Writes are atomic (temp file in the same directory,
fsync, rename, fsync the directory) under an asyncio lock plus an fcntl lock on
`.MEMORY.md.lock` beside the file, for other processes. All file I/O runs in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from memoryd.errors import BadRequestError, ConflictError, MemorydError
from memoryd.events import EventBus
from memoryd.paths import Paths

log = logging.getLogger(__name__)

SEP = "；"  # U+FF1B FULLWIDTH SEMICOLON
FILENAME = "MEMORY.md"
MAX_ENTRIES = 200
MAX_BYTES = 512 * 1024
MAX_ADD_CHARS = 2000
MAX_SOURCE_CHARS = 200
CAS_RETRIES = 3
RACY_NS = 2_000_000_000
_LOOKS_LIKE_ENTRY = re.compile(r"\d{4}-\d{2}-\d{2}\|")

T = TypeVar("T")


class MemoryFullError(ConflictError):
    code = "memory_full"


class VersionConflictError(ConflictError):
    code = "version_conflict"


class MemoryLockedError(ConflictError):
    code = "memory_locked"


class MemoryUnreadableError(ConflictError):
    code = "memory_unreadable"


class MemoryIOError(MemorydError):
    code = "memory_io"


# --- the format: pure functions -------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    line: int  # 1-based
    date: str  # ISO YYYY-MM-DD
    source: str
    items: tuple[str, ...]
    text: str  # the line as it is in the file

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "date": self.date, "source": self.source,
                "items": list(self.items), "text": self.text}


@dataclass(frozen=True)
class Problem:
    """A line that looks like an entry (starts with a date and `|`) but is not one."""
    line: int
    reason: str


@dataclass(frozen=True)
class Document:
    lines: tuple[str, ...]
    entries: tuple[Entry, ...]
    problems: tuple[Problem, ...]

    @property
    def text(self) -> str:
        return format_lines(self.lines)

    def entry_at(self, line: int) -> Entry | None:
        return next((e for e in self.entries if e.line == line), None)


def split_lines(text: str) -> list[str]:
    """Split on `\\n` only (not str.splitlines, which also splits on \\x1c, U+2028, ...);
    a final newline does not make an extra empty line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def format_lines(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def format_entry(day: date, source: str, items: Sequence[str]) -> str:
    return f"{day.isoformat()}|{source}|{SEP.join(items)}"


def parse_line(number: int, raw: str) -> Entry | Problem | None:
    """An Entry, a Problem (looks like an entry, is malformed), or None (other text)."""
    s = raw.rstrip("\r")  # an editor's CRLF
    if number == 1:
        s = s.removeprefix("\ufeff")
    if not _LOOKS_LIKE_ENTRY.match(s):
        return None
    day, rest = s[:10], s[11:]
    try:
        date.fromisoformat(day)
    except ValueError:
        return Problem(number, f"invalid date {day!r}")
    if "|" not in rest:
        return Problem(number, "expected date|source|items: missing the '|' after the source")
    source, items_text = rest.split("|", 1)
    if not source.strip():
        return Problem(number, "empty source")
    items = tuple(i.strip() for i in items_text.split(SEP) if i.strip())
    if not items:
        return Problem(number, "no items after the source")
    return Entry(number, day, source.strip(), items, raw)


def parse(text: str) -> Document:
    lines = split_lines(text)
    entries: list[Entry] = []
    problems: list[Problem] = []
    for n, raw in enumerate(lines, 1):
        r = parse_line(n, raw)
        if isinstance(r, Entry):
            entries.append(r)
        elif isinstance(r, Problem):
            problems.append(r)
    return Document(tuple(lines), tuple(entries), tuple(problems))


# C0/C1 controls but \t \n, lone surrogates, and U+2028/2029 (line separators that
# would make editors and other tools number lines differently)
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_text(text: str, field: str, *, allow_tab_newline: bool = True) -> None:
    """Reject control characters (but \\t and \\n, when allowed), lone surrogates and
    Unicode line separators, naming the line they are on."""
    m = _FORBIDDEN.search(text) if allow_tab_newline else re.search(
        r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]", text)
    if m is None:
        return
    ch = m.group()
    line = text.count("\n", 0, m.start()) + 1
    what = "control character"
    if ch in "\u2028\u2029":
        what = "line separator"
    elif "\ud800" <= ch <= "\udfff":
        what = "lone surrogate"
    raise BadRequestError(f"{field}: line {line}: {what} U+{ord(ch):04X} is not allowed",
                          field=field)


def validate_content(text: str, *, max_entries: int = MAX_ENTRIES,
                     max_bytes: int = MAX_BYTES) -> Document:
    """A whole new MEMORY.md (PUT): every entry-looking line must be an entry."""
    check_text(text, "content")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise BadRequestError(f"content: {size} bytes, over the {max_bytes}-byte limit",
                              field="content")
    doc = parse(text)
    if doc.problems:
        p = doc.problems[0]
        more = f" (and {len(doc.problems) - 1} more)" if len(doc.problems) > 1 else ""
        raise BadRequestError(f"content: line {p.line}: {p.reason}{more}", field="content")
    if len(doc.entries) > max_entries:
        raise MemoryFullError(f"content has {len(doc.entries)} entries; MEMORY.md holds at "
                              f"most {max_entries}", field="content")
    return doc


def split_items(content: str) -> list[str]:
    """The items of an added entry: separated by `；` or newlines, stripped, non-empty."""
    return [s.strip() for s in re.split(rf"[{SEP}\n]", content) if s.strip()]


def item_key(item: str) -> str:
    """Items equal under this key are duplicates: case and runs of whitespace ignored."""
    return " ".join(item.split()).casefold()


def clean_source(source: str) -> str:
    check_text(source, "source", allow_tab_newline=False)
    s = source.strip()
    if not s:
        raise BadRequestError("source: must not be empty", field="source")
    if "|" in s:
        raise BadRequestError("source: must not contain '|'", field="source")
    if len(s) > MAX_SOURCE_CHARS:
        raise BadRequestError(f"source: over {MAX_SOURCE_CHARS} characters", field="source")
    return s


@dataclass(frozen=True)
class AddResult:
    line: int
    total: int
    duplicate: bool
    added: tuple[str, ...]
    duplicates: tuple[str, ...]  # items left out because they were already there

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "total": self.total, "duplicate": self.duplicate,
                "added": list(self.added), "duplicates": list(self.duplicates)}


def plan_add(doc: Document, content: str, source: str, today: date, *,
             max_entries: int = MAX_ENTRIES,
             max_bytes: int = MAX_BYTES) -> tuple[list[str] | None, AddResult]:
    """The new lines (None: nothing to write) and the answer for adding an entry."""
    check_text(content.replace("\r\n", "\n"), "content")
    if len(content) > MAX_ADD_CHARS:
        raise BadRequestError(f"content: {len(content)} characters, over the "
                              f"{MAX_ADD_CHARS}-character limit", field="content")
    src = clean_source(source)
    items = split_items(content.replace("\r\n", "\n"))
    if not items:
        raise BadRequestError("content: no items (empty or only separators)", field="content")
    seen: dict[str, int] = {}
    for e in doc.entries:
        for it in e.items:
            seen.setdefault(item_key(it), e.line)
    new: list[str] = []
    dups: list[str] = []
    first_dup_line: int | None = None
    for it in items:
        k = item_key(it)
        if k in seen:
            dups.append(it)
            if first_dup_line is None and seen[k] > 0:
                first_dup_line = seen[k]
            continue
        seen[k] = 0  # within this request
        new.append(it)
    total = len(doc.entries)
    if not new:
        assert first_dup_line is not None
        return None, AddResult(first_dup_line, total, True, (), tuple(dups))
    if total >= max_entries:
        raise MemoryFullError(f"MEMORY.md is full: {total} entries, the limit is "
                              f"{max_entries}; delete or merge entries first", field="content")
    lines = [*doc.lines, format_entry(today, src, new)]
    size = len(format_lines(lines).encode("utf-8"))
    if size > max_bytes:
        raise MemoryFullError(f"MEMORY.md would be {size} bytes, over the {max_bytes}-byte "
                              "limit; delete or shorten entries first", field="content")
    return lines, AddResult(len(lines), total + 1, False, tuple(new), tuple(dups))


def plan_delete(doc: Document, lines: Sequence[int]) -> list[str]:
    wanted = sorted(set(lines))
    if not wanted:
        raise BadRequestError("lines: give at least one line number", field="lines")
    out_of_range = [n for n in wanted if not 1 <= n <= len(doc.lines)]
    if out_of_range:
        raise BadRequestError(f"lines: {_numbers(out_of_range)} out of range (the file has "
                              f"{len(doc.lines)} lines)", field="lines")
    not_entries = [n for n in wanted if doc.entry_at(n) is None]
    if not_entries:
        raise BadRequestError(f"lines: {_numbers(not_entries)} not an entry (only entry lines "
                              "can be deleted; edit the file for other text)", field="lines")
    drop = set(wanted)
    return [text for n, text in enumerate(doc.lines, 1) if n not in drop]


def _numbers(ns: Sequence[int]) -> str:
    return ("line " if len(ns) == 1 else "lines ") + ", ".join(map(str, ns[:10])) + (
        ", ..." if len(ns) > 10 else "")


def newest_first(entries: Sequence[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.date, e.line), reverse=True)


def stats(doc: Document, max_entries: int = MAX_ENTRIES) -> dict[str, Any]:
    dates = sorted(e.date for e in doc.entries)
    per_source = Counter(e.source for e in doc.entries)
    return {"total": len(doc.entries), "limit": max_entries,
            "per_source": dict(sorted(per_source.items())),
            "first_date": dates[0] if dates else None,
            "last_date": dates[-1] if dates else None,
            "invalid_lines": len(doc.problems)}


@dataclass(frozen=True)
class SearchOutcome:
    total: int
    results: tuple[Entry, ...]

    @property
    def message(self) -> str:
        return f"{self.total} matches, showing {len(self.results)}"


def search(doc: Document, keywords: Sequence[str], mode: Literal["or", "and"] = "or",
           max_results: int = 15) -> SearchOutcome:
    """Case-insensitive substring match of each keyword against an entry's source and
    items (plain substrings, so CJK works). Best first: most keywords matched, then
    newest. No match gives no results: never the whole file."""
    keys = [k.casefold() for k in keywords if k.strip()]
    if not keys:
        return SearchOutcome(0, ())
    scored: list[tuple[int, Entry]] = []
    for e in doc.entries:
        hay = "\n".join((e.source, *e.items)).casefold()
        hits = sum(1 for k in keys if k in hay)
        if hits and (mode == "or" or hits == len(keys)):
            scored.append((hits, e))
    scored.sort(key=lambda he: (he[0], he[1].date, he[1].line), reverse=True)
    return SearchOutcome(len(scored), tuple(e for _, e in scored[:max_results]))


# --- the file -------------------------------------------------------------------------


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
                 lock_timeout: float = 5.0) -> None:
        self.path = path
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
        self._last_poll_error: str | None = None

    @classmethod
    def from_paths(cls, paths: Paths, **kw: Any) -> MemoryFile:
        return cls(paths.memory_dir / FILENAME, **kw)

    async def start(self) -> None:
        try:
            await self.snapshot()  # the baseline: not reported as a change
        except MemorydError as e:  # a broken file is reported by each request, not fatal
            log.warning("%s: %s", self.path, e.message)
        if self.poll_interval > 0 and self._task is None:
            self._task = asyncio.create_task(self._poll(), name="memoryd-memory-poll")

    async def stop(self) -> None:
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
        await asyncio.to_thread(validate_content, content, max_entries=self.max_entries,
                                max_bytes=self.max_bytes)
        return (await self._mutate("replace", lambda _s: (content, None), version))[1]

    async def add(self, content: str, source: str = "manual") -> AddResult:
        day = self.today()
        if isinstance(day, datetime):
            day = day.date()

        def plan(s: Snapshot) -> tuple[str | None, AddResult]:
            lines, result = plan_add(s.doc, content, source, day,
                                     max_entries=self.max_entries, max_bytes=self.max_bytes)
            return (None if lines is None else format_lines(lines)), result

        return (await self._mutate("add", plan))[0]

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
            raise MemoryIOError(f"cannot write {self.path}: {e}") from None
        # The pre-rename stat may differ from the final one (rename touches ctime): that
        # costs one re-read next time, and can never hide an edit made after ours.
        self._snap = Snapshot.of(key, data)

    def _ensure_dir(self) -> None:
        d = self.path.parent
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        if d.stat().st_mode & 0o777 != 0o700:
            d.chmod(0o700)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        try:
            self._ensure_dir()
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise MemoryIOError(f"cannot open {self.lock_path}: {e}") from None
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise MemoryLockedError(
                            f"another process holds {self.lock_path} (waited "
                            f"{self.lock_timeout:g}s); try again") from None
                    time.sleep(0.02)  # a worker thread, never the loop
            yield
        finally:
            os.close(fd)  # releases the lock

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

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await self.snapshot()
                self._last_poll_error = None
            except Exception as e:
                msg = e.message if isinstance(e, MemorydError) else repr(e)
                if msg != self._last_poll_error:
                    log.warning("watching %s: %s", self.path, msg,
                                exc_info=not isinstance(e, MemorydError))
                self._last_poll_error = msg
