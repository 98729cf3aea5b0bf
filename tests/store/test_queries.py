"""Every query module runs unchanged on both engines (one copy of each query): the same
calls, the same answers, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

from memoryd.models import Record
from memoryd.ingest.identity import claim_session
from memoryd.store import archive, files, jobs, memories, served, sessions, summaries, units
from memoryd.store.files import Cursor


def _session(c, agent="codex", sid="s1", project="/p", n=6, ts0=1000.0):
    pk = sessions.session_pk(c, agent, sid, project=project)
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        units.store_record(c, pk, Record(role, f"message {i} about deploys " + "x" * (i * 300),
                                         ts=ts0 + i), f"r{i}", None, i * 10)
    return pk


async def test_units_and_sessions(store):
    def put(c):
        return _session(c), _session(c, agent="pi", sid="s2", project="/q", n=3, ts0=2000.0)

    a, b = await store.write(put)

    def read(c):
        ids = [r[0] for r in c.execute("SELECT id FROM units ORDER BY id")]
        return {
            "count": units.count_units(c),
            "sessions": sessions.count_sessions(c),
            "by_id": units.units_by_id(c, ids[:2]),
            "cands": units.candidate_rows(c, ids[:3], head_chars=5),
            "around": [r["seq"] for r in units.session_units_around(c, [(a, 3), (b, 1)], 1)],
            "tails": units.session_tails(c, "s1", 2),
            "listed": [s["session_id"] for s in sessions.list_sessions(c)],
            "filtered": [s["session_id"] for s in sessions.list_sessions(c, agent="pi")],
            "found": [r["pk"] for r in sessions.find_sessions(c, "s1")],
            "prefix": [r["session_id"] for r in sessions.find_sessions_by_prefix(c, "s")],
            "page": [s["session_id"] for s in sessions.page_sessions(
                c, agent=None, project=None, since=0, until=None, limit=1, after=None)],
            "roles": sessions.role_counts(c, a),
            "after": [m["seq"] for m in sessions.messages_after(c, a, 4, 10)],
            "ids": ids,
            "bounds": units.id_bounds(c),
        }

    r = await store.read(read)
    assert r["count"] == 9 and r["sessions"] == 2
    assert r["bounds"] == (r["ids"][0], r["ids"][-1])
    assert set(r["by_id"]) == set(r["ids"][:2])
    first = r["by_id"][r["ids"][0]]
    assert first["content"].startswith("message 0") and first["offset"] == 0
    assert {c["head"] for c in r["cands"].values()} == {"messa"}
    assert r["around"] == [2, 3, 4, 1, 2]
    assert r["tails"] == [(a, 5)]
    assert r["listed"] == ["s2", "s1"] and r["filtered"] == ["s2"]
    assert r["found"] == [a] and r["prefix"] == ["s1", "s2"] and r["page"] == ["s2"]
    assert r["roles"] == {"user": 3, "assistant": 3} and r["after"] == [5, 6]
    assert all(type(v) is int for v in r["roles"].values())


async def test_forget_units_and_sessions(store):
    a = await store.write(lambda c: _session(c))
    ids = await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT id FROM units WHERE session_pk = ? ORDER BY seq", (a,))])
    per = await store.write(lambda c: sessions.forget_units(c, ids[:2]))
    assert per == {a: 2}
    row = await store.read(lambda c: dict(c.execute(
        "SELECT units, user_units, summary FROM sessions WHERE id = ?", (a,)).fetchone()))
    assert row == {"units": 4, "user_units": 2, "summary": None}
    assert await store.write(lambda c: sessions.forget_session(c, a)) == 4
    assert await store.read(units.count_units) == 0


async def test_cursors_and_file_identity(store):
    def put(c):
        cur = Cursor(path="/r/a.jsonl", root="/r", agent="generic", offset=42, size=42,
                     inode=2**40, mtime_ns=1_700_000_000_123_456_789,
                     state={"session_id": "chat", "path_session": True, "题": "中文"})
        files.save_cursor(c, cur)
        files.save_cursor(c, Cursor(path="/r/b.txt", root="/r", agent=None))
        cur.bad_lines = 3
        files.save_cursor(c, cur)
        files.mark_gone(c, "/r/b.txt")
        # another root's chat.jsonl claims a path-derived id the first one owns
        st = {"session_id": "chat", "path_session": True}
        replaced = claim_session(c, "generic", "/other/chat.jsonl", "/other", st)
        return replaced, st

    replaced, st = await store.write(put)
    assert replaced == "chat" and st["session_id"].startswith("chat@")

    def read(c):
        return (files.get_cursor(c, "/r/a.jsonl"), [x.path for x in files.live_cursors(c)],
                files.files_with_bad_lines(c), files.file_stats(c))

    cur, live, bad, stats = await store.read(read)
    assert cur.offset == 42 and cur.inode == 2**40 and cur.mtime_ns == 1_700_000_000_123_456_789
    assert cur.state["题"] == "中文" and cur.bad_lines == 3
    assert live == ["/r/a.jsonl"]
    assert bad == [{"path": "/r/a.jsonl", "bad_lines": 3}]
    assert stats == {"files": 1, "ignored_files": 0, "bad_lines": 3}


async def test_jobs_queue(store):
    def run(c):
        j1, made = jobs.enqueue_job(c, "summary", "session:1", params={"a": 1}, reason="r",
                                    run_at=10.0, now=1.0)
        j1b, made_b = jobs.enqueue_job(c, "summary", "session:1", params={"b": 2}, reason=None,
                                       run_at=5.0, now=2.0, priority=3)
        jobs.enqueue_job(c, "summary", "session:2", params={}, reason=None, run_at=1.0, now=1.0)
        claimed = jobs.claim_job(c, now=20.0)
        return j1, made, j1b, made_b, claimed

    j1, made, j1b, made_b, claimed = await store.write(run)
    assert made and not made_b and j1 == j1b
    assert claimed.id == j1 and claimed.params == {"a": 1, "b": 2} and claimed.priority == 3
    assert claimed.next_run_at == 5.0 and claimed.state == "running"

    def more(c):
        nobody = jobs.claim_job(c, now=0.5)  # nothing due yet
        again = jobs.enqueue_job(c, "summary", "session:1", params={"c": 3}, reason=None,
                                 run_at=30.0, now=21.0)[0]
        twin = jobs.retry_job(c, j1, "boom", run_at=40.0, now=22.0)
        second = jobs.claim_job(c, now=50.0)
        jobs.fail_job(c, second.id, "bad", now=51.0)
        third = jobs.claim_job(c, now=60.0)
        resumed = jobs.recover_jobs(c, now=61.0, max_attempts=5)
        last = jobs.claim_job(c, now=62.0)
        jobs.finish_job(c, last.id, {"ok": True}, now=63.0)
        return (nobody, again, twin, second.target, third.target, resumed,
                jobs.get_job(c, last.id), jobs.job_counts(c), jobs.next_due(c),
                jobs.list_jobs(c, state="failed"), jobs.prune_jobs(c, 100.0))

    nobody, again, twin, second, third, resumed, last, counts, due, failed, pruned = \
        await store.write(more)
    assert nobody is None and twin == again
    # the merged twin (priority 3) first, failed; then session:2, interrupted and resumed
    assert (second, third) == ("session:1", "session:2") and resumed == (1, 0)
    assert last.result == {"ok": True} and last.target == "session:2" and last.attempts == 2
    assert jobs.JobRow is type(last)
    assert failed[0].params == {"a": 1, "b": 2, "c": 3} and failed[0].last_error == "bad"
    assert counts["done"] == 2 and counts["failed"] == 1 and counts["pending"] == 0
    assert counts["last_error"]["last_error"] in ("bad", "boom") and due is None
    assert len(failed) == 1 and pruned == 3 and failed[0].id == twin


async def test_summaries_one_liners_and_usage(store):
    pk = await store.write(lambda c: _session(c, n=8))

    def run(c):
        b = summaries.backlogs(c, [pk])[0]
        cut = summaries.buffer_cut(c, pk, 0, 2)
        stored = summaries.save_summary(c, pk, summary="did things", from_seq=1, upto=4,
                                        made_by="extractive", prompt_version="v1", reason="t",
                                        now=5.0)
        stale = summaries.save_summary(c, pk, summary="x", from_seq=1, upto=2, made_by="m",
                                       prompt_version="v1", reason=None, now=6.0,
                                       expect_upto=0)
        summaries.mark_user_units(c, pk)
        rows, reached = summaries.units_for_one_liners(c, pk, 0, 10, 1000, 100)
        n = summaries.save_one_liners(c, [(rows[0]["id"], "line", "extractive", "v1")])
        summaries.set_one_liner_upto(c, pk, 3)
        summaries.set_one_liner_upto(c, pk, 2)  # never goes back
        summaries.record_usage(c, ts=1.0, day="2026-01-01", model="m", purpose="summary",
                               target="session:1", input_tokens=10, output_tokens=5,
                               cost=0.5, outcome="ok", error=None)
        summaries.record_usage(c, ts=2.0, day="2026-01-01", model="m", purpose="summary",
                               target="session:1", input_tokens=1, output_tokens=0, cost=0,
                               outcome="timeout", error="slow")
        total, recent = summaries.recent_units(c, pk, 4, 2)
        return {
            "backlog": b, "cut": cut, "stored": stored, "stale": stale, "n": n,
            "reached": reached, "session": summaries.get_session(c, pk),
            "history": summaries.summary_history(c, pk),
            "between": [u["seq"] for u in summaries.units_between(c, pk, 2, 4)],
            "recent": (total, [u["seq"] for u in recent]),
            "count1": summaries.count_for_one_liners(c, pk, 0, 10, 1000),
            "extractive": [u["id"] for u in summaries.extractive_units(c, pk, 5)],
            "idle": summaries.idle_sessions(c, 1e12, 1),
            "backlog_s": summaries.sessions_with_backlog(c, 1),
            "new_long": summaries.sessions_with_new_long_units(c),
            "extractive_s": summaries.extractive_sessions(c, 5),
            "artifacts": summaries.artifact_counts(c),
            "usage": summaries.usage_on(c, "2026-01-01"),
            "by_target": summaries.usage_by_target(c),
            "found": [s["pk"] for s in summaries.find_sessions(c, "s1", agent="codex")],
            "last": summaries.last_seq(c, pk),
        }

    r = await store.write(run)
    assert r["backlog"].messages == 8 and r["backlog"].user_messages == 4
    assert type(r["backlog"].chars) is int and r["backlog"].chars > 0
    assert r["cut"] == 7 and r["stored"] and not r["stale"] and r["n"] == 1
    s = r["session"]
    assert s["summary"] == "did things" and s["summary_upto"] == 4 and s["one_liner_upto"] == 3
    assert s["summary_user_mark"] == 4
    assert [h["summary"] for h in r["history"]] == ["did things"]
    assert r["between"] == [3, 4] and r["recent"] == (4, [7, 8])
    assert r["count1"] == 3 and r["reached"] == 8
    assert len(r["extractive"]) == 1 and r["idle"] == [pk] and r["backlog_s"] == [pk]
    assert r["new_long"] == [pk] and r["extractive_s"] == [pk]
    assert r["artifacts"] == {"summaries_by": {"extractive": 1}, "extractive_one_liners": 1}
    assert r["usage"] == {"calls": 2, "input_tokens": 11, "output_tokens": 5, "cost": 0.5,
                          "errors": 1, "tokens": 16}
    assert all(type(v) in (int, float) for v in r["usage"].values())
    json.dumps(r["usage"])  # no Decimal
    assert r["by_target"] == {"session:1": 1} and r["found"] == [pk] and r["last"] == 8


async def test_memory_provenance(store):
    pk = await store.write(lambda c: _session(c))

    def run(c):
        iid = memories.record_item(c, key="k1", item="uses uv", source="codex", scope=None,
                                   importance=2, reasons=["explicit"], day="2026-01-02",
                                   made_by="extractive", prompt_version="v1")
        again = memories.record_item(c, key="k1", item="uses uv", source="codex", scope=None,
                                     importance=1, reasons=[], day="2026-01-05",
                                     made_by="extractive", prompt_version="v1")
        linked = memories.link_session(c, iid, pk, [1, 2], "2026-01-02")
        relinked = memories.link_session(c, iid, pk, [1, 2], "2026-01-02")
        memories.confirm_item(c, "k1", "2026-01-03")
        memories.record_item(c, key="k2", item="old", source="codex", scope="/p",
                             importance=0, reasons=[], day="2026-01-01", made_by="m",
                             prompt_version="v1")
        memories.set_state(c, "k2", "superseded", "k1")
        return {
            "same": iid == again, "linked": linked, "relinked": relinked,
            "prov": memories.provenance_by_keys(c, ["k1", "k2"]),
            "active": list(memories.all_active(c)),
            "sessions": memories.item_sessions(c, iid),
            "orphans": memories.delete_items(c, [o["id"] for o in memories.orphans(c)]),
            "pks": memories.session_pks(c, "codex", "s1"),
            "day": [s["pk"] for s in memories.day_sessions(c, 999.0, 1002.0)],
            "units": [u["seq"] for u in memories.day_units(c, pk, 1000.0, 1002.0)],
        }

    r = await store.write(run)
    assert r["same"] and r["linked"] and not r["relinked"]
    k1 = r["prov"]["k1"]
    assert k1["importance"] == 2 and k1["last_confirmed"] == "2026-01-05"
    assert k1["confirmations"] == 1 and r["prov"]["k2"]["superseded_by"] == "k1"
    assert r["active"] == ["k1"] and r["orphans"] == 1 and r["pks"] == [pk]
    assert r["sessions"] == [{"agent": "codex", "session_id": "s1", "project": "/p",
                              "unit_ids": [1, 2], "day": "2026-01-02"}]
    assert r["day"] == [pk] and r["units"] == [1, 2]


async def test_served_log(store):
    def run(c):
        ids = [served.record_served(c, ts=float(i), day=f"2026-01-0{1 + i % 2}", via="cli",
                                    agent="codex", session_id="s1", query="q 中文",
                                    items=[{"unit": i}], tokens=10 * i, budget_tokens=100)
               for i in range(4)]
        return (ids, served.list_served(c, session_id="s1", last=2),
                served.daily_totals(c, days=7), served.prune_served(c, 2.0))

    ids, listed, totals, pruned = await store.write(run)
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [x["ts"] for x in listed] == [2.0, 3.0] and listed[0]["items"] == [{"unit": 2}]
    assert totals == [{"day": "2026-01-02", "requests": 2, "tokens": 40},
                      {"day": "2026-01-01", "requests": 2, "tokens": 20}]
    assert all(type(t["tokens"]) is int for t in totals)
    assert pruned == 2


async def test_archive_and_restore(store):
    pk = await store.write(lambda c: _session(c, n=4))

    def out(c):
        due = [s["pk"] for s in archive.sessions_to_archive(c, 1e12)]
        rows = archive.session_units(c, pk)
        n = archive.mark_archived(c, pk, "2026-01")
        return due, rows, n, archive.archived(c), archive.find_session(c, "s1", None), \
            units.count_units(c)

    due, rows, n, listed, found, left = await store.write(out)
    assert due == [pk] and n == 4 and len(rows) == 4 and rows[1]["offset"] == 10
    assert listed[0]["month"] == "2026-01" and listed[0]["units"] == 4
    assert found[0]["month"] == "2026-01" and left == 0
    back = await store.write(lambda c: archive.restore_units(c, pk, rows))
    again = await store.write(lambda c: archive.restore_units(c, pk, rows))
    assert (back, again) == (4, 0)
    assert await store.read(units.count_units) == 4


async def test_a_queued_batch_writes_new_units_at_once_and_merges_in_order(store, engine):
    """SessionWriter.add/flush (the ingestor's batch path: executemany on SQLite, COPY on
    PostgreSQL) keeps store()'s semantics record by record: a replayed id is a no-op, an
    append piece queued after its unit in the same batch is merged into it, a replace
    rewrites, and seq/turns/counters come out as one at a time would make them."""

    def first(c):
        pk = sessions.session_pk(c, "codex", "b1", project="/p")
        units.store_record(c, pk, Record("user", "stored before", ts=10.0), "old", None, 0)
        return pk

    pk = await store.write(first)
    # PostgreSQL's feed marks changes in its own table; index_pending is emptied by the
    # feed indexer in the background there, so the test reads the feed instead
    feed_from = 0 if engine == "sqlite" else await store.read(
        lambda c: c.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])

    def batch(c):
        w = units.SessionWriter(c, pk)
        w.add(Record("user", "stored before", ts=10.0), "old", None, 0)  # a replay
        w.add(Record("assistant", "part one", ts=11.0, merge="append", part_id="p1"),
              "msg", None, 5)
        w.add(Record("user", "a question 记忆", ts=12.0), "q", None, 9)
        w.add(Record("assistant", "part two", ts=13.0, merge="append", part_id="p2"),
              "msg", None, 14)
        w.add(Record("assistant", "part two", ts=13.0, merge="append", part_id="p2"),
              "msg", None, 14)  # the same piece again
        w.add(Record("user", "rewritten", ts=9.0, merge="replace"), "old", None, 0)
        return w.flush()

    assert await store.write(batch) == 2

    def read(c):
        rows = [tuple(r) for r in c.execute(
            "SELECT record_id, seq, turn, content, parts FROM units WHERE session_pk = ? "
            "ORDER BY seq", (pk,))]
        s = c.execute("SELECT units, user_units, next_seq, turns, first_ts, last_ts FROM "
                      "sessions WHERE id = ?", (pk,)).fetchone()
        if engine == "sqlite":
            pending = c.execute("SELECT count(*) FROM index_pending").fetchone()[0]
        else:
            pending = sorted(r[0] for r in c.execute(
                "SELECT DISTINCT u.record_id FROM changes ch JOIN units u ON u.id = ch.unit_id "
                "WHERE ch.seq > ? AND ch.op = 'upsert'", (feed_from,)))
        return rows, tuple(s), pending

    rows, s, pending = await store.read(read)
    assert rows == [("old", 1, 1, "rewritten", None),
                    ("msg", 2, 1, "part one\n\npart two", "p1\np2"),
                    ("q", 3, 2, "a question 记忆", None)]
    assert s == (3, 2, 4, 2, 10.0, 12.0)
    if engine == "sqlite":
        assert pending == 2  # the merged unit and the rewritten one go back to the index
    else:
        assert pending == ["msg", "old", "q"]  # the feed carries every unit the batch touched


async def test_a_batch_of_many_units_is_stored_in_order_with_its_counters(store, engine):
    """A batch longer than one multi-row INSERT (`units.INSERT_ROWS`) goes in as several
    statements and a remainder: ids and seq follow the queue's order, the counters the
    triggers keep see every unit, and an id reused after the newest unit was deleted is
    still queued for the index (SQLite's `units_reused_id` trigger)."""
    n = 2 * units.INSERT_ROWS + 37

    def put(c):
        pk = sessions.session_pk(c, "codex", "many", project="/p")
        units.store_record(c, pk, Record("user", "first"), "r-first", None, 0)
        units.store_record(c, pk, Record("user", "dropped"), "r-dropped", None, 1)
        sessions.forget_units(c, [c.execute("SELECT max(id) FROM units").fetchone()[0]])
        w = units.SessionWriter(c, pk)
        for i in range(n):
            w.add(Record("user" if i % 2 == 0 else "assistant", f"unit {i} 记忆 " * (i % 7 + 1),
                         ts=100.0 + i), f"r{i}", None, 10 + i)
        return pk, w.flush()

    pk, added = await store.write(put)
    assert added == n

    def read(c):
        rows = c.execute("SELECT id, record_id, seq, turn, content, chars, \"offset\" "
                         "FROM units WHERE session_pk = ? ORDER BY id", (pk,)).fetchall()
        s = c.execute("SELECT units, user_units, next_seq, turns FROM sessions WHERE id = ?",
                      (pk,)).fetchone()
        pending = ([r[0] for r in c.execute("SELECT unit_id FROM index_pending ORDER BY id")]
                   if engine == "sqlite" else None)
        return [tuple(r) for r in rows], tuple(s), units.count_units(c), pending

    rows, s, count, pending = await store.read(read)
    assert [r[1] for r in rows] == ["r-first"] + [f"r{i}" for i in range(n)]
    assert [r[2] for r in rows] == [1, *range(3, n + 3)]  # seq 2 was the forgotten unit's
    ids = [r[0] for r in rows]
    assert ids == sorted(ids) and ids[1:] == list(range(ids[1], ids[1] + n))
    assert all(r[4] == f"unit {i} 记忆 " * (i % 7 + 1) and r[5] == len(r[4]) and r[6] == 10 + i
               for i, r in enumerate(rows[1:]))
    users = (n + 1) // 2
    assert s == (n + 1, 1 + users, n + 3, 2 + users)
    assert count == n + 1
    if engine == "sqlite":
        # the deleted unit's id came back to the first unit of the batch: the index hears
        # of it twice (its deletion, then the new unit under the same id)
        assert pending == [ids[1], ids[1]]
