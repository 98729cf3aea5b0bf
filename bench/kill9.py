"""kill -9 proof, many runs: memoryd is SIGKILLed at random moments during backfill, live
appends and summary jobs, then restarted; after the last run it must hold every line once
(0 lost, 0 duplicated units) and every job queued (none lost, none left `running`).
The same loop as tests/reliability/test_kill9.py (5 runs in CI).

    .venv/bin/python bench/kill9.py               # 50 runs
    .venv/bin/python bench/kill9.py --runs 100 --files 20 --lines 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import harness as h  # noqa: E402

from tests.reliability.kill9 import kill_runs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--files", type=int, default=12)
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(h.machine())
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mdkill") as tmp, h.short_dir() as d:
        out = kill_runs(Path(tmp), d / "m.sock", a.runs, files=a.files, lines=a.lines,
                        seed=a.seed, log=print)
    print(f"{out.runs} kill -9 runs in {time.perf_counter() - t0:.0f}s; killed at "
          f"{min(out.kill_points)}..{max(out.kill_points)} units stored")
    print(f"units: expected {out.expected_units}, stored {out.units}, lost {out.lost}, "
          f"duplicated {out.duplicated}")
    print(f"jobs: {out.jobs_seen} queued before kills, lost {out.jobs_lost}, "
          f"left running {out.jobs_stuck_running}")
    print("OK" if out.ok() else "FAILED")
    return 0 if out.ok() else 1


if __name__ == "__main__":
    raise SystemExit(main())
