"""Redaction cost: MB/s of `Redactor.clean` over realistic transcript text, against raw
baselines measured in the same run.

Texts: every record (content and tool arguments, as the ingestor passes them) that
memoryd's adapters read from the test fixtures (tests/fixtures/sessions, real
transcripts of every agent), plus synthetic messages and tool outputs from
bench/harness.py's generator. Each side cleans the same list of texts, in a rotating
order, `--repeat` times; the best run counts (least disturbed by the shared machine).

- floor: `str.lower()` of every text (the one pass the guarded rules need);
- plain regex: one `re.sub` of a single token pattern (sk-/ghp_/AKIA) over every text,
  the cheapest redactor that does anything;
- old redactor: memoryd/ingest/redact.py as of 4987321 (11 patterns), read from git;
- before the pre-scan: memoryd.redact as of 0de4d20 (same rules, each guarded by its own
  substring searches and a regex scan of long words), read from git;
- memoryd: `memoryd.redact.Redactor` as the daemon builds it.

`--rules` also prints where memoryd's time goes: its one pre-scan (`memoryd.redact.prescan`)
and each rule it then runs, with how many texts ran it (thread CPU, µs per text).

    .venv/bin/python bench/redact.py [--quick] [--rules] [--fixtures DIR] [--synthetic N]
                                     [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness as h  # noqa: E402
from memoryd.ingest.adapters import detect  # noqa: E402
from memoryd.redact import Redactor  # noqa: E402

OLD_COMMIT = "4987321"
PREV_COMMIT = "0de4d20"  # the package before its one pre-scan: a word scan + substring searches


def fixture_texts(base: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(p for p in base.rglob("*") if p.suffix in (".jsonl", ".json")):
        root = path.parent
        with path.open("rb") as f:
            first = f.readline(1 << 20).rstrip(b"\r\n")
        adapter = detect(path, root, first)
        if adapter is None:
            continue
        state = adapter.start(path, root)
        try:
            if adapter.whole_file:
                records = adapter.parse_document(json.loads(path.read_text("utf-8")), state)
            else:
                records = []
                for raw in path.read_bytes().splitlines():
                    try:
                        records += adapter.parse_line(json.loads(raw), state)
                    except ValueError:
                        continue
        except Exception:
            continue
        for r in records:
            out += [t for t in (r.content, r.tool_args) if t]
    return out


def synthetic_texts(n: int) -> list[str]:
    gen, rng = h.TextGen(seed=7), random.Random(7)
    return [gen.message(rng, "user" if i % 2 else "assistant") if i % 25
            else gen.tool_output(rng, rng.randint(2000, 16000)) for i in range(n)]


def old_redactor() -> Callable[[str], str | None] | None:
    try:
        src = subprocess.run(["git", "show", f"{OLD_COMMIT}:memoryd/ingest/redact.py"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    mod = types.ModuleType("old_redact")
    sys.modules[mod.__name__] = mod  # dataclasses looks the module up
    exec(compile(src, "old_redact.py", "exec"), mod.__dict__)
    return mod.Redactor().clean


_PLAIN = re.compile(r"\b(?:sk-|ghp_|AKIA)[A-Za-z0-9_-]{16,}")


def previous_redactor() -> Callable[[str], str | None] | None:
    """memoryd.redact as of PREV_COMMIT, read from git into a package of its own."""
    pkg = Path(tempfile.mkdtemp(prefix="memoryd-prev-redact-")) / "prev_redact"
    pkg.mkdir()
    try:
        for name in ("__init__", "rules", "assign"):
            src = subprocess.run(["git", "show", f"{PREV_COMMIT}:memoryd/redact/{name}.py"],
                                 cwd=ROOT, capture_output=True, text=True, check=True).stdout
            (pkg / f"{name}.py").write_text(src.replace("memoryd.redact", "prev_redact"))
    except (OSError, subprocess.CalledProcessError):
        return None
    sys.path.insert(0, str(pkg.parent))
    import prev_redact  # type: ignore[import-not-found]

    return prev_redact.Redactor().clean


def sides() -> dict[str, Callable[[str], object]]:
    out: dict[str, Callable[[str], object]] = {
        "floor: str.lower": str.lower,
        "plain regex (1 pattern)": lambda t: _PLAIN.sub("[REDACTED]", t),
    }
    old = old_redactor()
    if old is not None:
        out[f"old redactor ({OLD_COMMIT})"] = old
    prev = previous_redactor()
    if prev is not None:
        out[f"before the pre-scan ({PREV_COMMIT})"] = prev
    out["memoryd Redactor"] = Redactor().clean
    return out


def run(texts: list[str], repeat: int) -> dict[str, float]:
    fns = sides()
    best = {name: float("inf") for name in fns}
    names = list(fns)
    for i in range(repeat):
        for name in names[i % len(names):] + names[: i % len(names)]:
            fn = fns[name]
            t0 = time.perf_counter()
            for t in texts:
                fn(t)
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def report(label: str, texts: list[str], repeat: int) -> None:
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    best = run(texts, repeat)
    base = best["plain regex (1 pattern)"]
    print(f"\n{label}: {len(texts)} texts, {mb:.1f} MB, best of {repeat}")
    rows = [[name, f"{secs * 1e3:.0f} ms", f"{mb / secs:.1f}", f"{len(texts) / secs / 1e3:.0f}",
             h.ratio(secs, base)] for name, secs in best.items()]
    print(h.table(rows, ["side", "time", "MB/s", "k texts/s", "÷ plain regex"]))


def by_rule(label: str, texts: list[str]) -> None:
    """Thread CPU of the pre-scan and of each rule the redactor runs after it."""
    r = Redactor()
    t0 = time.thread_time()
    todos = [r._scan.rules(t) for t in texts]
    scan = time.thread_time() - t0
    runs: dict[str, int] = {}
    cpu: dict[str, float] = {}
    for text, todo in zip(texts, todos, strict=True):
        for i, min_run in r._unguarded:
            if len(text) >= min_run:
                todo.add(i)
        if todo & r._min_run.keys():
            run = max(map(len, text.split()), default=0)
            todo = {i for i in todo if r._min_run.get(i, 0) <= run}
        for i in sorted(todo):
            rule = r._rules[i]
            t0 = time.thread_time()
            text = rule.apply(text)
            cpu[rule.name] = cpu.get(rule.name, 0.0) + time.thread_time() - t0
            runs[rule.name] = runs.get(rule.name, 0) + 1
    n = len(texts)
    rows = [["pre-scan (all rules' guards)", f"{n}", f"{scan * 1e6 / n:.1f}"]]
    rows += [[name, f"{runs[name]}", f"{secs * 1e6 / n:.1f}"]
             for name, secs in sorted(cpu.items(), key=lambda kv: -kv[1])]
    print(f"\n{label}: memoryd by rule, {n} texts (thread CPU)")
    print(h.table(rows, ["rule", "texts run", "µs per text"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", type=Path, default=ROOT / "tests" / "fixtures" / "sessions")
    ap.add_argument("--synthetic", type=int, default=20000, help="synthetic messages")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rules", action="store_true", help="memoryd's time by rule")
    a = ap.parse_args()
    if a.quick:
        a.synthetic, a.repeat = 4000, 3
    print(h.machine())
    sets = [("synthetic (bench/harness.py TextGen)", synthetic_texts(a.synthetic))]
    if a.fixtures.is_dir():
        sets.insert(0, (f"fixtures ({a.fixtures})", fixture_texts(a.fixtures)))
    for label, texts in sets:
        report(label, texts, a.repeat)
        if a.rules:
            by_rule(label, texts)


if __name__ == "__main__":
    main()
