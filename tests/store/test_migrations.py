"""Migrations are cut into statements where SQLite says one ends, not at every `;`."""

import sqlite3

import pytest

from memoryd.store import migrations
from memoryd.store.db import connect

TRICKY = """
    CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL DEFAULT 'a; b');
    CREATE TABLE notes_log (note_id INTEGER, what TEXT);
    -- a comment with a ; in it
    CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
        INSERT INTO notes_log VALUES (new.id, 'added; ' || new.body);
        UPDATE notes SET body = body || ';' WHERE id = new.id;
    END;
    INSERT INTO notes (body) VALUES ('first; "second"; ''third''')
"""


def m999_tricky(conn: sqlite3.Connection) -> None:
    migrations._script(conn, TRICKY)


def test_a_migration_with_a_trigger_and_semicolons_in_literals(tmp_path, monkeypatch):
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_tricky])
    conn = connect(tmp_path / "m.db")
    assert migrations.migrate(conn)[-1] == "m999_tricky"
    assert [r[0] for r in conn.execute("SELECT body FROM notes")] == ["first; \"second\"; 'third';"]
    assert [r[0] for r in conn.execute("SELECT what FROM notes_log")] == [
        "added; first; \"second\"; 'third'"]
    conn.execute("INSERT INTO notes DEFAULT VALUES")
    assert conn.execute("SELECT body FROM notes WHERE id = 2").fetchone()[0] == "a; b;"


def test_statements_keeps_each_one_whole():
    parts = migrations.statements(TRICKY)
    assert len(parts) == 4  # the comment travels with the trigger after it
    assert all(sqlite3.complete_statement(p) for p in parts)
    assert "CREATE TRIGGER" in parts[2] and parts[2].rstrip().endswith("END;")


def test_a_failing_statement_rolls_the_whole_migration_back(tmp_path, monkeypatch):
    def m999_broken(conn: sqlite3.Connection) -> None:
        migrations._script(conn, "CREATE TABLE t (x TEXT DEFAULT ';'); INSERT INTO nope VALUES (1)")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, m999_broken])
    conn = connect(tmp_path / "m.db")
    with pytest.raises(sqlite3.OperationalError, match="nope"):
        migrations.migrate(conn)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "t" not in tables and "sessions" in tables
