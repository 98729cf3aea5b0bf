"""Archive files: `archive/units-YYYY-MM.jsonl.gz`, one gzip'd JSON line per unit
(with its session's agent and id), by the month of the session's last activity.

A file is only ever replaced whole (temp file, fsync, rename) and records are keyed by
(agent, session_id, record_id), so writing a batch again after a crash adds nothing
twice. All functions here do file IO: call them in a thread.
"""

from __future__ import annotations

import gzip
import heapq
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd.memory.atomic import remove_durably, write_atomic

NAME = re.compile(r"^units-(\d{4}-\d{2})\.jsonl\.gz$")


def path_for(archive_dir: Path, month: str) -> Path:
    return archive_dir / f"units-{month}.jsonl.gz"


def months(archive_dir: Path) -> list[tuple[str, Path]]:
    try:
        found = [(m.group(1), p) for p in archive_dir.iterdir() if (m := NAME.match(p.name))]
    except FileNotFoundError:
        return []
    return sorted(found)


def read(path: Path) -> list[dict[str, Any]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _key(r: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """A record's identity: in a fleet two machines' sessions of one id (two `chat.jsonl`)
    have records of the same ids, and both are kept."""
    return (str(r["agent"]), str(r["session_id"]), str(r["record_id"]),
            str(r.get("machine") or ""))


def _write(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    if not records:
        remove_durably(path)
        return
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    write_atomic(path, gzip.compress(body.encode("utf-8"), mtime=0))


def add(archive_dir: Path, month: str, records: Iterable[Mapping[str, Any]]) -> int:
    """Merge records into the month's file; returns how many were new."""
    path = path_for(archive_dir, month)
    old = read(path)
    have = {_key(r) for r in old}
    new = []
    for r in records:
        k = _key(r)
        if k not in have:
            have.add(k)
            new.append(dict(r))
    if new:
        _write(path, old + new)
    return len(new)


def take(archive_dir: Path, agent: str, session_id: str, *, remove: bool,
         machine: str | None = None) -> list[dict[str, Any]]:
    """A session's records from every file; with `remove`, rewrite the files without
    them (forget, and after a restore). With `machine` (a fleet, where machines may each
    have a session of this id) only that machine's; a record archived before records
    named their machine could be any machine's, and is taken too."""
    def mine(r: dict[str, Any]) -> bool:
        return (r["agent"] == agent and r["session_id"] == session_id
                and (machine is None or "machine" not in r or r["machine"] == machine))

    out: list[dict[str, Any]] = []
    for _, path in months(archive_dir):
        recs = read(path)
        found = [r for r in recs if mine(r)]
        if not found:
            continue
        out += found
        if remove:
            _write(path, [r for r in recs if not mine(r)])
    return out


def search(archive_dir: Path, query: str, limit: int,
           agent: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Every query word (case-insensitive substring, so CJK works) in a unit's content or
    one-liner. Newest months first."""
    words = [w.casefold() for w in query.split() if w.strip()]
    total = 0
    hits: list[dict[str, Any]] = []
    for month, path in reversed(months(archive_dir)):
        for r in _records(path):
            if agent is not None and r["agent"] != agent:
                continue
            hay = (str(r.get("content") or "") + "\n" + str(r.get("one_liner") or "")).casefold()
            if all(w in hay for w in words):
                total += 1
                if len(hits) < limit:
                    hits.append({"month": month, "agent": r["agent"],
                                 "session_id": r["session_id"], "seq": r["seq"],
                                 "role": r["role"], "ts": r["ts"], "tool_name": r.get("tool_name"),
                                 "one_liner": r.get("one_liner"),
                                 "content": _snippet(str(r.get("content") or ""), words)})
    return total, hits


def find(archive_dir: Path, terms: Sequence[str], need: int, limit: int, *,
         agent: str | None = None, project: str | None = None,
         session_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Archived units holding at least `need` of `terms` (case-insensitive substrings of
    the content or one-liner: CJK bigrams match as they are), the most terms first, then
    the newest: (how many, the first `limit` with their whole record and `matched`)."""
    words = list(dict.fromkeys(t.casefold() for t in terms if t))
    if not words:
        return 0, []
    total, n = 0, 0
    best: list[tuple[int, float, int, dict[str, Any]]] = []  # a min-heap of the top `limit`
    for month, path in reversed(months(archive_dir)):
        for r in _records(path):
            if (agent is not None and r["agent"] != agent) or (
                    project is not None and r.get("project") != project) or (
                    session_id is not None and r["session_id"] != session_id):
                continue
            hay = (str(r.get("content") or "") + "\n" + str(r.get("one_liner") or "")).casefold()
            matched = [w for w in words if w in hay]
            if len(matched) < need:
                continue
            total += 1
            n += 1
            key = (len(matched), float(r.get("ts") or 0.0), -n)
            if len(best) < limit:
                heapq.heappush(best, (*key, {**r, "month": month, "matched": matched}))
            elif key > best[0][:3]:
                heapq.heapreplace(best, (*key, {**r, "month": month, "matched": matched}))
    return total, [x[3] for x in sorted(best, key=lambda x: x[:3], reverse=True)]


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _snippet(text: str, words: Sequence[str], width: int = 240) -> str:
    low = text.casefold()
    at = min((i for w in words if (i := low.find(w)) >= 0), default=0)
    start = max(0, at - width // 3)
    s = text[start:start + width]
    return ("…" if start else "") + s + ("…" if start + width < len(text) else "")
