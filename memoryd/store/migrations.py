"""Numbered schema migrations. Append new ones; never rename or edit a released one."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]


def _script(conn: sqlite3.Connection, sql: str) -> None:
    # executescript() would COMMIT the migration's transaction first; run statements
    # one by one so a migration is all or nothing.
    for stmt in statements(sql):
        conn.execute(stmt)


def statements(sql: str) -> list[str]:
    """`sql` cut into single statements where SQLite itself says one is complete, so a `;`
    inside a string literal, a comment or a trigger's BEGIN ... END stays where it is.
    An unterminated tail is passed on as is, for SQLite to name what is wrong with it."""
    out, buf = [], ""
    for piece in sql.split(";"):
        buf += piece
        if sqlite3.complete_statement(buf + ";"):
            out.append(buf + ";")
            buf = ""
        else:
            buf += ";"
    out = [stmt for stmt in out if stmt.strip(" \t\r\n;")]
    if buf.strip(" \t\r\n;"):
        out.append(buf.removesuffix(";"))
    return out


def m001_initial(conn: sqlite3.Connection) -> None:
    _script(
        conn,
        """
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            agent TEXT NOT NULL,
            session_id TEXT NOT NULL,
            project TEXT,
            title TEXT,
            first_ts REAL,
            last_ts REAL,
            units INTEGER NOT NULL DEFAULT 0,
            user_units INTEGER NOT NULL DEFAULT 0,
            next_seq INTEGER NOT NULL DEFAULT 1,
            turns INTEGER NOT NULL DEFAULT 0,
            summary TEXT,
            summary_upto INTEGER NOT NULL DEFAULT 0,
            summary_by TEXT,
            summary_updated REAL,
            state TEXT NOT NULL DEFAULT 'active',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (agent, session_id)
        );
        CREATE INDEX sessions_last_ts ON sessions (last_ts);
        CREATE INDEX sessions_project ON sessions (project);

        -- One row per file seen under a source root. agent IS NULL: not a transcript
        -- (kept so it is not re-examined until it changes).
        CREATE TABLE files (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            root TEXT NOT NULL,
            agent TEXT,
            offset INTEGER NOT NULL DEFAULT 0,
            size INTEGER NOT NULL DEFAULT 0,
            inode INTEGER,
            mtime_ns INTEGER,
            head_hash TEXT,
            tail_hash TEXT,
            line_no INTEGER NOT NULL DEFAULT 0,
            bad_lines INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT '{}',
            last_error TEXT,
            gone INTEGER NOT NULL DEFAULT 0,
            updated_at REAL
        );

        CREATE TABLE units (
            id INTEGER PRIMARY KEY,
            session_pk INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            record_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_name TEXT,
            tool_args TEXT,
            related_id TEXT,
            ts REAL,
            file_id INTEGER REFERENCES files (id) ON DELETE SET NULL,
            offset INTEGER,
            parts TEXT,
            one_liner TEXT,
            one_liner_by TEXT,
            chars INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            UNIQUE (session_pk, record_id)
        );
        CREATE INDEX units_session_seq ON units (session_pk, seq);
        CREATE INDEX units_ts ON units (ts);

        -- rowid = units.id, body = the unit text with CJK runs as bigrams.
        CREATE VIRTUAL TABLE units_fts USING fts5 (
            body, one_liner, tokenize = 'porter unicode61 remove_diacritics 2'
        );
        """
    )


def m002_jobs_and_summaries(conn: sqlite3.Connection) -> None:
    """The persistent job queue, LLM usage (the daily budget survives restarts), the
    history of session summaries, and what made each summary and one-liner."""
    _script(
        conn,
        """
        CREATE TABLE jobs (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            target TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'done', 'failed')),
            reason TEXT,
            priority INTEGER NOT NULL DEFAULT 0,
            params TEXT NOT NULL DEFAULT '{}',
            attempts INTEGER NOT NULL DEFAULT 0,
            next_run_at REAL NOT NULL,
            last_error TEXT,
            result TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL
        );
        -- at most one pending job per (kind, target): enqueueing again merges into it
        CREATE UNIQUE INDEX jobs_one_pending ON jobs (kind, target) WHERE state = 'pending';
        CREATE INDEX jobs_state_due ON jobs (state, next_run_at);

        CREATE TABLE llm_usage (
            id INTEGER PRIMARY KEY,
            ts REAL NOT NULL,
            day TEXT NOT NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL,
            target TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            outcome TEXT NOT NULL,
            error TEXT
        );
        CREATE INDEX llm_usage_day ON llm_usage (day);

        CREATE TABLE summaries (
            id INTEGER PRIMARY KEY,
            session_pk INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            from_seq INTEGER NOT NULL,
            upto_seq INTEGER NOT NULL,
            summary TEXT NOT NULL,
            made_by TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            reason TEXT,
            created_at REAL NOT NULL
        );
        CREATE INDEX summaries_session ON summaries (session_pk, upto_seq);
        CREATE INDEX summaries_created ON summaries (created_at);

        ALTER TABLE sessions ADD COLUMN summary_prompt TEXT;
        ALTER TABLE sessions ADD COLUMN summary_user_mark INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE sessions ADD COLUMN one_liner_upto INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE units ADD COLUMN one_liner_prompt TEXT;
        CREATE INDEX units_extractive_one_liner ON units (session_pk)
            WHERE one_liner_by = 'extractive';
        CREATE INDEX sessions_summary_by ON sessions (summary_by)
        """,
    )


def m003_units_id_session(conn: sqlite3.Connection) -> None:
    """A narrow index from unit id to its session and seq. A filtered search visits one
    unit per full-text match; through this index it reads a few bytes instead of the
    unit's whole row (content is stored inline), which halves a project-scoped context
    request and keeps it fast when the page cache is cold."""
    conn.execute("CREATE INDEX units_id_session ON units (id, session_pk, seq)")


def m004_memory_provenance(conn: sqlite3.Connection) -> None:
    """Where each MEMORY.md item came from (sessions, units, first seen, last confirmed,
    what made it), and which sessions' units live in archive files. Links to sessions
    cascade, so forgetting a session drops its share of the provenance."""
    _script(
        conn,
        """
        CREATE TABLE memory_items (
            id INTEGER PRIMARY KEY,
            item_key TEXT NOT NULL UNIQUE,
            item TEXT NOT NULL,
            source TEXT NOT NULL,
            scope TEXT,
            importance INTEGER NOT NULL DEFAULT 0,
            reasons TEXT NOT NULL DEFAULT '[]',
            first_seen TEXT NOT NULL,
            last_confirmed TEXT NOT NULL,
            confirmations INTEGER NOT NULL DEFAULT 0,
            made_by TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'active'
                CHECK (state IN ('active', 'superseded', 'demoted')),
            superseded_by TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE memory_item_sessions (
            item_id INTEGER NOT NULL REFERENCES memory_items (id) ON DELETE CASCADE,
            session_pk INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            unit_ids TEXT NOT NULL DEFAULT '[]',
            day TEXT NOT NULL,
            PRIMARY KEY (item_id, session_pk)
        );
        CREATE INDEX memory_item_sessions_session ON memory_item_sessions (session_pk);

        CREATE TABLE archived_sessions (
            session_pk INTEGER PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
            month TEXT NOT NULL,
            units INTEGER NOT NULL,
            archived_at REAL NOT NULL
        )
        """,
    )


def m006_served_context_and_exclusions(conn: sqlite3.Connection) -> None:
    """What context was served to whom (`memoryctl served`, GET /v1/context/log), and
    the paths and projects the user excluded from memory (`memoryctl exclude`)."""
    _script(
        conn,
        """
        CREATE TABLE served_context (
            id INTEGER PRIMARY KEY,
            ts REAL NOT NULL,
            day TEXT NOT NULL,
            via TEXT NOT NULL,
            agent TEXT,
            session_id TEXT,
            query TEXT,
            items TEXT NOT NULL DEFAULT '[]',
            tokens INTEGER NOT NULL,
            budget_tokens INTEGER NOT NULL
        );
        CREATE INDEX served_context_ts ON served_context (ts);
        CREATE INDEX served_context_session ON served_context (session_id, ts);

        CREATE TABLE exclusions (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('path', 'project')),
            value TEXT NOT NULL,
            patterns TEXT NOT NULL DEFAULT '[]',
            created_at REAL NOT NULL,
            UNIQUE (kind, value)
        )
        """,
    )


def m005_tantivy_index(conn: sqlite3.Connection) -> None:
    """Search moves to the tantivy index (`memoryd.index`), derived from this database:
    the FTS5 table and its copy of every unit's text go, and with them m003's unit ->
    session index, which only full-text joins read. `index_pending` holds the units
    changed after they were indexed (merged pieces, one-liners, forgotten sessions),
    written in the change's own transaction and cleared once the index has them."""
    _script(
        conn,
        """
        DROP TABLE IF EXISTS units_fts;
        DROP INDEX IF EXISTS units_id_session;
        -- AUTOINCREMENT: an id is never handed out twice, or a change queued after the
        -- queue was emptied could sit at or below what the index last cleared
        CREATE TABLE index_pending (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            unit_id INTEGER NOT NULL
        );
        -- SQLite hands out max(id) + 1, so once the newest units are deleted (forget,
        -- archival) their ids come back for new units, at or below what the index has
        -- already read by id: such a unit is queued as a change instead.
        CREATE TABLE units_deleted_hwm (v INTEGER NOT NULL);
        INSERT INTO units_deleted_hwm (v) VALUES (0);
        CREATE TRIGGER units_deleted_hwm_up AFTER DELETE ON units
        WHEN OLD.id > (SELECT v FROM units_deleted_hwm)
        BEGIN
            UPDATE units_deleted_hwm SET v = OLD.id;
        END;
        CREATE TRIGGER units_reused_id AFTER INSERT ON units
        WHEN NEW.id <= (SELECT v FROM units_deleted_hwm)
        BEGIN
            INSERT INTO index_pending (unit_id) VALUES (NEW.id);
        END
        """,
    )


def m007_fleet_machines(conn: sqlite3.Connection) -> None:
    """Fleet mode (issue 14): a file's cursor and a session belong to a machine, so two
    machines' `chat.jsonl` are two files and two sessions; jobs carry a lease (who runs
    them, until when); `fleet_once` holds the fleet-wide claims of work done once (a
    day's scheduled consolidation). SQLite is one machine: `machine` stays '' there, and
    the old unique keys stay true."""
    _script(
        conn,
        """
        ALTER TABLE files ADD COLUMN machine TEXT NOT NULL DEFAULT '';
        CREATE UNIQUE INDEX files_machine_path ON files (machine, path);
        ALTER TABLE sessions ADD COLUMN machine TEXT NOT NULL DEFAULT '';
        CREATE UNIQUE INDEX sessions_identity ON sessions (agent, machine, session_id);
        ALTER TABLE jobs ADD COLUMN claimed_by TEXT;
        ALTER TABLE jobs ADD COLUMN lease_until REAL;
        CREATE TABLE fleet_once (
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            machine TEXT NOT NULL,
            claimed_at REAL NOT NULL,
            PRIMARY KEY (kind, key)
        )
        """,
    )


def m008_memory_docs(conn: sqlite3.Connection) -> None:
    """Fleet mode's memory folder (issue 14 item 6): `memory_docs` holds the namespace's
    MEMORY.md, HISTORY.md and daily notes, each with a version every machine's daemon
    compares to write its own files (memoryd.memory.fleet_sync); a claimed firing of
    fleet-wide work is a lease (`lease_until`), finished when `done_at` is set, so a dead
    claimer's firing is taken over. An exclusion is a machine's (its paths are that
    machine's files). SQLite is one machine: `memory_docs` stays empty there, `machine`
    stays '' and the old unique key stays true."""
    _script(
        conn,
        """
        CREATE TABLE memory_docs (
            name TEXT PRIMARY KEY,
            body TEXT,
            version INTEGER NOT NULL,
            machine TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        ALTER TABLE fleet_once ADD COLUMN lease_until REAL;
        ALTER TABLE fleet_once ADD COLUMN done_at REAL;
        ALTER TABLE exclusions ADD COLUMN machine TEXT NOT NULL DEFAULT '';
        CREATE UNIQUE INDEX exclusions_machine ON exclusions (machine, kind, value)
        """,
    )


def m009_counters(conn: sqlite3.Connection) -> None:
    """Counts status shows (units, sessions, summaries by maker, extractive one-liners,
    files, bad lines, jobs by state), kept by triggers in the transaction of each change
    and counted once here from the tables as they are (`memoryd.store.counters`)."""
    from memoryd.store.counters import sqlite_ddl

    for stmt in sqlite_ddl():
        conn.execute(stmt)


def m010_memory_subject(conn: sqlite3.Connection) -> None:
    """What a MEMORY.md item is about ("JavaScript package manager"): a later item about
    the same subject replaces it (consolidate.subjects)."""
    conn.execute("ALTER TABLE memory_items ADD COLUMN subject TEXT")


def m011_consolidation_runs(conn: sqlite3.Connection) -> None:
    """Each consolidation run of a day, with what it did (status shows the recent days and
    warns on silence or failure), and which days of history are consolidated: a day is
    done once an ok run saw as many sessions as it has now. Days whose daily-note lines
    carry provenance were consolidated before this table: they count as done with the
    sessions those lines name (a day with more is consolidated again, which is safe)."""
    _script(
        conn,
        """
        CREATE TABLE consolidation_runs (
            id INTEGER PRIMARY KEY,
            day TEXT NOT NULL,
            at REAL NOT NULL,
            trigger TEXT NOT NULL,
            ok INTEGER NOT NULL,
            error TEXT,
            sessions INTEGER NOT NULL DEFAULT 0,
            added INTEGER NOT NULL DEFAULT 0,
            confirmed INTEGER NOT NULL DEFAULT 0,
            superseded INTEGER NOT NULL DEFAULT 0,
            demoted INTEGER NOT NULL DEFAULT 0,
            dropped INTEGER NOT NULL DEFAULT 0,
            daily_added INTEGER NOT NULL DEFAULT 0,
            seconds REAL
        );
        CREATE INDEX consolidation_runs_day ON consolidation_runs (day, at)
        """,
    )
    conn.execute(SEED_RUNS, (time.time(),))


SEED_RUNS = (
    "INSERT INTO consolidation_runs (day, at, trigger, ok, sessions) "
    "SELECT s.day, ?, 'before', 1, count(DISTINCT s.session_pk) FROM memory_item_sessions s "
    "JOIN memory_items i ON i.id = s.item_id WHERE i.made_by = 'daily-note' GROUP BY s.day")


def m015_index_pending_derived(conn: sqlite3.Connection) -> None:
    """A change queued for the index is marked `derived` when it only adds what memoryd
    made from a unit (its one-liner): the unit was searchable before and still is, so the
    index is caught up (`status.caught_up`) while one waits. Without the mark a one-liner
    job flipped `caught_up` back to false at rest, with nothing new stored (issue 28)."""
    conn.execute("ALTER TABLE index_pending ADD COLUMN derived INTEGER NOT NULL DEFAULT 0")


def m016_unit_quarters(conn: sqlite3.Connection) -> None:
    """Units per session per quarter hour, kept by triggers (`memoryd.store.unit_quarters`):
    the timeline sums them into local days instead of counting every unit of its week
    (issue 30). Filled here from the units there are."""
    from memoryd.store.unit_quarters import sqlite_ddl

    for stmt in sqlite_ddl():
        conn.execute(stmt)


def m017_unit_vectors(conn: sqlite3.Connection) -> None:
    """Embeddings of units (`memoryd.embed`, `memoryd.store.vectors`): 384 int8 a unit,
    gone with their unit (forget, retention, exclude: the foreign key), and with their
    text when it changes (the trigger: a stale vector would rank by words the unit no
    longer holds; the worker embeds it again). Empty without the `memoryd[embed]` extra."""
    _script(conn, """
        CREATE TABLE unit_vectors (
            unit_id INTEGER PRIMARY KEY REFERENCES units (id) ON DELETE CASCADE,
            vec BLOB NOT NULL
        );
        CREATE TRIGGER unit_vectors_stale AFTER UPDATE OF content, one_liner ON units
        WHEN NEW.content IS NOT OLD.content OR NEW.one_liner IS NOT OLD.one_liner
        BEGIN
            DELETE FROM unit_vectors WHERE unit_id = NEW.id;
        END
        """)


MIGRATIONS: list[Migration] = [m001_initial, m002_jobs_and_summaries, m003_units_id_session,
                               m004_memory_provenance, m005_tantivy_index,
                               m006_served_context_and_exclusions,
                               m007_fleet_machines, m008_memory_docs,
                               m009_counters, m010_memory_subject,
                               m011_consolidation_runs, m015_index_pending_derived,
                               m016_unit_quarters, m017_unit_vectors]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply pending migrations, each in its own transaction; returns their names."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    done = {r[0] for r in conn.execute("SELECT name FROM _migrations")}
    newer = sorted(done - {m.__name__ for m in MIGRATIONS})
    if newer:
        from memoryd.errors import StoreError

        raise StoreError(f"the database was migrated by a newer memoryd (migrations "
                         f"{', '.join(newer)} are unknown to this one): upgrade memoryd; "
                         "it will not write to a newer schema")
    applied = []
    for m in MIGRATIONS:
        if m.__name__ in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            m(conn)
            conn.execute("INSERT INTO _migrations VALUES (?, ?)", (m.__name__, time.time()))
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        applied.append(m.__name__)
    return applied
