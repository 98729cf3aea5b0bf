"""Local embeddings beside BM25 (issue 31): an optional part, the `memoryd[embed]` extra.

`Embedder` joins the model (`memoryd.embed.model`) and the background worker
(`memoryd.embed.worker`); the daemon builds one when the extra is installed and
`embed.enabled` is on (`off_reason`) and hands it to search and context. In fleet mode each
machine embeds its own units and reads everyone's vectors from its row cache
(`memoryd.store.vectors`). Search and context hand the ranking a `VectorQuery`: the units
nearest the query by meaning, found by the model's process over the vectors of the
database the ranking reads (`memoryd.recall.union`), once per request. MEMORY.md's
entries have vectors too, kept in memory (`memoryd.embed.entries`): a context ranks them
by their cosine with its query as well as by its words (`entry_cosines`). Without the
extra nothing here imports anything beyond the standard library.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

from memoryd.embed.model import IDLE_S, NAME, RELOAD_S, Model, available
from memoryd.embed.worker import EmbedWorker
from memoryd.store import Store, vectors

__all__ = ["Embedder", "VectorQuery", "available", "embed_status", "off_reason",
           "vector_query"]

log = logging.getLogger(__name__)

# A query is embedded cut to this: e5's time grows with its tokens (on a loaded 2-core
# machine 28 ms for 40 characters, 92 ms for 250, 1.1 s for 2,000), and a hook's context
# request carries the whole prompt. Every question of the dev split is shorter (29-192
# characters), so what they are ranked by is unchanged; the lexical ranking still reads
# the whole query.
QUERY_CHARS = 256


class Embedder:
    def __init__(self, store: Store, *, max_chars: int, idle_s: float | None = None,
                 reload_s: float = RELOAD_S, busy: Callable[[], bool] | None = None) -> None:
        self.store = store
        self.model = Model(idle_s=IDLE_S if idle_s is None else idle_s, reload_s=reload_s)
        self.worker = EmbedWorker(store, self.model, max_chars=max_chars, busy=busy,
                                  on_saved=self.changed)
        self.generation = 0  # vectors written: the model's copy of them is old when it moves
        self.queries = 0  # queries embedded: searches and contexts
        self.query_errors = 0

    def changed(self) -> None:
        """Vectors were written or cleared (the worker's saves; in fleet mode, the row
        cache's applies; `rebuild`): the model's copy reloads when next due."""
        self.generation += 1

    def on_ingest(self, event: Any) -> None:
        """New units were stored (an ingest subscriber): the worker looks now, embedding
        once ingest has been quiet a moment."""
        self.worker.touch()
        self.worker.wake()

    def nearest(self, text: str, path: str, n: int) -> list[tuple[int, float]] | None:
        """The `n` units of the database at `path` nearest the query (of its first
        `QUERY_CHARS`) by cosine, best first, on the caller's thread, never the event
        loop's (~15 ms for a short one with 15k vectors on a free machine; a first use
        starts the model's process and reads the vectors, ~0.3 s); None when it fails (the
        ranking is then lexical)."""
        self.queries += 1
        try:
            return self.model.nearest(text[:QUERY_CHARS], path, self.generation, n)
        except Exception:
            self.query_errors += 1
            log.exception("finding the nearest units failed; ranking lexically")
            return None

    def follow_memory(self, read: Callable[[], Awaitable[list[str]]]) -> None:
        """MEMORY.md, read by `read` (its entries' texts, newest first): the worker keeps
        their vectors."""
        self.worker.memory = read

    def entry_cosines(self, text: str, entries: Sequence[str]) -> dict[int, float] | None:
        """The query's cosine (of its first `QUERY_CHARS`) with each entry's text that has
        a vector, by its index in `entries`; one call to the model's process, on the
        caller's thread (its embedding of the query is the one a unit search of the same
        text made, when that came first: `memoryd.embed.engine.Queries`). An entry
        without a vector (the worker embeds it within `IDLE_POLL_S` and a quiet moment)
        is missing; None when the model fails."""
        self.worker.touch()  # a query asked: the worker's embedding waits a moment
        have = self.worker.entries.of(entries)
        if not have:
            return {}
        try:
            got = self.model.cosines(text[:QUERY_CHARS], [v for _, v in have])
        except Exception:
            self.query_errors += 1
            log.exception("ranking MEMORY.md's entries by meaning failed; by words only")
            return None
        return {i: c for (i, _), c in zip(have, got)}

    async def rebuild(self) -> int:
        """Every vector dropped and embedded again (`memoryctl reindex`); in a shared
        store, this machine's."""
        n = await self.store.write(lambda c: vectors.clear(c, self.worker.machine))
        self.changed()
        self.worker.restart()
        return n

    async def status(self) -> dict[str, Any]:
        return {"enabled": True, "model": NAME, "loaded": self.model.loaded,
                "pid": self.model.pid,  # the model's own process, while it runs
                "loads": self.model.loads, "queries": self.queries,
                "query_errors": self.query_errors,
                **await self.worker.status()}


def off_reason(enabled: bool) -> str | None:
    """Why embeddings are off (None: on)."""
    if not enabled:
        return "embed.enabled is false"
    if not available():
        return "the memoryd[embed] extra is not installed"
    return None


async def embed_status(embedder: Embedder | None, reason: str | None) -> dict[str, Any]:
    """`/v1/status` → `embed`: the worker's backlog and progress, or why it is off."""
    if embedder is not None:
        return await embedder.status()
    return {"enabled": False, "reason": reason or "not started", "caught_up": True,
            "pending": 0, "done": 0, "model": None}


class VectorQuery:
    """What a search or context hands the ranking: the units nearest the query, asked
    of the model's process once per database and kept for the request's later asks
    (context ranks twice: this project, 200 asked, then everyone, 40: one ask). Called
    on a reader thread; `ask` starts the question on a thread of its own, so the model's
    process (on the other core) embeds and searches while the words are ranked."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self._embedder, self._text = embedder, text
        self._lock = threading.Lock()
        self._got: dict[tuple[str, int], Future] = {}

    def ask(self, conn: Any, n: int) -> Future | None:
        """The ask for the `n` nearest among the vectors `conn` reads, started once (on
        a thread) and kept; one already made for as many or more answers it (the
        model's order is total, so the first `n` of a longer answer are the answer).
        None when `conn` is not a SQLite file (fleet mode while the index rebuilds: its
        rows are read from PostgreSQL)."""
        path = database_path(conn)
        if path is None:
            return None
        with self._lock:
            for (p, m), fut in self._got.items():
                if p == path and m >= n:
                    return fut
            fut = self._got[path, n] = Future()
        threading.Thread(target=self._run, args=(fut, path, n), daemon=True,
                         name="memoryd-vector-ask").start()
        return fut

    def _run(self, fut: Future, path: str, n: int) -> None:
        try:  # the model failing is None (`Embedder.nearest`)
            fut.set_result(self._embedder.nearest(self._text, path, n))
        except BaseException as e:  # never a ranking left waiting
            fut.set_exception(e)

    def nearest(self, conn: Any, n: int) -> list[tuple[int, float]] | None:
        """(unit id, cosine) of the `n` units nearest the query, best first, once the
        ask (`ask`) has its answer; None when they cannot be had (the ranking is
        lexical): the model failed, or `conn` is not a SQLite file."""
        fut = self.ask(conn, n)
        got = None if fut is None else fut.result()
        return None if got is None else got[:n]


def database_path(conn: Any) -> str | None:
    """The file of a SQLite connection's main database; None for anything else."""
    if not isinstance(conn, sqlite3.Connection):
        return None
    row = conn.execute("PRAGMA database_list").fetchone()
    return (row[2] or None) if row else None


def vector_query(embedder: Embedder | None, text: str) -> VectorQuery | None:
    """What a search or context hands the ranking: None (no embeddings, or no words to
    embed) ranks lexically. A query asked puts the worker's embedding off for a quiet
    moment."""
    if embedder is None:
        return None
    embedder.worker.touch()
    return VectorQuery(embedder, text) if text.strip() else None
