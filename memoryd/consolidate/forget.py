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

from memoryd.memory.daily import line_key
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


# HISTORY.md lines memoryd wrote (consolidate.history, consolidate.retention.compact)
_MOVED = re.compile(r"^- \d{4}-\d{2}-\d{2} (superseded|demoted): "
                    r"\d{4}-\d{2}-\d{2}\|([^|]+)\|(.*)$")
_REPLACED = " → replaced by: "
_FOLDED = re.compile(r"^\*\*(\d{4}-\d{2}-\d{2})\*\* — (.*)$")
FORGOTTEN = "(a forgotten item)"


def drop_history(text: str, moved: Mapping[str, str], notes: Mapping[str, Collection[str]],
                 successors: Collection[str]) -> tuple[str, list[str]]:
    """HISTORY.md without what only forgotten sessions stood behind: the superseded or
    demoted lines of the items in `moved` (item key -> the source memoryd wrote them
    under), the forgotten items in folded days' paragraphs (`notes`: day -> the note
    lines' text, `item (agent · project)`; a paragraph left empty goes), and the text of
    a forgotten successor in a "replaced by" pointer (`successors`: item keys). Lines
    memoryd did not write, or the user edited, do not match and stay."""
    out: list[str] = []
    removed: list[str] = []
    for ln in text.split("\n"):
        m = _MOVED.match(ln.rstrip("\r"))
        if m is not None:
            kind, source, rest = m.group(1), m.group(2).strip(), m.group(3)
            if kind == "superseded" and _REPLACED in rest:
                item, succ = rest.split(_REPLACED, 1)
            else:
                item, succ = rest.rsplit(" (", 1)[0] if " (" in rest else rest, ""
            if moved.get(item_key(item)) == source:
                removed.append(ln.strip())
                continue
            s_item = succ.rsplit(" (", 1)[0] if " (" in succ else succ
            if succ and item_key(s_item) in successors:
                ln = ln.replace(_REPLACED + s_item, _REPLACED + FORGOTTEN, 1)
                removed.append(s_item)
            out.append(ln)
            continue
        f = _FOLDED.match(ln.rstrip("\r"))
        if f is not None and notes.get(f.group(1)):
            new, gone = _fold_without(f.group(2), notes[f.group(1)])
            if gone:
                removed += gone
                if new:
                    out.append(f"**{f.group(1)}** — {new}")
                continue
        out.append(ln)
    return "\n".join(out), removed


def _fold_without(body: str, gone: Collection[str]) -> tuple[str, list[str]]:
    """A folded day's body (`Section: a; b | Section: c`) without the items in `gone`
    (an item may itself hold "; ": runs of parts are tried whole)."""
    want = {" ".join(g.split()) for g in gone}
    parts: list[str] = []
    removed: list[str] = []
    for part in body.split(" | "):
        name, sep, rest = part.partition(": ")
        if not sep:
            parts.append(part)
            continue
        toks = rest.split("; ")
        keep: list[str] = []
        i = 0
        while i < len(toks):
            for j in range(len(toks), i, -1):
                cand = "; ".join(toks[i:j])
                if " ".join(cand.split()) in want:
                    removed.append(cand)
                    i = j
                    break
            else:
                keep.append(toks[i])
                i += 1
        if keep:
            parts.append(f"{name}: " + "; ".join(keep))
    return " | ".join(parts), removed
