"""Google Gemini CLI chat recordings: `~/.gemini/tmp/<project>/chats/session-<time>-<id8>.json[l]`.

Format knowledge: the writer, `google-gemini/gemini-cli`
`packages/core/src/services/chatRecordingService.ts` and `chatRecordingTypes.ts`, summarised
in shared `docs/formats.md` §3, checked against the recorded legacy document
`fixtures/sessions/gemini-cli/chats/session-2025-12-01T21-45-5b959dae.json`.

Two shapes:
- legacy `.json`: one pretty-printed `ConversationRecord` {sessionId, projectHash, startTime,
  lastUpdated, messages[]}, rewritten whole on every update (`whole_file`, `parse_document`);
- current `.jsonl` upsert log: a metadata line {sessionId, projectHash, startTime, ...,
  directories?}, then message records that are re-appended under the same `id` whenever their
  tool calls, results or token counts change. Records are keyed by that id with merge
  "replace" (last wins), and so are the tool call/result records (ids from `toolCalls[].id`).
  `{"$set": ...}` patches are read only for `summary` (the session title) and `directories`
  (the project); `messages` replacements and `{"$rewindTo": id}` are ignored: memory keeps
  what was said, even when the model's context was later rewound or compressed.
Message types: user -> user, gemini -> assistant (thoughts dropped), info/error/warning ->
system meta. `logs.json` (a prompt list) and `checkpoint-*.json` are not transcripts.
The project is the first of `directories` when given; the legacy document has only a
`projectHash`, kept in state but not resolvable without reading other files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.ingest.adapters.base import FileState, content_id
from memoryd.models import Kind, Record, Role
from memoryd.ingest.adapters.blocks import (
    call_record,
    first_object,
    flatten,
    message_record,
    result_record,
)
from memoryd.ingest.adapters.timestamps import to_unix

_ROLES: dict[str, tuple[Role, Kind]] = {
    "user": ("user", "message"),
    "gemini": ("assistant", "message"),
}
_SYSTEM_TYPES = frozenset({"info", "error", "warning"})


class GeminiCliAdapter:
    agent = "gemini-cli"

    def __init__(self, *, whole_file: bool) -> None:
        # Two objects share this class: the `.jsonl` log (ADAPTER) and the legacy `.json`
        # document (DOCUMENT_ADAPTER); each claims only its own suffix.
        self.whole_file = whole_file

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        if path.suffix != (".json" if self.whole_file else ".jsonl"):
            return False
        obj = first_object(first_line)
        if self.whole_file:
            if not path.name.startswith("session-"):
                return False
            if obj is None:  # pretty-printed: the first line is a lone "{"
                return first_line.strip() == b"{"
            return "sessionId" in obj and isinstance(obj.get("messages"), list)
        if obj is None:
            return False
        return isinstance(obj.get("sessionId"), str) and "projectHash" in obj and "type" not in obj

    def start(self, path: Path, root: Path) -> FileState:
        return {"session_id": path.stem}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        if "$set" in obj:
            patch = obj["$set"]
            if isinstance(patch, dict):
                _session_info(patch, state)
            return []
        if "$rewindTo" in obj:
            return []
        if "type" in obj and ("id" in obj or "content" in obj):
            return _message(obj, state)
        if "sessionId" in obj:
            _session_info(obj, state)
        return []

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        _session_info(obj, state)
        messages = obj.get("messages")
        records: list[Record] = []
        for msg in messages if isinstance(messages, list) else []:
            if isinstance(msg, dict):
                records.extend(_message(msg, state))
        return records


def _session_info(obj: dict[str, Any], state: FileState) -> None:
    sid = obj.get("sessionId")
    if isinstance(sid, str) and sid:
        state["session_id"] = sid
    if isinstance(obj.get("projectHash"), str):
        state["project_hash"] = obj["projectHash"]
    dirs = obj.get("directories")
    if isinstance(dirs, list) and dirs and isinstance(dirs[0], str) and dirs[0]:
        state["project"] = dirs[0]
    summary = obj.get("summary")
    if isinstance(summary, str) and summary.strip():
        state["title"] = summary.strip()


def _message(msg: dict[str, Any], state: FileState) -> list[Record]:
    kind = msg.get("type")
    ts = to_unix(msg.get("timestamp"))
    text = flatten(msg.get("content"))
    mid = msg.get("id")
    rid = str(mid) if isinstance(mid, str | int) and mid != "" else content_id(ts, kind, text)
    records: list[Record] = []
    if text and (kind in _ROLES or kind in _SYSTEM_TYPES):
        role, rkind = _ROLES.get(str(kind), ("system", "meta"))
        meta = {"model": msg["model"]} if isinstance(msg.get("model"), str) else {}
        records.append(
            message_record(state, role, text, rid, ts=ts, kind=rkind, merge="replace", meta=meta)
        )
    calls = msg.get("toolCalls")
    for call in calls if kind == "gemini" and isinstance(calls, list) else []:
        if isinstance(call, dict):
            records.extend(_tool_call(call, ts, state))
    return records


def _tool_call(call: dict[str, Any], msg_ts: float | None, state: FileState) -> list[Record]:
    ts = to_unix(call.get("timestamp")) or msg_ts
    cid, name = call.get("id"), call.get("name")
    out = [call_record(state, cid, name, call.get("args"), ts=ts, merge="replace")]
    result = call.get("result")
    if result is None and isinstance(call.get("resultDisplay"), str):
        result = call["resultDisplay"]
    if result is not None:
        status = call.get("status")
        meta = {"status": status} if isinstance(status, str) and status != "success" else {}
        out.append(result_record(state, cid, result, ts=ts, name=name, merge="replace", meta=meta))
    return out


ADAPTER = GeminiCliAdapter(whole_file=False)
DOCUMENT_ADAPTER = GeminiCliAdapter(whole_file=True)
