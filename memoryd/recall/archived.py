"""What retention archived, found by plain search and by context (DESIGN §6: retention
saves space, it never hides history; issue 27, item 5).

Retention moves an idle session's units out of the store, and so out of the search
index, into `archive/units-YYYY-MM.jsonl.gz`. Search and context still reach them: when
the index's answer does not fill the page (`max_results`, or context's `max_recalled`),
the archive files are scanned for the query's terms (the index's own terms: words, CJK
bigrams) and their units fill the rest, marked `archived` with their month. A query the
index answers in full never reads the archive, so the common case pays nothing; a scan
costs 13-26 µs per archived unit, in a thread, mostly reading the gzip'd JSON
(bench/archive_recall.py: 20-45 ms for 1,610 units, 1.3-2.6 s for 100k). Keeping
archived units in the index instead would make the index hold what the store does not,
and a rebuild from the store would lose them.

A unit matches when it holds all the terms (`and`), or at least half of them (`or`,
the default: an agent's prompt is a sentence); more terms first, then the newest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.memory import archive
from memoryd.index.text import snippet


def need(terms: list[str], mode: str) -> int:
    return len(terms) if mode == "and" else max(1, (len(terms) + 1) // 2)


def find(archive_dir: Path | None, terms: list[str], mode: str, limit: int, *,
         agent: str | None = None, project: str | None = None,
         session_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(how many archived units match, the first `limit`); file IO: call in a thread."""
    if archive_dir is None or limit <= 0 or not terms or not archive.months(archive_dir):
        return 0, []
    return archive.find(archive_dir, terms, need(terms, mode), limit, agent=agent,
                        project=project, session_id=session_id)


def result(r: dict[str, Any]) -> dict[str, Any]:
    """A search result's fields for an archived unit (it has no unit id any more)."""
    return {"unit_id": None, "record_id": str(r["record_id"]), "agent": r["agent"],
            "session_id": r["session_id"], "project": r.get("project"), "role": r["role"],
            "kind": r["kind"], "ts": r.get("ts"), "turn": int(r.get("turn") or 0),
            "snippet": snippet(str(r.get("content") or ""), r["matched"]),
            "one_liner": r.get("one_liner"), "tool_name": r.get("tool_name"), "score": 0.0,
            "path": None, "offset": r.get("offset"), "archived": r["month"],
            "why": {"matched": r["matched"], "signals": ["archive"], "duplicates": []}}
