"""Fleet mode: many daemons sharing one memory through PostgreSQL (issue 14).

`changefeed` holds the SQL of the change feed (triggers, positions, pruning),
`follower` the loop that follows it with LISTEN/NOTIFY and a poll fallback, and
`health` whether the database is reachable (backoff, and a quiet log while it is not).
This package needs psycopg (the `postgres` extra); nothing imports it in SQLite mode.
"""
