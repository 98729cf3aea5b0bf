"""Transcript files into the store, incrementally.

`ingest_file` reads a file from its cursor in batches: reading and parsing run in a
worker thread, and each batch's units are written in one transaction together with
the cursor that covers them, so a crash at any point neither loses nor duplicates a
line. Bad lines are skipped, counted per file and logged as path:line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.runtime import lag_trace
from memoryd.errors import StoreUnavailableError
from memoryd.ingest import adapters
from memoryd.ingest.adapters.base import Adapter, content_id, shape_error
from memoryd.models import Record
from memoryd.ingest.cursor import (
    WINDOW,
    complete_lines,
    fingerprint,
    first_line,
    is_continuation,
    window_hash,
)
from memoryd.ingest.detect import AUTO_OBJECTS, look
from memoryd.ingest.failures import Failure, Failures
from memoryd.ingest.identity import claim_session, keep_session, move_cursor
from memoryd.ingest.redact import Redactor
from memoryd.store import Store
from memoryd.store.files import Cursor, get_cursor, live_cursors, mark_gone, save_cursor
from memoryd.store.sessions import session_pk
from memoryd.store.units import SessionWriter

log = logging.getLogger(__name__)

BATCH_BYTES = 4 << 20
BATCH_ITEMS = 2000
MAX_DOCUMENT_BYTES = 256 << 20
LIVE_MS = 60_000  # a file written this recently and read now is a live change


@dataclass
class Batch:
    cursor: Cursor
    items: list[tuple[Record, str, int]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    done: bool = True
    reset: bool = False


@dataclass(frozen=True, slots=True)
class IngestEvent:
    """Published after every committed batch that stored something new."""

    path: str
    agent: str
    new_units: dict[int, int]  # session row id -> units added


@dataclass
class IngestStats:
    units: int = 0  # new units stored by this process
    batches: int = 0
    bad_lines: int = 0
    errors: int = 0
    last_error: str | None = None
    last_lag_ms: float | None = None  # file written -> searchable, for the latest live change


@dataclass(frozen=True, slots=True)
class Seen:
    """What a file looked like when we last read it, kept in memory so the periodic
    reconciliation is a stat per file and no database read."""

    size: int
    mtime_ns: int
    inode: int
    offset: int
    transcript: bool
    # complete lines were left past `offset` (a read that stopped at its batch size, and
    # whose next batch may have failed): unread even though the file has not changed
    more: bool = False

    def changed(self, st: os.stat_result) -> bool:
        return (st.st_size, st.st_mtime_ns, st.st_ino) != (self.size, self.mtime_ns, self.inode)


_decoder = json.JSONDecoder()
_decode, _scan = _decoder.decode, _decoder.scan_once


def _loads(data: bytes) -> Any:
    """`json.loads(data)` for a line's bytes. A line that cannot be UTF-16 or -32 or start
    with a byte-order mark (no NUL in its first four bytes, no BOM's first byte) is decoded
    as UTF-8 directly, without `json.loads`' encoding sniffing (every line of a backfill
    passes here), and scanned by the decoder's C scanner: a line that is one value and
    nothing else is that value; any other (blanks around it, extra data, an error) goes
    through `JSONDecoder.decode`, which says why (its two whitespace matches and frames
    were a fifth of a line's decoding: bench/README, branch `bcpu`)."""
    if data[:1] in b"\xef\xfe\xff" or b"\x00" in data[:4]:  # also b"": json.loads says why
        return json.loads(data)
    text = data.decode("utf-8", "surrogatepass")
    try:
        obj, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return _decode(text)
    return obj if end == len(text) else _decode(text)


class Ingestor:
    def __init__(self, store: Store, redactor: Redactor, *, max_line_bytes: int) -> None:
        self.store = store
        self.redactor = redactor
        self.max_line_bytes = max_line_bytes
        self.stats = IngestStats()
        self.seen: dict[str, Seen] = {}
        self.subscribers: list[Callable[[IngestEvent], None]] = []
        self._warned: set[str] = set()
        self.failures = Failures()
        self.vanished: dict[int, str] = {}  # inode -> path of transcripts that went away
        self.parked: dict[str, Path] = {}  # files not read while the store was unreachable

    def status(self, bad_files: list[dict[str, Any]],
               failing: dict[str, Failure] | None = None) -> dict[str, Any]:
        """`ingest` in `/v1/status`: this run's counts and last error, and the files that
        fail (`failing`: as copied when the unread bytes were counted) or hold bad lines
        (`bad_files`: the store's, read with its counts)."""
        st = self.stats
        return {"units_this_run": st.units, "batches": st.batches,
                "bad_lines_this_run": st.bad_lines, "errors": st.errors,
                "last_error": st.last_error, **self.failures.report(bad_files,
                                                                     failing=failing)}

    async def load_seen(self) -> None:
        for c in await self.store.read(lambda c: live_cursors(c, self.store.machine)):
            self._remember(c)

    def _remember(self, c: Cursor, *, more: bool = False) -> None:
        self.seen[c.path] = Seen(c.size, c.mtime_ns or 0, c.inode or 0, c.offset,
                                 c.agent is not None, more)

    def unread_view(self, queued: Iterable[Path] = ()) -> tuple[dict[str, Seen], list[Path]]:
        """On the event loop: the known files and those still to read, copied, so that
        `unread_bytes` in a worker thread and a caller's count of what was read since see
        the same instant (a file read in between would otherwise count as both read and
        unread). `Seen` records are replaced on each read, never changed in place."""
        seen = dict(self.seen)
        todo = [*queued, *(Path(k) for k in [*self.failures.failing, *self.parked])]
        return seen, todo

    def unread_bytes(self, queued: Iterable[Path] = (),
                     seen: dict[str, Seen] | None = None) -> int:
        """Bytes of complete lines not yet read, over every known file (`seen`, by default
        the live map; pass `unread_view`'s copy from a worker thread) and the `queued`
        ones never read yet (stats them: call from a worker thread). A file unchanged
        since its last read that read to its end has none: what is left past its cursor is a
        partial line. One whose read stopped between batches (the next batch still to come,
        or failed: the disk full) has what lies past its cursor."""
        if seen is None:
            seen, queued = self.unread_view(queued)
        total = 0
        for path in dict.fromkeys(queued):
            if str(path) not in seen:
                try:
                    total += os.stat(path).st_size
                except OSError:
                    continue
        for path, s in seen.items():
            if not s.transcript:
                continue
            try:
                st = os.stat(path)
            except OSError:
                continue
            if s.changed(st) or s.more:
                total += max(0, st.st_size - (s.offset if st.st_ino == s.inode else 0))
        return total

    async def ingest_file(self, path: Path, root: Path, agent: str, *, live: bool = False) -> int:
        """Read what is new in `path`; `agent` is a format name or "auto". Returns the
        number of new units. Never raises for a bad or vanished file; a file that fails
        is recorded in `failures` and not tried again until its backoff has passed."""
        key = str(path)
        if not self.failures.due(key):
            return 0
        lag_trace.stage("ingest", path.name)
        try:
            # on the writer: never queued behind query readers (a cursor read is tiny)
            cursor = await self.store.write(lambda c: get_cursor(c, key, self.store.machine))
            lag_trace.stage("cursor")
            if cursor is None:
                cursor = await self._moved_here(path, root)
            # one thread hop for both (under load each hop waits for the GIL)
            adapter, cursor, batch = await asyncio.to_thread(self._prepare_and_read, path,
                                                             root, agent, cursor)
            if adapter is None:
                if cursor is not None:
                    await self.store.write(lambda c: save_cursor(c, cursor))
                    self._remember(cursor)
                return 0
            new = 0
            while True:
                if batch is None:
                    batch = await asyncio.to_thread(self._read_batch, path, root, adapter,
                                                    cursor)
                lag_trace.stage("read", len(batch.items))
                added = await self.store.write(lambda c, b=batch: self._commit_bounded(
                    c, adapter, b))
                lag_trace.stage("stored", sum(added.values()))
                new += sum(added.values())
                self._report(path, batch)
                if added:
                    self._publish(IngestEvent(str(path), adapter.agent, added))
                cursor = batch.cursor
                self._remember(cursor, more=not batch.done)
                if batch.done:
                    break
                batch = None
            self.stats.units += new
            if (live or new) and cursor.mtime_ns:
                lag = max(0.0, time.time() * 1000 - cursor.mtime_ns / 1e6)
                # a live change the periodic reconciliation reached before its watch event
                if live or lag < LIVE_MS:
                    self.stats.last_lag_ms = lag
            self._recovered(key)
            return new
        except FileNotFoundError:
            self._recovered(key)
            await self.file_gone(path)
            return 0
        except StoreUnavailableError:
            # the shared database went away: nothing was written and the cursor did not
            # move, so the file itself keeps the lines. Not a failure of the file: it is
            # parked and read again when the store is back (the store's health logs the
            # outage once; daemon.py retries the parked files)
            self.parked[key] = path
            return 0
        except Exception as e:  # the boundary for one file: record, back off, go on
            f = self.failures.record(key, e)
            self.stats.errors += 1
            self.stats.last_error = f"{path}: {f.reason}"
            expected = isinstance(e, OSError | sqlite3.Error | ValueError)
            log.warning("cannot ingest %s (%s, attempt %d, next try in %.0fs): %s", path,
                        f.kind, f.attempts, f.next_try - time.monotonic(), f.reason,
                        exc_info=not expected)
            return 0

    def _recovered(self, key: str) -> None:
        self.parked.pop(key, None)
        if self.failures.clear(key):
            log.info("%s: ingesting again", key)
        if not self.failures.failing:
            self.stats.last_error = None

    async def _moved_here(self, path: Path, root: Path) -> Cursor | None:
        """A new path holding a transcript we already read under another name (same
        inode, same prefix): that file's cursor follows it, and so does its session."""
        ino = (await asyncio.to_thread(os.stat, path)).st_ino
        old = self.vanished.get(ino)
        if old is None:
            old = next((p for p, s in self.seen.items()
                        if s.inode == ino and s.transcript and p != str(path)), None)
        if old is None or old == str(path) or await asyncio.to_thread(os.path.exists, old):
            return None
        cursor = await self.store.write(lambda c: get_cursor(c, old, self.store.machine))
        if cursor is None or cursor.agent is None or cursor.inode != ino:
            return None

        def same_prefix() -> bool:
            with open(path, "rb") as f:
                return window_hash(f, 0, min(WINDOW, cursor.offset)) == cursor.head_hash

        if not await asyncio.to_thread(same_prefix):
            return None
        await self.store.write(lambda c: move_cursor(c, old, str(path), str(root),
                                                     self.store.machine))
        self.vanished.pop(ino, None)
        self.seen.pop(old, None)
        cursor.path, cursor.root = str(path), str(root)
        self._remember(cursor)
        log.info("%s was renamed to %s: same transcript, same session", old, path)
        return cursor

    async def file_gone(self, path: Path) -> None:
        seen = self.seen.get(str(path))
        if seen is not None and seen.transcript and seen.inode:
            self.vanished[seen.inode] = str(path)
        if str(path) in self.seen:
            try:
                await self.store.write(lambda c: mark_gone(c, str(path), self.store.machine))
            except StoreUnavailableError:
                return  # still known: the next reconciliation after the outage retries
            self.seen.pop(str(path), None)

    # -- worker thread ------------------------------------------------------------------

    def _prepare_and_read(self, path: Path, root: Path, agent: str, cursor: Cursor | None
                          ) -> tuple[Adapter | None, Cursor | None, Batch | None]:
        adapter, cursor = self._prepare(path, root, agent, cursor)
        lag_trace.stage("prepared")
        if adapter is None or cursor is None:
            return adapter, cursor, None
        return adapter, cursor, self._read_batch(path, root, adapter, cursor)

    def _prepare(self, path: Path, root: Path, agent: str,
                 cursor: Cursor | None) -> tuple[Adapter | None, Cursor | None]:
        """Decide the adapter; None when the file is not (yet) a transcript or unchanged."""
        st = path.stat()
        if cursor is not None and cursor.agent is None:
            if (st.st_size, st.st_mtime_ns) == (cursor.size, cursor.mtime_ns):
                return None, None  # known non-transcript, unchanged
        if cursor is not None and cursor.agent is not None:
            if (st.st_size, st.st_mtime_ns, st.st_ino) == (cursor.size, cursor.mtime_ns,
                                                           cursor.inode):
                return None, None
            return adapters.for_agent(cursor.agent, path), cursor
        # a file found to be no transcript that grew: looked at again from where the last
        # look stopped (what was looked at is still no transcript's first line)
        since = (cursor.offset if cursor is not None and cursor.inode == st.st_ino
                 and cursor.offset <= st.st_size else 0)
        with open(path, "rb") as f:
            line, complete = first_line(f)
            if not line.strip() and not complete:
                return None, None  # empty or still being created: wait for more
            adapter = None if since else self._detect(path, root, agent, line)
            looked = since
            if adapter is None:
                # bad lines must not hide the transcript behind them: ask again with the
                # lines that are JSON objects (a source named with its agent: every one
                # in the look's window, as the user said what the files are)
                adapter, looked = look(
                    f, self.max_line_bytes, lambda obj: self._detect(path, root, agent, obj),
                    start=since, objects=AUTO_OBJECTS if agent == "auto" else None)
        if adapter is None:
            if str(path) not in self._warned:
                self._warned.add(str(path))
                log.info("%s: not a transcript of a known agent, ignored", path)
            return None, Cursor(str(path), str(root), None, offset=looked, size=st.st_size,
                                mtime_ns=st.st_mtime_ns, inode=st.st_ino,
                                id=cursor.id if cursor else None, machine=self.store.machine)
        fresh = Cursor(str(path), str(root), adapter.agent, id=cursor.id if cursor else None,
                       machine=self.store.machine)
        return adapter, fresh

    @staticmethod
    def _detect(path: Path, root: Path, agent: str, line: bytes) -> Adapter | None:
        if agent == "auto":
            return adapters.detect(path, root, line)
        adapter = adapters.for_agent(agent, path)
        return adapter if adapter.claims(path, root, line) else None

    def _read_batch(self, path: Path, root: Path, adapter: Adapter, cursor: Cursor) -> Batch:
        c = dataclasses.replace(cursor, state=dict(cursor.state))
        batch = Batch(c)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not is_continuation(f, st, c):
                log.info("%s was rewritten, truncated or replaced: reading it again", path)
                c.offset, c.line_no, batch.reset = 0, 0, True
                c.state = keep_session(c.state, adapter.start(path, root))
            if c.offset == 0 and not c.state:
                c.state = adapter.start(path, root)
            if adapter.whole_file:
                self._read_document(f, st, adapter, batch)
            else:
                self._read_lines(f, adapter, batch)
            c.size, c.inode, c.mtime_ns = st.st_size, st.st_ino, st.st_mtime_ns
            c.head_hash, c.tail_hash = fingerprint(f, c.offset)
        return batch

    def _read_lines(self, f: Any, adapter: Adapter, batch: Batch) -> None:
        c = batch.cursor
        consumed = 0
        batch.done = True
        for line in complete_lines(f, c.offset, self.max_line_bytes):
            c.line_no += 1
            c.offset = line.end
            consumed += line.end - line.start
            if line.data is None:
                batch.bad.append((c.line_no, f"line of {line.end - line.start} bytes is over "
                                             f"the {self.max_line_bytes}-byte limit"))
            elif line.data.strip():
                self._parse(line.data, line.start, adapter, batch)
            if consumed >= BATCH_BYTES or len(batch.items) >= BATCH_ITEMS:
                batch.done = False
                break

    def _read_document(self, f: Any, st: os.stat_result, adapter: Adapter, batch: Batch) -> None:
        c = batch.cursor
        if st.st_size > MAX_DOCUMENT_BYTES:
            batch.bad.append((1, f"document of {st.st_size} bytes is over the limit"))
            c.offset = st.st_size
            return
        f.seek(0)
        data = f.read(st.st_size)
        try:
            obj = json.loads(data)
        except ValueError as e:
            # a whole-file writer may be half-way through: try again on the next change
            c.last_error = f"invalid JSON document: {e}"
            return
        c.last_error = None
        c.line_no = 1
        for rec in adapter.parse_document(obj, c.state):
            self._add(rec, 0, batch)
        c.offset = len(data)

    def _parse(self, data: bytes, offset: int, adapter: Adapter, batch: Batch) -> None:
        try:
            obj = _loads(data)
        except ValueError as e:
            batch.bad.append((batch.cursor.line_no, f"invalid JSON: {e}"))
            return
        except RecursionError:
            batch.bad.append((batch.cursor.line_no, "JSON nested too deeply"))
            return
        if (why := shape_error(obj)) is not None:
            batch.bad.append((batch.cursor.line_no, why))
            return
        try:
            records = adapter.parse_line(obj, batch.cursor.state)
        except Exception as e:  # an adapter bug or a bad shape must not stop the file
            log.debug("adapter %s failed", adapter.agent, exc_info=True)
            batch.bad.append((batch.cursor.line_no, f"unexpected shape: {e!r}"))
            return
        for nth, rec in enumerate(records):
            self._add(rec, offset, batch, nth)

    def _add(self, rec: Record, offset: int, batch: Batch, nth: int = 0) -> None:
        clean = self.redactor.clean
        content = clean(rec.content) or ""
        if not content.strip():
            return
        tool_args, title = clean(rec.tool_args), clean(rec.title)
        # most records hold no secret: `clean` then hands back the same strings, and the
        # record needs no copy (`dataclasses.replace` cost about as much as the redaction)
        if not (content is rec.content and tool_args is rec.tool_args and title is rec.title):
            rec = dataclasses.replace(rec, content=content, tool_args=tool_args, title=title)
        # no id of the agent's: the line's place (a file read again from the top after a
        # rewrite derives the same ids, so nothing is stored twice)
        rid = rec.record_id or content_id(rec.role, rec.kind, rec.ts, content, offset, nth)
        batch.items.append((rec, rid, offset))

    # -- writer thread ------------------------------------------------------------------

    def _publish(self, event: IngestEvent) -> None:
        for fn in self.subscribers:
            try:
                fn(event)
            except Exception:
                log.exception("ingest subscriber failed")

    def _commit(self, conn: sqlite3.Connection, adapter: Adapter, batch: Batch) -> dict[int, int]:
        c = batch.cursor
        c.bad_lines += len(batch.bad)
        if c.state.get("title"):  # the cursor's state is stored too: no secret in it
            c.state["title"] = self.redactor.clean(c.state["title"])
        replaced = claim_session(conn, adapter.agent, c.path, c.root, c.state, c.machine)
        file_id = save_cursor(conn, c)
        state = c.state
        default_sid = str(state.get("session_id") or Path(c.path).stem)
        if replaced is not None:
            batch.items = [(dataclasses.replace(r, session_id=default_sid)
                            if r.session_id == replaced else r, rid, off)
                           for r, rid, off in batch.items]
        title = state.get("title")
        projects: dict[str, str | None] = {}
        for rec, _, _ in batch.items:
            sid = rec.session_id or default_sid
            projects[sid] = rec.project or projects.get(sid) or state.get("project")
        pks = {sid: session_pk(conn, adapter.agent, sid, project,
                               title if sid == default_sid else None, c.machine)
               for sid, project in projects.items()}
        if title and default_sid not in pks:
            conn.execute("UPDATE sessions SET title = ? WHERE agent = ? AND machine = ? "
                         "AND session_id = ?", (title, adapter.agent, c.machine, default_sid))
        writers = {pk: SessionWriter(conn, pk) for pk in pks.values()}
        for rec, rid, offset in batch.items:
            writers[pks[rec.session_id or default_sid]].add(rec, rid, file_id, offset)
        added: dict[int, int] = {}
        for pk, w in writers.items():
            if n := w.flush():
                added[pk] = n
        return added

    def _commit_bounded(self, conn: sqlite3.Connection, adapter: Adapter,
                        batch: Batch) -> dict[int, int]:
        """`_commit`, then the WAL cut back if a backfill's batches have grown it past its
        bound (memoryd.store.db.bound_wal): it kept its peak size on disk."""
        added = self._commit(conn, adapter, batch)
        self.store.bound_wal(conn)
        return added

    def _report(self, path: Path, batch: Batch) -> None:
        self.stats.batches += 1
        self.stats.bad_lines += len(batch.bad)
        for i, (line_no, reason) in enumerate(batch.bad):
            self.failures.bad_line(str(path), line_no, reason)
            level = logging.WARNING if i == 0 else logging.DEBUG
            log.log(level, "%s:%d: skipped bad line: %s", path, line_no, reason)
        if len(batch.bad) > 1:
            log.warning("%s: %d bad lines skipped in this batch", path, len(batch.bad))
