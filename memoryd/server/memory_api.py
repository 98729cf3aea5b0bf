"""The memory API: MEMORY.md over HTTP under /v1/memory. Request and response models and
thin handlers; server/app.py's table mounts them when the daemon hands it the memory file."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from memoryd.http.json_io import json_body
from memoryd.http.services import SERVICES, need
from memoryd.memory import MAX_ADD_CHARS, MAX_SOURCE_CHARS, Entry, MemoryFile

_VERSION = Field(None, pattern=r"^[0-9a-f]{16}$",
                 description="the `version` read earlier: refuse (409) if the file changed")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class MemoryReplace(_Body):
    content: str = Field(max_length=1 << 20)
    version: str | None = _VERSION


class MemoryAdd(_Body):
    content: str = Field(min_length=1, max_length=MAX_ADD_CHARS)
    source: str = Field("manual", min_length=1, max_length=MAX_SOURCE_CHARS)


class MemoryDelete(_Body):
    lines: list[StrictInt] = Field(min_length=1, max_length=10_000)
    version: str | None = _VERSION


class MemorySearch(_Body):
    keywords: list[str] = Field(description="a string (split on whitespace) or a list")
    match_mode: Literal["or", "and"] = "or"
    max_results: int = Field(15, ge=1, le=200)

    @field_validator("keywords", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            v = v.split()
        if not isinstance(v, list):
            raise ValueError("give a string or a list of strings")
        if not v:
            raise ValueError("give at least one keyword")
        return v

    @field_validator("keywords")
    @classmethod
    def _check(cls, v: list[str]) -> list[str]:
        words = [w.strip() for w in v]
        if not all(words):
            raise ValueError("keywords must not be empty")
        if len(words) > 20 or any(len(w) > 200 for w in words):
            raise ValueError("at most 20 keywords of at most 200 characters")
        return words


class MemoryRecentQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(10, ge=1, le=200)


class EntryOut(BaseModel):
    line: int
    date: str
    source: str
    items: list[str]
    text: str


class ProblemOut(BaseModel):
    line: int
    reason: str


class MemoryOut(BaseModel):
    path: str
    version: str
    content: str
    total: int
    limit: int
    entries: list[EntryOut]
    invalid: list[ProblemOut]  # entry-looking lines that do not parse (kept as text)


class WriteOut(BaseModel):
    total: int
    version: str


class AddOut(BaseModel):
    line: int
    total: int
    duplicate: bool
    added: list[str]
    duplicates: list[str]


class RecentOut(BaseModel):
    entries: list[EntryOut]


class StatsOut(BaseModel):
    total: int
    limit: int
    per_source: dict[str, int]
    first_date: str | None
    last_date: str | None
    invalid_lines: int


class SearchOut(BaseModel):
    total: int
    shown: int
    message: str
    results: list[EntryOut]


def _entries(entries: Iterable[Entry]) -> list[EntryOut]:
    return [EntryOut(**e.as_dict()) for e in entries]


def _memory(request: web.Request) -> MemoryFile:
    return need(request.app[SERVICES].memory)


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.json_response(model.model_dump(), status=status)


async def read(request: web.Request) -> web.Response:
    m = _memory(request)
    snap = await m.snapshot()
    doc = snap.doc  # raises if the file is not UTF-8, so the decode below cannot fail
    return _json(MemoryOut(
        path=str(m.path), version=snap.version, content=snap.raw.decode("utf-8"),
        total=len(doc.entries), limit=m.max_entries, entries=_entries(doc.entries),
        invalid=[ProblemOut(line=p.line, reason=p.reason) for p in doc.problems]))


async def replace(request: web.Request) -> web.Response:
    req = MemoryReplace.model_validate(await json_body(request))
    snap = await _memory(request).replace(req.content, req.version)
    return _json(WriteOut(total=len(snap.doc.entries), version=snap.version))


async def add_entry(request: web.Request) -> web.Response:
    req = MemoryAdd.model_validate(await json_body(request))
    r = await _memory(request).add(req.content, req.source)
    return _json(AddOut(**r.as_dict()), status=200 if r.duplicate else 201)


async def delete_entries(request: web.Request) -> web.Response:
    req = MemoryDelete.model_validate(await json_body(request))
    snap = await _memory(request).delete(req.lines, req.version)
    return _json(WriteOut(total=len(snap.doc.entries), version=snap.version))


async def recent(request: web.Request) -> web.Response:
    q = MemoryRecentQuery.model_validate(dict(request.query))
    entries = await _memory(request).recent(q.count)
    return _json(RecentOut(entries=_entries(entries)))


async def stats(request: web.Request) -> web.Response:
    return _json(StatsOut(**await _memory(request).stats()))


async def search(request: web.Request) -> web.Response:
    req = MemorySearch.model_validate(await json_body(request))
    r = await _memory(request).search(req.keywords, req.match_mode, req.max_results)
    return _json(SearchOut(total=r.total, shown=len(r.results), message=r.message,
                           results=_entries(r.results)))
