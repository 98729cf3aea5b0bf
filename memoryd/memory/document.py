"""The MEMORY.md text format: one entry per line, `YYYY-MM-DD|source|item1；item2`
(items separated by the full-width `；`, U+FF1B). Lines that are not entries (headings,
blank lines, prose) are kept verbatim. Pure functions: parse, validate, plan an add or a
delete, search, stats. The errors the memory API answers with live here too."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from memoryd.errors import BadRequestError, ConflictError, MemorydError

SEP = "；"  # U+FF1B FULLWIDTH SEMICOLON
FILENAME = "MEMORY.md"
MAX_ENTRIES = 200
MAX_BYTES = 512 * 1024
MAX_ADD_CHARS = 2000
MAX_SOURCE_CHARS = 200
_LOOKS_LIKE_ENTRY = re.compile(r"\d{4}-\d{2}-\d{2}\|")


class MemoryFullError(ConflictError):
    code = "memory_full"


class VersionConflictError(ConflictError):
    code = "version_conflict"


class MemoryLockedError(ConflictError):
    code = "memory_locked"


class MemoryUnreadableError(ConflictError):
    code = "memory_unreadable"


class MemoryIOError(MemorydError):
    code = "memory_io"


# --- the format: pure functions -------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    line: int  # 1-based
    date: str  # ISO YYYY-MM-DD
    source: str
    items: tuple[str, ...]
    text: str  # the line as it is in the file

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "date": self.date, "source": self.source,
                "items": list(self.items), "text": self.text}


@dataclass(frozen=True)
class Problem:
    """A line that looks like an entry (starts with a date and `|`) but is not one."""
    line: int
    reason: str


@dataclass(frozen=True)
class Document:
    lines: tuple[str, ...]
    entries: tuple[Entry, ...]
    problems: tuple[Problem, ...]

    @property
    def text(self) -> str:
        return format_lines(self.lines)

    def entry_at(self, line: int) -> Entry | None:
        return next((e for e in self.entries if e.line == line), None)


def split_lines(text: str) -> list[str]:
    """Split on `\\n` only (not str.splitlines, which also splits on \\x1c, U+2028, ...);
    a final newline does not make an extra empty line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def format_lines(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def format_entry(day: date, source: str, items: Sequence[str]) -> str:
    return f"{day.isoformat()}|{source}|{SEP.join(items)}"


def parse_line(number: int, raw: str) -> Entry | Problem | None:
    """An Entry, a Problem (looks like an entry, is malformed), or None (other text)."""
    s = raw.rstrip("\r")  # an editor's CRLF
    if number == 1:
        s = s.removeprefix("\ufeff")
    if not _LOOKS_LIKE_ENTRY.match(s):
        return None
    day, rest = s[:10], s[11:]
    try:
        date.fromisoformat(day)
    except ValueError:
        return Problem(number, f"invalid date {day!r}")
    if "|" not in rest:
        return Problem(number, "expected date|source|items: missing the '|' after the source")
    source, items_text = rest.split("|", 1)
    if not source.strip():
        return Problem(number, "empty source")
    items = tuple(i.strip() for i in items_text.split(SEP) if i.strip())
    if not items:
        return Problem(number, "no items after the source")
    return Entry(number, day, source.strip(), items, raw)


def parse(text: str) -> Document:
    lines = split_lines(text)
    entries: list[Entry] = []
    problems: list[Problem] = []
    for n, raw in enumerate(lines, 1):
        r = parse_line(n, raw)
        if isinstance(r, Entry):
            entries.append(r)
        elif isinstance(r, Problem):
            problems.append(r)
    return Document(tuple(lines), tuple(entries), tuple(problems))


# C0/C1 controls but \t \n, lone surrogates, and U+2028/2029 (line separators that
# would make editors and other tools number lines differently)
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_text(text: str, field: str, *, allow_tab_newline: bool = True) -> None:
    """Reject control characters (but \\t and \\n, when allowed), lone surrogates and
    Unicode line separators, naming the line they are on."""
    m = _FORBIDDEN.search(text) if allow_tab_newline else re.search(
        r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]", text)
    if m is None:
        return
    ch = m.group()
    line = text.count("\n", 0, m.start()) + 1
    what = "control character"
    if ch in "\u2028\u2029":
        what = "line separator"
    elif "\ud800" <= ch <= "\udfff":
        what = "lone surrogate"
    raise BadRequestError(f"{field}: line {line}: {what} U+{ord(ch):04X} is not allowed",
                          field=field)


def validate_content(text: str, *, max_entries: int = MAX_ENTRIES,
                     max_bytes: int = MAX_BYTES) -> Document:
    """A whole new MEMORY.md (PUT): every entry-looking line must be an entry."""
    check_text(text, "content")
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise BadRequestError(f"content: {size} bytes, over the {max_bytes}-byte limit",
                              field="content")
    doc = parse(text)
    if doc.problems:
        p = doc.problems[0]
        more = f" (and {len(doc.problems) - 1} more)" if len(doc.problems) > 1 else ""
        raise BadRequestError(f"content: line {p.line}: {p.reason}{more}", field="content")
    if len(doc.entries) > max_entries:
        raise MemoryFullError(f"content has {len(doc.entries)} entries; MEMORY.md holds at "
                              f"most {max_entries}", field="content")
    return doc


def split_items(content: str) -> list[str]:
    """The items of an added entry: separated by `；` or newlines, stripped, non-empty."""
    return [s.strip() for s in re.split(rf"[{SEP}\n]", content) if s.strip()]


def item_key(item: str) -> str:
    """Items equal under this key are duplicates: case and runs of whitespace ignored."""
    return " ".join(item.split()).casefold()


def clean_source(source: str) -> str:
    check_text(source, "source", allow_tab_newline=False)
    s = source.strip()
    if not s:
        raise BadRequestError("source: must not be empty", field="source")
    if "|" in s:
        raise BadRequestError("source: must not contain '|'", field="source")
    if len(s) > MAX_SOURCE_CHARS:
        raise BadRequestError(f"source: over {MAX_SOURCE_CHARS} characters", field="source")
    return s


@dataclass(frozen=True)
class AddResult:
    line: int
    total: int
    duplicate: bool
    added: tuple[str, ...]
    duplicates: tuple[str, ...]  # items left out because they were already there

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "total": self.total, "duplicate": self.duplicate,
                "added": list(self.added), "duplicates": list(self.duplicates)}


def plan_add(doc: Document, content: str, source: str, today: date, *,
             max_entries: int = MAX_ENTRIES,
             max_bytes: int = MAX_BYTES) -> tuple[list[str] | None, AddResult]:
    """The new lines (None: nothing to write) and the answer for adding an entry."""
    check_text(content.replace("\r\n", "\n"), "content")
    if len(content) > MAX_ADD_CHARS:
        raise BadRequestError(f"content: {len(content)} characters, over the "
                              f"{MAX_ADD_CHARS}-character limit", field="content")
    src = clean_source(source)
    items = split_items(content.replace("\r\n", "\n"))
    if not items:
        raise BadRequestError("content: no items (empty or only separators)", field="content")
    seen: dict[str, int] = {}
    for e in doc.entries:
        for it in e.items:
            seen.setdefault(item_key(it), e.line)
    new: list[str] = []
    dups: list[str] = []
    first_dup_line: int | None = None
    for it in items:
        k = item_key(it)
        if k in seen:
            dups.append(it)
            if first_dup_line is None and seen[k] > 0:
                first_dup_line = seen[k]
            continue
        seen[k] = 0  # within this request
        new.append(it)
    total = len(doc.entries)
    if not new:
        assert first_dup_line is not None
        return None, AddResult(first_dup_line, total, True, (), tuple(dups))
    if total >= max_entries:
        raise MemoryFullError(f"MEMORY.md is full: {total} entries, the limit is "
                              f"{max_entries}; delete or merge entries first", field="content")
    lines = [*doc.lines, format_entry(today, src, new)]
    size = len(format_lines(lines).encode("utf-8"))
    if size > max_bytes:
        raise MemoryFullError(f"MEMORY.md would be {size} bytes, over the {max_bytes}-byte "
                              "limit; delete or shorten entries first", field="content")
    return lines, AddResult(len(lines), total + 1, False, tuple(new), tuple(dups))


def plan_delete(doc: Document, lines: Sequence[int]) -> list[str]:
    wanted = sorted(set(lines))
    if not wanted:
        raise BadRequestError("lines: give at least one line number", field="lines")
    out_of_range = [n for n in wanted if not 1 <= n <= len(doc.lines)]
    if out_of_range:
        raise BadRequestError(f"lines: {_numbers(out_of_range)} out of range (the file has "
                              f"{len(doc.lines)} lines)", field="lines")
    not_entries = [n for n in wanted if doc.entry_at(n) is None]
    if not_entries:
        raise BadRequestError(f"lines: {_numbers(not_entries)} not an entry (only entry lines "
                              "can be deleted; edit the file for other text)", field="lines")
    drop = set(wanted)
    return [text for n, text in enumerate(doc.lines, 1) if n not in drop]


def _numbers(ns: Sequence[int]) -> str:
    return ("line " if len(ns) == 1 else "lines ") + ", ".join(map(str, ns[:10])) + (
        ", ..." if len(ns) > 10 else "")


def newest_first(entries: Sequence[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.date, e.line), reverse=True)


def stats(doc: Document, max_entries: int = MAX_ENTRIES) -> dict[str, Any]:
    dates = sorted(e.date for e in doc.entries)
    per_source = Counter(e.source for e in doc.entries)
    return {"total": len(doc.entries), "limit": max_entries,
            "per_source": dict(sorted(per_source.items())),
            "first_date": dates[0] if dates else None,
            "last_date": dates[-1] if dates else None,
            "invalid_lines": len(doc.problems)}


@dataclass(frozen=True)
class SearchOutcome:
    total: int
    results: tuple[Entry, ...]

    @property
    def message(self) -> str:
        return f"{self.total} matches, showing {len(self.results)}"


def search(doc: Document, keywords: Sequence[str], mode: Literal["or", "and"] = "or",
           max_results: int = 15) -> SearchOutcome:
    """Case-insensitive substring match of each keyword against an entry's source and
    items (plain substrings, so CJK works). Best first: most keywords matched, then
    newest. No match gives no results: never the whole file."""
    keys = [k.casefold() for k in keywords if k.strip()]
    if not keys:
        return SearchOutcome(0, ())
    scored: list[tuple[int, Entry]] = []
    for e in doc.entries:
        hay = "\n".join((e.source, *e.items)).casefold()
        hits = sum(1 for k in keys if k in hay)
        if hits and (mode == "or" or hits == len(keys)):
            scored.append((hits, e))
    scored.sort(key=lambda he: (he[0], he[1].date, he[1].line), reverse=True)
    return SearchOutcome(len(scored), tuple(e for _, e in scored[:max_results]))
