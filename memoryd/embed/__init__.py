"""Local embeddings beside BM25 (issue 31): an optional part, the `memoryd[embed]` extra.

`Embedder` joins the model (`memoryd.embed.model`) and the background worker
(`memoryd.embed.worker`); the daemon builds one when the extra is installed and
`embed.enabled` is on (`off_reason`) and hands it to search and context. In fleet mode each
machine embeds its own units and reads everyone's vectors from its row cache
(`memoryd.store.vectors`). They hand the ranking a
`QueryVector`: the query is embedded on the reader thread only if the fusion gate opens
(`memoryd.recall.retrieval`), since the embedding is most of a fused search's time (17-60
ms against ~3) and the gate stays shut for most queries. Without the extra nothing here
imports anything beyond the standard library.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from memoryd.embed.model import NAME, Model, available
from memoryd.embed.worker import EmbedWorker
from memoryd.store import Store, vectors

__all__ = ["Embedder", "QueryVector", "available", "embed_status", "off_reason",
           "query_vector"]

log = logging.getLogger(__name__)

# A query is embedded cut to this: e5's time grows with its tokens (on a loaded 2-core
# machine 28 ms for 40 characters, 92 ms for 250, 1.1 s for 2,000), and a hook's context
# request carries the whole prompt. Every question of the dev split is shorter (29-192
# characters), so what they are ranked by is unchanged; the lexical ranking still reads
# the whole query.
QUERY_CHARS = 256


class Embedder:
    def __init__(self, store: Store, *, max_chars: int, idle_s: float | None = None,
                 busy: Callable[[], bool] | None = None) -> None:
        self.store = store
        self.model = Model() if idle_s is None else Model(idle_s=idle_s)
        self.worker = EmbedWorker(store, self.model, max_chars=max_chars, busy=busy)
        self.queries = 0  # queries embedded: searches and contexts the fusion gate opened
        self.query_errors = 0

    def on_ingest(self, event: Any) -> None:
        """New units were stored (an ingest subscriber): the worker looks now, embedding
        once ingest has been quiet a moment."""
        self.worker.touch()
        self.worker.wake()

    def query(self, text: str) -> Any:
        """The query's vector (of its first `QUERY_CHARS`), on the caller's thread, never
        the event loop's (~14 ms for a short one on a free machine; a first use starts
        the model's process, ~0.3 s); None when embedding fails (the ranking is then
        lexical)."""
        self.queries += 1
        try:
            return self.model.query(text[:QUERY_CHARS])
        except Exception:
            self.query_errors += 1
            log.exception("embedding a query failed; ranking lexically")
            return None

    async def rebuild(self) -> int:
        """Every vector dropped and embedded again (`memoryctl reindex`); in a shared
        store, this machine's."""
        n = await self.store.write(lambda c: vectors.clear(c, self.worker.machine))
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


class QueryVector:
    """A query's vector, embedded when first asked for and kept for the request's later
    asks (context ranks twice: this project, then everyone). Called on a reader thread."""

    def __init__(self, embedder: Embedder, text: str) -> None:
        self._embedder, self._text = embedder, text
        self._lock = threading.Lock()
        self._asked = False
        self._vec: Any = None

    def __call__(self) -> Any:
        with self._lock:
            if not self._asked:
                self._vec = self._embedder.query(self._text)
                self._asked = True
            return self._vec


def query_vector(embedder: Embedder | None, text: str) -> QueryVector | None:
    """What a search or context hands the ranking: None (no embeddings, or no words to
    embed) ranks lexically. A query asked puts the worker's embedding off for a quiet
    moment."""
    if embedder is None:
        return None
    embedder.worker.touch()
    return QueryVector(embedder, text) if text.strip() else None
