"""What a forgotten session takes out of the memory files (pure functions on their text).

After `sessions forget`, the provenance rows whose every session is gone name what only
forgotten sessions stood behind: MEMORY.md items (removed from their entry, the line
dropped when none is left) and daily-note lines. An item leaves only where memoryd wrote
it: the entry's source (or the note line's `(agent · project)` tag) must still be the one
memoryd wrote, and the text the same item. The user's own lines have no provenance and
lines the user edited no longer match: both stay.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Mapping

from memoryd.consolidate.daily import line_key
from memoryd.memory.document import Document, format_entry, item_key

_TAG = re.compile(r"\(([^()]*·[^()]*)\)\s*$")


def drop_items(doc: Document, gone: Mapping[str, str]
               ) -> tuple[list[str] | None, list[str]]:
    """MEMORY.md without the items in `gone` (item key -> the source memoryd wrote it
    under): the new lines (None: unchanged) and the items removed."""
    by_line = {e.line: e for e in doc.entries}
    out: list[str] = []
    removed: list[str] = []
    for n, text in enumerate(doc.lines, 1):
        e = by_line.get(n)
        if e is None:
            out.append(text)
            continue
        keep = [it for it in e.items if gone.get(item_key(it)) != e.source]
        if len(keep) == len(e.items):
            out.append(text)
            continue
        removed += [it for it in e.items if it not in keep]
        if keep:
            out.append(format_entry(dt.date.fromisoformat(e.date), e.source, keep))
    return (out if removed else None), removed


def drop_note_lines(text: str, gone: Collection[tuple[str, str]]) -> tuple[str, list[str]]:
    """A daily note without the item lines in `gone` ((item key, tag) pairs): the new
    text and the lines removed. Headings and every other line stay."""
    out: list[str] = []
    removed: list[str] = []
    for ln in text.split("\n"):
        k = line_key(ln)
        tag = _TAG.search(ln)
        if k is not None and tag is not None and (k, tag.group(1).strip()) in gone:
            removed.append(ln.strip())
            continue
        out.append(ln)
    return "\n".join(out), removed
