"""A stand-in for a machine's local index in the feed's tests: unit id -> content,
applied the way the index writer applies a batch (an upsert re-reads the unit and drops
it when it is gone; a delete drops it), counting every change row it was handed."""

from __future__ import annotations

from collections import Counter

import psycopg

from memoryd.fleet.changefeed import Batch


class Mirror:
    def __init__(self, feed) -> None:
        self.feed = feed
        self.docs: dict[int, str] = {}
        self.seqs: Counter[int] = Counter()
        self._conn = None

    def apply(self, batch: Batch) -> None:
        latest = batch.latest()
        rows = self._read(list(latest))
        for unit_id in latest:
            if latest[unit_id] == "upsert" and unit_id in rows:
                self.docs[unit_id] = rows[unit_id]
            else:
                self.docs.pop(unit_id, None)
        self.seqs.update(batch.seqs)

    def _read(self, ids: list[int]) -> dict[int, str]:
        """The units' current rows. A connection that went stale in an outage is
        replaced once before the failure counts, as a pool's connection check does
        (`psycopg_pool`'s `check_connection`)."""
        for attempt in (1, 2):
            if self._conn is None or self._conn.closed:
                self._conn = self.feed.connect(autocommit=True)
            try:
                return dict(self._conn.execute(
                    f"SELECT id, content FROM {self.feed.schema}.units WHERE id = ANY(%s)",
                    (ids,)).fetchall())
            except psycopg.OperationalError:
                self._conn.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def build(self, conn) -> None:
        """A new machine's build from `units` (after it joined)."""
        self.docs = dict(conn.execute(
            f"SELECT id, content FROM {self.feed.schema}.units").fetchall())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
