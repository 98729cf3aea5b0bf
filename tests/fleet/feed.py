"""A namespace's schema with a minimal `units` table and the change feed's DDL (the
store's own `units` comes with its PostgreSQL port; the feed needs only `id bigint` as
its key)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from memoryd.store.pg import feed_ddl

SCHEMA = "memoryd_default"


@dataclass
class Feed:
    url: str
    schema: str = SCHEMA

    def connect(self, **kw: object) -> psycopg.Connection:
        return psycopg.connect(self.url, **kw)

    def units(self) -> dict[int, str]:
        with self.connect() as c:
            return dict(c.execute(f"SELECT id, content FROM {self.schema}.units").fetchall())


def create_feed(url: str, schema: str = SCHEMA) -> Feed:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
        c.execute(f"CREATE TABLE {schema}.units (id bigserial PRIMARY KEY,"
                  " content text NOT NULL UNIQUE)")
        c.execute(feed_ddl.ddl(schema))
    return Feed(url, schema)
