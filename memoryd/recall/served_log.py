"""What context memoryd handed to agents: time, agent, session, query, the items with
their ids, and tokens. Kept `privacy.served_log_days` days; the daily token total is
the figure people watch (injected context costs them tokens on every turn)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from memoryd.errors import StoreUnavailableError
from memoryd.store import Store
from memoryd.store.served import daily_totals, list_served, prune_served, record_served

log = logging.getLogger(__name__)

DAY_S = 86400.0


def served_items(pack: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a context pack, each named by the id that finds it again: a unit id
    (recalled turns), a MEMORY.md line, a session summary's coverage, a daily note."""
    items: list[dict[str, Any]] = []
    summary = pack.get("session_summary")
    if summary:
        items.append({"section": "session_summary", "id": f"upto:{summary.get('covers_upto_seq')}",
                      "tokens": summary.get("tokens", 0)})
    for e in pack.get("long_term") or []:
        items.append({"section": "long_term", "id": f"line:{e.get('line')}",
                      "tokens": e.get("tokens", 0)})
    for h in pack.get("recalled") or []:
        items.append({"section": "recalled", "id": f"unit:{h.get('unit_id')}",
                      "record_id": h.get("record_id"), "session_id": h.get("session_id"),
                      "tokens": h.get("tokens", 0)})
    for d in pack.get("daily") or []:
        items.append({"section": "daily", "id": f"day:{d.get('date')}",
                      "tokens": d.get("tokens", 0)})
    return items


def _nothing(conn: Any) -> None:
    return None


class ServedLog:
    """Each served block is written in the background: the agent gets its context without
    waiting for the store's writer (which, during a backfill, is busy with ingest
    batches for up to seconds). The write is queued on the writer at once, so a later
    `forget` still finds it; nothing comes back to the event loop for it, and the index
    writer is not woken (it writes no unit). Reads of the log and `close` wait for what
    is queued."""

    def __init__(self, store: Store, keep_days: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.keep_days, self.clock = store, keep_days, clock

    async def record(self, *, via: str, agent: str | None, session_id: str | None,
                     query: str | None, budget_tokens: int, pack: dict[str, Any]) -> None:
        """Log one served block in the background; never fails or delays the request
        that served it."""
        if self.keep_days <= 0:
            return
        now = self.clock()
        items = served_items(pack)
        tokens = int(pack.get("total_tokens", 0))
        day = time.strftime("%Y-%m-%d", time.localtime(now))
        cutoff = now - self.keep_days * DAY_S

        def write(c: Any) -> None:
            try:
                record_served(c, ts=now, day=day, via=via, agent=agent,
                              session_id=session_id, query=query, items=items,
                              tokens=tokens, budget_tokens=budget_tokens)
                prune_served(c, cutoff)
            except StoreUnavailableError:  # the outage is logged once by the store's health
                log.debug("served context not logged: the store is unreachable")
                raise  # rolled back
            except Exception:
                log.warning("could not log served context", exc_info=True)
                raise

        self.store.post(write)

    async def flush(self) -> None:
        """Until every block recorded so far is written (or failed and logged): the
        writer runs in order, so an empty write queued now ends after them."""
        with contextlib.suppress(Exception):  # a failed one was logged by its write
            await self.store.write(_nothing)

    async def entries(self, *, session_id: str | None, agent: str | None, last: int,
                      days: int) -> dict[str, Any]:
        await self.flush()

        def read(c: Any) -> dict[str, Any]:
            return {"entries": list_served(c, session_id=session_id, agent=agent, last=last),
                    "daily": daily_totals(c, days=days, session_id=session_id, agent=agent)}

        out = await self.store.read(read)
        out["keep_days"] = self.keep_days
        return out
