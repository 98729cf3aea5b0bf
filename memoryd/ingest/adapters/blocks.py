"""Content shared by every dialect: block lists -> text, tool calls -> records.

Agents write message content as a plain string or as a list of typed blocks (Anthropic
`text`/`image`/`document`/`tool_use`/`tool_result`, OpenAI `input_text`/`output_text`/
`input_image`/`image_url`, pi `text`/`image`/`toolCall`, Gemini `Part`s with `text`/
`inlineData`/`functionResponse`). `flatten` turns any of them into searchable text:
thinking/reasoning blocks are dropped, inline base64 media (blocks and `data:` URLs) become a
short placeholder such as `[image image/png, 123 KB]`, so a pasted screenshot never lands in the
store as megabytes of base64.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memoryd.ingest.adapters.base import FileState, content_id
from memoryd.models import Kind, Merge, Record, Role

NO_OUTPUT = "(no output)"  # content of a tool_result whose output is empty
CALL_PREVIEW_CHARS = 400  # `name(args)` content of a tool_call record is cut here
_TOOL_MEMORY = 256  # call id -> tool name entries kept in FileState
_MAX_DEPTH = 8
_SKIPPED_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_MEDIA_KINDS = {"application/pdf": "document"}
# data:<mime>[;param]*;base64,<payload> -- only long payloads are worth replacing
_DATA_URL = re.compile(
    r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[\w.+-]+)*);base64,([A-Za-z0-9+/_-]{64,}=*)"
)


def size_label(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{round(n_bytes / 1024)} KB"
    return f"{n_bytes / (1024 * 1024):.1f} MB"


def base64_size(data: str) -> int:
    """Decoded size of a base64 payload, from its length alone."""
    s = data.strip()
    padding = len(s) - len(s.rstrip("="))
    return max(0, len(s) * 3 // 4 - padding)


def media_placeholder(mime: str | None, data: str | None, kind: str | None = None) -> str:
    """`[image image/png, 123 KB]` for an inline base64 payload."""
    mime = mime or "application/octet-stream"
    if kind is None:
        kind = "image" if mime.startswith("image/") else _MEDIA_KINDS.get(mime, "file")
    size = size_label(base64_size(data)) if isinstance(data, str) else "?"
    return f"[{kind} {mime}, {size}]"


def replace_data_urls(text: str) -> str:
    if "base64," not in text:
        return text
    return _DATA_URL.sub(lambda m: media_placeholder(m.group(1), m.group(3)), text)


def _url_text(url: object, kind: str = "image") -> str:
    """Placeholder for a data: URL (kind from its mime type), `[kind url]` for a link."""
    if not isinstance(url, str) or not url:
        return ""
    if url.startswith("data:"):
        header, _, payload = url[5:].partition(",")
        mime = header.split(";")[0] or None
        return media_placeholder(mime, payload if header.endswith(";base64") else None)
    return f"[{kind} {url}]"


def flatten(content: object) -> str:
    """Searchable text of a message's content (string, block, or list of blocks)."""
    if isinstance(content, str):  # most lines: what the join below makes of one string
        return replace_data_urls(content).strip()
    out: list[str] = []
    _collect(content, out, 0)
    return "\n".join(p for p in out if p).strip()


def _collect(x: object, out: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH or x is None or isinstance(x, bool):
        return
    if isinstance(x, str):
        out.append(replace_data_urls(x))
    elif isinstance(x, list):
        for item in x:
            _collect(item, out, depth + 1)
    elif isinstance(x, dict):
        out.append(_block(x, depth))


def _block(b: dict[str, Any], depth: int) -> str:
    t = b.get("type")
    if t in _SKIPPED_BLOCKS or b.get("thought") is True:  # Gemini marks thought parts
        return ""
    if (t in _TEXT_BLOCKS or t is None) and isinstance(b.get("text"), str):
        return replace_data_urls(b["text"])
    source = b.get("source")
    if isinstance(source, dict):  # Anthropic image/document
        kind = t if t in ("image", "document") else None
        if source.get("type") == "base64":
            return media_placeholder(source.get("media_type"), source.get("data"), kind)
        return _url_text(source.get("url"), kind or "file")
    if t == "image" and "data" in b:  # pi / OpenClaw
        return media_placeholder(b.get("mimeType") or b.get("mime_type"), b.get("data"), "image")
    if t == "input_image":  # OpenAI Responses (Codex)
        return _url_text(b.get("image_url"))
    if t == "image_url":  # OpenAI Chat Completions
        iu = b.get("image_url")
        return _url_text(iu.get("url") if isinstance(iu, dict) else iu)
    if isinstance(b.get("inlineData"), dict):  # Gemini Part
        d = b["inlineData"]
        return media_placeholder(d.get("mimeType"), d.get("data"))
    if isinstance(b.get("fileData"), dict):
        return _url_text(b["fileData"].get("fileUri"), "file")
    if isinstance(b.get("functionResponse"), dict):
        return _function_response(b["functionResponse"], depth)
    if isinstance(b.get("functionCall"), dict):
        fc = b["functionCall"]
        return render_call(fc.get("name"), fc.get("args"))
    if t in ("tool_use", "toolCall"):
        return render_call(b.get("name"), b.get("input", b.get("arguments")))
    if "content" in b:  # tool_result and other wrappers
        parts: list[str] = []
        _collect(b["content"], parts, depth + 1)
        return "\n".join(p for p in parts if p)
    if isinstance(b.get("text"), str):
        return replace_data_urls(b["text"])
    return ""


def _function_response(fr: dict[str, Any], depth: int) -> str:
    resp = fr.get("response")
    if isinstance(resp, dict):
        for key in ("output", "error", "content", "result"):
            if resp.get(key) is not None:
                parts: list[str] = []
                _collect(resp[key], parts, depth + 1)
                return "\n".join(p for p in parts if p)
        return json.dumps(resp, ensure_ascii=False, default=str)
    parts = []
    _collect(resp, parts, depth + 1)
    return "\n".join(p for p in parts if p)


def args_json(args: object) -> str | None:
    """Tool arguments as JSON text; a string that is not JSON becomes a JSON string."""
    if args is None:
        return None
    if isinstance(args, str):
        try:
            json.loads(args)
        except (ValueError, RecursionError):
            return json.dumps(args, ensure_ascii=False)
        return args
    return json.dumps(args, ensure_ascii=False, default=str)


def render_call(name: object, args: object, limit: int = CALL_PREVIEW_CHARS) -> str:
    """`name(args)` with the arguments as compact JSON, cut at `limit` characters."""
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):
            parsed = None
        args = parsed if isinstance(parsed, dict | list) else args
    if args is None or args == {} or args == "":
        inner = ""
    elif isinstance(args, str):
        inner = args
    else:
        inner = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    inner = replace_data_urls(inner)
    if len(inner) > limit:
        inner = inner[: limit - 1] + "…"
    return f"{name if isinstance(name, str) and name else 'tool'}({inner})"


def remember_tool(state: FileState, call_id: str, name: str | None) -> None:
    """Keep call id -> tool name (bounded) so a later result can name its tool."""
    if not call_id or not name:
        return
    names = state.setdefault("tools", {})
    names[call_id] = name
    while len(names) > _TOOL_MEMORY:
        del names[next(iter(names))]


def recall_tool(state: FileState, call_id: str | None) -> str | None:
    names = state.get("tools")
    if not call_id or not isinstance(names, dict):
        return None
    name = names.get(call_id)
    return name if isinstance(name, str) else None


def call_record(
    state: FileState,
    call_id: object,
    name: object,
    args: object,
    *,
    ts: float | None,
    merge: Merge = "ignore",
    meta: dict[str, Any] | None = None,
) -> Record:
    """The tool_call record of one call; remembers its name for the result."""
    cid = call_id if isinstance(call_id, str) and call_id else None
    tool = name if isinstance(name, str) and name else None
    tool_args = args_json(args)
    if cid:
        remember_tool(state, cid, tool)
    return Record(
        role="assistant",
        kind="tool_call",
        content=render_call(tool, args),
        # no id and no time: "" (the ingestor identifies it by its place in the file:
        # two identical calls are two calls)
        record_id=cid or ("" if ts is None else content_id(ts, "tool_call", tool, tool_args)),
        ts=ts,
        session_id=state.get("session_id"),
        project=state.get("project"),
        tool_name=tool,
        tool_args=tool_args,
        related_id=cid,
        merge=merge,
        meta=meta or {},
    )


def chat_tool_calls(state: FileState, calls: object, *, ts: float | None) -> list[Record]:
    """tool_call records of an OpenAI chat message's `tool_calls`
    (`[{id, type: "function", function: {name, arguments}}]`)."""
    records: list[Record] = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else {}
            records.append(
                call_record(state, call.get("id"), fn.get("name"), fn.get("arguments"), ts=ts)
            )
    return records


def result_record(
    state: FileState,
    call_id: object,
    output: object,
    *,
    ts: float | None,
    name: object = None,
    merge: Merge = "ignore",
    meta: dict[str, Any] | None = None,
) -> Record:
    """The tool_result record answering `call_id`; content is the flattened output, or
    `(no output)` so that an empty result still pairs with its call."""
    cid = call_id if isinstance(call_id, str) and call_id else None
    text = flatten(output) or NO_OUTPUT
    tool = name if isinstance(name, str) and name else recall_tool(state, cid)
    return Record(
        role="tool",
        kind="tool_result",
        content=text,
        record_id=f"result:{cid}" if cid else (
            "" if ts is None else content_id(ts, "tool_result", tool, text)),
        ts=ts,
        session_id=state.get("session_id"),
        project=state.get("project"),
        tool_name=tool,
        related_id=cid,
        merge=merge,
        meta=meta or {},
    )


def message_record(
    state: FileState,
    role: Role,
    text: str,
    record_id: str,
    *,
    ts: float | None,
    kind: Kind = "message",
    merge: Merge = "ignore",
    part_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> Record:
    """A non-tool record in the file's current session and project."""
    return Record(
        role=role,
        content=text,
        record_id=record_id,
        kind=kind,
        ts=ts,
        session_id=state.get("session_id"),
        project=state.get("project"),
        merge=merge,
        part_id=part_id,
        meta=meta or {},
    )


def first_object(first_line: bytes) -> dict[str, Any] | None:
    """The decoded first line for `claims`, or None when it is not one JSON object
    (cut at 1 MiB, binary, empty). Callers fall back to byte checks on the raw prefix."""
    try:
        obj = json.loads(first_line.strip().lstrip(b"\xef\xbb\xbf"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return obj if isinstance(obj, dict) else None
