"""The change feed's DDL: the tables, trigger functions and triggers by which every write
to `units` (and a session's searched attributes, and a unit's vector) leaves a `changes`
row and a NOTIFY.

The store's PostgreSQL migration installs it in every namespace
(`memoryd.store.pg.migrations.extra_ddl`), so it lives with the store, which imports
nothing of the fleet; the fleet reads the feed (`memoryd.fleet.changefeed`: positions,
batches, pruning) and its followers apply it to their indexes.
"""

from __future__ import annotations

import re

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$")


def quote_schema(schema: str) -> str:
    if not _SCHEMA_NAME.match(schema):
        raise ValueError(f"not a schema name memoryd makes: {schema!r}")
    return f'"{schema}"'


def _trigger_function(name: str, changes: str) -> str:
    """A statement trigger's function: `changes` (a SELECT of (unit id, op) rows over the
    transition tables) goes into `changes`, then one NOTIFY on the namespace's channel
    when it wrote anything. The three functions differ only in that SELECT."""
    return f"""CREATE OR REPLACE FUNCTION {{s}}{name}() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $memoryd$
DECLARE n bigint;
BEGIN
    INSERT INTO {{s}}changes (unit_id, op)
        {changes};
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN PERFORM pg_notify((SELECT name FROM {{s}}change_channel), ''); END IF;
    RETURN NULL;
END $memoryd$"""


_FUNCTIONS = {
    "units_inserted": "SELECT id, 'upsert' FROM new_units ORDER BY id",
    "units_updated": """SELECT id, 'upsert' FROM new_units
        UNION ALL
        SELECT o.id, 'delete' FROM old_units o   -- an id changed: the old one is gone
         WHERE NOT EXISTS (SELECT 1 FROM new_units n WHERE n.id = o.id)""",
    "units_deleted": "SELECT id, 'delete' FROM old_units ORDER BY id",
}

_STATEMENTS = [
    """CREATE TABLE IF NOT EXISTS {s}changes (
    seq bigserial PRIMARY KEY,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    unit_id bigint NOT NULL,
    op text NOT NULL CHECK (op IN ('upsert', 'delete'))
)""",
    """CREATE INDEX IF NOT EXISTS changes_xid ON {s}changes (xid)""",
    """-- each machine's applied position, for pruning; reported after the index commits
CREATE TABLE IF NOT EXISTS {s}change_positions (
    machine text PRIMARY KEY,
    position pg_snapshot NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)""",
    """-- change rows with xid below this are gone: a position below it must rebuild
CREATE TABLE IF NOT EXISTS {s}change_horizon (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    pruned_below xid8 NOT NULL
)""",
    """INSERT INTO {s}change_horizon (pruned_below) VALUES ('0') ON CONFLICT DO NOTHING""",
    """-- the NOTIFY channel: a random name only roles that may use this schema can read
-- (the functions read it at run time: their source in pg_proc is readable by anyone)
CREATE TABLE IF NOT EXISTS {s}change_channel (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    name text NOT NULL
)""",
    """INSERT INTO {s}change_channel (name)
    VALUES ('memoryd_' || replace(gen_random_uuid()::text, '-', '')) ON CONFLICT DO NOTHING""",
    *(_trigger_function(name, changes) for name, changes in _FUNCTIONS.items()),
    """DROP TRIGGER IF EXISTS units_changes_insert ON {s}units""",
    """CREATE TRIGGER units_changes_insert AFTER INSERT ON {s}units
    REFERENCING NEW TABLE AS new_units
    FOR EACH STATEMENT EXECUTE FUNCTION {s}units_inserted()""",
    """DROP TRIGGER IF EXISTS units_changes_update ON {s}units""",
    """CREATE TRIGGER units_changes_update AFTER UPDATE ON {s}units
    REFERENCING OLD TABLE AS old_units NEW TABLE AS new_units
    FOR EACH STATEMENT EXECUTE FUNCTION {s}units_updated()""",
    """DROP TRIGGER IF EXISTS units_changes_delete ON {s}units""",
    """CREATE TRIGGER units_changes_delete AFTER DELETE ON {s}units
    REFERENCING OLD TABLE AS old_units
    FOR EACH STATEMENT EXECUTE FUNCTION {s}units_deleted()""",
]


def ddl(schema: str) -> str:
    """The change feed's tables, functions and triggers for `schema`, which must already
    hold `units` (PK `id bigint`), as one script. Idempotent."""
    s = quote_schema(schema) + "."
    return ";\n".join(st.replace("{s}", s) for st in _STATEMENTS) + ";\n"


# Session attributes that search and context read (`memoryd.fleet.row_cache`) change
# without a unit sometimes (a summary's mark, a project): such a change goes into the
# feed as an `upsert` of the session's last unit, whose re-read (joined with its
# session) carries the new attributes to every machine's row cache, with the feed's
# never-skip guarantee and its NOTIFY. Any follower, of any version, re-indexes one
# unit for it, harmlessly; a session without units has nothing to search. Session
# updates that come with units (next_seq, last_ts) are not listed: the units' own
# changes re-read their session. A forgotten session's units are deleted, which the
# feed carries; the cache drops a session with its last unit.
_SESSION_COLUMNS = ("agent", "session_id", "project", "summary", "summary_upto",
                    "summary_by", "state")
SESSION_STATEMENTS = [
    """CREATE OR REPLACE FUNCTION {s}session_changed() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $memoryd$
DECLARE n bigint;
BEGIN
    INSERT INTO {s}changes (unit_id, op)
        SELECT id, 'upsert' FROM {s}units WHERE session_pk = NEW.id
         ORDER BY seq DESC LIMIT 1;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN PERFORM pg_notify((SELECT name FROM {s}change_channel), ''); END IF;
    RETURN NULL;
END $memoryd$""",
    """DROP TRIGGER IF EXISTS sessions_changes_update ON {s}sessions""",
    f"""CREATE TRIGGER sessions_changes_update AFTER UPDATE ON {{s}}sessions FOR EACH ROW
    WHEN (({", ".join("OLD." + c for c in _SESSION_COLUMNS)})
          IS DISTINCT FROM ({", ".join("NEW." + c for c in _SESSION_COLUMNS)}))
    EXECUTE FUNCTION {{s}}session_changed()""",
]

# A unit's vector (`unit_vectors`, written by the machine that embeds the unit,
# `memoryd.embed`) reaches the others the same way: an `upsert` of its unit, whose re-read
# carries the vector into every machine's row cache (`memoryd.fleet.row_cache`). A vector
# deleted with its unit (forget, retention) adds nothing: the unit's own delete is in the
# feed. A vector dropped alone (`memoryctl reindex`, or its unit's text changed: the
# twin of SQLite's `unit_vectors_stale`, m017) re-reads its unit, now without one.
_VECTOR_FUNCTIONS = {
    "vectors_written": "SELECT unit_id, 'upsert' FROM new_vectors ORDER BY unit_id",
    "vectors_deleted": """SELECT o.unit_id, 'upsert' FROM old_vectors o
         WHERE EXISTS (SELECT 1 FROM {s}units u WHERE u.id = o.unit_id)
         ORDER BY o.unit_id""",
}
VECTOR_STATEMENTS = [
    *(_trigger_function(name, changes) for name, changes in _VECTOR_FUNCTIONS.items()),
    """DROP TRIGGER IF EXISTS vectors_changes_insert ON {s}unit_vectors""",
    """CREATE TRIGGER vectors_changes_insert AFTER INSERT ON {s}unit_vectors
    REFERENCING NEW TABLE AS new_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION {s}vectors_written()""",
    """DROP TRIGGER IF EXISTS vectors_changes_update ON {s}unit_vectors""",
    """CREATE TRIGGER vectors_changes_update AFTER UPDATE ON {s}unit_vectors
    REFERENCING NEW TABLE AS new_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION {s}vectors_written()""",
    """DROP TRIGGER IF EXISTS vectors_changes_delete ON {s}unit_vectors""",
    """CREATE TRIGGER vectors_changes_delete AFTER DELETE ON {s}unit_vectors
    REFERENCING OLD TABLE AS old_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION {s}vectors_deleted()""",
    # a stale vector would rank the unit by words it no longer holds (a merged part, an
    # upgraded one-liner): it goes, and the embedding machine's worker embeds it again
    """CREATE OR REPLACE FUNCTION {s}vector_stale() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $memoryd$
BEGIN
    DELETE FROM {s}unit_vectors WHERE unit_id = NEW.id;
    RETURN NULL;
END $memoryd$""",
    """DROP TRIGGER IF EXISTS unit_vectors_stale ON {s}units""",
    """CREATE TRIGGER unit_vectors_stale AFTER UPDATE OF content, one_liner ON {s}units
    FOR EACH ROW WHEN (NEW.content IS DISTINCT FROM OLD.content
                       OR NEW.one_liner IS DISTINCT FROM OLD.one_liner)
    EXECUTE FUNCTION {s}vector_stale()""",
]

# The same statements unqualified, for the store's PostgreSQL migration
# (`memoryd.store.pg.migrations.extra_ddl`), which runs them one by one with the
# search_path set to the namespace's schema. The trigger functions keep that search_path
# (SET search_path FROM CURRENT), whoever inserts the units later. The store's schema
# has `sessions` and `unit_vectors`, so its feed carries their changes too (`ddl` alone does
# not: a bare feed over `units` needs neither table).
DDL: list[str] = [st.replace("{s}", "")
                  for st in _STATEMENTS + SESSION_STATEMENTS + VECTOR_STATEMENTS]
