"""Fleet mode: one memory folder per namespace, a copy on every machine.

MEMORY.md, HISTORY.md and the daily notes live in the store (`memory_docs`, one row per
file with a version); every machine's daemon writes its own files from them. Every
`interval` seconds (and when woken) a pass compares each file's version in the store and
the file on disk with what this machine last agreed with the store on (its *base*, kept in
`state_dir`):
- only the store moved (another machine consolidated, or its user edited): the file here
  is rewritten from the store;
- only the file here moved (this machine consolidated, or the user edited it here): the
  store takes it, compare-and-swap on the version;
- both moved: a three-way merge (memoryd.memory.merge) in which this machine's changes
  win, written here and then to the store.
MEMORY.md is written through MemoryFile, the daily notes and HISTORY.md through
`consolidate.locked`: each under its file lock, re-read before write (an edit made while
the pass runs, in an editor or by another daemon sharing the folder, is merged, never
overwritten), and while this daemon's consolidation and retention are held (`guards`).
A removed file (a note folded into HISTORY.md) travels as a NULL body. A crash anywhere
repeats the pass: the merge of what is already merged is itself. SQLite mode never builds
one of these.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memoryd.memory import daily, history
from memoryd.memory.atomic import write_atomic
from memoryd.memory.locked import edit_locked
from memoryd.memory.document import FILENAME, split_lines
from memoryd.memory.file import MemoryFile
from memoryd.memory.merge import merge3
from memoryd.store import Store
from memoryd.store import memory_docs as sql

log = logging.getLogger(__name__)

INTERVAL_S = 2.0
STATE_FILE = "fleet-memory.json"  # in state_dir: this machine's bases
Base = tuple[str | None, int]  # (text, version) this machine last agreed on


class FleetMemory:
    def __init__(self, store: Store, memory: MemoryFile, memory_dir: Path, state_dir: Path,
                 *, guards: Sequence[asyncio.Lock] = (), interval: float = INTERVAL_S) -> None:
        self.store, self.memory, self.memory_dir = store, memory, memory_dir
        self.state_path = state_dir / STATE_FILE
        self.guards = guards
        self.interval = interval
        self._base: dict[str, Base] | None = None
        self._seen: dict[str, tuple[int, int] | None] = {}  # the files' stats at the last pass
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._last_error: str | None = None
        self.passes = 0

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                await self.sync()
                if self._last_error is not None:
                    log.info("memory files in step with the store again")
                self._last_error = None
            except Exception as e:  # the store is away: files stay as they are
                msg = str(e)
                if msg != self._last_error:
                    log.warning("syncing the memory files with the store: %s", msg)
                self._last_error = msg
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()

    # -- one pass -------------------------------------------------------------------------

    async def sync(self) -> dict[str, list[str]]:
        """One pass: what was pulled from, pushed to, and merged with the store."""
        async with self._lock:
            if self._base is None:
                self._base = await asyncio.to_thread(self._load_state)
            versions = await self.store.read(sql.versions)
            names = set(versions) | set(self._base) | await asyncio.to_thread(self._local)
            stats = await asyncio.to_thread(lambda: {n: _stat(self._path(n)) for n in names})
            todo = [n for n in sorted(names)
                    if versions.get(n, 0) != self._base.get(n, (None, 0))[1]
                    or stats[n] != self._seen.get(n, ("unseen",))]
            out: dict[str, list[str]] = {"pulled": [], "pushed": [], "merged": []}
            if not todo:
                return out
            async with contextlib.AsyncExitStack() as held:
                for g in self.guards:
                    await held.enter_async_context(g)
                for n in todo:
                    what = await self._one(n, versions.get(n, 0))
                    if what:
                        out[what].append(n)
                    # the stat before this pass read the file: a change made since
                    # (even while this pass wrote) is looked at again next pass
                    self._seen[n] = stats[n]
            if any(out.values()):
                await asyncio.to_thread(self._save_state)
                log.debug("memory files: %s", out)
            self.passes += 1
            return out

    async def _one(self, name: str, version: int) -> str | None:
        assert self._base is not None
        base, base_v = self._base.get(name, (None, 0))
        theirs: str | None = None
        if version != base_v:
            row = await self.store.read(lambda c: sql.get(c, name))
            theirs, version = (None, 0) if row is None else row
        else:
            theirs = base

        def decide(ours: str | None) -> str | None:
            if version == base_v:
                return ours
            return merge3(base, ours, theirs)

        ours, result = await self._write_local(name, decide)
        if result == theirs and version != 0:
            self._base[name] = (result, version)
            return None if ours == result else "pulled"
        if result is None and version == 0:
            self._base.pop(name, None)  # nowhere: nothing to agree on
            return None
        new_v = await self.store.write(lambda c: sql.put(c, name, result, version,
                                                         self.store.machine))
        if new_v is None:  # another machine wrote meanwhile: the next pass merges
            self.wake()
            return None
        self._base[name] = (result, new_v)
        return "pushed" if version == base_v else "merged"

    async def _write_local(self, name: str, decide: Any) -> tuple[str | None, str | None]:
        """Apply `decide` (the file's text now -> what it should be) to the file here:
        (the text it had, the text it has)."""
        if name == FILENAME:
            def plan(doc: Any) -> tuple[list[str] | None, tuple[str | None, str | None]]:
                ours = doc.text if doc.lines else None
                want = decide(ours)
                return (None if want == ours else split_lines(want or "")), (ours, want)

            return await self.memory.rewrite("fleet", plan)

        # the notes and HISTORY.md under their locks, re-read before write, as MEMORY.md
        return await asyncio.to_thread(
            edit_locked, self._path(name), lock_for(self.memory_dir, name),
            lambda ours: ((want := decide(ours)), (ours, want)))

    # -- local state ----------------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self.memory_dir / name

    def _local(self) -> set[str]:
        return memory_files(self.memory_dir)

    def _load_state(self) -> dict[str, Base]:
        return read_bases(self.state_path)

    def _save_state(self) -> None:
        assert self._base is not None
        write_bases(self.state_path, self._base)


def memory_files(memory_dir: Path) -> set[str]:
    """The names of the memory folder's files that are there: MEMORY.md, HISTORY.md and
    the daily notes."""
    names = {f"{d}.md" for d in daily.list_notes(memory_dir)}
    for n in (FILENAME, history.FILENAME):
        if (memory_dir / n).exists():
            names.add(n)
    return names


def lock_for(memory_dir: Path, name: str) -> Path:
    """The lock a writer of that memory file holds (MemoryFile's for MEMORY.md)."""
    if name == FILENAME:
        return memory_dir / f".{FILENAME}.lock"
    if name == history.FILENAME:
        return history.lock_path(memory_dir)
    return daily.lock_path(memory_dir)


def read_bases(path: Path) -> dict[str, Base]:
    """The bases a machine keeps (`store migrate` records them too); {} when none."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {n: (b.get("text"), int(b.get("version", 0))) for n, b in raw.items()}
    except FileNotFoundError:
        return {}
    except (ValueError, AttributeError, TypeError) as e:
        log.warning("%s unreadable (%s): merging every memory file with the store anew",
                    path, e)
        return {}


def write_bases(path: Path, bases: dict[str, Base]) -> None:
    data = {n: {"text": t, "version": v} for n, (t, v) in bases.items()}
    write_atomic(path, json.dumps(data, ensure_ascii=False).encode("utf-8"))


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns)

