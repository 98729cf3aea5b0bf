"""Moving a history between stores (issue 14 item 8): `memoryctl store migrate --to URL`
runs `python -m memoryd.move`, which copies one store's history (the embedded
SQLite file, or a PostgreSQL namespace) into another, table by table, in batches.

Ids change between stores (the destination hands out its own), so every copied row's
source id and new id are recorded in `_migrate_map` in the destination, in the same
transaction as the rows themselves. That one table makes the copy

- resumable: a killed run (kill -9 included) left whole batches behind, each with its
  map rows; the next run starts after the last mapped source id of each table;
- idempotent: a row already mapped is not copied again, and a row whose natural key the
  destination already holds (a session by agent and id, a unit by session and record,
  a file by machine and path, a memory entry by key) is mapped to that row, not doubled;
  a row of a table with no unique key (a summary, a served-context or LLM usage record,
  a job) is the same row when the destination holds one with the same values in its
  `same` columns (references mapped) that no other source row took: so the same history
  copied again from a moved home, or back into the home it came from, doubles nothing;
- consistent: foreign keys (a unit's session and file, a summary's session, a memory
  entry's sessions and the unit ids of its provenance, a job's `session:N` target) are
  rewritten through the map.

The memory folder moves along (MEMORY.md, HISTORY.md, the daily notes and this machine's
merge bases: `memoryd.move.docs`). Progress goes to stdout as JSON lines
(`memoryd.cli.store` draws the bar). The URL is only ever printed masked.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.errors import StoreError
from memoryd.move.docs import TABLE as TABLE_DOCS
from memoryd.move.docs import copy_docs
from memoryd.move.ends import End, open_end, quote_col
from memoryd.store_target import StoreTarget, is_postgres, refuse_password_in_flag

BATCH = 2000
MAP_DDL = ("CREATE TABLE IF NOT EXISTS _migrate_map (src text NOT NULL, tbl text NOT NULL, "
           "src_id bigint NOT NULL, dst_id bigint NOT NULL, PRIMARY KEY (src, tbl, src_id))")


@dataclass(frozen=True)
class Table:
    """One table to copy: its natural key (to map a row the destination already holds),
    the columns that hold another table's id, and which rows are worth copying. A table
    with no unique key names `same`, the columns whose values make a row the same row
    copied before, the first of them indexed (the lookup). `id` is the column a row is
    known by: its own id, or for a row that belongs to another (a unit's vector) that
    row's id, mapped like any reference."""

    name: str
    key: tuple[str, ...] = ()
    refs: dict[str, str] = field(default_factory=dict)  # column -> referenced table
    where: str = ""
    same: tuple[str, ...] = ()
    id: str = "id"


# in dependency order: a table's references are copied before it
TABLES = [
    Table("sessions", ("agent", "machine", "session_id")),
    Table("files", ("machine", "path")),
    Table("units", ("session_pk", "record_id"), {"session_pk": "sessions", "file_id": "files"}),
    Table("summaries", (), {"session_pk": "sessions"},
          same=("session_pk", "from_seq", "upto_seq", "created_at", "made_by", "summary")),
    Table("memory_items", ("item_key",)),
    Table("served_context",
          same=("ts", "via", "agent", "session_id", "query", "tokens", "budget_tokens")),
    Table("exclusions", ("machine", "kind", "value")),
    Table("llm_usage", same=("day", "ts", "model", "purpose", "target", "input_tokens",
                             "output_tokens", "outcome")),
    # finished jobs are history the destination does not need; pending and failed ones
    # are work still owed (a summary to write, a consolidation that failed)
    Table("jobs", (), {}, "state IN ('pending', 'failed')",
          same=("kind", "target", "created_at")),
    # which days consolidation covered: without them the history job redoes every day
    Table("consolidation_runs", same=("day", "at", "trigger")),
    # the units' vectors (the memoryd[embed] extra): a moved history is not embedded
    # again (a 200k-unit one is ~12 core-hours)
    Table("unit_vectors", ("unit_id",), {"unit_id": "units"}, id="unit_id"),
]
# tables without an id of their own: keyed by the (mapped) ids they hold
LINKS = {"memory_item_sessions": {"item_id": "memory_items", "session_pk": "sessions"},
         "archived_sessions": {"session_pk": "sessions"}}


class Migration:
    def __init__(self, src: End, dst: End, emit: Callable[[dict[str, Any]], None],
                 machine: str = "", folders: tuple[Path, Path] | None = None) -> None:
        """`folders`: this home's memory folder and state dir, when the memory files
        move too (memoryd.move.docs)."""
        self.src, self.dst, self.emit = src, dst, emit
        self.machine, self.folders = machine, folders
        # SQLite is one machine and names it '' (sessions, files, exclusions); in the
        # shared store those rows are this machine's, or its daemon would read every
        # transcript again as another machine's and store each unit twice
        self.machine_map: dict[Any, Any] = {}
        if machine and src.engine == "sqlite" and dst.engine == "postgresql":
            self.machine_map = {"": machine}
        elif machine and src.engine == "postgresql" and dst.engine == "sqlite":
            self.machine_map = {machine: ""}
        self.copied: dict[str, int] = {}
        self.mapped: dict[str, int] = {}  # rows the destination already held
        self.taken: set[int] = set()  # destination ids of the table being copied, mapped

    def _count_rows(self, table: str, copied: int, there: int) -> None:
        self.copied[table] = self.copied.get(table, 0) + copied
        self.mapped[table] = self.mapped.get(table, 0) + there

    # -- the id map ---------------------------------------------------------------------

    def _map_ids(self, tbl: str, ids: list[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for r in self.dst.conn.execute(
                    f"SELECT src_id, dst_id FROM _migrate_map WHERE src = ? AND tbl = ? "
                    f"AND src_id IN ({marks})", (self.src.label, tbl, *chunk)):
                out[r[0]] = r[1]
        return out

    def _resume_after(self, tbl: str) -> int:
        row = self.dst.conn.execute("SELECT max(src_id) FROM _migrate_map WHERE src = ? "
                                    "AND tbl = ?", (self.src.label, tbl)).fetchone()
        self.dst.rollback() if self.dst.engine == "postgresql" else None
        return int(row[0] or 0)

    # -- copying ------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.dst.conn.execute(MAP_DDL)
        if self.dst.engine == "postgresql":
            self.dst.commit()
        started = time.monotonic()
        totals = {t.name: self._count(t) for t in TABLES}
        self.emit({"event": "start", "from": self.src.label, "to": self.dst.label,
                   "totals": totals})
        for t in TABLES:
            self._copy(t, totals[t.name])
        for name, refs in LINKS.items():
            self._copy_links(name, refs)
        if self.folders is not None:  # the memory folder (memoryd.move.docs)
            copied, there = copy_docs(self.src, self.dst, *self.folders, self.machine, self.emit)
            self._count_rows(TABLE_DOCS, copied, there)
        elapsed = time.monotonic() - started
        units = self.copied.get("units", 0)
        return {"event": "done", "from": self.src.label, "to": self.dst.label,
                "copied": self.copied, "already_there": self.mapped,
                "elapsed_s": round(elapsed, 3),
                "units_per_s": round(units / elapsed, 1) if elapsed > 0 else None}

    def _count(self, t: Table) -> int:
        where = f" WHERE {t.where}" if t.where else ""
        n = self.src.conn.execute(f"SELECT count(*) FROM {t.name}{where}").fetchone()[0]
        if self.src.engine == "postgresql":
            self.src.rollback()
        return int(n)

    def _source_rows(self, t: Table, after: int, cols: list[str]) -> Iterator[list[Any]]:
        where = f" AND {t.where}" if t.where else ""
        while True:
            rows = self.src.conn.execute(
                f"SELECT {t.id}, {', '.join(quote_col(c) for c in cols)} FROM {t.name} "
                f"WHERE {t.id} > ?{where} ORDER BY {t.id} LIMIT ?", (after, BATCH)).fetchall()
            if self.src.engine == "postgresql":
                self.src.rollback()
            if not rows:
                return
            yield [list(r) for r in rows]
            after = rows[-1][0]

    def _copy(self, t: Table, total: int) -> None:
        if t.refs and self.dst.engine == "postgresql":
            # its references are looked up in the map, which the tables before filled:
            # planned on the map as it was (empty), each lookup of a batch's 2,000 unit
            # ids read every unit's row (a 100k-unit history's vectors: 78 s; now 4)
            self.dst.conn.execute("ANALYZE _migrate_map")
            self.dst.commit()
        dst_cols = set(self.dst.columns(t.name))
        cols = [c for c in self.src.columns(t.name) if c != "id" and c in dst_cols]
        after = self._resume_after(t.name)
        done = self._done_before(t, after)
        self.taken = self._taken(t) if t.same else set()
        insert = (f"INSERT INTO {t.name} ({', '.join(quote_col(c) for c in cols)}) VALUES "
                  f"({', '.join('?' * len(cols))}) ON CONFLICT DO NOTHING RETURNING {t.id}")
        for rows in self._source_rows(t, after, cols):
            self.dst.begin()
            try:
                pairs = self._insert_batch(t, cols, rows, insert)
                self.dst.record_map(self.src.label, t.name, pairs)
                self.dst.commit()
            except BaseException:
                self.dst.rollback()
                raise
            done += len(rows)
            self.emit({"event": "progress", "table": t.name, "done": done, "total": total})

    def _done_before(self, t: Table, after: int) -> int:
        if not after:
            return 0
        where = f" AND {t.where}" if t.where else ""
        n = self.src.conn.execute(f"SELECT count(*) FROM {t.name} WHERE {t.id} <= ?{where}",
                                  (after,)).fetchone()[0]
        if self.src.engine == "postgresql":
            self.src.rollback()
        return int(n)

    def _insert_batch(self, t: Table, cols: list[str], rows: list[list[Any]],
                      insert: str) -> list[tuple[int, int]]:
        refs = [(cols.index(col), ref) for col, ref in t.refs.items() if col in cols]
        maps = {ref: self._map_ids(ref, sorted({r[1 + i] for r in rows
                                                if r[1 + i] is not None}))
                for i, ref in refs}
        target = cols.index("target") if t.name == "jobs" else None
        machine = cols.index("machine") if "machine" in cols and self.machine_map else None
        owner = cols.index(t.id) if t.id in cols else None  # a row that belongs to another
        kept, values = [], []
        for r in rows:
            v = r[1:]
            if machine is not None:
                v[machine] = self.machine_map.get(v[machine], v[machine])
            for i, ref in refs:
                if v[i] is not None:
                    v[i] = maps[ref].get(v[i])
            if target is not None:
                v[target] = self._job_target(v[target])
            if owner is not None and v[owner] is None:
                continue  # the row it belongs to was not copied
            kept.append(r)
            values.append(v)
        rows = kept
        there = self._same_there(t, cols, values) if t.same else [None] * len(values)
        fresh = [v for v, d in zip(values, there, strict=True) if d is None]
        made = iter(self.dst.insert_staged(t.name, cols, fresh, t.id)
                    if self.dst.engine == "postgresql" else self.dst.insert_many(insert, fresh))
        pairs = []
        for r, v, old in zip(rows, values, there, strict=True):
            new = None if old is not None else next(made)
            if old is not None:  # the same row, copied before from elsewhere
                new = old
                self._count_rows(t.name, 0, 1)
            elif new is None and t.key:  # the destination holds this row already
                new = self._by_key(t, cols, v)
                self._count_rows(t.name, 0, 1)
            elif new is None:  # a pending job the destination already owes
                continue
            else:
                self._count_rows(t.name, 1, 0)
            pairs.append((r[0], new))
        if t.same:  # a row copied now is the copy of its source row, not another's
            self.taken.update(new for _, new in pairs)
        return pairs

    def _taken(self, t: Table) -> set[int]:
        """The destination ids already mapped from this source (a resumed run): each
        stands for one source row and is not matched to another."""
        rows = self.dst.conn.execute("SELECT dst_id FROM _migrate_map WHERE src = ? AND "
                                     "tbl = ?", (self.src.label, t.name)).fetchall()
        if self.dst.engine == "postgresql":
            self.dst.rollback()
        return {int(r[0]) for r in rows}

    def _same_there(self, t: Table, cols: list[str], values: list[list[Any]]
                    ) -> list[int | None]:
        """For each row of the batch (references already mapped), the id of the same row
        in the destination, if it holds one not taken yet; else None. Rows the same in
        every `same` column are matched one to one, so a history holding two identical
        rows keeps two."""
        at = [cols.index(c) for c in t.same]
        probe = sorted({v[at[0]] for v in values if v[at[0]] is not None})
        names = ", ".join(quote_col(c) for c in t.same)
        there: dict[tuple[Any, ...], list[int]] = {}
        for i in range(0, len(probe), 500):
            chunk = probe[i:i + 500]
            for r in self.dst.conn.execute(
                    f"SELECT id, {names} FROM {t.name} WHERE {quote_col(t.same[0])} IN "
                    f"({','.join('?' * len(chunk))}) ORDER BY id", chunk).fetchall():
                if r[0] not in self.taken:
                    there.setdefault(tuple(r[1:]), []).append(int(r[0]))
        out: list[int | None] = []
        for v in values:
            ids = there.get(tuple(v[i] for i in at))
            out.append(ids.pop(0) if ids else None)
            if out[-1] is not None:
                self.taken.add(out[-1])
        return out

    def _by_key(self, t: Table, cols: list[str], v: list[Any]) -> int:
        cond = " AND ".join(f"{quote_col(k)} = ?" for k in t.key)
        row = self.dst.conn.execute(f"SELECT {t.id} FROM {t.name} WHERE {cond}",
                                    [v[cols.index(k)] for k in t.key]).fetchone()
        if row is None:
            raise StoreError(f"{t.name}: a row conflicted with one that is not there")
        return int(row[0])

    def _job_target(self, target: str) -> str:
        kind, sep, pk = target.partition(":")
        if sep and kind == "session" and pk.isdigit():
            new = self._map_ids("sessions", [int(pk)]).get(int(pk))
            return f"session:{new}" if new is not None else target
        return target

    def _copy_links(self, name: str, refs: dict[str, str]) -> None:
        dst_cols = set(self.dst.columns(name))
        cols = [c for c in self.src.columns(name) if c in dst_cols]
        rows = [list(r) for r in self.src.conn.execute(f"SELECT {', '.join(cols)} FROM {name}")]
        if self.src.engine == "postgresql":
            self.src.rollback()
        maps = {ref: self._map_ids(ref, sorted({r[cols.index(c)] for r in rows}))
                for c, ref in refs.items()}
        unit_map = (self._map_ids("units", sorted({u for r in rows for u in
                                                    json.loads(r[cols.index("unit_ids")])}))
                    if "unit_ids" in cols else {})
        insert = (f"INSERT INTO {name} ({', '.join(cols)}) VALUES "
                  f"({', '.join('?' * len(cols))}) ON CONFLICT DO NOTHING RETURNING 1")
        values = []
        for r in rows:
            for c, ref in refs.items():
                r[cols.index(c)] = maps[ref].get(r[cols.index(c)])
            if any(r[cols.index(c)] is None for c in refs):
                continue  # its session or entry was not copied
            if "unit_ids" in cols:
                ids = json.loads(r[cols.index("unit_ids")])
                r[cols.index("unit_ids")] = json.dumps([unit_map[u] for u in ids
                                                        if u in unit_map])
            values.append(r)
        self.dst.begin()
        try:
            n = sum(1 for x in self.dst.insert_many(insert, values) if x is not None)
            self.dst.commit()
        except BaseException:
            self.dst.rollback()
            raise
        self._count_rows(name, n, len(values) - n)
        self.emit({"event": "progress", "table": name, "done": len(values),
                   "total": len(values)})


def main(argv: list[str] | None = None) -> int:
    global BATCH
    ap = argparse.ArgumentParser(prog="python -m memoryd.move")
    ap.add_argument("--home")
    ap.add_argument("--config", type=Path)
    ap.add_argument("--to", required=True, help="postgresql://… or sqlite")
    ap.add_argument("--from", dest="source",
                    help="postgresql://… or sqlite (default: the other one: the "
                         "configured [store] url, or this home's SQLite file)")
    ap.add_argument("--namespace")
    ap.add_argument("--machine")
    ap.add_argument("--sqlite-path", type=Path,
                    help="the SQLite file (default: this home's memoryd.db)")
    ap.add_argument("--batch", type=int, default=BATCH, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    BATCH = max(1, args.batch)

    def emit(d: dict[str, Any]) -> None:
        print(json.dumps(d, ensure_ascii=False), flush=True)

    from memoryd.config import load_settings
    from memoryd.paths import resolve_paths

    paths = resolve_paths(args.home)
    try:
        refuse_password_in_flag(args.to, "--to")  # readable in /proc/PID/cmdline
        refuse_password_in_flag(args.source or "", "--from")
        settings = load_settings(args.config or paths.config_file)
        configured = settings.store.target()
        source = args.source or (configured.url if is_postgres(args.to) is False
                                 else "sqlite")
        if not is_postgres(args.to) and not is_postgres(source or ""):
            raise StoreError("--to sqlite copies from PostgreSQL: give --from "
                             "postgresql://… or set [store] url")
        if is_postgres(args.to) and is_postgres(source):
            raise StoreError("copy between two PostgreSQL namespaces with pg_dump; "
                             "migrate copies between SQLite and PostgreSQL")
        url = args.to if is_postgres(args.to) else source
        target = StoreTarget(url=url, namespace=args.namespace or configured.namespace,
                             machine=args.machine or configured.machine,
                             password_file=configured.password_file)
        sqlite_path = args.sqlite_path or paths.db
        if not is_postgres(source) and not sqlite_path.exists():
            raise StoreError(f"no history to copy: {sqlite_path} does not exist")
        src = open_end(source, target, sqlite_path)
        try:
            dst = open_end(args.to, target, sqlite_path)
            try:
                emit(Migration(src, dst, emit, target.machine,
                               (paths.memory_dir, paths.state_dir)).run())
            finally:
                dst.close()
        finally:
            src.close()
    except (StoreError, sqlite3.Error, ValueError) as e:
        text = str(e)
        if "target" in locals():
            text = target.scrub(text)
        emit({"event": "error", "error": text})
        return 1
    except Exception as e:  # a driver error: its text may quote the URL
        scrub = locals()["target"].scrub if "target" in locals() else (lambda s: s)
        emit({"event": "error", "error": f"{type(e).__name__}: {scrub(str(e))}"})
        return 1
    return 0

