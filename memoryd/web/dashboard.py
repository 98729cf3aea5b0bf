"""The overview's charts, last `DAYS` days: messages stored per agent, context served
per agent (requests and tokens), LLM tokens against the daily budget. Read from the
store in one thread hop (memoryd.store.activity), drawn by memoryd.web.charts; every
figure also goes in a table beside its chart."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup

from memoryd.store import Store
from memoryd.store import activity as sql
from memoryd.web.charts import Series, stacked, table

DAYS = 30


@dataclass
class Chart:
    id: str
    title: str
    svg: Markup
    numbers: Markup
    total: str


def _series(days: list[str], rows: list[tuple[str, str, float]]) -> list[Series]:
    """(day, name, value) rows as one series per name, biggest first."""
    at = {d: i for i, d in enumerate(days)}
    by: dict[str, list[float]] = {}
    for day, name, v in rows:
        if day in at:
            by.setdefault(name, [0.0] * len(days))[at[day]] += v
    return [Series(n, vals) for n, vals in sorted(by.items(), key=lambda kv: -sum(kv[1]))]


async def charts(store: Store, budget_tokens: int | None, *, now: float | None = None
                 ) -> list[Chart]:
    now = time.time() if now is None else now
    today = datetime.fromtimestamp(now).astimezone().date()
    first = today - timedelta(days=DAYS - 1)
    days = [(first + timedelta(days=i)).isoformat() for i in range(DAYS)]
    # each local midnight on its own: a DST change inside the 30 days moves the offset
    bounds = [datetime.combine(first + timedelta(days=i), datetime.min.time())
              .astimezone().timestamp() for i in range(DAYS + 1)]
    utc_first = first - timedelta(days=1)

    def read(c: Any) -> tuple[Any, Any, Any, Any]:
        return (sql.messages_per_day(c, bounds),
                sql.served_per_day(c, first.isoformat()),
                sql.llm_per_day(c, utc_first.isoformat()),
                sql.memory_per_day(c, first.isoformat()))

    msgs, served, llm, mem = await store.read(read)
    msg_rows = [(days[d], agent, float(n)) for d, agent, n in msgs]
    out = []
    s = _series(days, msg_rows)
    out.append(Chart("messages", "Messages stored per day, by agent",
                     stacked(days, s, label="Messages stored per day, by agent",
                             unit="messages"),
                     table(days, s, caption="Messages stored per day"),
                     f"{sum(n for *_, n in msg_rows):,.0f} messages in {DAYS} days"))
    req = _series(days, [(d, a, float(n)) for d, a, n, _ in served])
    tok = _series(days, [(d, a, float(t)) for d, a, _, t in served])
    out.append(Chart("served", "Context served per day, by agent (requests)",
                     stacked(days, req, label="Context requests per day, by agent",
                             unit="requests"),
                     table(days, req + [Series(f"{x.name} tokens", x.values) for x in tok],
                           caption="Context served per day: requests and tokens"),
                     f"{sum(n for _, _, n, _ in served):,} requests, "
                     f"{sum(t for *_, t in served):,} tokens"))
    used = _series(days, [(r["day"], "input", float(r["input_tokens"])) for r in llm]
                   + [(r["day"], "output", float(r["output_tokens"])) for r in llm])
    cost = sum(r["cost"] for r in llm)
    out.append(Chart("llm", "LLM tokens per day against the daily budget",
                     stacked(days, used, label="LLM tokens per day", unit="tokens",
                             limit=float(budget_tokens) if budget_tokens else None,
                             limit_label="daily budget"),
                     table(days, used + [Series("cost ($)", [
                         sum(r["cost"] for r in llm if r["day"] == d) for d in days])],
                         caption="LLM tokens and cost per day (UTC days, as the budget)"),
                     f"{sum(r['calls'] for r in llm):,} calls, ${cost:.2f}"))
    kinds = _series(days, [(r["day"], k, float(r[k])) for r in mem
                           for k in sql.MEMORY_COUNTS])
    kinds = sorted(kinds, key=lambda x: sql.MEMORY_COUNTS.index(x.name))
    ran = Series("consolidation runs", [float(next((r["runs"] for r in mem if r["day"] == d),
                                                   0)) for d in days])
    failed = sum(r["failed"] for r in mem)
    out.append(Chart("memory", "What consolidation did to memory, per day",
                     stacked(days, kinds, label="Memory changes per day", unit="items"),
                     table(days, [*kinds, ran], caption="Memory changes per day, and runs"),
                     f"consolidation ran on {sum(1 for r in mem if r['runs'])} of {DAYS} days"
                     + (f", {failed} runs failed" if failed else "")))
    return out
