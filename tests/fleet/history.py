"""A single-machine history written straight into a real SQLite store file (every table
`memoryctl store migrate` copies), for the migrate tests and bench/fleet.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

from memoryd.store.db import connect
from memoryd.store.migrations import migrate


def make_history(db: Path, sessions: int = 3, units_per_session: int = 5,
                 batch: int = 5000) -> dict[str, int]:
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = connect(db)
    migrate(conn)
    now = time.time()
    conn.execute("BEGIN")
    file_id = conn.execute(
        "INSERT INTO files (path, root, agent, \"offset\", size, state) VALUES "
        "(?, ?, 'claude', 10, 10, '{\"session_id\": \"s\"}') RETURNING id",
        (str(db.parent / "t.jsonl"), str(db.parent))).fetchone()[0]
    unit_ids: list[int] = []
    pks = []
    for s in range(sessions):
        pk = conn.execute(
            "INSERT INTO sessions (agent, session_id, project, title, units, created_at, "
            "updated_at, summary) VALUES ('claude', ?, '/p', ?, ?, ?, ?, ?) RETURNING id",
            (f"sess-{s}", f"会话 {s}", units_per_session, now, now, f"summary {s}")).fetchone()[0]
        pks.append(pk)
        rows = []
        for u in range(units_per_session):
            text = f"unit {s}/{u} 记忆 the quick brown fox"
            rows.append((pk, f"r{u}", u + 1, u // 2, "user" if u % 2 == 0 else "assistant",
                         "text", text, now + u, file_id, len(text), 8))
            if len(rows) >= batch:
                _units(conn, rows)
                rows = []
        _units(conn, rows)
        conn.execute("INSERT INTO summaries (session_pk, from_seq, upto_seq, summary, "
                     "made_by, prompt_version, created_at) VALUES (?, 1, ?, ?, 'extractive', "
                     "'v1', ?)", (pk, units_per_session, f"summary {s}", now))
    # the first three units of each session have a vector (the memoryd[embed] extra)
    conn.executemany("INSERT INTO unit_vectors (unit_id, vec) VALUES (?, ?)", [
        (uid, f"{pk}/{rec}".encode().ljust(384, b"\0")) for uid, pk, rec in conn.execute(
            "SELECT id, session_pk, record_id FROM units WHERE record_id IN ('r0', 'r1', "
            "'r2')").fetchall()])
    unit_ids = [r[0] for r in conn.execute(
        "SELECT id FROM units WHERE session_pk = ? ORDER BY id LIMIT 2", (pks[0],))]
    item = conn.execute(
        "INSERT INTO memory_items (item_key, item, source, first_seen, last_confirmed, "
        "made_by, prompt_version, created_at, updated_at) VALUES ('k1', '用 uv 管理依赖', "
        "'claude', '2026-11-01', '2026-11-02', 'extractive', 'v1', ?, ?) RETURNING id",
        (now, now)).fetchone()[0]
    conn.execute("INSERT INTO memory_item_sessions (item_id, session_pk, unit_ids, day) "
                 "VALUES (?, ?, ?, '2026-11-01')", (item, pks[0], json.dumps(unit_ids)))
    conn.execute("INSERT INTO archived_sessions (session_pk, month, units, archived_at) "
                 "VALUES (?, '2026-10', ?, ?)", (pks[-1], units_per_session, now))
    conn.execute("INSERT INTO served_context (ts, day, via, agent, session_id, query, items, "
                 "tokens, budget_tokens) VALUES (?, '2026-11-01', 'hook', 'claude', 'sess-0', "
                 "'fox', '[]', 12, 800)", (now,))
    conn.execute("INSERT INTO exclusions (kind, value, created_at) VALUES ('project', "
                 "'/secret', ?)", (now,))
    conn.execute("INSERT INTO llm_usage (ts, day, model, purpose, outcome) VALUES "
                 "(?, '2026-11-01', 'm', 'summary', 'ok')", (now,))
    conn.execute("INSERT INTO consolidation_runs (day, at, trigger, ok, sessions, added) "
                 "VALUES ('2026-11-01', ?, 'history', 1, 2, 1)", (now,))
    for state, target in (("pending", f"session:{pks[min(1, len(pks) - 1)]}"), ("done", "x"), ("failed", "d")):
        conn.execute("INSERT INTO jobs (kind, target, state, next_run_at, created_at, "
                     "updated_at) VALUES ('summarize', ?, ?, ?, ?, ?)",
                     (target, state, now, now, now))
    conn.execute("COMMIT")
    conn.close()
    return {"sessions": sessions, "units": sessions * units_per_session}


def _units(conn, rows) -> None:
    conn.executemany(
        "INSERT INTO units (session_pk, record_id, seq, turn, role, kind, content, ts, "
        "file_id, chars, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
