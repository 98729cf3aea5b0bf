"""Generic OpenAI-messages JSONL: one `{"role", "content"}` chat message per line.

Format knowledge: the OpenAI Chat Completions message shape (`role`, `content` as a string or
a list of parts, `tool_calls[].function.{name, arguments}`, `tool_call_id`, `name`), as
described in shared `docs/formats.md` §7, plus the optional keys the benchmark corpus
`eval/data/lme-dev/<scope>/<session>.jsonl` uses: `id` (kept as the record id, e.g.
"06f04340:0844dea6:0"), `timestamp` (naive = local time) and `cwd`. Both are optional: a
line with neither is identified by its place in the file (the ingestor's record id from
its byte offset), so five identical "continue" lines are five messages.

A file is claimed when its first line is such a message with none of the keys that mark
another agent's dialect (`type`, `payload`, `uuid`, `_type`, ...), or a header object
(only `cwd`, `title`, `session_id`, ... and no `role`) that sets the project or title.
Session id = the file's path under the source root; project = `cwd` when given, else the
file's folder. system/developer lines are kept as system meta.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryd.ingest.adapters.base import FileState, content_id, relative_key
from memoryd.models import Record
from memoryd.ingest.adapters.blocks import (
    chat_tool_calls,
    first_object,
    flatten,
    message_record,
    result_record,
)
from memoryd.ingest.adapters.timestamps import to_unix

_FOREIGN_KEYS = frozenset(
    {"type", "payload", "uuid", "_type", "parentUuid", "sessionId", "projectHash"}
)
# A header may only hold these keys, and must name a cwd or a title (Codex's history.jsonl
# `{session_id, ts, text}` is not a header).
_HEADER_KEYS = frozenset(
    {"cwd", "title", "session_id", "id", "created_at", "timestamp", "model", "metadata"}
)
_TIME_KEYS = ("timestamp", "created_at", "time", "ts")
_ROLES = frozenset({"user", "assistant", "system", "developer", "tool"})


class GenericAdapter:
    agent = "generic"
    whole_file = False

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        if path.suffix != ".jsonl":
            return False
        obj = first_object(first_line)
        if obj is None or not _FOREIGN_KEYS.isdisjoint(obj):
            return False
        if "role" in obj:
            role = obj["role"]  # a list or an object is no role (and unhashable)
            return isinstance(role, str) and role in _ROLES and "content" in obj
        return obj.keys() <= _HEADER_KEYS and ("cwd" in obj or "title" in obj)

    def start(self, path: Path, root: Path) -> FileState:
        return {"session_id": relative_key(path, root), "project": str(path.parent),
                "path_session": True}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict):
            return []
        cwd = obj.get("cwd")
        if isinstance(cwd, str) and cwd:
            state["project"] = cwd
        role = obj.get("role")
        if role is None:  # header line
            title = obj.get("title")
            if isinstance(title, str) and title.strip():
                state["title"] = title.strip()
            return []
        stamp = next((obj[k] for k in _TIME_KEYS if obj.get(k) is not None), None)
        ts = to_unix(stamp)
        if role == "tool":
            return [
                result_record(
                    state, obj.get("tool_call_id"), obj.get("content"), ts=ts, name=obj.get("name")
                )
            ]
        if role not in _ROLES:
            return []
        records: list[Record] = []
        text = flatten(obj.get("content"))
        if text:
            line_id = obj.get("id")
            if isinstance(line_id, str | int) and line_id != "":
                rid = str(line_id)
            else:  # no time either: "" (its place in the file identifies the line)
                rid = "" if stamp is None else content_id(role, stamp, text)
            if role in ("user", "assistant"):
                records.append(message_record(state, role, text, rid, ts=ts))
            else:
                records.append(message_record(state, "system", text, rid, ts=ts, kind="meta"))
        if role == "assistant":
            records += chat_tool_calls(state, obj.get("tool_calls"), ts=ts)
        return records

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        return []


ADAPTER = GenericAdapter()
