"""The LLM's daily ledger (`llm_usage`): the tokens, cost and outcome of every call, which
the LLM reads before a call (the daily token budget) and writes after one. It lives in the
store so that a fleet shares one budget; the LLM is handed it (`memoryd.llm.Ledger`), so
the model boundary does not import the store."""

from __future__ import annotations

from typing import Any

from memoryd.store import Store
from memoryd.store.summaries import record_usage, usage_on


class Usage:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def on(self, day: str) -> dict[str, Any]:
        """Calls, tokens and cost of the UTC day `day` (YYYY-MM-DD)."""
        return await self.store.read(lambda c: usage_on(c, day))

    async def record(self, **row: Any) -> None:
        """One call: ts, day, model, purpose, target, input_tokens, output_tokens, cost,
        outcome, error (`store.summaries.record_usage`)."""
        await self.store.write(lambda c: record_usage(c, **row))
