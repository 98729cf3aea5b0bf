"""The memory folder moves with the history (`memoryd.move.migrate`; m008's
`memory_docs`, one row per file with a version, and each machine's three-way merge bases
in `state_dir/fleet-memory.json`, see `memoryd.memory.fleet_sync`).

- **Way in** (a SQLite home into a PostgreSQL namespace): a single-machine memoryd's
  truth is its files, so the home's MEMORY.md, HISTORY.md and daily notes become the
  namespace's rows, and this machine's bases record that it agrees with them: its
  daemon's first fleet pass then neither pushes them again nor merges them with
  themselves. A file the namespace already holds with other text (another machine moved
  in first) is left to that first pass, a three-way merge in which this machine's lines
  are kept, rather than overwritten here.
- **Way back** (a namespace into a SQLite home): every row with a body is written into
  the home's folder: a missing file is created; a file that differs is merged three-way
  against this machine's base (its own changes win), under the file's lock, re-read
  before write, as a daemon writes it.

Each file is one step that compares before it writes, and the bases are saved after
each: a run killed anywhere is finished by the next, and a second run changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.memory.locked import edit_locked
from memoryd.memory.fleet_sync import (
    STATE_FILE,
    lock_for,
    memory_files,
    read_bases,
    write_bases,
)
from memoryd.memory.merge import merge3
from memoryd.move.ends import End
from memoryd.store import memory_docs as sql

TABLE = "memory_docs"


def copy_docs(src: End, dst: End, memory_dir: Path, state_dir: Path, machine: str,
              emit: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
    """Move the memory folder along; (files copied or merged, files already there)."""
    if dst.engine == "postgresql":
        return _into_store(dst, memory_dir, state_dir / STATE_FILE, machine, emit)
    return _into_files(src, memory_dir, state_dir / STATE_FILE, emit)


def _into_store(dst: End, memory_dir: Path, state: Path, machine: str,
                emit: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
    names = sorted(memory_files(memory_dir))
    bases = read_bases(state)
    copied = there = 0
    for i, name in enumerate(names, 1):
        try:
            text = (memory_dir / name).read_text(encoding="utf-8")
        except FileNotFoundError:  # folded or removed while we ran
            emit({"event": "progress", "table": TABLE, "done": i, "total": len(names)})
            continue
        row = sql.get(dst.conn, name)
        if row is None:
            version = sql.put(dst.conn, name, text, 0, machine)
            copied += version is not None
        elif row[0] == text:
            version = row[1]
            there += 1
        else:  # another machine's text: the daemon's first pass merges the two
            version = None
        dst.commit()
        if version is not None:
            bases[name] = (text, version)
            write_bases(state, bases)
        emit({"event": "progress", "table": TABLE, "done": i, "total": len(names)})
    return copied, there


def _into_files(src: End, memory_dir: Path, state: Path,
                emit: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
    rows = [(n, sql.get(src.conn, n)) for n in sorted(sql.versions(src.conn))]
    src.rollback()
    bases = read_bases(state)
    copied = there = 0
    for i, (name, row) in enumerate(rows, 1):
        if row is None or row[0] is None:  # a removed file (a note folded): nothing here
            emit({"event": "progress", "table": TABLE, "done": i, "total": len(rows)})
            continue
        theirs = row[0]
        base = bases.get(name, (None, 0))[0]

        def plan(ours: str | None, theirs: str = theirs, base: str | None = base
                 ) -> tuple[str | None, bool]:
            want = theirs if ours is None else merge3(base, ours, theirs)
            return want, want != ours

        changed = edit_locked(memory_dir / name, lock_for(memory_dir, name), plan)
        copied += changed
        there += not changed
        emit({"event": "progress", "table": TABLE, "done": i, "total": len(rows)})
    return copied, there
