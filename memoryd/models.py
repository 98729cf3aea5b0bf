"""Records shared by layers: what an adapter reads from a transcript (`Record`, with its
`Role`, `Kind` and `Merge`), which the ingestor hands to the store to write as units.
Here, at the top, so that ingest and store both import it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool", "system"]
# message: an utterance; tool_call: the agent asked for a tool; tool_result: its output;
# compaction: an agent-written summary of earlier context; meta: anything else kept for search.
Kind = Literal["message", "tool_call", "tool_result", "compaction", "meta"]
# What to do when a record id is already stored for the same session:
#   ignore  - a replay (resumed/forked session, re-read after a rewrite): keep the stored unit;
#   append  - one logical message written as several lines (Claude's split assistant
#             blocks): append the content once per distinct `part_id`;
#   replace - an upsert log (Gemini re-appends a message with updated content): last wins.
Merge = Literal["ignore", "append", "replace"]

@dataclass(frozen=True, slots=True)
class Record:
    """One normalized unit as an adapter sees it."""

    role: Role
    content: str
    # the agent's own id; "" -> the ingestor derives one from the content and the line's
    # place in the file (its byte offset and the record's index in the line): a line
    # without id or time is identified by where it is, so identical lines stay distinct
    record_id: str = ""
    kind: Kind = "message"
    ts: float | None = None  # Unix seconds, UTC
    session_id: str | None = None  # None -> the file's default session (FileState["session_id"])
    project: str | None = None  # cwd / workspace, when this line tells it
    tool_name: str | None = None
    tool_args: str | None = None  # JSON text of the arguments
    related_id: str | None = None  # tool call id joining a tool_call and its tool_result
    merge: Merge = "ignore"
    part_id: str | None = None  # with merge="append": the id of this piece
    title: str | None = None  # a session title, when the line carries one
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"sidechain": True, "model": ...}
