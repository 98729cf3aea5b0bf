"""The timeline's figures from `unit_quarters` against the pass over every unit they
replaced (issue 30): `memoryd/web/timeline.py` as of 3bec7cf, read from git, and today's
`load()` on one copy of the built store, for several zones and filters. Prints, per
case, the days, sessions and messages shown, both times, and stops at the first
difference (days, their sessions in order, spans, counts, the rows listed, the
older/newer links).

    .venv/bin/python bench/timeline_same.py                  # the 1M store (builds once)
    .venv/bin/python bench/timeline_same.py --units 100000 --zones UTC Asia/Kolkata
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bigstore import build, store_dir  # noqa: E402

from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.store.migrations import migrate  # noqa: E402
from memoryd.web import timeline  # noqa: E402

OLD_COMMIT = "3bec7cf"  # the last timeline that counted every unit of its week
ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns"]


def old_timeline():  # type: ignore[no-untyped-def]
    src = subprocess.run(["git", "show", f"{OLD_COMMIT}:memoryd/web/timeline.py"],
                         check=True, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent).stdout
    path = Path(tempfile.mkdtemp()) / "old_timeline.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_timeline", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compare(c: sqlite3.Connection, old, zone: str) -> None:  # type: ignore[no-untyped-def]
    os.environ["TZ"] = zone
    time.tzset()
    projects = [r[0] for r in c.execute("SELECT DISTINCT project FROM sessions LIMIT 2")]
    agent = c.execute("SELECT agent FROM sessions LIMIT 1").fetchone()[0]
    until = timeline.load(c, None, None, None)["until"]
    cases = [(None, None, None), (None, None, until - timedelta(days=3)),
             (None, None, until + timedelta(days=2)), (agent, None, None),
             (None, projects[0], None), (None, projects[-1], until - timedelta(days=1))]
    key = lambda r: (r["pk"], r["start"], r["end"], r["n"])  # noqa: E731
    for a, p, u in cases:
        t0 = time.perf_counter()
        o = old.load(c, a, p, u)
        t1 = time.perf_counter()
        n = timeline.load(c, a, p, u)
        t2 = time.perf_counter()
        assert [d for d, _ in o["days"]] == [d for d, _ in n["days"]], (zone, a, p, u)
        for (_, ro), (_, rn) in zip(o["days"], n["days"]):
            assert [key(r) for r in ro] == [key(r) for r in rn], (zone, a, p, u)
            assert ro[:timeline.PER_DAY] == rn[:timeline.PER_DAY], (zone, a, p, u)
        for k in ("first", "until", "older", "newer"):
            assert o[k] == n[k], (zone, a, p, u, k)
        rows = [r for _, v in n["days"] for r in v]
        print(f"{zone:18} {a or '-':8} {(p or '-')[-14:]:14} {u or 'newest'!s:10} "
              f"days {len(n['days'])} session-days {len(rows):5} messages "
              f"{sum(r['n'] for r in rows):9,}  old {1000 * (t1 - t0):8.1f} ms  "
              f"new {1000 * (t2 - t1):6.1f} ms  same")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--zones", nargs="+", default=ZONES)
    a = ap.parse_args()
    dir = store_dir(a.units, a.seed, True)
    build(a.units, a.seed, dir)  # cached: returns at once when built
    db = dir / "timeline-same.db"
    shutil.copyfile(resolve_paths(dir / "home").db, db)
    try:
        c = sqlite3.connect(db, isolation_level=None)
        c.row_factory = sqlite3.Row
        t0 = time.perf_counter()
        print("migrated:", migrate(c), f"{time.perf_counter() - t0:.1f} s")
        old = old_timeline()
        for zone in a.zones:
            compare(c, old, zone)
        c.close()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
