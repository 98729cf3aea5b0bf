"""Test helper: run one transcript file through an adapter the way the ingestor does,
without the store: first line -> detect (unless an adapter is given), `start`, then every
line through `parse_line` (or the whole document through `parse_document`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from memoryd.ingest.adapters import Adapter, detect
from memoryd.ingest.adapters.base import FileState
from memoryd.models import Record

FIRST_LINE_CAP = 1 << 20


def read_first_line(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.readline(FIRST_LINE_CAP).rstrip(b"\r\n")


def parse_fixture(
    path: Path, root: Path, adapter: Adapter | None = None
) -> tuple[FileState, list[Record], int]:
    """(final state, records, lines that failed to decode)."""
    if adapter is None:
        adapter = detect(path, root, read_first_line(path))
        assert adapter is not None, f"no adapter claims {path}"
    state = adapter.start(path, root)
    if adapter.whole_file:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return state, [], 1
        return state, adapter.parse_document(doc, state), 0
    records: list[Record] = []
    bad = 0
    with path.open("rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            records.extend(adapter.parse_line(obj, state))
            json.dumps(state)  # the state must stay JSON-serializable at every step
    return state, records, bad


def session_of(record: Record, state: FileState) -> str:
    return record.session_id or state["session_id"]


def role_counts(records: Iterable[Record]) -> dict[str, int]:
    return dict(Counter(r.role for r in records))


def unit_counts(records: Iterable[Record]) -> dict[str, int]:
    """Stored units per role: records sharing a record id (appended parts, replays) are one."""
    seen: dict[str, str] = {}
    for r in records:
        seen.setdefault(r.record_id, r.role)
    return dict(Counter(seen.values()))


def kind_counts(records: Iterable[Record]) -> dict[str, int]:
    return dict(Counter(r.kind for r in records))


def unpaired_calls(records: list[Record]) -> set[str | None]:
    """Call ids with a tool_call but no tool_result record, or the reverse; None stands
    for tool records that carry no call id at all."""
    calls = {r.related_id for r in records if r.kind == "tool_call"}
    results = {r.related_id for r in records if r.kind == "tool_result"}
    return (calls ^ results) | ({None} & (calls | results))


def duplicate_keys(records: list[Record]) -> list[tuple[str, str | None]]:
    """(record_id, part_id) pairs produced more than once."""
    counts = Counter((r.record_id, r.part_id) for r in records)
    return [key for key, n in counts.items() if n > 1]
