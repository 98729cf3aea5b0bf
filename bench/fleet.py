"""The fleet's figures (issue 14, Measure). One PostgreSQL server (tests.pg_server.PgServer,
initdb + pg_ctl in a temporary directory), figures against a raw baseline in the same run.

Measured today:
- `migrate`: `python -m memoryd.store_migrate` (what `memoryctl store migrate` runs) copying
  a single-machine SQLite history of N units into a fresh PostgreSQL namespace, units/s,
  against a raw loop in the same run: the same units read from the same SQLite file and
  inserted into a bare PostgreSQL table with psycopg's `executemany` in batches of 2000
  (no id map, no references, no RETURNING).

Not measured yet (they need the change feed and outage handling, memoryd/fleet/, which
are not on main at this writing): append on one daemon -> searchable on another, search
and context p50/p99 fleet vs SQLite, backfill PG vs SQLite and four daemons at once, the
database stopped 60 s during live appends. `--part` names them so the script refuses
clearly rather than printing a made-up figure.

    .venv/bin/python bench/fleet.py --units 100000        # about 2 min on a quiet machine
    .venv/bin/python bench/fleet.py --units 1000000       # the issue's 1M units
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fleet.history import make_history  # noqa: E402
from tests.pg_server import PgServer, find_bindir  # noqa: E402

PARTS = ("migrate", "follow", "search", "backfill", "outage")


def raw_copy(db: Path, url: str, batch: int = 2000) -> float:
    import psycopg

    from memoryd.store.db import connect

    src = connect(db)
    t0 = time.perf_counter()
    with psycopg.connect(url) as dst:
        dst.execute("CREATE TABLE raw_units (session_pk bigint, record_id text, seq bigint, "
                    "content text, ts double precision)")
        cur = src.execute("SELECT session_pk, record_id, seq, content, ts FROM units")
        while rows := cur.fetchmany(batch):
            with dst.cursor() as c:
                c.executemany("INSERT INTO raw_units VALUES (%s, %s, %s, %s, %s)",
                              [tuple(r) for r in rows])
            dst.commit()
    src.close()
    return time.perf_counter() - t0


def migrate(units: int) -> None:
    sessions = max(1, units // 2000)
    server = PgServer(find_bindir())
    server.init()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            db = home / "data" / "memoryd.db"
            t0 = time.perf_counter()
            n = make_history(db, sessions=sessions, units_per_session=units // sessions)["units"]
            print(f"history: {n} units in {sessions} sessions "
                  f"({time.perf_counter() - t0:.1f}s to generate)")
            raw_s = raw_copy(db, server.url(server.create_database()))
            url = server.url(server.create_database())
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "memoryd.store_migrate", "--home",
                                  str(home), "--to", url], capture_output=True, text=True,
                                 check=True, env={**os.environ})
            total_s = time.perf_counter() - t0
            done = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"cores: {os.cpu_count()}, load average: "
                  f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            print(f"raw executemany into PG: {n / raw_s:,.0f} units/s ({raw_s:.1f}s)")
            print(f"store migrate:           {n / total_s:,.0f} units/s ({total_s:.1f}s "
                  f"whole process; {done['units_per_s']:,.0f} units/s copying) "
                  f"= {raw_s / total_s:.2f}x raw")
    finally:
        server.destroy()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=PARTS, default="migrate")
    ap.add_argument("--units", type=int, default=100_000)
    args = ap.parse_args(argv)
    if args.part != "migrate":
        print(f"{args.part}: not measured yet (needs memoryd/fleet/ on main)", file=sys.stderr)
        return 2
    migrate(args.units)
    return 0


if __name__ == "__main__":
    sys.exit(main())
