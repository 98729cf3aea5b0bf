"""Request and response bodies of the HTTP API, as pydantic models. The handlers
validate with them and the OpenAPI document is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchRequest(_Request):
    query: str = Field(min_length=1, max_length=4000)
    mode: Literal["or", "and"] = "or"
    max_results: int = Field(15, ge=1, le=500)
    agent: str | None = Field(None, max_length=100)
    project: str | None = Field(None, max_length=4096)
    session_id: str | None = Field(None, max_length=1024)


class SearchResult(BaseModel):
    unit_id: int
    record_id: str
    agent: str
    session_id: str
    project: str | None
    role: str
    kind: str
    ts: float | None
    turn: int
    snippet: str
    score: float
    path: str | None
    offset: int | None


class SearchResponse(BaseModel):
    total: int
    shown: int
    message: str
    results: list[SearchResult]


class SessionsQuery(_Request):
    agent: str | None = Field(None, max_length=100)
    project: str | None = Field(None, max_length=4096)
    limit: int = Field(50, ge=1, le=1000)
