"""Same answers before and after a change to the reader: the JSON of N searches and N
contexts on a built store, written to a file, and two such files compared.

Run it once with the branch's code and once with main's (`PYTHONPATH=<a git archive
of main>`, this script from the branch), each on its own copy of the same store, then
compare. The clock is fixed (recency depends on it), so the files are equal byte for
byte when the answers are; scores are compared to f32 rounding, all else exactly.

    .venv/bin/python bench/same_answers.py dump --home /tmp/x/home-a --out after.jsonl
    PYTHONPATH=/tmp/main .venv/bin/python bench/same_answers.py dump --home /tmp/x/home-b \
        --out before.jsonl
    .venv/bin/python bench/same_answers.py compare before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

NOW = 1_740_100_000.0  # a day after the bench corpus: the clock of every answer (recency)


async def dump(home: Path, n: int, seed: int, out: Path) -> int:
    from memoryd import context as ctx
    from memoryd import search as search_mod
    from memoryd.api import ContextRequest, SearchRequest
    from memoryd.memory import MemoryFile
    from memoryd.paths import resolve_paths
    from memoryd.store import Store

    time.time = lambda: NOW  # this process only
    paths = resolve_paths(home)
    store = await Store.open(paths.db)
    while not store.index.searchable():
        await asyncio.sleep(0.1)
    builder = ctx.ContextBuilder(store, MemoryFile.from_paths(paths, poll_interval=0),
                                 paths.memory_dir)
    queries = h.TextGen(seed).queries(random.Random(seed * 101), n)
    rng = random.Random(7)
    lines = 0
    with out.open("w") as f:
        for kind, q, mode in queries:
            cwd = f"/bench/proj{rng.randrange(37):02d}"
            for k in (5, 15):
                r = await search_mod.search(store, SearchRequest(query=q, mode=mode,
                                                                 max_results=k))
                f.write(json.dumps({"search": q, "mode": mode, "k": k,
                                    "answer": r.model_dump(mode="json")}) + "\n")
            for budget in (2000, 300):
                pack = await builder.build(ContextRequest(query=q, cwd=cwd,
                                                          budget_tokens=budget))
                f.write(json.dumps({"context": q, "cwd": cwd, "budget": budget,
                                    "answer": pack}, default=str) + "\n")
            lines += 4
    await store.close()
    print(f"{lines} answers ({n} queries: searches at k 5 and 15, contexts at budgets "
          f"2000 and 300) -> {out}")
    return 0


def _same(a: Any, b: Any, where: str, diffs: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            diffs.append(f"{where}: keys {sorted(a)} vs {sorted(b)}")
            return
        for k in a:
            _same(a[k], b[k], f"{where}.{k}", diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{where}: {len(a)} vs {len(b)} items")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]", diffs)
    elif isinstance(a, float) and isinstance(b, float) and where.endswith(
            ("score", "bm25", "bm25_content", "bm25_one_liner")):
        # f32, then round(4): the last f32 bits can flip the 4th decimal (a difference of
        # 1e-4 is 1.00000000003e-4 in floats)
        if not math.isclose(a, b, rel_tol=2 ** -22, abs_tol=1.01e-4):
            diffs.append(f"{where}: {a} vs {b}")
    elif a != b or type(a) is not type(b):
        diffs.append(f"{where}: {a!r:.80} vs {b!r:.80}")


def compare(before: Path, after: Path) -> int:
    a, b = before.read_text().splitlines(), after.read_text().splitlines()
    if len(a) != len(b):
        print(f"different: {len(a)} vs {len(b)} answers")
        return 1
    diffs: list[str] = []
    exact = 0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        exact += x == y
        _same(json.loads(x), json.loads(y), f"answer {i}", diffs)
    for d in diffs[:20]:
        print(d)
    print(f"{len(a)} answers: {exact} byte for byte equal, {len(diffs)} differences")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--home", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--queries", type=int, default=100)
    d.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "dump":
        return asyncio.run(dump(args.home, args.queries, args.seed, args.out))
    return compare(args.before, args.after)


if __name__ == "__main__":
    raise SystemExit(main())
