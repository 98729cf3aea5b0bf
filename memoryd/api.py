"""Request and response bodies of the HTTP API, as pydantic models. The handlers
validate with them and the OpenAPI document is generated from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


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
    unit_id: int | None = Field(description="None for a unit retention moved to the "
                                "archive (see `archived`)")
    record_id: str
    agent: str
    session_id: str
    project: str | None
    role: str
    kind: str
    ts: float | None
    turn: int
    snippet: str
    one_liner: str | None = Field(None, description="the unit's one-line summary, for long "
                                  "tool outputs and replies (short units are their own)")
    tool_name: str | None = None
    score: float
    path: str | None
    offset: int | None
    why: dict[str, Any] | None = Field(
        None, description="why it matched: `matched` query terms, `signals` that fired "
        "(bm25_content, bm25_one_liner, speaker, neighbour, recency, same_project, "
        "session_repeat), and `duplicates`: ids of near-identical units collapsed into it")
    archived: str | None = Field(None, description="the month of the archive file "
                                 "(`archive/units-YYYY-MM.jsonl.gz`) retention moved this "
                                 "unit to; `memoryctl archive restore` brings it back")


class SearchResponse(BaseModel):
    total: int
    shown: int
    message: str
    results: list[SearchResult]
    # fleet mode, the shared database unreachable: answered from this machine's index
    stale: bool = False
    store: str = Field("ok", description="`ok`, or `unreachable` (the answer is stale)")


class SessionsQuery(_Request):
    agent: str | None = Field(None, max_length=100)
    project: str | None = Field(None, max_length=4096)
    since: datetime | None = None  # ISO-8601 or Unix seconds; naive = local time
    until: datetime | None = None
    limit: int = Field(50, ge=1, le=1000)
    cursor: str | None = Field(None, max_length=100, pattern=r"^-?[0-9.]+:[0-9]+$")


class SessionRef(_Request):
    agent: str | None = Field(None, max_length=100)
    machine: str | None = Field(None, max_length=200)  # a fleet: which machine's session


class MessagesQuery(_Request):
    agent: str | None = Field(None, max_length=100)
    machine: str | None = Field(None, max_length=200)
    after_seq: int = Field(0, ge=0, le=(1 << 63) - 1)  # SQLite INTEGER
    limit: int = Field(100, ge=1, le=1000)


def _no_machine(v: Any) -> Any:
    return v or None  # the embedded store's sessions are machine ''


class Session(BaseModel):
    agent: str
    session_id: str
    # the machine whose transcript it is (a fleet); null in the embedded store
    machine: str | None = None
    project: str | None
    title: str | None
    first_ts: float | None
    last_ts: float | None
    units: int
    user_units: int
    turns: int
    state: str

    _machine = field_validator("machine", mode="before")(_no_machine)


class SessionsPage(BaseModel):
    sessions: list[Session]
    next_cursor: str | None


class SessionDetail(Session):
    roles: dict[str, int]
    files: list[str]
    summary: str | None
    summary_upto: int


class Message(BaseModel):
    unit_id: int
    record_id: str
    seq: int
    turn: int
    role: str
    kind: str
    content: str
    tool_name: str | None
    related_id: str | None
    ts: float | None
    one_liner: str | None
    path: str | None
    offset: int | None


class MessagesPage(BaseModel):
    messages: list[Message]
    next_after_seq: int | None


class Forgotten(BaseModel):
    agent: str
    session_id: str
    machine: str | None = None
    units_deleted: int

    _machine = field_validator("machine", mode="before")(_no_machine)
    archived_units_deleted: int = 0
    memory_items_removed: list[str] = []  # MEMORY.md items only forgotten sessions stood behind
    daily_lines_removed: list[str] = []  # and daily-note lines
    history_lines_removed: list[str] = []  # and HISTORY.md lines or items


class IngestRequest(_Request):
    path: str = Field(min_length=1, max_length=4096)
    agent: Literal["auto", "claude-code", "codex", "gemini-cli", "pi", "openclaw", "nanobot",
                   "generic"] = "auto"
    wait: bool = False


class IngestResponse(BaseModel):
    path: str
    files: int
    new_units: int | None  # with wait: units stored by this request
    # with wait: files not taken as transcripts, each {"path", "reason"}
    ignored: list[dict[str, str]] = Field(default_factory=list)


class JobResponse(BaseModel):
    job: str
    result: dict[str, Any]


class Health(BaseModel):
    status: str
    version: str
    api: int


class StatusQuery(BaseModel):
    """`format=text`: the status as `memoryctl status` prints it (its quick path then
    decodes no JSON). Other query parameters are ignored, as before."""

    format: Literal["json", "text"] = "json"


class BackupRequest(_Request):
    path: str = Field(min_length=1, max_length=4096)


class BackupResponse(BaseModel):
    path: str
    bytes: int


Section = Literal["long_term", "session_summary", "recalled", "daily"]


class ContextRequest(_Request):
    query: str | None = Field(None, max_length=4000)
    session_id: str | None = Field(None, max_length=1024)
    cwd: str | None = Field(None, max_length=4096)
    agent: str | None = Field(None, max_length=100)
    budget_tokens: int = Field(2000, ge=50, le=200_000)
    include: list[Section] | None = None  # default: long_term, session_summary, recalled
    max_recalled: int = Field(8, ge=1, le=50)
    format: Literal["json", "md"] = "json"
    # who asks, for the served-context log: "hook", "mcp", "memoryctl", a plugin's name
    client: str | None = Field(None, max_length=40)

    @field_validator("include", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v

    @field_validator("cwd")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or "\x00" in v):
            raise ValueError("cwd must be an absolute path")
        return v


class EvalRequest(_Request):
    """POST /v1/eval: retrieval scored on this store's own history (`memoryd.recall.evaluate`)."""
    sample: int = Field(200, ge=1, le=2000, description="turns sampled as probes")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="the same seed, the same probes")
    questions: Literal["cloze", "model"] = Field(
        "cloze", description="cloze: some of the turn's own rarer words, shuffled; model: "
        "a question the configured model writes (only a model served on this machine)")
    dry_run: bool = Field(False, description="time a few probes and estimate the run")
    show_misses: int = Field(20, ge=0, le=200, description="misses listed, at most")


class EvalScore(BaseModel):
    mode: Literal["lexical", "lexical+vectors"]
    r1: float
    r5: float
    r10: float
    ndcg10: float
    any10: float = Field(description="a hit in the turn's session within one turn of it")
    vector_added: int | None = Field(None, description="probes whose top ten holds a turn "
                                     "only the vectors put there")


class EvalMiss(BaseModel):
    probe: str
    unit_id: int
    agent: str
    session_id: str
    role: str
    snippet: str
    ranks: dict[str, int | None] = Field(description="per mode, the turn's rank within 50 "
                                         "(None: not there)")


class EvalResponse(BaseModel):
    questions: str
    seed: int
    sampled: int = Field(description="turns drawn")
    probes: int = Field(description="probes made (a turn with under 3 searchable words "
                        "makes none; a model's empty answer neither)")
    dry_run: bool
    seconds: float
    estimate_s: float | None = Field(None, description="dry run: the whole run's time")
    scores: list[EvalScore]
    vectors: dict[str, Any] = Field(description="`scored`, `reason` when not, `embedded` "
                                    "(sampled turns with a vector) `of` the sampled, "
                                    "`caught_up`, `pending`; `better`/`worse`: probes whose "
                                    "turn the vectors ranked higher/lower in the top 10")
    misses: list[EvalMiss]
    missed: int = Field(description="probes missed at 10 in some mode")
    suggestions: list[str]
    note: str
