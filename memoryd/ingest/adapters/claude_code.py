"""Claude Code: `~/.claude/projects/<encoded-cwd>/<session>.jsonl` (and sub-agent files).

Format knowledge: no writer source is public. Field meanings come from the parsers
daaain/claude-code-log (`models.py`, `parser.py`) and ryoppippi/ccusage, summarised in
shared `docs/formats.md` §1, and were checked against the recorded transcripts in
`fixtures/sessions/claude-code/` (Claude Code 1.0.119 to 2.1.7).

Mapping:
- `user` entries: typed text -> user message (id = `uuid`); `tool_result` blocks -> tool
  results; `isMeta` entries are skipped; text that is only wrapper tags (`<command-name>`,
  `<local-command-stdout>`, ...) or an interruption marker -> system meta;
  `isCompactSummary` -> compaction.
- `assistant` entries: Claude writes one line per content block and the lines of one API
  response share `message.id`, so text is a record with id = `message.id`, merge "append",
  part = the line's `uuid`; `tool_use` blocks -> tool calls; thinking is dropped.
- `summary` / `ai-title` / `custom-title` lines set `state["title"]` (custom beats ai beats
  summary; a later line of the same rank wins).
- `queue-operation`: text queued while the agent works. A `dequeue` becomes an ordinary user
  entry later, so only a `remove` (the text was injected into the running turn, the only copy
  in the file) yields a user message.
- Sub-agent entries (`isSidechain`) form their own session `<sessionId>/agent-<agentId>`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memoryd.ingest.adapters.base import FileState, content_id
from memoryd.models import Record
from memoryd.ingest.adapters.blocks import (
    call_record,
    first_object,
    flatten,
    message_record,
    result_record,
)
from memoryd.ingest.adapters.timestamps import to_unix

_OWN_TYPES = frozenset({"summary", "file-history-snapshot", "queue-operation"})
_HOMES = ("/.claude/projects/", "/claude/projects/")
_RAW_MARKERS = (b'"parentUuid"', b'"isSidechain"', b'"type":"summary"', b'"type":"file-hist')
# title line type -> (rank, keys holding the title); a higher rank is never overwritten
_PENDING_TITLES = 32
_TITLES = {
    "summary": (1, ("summary",)),
    "ai-title": (2, ("aiTitle", "title")),
    "custom-title": (3, ("customTitle", "title")),
}
_WRAPPER_ONLY = re.compile(r"\s*(?:<([A-Za-z][\w-]*)>.*?</\1>\s*)+", re.S)
_MARKERS = ("[Request interrupted by user",)
_QUEUE_MAX = 20


def is_wrapper_text(text: str) -> bool:
    """Harness text: only `<tag>…</tag>` blocks, or an interruption marker."""
    return text.startswith(_MARKERS) or _WRAPPER_ONLY.fullmatch(text) is not None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class ClaudeCodeAdapter:
    agent = "claude-code"
    whole_file = False

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        if path.suffix != ".jsonl":
            return False
        obj = first_object(first_line)
        if obj is None:
            return any(marker in first_line[:4096] for marker in _RAW_MARKERS)
        if "payload" in obj or "_type" in obj:
            return False
        kind = obj.get("type")
        own = kind in _OWN_TYPES or kind in _TITLES or "parentUuid" in obj or "isSidechain" in obj
        # a new line type in a projects folder is still Claude's
        at_home = any(marker in path.as_posix() for marker in _HOMES)
        return own or (isinstance(kind, str) and ("sessionId" in obj or at_home))

    def start(self, path: Path, root: Path) -> FileState:
        return {"session_id": path.stem, "file_session": path.stem}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        kind, msg = obj.get("type"), obj.get("message")
        _promote_pending_title(obj, state)
        if kind == "summary" and _str(obj.get("leafUuid")):
            # a `summary` titles the conversation ending at `leafUuid`, which is almost
            # always in another file (observed: none of the fixtures' 48 point into their
            # own): hold it until that entry shows up here
            pending = state.setdefault("pending_titles", {})
            pending[obj["leafUuid"]] = obj.get("summary")
            while len(pending) > _PENDING_TITLES:
                pending.pop(next(iter(pending)))
        elif kind in _TITLES:
            _set_title(obj, _TITLES[kind], state)
        elif kind == "queue-operation":
            return _queue(obj, state)
        elif kind in ("user", "assistant") and isinstance(msg, dict):
            _enter_context(obj, state)
            ts = to_unix(obj.get("timestamp"))
            meta = {"sidechain": True} if obj.get("isSidechain") is True else {}
            if kind == "assistant":
                return _assistant(obj, msg, ts, meta, state)
            if obj.get("isMeta") is not True:
                return _user(obj, msg, ts, meta, state)
        return []

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        return []


def _enter_context(obj: dict[str, Any], state: FileState) -> None:
    sid = _str(obj.get("sessionId")) or state.get("file_session") or state.get("session_id")
    if obj.get("isSidechain") is True:
        agent, stem = obj.get("agentId"), state.get("file_session")
        if isinstance(agent, str | int) and agent != "":
            sid = f"{sid}/agent-{agent}"
        elif isinstance(stem, str) and stem != sid:
            sid = f"{sid}/{stem}"
    state["session_id"] = sid
    if _str(obj.get("cwd")):
        state["project"] = obj["cwd"]


def _assistant(
    obj: dict[str, Any],
    msg: dict[str, Any],
    ts: float | None,
    meta: dict[str, Any],
    state: FileState,
) -> list[Record]:
    content = msg.get("content")
    calls: list[Record] = []
    texts: list[str] = []
    for b in content if isinstance(content, list) else [content]:
        if isinstance(b, dict) and b.get("type") == "tool_use":
            calls.append(
                call_record(state, b.get("id"), b.get("name"), b.get("input"), ts=ts, meta=meta)
            )
        else:
            texts.append(flatten(b))
    text = "\n\n".join(t for t in texts if t).strip()
    if not text or text == "(no content)":
        return calls
    part = _str(obj.get("uuid")) or content_id(ts, text)
    if _str(msg.get("model")):
        meta = meta | {"model": msg["model"]}
    if obj.get("isApiErrorMessage") is True:
        rid = content_id(ts, "error", text)
        return [message_record(state, "system", text, rid, ts=ts, kind="meta", meta=meta), *calls]
    if mid := _str(msg.get("id")):  # one line per block: the lines of one response share it
        reply = message_record(
            state, "assistant", text, mid, ts=ts, merge="append", part_id=part, meta=meta
        )
    else:
        reply = message_record(state, "assistant", text, part, ts=ts, meta=meta)
    return [reply, *calls]


def _user(
    obj: dict[str, Any],
    msg: dict[str, Any],
    ts: float | None,
    meta: dict[str, Any],
    state: FileState,
) -> list[Record]:
    content = msg.get("content")
    records: list[Record] = []
    texts: list[str] = []
    for b in content if isinstance(content, list) else [content]:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            records.append(_tool_result(obj, b, ts, meta, state))
        else:
            texts.append(flatten(b))
    text = "\n".join(t for t in texts if t).strip()
    if text:
        rid = _str(obj.get("uuid")) or content_id(ts, "user", text)
        if obj.get("isCompactSummary") is True:
            unit = message_record(state, "system", text, rid, ts=ts, kind="compaction", meta=meta)
        elif is_wrapper_text(text):
            unit = message_record(state, "system", text, rid, ts=ts, kind="meta", meta=meta)
        else:
            unit = message_record(state, "user", text, rid, ts=ts, meta=meta)
        records.insert(0, unit)
    return records


def _tool_result(
    obj: dict[str, Any],
    block: dict[str, Any],
    ts: float | None,
    meta: dict[str, Any],
    state: FileState,
) -> Record:
    extra = obj.get("toolUseResult")  # a structured second copy; only the sub-agent link is kept
    if isinstance(extra, dict) and extra.get("agentId"):
        meta = meta | {"agent_id": extra["agentId"]}
    if block.get("is_error") is True:
        meta = meta | {"is_error": True}
    return result_record(state, block.get("tool_use_id"), block.get("content"), ts=ts, meta=meta)


def _promote_pending_title(obj: dict[str, Any], state: FileState) -> None:
    pending = state.get("pending_titles")
    uuid = obj.get("uuid")
    if pending and isinstance(uuid, str) and uuid in pending:
        _set_title({"summary": pending.pop(uuid)}, _TITLES["summary"], state)


def _set_title(obj: dict[str, Any], title: tuple[int, tuple[str, ...]], state: FileState) -> None:
    rank, keys = title
    value = next(
        (obj[k].strip() for k in keys if isinstance(obj.get(k), str) and obj[k].strip()), None
    )
    if value and rank >= state.get("title_rank", 0):
        state["title"], state["title_rank"] = value, rank


def _queue(obj: dict[str, Any], state: FileState) -> list[Record]:
    op, text = obj.get("operation"), obj.get("content")
    queued: list[list[Any]] = state.setdefault("queued", [])
    if op == "enqueue" and isinstance(text, str) and text.strip():
        queued.append([obj.get("timestamp"), text])
        del queued[:-_QUEUE_MAX]
    elif op == "dequeue" and queued:
        queued.pop(0)
    elif op == "popAll":
        queued.clear()
    elif op == "remove" and queued:
        stamp, text = queued.pop(0)
        rid, ts = content_id(stamp, "queued", text), to_unix(stamp)
        return [message_record(state, "user", text.strip(), rid, ts=ts, meta={"queued": True})]
    return []


ADAPTER = ClaudeCodeAdapter()
