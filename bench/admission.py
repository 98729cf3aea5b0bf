"""Admission benchmark: memoryd's consolidation on the labelled admission set, scored.

Runs a real Daemon in this process with a settable clock, on a copy of the set's
`*/*.jsonl` sessions (never labels.json) as a generic source, consolidates day by day
(POST /v1/jobs/consolidate/run with each date, the clock set to that evening) and prints
the scorer's table (../shared/eval/admission/score.py). Extractive mode: no model.

Then two figures, each against a raw baseline measured in the same run:
- consolidation time for 1,000 synthetic sessions (10 days x 100) vs. reading the same
  units straight from SQLite;
- MEMORY.md size after a 90-day simulation (the set's sessions replayed with shifted
  dates, plus synthetic sessions with new preferences every few days and chatter).
And a held-out probe generated here: rules the user states in two sessions without
marker words (English and Chinese), noise said twice, rules said once; how many of each
reach MEMORY.md (the first should, the others should not).

    .venv/bin/python bench/admission.py [--set dev] [--tz Asia/Shanghai] [--skip-sim]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.harness import ms, table  # noqa: E402
from memoryd.client import MemorydClient  # noqa: E402
from memoryd.config import load_settings  # noqa: E402
from memoryd.consolidate.clock import SettableClock  # noqa: E402
from memoryd.daemon import Daemon  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402

SHARED = Path(os.environ.get("MEMORYD_SHARED", "/work/shared"))
EVAL = SHARED / "eval" / "admission"


def settings(src: Path, sock: Path, tz: str, **consolidate: Any) -> Any:
    return load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False},
        "server": {"socket": sock, "tcp_enabled": False},
        "summary": {"enabled": False},  # deterministic: consolidation reads the units
        "consolidate": {"timezone": tz, **consolidate},
        "retention": {"enabled": False},
        # lexical, as every bench's daemon unless it asks: with the memoryd[embed] extra in
        # the bench venv, the worker embedded every unit beside the timed consolidation
        "embed": {"enabled": False},
    })


def session_days(src: Path) -> list[str]:
    days = set()
    for f in src.rglob("*.jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                days.add(json.loads(line)["timestamp"][:10])
    return sorted(days)


async def run_daemon(home: Path, src: Path, tz: str, days: list[str], **cons: Any
                     ) -> tuple[list[dict[str, Any]], float]:
    """Start memoryd on `src`, wait for the backfill, consolidate each day in order."""
    sock_dir = Path(tempfile.mkdtemp(prefix="mdb", dir="/tmp"))
    clock = SettableClock()
    d = Daemon(settings(src, sock_dir / "m.sock", tz, **cons), resolve_paths(home),
               environ={}, clock=clock)
    await d.start()
    reports = []
    try:
        c = MemorydClient(sock_dir / "m.sock", timeout=600)
        while not (await asyncio.to_thread(c.status))["caught_up"]:
            await asyncio.sleep(0.1)
        t = 0.0
        for day in days:
            clock.set(dt.datetime.fromisoformat(f"{day}T22:00:00").replace(
                tzinfo=d.consolidator.tz))
            t0 = time.perf_counter()
            reports.append(await asyncio.to_thread(c.run_job, "consolidate", {"date": day}))
            t += time.perf_counter() - t0
    finally:
        await d.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    return reports, t


def score(home: Path, which: str) -> tuple[str, dict[str, Any]]:
    cmd = [sys.executable, str(EVAL / "score.py"), "--set", which, "--home", str(home)]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    js = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True,
                                   check=True).stdout)
    return text, js


def copy_set(which: str, dst: Path) -> Path:
    src = EVAL / "data" / which
    for f in src.glob("*/*.jsonl"):
        (dst / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst / f.parent.name / f.name)
    return dst


# -- synthetic sessions ------------------------------------------------------------------

TOOLS = ["pnpm", "ruff", "cargo", "make", "pytest", "docker", "terraform", "bun", "nix", "helm"]
THINGS = ["logs", "config files", "migrations", "fixtures", "commit messages", "branch names",
          "API responses", "error messages", "docs", "dashboards"]


def synthetic_session(rng: random.Random, day: dt.date, n: int, project: str,
                      new_fact: bool) -> list[dict[str, Any]]:
    base = dt.datetime.combine(day, dt.time(3, 0), tzinfo=dt.UTC) + dt.timedelta(minutes=n)
    rows = []
    sid = f"syn-{day.isoformat()}-{n}"

    def add(role: str, content: str, **kw: Any) -> None:
        ts = base + dt.timedelta(seconds=20 * len(rows))
        rows.append({"role": role, "content": content, "id": f"{sid}-{len(rows):03d}",
                     "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), **kw})

    add("user", f"Morning. The {rng.choice(THINGS)} in {project} look off today, can you check?")
    add("assistant", "Sure, looking at it now.")
    add("tool", f"$ {rng.choice(TOOLS)} check\n" + "\n".join(
        f"line {i}: ok" for i in range(rng.randint(3, 30))), tool_name="bash")
    if new_fact:
        tool, thing = rng.choice(TOOLS), rng.choice(THINGS)
        k = rng.randint(1, 10_000)
        add("user", f"Remember that we always use {tool} for {thing} in {project}, rule {k}.")
    add("user", "What is the capital of Australia?")
    add("assistant", "Canberra.")
    add("user", "Let's decide to keep the current layout for now.")
    add("user", "thanks!")
    return rows


def write_sessions(src: Path, sessions: list[tuple[str, list[dict[str, Any]]]]) -> None:
    for name, rows in sessions:
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def raw_read(db: Path, start: str, end: str) -> float:
    """Baseline: read the same day's units and sessions with bare sqlite3."""
    t0 = time.perf_counter()
    con = sqlite3.connect(db)
    a = dt.datetime.fromisoformat(start).replace(tzinfo=dt.UTC).timestamp()
    b = dt.datetime.fromisoformat(end).replace(tzinfo=dt.UTC).timestamp()
    con.execute("SELECT s.*, u.* FROM units u JOIN sessions s ON s.id = u.session_pk "
                "WHERE u.ts >= ? AND u.ts < ?", (a, b)).fetchall()
    con.close()
    return time.perf_counter() - t0


async def thousand_sessions(tmp: Path, tz: str) -> list[str]:
    rng = random.Random(7)
    src = tmp / "k-src"
    start = dt.date(2026, 3, 2)
    days = [start + dt.timedelta(days=i) for i in range(10)]
    write_sessions(src, [(f"p{i % 5}/{d.isoformat()}-{i}.jsonl",
                          synthetic_session(rng, d, i, f"p{i % 5}", rng.random() < 0.2))
                         for d in days for i in range(100)])
    home = tmp / "k-home"
    _, t = await run_daemon(home, src, "UTC", [d.isoformat() for d in days])
    db = resolve_paths(home).db
    base = sum(raw_read(db, d.isoformat(), (d + dt.timedelta(days=1)).isoformat())
               for d in days)
    return ["consolidate 1,000 sessions (10 days)", ms(t), ms(base), f"{t / base:.0f}x"]


async def ninety_days(tmp: Path, tz: str, which: str) -> list[str]:
    rng = random.Random(11)
    src = tmp / "n-src"
    dev = EVAL / "data" / which
    base_days = session_days(dev)
    start = dt.date.fromisoformat(base_days[0])
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for week in range(13):  # the dev set's five days, replayed every week
        shift = dt.timedelta(days=7 * week)
        for f in dev.glob("*/*.jsonl"):
            rows = []
            for line in f.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                ts = dt.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) + shift
                r["timestamp"] = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
                r["id"] = f"w{week}-{r['id']}"
                rows.append(r)
            out.append((f"{f.parent.name}/w{week}-{f.name}", rows))
    days = [start + dt.timedelta(days=i) for i in range(91)]
    for i, d in enumerate(days):  # a synthetic session a day; a new fact every 3rd day
        out.append((f"syn/{d.isoformat()}.jsonl",
                    synthetic_session(rng, d, i, "syn", i % 3 == 0)))
    write_sessions(src, out)
    home = tmp / "n-home"
    _, t = await run_daemon(home, src, tz, [d.isoformat() for d in days])
    mem = resolve_paths(home).memory_dir / "MEMORY.md"
    text = mem.read_text(encoding="utf-8") if mem.exists() else ""
    entries = sum(1 for ln in text.splitlines() if ln[:4].isdigit())
    raw_bytes = sum(len(json.dumps(r)) for _, rows in out for r in rows if r["role"] == "user")
    return ["MEMORY.md after 90 days", f"{entries} entries, {len(text.encode()):,} B",
            f"user text {raw_bytes:,} B", f"{len(text.encode()) / raw_bytes:.3f}x"
            f" ({ms(t)} for 91 runs)"]


# -- repeated corrections (held out: generated here, never the dev set) ---------------------

# (phrasing in one session, phrasing in a later one, words that name the rule); no marker
# words ("remember", "always", "again", "以后", "又"...): only the repetition marks them
RULES = [
    ("Use {a} here, not {b}.", "{a} please, not {b}.", "{a}|{b}"),
    ("Tabs in the {f}, not spaces.", "The {f} needs tabs, not spaces.", "{f}"),
    ("Dates in the {t} as {fmt}, no other format.", "{t}: {fmt} dates only.", "{fmt}"),
    ("格式化用 {a}，不用 {b}。", "代码格式化用 {a} 就行，不是 {b}。", "{a}|{b}"),
    ("接口字段名用 {case}，不是 {other}。", "字段名是 {case}，不要 {other}。", "{case}|{other}"),
    ("Put new helpers in {d}, not in the root.", "Helpers go in {d}, not the repo root.",
     "{d}"),
]
NOISE = [  # said in two sessions too, but not rules
    ("What is the capital of {country}?", "What is the capital of {country}?", "{country}"),
    ("The {t} look off today, can you check?", "The {t} look off today, can you check?",
     "{t}|look off"),
    ("Let's keep the {t} as they are for now.", "Let's keep the {t} as they are for now.",
     "{t}|as they are"),
    ("Not sure yet whether {a} or {b} is better.", "Not sure yet whether {a} or {b} is better.",
     "{a}|{b}"),
    ("No, not that {f}, the other one.", "No, not that {f}, the other one.", "{f}|other one"),
    ("{svc} 接口今天又超时了，你看看。", "{svc} 接口今天超时了，你看看。", "{svc}|超时"),
]
# every probe gets its own names, so a probe is found by them alone
SLOTS = {
    "tool": ["pnpm", "npm", "uv", "pip", "ruff", "flake8", "podman", "docker", "httpx",
             "requests", "vitest", "jest", "bun", "node", "black", "yapf", "poetry", "pipenv",
             "mypy", "pyright", "eslint", "biome", "prettier", "dprint", "maven", "gradle"],
    "f": ["Makefile", "justfile", "Go files", "Taskfile", "Dockerfile", "Procfile"],
    "fmt": ["ISO 8601", "RFC 3339", "YYYY-MM-DD", "Unix seconds"],
    "case": ["snake_case", "camelCase", "kebab-case", "PascalCase"],
    "d": ["src/lib", "pkg/util", "app/helpers", "internal/tools"],
    "country": ["Peru", "Chile", "Kenya", "Laos"],
    "t": list(THINGS),
    "svc": ["行情", "订单", "支付", "账户"],
}


class Names:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.left = {k: rng.sample(v, len(v)) for k, v in SLOTS.items()}

    def fill(self, tpl: tuple[str, str, str]) -> tuple[str, str, str]:
        text = "".join(tpl)
        kw = {k: v.pop() for k, v in self.left.items() if "{" + k + "}" in text}
        for k in ("a", "b"):
            if "{" + k + "}" in text:
                kw[k] = self.left["tool"].pop()
        if "{other}" in text:
            kw["other"] = self.rng.choice([c for c in SLOTS["case"] if c != kw["case"]])
        return tuple(x.format(**kw) for x in tpl)  # type: ignore[return-value]


async def repeated_corrections(tmp: Path, tz: str) -> list[list[str]]:
    """Rules said in two sessions a few days apart without marker words, noise said twice
    the same way, and rules said once: how many of each reach MEMORY.md."""
    rng = random.Random(23)
    names = Names(rng)
    src = tmp / "r-src"
    start = dt.date(2026, 4, 6)
    sessions: dict[tuple[int, int], list[tuple[str, str]]] = {}
    probes = []
    for kind, tpls, twice in (("rule", RULES, True), ("noise", NOISE, True),
                              ("once", RULES, False)):
        for n, tpl in enumerate(tpls * 2):
            first, second, key = names.fill(tpl)
            d1 = rng.randrange(0, 10)
            sessions.setdefault((d1, rng.randrange(3)), []).append(("user", first))
            if twice:
                d2 = d1 + rng.randrange(1, 8)
                sessions.setdefault((d2, rng.randrange(3)), []).append(("user", second))
            probes.append((kind, key, first))
    out = []
    for (d, k), said in sorted(sessions.items()):
        day = start + dt.timedelta(days=d)
        turns: list[tuple[str, str]] = [("user", f"Morning. Working on the {rng.choice(THINGS)}.")]
        for role, text in said:
            turns += [("assistant", "Sure, on it."), (role, text)]
        turns += [("assistant", "Done."), ("user", "thanks!")]
        base = dt.datetime.combine(day, dt.time(3 + k), tzinfo=dt.UTC)
        sid = f"rc-{day.isoformat()}-{k}"
        out.append((f"r/{sid}.jsonl", [
            {"role": r, "content": t, "id": f"{sid}-{i:03d}",
             "timestamp": (base + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (r, t) in enumerate(turns)]))
    write_sessions(src, out)
    home = tmp / "r-home"
    days = sorted({(start + dt.timedelta(days=d)).isoformat() for d, _ in sessions})
    await run_daemon(home, src, "UTC", days)
    mem = resolve_paths(home).memory_dir / "MEMORY.md"
    lines = mem.read_text(encoding="utf-8").splitlines() if mem.exists() else []
    rows = []
    for kind, label in (("rule", "rules said in 2 sessions, no marker word"),
                        ("noise", "noise said in 2 sessions"), ("once", "rules said once")):
        ps = [p for p in probes if p[0] == kind]
        hit = sum(any(ln[:4].isdigit() and all(k.casefold() in ln.casefold()
                                               for k in p[1].split("|")) for ln in lines)
                  for p in ps)
        rows.append([label, f"{hit}/{len(ps)}", f"{hit / len(ps):.2f}"])
    return rows


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="dev")
    ap.add_argument("--tz", default="Asia/Shanghai")
    ap.add_argument("--skip-sim", action="store_true", help="only the scored set")
    ap.add_argument("--keep", type=Path, help="leave the memoryd home here")
    ap.add_argument("--fit-on", nargs="*", metavar="SET",
                    help="fit the scorer's weights on these sets first (cross-validation: "
                         "every set but --set); without it, the weights memoryd ships")
    args = ap.parse_args()
    if args.fit_on is not None:
        from bench.admission_fit import examples, fit
        from memoryd.consolidate import scorer
        scorer.WEIGHTS.clear()
        scorer.WEIGHTS.update(fit([e for s in args.fit_on for e in examples(s)], 1.0))
        print(f"weights fitted on {', '.join(args.fit_on)}; scored on {args.set}\n")
    with tempfile.TemporaryDirectory(prefix="md-adm") as t:
        tmp = Path(t)
        src = copy_set(args.set, tmp / "src")
        home = args.keep or tmp / "home"
        reports, took = await run_daemon(home, src, args.tz, session_days(src))
        text, js = score(home, args.set)
        print(text.rstrip())
        m = js.get("metrics", js)
        goals = [("q1_recall", ">=", 0.8), ("q3_leak_memory", "<=", 0.02), ("dup", "<=", 0.0),
                 ("sup_ok", ">=", 0.8), ("q2_section", ">=", 0.9)]
        rows = []
        for k, op, goal in goals:
            v = m.get(k)
            ok = v is not None and (v >= goal if op == ">=" else v <= goal)
            rows.append([k, f"{v}", f"{op} {goal}", "ok" if ok else "MISSED"])
        print()
        print(table(rows, ["goal (extractive)", "value", "target", ""]))
        print(f"\nconsolidated {len(reports)} days in {ms(took)}")
        print()
        print(table(await repeated_corrections(tmp, args.tz),
                    ["repeated corrections (held out)", "in MEMORY.md", "share"]))
        if not args.skip_sim:
            print()
            print(table([await thousand_sessions(tmp, args.tz),
                         await ninety_days(tmp, args.tz, args.set)],
                        ["figure", "memoryd", "raw baseline", "ratio"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
