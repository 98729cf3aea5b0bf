"""A unit written to PostgreSQL on one connection becoming searchable in a follower's local
tantivy index: memoryd's change feed (`memoryd.fleet`) vs the raw loop issue 14 quotes,
measured in the same run against one PostgreSQL server started for it.

  raw      INSERT into a plain table + NOTIFY in the same transaction; a thread blocked
           on LISTEN reads `id > last` (what a naive follower does, and may skip rows
           committed out of order), adds the documents, commits, reloads, searches
  memoryd  INSERT into `units`, whose statement trigger writes the `changes` row and
           NOTIFYs; a thread runs `Follower` (next_batch: snapshot positions, never
           skipping; re-reads the units by id; delete-then-add, as an upsert is applied;
           commit; reload; search; follower.commit; wait)

Both sides use memoryd's index schema, analyzer and index text, a writer kept open, and
the query memoryd builds for the unit's unique token. Latency runs from just before the
INSERT until the follower's search finds the token. The sides alternate append by
append (which goes first alternates too), 20-50 ms apart, so both see the same noise.
Before that, both catch up a seeded backlog (what a machine meets after an outage):
units per second through each loop.

    .venv/bin/python bench/changefeed.py             # 400 appends per side, 20k seeded
    .venv/bin/python bench/changefeed.py --quick     # 100 appends, 5k seeded
"""

from __future__ import annotations

import argparse
import contextlib
import random
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
import psycopg  # noqa: E402
import tantivy  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from memoryd.fleet import changefeed as cf  # noqa: E402
from memoryd.fleet.follower import Follower  # noqa: E402
from memoryd.index.query import ids_query, text_query  # noqa: E402
from memoryd.index.schema import ANALYZER, build_analyzer, build_schema, document  # noqa: E402
from memoryd.store.pg import feed_ddl  # noqa: E402
from memoryd.index.text import index_text  # noqa: E402
from tests.pg_server import PgServer, find_bindir  # noqa: E402

SCHEMA = "memoryd_bench"
RAW_CHANNEL = "raw_units"
COLS = "id AS unit_id, session_pk, seq, ts, content"
QUOTED = "issue 14's raw loop on its machine: p50 12.5 ms, p99 18.8 ms"


class LocalIndex:
    """A follower's local index: memoryd's schema and analyzer, one open writer."""

    def __init__(self, path: Path) -> None:
        self.schema, self.analyzer = build_schema(), build_analyzer()
        path.mkdir(parents=True)
        self.ix = tantivy.Index(self.schema, path=str(path))
        self.ix.register_tokenizer(ANALYZER, self.analyzer)
        self.w = self.ix.writer(heap_size=16_000_000, num_threads=1)
        self.docs = 0

    def put(self, rows: list[dict[str, Any]], drop: list[int] | None = None) -> None:
        if drop:
            self.w.delete_documents_by_query(ids_query(self.schema, drop))
        for r in rows:
            self.w.add_document(document(r, index_text(r["content"]), ""))
        self.w.commit()
        self.ix.reload()
        self.docs = self.ix.searcher().num_docs

    def finds(self, token: str) -> bool:
        s = self.ix.searcher()
        q = text_query(self.schema, self.analyzer, s, [token])
        return q is not None and bool(s.search(q, 1, count=False).hits)


class Side(threading.Thread):
    """One follower loop on a thread; `expect(token)` arms the search after each commit."""

    def __init__(self, name: str, url: str, index: LocalIndex) -> None:
        super().__init__(name=f"bench-{name}", daemon=True)
        self.label, self.url, self.index = name, url, index
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._token: str | None = None
        self._found = threading.Event()
        self.found_at = 0.0
        self.error: BaseException | None = None
        self.ready = threading.Event()

    def expect(self, token: str) -> threading.Event:
        with self._lock:
            self._token, self._found = token, threading.Event()
            return self._found

    def committed(self) -> None:
        with self._lock:
            token, found = self._token, self._found
        if token and self.index.finds(token):
            self.found_at = time.perf_counter()
            with self._lock:
                self._token = None
            found.set()

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as e:  # reported by main
            self.error = e
            self.ready.set()


class Raw(Side):
    def loop(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as listen, \
                psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as rd:
            listen.execute(f"LISTEN {RAW_CHANNEL}")
            self.ready.set()
            last = 0
            while not self.stop.is_set():
                with contextlib.closing(listen.notifies(timeout=0.5, stop_after=1)) as g:
                    if next(g, None) is None:
                        continue
                rows = rd.execute(f"SELECT {COLS} FROM raw_units WHERE id > %s ORDER BY id",
                                  (last,)).fetchall()
                if rows:
                    self.index.put(rows)
                    last = rows[-1]["unit_id"]
                    self.committed()


class Memoryd(Side):
    def loop(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as c:
            pos = cf.join(c, SCHEMA, "bench")
        f = Follower(self.url, SCHEMA, "bench", pos, poll_interval_s=5.0)
        try:
            with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as rd:
                f.commit(f.next_batch())  # listening from here
                self.ready.set()
                while not self.stop.is_set():
                    b = f.next_batch()
                    if b.changes:
                        ids = list(b.latest())
                        rows = rd.execute(f"SELECT {COLS} FROM {SCHEMA}.units"
                                          " WHERE id = ANY(%s)", (ids,)).fetchall()
                        self.index.put(rows, drop=ids)
                        self.committed()
                    f.commit(b)
                    if not b.more:
                        f.wait(stop=self.stop)
        finally:
            f.close()


def setup(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {SCHEMA}")
        for table in (f"{SCHEMA}.units", "raw_units"):
            c.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, session_pk bigint"
                      " NOT NULL, seq int NOT NULL, ts double precision, content text NOT NULL)")
        c.execute(feed_ddl.ddl(SCHEMA))


def insert(conn: psycopg.Connection, table: str, contents: list[str], notify: bool) -> None:
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} (session_pk, seq, ts, content)"
                            " VALUES (1, %s, %s, %s)",
                            [(i, time.time(), c) for i, c in enumerate(contents)])
        if notify:
            conn.execute(f"NOTIFY {RAW_CHANNEL}")


def catch_up(side: Side, conn: psycopg.Connection, table: str, contents: list[str],
             notify: bool, timeout: float = 600.0) -> float:
    """Seed `contents` in one transaction; seconds until the side has indexed them all."""
    want = side.index.docs + len(contents)
    token = f"seedend{secrets.token_hex(4)}"
    found = side.expect(token)
    t0 = time.perf_counter()
    insert(conn, table, [*contents[:-1], contents[-1] + " " + token], notify)
    deadline = t0 + timeout
    while side.index.docs < want or not found.is_set():
        if time.perf_counter() > deadline or side.error:
            raise RuntimeError(f"{side.label} did not catch up: {side.error}")
        time.sleep(0.005)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 appends, 5k seeded units")
    ap.add_argument("--appends", type=int, default=None, help="appends per side (400)")
    ap.add_argument("--seed-units", type=int, default=None, help="backlog per side (20000)")
    ap.add_argument("--gap-ms", type=float, nargs=2, default=(20.0, 50.0))
    args = ap.parse_args()
    appends = args.appends or (100 if args.quick else 400)
    seeded = args.seed_units if args.seed_units is not None else (5000 if args.quick else 20000)
    bindir = find_bindir()
    if bindir is None:
        print("no PostgreSQL server binary (initdb): apt-get install postgresql")
        return 1
    print(h.machine())
    work = Path(tempfile.mkdtemp(prefix="mdb-feed-"))
    server = PgServer(bindir)
    sides: list[Side] = []
    try:
        server.init()
        server.start()
        url = server.url()
        setup(url)
        sides = [Raw("raw", url, LocalIndex(work / "raw")),
                 Memoryd("memoryd", url, LocalIndex(work / "memoryd"))]
        for s in sides:
            s.start()
        for s in sides:
            if not s.ready.wait(60) or s.error:
                raise RuntimeError(f"{s.label} did not start: {s.error}")
        gen = h.TextGen(1)
        rng = random.Random(7)
        table = {"raw": "raw_units", "memoryd": f"{SCHEMA}.units"}
        with psycopg.connect(url) as w:
            caught: dict[str, float] = {}
            if seeded:
                backlog = [gen.message(rng, "assistant") for _ in range(seeded)]
                for s in sides:
                    caught[s.label] = catch_up(s, w, table[s.label], backlog,
                                               s.label == "raw")
            lags: dict[str, list[float]] = {s.label: [] for s in sides}
            for i in range(appends):
                for s in (sides if i % 2 == 0 else sides[::-1]):
                    token = f"zq{s.label[0]}{i}x{secrets.token_hex(4)}"
                    text = gen.message(rng, "user") + " " + token
                    found = s.expect(token)
                    t0 = time.perf_counter()
                    insert(w, table[s.label], [text], s.label == "raw")
                    if not found.wait(30) or s.error:
                        raise RuntimeError(f"{s.label}: {token} not searchable: {s.error}")
                    lags[s.label].append(s.found_at - t0)
                    time.sleep(rng.uniform(*args.gap_ms) / 1000)
        report(lags, caught, seeded, appends)
        return 0
    finally:
        for s in sides:
            s.stop.set()
        for s in sides:
            s.join(10)
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


def report(lags: dict[str, list[float]], caught: dict[str, float], seeded: int,
           appends: int) -> None:
    raw = h.summary(lags["raw"])
    rows = []
    for name, values in lags.items():
        s = h.summary(values)
        rows.append([name, h.ms(s["p50"]), h.ms(s["p90"]), h.ms(s["p99"]), h.ms(s["max"]),
                     h.ratio(s["p50"], raw["p50"]), h.ratio(s["p99"], raw["p99"])])
    print(f"\ninsert -> searchable in the follower's index, {appends} appends per side")
    print(h.table(rows, ["side", "p50", "p90", "p99", "max", "p50 vs raw", "p99 vs raw"]))
    print(f"({QUOTED})")
    if caught:
        print(f"\ncatching up a backlog of {seeded} units (one transaction)")
        rows = [[name, h.ms(t), f"{seeded / t:,.0f}", h.ratio(caught["raw"], t)]
                for name, t in caught.items()]
        print(h.table(rows, ["side", "time", "units/s", "rate vs raw"]))


if __name__ == "__main__":
    sys.exit(main())
