"""HKUDS/nanobot sessions: `<workspace>/sessions/<key>.jsonl` (`cli_direct.jsonl`, ...).

Format knowledge: the writer, `HKUDS/nanobot` `nanobot/session/manager.py` (all revisions)
and `nanobot/config/paths.py`, summarised in shared `docs/formats.md` §6, checked against the
recorded sessions in `fixtures/sessions/nanobot/` (Feb-2026 and Mar/Apr-2026 formats).

Line 1 is `{"_type": "metadata", "key": "cli:direct", ...}`; any `_type` line (also the newer
`provider_state`) is skipped, its `key` becomes the title. Then OpenAI-chat-style messages
with naive **local** timestamps: user / assistant (`tool_calls` -> tool calls) / tool
(`tool_call_id`) -> tool result. Feb-2026 files keep only the final assistant text plus
`tools_used` (kept in meta) and may leak the model's reasoning as a `...</think>` prefix,
which is cut off; `reasoning_content` is dropped.
No ids are written: a message's id is content_id(role, timestamp, content) (a line
without a timestamp: its place in the file, as the ingestor derives it). There is no
session uuid either, so the session id is the file's path under the source root (two
`cli_direct.jsonl` in two workspaces are two sessions), and the project is the workspace:
the folder holding `sessions/`, else the file's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.ingest.adapters.base import FileState, content_id, relative_key
from memoryd.models import Record, Role
from memoryd.ingest.adapters.blocks import (
    chat_tool_calls,
    first_object,
    flatten,
    message_record,
    result_record,
)
from memoryd.ingest.adapters.timestamps import to_unix

_RAW_MARKERS = (b'"_type": "metadata"', b'"_type":"metadata"')
_THINK_END = "</think>"


def strip_reasoning(text: str) -> str:
    """Drop a leaked `<think>…</think>` / `…</think>` reasoning prefix."""
    if _THINK_END not in text:
        return text
    return text.rpartition(_THINK_END)[2].strip()


class NanobotAdapter:
    agent = "nanobot"
    whole_file = False

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        if path.suffix != ".jsonl":
            return False
        obj = first_object(first_line)
        if obj is None:
            return any(marker in first_line[:256] for marker in _RAW_MARKERS)
        return obj.get("_type") == "metadata"

    def start(self, path: Path, root: Path) -> FileState:
        folder = path.parent
        workspace = folder.parent if folder.name == "sessions" else folder
        return {"session_id": relative_key(path, root), "project": str(workspace),
                "path_session": True}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        if "_type" in obj:
            key = obj.get("key")
            if obj.get("_type") == "metadata" and isinstance(key, str) and key:
                state["title"] = key
            return []
        role, raw = obj.get("role"), obj.get("content")
        ts = to_unix(obj.get("timestamp"))
        if role == "user":
            return _text(state, "user", raw, obj, ts)
        if role == "assistant":
            records = _text(state, "assistant", raw, obj, ts)
            return records + chat_tool_calls(state, obj.get("tool_calls"), ts=ts)
        if role == "tool":
            return [result_record(state, obj.get("tool_call_id"), raw, ts=ts, name=obj.get("name"))]
        return []

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        return []


def _text(
    state: FileState, role: Role, raw: object, obj: dict[str, Any], ts: float | None
) -> list[Record]:
    text = flatten(raw)
    if role == "assistant":
        text = strip_reasoning(text)
    if not text:
        return []
    meta: dict[str, Any] = {}
    tools = obj.get("tools_used")
    if isinstance(tools, list) and tools:
        meta["tools_used"] = [t for t in tools if isinstance(t, str)]
    stamp = obj.get("timestamp")  # without one, "": the line's place identifies it
    rid = "" if stamp is None else content_id(role, stamp, raw if isinstance(raw, str) else text)
    return [message_record(state, role, text, rid, ts=ts, meta=meta)]


ADAPTER = NanobotAdapter()
