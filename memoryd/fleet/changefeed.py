"""The change feed: how every machine's index follows the units in the shared store.

Triggers on `units` write one `changes` row per inserted, updated or deleted unit,
stamped with the writing transaction's id (`xid`, an xid8), and NOTIFY the namespace's
channel (a random name in its `change_channel` table, `listen_channel`; statement-level
triggers, and identical notifications in one transaction are folded into one by
PostgreSQL, so a transaction notifies once however many units it wrote).

**Never skipping a row.** `seq` values are handed out at insert, not at commit, so a
reader that remembered "the largest seq I read" would skip a row that a slow transaction
commits later with a smaller seq. A follower's position is instead a *snapshot*
(`pg_current_snapshot()`, text like `1200:1207:1201,1204`): the set of transactions
whose effects it has applied. A poll takes a new snapshot T and reads every change row
visible in T but not in the position D:

    xid >= pg_snapshot_xmin(D)                  -- the index range; below xmin all is in D
    AND NOT pg_visible_in_snapshot(xid, D)      -- not applied yet
    AND pg_visible_in_snapshot(xid, T)          -- committed when T was taken

then the position becomes T. By induction the applied set is exactly "every transaction
visible in the position": a transaction committed before D was read when it became
visible, whatever its seq; one still running at D (in D's in-progress list, or at or
above its xmax) is read by the first poll whose snapshot sees it committed; a committed
transaction's rows are all visible at once, so none is split. This is PgQ's (Skytools)
tick-and-snapshot scheme; the position's size is bounded by the number of transactions
running at once, not by the number of rows. Large polls are paged by seq within the
fixed pair (D, T), so a page boundary loses nothing either.

Applying is idempotent and by unit id: `upsert` means "read the unit now and index it,
or drop it from the index when it is gone", `delete` means drop. Reading the unit's
current row (not a copy in the change) makes order between transactions irrelevant to
the end state.

**Joining and pruning.** A new machine calls `join`: it records the current snapshot as
its position *before* it reads `units` to build its index, so a unit written while it
reads is either in what it read or in the feed after its position (applied twice,
harmlessly). Each machine reports its position (`report_position`, after its index has
committed durably); `prune` deletes change rows below every active machine's position
and records that horizon. A machine whose position is below the horizon (it was away
longer than `active_within`) gets `FeedGapError` and rebuilds from `units`.

Every function takes a psycopg connection first and runs its statements on it; the
caller owns transactions (`join` and `prune` open their own block). `Follower`
(`memoryd.fleet.follower`) drives these with its own connections, LISTEN and backoff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from memoryd.store.pg.feed_ddl import quote_schema

Op = Literal["upsert", "delete"]

DEFAULT_ACTIVE_WITHIN_S = 7 * 24 * 3600.0


class FeedGapError(Exception):
    """The changes after this position were pruned: rebuild from `units` (`join`)."""


def channel(schema: str) -> str:
    """The NOTIFY channel of a namespace made before issue 28: its schema's name, which
    any role of the database could LISTEN or NOTIFY on. Only a follower of a namespace
    without `change_channel` (not migrated yet) still listens there."""
    quote_schema(schema)
    return schema


def listen_channel(conn: Any, schema: str) -> str:
    """The namespace's NOTIFY channel: a random name kept in its own `change_channel`
    table, so only roles that may use the schema can learn it. LISTEN and NOTIFY take no
    privilege in PostgreSQL: a predictable name let any role of the database listen in
    on a namespace's commits or flood its followers (issue 28 item 6)."""
    s = quote_schema(schema)
    if conn.execute("SELECT to_regclass(%s) IS NULL", (f"{s}.change_channel",)).fetchone()[0]:
        return channel(schema)
    return conn.execute(f"SELECT name FROM {s}.change_channel").fetchone()[0]


@dataclass(frozen=True)
class Position:
    """Where a follower is: `done` is the snapshot whose transactions are all applied.
    While a large poll is paged, `target` is the snapshot being moved to and `after`
    the last seq applied from it."""

    done: str
    target: str | None = None
    after: int = 0

    def to_json(self) -> str:
        return json.dumps({"done": self.done, "target": self.target, "after": self.after})

    @classmethod
    def from_json(cls, text: str) -> Position:
        d = json.loads(text)
        if not isinstance(d, dict) or not isinstance(d.get("done"), str):
            raise ValueError(f"not a change feed position: {text[:200]!r}")
        target = d.get("target")
        return cls(d["done"], target if isinstance(target, str) else None,
                   int(d.get("after") or 0))

    @property
    def settled(self) -> Position:
        """The position to report for pruning: the last fully applied snapshot."""
        return self if self.target is None else Position(self.done)


@dataclass
class Batch:
    """Changes to apply, in seq order, then `position` to store with them. `more` says
    another page of the same poll is waiting (poll again without sleeping)."""

    changes: list[tuple[int, Op]]
    position: Position
    more: bool = False
    seqs: list[int] = field(default_factory=list)

    def latest(self) -> dict[int, Op]:
        """The last op per unit id (what applying them in order comes to)."""
        out: dict[int, Op] = {}
        for unit_id, op in self.changes:
            out[unit_id] = op
        return out


def current_snapshot(conn: Any) -> str:
    return conn.execute("SELECT pg_current_snapshot()::text").fetchone()[0]


def read_batch(conn: Any, schema: str, position: Position, limit: int = 2000) -> Batch:
    """The changes after `position`, at most `limit` of them, and the position to store
    once they are applied. Raises FeedGapError when they were pruned. One round trip:
    the horizon, the new snapshot (taken by the statement itself, so the rows it reads
    are exactly those visible in it) and the change rows come back together."""
    s = quote_schema(schema)
    done = position.done
    rows = conn.execute(
        "SELECT t.snap::text, h.pruned_below::text, c.seq, c.unit_id, c.op"
        " FROM (SELECT coalesce(%(target)s::pg_snapshot, pg_current_snapshot()) AS snap) t"
        f" LEFT JOIN {s}.change_horizon h ON true"
        " LEFT JOIN LATERAL ("
        f"   SELECT seq, unit_id, op FROM {s}.changes"
        "     WHERE xid >= pg_snapshot_xmin(%(done)s::pg_snapshot)"
        "       AND NOT pg_visible_in_snapshot(xid, %(done)s::pg_snapshot)"
        "       AND pg_visible_in_snapshot(xid, t.snap)"
        "       AND seq > %(after)s"
        "     ORDER BY seq LIMIT %(limit)s) c ON true"
        " ORDER BY c.seq",
        {"done": done, "target": position.target, "after": position.after,
         "limit": limit + 1},
    ).fetchall()
    target, pruned_below = rows[0][0], rows[0][1]
    if pruned_below is not None and _xid(pruned_below) > _xmin(done):
        raise FeedGapError(f"changes before xid {pruned_below} were pruned; this "
                           f"position ({done}) is older: rebuild from units")
    rows = [r[2:] for r in rows if r[2] is not None]
    more = len(rows) > limit
    rows = rows[:limit]
    if more:
        new = Position(done, target, rows[-1][0])
    else:
        new = Position(target)
    return Batch([(r[1], r[2]) for r in rows], new, more, [r[0] for r in rows])


def join(conn: Any, schema: str, machine: str) -> Position:
    """A new (or rebuilding) machine's starting position, registered so that pruning
    keeps every change after it. Take it BEFORE reading `units` to build the index;
    then follow from it (what the build already saw is applied again, harmlessly)."""
    s = quote_schema(schema)
    with conn.transaction():
        # serialized with prune: a snapshot taken after a prune committed is above its
        # horizon, and a prune after this commits sees this position
        conn.execute(f"LOCK TABLE {s}.change_positions IN SHARE ROW EXCLUSIVE MODE")
        snap = current_snapshot(conn)
        _upsert_position(conn, s, machine, snap)
    return Position(snap)


def report_position(conn: Any, schema: str, machine: str, position: Position) -> None:
    """Record how far `machine` has durably applied the feed (for pruning)."""
    _upsert_position(conn, quote_schema(schema), machine, position.settled.done)


def _upsert_position(conn: Any, s: str, machine: str, snap: str) -> None:
    conn.execute(
        f"INSERT INTO {s}.change_positions (machine, position, updated_at)"
        " VALUES (%s, %s::pg_snapshot, now())"
        " ON CONFLICT (machine) DO UPDATE"
        " SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at",
        (machine, snap))


def prune(conn: Any, schema: str, active_within_s: float = DEFAULT_ACTIVE_WITHIN_S) -> int:
    """Delete the change rows every machine active within `active_within_s` has applied;
    returns how many. A machine quiet for longer rebuilds when it comes back."""
    s = quote_schema(schema)
    with conn.transaction():
        conn.execute(f"LOCK TABLE {s}.change_positions IN SHARE ROW EXCLUSIVE MODE")
        bound = conn.execute(
            "SELECT least(pg_snapshot_xmin(pg_current_snapshot()),"
            f"             (SELECT min(pg_snapshot_xmin(position)) FROM {s}.change_positions"
            "               WHERE updated_at > now() - make_interval(secs => %s)))::text",
            (active_within_s,)).fetchone()[0]
        deleted = conn.execute(f"DELETE FROM {s}.changes WHERE xid < %s::xid8",
                               (bound,)).rowcount
        conn.execute(f"UPDATE {s}.change_horizon"
                     " SET pruned_below = greatest(pruned_below, %s::xid8)", (bound,))
    return deleted


def lag(conn: Any, schema: str, position: Position) -> int:
    """How many committed change rows this position has not applied yet (the index's
    lag behind the store, for status and /metrics)."""
    s = quote_schema(schema)
    return conn.execute(
        f"SELECT count(*) FROM {s}.changes"
        " WHERE xid >= pg_snapshot_xmin(%(done)s::pg_snapshot)"
        "   AND NOT pg_visible_in_snapshot(xid, %(done)s::pg_snapshot)"
        "   AND NOT (%(target)s::pg_snapshot IS NOT NULL"
        "            AND pg_visible_in_snapshot(xid, %(target)s::pg_snapshot)"
        "            AND seq <= %(after)s)",
        {"done": position.done, "target": position.target, "after": position.after},
    ).fetchone()[0]


def pending(conn: Any, schema: str, position: Position) -> bool:
    """Whether any committed change (as `conn`'s snapshot sees it) is not applied at
    this position: `lag(...) > 0` at the cost of one index probe (search asks it)."""
    s = quote_schema(schema)
    return conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM {s}.changes"
        " WHERE xid >= pg_snapshot_xmin(%(done)s::pg_snapshot)"
        "   AND NOT pg_visible_in_snapshot(xid, %(done)s::pg_snapshot)"
        "   AND NOT (%(target)s::pg_snapshot IS NOT NULL"
        "            AND pg_visible_in_snapshot(xid, %(target)s::pg_snapshot)"
        "            AND seq <= %(after)s))",
        {"done": position.done, "target": position.target, "after": position.after},
    ).fetchone()[0]


def positions(conn: Any, schema: str) -> list[dict[str, Any]]:
    """Every machine's reported position (for the operator's view)."""
    s = quote_schema(schema)
    rows = conn.execute(f"SELECT machine, position::text, updated_at"
                        f" FROM {s}.change_positions ORDER BY machine").fetchall()
    return [{"machine": m, "position": p, "updated_at": t} for m, p, t in rows]


def _xmin(snapshot: str) -> int:
    return int(snapshot.split(":", 1)[0])


def _xid(text: str) -> int:
    return int(text)
