"""What context memoryd handed to agents: time, agent, session, query, the items with
their ids, and tokens. Kept `privacy.served_log_days` days; the daily token total is
the figure people watch (injected context costs them tokens on every turn)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

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


class ServedLog:
    def __init__(self, store: Store, keep_days: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.keep_days, self.clock = store, keep_days, clock

    async def record(self, *, via: str, agent: str | None, session_id: str | None,
                     query: str | None, budget_tokens: int, pack: dict[str, Any]) -> None:
        """Log one served block; never fails the request that served it."""
        if self.keep_days <= 0:
            return
        now = self.clock()
        items = served_items(pack)
        day = time.strftime("%Y-%m-%d", time.localtime(now))
        cutoff = now - self.keep_days * DAY_S

        def write(c: Any) -> None:
            record_served(c, ts=now, day=day, via=via, agent=agent, session_id=session_id,
                          query=query, items=items, tokens=int(pack.get("total_tokens", 0)),
                          budget_tokens=budget_tokens)
            prune_served(c, cutoff)

        try:
            await self.store.write(write)
        except Exception:
            log.warning("could not log served context", exc_info=True)

    async def entries(self, *, session_id: str | None, agent: str | None, last: int,
                      days: int) -> dict[str, Any]:
        def read(c: Any) -> dict[str, Any]:
            return {"entries": list_served(c, session_id=session_id, agent=agent, last=last),
                    "daily": daily_totals(c, days=days, session_id=session_id, agent=agent)}

        out = await self.store.read(read)
        out["keep_days"] = self.keep_days
        return out
