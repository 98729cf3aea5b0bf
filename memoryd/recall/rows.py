"""Where search and context read their rows: this machine's row cache when the index
keeps one and is ready (fleet mode: `memoryd.fleet.row_cache`, so answers stay complete
while the shared database is away), else the store's readers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from memoryd.index.protocol import Index
from memoryd.index.schema import speaker_code
from memoryd.index.text import dup_hash
from memoryd.store import Store
from memoryd.store.units import candidate_rows

T = TypeVar("T")


async def read_rows(store: Store, index: Index, fn: Callable[[Any], T]) -> tuple[T, bool]:
    """`fn(conn)` over the rows search and context read: the index's row cache when it
    holds them (fleet mode, index ready), else the store's reader. Second: whether the
    answer came from the cache while the database is unreachable (stale)."""
    rows = index.rows
    if rows is None or not index.searchable():
        return await store.read(fn), False
    out = await asyncio.get_running_loop().run_in_executor(rows.readers, rows.read_sync, fn)
    return out, not store.health.reachable


def candidates(conn: Any, ids: list[int], where: tuple[list[str], list[object]] = ([], [])
               ) -> dict[int, dict[str, Any]]:
    """The ranking's candidates read from the database (`candidate_rows`, of the units
    that pass `where`), each with what the index's fast fields give otherwise: the
    speaker's code and the duplicate key of its head."""
    rows = candidate_rows(conn, ids, where=where)
    for r in rows.values():
        r.update(speaker=speaker_code(r["role"], r["kind"]), dup=dup_hash(r.pop("head")))
    return rows
