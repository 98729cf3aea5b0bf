"""The fleet's figures (issue 14, Measure). One PostgreSQL server (tests.pg_server.PgServer,
initdb + pg_ctl in a temporary directory), figures against a raw baseline in the same run.

Measured today:
- `migrate`: `python -m memoryd.move` (what `memoryctl store migrate` runs) copying
  a single-machine SQLite history into a fresh PostgreSQL namespace, units/s: a generated
  history of N units, or with `--store DIR` a built bench store (bench/bigstore.py, the 1M
  one; its database copied first, never written in place). Two floors in the same run,
  from the same SQLite file: every units column COPied into a bare table (no keys, no
  indexes), and sessions, files and units COPied with their own ids into a namespace's
  real tables (keys, indexes, foreign keys, change-feed triggers: the server's share).
- `follow`: two memoryd daemons (subprocesses, two homes, two transcript roots, two
  machine names, one namespace): a line appended to a transcript on machine A, until
  machine B's search (over its socket) finds its unique token; A's and B's searches are
  polled in turn every 5 ms (A's own figure beside, neither waiting for the other). Floor in
  the same run, append by append alternating: issue 14's raw loop (a row INSERTed with
  NOTIFY on one connection, a thread LISTENing reads `id > last`, commits the rows into a
  local tantivy index with memoryd's schema, searches; bench/changefeed.py's `Raw`),
  polled the same way.
- `search`: the same generated corpus ingested by a fleet member (PostgreSQL) and by a
  daemon in SQLite mode; the same queries' `/v1/search` and `/v1/context` over each
  socket, alternating query by query; p50/p99 and the fleet/SQLite ratio. A round as
  soon as both are caught up, then `--rounds` once both are quiet (`wait_quiet`: in one
  5 s window both under 5% of a core, and both statuses say no job running or due and
  no feed change left to apply), each with the daemons' CPU and the load.
- `backfill`: real `memoryd` subprocesses (generic JSONL corpus from bench/harness.py)
  spawned at once, each with its own home, transcript root (a copy of the corpus) and
  machine name, all in one namespace of one PostgreSQL: one daemon alone, and `--daemons`
  (4) at once, in `--repeats` (3) pairs whose order alternates, each phase in a fresh
  database. The figure is units stored in PostgreSQL per second across all daemons (spawn
  until the namespace's `units` holds them all, polled every 0.25 s), 4 at once ÷ 1
  alone within each pair, then the median and spread of the pairs. Beside it: the cores,
  the load average before and after each phase, the PostgreSQL server's own CPU (its
  processes' utime + stime from /proc) as a share of one core, the daemons' CPU seconds,
  and what the server's clients did, sampled every 0.2 s from pg_stat_activity and
  pg_locks (bench/pg_sample.py): running, waiting on a lock (and which), on the WAL's
  fsync, or idle inside a transaction. `--wait-indexed` also times until every daemon's
  index holds the whole namespace. The daemons' bytecode is cached (this machine sets
  PYTHONDONTWRITEBYTECODE; an installed memoryd has its .pyc files). `--sessions`: each
  daemon in a session of its own (`own`, as a service manager starts one), all in the
  bench's session (`shared`), or both, each pair in turn (`both`, the default). With the
  kernel's autogroup scheduling (`/proc/sys/kernel/sched_autogroup_enabled`) CPU time is
  shared fairly between sessions first: daemons in the bench's session share one
  session's share of the machine, however many they are. Beside the CPU seconds, each
  phase prints how long the daemons and the server waited on a run queue for a CPU
  (`/proc/<pid>/task/*/schedstat`).

- `outage`: two daemons (two homes, two transcript roots, two machine names, one
  namespace) appending live lines every 20 ms each; the server is stopped for `--down`
  seconds (60) and started again. Prints the lines written, lost and duplicated per
  machine (counted by content in the database), the catch-up time from the restart to
  both daemons `caught_up`, and each daemon's log lines about the store (one down, one up
  is the goal) and tracebacks.

Not measured here: backfill PG vs SQLite for one daemon (bench/pg_backfill.py).

    .venv/bin/python bench/fleet.py --units 100000        # about 2 min on a quiet machine
    .venv/bin/python bench/fleet.py --units 1000000       # the issue's 1M units
    MEMORYD_BENCH_OUT=/work/bench-data .venv/bin/python bench/fleet.py \
        --store /work/bench-data/search-g2-1000000-s1     # the built 1M store
    .venv/bin/python bench/fleet.py --part follow [--appends 200]
    .venv/bin/python bench/fleet.py --part search [--lines 20000 --queries 150 --rounds 2]
    .venv/bin/python bench/fleet.py --part backfill [--files 10 --file-lines 250 --repeats 3]
    .venv/bin/python bench/fleet.py --part outage [--down 60]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
import harness as h  # noqa: E402
from fleet_pair import QUIET, alternating, fleet_env, pair, wait_quiet  # noqa: E402
from pg_sample import server_cpu_s  # noqa: E402

from tests.fleet.history import make_history  # noqa: E402
from tests.pg_server import PgServer, find_bindir  # noqa: E402

PARTS = ("migrate", "follow", "search", "backfill", "outage")
MEASURED = ("migrate", "backfill")


PG_TYPES = {"INTEGER": "bigint", "TEXT": "text", "REAL": "double precision"}


def raw_copy(db: Path, url: str, batch: int = 2000) -> float:
    """The floor: every units column but the id read from the same SQLite file and COPied
    into a bare PostgreSQL table (no keys, no indexes, no id map), one COPY and one commit
    per batch of `batch` rows, as migrate commits."""
    import psycopg

    from memoryd.store.db import connect

    src = connect(db)
    cols = [(r[1], PG_TYPES.get(r[2].upper(), "text"))
            for r in src.execute("PRAGMA table_info(units)") if r[1] != "id"]
    names = ", ".join(f'"{c}"' for c, _ in cols)
    t0 = time.perf_counter()
    with psycopg.connect(url) as dst:
        typed = ", ".join(f'"{c}" {t}' for c, t in cols)
        dst.execute(f"CREATE TABLE raw_units ({typed})")
        copy_batches(dst, src.execute(f"SELECT {names} FROM units ORDER BY id"),
                     f"COPY raw_units ({names}) FROM STDIN", batch)
    src.close()
    return time.perf_counter() - t0


def copy_batches(conn: Any, rows_cursor: Any, copy_sql: str, batch: int) -> None:
    """COPY a SQLite cursor's rows into PostgreSQL, one COPY and one commit per batch."""
    while rows := rows_cursor.fetchmany(batch):
        with conn.cursor() as c, c.copy(copy_sql) as copy:
            for r in rows:
                copy.write_row(tuple(r))
        conn.commit()


def raw_into_schema(db: Path, url: str, batch: int = 2000) -> float:
    """The second floor: the same sessions, files and units COPied with their own ids
    straight into a namespace's real tables (its keys, indexes, foreign keys and change
    feed triggers), one COPY and one commit per batch: what the server must do for the
    rows whatever copies them. Migrate's time above this is the copy's own (the id map,
    reading, rewriting references)."""
    import psycopg

    from memoryd.move.ends import open_end, quote_col
    from memoryd.store.db import connect
    from memoryd.store_target import StoreTarget

    dst = open_end(url, StoreTarget(url=url, machine="bench"), db)
    dst_cols = {t: set(dst.columns(t)) for t in ("sessions", "files", "units")}
    dst.close()
    src = connect(db)
    t0 = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("SET search_path TO memoryd_default")
        for table in ("sessions", "files", "units"):
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")
                    if r[1] in dst_cols[table]]
            names = ", ".join(quote_col(c) for c in cols)
            copy_batches(conn, src.execute(f"SELECT {names} FROM {table} ORDER BY id"),
                         f"COPY {table} ({names}) FROM STDIN", batch)
    src.close()
    return time.perf_counter() - t0


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def migrate(units: int, store: Path | None = None) -> None:
    """`store`: a built bench store (bench/bigstore.py, e.g. the 1M one); its database is
    copied into a work directory first (migrate opens it read-write to check its schema),
    never written in place."""
    import shutil

    server = PgServer(find_bindir())
    server.init()
    server.start()
    work = Path(tempfile.mkdtemp(prefix="fleet-migrate-", dir=h.OUT if store else None))
    try:
        home = work / "home"
        db = home / "data" / "memoryd.db"
        t0 = time.perf_counter()
        if store is not None:
            db.parent.mkdir(parents=True)
            shutil.copyfile(store / "home" / "data" / "memoryd.db", db)
            import sqlite3
            with contextlib.closing(sqlite3.connect(db)) as c:
                n = c.execute("SELECT count(*) FROM units").fetchone()[0]
            print(f"history: {store.name}, {n:,} units ({time.perf_counter() - t0:.1f}s to copy "
                  f"{db.stat().st_size / 1e6:,.0f} MB)")
        else:
            sessions = max(1, units // 2000)
            n = make_history(db, sessions=sessions, units_per_session=units // sessions)["units"]
            print(f"history: {n:,} units in {sessions} sessions "
                  f"({time.perf_counter() - t0:.1f}s to generate)")
        print(f"cores: {os.cpu_count()}, load average before: {load()}")
        raw_s = raw_copy(db, server.url(server.create_database()))
        schema_s = raw_into_schema(db, server.url(server.create_database()))
        url = server.url(server.create_database())
        cpu0, t0 = server_cpu_s(server), time.perf_counter()
        # as a user gives it: the password in PGPASSWORD (migrate refuses one in argv)
        parts = urlsplit(url)
        bare = urlunsplit(parts._replace(netloc=f"{parts.username}@"
                                                f"{parts.netloc.rpartition('@')[2]}"))
        out = subprocess.run([sys.executable, "-m", "memoryd.move", "--home",
                              str(home), "--to", bare], capture_output=True, text=True,
                             env={**os.environ, "PGPASSWORD": unquote(parts.password or "")})
        if out.returncode:
            raise SystemExit(f"migrate failed: {out.stdout.strip().splitlines()[-1:]}")
        total_s = time.perf_counter() - t0
        pg_cpu = server_cpu_s(server) - cpu0
        done = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"load average after: {load()}")
        print(f"raw COPY into a bare PG table: {n / raw_s:,.0f} units/s ({raw_s:.1f}s)")
        print(f"raw COPY into the namespace's own tables (keys, indexes, triggers): "
              f"{n / schema_s:,.0f} units/s ({schema_s:.1f}s)")
        print(f"store migrate:                 {n / total_s:,.0f} units/s ({total_s:.1f}s "
              f"whole process; {done['units_per_s']:,.0f} units/s copying) "
              f"= {raw_s / total_s:.2f}x raw COPY, {schema_s / total_s:.2f}x COPY into the "
              f"namespace's tables; PostgreSQL server CPU "
              f"{100 * pg_cpu / total_s:.0f}% of a core")
    finally:
        server.stop()
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


POLL_S = 0.005


def poll_until(found, timeout: float = 10.0) -> float | None:
    """Seconds until `found()` (from the caller's t0: returns the absolute time)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if found():
            return time.perf_counter()
        time.sleep(POLL_S)
    return None


def follow(appends: int, poll_ms: float = 5.0, warmup: int = 10) -> None:
    import random

    import changefeed as cfb  # bench/changefeed.py: the raw loop
    import psycopg

    global POLL_S
    POLL_S = poll_ms / 1000
    server = PgServer(find_bindir())
    server.init()
    server.start()
    daemons: list[h.Memoryd] = []
    raw: cfb.Raw | None = None
    try:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp, h.short_dir() as sd:
            work = Path(tmp)
            url = server.url(server.create_database())
            for m in ("a", "b"):
                (work / m / "src").mkdir(parents=True)
                (work / m / "src" / "t.jsonl").write_text("")
                daemons.append(h.Memoryd(work / m / "home", work / m / "src", sd / f"{m}.sock",
                                         log_path=work / f"{m}.log", env=fleet_env(url, m)))
            for d in daemons:
                d.wait_ready(120)
                d.wait_caught_up(120)
            a, b = daemons
            raw_url = server.url(server.create_database())
            with psycopg.connect(raw_url, autocommit=True) as c:
                c.execute("CREATE TABLE raw_units (id bigserial PRIMARY KEY, session_pk bigint"
                          " NOT NULL, seq int NOT NULL, ts double precision, content text"
                          " NOT NULL)")
            raw = cfb.Raw("raw", raw_url, cfb.LocalIndex(work / "raw-index"))
            raw.start()
            raw.ready.wait(30)
            gen, rng = h.TextGen(3), random.Random(3)
            md_lag: list[float] = []
            raw_lag: list[float] = []
            own_lag: list[float] = []
            missed = {"md": 0, "raw": 0}
            src = work / "a" / "src" / "t.jsonl"
            with psycopg.connect(raw_url, autocommit=True) as ins:
                for i in range(appends + warmup):
                    body = gen.english(rng, rng.randint(100, 500))
                    tok = f"flw{i:05d}x{rng.randrange(10**6):06d}"

                    def md_side(tok: str = tok + "m", body: str = body) -> float | None:
                        line = json.dumps({"role": "user", "content": f"{body} {tok}",
                                           "id": tok}) + "\n"
                        t0 = time.perf_counter()
                        with open(src, "a", encoding="utf-8") as f:
                            f.write(line)
                        # A's search (its own ingest lag) and B's (the fleet's), each
                        # polled in turn until both found it, so neither waits for the other
                        seen: dict[str, float] = {}

                        def both() -> bool:
                            for name, d in (("a", a), ("b", b)):
                                if name not in seen and d.client.search(
                                        query=tok, max_results=1)["total"] > 0:
                                    seen[name] = time.perf_counter()
                            return len(seen) == 2

                        poll_until(both)
                        if "a" in seen and i >= warmup:
                            own_lag.append(seen["a"] - t0)
                        return seen["b"] - t0 if "b" in seen else None

                    def raw_side(tok: str = tok + "r", body: str = body) -> float | None:
                        found = raw.expect(tok)
                        t0 = time.perf_counter()
                        cfb.insert(ins, "raw_units", [f"{body} {tok}"], notify=True)
                        t1 = poll_until(found.is_set)
                        return None if t1 is None else t1 - t0

                    sides = [("md", md_side, md_lag), ("raw", raw_side, raw_lag)]
                    if i % 2:
                        sides.reverse()
                    for name, fn, lags in sides:
                        lag = fn()
                        if lag is None:
                            missed[name] += 1
                        elif i >= warmup:
                            lags.append(lag)
                        time.sleep(rng.uniform(0.02, 0.05))
            st = b.status() or {}
            md, rw, own = h.summary(md_lag), h.summary(raw_lag), h.summary(own_lag)
            print(h.machine())
            print(f"{len(md_lag)} appends on machine A -> found by machine B's search "
                  f"(poll {poll_ms:g} ms); missed within 10 s: memoryd {missed['md']}, "
                  f"raw {missed['raw']}")
            print(h.table([
                ["memoryd A->B", h.ms(md["p50"]), h.ms(md["p99"]), h.ms(md["max"])],
                ["(A's own search)", h.ms(own["p50"]), h.ms(own["p99"]), h.ms(own["max"])],
                ["raw loop", h.ms(rw["p50"]), h.ms(rw["p99"]), h.ms(rw["max"])],
                ["ratio", h.ratio(md["p50"], rw["p50"]), h.ratio(md["p99"], rw["p99"]), ""],
            ], ["", "p50", "p99", "max"]))
            print("goal: p50 <= 300 ms, p99 <= 1 s; B's index: "
                  f"{json.dumps(st.get('index', {}).get('lag'))} lag, "
                  f"listening={st.get('index', {}).get('feed', {}).get('listening')}")
    finally:
        if raw is not None:
            raw.stop.set()
            raw.join(5)
        for d in daemons:
            d.stop()
        server.destroy()


def _query_round(daemons: dict[str, h.Memoryd], qs: list[tuple[str, str, str]],
                 warm: bool) -> dict[tuple[str, str], list[float]]:
    """Each query's `/v1/search` and `/v1/context` on every daemon, the daemons
    alternating query by query (which goes first too); seconds per call."""
    times: dict[tuple[str, str], list[float]] = {}
    for i, name, _d, calls in alternating(daemons, qs):
        for what, call in calls:
            if i == 0 and warm:
                call()
            t = time.perf_counter()
            call()
            times.setdefault((name, what), []).append(time.perf_counter() - t)
    return times


def _round_rows(label: str, times: dict[tuple[str, str], list[float]],
                cpu: dict[str, float]) -> list[list[str]]:
    rows = []
    for what in ("search", "context"):
        f, s_ = h.summary(times[("fleet", what)]), h.summary(times[("sqlite", what)])
        rows.append([label, what, h.ms(f["p50"]), h.ms(s_["p50"]),
                     h.ratio(f["p50"], s_["p50"]), h.ms(f["p99"]), h.ms(s_["p99"]),
                     h.ratio(f["p99"], s_["p99"]),
                     f"{cpu['fleet']:.1f} / {cpu['sqlite']:.1f} s" if what == "search" else "",
                     f"{os.getloadavg()[0]:.1f}" if what == "search" else ""])
    return rows


def search(lines: int, queries: int, rounds: int = 1) -> None:
    """Round 0 starts as soon as both daemons are caught up (as this bench did before
    2026-11-24's fleetq pass); the `rounds` after it once both are quiet (`wait_quiet`).
    Each round's CPU is the daemons' own during it (all threads)."""
    with pair(lines) as (_server, daemons, info):
        gen = h.TextGen(info.seed)
        qs = gen.queries(random.Random(11), queries)
        rows = []
        for r in range(rounds + 1):
            if r == 1:
                quiet = wait_quiet(daemons)
                print(f"quiet ({QUIET}) {max(quiet.values()):.0f} s after round 0")
            before = {n: h.proc_cpu_s(d.proc.pid) for n, d in daemons.items()}
            times = _query_round(daemons, qs, warm=r == 0)
            cpu = {n: h.proc_cpu_s(d.proc.pid) - before[n] for n, d in daemons.items()}
            rows += _round_rows("caught up" if r == 0 else f"quiet {r}", times, cpu)
        print(h.machine())
        print(f"{len(qs)} queries over the socket per round, {info.lines:,} lines each side")
        print(h.table(rows, ["round", "", "fleet p50", "sqlite p50", "ratio", "fleet p99",
                             "sqlite p99", "ratio", "CPU fleet / sqlite", "load"]))
        print("goal: fleet within 1.2x of SQLite")


def _appender(path: Path, machine: str, stop: threading.Event, written: list[str]) -> None:
    i = 0
    while not stop.is_set():
        text = f"{machine} live line {i} 中文"
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                "content": text, "id": f"{machine}-{i}"},
                               ensure_ascii=False) + "\n")
        written.append(text)
        i += 1
        time.sleep(0.02)


def outage(down_s: float) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from harness import Memoryd, short_dir

    server = PgServer(find_bindir())
    server.init()
    server.start()
    machines = ("laptop", "server")
    try:
        url = server.url(server.create_database())
        with tempfile.TemporaryDirectory() as tmp, short_dir() as d:
            daemons, written, threads = {}, {m: [] for m in machines}, []
            stop = threading.Event()
            for m in machines:
                src = Path(tmp) / m / "src"
                src.mkdir(parents=True)
                daemons[m] = Memoryd(Path(tmp) / m / "home", src, d / f"{m}.sock",
                                     log_level="INFO", env={
                                         "MEMORYD_STORE__URL": url, "MEMORYD_STORE__MACHINE": m,
                                         "MEMORYD_STORE__NAMESPACE": "bench",
                                         "MEMORYD_AUTO_SUMMARY": "0"})
            try:
                for md in daemons.values():
                    md.wait_ready(300)
                    md.wait_caught_up(300)
                for m in machines:
                    t = threading.Thread(target=_appender, args=(
                        daemons[m].src / "live.jsonl", m, stop, written[m]))
                    t.start()
                    threads.append(t)
                time.sleep(5)
                server.stop("fast")
                t_down = time.monotonic()
                seen_down = {m: False for m in machines}
                while time.monotonic() - t_down < down_s:
                    for m, md in daemons.items():
                        st = md.status()  # the daemon answers while the database is away
                        if st and st["store"].get("reachable") is False:
                            seen_down[m] = True
                    time.sleep(1)
                server.start()
                t_up = time.monotonic()
                time.sleep(5)
                stop.set()
                for t in threads:
                    t.join()
                for md in daemons.values():
                    md.wait_caught_up(900)
                catch_up = time.monotonic() - t_up
            finally:
                stop.set()
                for md in daemons.values():
                    md.stop()
            import psycopg

            with psycopg.connect(url) as conn:
                rows = conn.execute(
                    "SELECT s.machine, u.content FROM memoryd_bench.units u "
                    "JOIN memoryd_bench.sessions s ON s.id = u.session_pk").fetchall()
            print(f"cores: {os.cpu_count()}, load average: "
                  f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            print(f"database stopped {down_s:.0f} s during live appends on two machines")
            for m in machines:
                stored = [c for mm, c in rows if mm == m]
                lost = len(set(written[m]) - set(stored))
                dup = len(stored) - len(set(stored))
                log = daemons[m].log_path.read_text(errors="replace")
                downs = log.count("store unreachable:")
                ups = log.count("store reachable again")
                print(f"{m}: {len(written[m])} lines written, {lost} lost, {dup} duplicated; "
                      f"status said unreachable: {seen_down[m]}; log: {downs} down, {ups} up, "
                      f"{log.count('Traceback')} tracebacks, password shown: "
                      f"{server.password in log}")
            print(f"catch-up from the restart to both caught_up: {catch_up:.1f} s "
                  f"(appends went on 5 s after the restart)")
    finally:
        server.destroy()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=PARTS, default="migrate")
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--store", type=Path,
                    help="migrate: a built bench store directory (copied first), "
                         "instead of a generated history of --units")
    ap.add_argument("--appends", type=int, default=200, help="follow: appends per side")
    ap.add_argument("--poll-ms", type=float, default=5.0, help="follow: search poll interval")
    ap.add_argument("--lines", type=int, default=20_000, help="search: corpus lines")
    ap.add_argument("--queries", type=int, default=150, help="search: queries")
    ap.add_argument("--rounds", type=int, default=2,
                    help="search: rounds of the queries once both daemons are quiet "
                         "(after a round 0 at catch-up)")
    ap.add_argument("--files", type=int, default=20, help="backfill: corpus files")
    ap.add_argument("--file-lines", type=int, default=250, help="backfill: lines per file")
    ap.add_argument("--daemons", type=int, default=4, help="backfill: daemons at once")
    ap.add_argument("--repeats", type=int, default=3, help="backfill: paired repeats")
    ap.add_argument("--sessions", choices=("own", "shared", "both"), default="both",
                    help="backfill: each daemon in a session of its own (as a service "
                         "manager starts one), all in the bench's session, or both in turn")
    ap.add_argument("--wait-indexed", action="store_true",
                    help="backfill: also time until every daemon's index holds the namespace")
    ap.add_argument("--down", type=float, default=60.0, help="outage: seconds stopped")
    args = ap.parse_args(argv)
    if args.part == "outage":
        outage(args.down)
        return 0
    if args.part == "follow":
        follow(args.appends, args.poll_ms)
        return 0
    if args.part == "search":
        search(args.lines, args.queries, args.rounds)
        return 0
    if args.part not in MEASURED:
        print(f"{args.part}: not measured here (bench/pg_backfill.py)", file=sys.stderr)
        return 2
    if args.part == "backfill":
        from fleet_backfill import backfill

        backfill(args.files, args.file_lines, args.daemons, args.repeats,
                 args.wait_indexed,
                 ("own", "shared") if args.sessions == "both" else (args.sessions,))
    else:
        migrate(args.units, args.store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
