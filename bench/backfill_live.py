"""A live file's lines during a backfill: append -> stored, while old history streams in.

memoryd starts on a fresh MEMORYD_HOME watching a copy of the backfill corpus
(`backfill.py`'s generator) and an empty file beside it; once it answers, that file gets one
line every --gap-ms until the backfill is caught up. Each line's lag is from just before
its write until its unit is in the store (polled read-only in the daemon's SQLite file
every --poll-ms: the ingest's share, apart from the index, which trails the backfill).
No raw baseline: compare two builds run alternately (e.g. main from a `git archive`).
Also printed: spawn -> caught_up and the daemon's CPU seconds (every thread's,
the ended ones' too, and its child processes').

    .venv/bin/python bench/backfill_live.py --quick     # 100 files x 300 lines
    .venv/bin/python bench/backfill_live.py             # 400 files x 500 lines
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from idle import cpu_s  # noqa: E402


def stored(db: Path, rid: str) -> bool:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("SELECT 1 FROM units WHERE record_id = ?", (rid,)).fetchone() \
            is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def run(info: h.CorpusInfo, work: Path, gap: float, poll: float) -> dict[str, object]:
    shutil.rmtree(work, ignore_errors=True)
    src = work / "src"
    shutil.copytree(info.path, src)
    live = src / "live" / "now.jsonl"
    # there before the daemon starts: a directory made while its watch is being set up
    # was seen only by the 30 s reconciliation (on both builds)
    live.parent.mkdir()
    live.touch()
    lags: list[float] = []
    with h.short_dir() as sd:
        d = h.Memoryd(work / "home", src, sd / "m.sock", log_path=work / "memoryd.log")
        try:
            d.wait_ready(timeout=120)
            db = work / "home" / "data" / "memoryd.db"
            caught = None
            i = 0
            while caught is None:
                rid = f"live-{i}"
                line = json.dumps({"role": "user", "id": rid,
                                   "content": f"live line {i} during the backfill"}) + "\n"
                t0 = time.perf_counter()
                with open(live, "a", encoding="utf-8") as f:
                    f.write(line)
                while not stored(db, rid):
                    if time.perf_counter() - t0 > 60:
                        raise TimeoutError(f"{rid} not stored in 60 s")
                    time.sleep(poll)
                lags.append(time.perf_counter() - t0)
                st = d.status()
                if st and st.get("caught_up"):
                    caught = time.perf_counter() - d.started
                i += 1
                time.sleep(gap)
            cpu = cpu_s(d.proc.pid)
        finally:
            d.stop()
    return {"lags": lags, "caught_up": caught, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.corpus_options(p)
    p.add_argument("--gap-ms", type=float, default=30.0, help="between appends")
    p.add_argument("--poll-ms", type=float, default=2.0)
    a = h.corpus_size(p.parse_args(argv))
    print(f"backfill_live: {h.machine()}")
    info = h.corpus(a.files, a.lines)
    out = run(info, h.OUT / "backfill-live", a.gap_ms / 1000, a.poll_ms / 1000)
    lags = [x * 1000 for x in out["lags"]]  # type: ignore[union-attr]
    print(f"live appends during the backfill: {len(lags)}; append -> stored ms "
          f"p50 {h.percentile(lags, 50):.1f} p90 {h.percentile(lags, 90):.1f} "
          f"max {max(lags):.1f}")
    print(f"memoryd spawn -> caught_up {out['caught_up']:.2f} s, daemon CPU {out['cpu']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
