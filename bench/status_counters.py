"""What status's counts cost: the scans status ran before m009 against the counters the
triggers keep now, on the same SQLite database in the same run (issue 11 item 4).

Builds a store of N units in S sessions with the schema from before m009 (every unit
with an extractive one-liner, as after the summaries; a few thousand jobs), times the
store reads `status` makes the old way (`count(*)` and `sum()` over the tables: the code
before m009, kept here as the baseline), runs m009 (its backfill counts once, timed),
then times the same reads from the counters. With `--process`, also `memoryctl status`
as a whole process against a daemon serving that store, beside `python -c pass`.

    .venv/bin/python bench/status_counters.py --units 200000
    .venv/bin/python bench/status_counters.py --units 1000000 --process
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Memoryd, machine, ms, process_times, short_dir, summary, table  # noqa: E402

from memoryd.store import files, jobs, sessions, summaries, units  # noqa: E402
from memoryd.store.db import connect  # noqa: E402
from memoryd.store.migrations import MIGRATIONS, migrate  # noqa: E402


def old_status_reads(c: sqlite3.Connection) -> tuple:
    """Exactly what status read before m009 (count_units, count_sessions, file_stats,
    artifact_counts, job_counts)."""
    u = c.execute("SELECT (SELECT coalesce(sum(units), 0) FROM sessions) - "
                  "(SELECT coalesce(sum(units), 0) FROM archived_sessions)").fetchone()[0]
    s = c.execute("SELECT count(*) FROM sessions").fetchone()[0]
    f = c.execute("SELECT count(*) FILTER (WHERE agent IS NOT NULL AND gone = 0),"
                  " count(*) FILTER (WHERE agent IS NULL AND gone = 0),"
                  " coalesce(sum(bad_lines), 0) FROM files").fetchone()
    by = dict(c.execute("SELECT summary_by, count(*) FROM sessions "
                        "WHERE summary_by IS NOT NULL GROUP BY 1").fetchall())
    x = c.execute("SELECT count(*) FROM units WHERE one_liner_by = 'extractive'").fetchone()[0]
    j = dict(c.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
    e = c.execute("SELECT kind, target, last_error, updated_at FROM jobs WHERE last_error "
                  "IS NOT NULL ORDER BY updated_at DESC LIMIT 1").fetchone()
    return u, s, tuple(f), by, x, j, tuple(e) if e else None


def new_status_reads(c: sqlite3.Connection) -> tuple:
    a = summaries.artifact_counts(c)
    j = jobs.job_counts(c)
    f = files.file_stats(c)
    return (units.count_units(c), sessions.count_sessions(c),
            (f["files"], f["ignored_files"], f["bad_lines"]), a["summaries_by"],
            a["extractive_one_liners"], {k: v for k, v in j.items() if k in jobs.STATES and v},
            (j["last_error"]["kind"], j["last_error"]["target"], j["last_error"]["last_error"],
             j["last_error"]["updated_at"]) if j["last_error"] else None)


def build(path: Path, n_units: int, n_sessions: int) -> None:
    conn = connect(path)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for m in MIGRATIONS:
        if m.__name__ == "m009_counters":
            break
        conn.execute("BEGIN")
        m(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (m.__name__,))
        conn.execute("COMMIT")
    now = time.time()
    per = n_units // n_sessions
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO files (id, path, root, agent, \"offset\", size, bad_lines, updated_at) "
        "VALUES (?, ?, '/r', 'generic', 1, 1, ?, ?)",
        [(i + 1, f"/r/s{i}.jsonl", i % 7 == 0, now) for i in range(n_sessions)])
    conn.executemany(
        "INSERT INTO sessions (id, agent, session_id, units, summary_by, created_at, "
        "updated_at) VALUES (?, 'generic', ?, ?, 'extractive', ?, ?)",
        [(i + 1, f"s{i}", per, now, now) for i in range(n_sessions)])
    rows = ((s * per + k + 1, s + 1, f"r{k}", k + 1, k, "user" if k % 2 == 0 else "assistant",
             f"unit {s}-{k} about deploys and 中文 notes", "a line", s + 1)
            for s in range(n_sessions) for k in range(per))
    conn.executemany(
        "INSERT INTO units (id, session_pk, record_id, seq, turn, role, kind, content, "
        "one_liner, one_liner_by, chars, tokens, file_id) VALUES "
        "(?, ?, ?, ?, ?, ?, 'message', ?, ?, 'extractive', 40, 10, ?)", rows)
    conn.executemany(
        "INSERT INTO jobs (kind, target, state, params, next_run_at, created_at, updated_at, "
        "last_error) VALUES ('summarize', ?, ?, '{}', ?, ?, ?, ?)",
        [(f"session:{i}", ("done", "done", "failed", "pending")[i % 4], now, now, now + i,
          "boom" if i % 4 == 2 else None) for i in range(4000)])
    conn.execute("COMMIT")
    conn.close()


def timed(fn, c: sqlite3.Connection, runs: int) -> dict[str, float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        c.execute("BEGIN")
        fn(c)
        c.execute("COMMIT")
        out.append(time.perf_counter() - t0)
    return summary(out)


def whole_process(db: Path, runs: int) -> list[list[str]]:
    with tempfile.TemporaryDirectory() as tmp, short_dir() as d:
        home = Path(tmp) / "home"
        (home / "data").mkdir(parents=True)
        shutil.copy(db, home / "data" / "memoryd.db")
        src = Path(tmp) / "src"
        src.mkdir()
        sock = d / "m.sock"
        with Memoryd(home, src, sock, env={"MEMORYD_AUTO_SUMMARY": "0"}) as md:
            md.wait_ready(600)
            md.wait_caught_up(3600)  # the index built: status timed on a daemon at rest
            ctl = [sys.executable, "-m", "memoryd.cli.memoryctl", "--socket", str(sock),
                   "status"]
            process_times(ctl[:1] + ["-c", "pass"], runs)
            floor = summary(process_times([sys.executable, "-c", "pass"], runs))
            st = summary(process_times(ctl, runs))
    return [["python -c pass (floor)", ms(floor["p50"]), ms(floor["p99"])],
            ["memoryctl status, whole process", ms(st["p50"]), ms(st["p99"])]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=200_000)
    ap.add_argument("--sessions", type=int, default=2_000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--process", action="store_true",
                    help="also time memoryctl status as a process against a daemon")
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "memoryd.db"
        t0 = time.perf_counter()
        build(db, args.units, args.sessions)
        print(f"built {args.units:,} units in {args.sessions:,} sessions "
              f"in {time.perf_counter() - t0:.1f} s")
        c = connect(db)
        timed(old_status_reads, c, 2)  # warm the page cache
        before = timed(old_status_reads, c, args.runs)
        t0 = time.perf_counter()
        migrate(c)
        backfill = time.perf_counter() - t0
        c.execute("BEGIN")
        old, new = old_status_reads(c), new_status_reads(c)
        c.execute("COMMIT")
        assert old == new, (old, new)
        after = timed(new_status_reads, c, args.runs)
        c.close()
        print(table([
            ["scans (status before m009, the baseline)", ms(before["p50"]), ms(before["p99"])],
            ["counters (m009)", ms(after["p50"]), ms(after["p99"])],
            ["speed-up at p50", f"{before['p50'] / after['p50']:.0f}x", ""],
        ], ["status's store reads", "p50", "p99"]))
        print(f"m009's backfill (one count of every table): {backfill:.2f} s; "
              "both ways give the same counts")
        if args.process:
            print(table(whole_process(db, args.runs), ["", "p50", "p99"]))


if __name__ == "__main__":
    main()
