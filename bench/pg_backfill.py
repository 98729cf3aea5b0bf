"""Backfill into PostgreSQL vs SQLite, in the same run (issue 14: PG ≥ 0.5× SQLite).

The same generated corpus is backfilled twice by a real `memoryd` subprocess, from spawn
to `caught_up`: once with the embedded SQLite store, once with `[store] url` pointing at
a throwaway PostgreSQL server started here (initdb + pg_ctl, as tests/pg_server.py does).
The raw floor is a bare executemany of the corpus's contents into a one-column table of
each engine. Figures are units/s; only the ratios mean anything on a shared machine.

    .venv/bin/python bench/pg_backfill.py --quick      # 40 files x 250 lines
    .venv/bin/python bench/pg_backfill.py --files 200 --lines 500
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import harness as h  # noqa: E402

from tests.pg_server import PgServer, find_bindir, wait_until_ready  # noqa: E402


def contents(info: h.CorpusInfo) -> list[tuple[str]]:
    rows = []
    for path in h.corpus_files(info.path):
        with open(path, "rb") as f:
            for line in f:
                body = json.loads(line).get("content")
                if body:
                    rows.append((body if isinstance(body, str) else json.dumps(body),))
    return rows


def raw_sqlite(rows: list[tuple[str]], db: Path) -> float:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (body TEXT)")
    t0 = time.perf_counter()
    for i in range(0, len(rows), 2000):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t (body) VALUES (?)", rows[i:i + 2000])
        conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - t0


def raw_pg(rows: list[tuple[str]], url: str) -> float:
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE t (body text)")
        conn.commit()
        t0 = time.perf_counter()
        for i in range(0, len(rows), 2000):
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO t (body) VALUES (%s)", rows[i:i + 2000])
            conn.commit()
        return time.perf_counter() - t0


def backfill(info: h.CorpusInfo, work: Path, env: dict[str, str]
             ) -> tuple[float, float, int, float]:
    """Seconds from spawn until every line is stored (status: backfill done, nothing
    queued or unread), until caught_up (searchable too), the units, and the daemon's
    CPU seconds until caught up (all its threads)."""
    with h.short_dir() as sd:
        d = h.Memoryd(work / "home", Path(info.path), sd / "m.sock",
                      log_path=work / "memoryd.log", env=env)
        try:
            d.wait_ready(timeout=300)
            stored = None
            deadline = time.monotonic() + 3600
            while time.monotonic() < deadline:
                st = d.status()
                if st and stored is None and st["backfill_done"] and not (
                        st["queue_depth"] or st["unread_bytes"]):
                    stored = time.perf_counter() - d.started
                if st and st["caught_up"]:
                    break
                time.sleep(0.1)
            else:
                raise TimeoutError("not caught up within an hour")
            secs = time.perf_counter() - d.started
            cpu = h.proc_cpu_s(d.proc.pid)
        finally:
            d.stop()
    return stored if stored is not None else secs, secs, st["units"], cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=200)
    p.add_argument("--lines", type=int, default=500)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.files, args.lines = 40, 250
    bindir = find_bindir()
    if bindir is None:
        print("no PostgreSQL server binary (apt-get install postgresql)")
        return 2
    print(f"pg backfill benchmark: {h.machine()}")
    info = h.corpus(args.files, args.lines, 1)
    print(f"corpus: {info.files} files, {info.lines:,} lines, {info.bytes / 1e6:.0f} MB")
    rows = contents(info)
    work = h.OUT / "pg-backfill-run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = PgServer(bindir)
    server.init()
    server.start()
    try:
        wait_until_ready(server)
        r_sqlite = raw_sqlite(rows, work / "raw.db")
        r_pg = raw_pg(rows, server.url(server.create_database()))
        s_stored, s_secs, s_units, s_cpu = backfill(info, work / "sqlite", {})
        url = server.url(server.create_database())
        p_stored, p_secs, p_units, p_cpu = backfill(info, work / "pg", {"MEMORYD_STORE__URL": url,
                                                     "MEMORYD_STORE__MACHINE": "bench"})
    finally:
        server.stop()
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)
    n = len(rows)
    table = [["raw executemany, SQLite", f"{r_sqlite:.2f}", f"{n / r_sqlite:,.0f}", f"{n:,}",
              ""],
             ["raw executemany, PostgreSQL", f"{r_pg:.2f}", f"{n / r_pg:,.0f}", f"{n:,}", ""],
             ["memoryd backfill, SQLite", f"{s_secs:.2f}", f"{s_units / s_secs:,.0f}",
              f"{s_units:,}", f"{s_cpu:.1f}"],
             ["memoryd backfill, PostgreSQL", f"{p_secs:.2f}", f"{p_units / p_secs:,.0f}",
              f"{p_units:,}", f"{p_cpu:.1f}"],
             ["(SQLite: every line stored)", f"{s_stored:.2f}", f"{s_units / s_stored:,.0f}",
              "", ""],
             ["(PostgreSQL: every line stored)", f"{p_stored:.2f}",
              f"{p_units / p_stored:,.0f}", "", ""]]
    print()
    print(h.table(table, ["run", "seconds", "units/s", "units", "daemon CPU s"]))
    print()
    print(f"memoryd PG/SQLite rate: {(p_units / p_secs) / (s_units / s_secs):.2f}x   "
          f"raw PG/SQLite rate: {r_sqlite / r_pg:.2f}x   every line stored, PG/SQLite: "
          f"{s_stored / p_stored:.2f}x")
    if s_units != p_units:
        print(f"warning: unit counts differ ({s_units} vs {p_units})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
