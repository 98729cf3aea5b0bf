"""The machines seen in a namespace, for the operator's view (status, /metrics).

A machine is seen when it has read a transcript into the store (its files' cursors, by
machine) or follows the change feed (its reported position). `last_ingest` is the last
time one of its cursors moved (epoch seconds), `last_seen` the last time it reported
its index position.
"""

from __future__ import annotations

from typing import Any


def machines_seen(conn: Any) -> list[dict[str, Any]]:
    """Every machine of the namespace `conn` is on (a store connection, schema on its
    search path), by name."""
    out: dict[str, dict[str, Any]] = {}
    for m, files, last in conn.execute(
            "SELECT machine, count(*), max(updated_at) FROM files GROUP BY machine"):
        out[m] = {"machine": m, "files": int(files), "last_ingest": last, "last_seen": None}
    for m, seen in conn.execute(
            "SELECT machine, extract(epoch FROM updated_at)::double precision"
            " FROM change_positions"):
        row = out.setdefault(m, {"machine": m, "files": 0, "last_ingest": None})
        row["last_seen"] = seen
    return [out[m] for m in sorted(out)]
