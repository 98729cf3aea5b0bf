"""Fleet mode: many daemons sharing one memory through PostgreSQL (issue 14).

`changefeed` holds the SQL that reads the change feed (positions, joining, pruning),
`follower` the loop that follows it with LISTEN/NOTIFY and a poll fallback, and
`follow_index` the search index that applies it. The feed's tables and triggers belong
to the store (`memoryd.store.pg.feed_ddl`), and so does `memoryd.store.health`, whether
the database is reachable (backoff, and a quiet log while it is not).
This package needs psycopg (the `postgres` extra); nothing imports it in SQLite mode.

How the rest of memoryd uses it:

- The store's PostgreSQL migration installs the feed's DDL once `units` exists.
- The store builds one `Health("store", mask=<the config's URL masking>)`; the daemon
  hands it to the follow index it builds (`memoryd.daemon.store_index`) and so to the
  follower; `status`/`doctor` show `health.status()`.
- The index writer (`feed_indexer.FeedIndexer`, the search index in fleet mode), on an
  empty or rebuilt index: `pos = changefeed.join(conn, schema, machine)` first, then the
  build from `units`, with `pos.to_json()` in the index's meta. From then on:
  `Follower.next_batch()` -> apply (re-read the units by id) -> commit the index, then
  `batch.position` into its meta -> `Follower.commit(batch)` -> `Follower.wait()`.
  `FeedGapError` means rebuild (search says `index: rebuilding`).
- The same applies keep `row_cache.RowCache` (the rows search and context read, in a
  local SQLite file): search and context read it once the index is ready, the store's
  reader otherwise (`memoryd.recall.rows.read_rows`).
- Every daemon's scheduler runs `changefeed.prune` hourly (`FleetIndex.prune_changes`).
"""
