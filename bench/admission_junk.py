"""Junk in MEMORY.md on real transcripts: memoryd consolidates the real agents' fixture
transcripts (tests/fixtures/sessions, every day they hold, extractive mode) and each
MEMORY.md line is judged against hand labels (tests/fixtures/memory_labels.json: for
user sentences of those transcripts, whether they deserve long-term memory). Prints the
share of admitted lines that do not, and the lines no label covers (label them).

The raw baseline, measured in the same run: the share of junk if every user sentence
of the transcripts were admitted.

    .venv/bin/python bench/admission_junk.py [--keep DIR] [-v]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memoryd.client import MemorydClient  # noqa: E402
from memoryd.config import load_settings  # noqa: E402
from memoryd.consolidate.clock import SettableClock  # noqa: E402
from memoryd.daemon import Daemon  # noqa: E402
from memoryd.memory.document import parse  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "sessions"
LABELS = ROOT / "tests" / "fixtures" / "memory_labels.json"
TZ = "UTC"


def key(text: str) -> str:
    """A label's key: the first 60 letters and digits of the text, case-folded."""
    t = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in t if ch.isalnum())[:60]


def judge(line: str, labels: dict[str, bool]) -> bool | None:
    """True: deserves MEMORY.md; False: junk; None: no label holds it."""
    k = key(line)
    verdicts = [v for lk, v in labels.items() if lk and (lk in k or k[:40] in lk)]
    if not verdicts:
        return None
    return all(verdicts)


async def consolidate(src: Path, home: Path) -> list[str]:
    sock_dir = Path(tempfile.mkdtemp(prefix="mdj", dir="/tmp"))
    clock = SettableClock()
    s = load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": "auto", "path": src}], "default_sources": False},
        "server": {"socket": sock_dir / "m.sock", "tcp_enabled": False},
        "summary": {"enabled": False}, "consolidate": {"timezone": TZ},
        "retention": {"enabled": False}})
    d = Daemon(s, resolve_paths(home), environ={}, clock=clock)
    await d.start()
    try:
        c = MemorydClient(sock_dir / "m.sock", timeout=120)
        for _ in range(600):
            st = await asyncio.to_thread(c.status)
            if st["caught_up"] and st["units"] > 0:
                break
            await asyncio.sleep(0.1)
        days = await d.store.read(lambda conn: sorted({
            dt.datetime.fromtimestamp(r[0], dt.UTC).date().isoformat() for r in conn.execute(
                "SELECT ts FROM units WHERE role = 'user' AND ts IS NOT NULL")}))
        for day in days:
            clock.set(dt.datetime.fromisoformat(day).replace(hour=23, tzinfo=dt.UTC))
            await asyncio.to_thread(c.run_job, "consolidate", {"date": day})
        users = await d.store.read(lambda conn: [r[0] for r in conn.execute(
            "SELECT content FROM units WHERE role = 'user' AND kind = 'message'")])
    finally:
        await d.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    path = home / "data" / "memory" / "MEMORY.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [it for e in parse(text).entries for it in e.items] + ["\0"] + users


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="leave the memoryd home here")
    ap.add_argument("-v", action="store_true", help="print every line with its verdict")
    a = ap.parse_args()
    labels = {key(k): v for k, v in json.loads(LABELS.read_text(encoding="utf-8"))["labels"]
              .items()}
    with tempfile.TemporaryDirectory(prefix="md-junk") as t:
        src = Path(t) / "sessions"
        shutil.copytree(FIXTURES, src)
        home = a.keep or Path(t) / "home"
        out = asyncio.run(consolidate(src, home))
    cut = out.index("\0")
    items, users = out[:cut], out[cut + 1:]
    verdicts = [(judge(it, labels), it) for it in items]
    junk = sum(v is False for v, _ in verdicts)
    unl = [it for v, it in verdicts if v is None]
    if a.v or unl:
        for v, it in verdicts:
            if a.v or v is None:
                print(f"  {'keep' if v else 'JUNK' if v is False else '????'}  {it[:150]}")
    from memoryd.summarize.extractive import sentences
    every = [s for u in users for s in sentences(u or "")]
    raw = [judge(s, labels) for s in every]
    raw_junk = sum(v is not True for v in raw) / max(1, len(raw))
    print(f"\nMEMORY.md lines {len(items)}, junk {junk} ({junk / max(1, len(items)):.0%}), "
          f"unlabelled {len(unl)}")
    worthy = [lk for lk, v in labels.items() if v]
    found = sum(any(lk in key(it) for it in items) for lk in worthy)
    print(f"sentences labelled worth keeping that reached MEMORY.md: {found} of {len(worthy)}")
    print(f"raw baseline (every user sentence admitted): {len(every)} lines, "
          f"junk or unlabelled {raw_junk:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
