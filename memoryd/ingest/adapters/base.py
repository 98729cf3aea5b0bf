"""The adapter contract: one agent's transcript dialect in, normalized records out.

Adapters are pure and tolerant. They never do I/O and never raise on an unknown
shape: a line they do not understand yields no records (the ingestor counts lines
that fail to decode as JSON; a well-formed line of an unknown type is simply ignored,
because agents add record types without notice).

Per-file parse state (`FileState`) is a small JSON-serializable dict the ingestor
keeps in the file's cursor row, so a file read in several pieces (tailing) parses
exactly as if it were read at once: e.g. Codex's session id and cwd come from the
first line, Claude's turn continues across reads.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Protocol

from memoryd.models import Record

FileState = dict[str, Any]


class Adapter(Protocol):
    agent: str  # "claude-code", "codex", ...
    # True for formats that are one JSON document per file (Gemini legacy .json):
    # the ingestor re-reads the whole file on change and calls parse_document.
    whole_file: bool

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        """Is this file a transcript of this agent? `first_line` is the file's first
        line (without newline, possibly cut at 1 MiB); `root` is the source root."""
        ...

    def start(self, path: Path, root: Path) -> FileState:
        """Initial parse state for a file; must set "session_id" (the default session
        key for records that do not name one) and may set "project"."""
        ...

    def parse_line(self, obj: Any, state: FileState) -> list[Record]:
        """Records of one decoded JSON line; may update `state` in place."""
        ...

    def parse_document(self, obj: Any, state: FileState) -> list[Record]:
        """Records of a whole-file document (only when whole_file is True)."""
        ...


# Keys every dialect reads with one meaning, and the JSON types they may hold. A line whose
# key holds another type is malformed (counted as a bad line), not silently dropped.
_TEXTISH = (str, list, dict, type(None))
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "role": (str,),
    "type": (str,),
    "message": (dict, str, type(None)),
    "payload": (dict, type(None)),
    "content": _TEXTISH,
    "timestamp": (str, int, float, type(None)),
    "cwd": (str, type(None)),
    "tool_calls": (list, type(None)),
    "sessionId": (str, type(None)),
    "uuid": (str, type(None)),
}


_FIELD_KEYS = frozenset(_FIELD_TYPES)


def shape_error(obj: object) -> str | None:
    """Why a decoded line cannot be a transcript line of any dialect, or None: it is
    not a JSON object, or a well-known key holds the wrong JSON type. (Every line of a
    backfill passes here: the keys it holds are checked in one C-speed intersection, and
    only a line with a wrong one is walked in `_FIELD_TYPES`' order for the message.)"""
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, not an object"
    for key in _FIELD_KEYS.intersection(obj):
        v = obj[key]
        if not isinstance(v, _FIELD_TYPES[key]) or isinstance(v, bool):
            return _first_wrong(obj)
    return None


def _first_wrong(obj: dict[str, Any]) -> str | None:
    for key, types in _FIELD_TYPES.items():
        if key in obj:
            v = obj[key]
            if not isinstance(v, types) or isinstance(v, bool):
                return f"field {key!r} is a {type(v).__name__}"
    return None


def content_id(*parts: object) -> str:
    """A stable record id for agents whose lines carry none: a hash of what identifies
    the message (role, timestamp, content)."""
    h = hashlib.blake2b(digest_size=12)
    for p in parts:
        h.update(str(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return "h:" + h.hexdigest()


def relative_key(path: Path, root: Path, *, strip_suffixes: bool = True) -> str:
    """The file's path under its source root, as a session key component: two files
    with the same name in different folders never share a session."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    s = rel.as_posix()
    if strip_suffixes:
        for suffix in (".jsonl", ".json"):
            if s.endswith(suffix):
                s = s[: -len(suffix)]
                break
    return s
