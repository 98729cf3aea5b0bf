"""Backfill throughput: memoryd reading a large existing corpus vs json.loads + bare FTS5.

memoryd runs as a subprocess on a fresh MEMORYD_HOME watching the corpus; the time is from
spawning it until /v1/status says caught_up (nothing subtracted: interpreter start,
imports and the startup scan are included). The raw baseline, in the same run, reads the
same files line by line, json.loads every line and inserts the `content` strings into a
plain `CREATE VIRTUAL TABLE t USING fts5(body)` in a fresh SQLite file (WAL,
synchronous=NORMAL, one transaction per 2000 rows). A second raw line does json.loads, a
plain SQLite table and a bare tantivy index with memoryd's schema and analyzer (what
memoryd writes, without redaction or its bookkeeping). The daemon runs from a byte-code
cache of its own (`--cold-imports`: without it), and the run prints when every line was
stored, apart from when the index caught up. Beside the times: each side's CPU seconds
(every thread; memoryd's from /proc at caught_up, start-up included, with its child
processes': the live ones' and the reaped ones'), a measure the
machine's load moves much less than a time, and the disk a backfill takes (database with
its WAL + index, and the index's segments) over the transcripts' bytes, while the daemon
runs (at caught_up) and after it stopped.

    .venv/bin/python bench/backfill.py              # 400 files x 500 lines = 200k lines
    .venv/bin/python bench/backfill.py --quick      # 100 files x 300 lines, ~30 s
    .venv/bin/python bench/backfill.py --files 800 --lines 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from idle import cpu_s  # noqa: E402


def raw_baseline(info: h.CorpusInfo, db: Path, batch: int = 2000) -> dict[str, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    conn = h.bare_fts(db)
    rows: list[tuple[str]] = []
    lines = units = 0

    def flush() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t (body) VALUES (?)", rows)
        conn.execute("COMMIT")
        rows.clear()

    for path in h.corpus_files(info.path):
        with open(path, "rb") as f:
            for line in f:
                obj = json.loads(line)
                lines += 1
                body = obj.get("content")
                if not body:
                    continue
                rows.append((body if isinstance(body, str) else json.dumps(body),))
                units += 1
                if len(rows) >= batch:
                    flush()
    if rows:
        flush()
    conn.close()
    secs = time.perf_counter() - t0
    return {"secs": secs, "cpu": time.process_time() - c0, "units": units, "lines": lines,
            "db_mb": h.dir_mb(db.parent)}


def raw_tantivy_baseline(info: h.CorpusInfo, work: Path, batch: int = 2000) -> dict[str, float]:
    """A second raw line, closer to what memoryd stores: json.loads, the `content` rows
    into a plain SQLite table (WAL, synchronous=NORMAL, one transaction per 2000 rows)
    and the same text into a bare tantivy index with memoryd's schema and analyzer
    (`memoryd.index.schema`), tantivy's default writer, one commit at the end. No
    redaction, no index text rendering, no sessions or counters."""
    import sqlite3

    import tantivy

    from memoryd.index.schema import ANALYZER, build_analyzer, build_schema

    t0, c0 = time.perf_counter(), time.process_time()
    work.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(work / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, body TEXT)")
    (work / "tantivy").mkdir()
    idx = tantivy.Index(build_schema(), path=str(work / "tantivy"))
    idx.register_tokenizer(ANALYZER, build_analyzer())
    w = idx.writer()
    rows: list[tuple[int, str]] = []

    def flush() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO u (id, body) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
        for uid, body in rows:
            d = tantivy.Document()
            d.add_unsigned("unit_id", uid)
            d.add_text("body", body)
            w.add_document(d)
        rows.clear()

    units = 0
    for path in h.corpus_files(info.path):
        with open(path, "rb") as f:
            for line in f:
                body = json.loads(line).get("content")
                if not body:
                    continue
                units += 1
                rows.append((units, body if isinstance(body, str) else json.dumps(body)))
                if len(rows) >= batch:
                    flush()
    if rows:
        flush()
    w.commit()
    w.wait_merging_threads()
    conn.close()
    return {"secs": time.perf_counter() - t0, "cpu": time.process_time() - c0, "units": units}


def redaction_secs(info: h.CorpusInfo) -> tuple[float, int]:
    """The redactor's own time over what the ingestor hands it for this corpus (each
    message's content, tool arguments and title), in this process: its share of the
    backfill when set against memoryd's time in the same run. Best of 3."""
    from memoryd.redact import Redactor

    texts = []
    for path in h.corpus_files(info.path):
        with open(path, "rb") as f:
            for line in f:
                obj = json.loads(line)
                body = obj.get("content")
                texts.append(body if isinstance(body, str) else json.dumps(body))
                args = obj.get("tool_calls") or obj.get("arguments")
                if args:
                    texts.append(args if isinstance(args, str) else json.dumps(args))
    clean = Redactor().clean
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for t in texts:
            clean(t)
        best = min(best, time.perf_counter() - t0)
    return best, sum(len(t) for t in texts)


# An installed memoryd runs from byte code written on its first start. This machine sets
# PYTHONDONTWRITEBYTECODE=1, so every spawn would compile its ~300 imported modules afresh
# (seconds of CPU at load, counted against memoryd and not the in-process baseline): the
# daemon gets a byte-code cache of its own under OUT, filled once by `warm_imports`.
PYCACHE = {"PYTHONPYCACHEPREFIX": str(h.OUT / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}


def warm_imports() -> float:
    """Import the daemon once with the byte-code cache on; the seconds that took."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import memoryd.daemon"], cwd=h.ROOT, check=True,
                   env={**os.environ, **PYCACHE})
    return time.perf_counter() - t0


def wait_caught_up(d: h.Memoryd, progress: float | None, timeout: float = 3600.0
                   ) -> tuple[dict, float | None, int | None]:
    """Poll /v1/status until caught_up: (that status, seconds from spawn until every line
    was read and stored, units the index held then). The two times split the critical
    path: ingest (read, parse, redact, SQLite), then the index catching up."""
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    stored = index_then = None
    while time.monotonic() < deadline:
        d._alive()
        st = d.status()
        if st and stored is None and st.get("backfill_done") and not st["queue_depth"] \
                and not st["unread_bytes"]:
            stored = time.perf_counter() - d.started
            index_then = st["index"].get("units")
        if st and st.get("caught_up"):
            return st, stored, index_then
        if progress and st and time.monotonic() - last > progress:
            last = time.monotonic()
            print(f"  ... {st['units']:,} units stored, {st['index'].get('units', 0):,} "
                  f"indexed, {st['queue_depth']} files queued")
        time.sleep(0.25)
    raise TimeoutError(f"memoryd not caught up within {timeout}s:\n{d.log_tail()}")


def memoryd_backfill(info: h.CorpusInfo, work: Path, progress: float | None,
                     env: dict[str, str]) -> dict[str, float]:
    home = work / "home"
    with h.short_dir() as sd:
        d = h.Memoryd(home, Path(info.path), sd / "m.sock", log_path=work / "memoryd.log",
                      env=env)
        try:
            ready = d.wait_ready(timeout=120)
            st, stored, index_then = wait_caught_up(d, progress)
            secs = time.perf_counter() - d.started
            cpu = cpu_s(d.proc.pid)
            rss = d.peak_rss_mb()
            running = disk(home / "data")  # the daemon still up: its WAL counts too
        finally:
            code = d.stop()
    if code not in (0, None):
        print(f"  warning: memoryd exited with {code}; see {work / 'memoryd.log'}")
    return {"secs": secs, "cpu": cpu, "ready": ready, "stored": stored, "index_then": index_then,
            "units": st["units"], "files": st["files"],
            "bad_lines": st["bad_lines"], "errors": st["ingest"]["errors"],
            "rss_mb": rss, "db_mb": h.dir_mb(home / "data"), **disk(home / "data"),
            "running": running}


def disk(data: Path) -> dict[str, float]:
    """The database's files (with its -wal and -shm) and the index's, in MB, and the
    index's segment count (its meta.json): while the daemon runs (a WAL kept at its peak
    size shows only then: issue 28) or after it stopped."""
    db = sum(p.stat().st_size for p in data.glob("memoryd.db*") if p.exists())
    tdir = data / "index" / "tantivy"
    try:
        segments = len(json.loads((tdir / "meta.json").read_text())["segments"])
    except (OSError, ValueError, KeyError):
        segments = -1
    return {"disk_db_mb": db / 1e6, "disk_index_mb": h.dir_mb(tdir), "segments": segments}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.corpus_options(p)
    p.add_argument("--repeat", type=int, default=1, help="runs of each side (median is shown)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the built stores in bench/out")
    p.add_argument("--cold-imports", action="store_true",
                   help="no byte-code cache: the daemon compiles its imports on every spawn "
                        "when PYTHONDONTWRITEBYTECODE is set (the figures before 2026-11-24)")
    args = h.corpus_size(p.parse_args(argv))

    print(f"backfill benchmark: {h.machine()}")
    info = h.corpus(args.files, args.lines, args.seed)
    mb = info.bytes / 1e6
    print(f"corpus: {info.files} files, {info.lines:,} lines, {mb:.0f} MB ({info.path})")
    # Both sides read the same files: warm the page cache once so neither pays for disk.
    for path in h.corpus_files(info.path):
        path.read_bytes()

    env: dict[str, str] = {}
    if not args.cold_imports:
        env = PYCACHE
        print(f"memoryd byte code cached in {PYCACHE['PYTHONPYCACHEPREFIX']} "
              f"(first import {warm_imports():.2f} s, not timed)")
    work = h.OUT / "backfill-run"
    raws, raws2, mds = [], [], []
    for i in range(args.repeat):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / "raw").mkdir()
        r = raw_baseline(info, work / "raw" / "raw.db")
        raws.append(r)
        print(f"[{i + 1}/{args.repeat}] raw json.loads + fts5 insert: {r['secs']:.2f} s "
              f"({r['units']:,} rows, CPU {r['cpu']:.2f} s)")
        r2 = raw_tantivy_baseline(info, work / "raw2")
        raws2.append(r2)
        print(f"[{i + 1}/{args.repeat}] raw json + sqlite + bare tantivy: {r2['secs']:.2f} s "
              f"({r2['units']:,} rows, CPU {r2['cpu']:.2f} s)")
        m = memoryd_backfill(info, work, progress=30.0, env=env)
        mds.append(m)
        print(f"[{i + 1}/{args.repeat}] memoryd spawn -> caught_up:   {m['secs']:.2f} s "
              f"({m['units']:,} units, ready after {m['ready']:.2f} s, CPU {m['cpu']:.2f} s)")
        if m["stored"] is not None:
            print(f"[{i + 1}/{args.repeat}]   every line stored after {m['stored']:.2f} s, "
                  f"index then at {m['index_then']:,} units; index caught up "
                  f"{m['secs'] - m['stored']:.2f} s later")
        if not args.keep and i < args.repeat - 1:
            shutil.rmtree(work, ignore_errors=True)

    r_s = statistics.median(x["secs"] for x in raws)
    r2_s = statistics.median(x["secs"] for x in raws2)
    m_s = statistics.median(x["secs"] for x in mds)
    m, r = mds[-1], raws[-1]
    rows = [
        ["memoryd (subprocess)", f"{m_s:.2f}", f"{m['units'] / m_s:,.0f}", f"{mb / m_s:.1f}",
         f"{m['units']:,}", f"{m['db_mb']:.0f}"],
        ["raw json + bare fts5", f"{r_s:.2f}", f"{r['units'] / r_s:,.0f}", f"{mb / r_s:.1f}",
         f"{r['units']:,}", f"{r['db_mb']:.0f}"],
        ["raw json + sqlite + tantivy", f"{r2_s:.2f}", f"{raws2[-1]['units'] / r2_s:,.0f}",
         f"{mb / r2_s:.1f}", f"{raws2[-1]['units']:,}", ""],
    ]
    print()
    print(h.table(rows, ["backfill", "seconds", "units/s", "MB/s", "units", "db MB"]))
    print()
    print(f"ratio memoryd/raw (time): {h.ratio(m_s, r_s)}   "
          f"(median of {args.repeat} run{'s' if args.repeat > 1 else ''}; the issue's baseline)")
    print(f"ratio memoryd/raw json + sqlite + bare tantivy (time): {h.ratio(m_s, r2_s)}")
    m_c = statistics.median(x["cpu"] for x in mds)
    print(f"CPU seconds: memoryd {m_c:.2f}, raw json + fts5 "
          f"{statistics.median(x['cpu'] for x in raws):.2f}, raw json + sqlite + tantivy "
          f"{statistics.median(x['cpu'] for x in raws2):.2f}; memoryd "
          f"{1e6 * m_c / m['units']:.0f} us a unit; ratio memoryd/raw (CPU): "
          f"{h.ratio(m_c, statistics.median(x['cpu'] for x in raws))}")
    run = m["running"]
    print(f"disk while running (at caught_up): database {run['disk_db_mb']:.1f} MB + index "
          f"{run['disk_index_mb']:.1f} MB = "
          f"{(run['disk_db_mb'] + run['disk_index_mb']) / mb:.3f}x the transcripts' bytes; "
          f"after stop: database {m['disk_db_mb']:.1f} MB + index {m['disk_index_mb']:.1f} "
          f"MB ({m['segments']} segments) = "
          f"{(m['disk_db_mb'] + m['disk_index_mb']) / mb:.3f}x")
    print(f"memoryd ready (health answers) after {m['ready']:.2f} s; "
          f"files {m['files']}, bad lines {m['bad_lines']}, ingest errors {m['errors']}")
    red, chars = redaction_secs(info)
    print(f"redaction (memoryd.redact over the same texts, one thread): {red:.2f} s = "
          f"{100 * red / m_s:.1f}% of memoryd's backfill time ({chars / 1e6 / red:.1f} M chars/s)")
    if m["rss_mb"] is not None:
        print(f"memoryd peak RSS (VmHWM): {m['rss_mb']:.0f} MB")
    if m["units"] != mds[0]["units"] or m["bad_lines"] or m["errors"]:
        print("warning: unexpected unit count, bad lines or errors")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
