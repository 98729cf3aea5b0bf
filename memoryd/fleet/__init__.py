"""Fleet mode: many daemons sharing one memory through PostgreSQL (issue 14).

`changefeed` holds the SQL of the change feed (triggers, positions, joining, pruning),
`follower` the loop that follows it with LISTEN/NOTIFY and a poll fallback, and
`health` whether the database is reachable (backoff, and a quiet log while it is not).
This package needs psycopg (the `postgres` extra); nothing imports it in SQLite mode.

How the rest of memoryd is meant to use it (wiring lands with the store's port):

- The PostgreSQL migration runs `changefeed.ddl(schema)` once `units` exists.
- `daemon.py` builds one `Health("store", mask=<the config's URL masking>)` and hands
  it to the store and the follower; `status`/`doctor` show `health.status()`.
- The index writer, on an empty or rebuilt index: `pos = changefeed.join(conn, schema,
  machine)` first, then the build from `units`, then `pos.to_json()` into the index's
  meta. From then on: `Follower.next_batch()` -> apply (re-read the units by id) ->
  commit the index with `batch.position` in its meta -> `Follower.commit(batch)` ->
  `Follower.wait()`. `FeedGapError` means rebuild (search says `index: rebuilding`).
- A fleet-wide job (claimed once) runs `changefeed.prune` now and then.
"""
