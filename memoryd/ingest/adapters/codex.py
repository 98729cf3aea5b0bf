"""OpenAI Codex CLI / Desktop: `~/.codex/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl`.

Format knowledge: the writer, `openai/codex` `codex-rs/core/src/rollout/recorder.rs` and the
newer `codex-rs/rollout` / `codex-rs/history` crates, summarised in shared `docs/formats.md`
§2, checked against recorded rollouts in `fixtures/sessions/codex/` (0.104.0-alpha.1 and
0.128.0-alpha.1). Every line is `{"timestamp", "type", "payload"}`; times are the envelope's
UTC `timestamp`, never the local-time file name.

Codex writes each utterance twice (a model-visible `response_item` and a UI `event_msg`), so
one stream is picked per kind:
- user text: `event_msg user_message` only (`response_item` user messages also carry the
  injected AGENTS.md / environment context; developer messages are never kept);
- assistant text: `event_msg agent_message`. Some files have no such events (the 0.128 fixture
  keeps assistant text only as `response_item message`), so until the first `agent_message`
  is seen (`state["agent_events"]`), assistant `response_item` messages are kept instead. Both
  streams derive the same id, content_id(ts, "assistant", text), and Codex writes the pair
  with the same timestamp, so a file that had both in the other order still dedupes;
- tools: `response_item` function_call / custom_tool_call / local_shell_call and
  function_call_output / custom_tool_call_output (record ids = `call_id`; `arguments` that are
  not JSON are kept as a JSON string);
- `compacted` with a non-empty `message` -> compaction (remote compaction has none).
Session id and cwd come from the first `session_meta`; the latest `turn_context.cwd` wins.
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

_RAW_MARKERS = (b'"type":"session_meta"', b'"type": "session_meta"')
_UUID_TAIL = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.I)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


class CodexAdapter:
    agent = "codex"
    whole_file = False

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        if path.suffix != ".jsonl":
            return False
        obj = first_object(first_line)
        if obj is None:
            return any(marker in first_line[:256] for marker in _RAW_MARKERS)
        return obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict)

    def start(self, path: Path, root: Path) -> FileState:
        m = _UUID_TAIL.search(path.stem)
        return {"session_id": m.group(1) if m else path.stem}

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        if not isinstance(obj, dict) or not isinstance(obj.get("payload"), dict):
            return []
        kind, payload = obj.get("type"), obj["payload"]
        ts = to_unix(obj.get("timestamp"))
        if kind == "session_meta":
            _session_meta(payload, state)
        elif kind == "turn_context":
            _set_str(state, "project", payload.get("cwd"))
            _set_str(state, "model", payload.get("model"))
        elif kind == "event_msg":
            return _event(payload, ts, state)
        elif kind == "response_item":
            return _response_item(payload, ts, state)
        elif kind == "compacted":
            text = flatten(payload.get("message"))
            if text:
                rid = content_id(ts, "compaction", text)
                return [message_record(state, "system", text, rid, ts=ts, kind="compaction")]
        return []

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        return []


def _set_str(state: FileState, key: str, value: object) -> None:
    if isinstance(value, str) and value:
        state[key] = value


def _session_meta(payload: dict[str, Any], state: FileState) -> None:
    if state.get("meta_seen"):  # a fork may copy its parent's meta: the first one is ours
        return
    state["meta_seen"] = True
    _set_str(state, "session_id", payload.get("id"))
    _set_str(state, "project", payload.get("cwd"))


def _assistant_text(text: str, ts: float | None, state: FileState, **meta: Any) -> list[Record]:
    if not text:
        return []
    meta = {k: v for k, v in meta.items() if v is not None}
    if state.get("model"):
        meta["model"] = state["model"]
    rid = content_id(ts, "assistant", text)
    return [message_record(state, "assistant", text, rid, ts=ts, meta=meta)]


def _event(payload: dict[str, Any], ts: float | None, state: FileState) -> list[Record]:
    kind = payload.get("type")
    if kind == "user_message":
        images = [
            flatten({"type": "input_image", "image_url": url})
            for url in _list(payload.get("images"))
        ]
        images += [f"[image {p}]" for p in _list(payload.get("local_images")) if isinstance(p, str)]
        text = "\n".join(p for p in [flatten(payload.get("message")), *images] if p)
        if text:
            return [message_record(state, "user", text, content_id(ts, "user", text), ts=ts)]
    elif kind == "agent_message":
        state["agent_events"] = True
        return _assistant_text(flatten(payload.get("message")), ts, state)
    return []


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _response_item(payload: dict[str, Any], ts: float | None, state: FileState) -> list[Record]:
    kind = payload.get("type")
    if kind == "message":
        if payload.get("role") == "assistant" and not state.get("agent_events"):
            return _assistant_text(
                flatten(payload.get("content")), ts, state, phase=payload.get("phase")
            )
        return []
    if kind in _CALLS:
        name, args = payload.get("name"), payload.get("arguments")
        if kind == "custom_tool_call":
            args = payload.get("input")
        elif kind == "local_shell_call":
            name, args = name or "local_shell", payload.get("action")
        namespace = payload.get("namespace")
        if isinstance(namespace, str) and namespace and isinstance(name, str):
            name = namespace + name if namespace.endswith("_") else f"{namespace}__{name}"
        return [call_record(state, payload.get("call_id") or payload.get("id"), name, args, ts=ts)]
    if kind in _OUTPUTS:
        output = payload.get("output")
        if isinstance(output, dict):  # older builds: {"content": ..., "success": bool}
            output = output.get("content", output.get("output"))
        return [result_record(state, payload.get("call_id"), output, ts=ts)]
    return []


ADAPTER = CodexAdapter()
