"""A three-way merge of a memory file's lines (fleet mode, memoryd.memory.fleet_sync).

`base` is the text this machine last agreed with the store on, `ours` the file on this
machine now, `theirs` the store's text now. The result is `theirs` with this machine's
changes since `base` applied on top: lines removed here are removed, lines added here are
added after the line they follow here (so a note's new item stays in its section, an
edited entry keeps its place). Whatever the user did to the file here wins over what
another machine did to the same line; a line both sides added is there once.
Pure functions.
"""

from __future__ import annotations

from collections import Counter
from difflib import SequenceMatcher


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    out = text.split("\n")
    if out[-1] == "":
        out.pop()
    return out


def merge3(base: str | None, ours: str | None, theirs: str | None) -> str | None:
    """The merged text (None: the file is removed on both sides, or removed on one side
    and unchanged on the other)."""
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    if ours is None:  # removed here, changed there: theirs stays (nothing of ours to keep)
        return theirs
    if theirs is None:  # removed there, changed here: ours stays
        return ours
    b, o, t = _lines(base), _lines(ours), _lines(theirs)
    o_from_b: dict[int, int] = {}  # ours line -> the base line it is
    removed: set[int] = set()  # base lines removed (or changed) here
    added: list[int] = []  # ours lines added (or changed) here
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, b, o, autojunk=False).get_opcodes():
        if tag == "equal":
            o_from_b.update((j1 + d, i1 + d) for d in range(i2 - i1))
        else:
            removed.update(range(i1, i2))
            added.extend(range(j1, j2))
    t_of_b: dict[int, int] = {}  # base line -> where it is in theirs
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, b, t, autojunk=False).get_opcodes():
        if tag == "equal":
            t_of_b.update((i1 + d, j1 + d) for d in range(i2 - i1))
    drop = {t_of_b[i] for i in removed if i in t_of_b}
    mapped = set(t_of_b.values())
    theirs_new = Counter(t[j] for j in range(len(t)) if j not in mapped)
    after: dict[int, list[str]] = {}  # theirs line (-1: the top) -> ours lines after it
    for k in added:
        if theirs_new[o[k]] > 0:  # the other side added it too
            theirs_new[o[k]] -= 1
            continue
        anchor = -1
        for p in range(k - 1, -1, -1):  # the nearest line before it that theirs has
            if p in o_from_b and o_from_b[p] in t_of_b:
                anchor = t_of_b[o_from_b[p]]
                while anchor + 1 < len(t) and anchor + 1 not in mapped:
                    anchor += 1  # after what the other side added there
                break
        after.setdefault(anchor, []).append(o[k])
    out = list(after.get(-1, []))
    for j, ln in enumerate(t):
        if j not in drop:
            out.append(ln)
        out += after.get(j, [])
    return "".join(f"{ln}\n" for ln in out)
