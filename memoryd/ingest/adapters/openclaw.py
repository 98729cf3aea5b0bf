"""OpenClaw (formerly Clawdbot / Moltbot): `~/.openclaw/agents/<agentId>/sessions/<uuid>.jsonl`.

Format knowledge: `openclaw/openclaw` `docs/reference/session-management-compaction.md` (its
SessionManager derives from pi's), summarised in shared `docs/formats.md` §5, checked against
the recorded transcripts in `fixtures/sessions/openclaw/agents/{main,build,email-triage}/`.

The lines are pi's v3 tree format, parsed by `pi.PiAdapter`. OpenClaw specifics:
- only live transcripts are claimed: `<uuid>.jsonl` or `<uuid>-topic-<n>.jsonl` directly in an
  `agents/<agentId>/sessions/` folder. Renamed archives (`.reset.`, `.deleted.`, `.bak-`),
  `.checkpoint.` copies, `.trajectory` sidecars and `sessions.json` are not;
- session id = header `id` (= the file stem); a Telegram topic file keeps its whole stem so
  two topics of one session id stay apart;
- assistant text: a leading `[[reply_to_current]]` / `[[reply_to:<id>]]` channel tag is
  stripped; the silent token `NO_REPLY` and empty provider-error messages are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memoryd.ingest.adapters.base import FileState
from memoryd.ingest.adapters.pi import PiAdapter, in_openclaw_sessions, is_session_header

_TRANSCRIPT_NAME = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:-topic-\d+)?\.jsonl", re.I
)
_REPLY_TAG = re.compile(r"^\s*\[\[\s*reply_to[^\]]*\]\]\s*")
_SILENT = "NO_REPLY"


class OpenClawAdapter(PiAdapter):
    agent = "openclaw"

    def claims(self, path: Path, root: Path, first_line: bytes) -> bool:
        return (
            in_openclaw_sessions(path)
            and _TRANSCRIPT_NAME.fullmatch(path.name) is not None
            and is_session_header(first_line)
        )

    def start(self, path: Path, root: Path) -> FileState:
        return {"session_id": path.stem, "file_session": path.stem}

    def header(self, obj: dict[str, Any], state: FileState) -> None:
        super().header(obj, state)
        stem = state.get("file_session")
        if isinstance(stem, str) and "-topic-" in stem:
            state["session_id"] = stem

    def assistant_text(self, text: str) -> str:
        text = _REPLY_TAG.sub("", text).strip()
        return "" if text == _SILENT else text


ADAPTER = OpenClawAdapter()
