"""`memoryctl store migrate` against a real PostgreSQL server and real SQLite files: the
whole history arrives with its references rewritten, a second run copies nothing, a run
killed with SIGKILL resumes and completes with nothing doubled, the way back to SQLite
returns the same history, and the password is printed nowhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memoryd.cli.commands import main as memoryctl
from memoryd.store.pg import conn as pg
from memoryd.store.db import connect
from memoryd.store_target import StoreTarget
from tests.fleet.history import make_history


def pg_rows(url: str, sql: str, params: tuple = ()) -> list:
    conn = pg.connect(StoreTarget(url=url))
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def sqlite_rows(db: Path, sql: str, params: tuple = ()) -> list:
    conn = connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def history_of(rows_fn, where) -> dict:
    """What a history holds, free of ids: comparable between stores."""
    return {
        "units": sorted(rows_fn(where, "SELECT s.session_id, u.record_id, u.content, u.seq "
                                       "FROM units u JOIN sessions s ON s.id = u.session_pk")),
        "sessions": sorted(rows_fn(where, "SELECT session_id, title, summary FROM sessions")),
        "summaries": sorted(rows_fn(where, "SELECT s.session_id, m.summary FROM summaries m "
                                           "JOIN sessions s ON s.id = m.session_pk")),
        "provenance": sorted(rows_fn(where, "SELECT i.item, s.session_id, p.unit_ids FROM "
                                            "memory_item_sessions p JOIN memory_items i ON "
                                            "i.id = p.item_id JOIN sessions s ON "
                                            "s.id = p.session_pk")),
        "archived": sorted(rows_fn(where, "SELECT s.session_id, a.month FROM archived_sessions"
                                          " a JOIN sessions s ON s.id = a.session_pk")),
        "jobs": sorted(rows_fn(where, "SELECT j.state, s.session_id FROM jobs j LEFT JOIN "
                                      "sessions s ON j.target = 'session:' || s.id "
                                      "WHERE j.state IN ('pending', 'failed')")),
        "served": rows_fn(where, "SELECT query, tokens FROM served_context"),
        "exclusions": rows_fn(where, "SELECT kind, value FROM exclusions"),
        "llm_usage": rows_fn(where, "SELECT model, purpose FROM llm_usage"),
        "consolidation_runs": rows_fn(where, "SELECT day, trigger, ok, sessions, added FROM "
                                             "consolidation_runs WHERE trigger <> 'before'"),
        "vectors": sorted(rows_fn(where, "SELECT s.session_id, u.record_id, v.vec FROM "
                                         "unit_vectors v JOIN units u ON u.id = v.unit_id "
                                         "JOIN sessions s ON s.id = u.session_pk")),
    }


def provenance_units(rows_fn, where) -> list:
    """The (session, record) each provenance unit id points at, in this store's ids."""
    out = []
    for (ids,) in rows_fn(where, "SELECT unit_ids FROM memory_item_sessions"):
        for uid in json.loads(ids):
            out += rows_fn(where, "SELECT s.session_id, u.record_id FROM units u JOIN "
                                  "sessions s ON s.id = u.session_pk WHERE u.id = ?", (uid,))
    return sorted(out)


def pg_fn(url, sql, params=()):
    return pg_rows(url, sql, params)


def sqlite_fn(db, sql, params=()):
    return sqlite_rows(db, sql, params)


def migrate(capsys, home: Path, *args: str) -> tuple[int, str]:
    rc = memoryctl(["--home", str(home), "store", "migrate", *args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_migrate_copies_the_history_with_its_references_and_twice_copies_nothing(
        tmp_path, pg_url, flag_url, capsys):
    home = tmp_path / "home"
    db = home / "data" / "memoryd.db"
    make_history(db, sessions=4, units_per_session=30)
    password = urlsplit(pg_url).password
    assert password

    rc, out = migrate(capsys, home, "--to", flag_url)
    assert rc == 0, out
    assert "done in" in out and "120 units" in out
    assert password not in out
    want = history_of(sqlite_fn, db)
    assert want["jobs"] == [("failed", None), ("pending", "sess-1")]  # done jobs are not kept
    assert want["consolidation_runs"] == [("2026-11-01", "history", 1, 2, 1)]
    assert len(want["vectors"]) == 12  # a moved history is not embedded again
    assert history_of(pg_fn, pg_url) == {**want, "provenance": [
        (i, s, json.dumps([p for (p,) in pg_rows(pg_url, "SELECT dst_id FROM _migrate_map "
                                                         "WHERE tbl = 'units' AND src_id IN "
                                                         f"({','.join(map(str, json.loads(u)))})"
                                                         " ORDER BY dst_id")]))
        for i, s, u in want["provenance"]]}
    assert provenance_units(pg_fn, pg_url) == provenance_units(sqlite_fn, db) == [
        ("sess-0", "r0"), ("sess-0", "r1")]

    rc, out = migrate(capsys, home, "--to", flag_url)
    assert rc == 0, out
    assert "0 rows copied (nothing new)" in out
    assert pg_rows(pg_url, "SELECT count(*) FROM units") == [(120,)]
    assert pg_rows(pg_url, "SELECT count(*) FROM sessions") == [(4,)]
    assert pg_rows(pg_url, "SELECT count(*) FROM jobs") == [(2,)]


def test_a_killed_migrate_resumes_and_completes_with_nothing_doubled(tmp_path, pg_url,
                                                                   flag_url):
    home = tmp_path / "home"
    db = home / "data" / "memoryd.db"
    make_history(db, sessions=10, units_per_session=1000)
    memory_folder(home)
    cmd = [sys.executable, "-m", "memoryd.move", "--home", str(home), "--to", flag_url,
           "--batch", "100"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        e = json.loads(line)
        if e.get("table") == "units" and e["done"] >= 1000:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    partial = pg_rows(pg_url, "SELECT count(*) FROM units")[0][0]
    assert 1000 <= partial < 10000

    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["event"] == "done"
    assert last["copied"]["units"] == 10000 - partial
    assert "sessions" not in last["copied"]  # all ten were copied before the kill
    assert pg_rows(pg_url, "SELECT count(*), count(DISTINCT (session_pk, record_id)) "
                           "FROM units") == [(10000, 10000)]
    assert history_of(pg_fn, pg_url)["units"] == history_of(sqlite_fn, db)["units"]
    assert len(history_of(pg_fn, pg_url)["vectors"]) == 30
    assert history_of(pg_fn, pg_url)["vectors"] == history_of(sqlite_fn, db)["vectors"]
    assert docs(pg_url) == {"MEMORY.md": (MEMORY, 1), "2026-10-05.md": (NOTE, 1),
                            "HISTORY.md": (HISTORY, 1)}  # the memory folder, once


def test_the_way_back_to_sqlite_returns_the_same_history(tmp_path, pg_url, flag_url,
                                                         capsys):
    home = tmp_path / "home"
    db = home / "data" / "memoryd.db"
    make_history(db, sessions=3, units_per_session=20)
    assert migrate(capsys, home, "--to", flag_url, "--machine", "laptop")[0] == 0
    # the one machine's rows become this machine's: its daemon must not read its
    # transcripts again as another machine's (every unit would be stored twice)
    for table in ("sessions", "files", "exclusions"):
        assert sqlite_rows(db, f"SELECT DISTINCT machine FROM {table}") == [("",)]
        assert pg_rows(pg_url, f"SELECT DISTINCT machine FROM {table}") == [("laptop",)]

    back = tmp_path / "back"
    rc, out = migrate(capsys, back, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0, out
    assert urlsplit(pg_url).password not in out
    returned = back / "data" / "memoryd.db"
    for table in ("sessions", "files", "exclusions"):
        assert sqlite_rows(returned, f"SELECT DISTINCT machine FROM {table}") == [("",)]
    assert history_of(sqlite_fn, returned) == history_of(sqlite_fn, db)
    assert provenance_units(sqlite_fn, returned) == [("sess-0", "r0"), ("sess-0", "r1")]
    rc, out = migrate(capsys, back, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0 and "0 rows copied" in out


MEMORY = ("# MEMORY\n\n2026-10-05|user|commit messages in Conventional Commits\n"
          "2026-10-06|user|周五不部署\n")
NOTE = "# 2026-10-05\n\n## Topics\n- the ISBN scanner (generic · shelfie)\n"
HISTORY = "# HISTORY\n\n- 2026-10-01 demoted: tabs over spaces (unconfirmed)\n"


def memory_folder(home: Path) -> Path:
    mdir = home / "data" / "memory"
    mdir.mkdir(parents=True, exist_ok=True)
    for name, text in (("MEMORY.md", MEMORY), ("2026-10-05.md", NOTE),
                       ("HISTORY.md", HISTORY)):
        (mdir / name).write_text(text, encoding="utf-8")
    return mdir


def docs(url: str) -> dict[str, tuple[str, int]]:
    return {n: (b, v) for n, b, v in pg_rows(url, "SELECT name, body, version FROM "
                                                  "memory_docs")}


def test_migrate_moves_the_memory_folder_both_ways_and_twice_changes_nothing(
        tmp_path, pg_url, flag_url, capsys):
    home = tmp_path / "home"
    make_history(home / "data" / "memoryd.db", sessions=2, units_per_session=5)
    memory_folder(home)
    want = {"MEMORY.md": MEMORY, "2026-10-05.md": NOTE, "HISTORY.md": HISTORY}
    rc, out = migrate(capsys, home, "--to", flag_url, "--machine", "laptop")
    assert rc == 0 and "3 memory_docs" in out, out
    assert docs(pg_url) == {n: (t, 1) for n, t in want.items()}
    # this machine agrees with the store on each: its first fleet pass moves nothing
    bases = json.loads((home / "state" / "fleet-memory.json").read_text())
    assert bases == {n: {"text": t, "version": 1} for n, t in want.items()}
    rc, out = migrate(capsys, home, "--to", flag_url, "--machine", "laptop")
    assert rc == 0 and "0 rows copied" in out and docs(pg_url) == {
        n: (t, 1) for n, t in want.items()}

    # the way back: a new home gets the files; an edit there and another machine's
    # change in the store meanwhile are merged by a second run, the edit kept
    back = tmp_path / "back"
    rc, out = migrate(capsys, back, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0 and "3 memory_docs" in out, out
    mdir = back / "data" / "memory"
    assert {p.name: p.read_text(encoding="utf-8") for p in mdir.glob("*.md")} == want
    (mdir / "MEMORY.md").write_text(MEMORY + "2026-10-07|me|ship on Thursdays\n",
                                    encoding="utf-8")
    conn = pg.connect(StoreTarget(url=pg_url))
    try:
        conn.execute("UPDATE memory_docs SET body = ?, version = 2 WHERE name = 'MEMORY.md'",
                     (MEMORY + "2026-10-08|server|cache covers for a day\n",))
        conn.commit()
    finally:
        conn.close()
    rc, out = migrate(capsys, back, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0 and "1 memory_docs" in out, out
    merged = (mdir / "MEMORY.md").read_text(encoding="utf-8")
    assert "ship on Thursdays" in merged and "cache covers for a day" in merged
    assert merged.count("周五不部署") == 1
    rc, out = migrate(capsys, back, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0 and "0 rows copied" in out
    assert (mdir / "MEMORY.md").read_text(encoding="utf-8") == merged


def test_bad_requests_say_what_is_wrong_and_never_print_the_password(
        tmp_path, pg_url, flag_url, capsys, monkeypatch):
    home = tmp_path / "empty"
    rc, out = migrate(capsys, home, "--to", flag_url)
    assert rc == 1 and "no history to copy" in out
    rc, out = migrate(capsys, home, "--to", "sqlite")
    assert rc == 1 and "--to sqlite copies from PostgreSQL" in out
    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    make_history(home / "data" / "memoryd.db", 1, 1)
    rc, out = migrate(capsys, home, "--to", flag_url)
    assert rc == 1 and "cannot connect" in out
    assert "not-the-password" not in out


def test_a_password_on_the_command_line_is_refused_before_anything_runs(tmp_path, pg_url,
                                                                       capsys):
    """Issue 28 item 5, for migrate too: argv is readable by every local user
    (/proc/PID/cmdline), so a URL carrying a password is refused, in memoryctl (exit 2,
    before the copy starts) and in the copy's own entry; neither quotes it."""
    home = tmp_path / "home"
    make_history(home / "data" / "memoryd.db", 1, 1)
    password = urlsplit(pg_url).password
    for args in (["--to", pg_url], ["--to", "sqlite", "--from", pg_url]):
        rc, out = migrate(capsys, home, *args)
        assert rc == 2, out
        assert "carries a password" in out and "PGPASSWORD" in out
        assert password not in out
        done = subprocess.run([sys.executable, "-m", "memoryd.move", "--home", str(home),
                               *args], capture_output=True, text=True)
        assert done.returncode == 1 and "carries a password" in done.stdout
        assert password not in done.stdout + done.stderr
    assert pg_rows(pg_url, "SELECT count(*) FROM information_schema.tables WHERE "
                           "table_name = 'units'") == [(0,)]


@pytest.mark.parametrize("argv", [["store"], ["store", "migrate"]])
def test_store_needs_its_verb_and_target(argv, capsys):
    with pytest.raises(SystemExit) as e:
        memoryctl(argv)
    assert e.value.code == 2


def test_the_same_history_from_another_path_is_mapped_onto_the_rows_already_there(
        tmp_path, pg_url, flag_url, capsys):
    """Migrated again from a moved home (another source label, so no id map to resume
    from), every batch meets rows the destination holds: they are mapped by their
    natural keys and nothing keyed is doubled."""
    import shutil

    home = tmp_path / "home"
    db = home / "data" / "memoryd.db"
    make_history(db, sessions=3, units_per_session=50)
    assert migrate(capsys, home, "--to", flag_url, "--machine", "laptop")[0] == 0
    moved = tmp_path / "moved"
    (moved / "data").mkdir(parents=True)
    shutil.copyfile(db, moved / "data" / "memoryd.db")
    cmd = [sys.executable, "-m", "memoryd.move", "--home", str(moved), "--to",
           flag_url, "--machine", "laptop"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["event"] == "done"
    for table in ("sessions", "files", "units", "memory_items", "unit_vectors"):
        assert last["copied"].get(table, 0) == 0, last
    assert last["already_there"]["units"] == 150
    assert last["already_there"]["unit_vectors"] == 9  # each batch met them: mapped
    assert pg_rows(pg_url, "SELECT count(*) FROM unit_vectors") == [(9,)]
    assert pg_rows(pg_url, "SELECT count(*), count(DISTINCT (session_pk, record_id)) "
                           "FROM units") == [(150, 150)]
    assert pg_rows(pg_url, "SELECT count(*) FROM sessions") == [(3,)]
    assert pg_rows(pg_url, "SELECT count(*) FROM memory_item_sessions") == [(1,)]
    assert provenance_units(pg_fn, pg_url) == [("sess-0", "r0"), ("sess-0", "r1")]


def test_issue_14_a_moved_home_and_the_way_back_double_no_keyless_row(tmp_path, pg_url,
                                                                     flag_url,
                                                                      capsys):
    """Summaries, the served-context log, LLM usage and owed jobs have no unique key:
    the same history migrated again from a moved home (another source label, no id map
    to resume from), or copied back into the home it came from, maps them onto the rows
    already there instead of doubling them. Two identical usage rows stay two."""
    import shutil

    home = tmp_path / "home"
    db = home / "data" / "memoryd.db"
    make_history(db, sessions=3, units_per_session=10)
    conn = connect(db)
    conn.execute("INSERT INTO llm_usage (ts, day, model, purpose, outcome) "
                 "SELECT ts, day, model, purpose, outcome FROM llm_usage")  # a twin
    conn.close()
    keyless = ("summaries", "served_context", "llm_usage", "jobs")

    def counts(rows_fn, where) -> dict[str, int]:
        return {t: rows_fn(where, f"SELECT count(*) FROM {t}")[0][0] for t in keyless}

    before = counts(sqlite_fn, db)
    assert before == {"summaries": 3, "served_context": 1, "llm_usage": 2, "jobs": 3}
    # one row per batch: the twins meet in two batches, and stay two
    subprocess.run([sys.executable, "-m", "memoryd.move", "--home", str(home),
                    "--to", flag_url, "--machine", "laptop", "--batch", "1"],
                   capture_output=True, check=True)
    moved_in = counts(pg_fn, pg_url)
    assert moved_in == {**before, "jobs": 2}  # the done job stays behind

    moved = tmp_path / "moved"
    (moved / "data").mkdir(parents=True)
    shutil.copyfile(db, moved / "data" / "memoryd.db")
    rc, out = migrate(capsys, moved, "--to", flag_url, "--machine", "laptop")
    assert rc == 0 and "0 rows copied (nothing new)" in out, out
    assert counts(pg_fn, pg_url) == moved_in

    # the way back, into the home it all came from: everything is there already
    rc, out = migrate(capsys, home, "--to", "sqlite", "--from", flag_url, "--machine", "laptop")
    assert rc == 0 and "0 rows copied (nothing new)" in out, out
    assert counts(sqlite_fn, db) == before
    assert history_of(sqlite_fn, db)["summaries"] == history_of(pg_fn, pg_url)["summaries"]
