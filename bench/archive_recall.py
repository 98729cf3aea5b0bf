"""What a search or a context pays to reach the archive (memoryd.recall.archived): the
time to scan archive files for a query's terms, against reading the same files without
matching (the raw baseline, in the same run), at several archive sizes.

Units are 60 words drawn from a small vocabulary (so common terms match most units, the
worst case for ranking) in 6 monthly files; queries: terms that match nothing, common
terms, and a Chinese query. Run: `.venv/bin/python bench/archive_recall.py [--sizes ...]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from memoryd.recall import archived as archive_recall
from memoryd.memory import archive  # noqa: E402
from memoryd.recall.retrieval import plan_query  # noqa: E402

WORDS = ("the theme selector crash build test deploy config service port cache redis user "
         "tool file read write error fixed check 数据库 迁移 失败 脚本").split()
QUERIES = ("zebra quokka", "theme selector crash", "why does the build fail on deploy",
           "数据库迁移失败")


def build(d: Path, n: int, rnd: random.Random) -> None:
    recs = [{"agent": "claude-code", "session_id": f"s{i // 100}", "project": "/p",
             "record_id": str(i), "seq": i % 100, "turn": 1, "role": "user",
             "kind": "message", "content": " ".join(rnd.choice(WORDS) for _ in range(60)),
             "ts": 1.7e9 + i, "one_liner": None} for i in range(n)]
    for m in range(6):
        archive.add(d, f"2026-0{m + 1}", recs[m::6])


def timed(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1610,20000,100000")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rnd = random.Random(7)
    print(f"{'units':>7} {'query':<36} {'matches':>7} {'scan ms':>8} {'raw ms':>7} "
          f"{'ratio':>6} {'µs/unit':>7}")
    for n in map(int, a.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            build(d, n, rnd)
            raw = timed(lambda: [sum(1 for _ in archive._records(p))
                                 for _, p in archive.months(d)], a.reps)
            for q in QUERIES:
                terms = plan_query(q).terms
                got: list[int] = []
                t = timed(lambda: got.append(archive_recall.find(d, terms, "or", 15)[0]),
                          a.reps)
                print(f"{n:>7} {q:<36} {got[-1]:>7} {t * 1e3:>8.0f} {raw * 1e3:>7.0f} "
                      f"{t / raw:>6.2f} {t / n * 1e6:>7.1f}")


if __name__ == "__main__":
    main()
