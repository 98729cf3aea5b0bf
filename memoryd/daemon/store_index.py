"""Opening the search index that follows the store: the local tantivy index over the
SQLite file (`memoryd.index.SearchIndex`), or, in fleet mode, the one that follows the
shared database's change feed (`memoryd.fleet.follow_index.FleetIndex`). The daemon
(and tools and tests that want a searchable store) builds it here and hands it to the
store, which wakes it after writes (`Store.follow`), and to recall and forgetting.
The store itself neither builds nor imports an index.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from memoryd.errors import StoreError
from memoryd.index import SearchIndex
from memoryd.index.protocol import Index
from memoryd.store import Store
from memoryd.store_target import StoreTarget


def open_index(store: Store, index_dir: Path | None = None) -> Index:
    """Build and open the index for `store` (by default in the `index` directory beside
    its database file), and have the store follow its writes with it. Blocking: call
    from a worker thread."""
    root = index_dir or store.path.parent / "index"
    index: SearchIndex
    if store.kind == "postgresql":
        from memoryd.fleet.follow_index import FleetIndex
        from memoryd.store.pg import conn as pg

        target = store.target
        # the local index follows the namespace's change feed (every machine's writes)
        index = FleetIndex(root, store.path,
                           connect=lambda: pg.connect(target, autocommit=True),
                           target=target, health=store.health)  # one health per store
    else:
        index = SearchIndex(root, store.path)
    try:
        index.open(store.drop_index_pending_sync)
    except (OSError, ValueError) as e:
        where = "" if store.kind == "postgresql" else f" {index.root}"
        raise StoreError(f"cannot open the search index{where}: {e}") from e
    store.follow(index)
    return index


def open_store_sync(path: Path, index_dir: Path | None = None,
                    target: StoreTarget | None = None) -> Store:
    """The store at `path` (or `target`'s namespace) with its search index following it
    (tools, benches and tests; the daemon opens the two as separate steps)."""
    store = Store.open_sync(path, target)
    try:
        open_index(store, index_dir)
    except BaseException:
        store.close_sync()
        raise
    return store


async def open_store(path: Path, index_dir: Path | None = None,
                     target: StoreTarget | None = None) -> Store:
    return await asyncio.to_thread(open_store_sync, path, index_dir, target)
