"""What a search index offers, whichever one the daemon built: the local one that follows
the SQLite file (`memoryd.index.SearchIndex`) or the fleet's, which follows the shared
database's change feed (`memoryd.fleet.follow_index.FleetIndex`).

The daemon builds one and hands it to the store (which wakes it after writes:
`memoryd.store.follower`), to recall (search, context, retrieval) and to forgetting;
they use it through this protocol only, never by asking which kind it is.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from memoryd.index.helper import Helper
    from memoryd.index.matching import At
    from memoryd.index.query import Filters
    from memoryd.index.recent import RecentHits
    from memoryd.index.tail import TailPolicy


T = TypeVar("T")


class Rows(Protocol):
    """A local copy of the rows search and context read (the fleet's row cache,
    `memoryd.fleet.row_cache.RowCache`), read on its own threads."""

    readers: Executor

    def read_sync(self, fn: Callable[[Any], T]) -> T: ...


class Index(Protocol):
    state: str  # "ready" or "rebuilding"
    tail_policy: TailPolicy  # when the live tail commits (the daemon sets it from config)
    # whether this daemon is backfilling its own transcripts (the daemon sets it; a fleet
    # index then applies the feed in large, spaced batches; a local index ignores it)
    busy: Callable[[], bool]
    recent: RecentHits  # the hits served last, to answer from offline (fleet only: else 0)
    rows: Rows | None  # the rows search reads (fleet mode: a local copy; else None)
    analyzer: Any  # the tantivy analyzer its text fields use (`memoryd.index.schema`)

    # -- life cycle (the daemon) --------------------------------------------------------
    def open(self, clear_pending: Callable[[int], None]) -> None: ...
    def close(self) -> None: ...
    def request_rebuild(self) -> None: ...

    # -- following the store (`memoryd.store.follower.WriteFollower`) -------------------
    def notify_write(self) -> None: ...
    def is_caught_up(self, conn: sqlite3.Connection) -> bool: ...
    def waited(self) -> contextlib.AbstractContextManager[Any]: ...
    def backlog(self) -> bool: ...
    def has_writer(self) -> bool: ...
    def status(self, conn: sqlite3.Connection) -> dict[str, Any]: ...

    # -- searching (`memoryd.recall`) ---------------------------------------------------
    @property
    def helper(self) -> Helper: ...
    def searchable(self) -> bool: ...
    def candidates(self, conn: sqlite3.Connection, terms: list[str], f: Filters, *,
                   mode: str, limit: int, count: bool, w_body: float = 1.0,
                   w_one_liner: float = 3.0) -> tuple[int, list[tuple[int, float]]]: ...
    def ranked(self, conn: sqlite3.Connection | None, terms: list[str], f: Filters, *,
               mode: str, limit: int, count: bool, w_body: float = 1.0,
               w_one_liner: float = 3.0, speaker: bool = True
               ) -> tuple[int, list[dict[str, Any]], bool] | None: ...
    def matched_fields(self, terms: list[str], ids: list[int], at: dict[int, At] | None
                       ) -> tuple[dict[int, set[int]], dict[int, set[int]] | None]: ...
    def matched(self, terms: list[str], texts: dict[int, str]) -> dict[int, set[int]]: ...
    def split_scores(self, terms: list[str], lines: dict[int, str], scores: dict[int, float],
                     *, w_body: float = 1.0, w_one_liner: float = 3.0,
                     at: dict[int, At] | None = None, held: dict[int, set[int]] | None = None
                     ) -> dict[int, tuple[float, float]]: ...
