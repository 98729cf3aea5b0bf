"""pi (badlogic/pi-mono coding agent): `~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl`.

Format knowledge: the writer, `badlogic/pi-mono` `packages/coding-agent/src/core/
session-manager.ts` and `docs/session.md`, summarised in shared `docs/formats.md` §4, checked
against the recorded v1 session `fixtures/sessions/pi/large-session.jsonl` and the v3 files
OpenClaw writes (`fixtures/sessions/openclaw/`, see openclaw.py, which reuses this class).

The first line is a `{"type": "session", ...}` header (session id = its `id`, else the file
stem; project = its `cwd`). Entries:
- `message` with role user / assistant (text -> message; `toolCall` blocks -> tool calls;
  thinking dropped) / toolResult -> tool result / bashExecution (a `!command` the user ran) ->
  tool call + result / compactionSummary, branchSummary -> compaction; `custom` and
  hook messages (injected by extensions) are skipped;
- `compaction`, `branch_summary` entries -> compaction; `session_info.name` -> title.
Assistant messages that ended in `error` or `aborted` keep their text, but their tool calls
were never executed (no result ever follows; 18 such calls in the v1 fixture) and are dropped.
Record ids: v2+ entries carry `id` (tool records use the call id); v1 has none, so
content_id(timestamp, role, text).
"""

from __future__ import annotations

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

_RAW_MARKERS = (b'"type":"session"', b'"type": "session"')
_UNFINISHED = frozenset({"error", "aborted"})
_SUMMARY_ENTRIES = frozenset({"compaction", "branch_summary"})
_SUMMARY_ROLES = frozenset({"compactionSummary", "branchSummary"})


def is_session_header(first_line: bytes) -> bool:
    obj = first_object(first_line)
    if obj is None:
        head = first_line[:256]
        return any(marker + b"," in head or marker + b"}" in head for marker in _RAW_MARKERS)
    return obj.get("type") == "session"


def in_openclaw_sessions(path: Path) -> bool:
    """`.../agents/<agentId>/sessions/<file>`: OpenClaw's layout."""
    parts = path.parts
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"


class PiAdapter:
    agent = "pi"
    whole_file = False

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        return (
            path.suffix == ".jsonl"
            and not in_openclaw_sessions(path)
            and is_session_header(first_line)
        )

    def start(self, path: Path, root: Path) -> FileState:
        return {"session_id": path.stem}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        kind = obj.get("type")
        if kind == "session":
            self.header(obj, state)
            return []
        ts = to_unix(obj.get("timestamp"))
        entry_id = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else None
        if kind == "message" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            if ts is None:
                ts = to_unix(msg.get("timestamp"))
            return self.message(msg, entry_id, ts, state)
        if kind in _SUMMARY_ENTRIES:
            return _summary(obj.get("summary"), entry_id, ts, state)
        if kind == "session_info" and isinstance(obj.get("name"), str) and obj["name"].strip():
            state["title"] = obj["name"].strip()
        return []

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        return []

    def header(self, obj: dict[str, Any], state: FileState) -> None:
        if isinstance(obj.get("id"), str) and obj["id"]:
            state["session_id"] = obj["id"]
        if isinstance(obj.get("cwd"), str) and obj["cwd"]:
            state["project"] = obj["cwd"]

    def assistant_text(self, text: str) -> str:
        """Hook for dialects that decorate assistant text (OpenClaw)."""
        return text

    def message(
        self, msg: dict[str, Any], entry_id: str | None, ts: float | None, state: FileState
    ) -> list[Record]:
        role = msg.get("role")
        if role == "user":
            text = flatten(msg.get("content"))
            rid = entry_id or content_id(ts, "user", text)
            return [message_record(state, "user", text, rid, ts=ts)] if text else []
        if role == "assistant":
            return self.assistant(msg, entry_id, ts, state)
        if role == "toolResult":
            meta = {"is_error": True} if msg.get("isError") is True else {}
            return [
                result_record(
                    state,
                    msg.get("toolCallId"),
                    msg.get("content"),
                    ts=ts,
                    name=msg.get("toolName"),
                    meta=meta,
                )
            ]
        if role == "bashExecution":
            return _bash(msg, entry_id, ts, state)
        if role in _SUMMARY_ROLES:
            return _summary(msg.get("summary"), entry_id, ts, state)
        return []

    def assistant(
        self, msg: dict[str, Any], entry_id: str | None, ts: float | None, state: FileState
    ) -> list[Record]:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [content]
        finished = msg.get("stopReason") not in _UNFINISHED
        calls: list[Record] = []
        texts: list[str] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                if finished:
                    calls.append(
                        call_record(
                            state, block.get("id"), block.get("name"), block.get("arguments"), ts=ts
                        )
                    )
            else:
                texts.append(flatten(block))
        text = self.assistant_text("\n\n".join(t for t in texts if t).strip())
        if not text:
            return calls
        meta = {k: msg[k] for k in ("model", "stopReason") if isinstance(msg.get(k), str)}
        rid = entry_id or content_id(ts, "assistant", text)
        return [message_record(state, "assistant", text, rid, ts=ts, meta=meta), *calls]


def _summary(
    summary: object, entry_id: str | None, ts: float | None, state: FileState
) -> list[Record]:
    text = flatten(summary)
    if not text:
        return []
    rid = entry_id or content_id(ts, "compaction", text)
    return [message_record(state, "system", text, rid, ts=ts, kind="compaction")]


def _bash(
    msg: dict[str, Any], entry_id: str | None, ts: float | None, state: FileState
) -> list[Record]:
    command = msg.get("command")
    if not isinstance(command, str) or not command:
        return []
    call_id = entry_id or content_id(ts, "bash", command)
    meta = {
        k: msg[k] for k in ("exitCode", "cancelled", "truncated") if msg.get(k) not in (None, False)
    }
    return [
        call_record(
            state, call_id, "bash", {"command": command}, ts=ts, meta={"user_initiated": True}
        ),
        result_record(state, call_id, msg.get("output"), ts=ts, name="bash", meta=meta),
    ]


ADAPTER = PiAdapter()
