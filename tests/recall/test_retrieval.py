"""Ranked recall (memoryd.recall.retrieval) on a real store, and /v1/search through the daemon."""

from __future__ import annotations

import asyncio
import time

import pytest

from memoryd.client import ApiError
from memoryd.models import Record
from memoryd.recall.retrieval import Params, plan_query, query_speaker, retrieve, retrieve_sync
from memoryd.daemon.store_index import open_store
from memoryd.store import Store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record
from tests.helpers import AsyncClient, running_daemon, short_dir, wait_for, write_jsonl

NOW = 1_750_000_000.0
DAY = 86400.0


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "memoryd.db")
    yield s
    await s.close()


def put(store: Store, sessions: dict[str, list[tuple[str, str]]], *, project: str = "/p",
        ts: dict[str, float] | None = None, projects: dict[str, str] | None = None):
    """sessions: {session_id: [(role, text), ...]}; record ids are "<sid>:<index>"."""

    def write(c):
        for sid, turns in sessions.items():
            pk = session_pk(c, "generic", sid, project=(projects or {}).get(sid, project))
            for i, (role, text) in enumerate(turns):
                when = (ts or {}).get(sid, NOW - 30 * DAY)
                store_record(c, pk, Record(role, text, ts=when + i), f"{sid}:{i}", None, 0)

    async def go():
        await store.write(write)
        await store.indexed()

    return go()


FILLER = {"filler": [("user", f"unrelated note {i} about {w}") for i, w in enumerate(
    "lunch weather traffic music garden coffee movies football painting hiking "
    "laundry groceries budget holiday birthday weekend".split())]}


def ids(hits):
    return [h.record_id for h in hits]


DISTRACTORS = {
    "games": [
        ("user", "What are the best settings for Apex Legends on a laptop?"),
        ("assistant", "For Apex Legends lower the texture streaming budget and cap the "
                      "frame rate. What was your previous setup? Before you update drivers, "
                      "note your current goal for frame times."),
        ("user", "I updated the drivers and the game runs before lunch fine now."),
    ],
    "cooking": [
        ("user", "What was the name of the bread recipe I liked before?"),
        ("assistant", "It was the sourdough with a long cold proof, my previous favourite."),
    ],
}


async def test_natural_question_finds_the_fact_among_distractors(store):
    await put(store, {
        **DISTRACTORS,
        "ranked": [
            ("user", "I'm grinding ranked this season; my goal is to reach level 100 in "
                     "Apex Legends before the end of the year."),
            ("assistant", "Level 100 is a solid target. Play consistently and review your "
                          "deaths."),
        ],
    })
    q = "What was my previous goal for my Apex Legends level before I updated my goal?"
    plan = plan_query(q)
    assert {"what", "was", "my", "for", "before", "i"}.isdisjoint(plan.terms)
    assert {"goal", "apex", "legends", "level"} <= set(plan.terms)
    assert plan.speaker == "user"
    hits = await retrieve(store, q, k=3, now=NOW)
    assert hits[0].record_id == "ranked:0"
    assert {"goal", "apex", "legends", "level"} <= set(hits[0].matched)
    assert hits[0].signals["speaker"] > 1 and hits[0].signals["bm25_content"] > 0


async def test_stop_word_only_query_still_matches(store):
    await put(store, {"s": [("user", "to be or not to be"), ("user", "something else")]})
    plan = plan_query("to be or not to be")
    assert plan.terms == ["to", "be", "or", "not"] and not plan.dropped
    hits = await retrieve(store, "To be, or not to be?", k=5, now=NOW)
    assert ids(hits) == ["s:0"]


async def test_chinese_query_recalls_chinese_unit(store):
    await put(store, {
        "zh": [("user", "我们今天讨论了数据库迁移的方案"), ("user", "机器学习模型训练")],
        "en": [("user", "database migration plan")],
    })
    assert ids(await retrieve(store, "迁移", k=5, now=NOW)) == ["zh:0"]
    # a natural question is one run of characters: it is searched as its bigrams
    hits = await retrieve(store, "数据库迁移是怎么决定的？", k=5, now=NOW)
    assert ids(hits)[0] == "zh:0" and {"数据", "迁移"} <= set(hits[0].matched)
    assert "en:0" not in ids(hits)


async def test_recency_orders_ties(store):
    await put(store, {**FILLER, "old": [("user", "deploy the alpha service")],
                      "new": [("user", "deploy the gamma service")]},
              ts={"old": NOW - 300 * DAY, "new": NOW - DAY})
    hits = await retrieve(store, "deploy service", k=5, now=NOW)
    assert ids(hits) == ["new:0", "old:0"]
    assert "recency" in hits[0].signals and "recency" not in hits[1].signals
    assert hits[0].score > hits[1].score
    # the boost is mild: a clearly better old match still wins over a recent weak one
    await put(store, {"older": [("user", "deploy deploy the service with the deploy script")]},
              ts={"older": NOW - 200 * DAY})
    assert ids(await retrieve(store, "deploy", k=5, now=NOW))[0] == "older:0"


async def test_same_project_orders_ties(store):
    await put(store, {**FILLER, "a": [("user", "rotate the signing keys")],
                      "b": [("user", "rotate the backup keys")]},
              projects={"a": "/proj/a", "b": "/proj/b"})
    for mine in ("/proj/a", "/proj/b"):
        hits = await retrieve(store, "rotate keys", k=5, now=NOW, prefer_project=mine)
        assert hits[0].project == mine and hits[0].signals["same_project"] > 1
        assert "same_project" not in hits[1].signals


async def test_near_duplicates_collapse_to_the_best(store):
    text = "Run `make migrate` before starting the API server."
    await put(store, {"s1": [("user", text)], "s2": [("user", text.upper() + "  ")],
                      "s3": [("user", "start the API server after the migration")]},
              ts={"s1": NOW - 40 * DAY, "s2": NOW - 2 * DAY})
    hits = await retrieve(store, "migrate API server", k=5, now=NOW)
    got = ids(hits)
    assert got.count("s1:0") + got.count("s2:0") == 1
    assert got[0] == "s2:0"  # the recent copy scores higher, and says what it stands for
    s1 = await store.read(lambda c: c.execute(
        "SELECT id FROM units WHERE record_id = 's1:0'").fetchone()[0])
    assert hits[0].duplicates == [s1] and hits[0].why()["duplicates"] == [s1]
    assert "s3:0" in got


async def test_speaker_cue_picks_whose_words(store):
    await put(store, {"t": [
        ("user", "Should I dilute tea tree oil before putting it on my skin?"),
        ("assistant", "Yes: dilute tea tree oil with a carrier oil, about 1 part to 10, "
                      "before it touches your skin."),
    ]})
    assert query_speaker("You suggested a ratio for tea tree oil, what was it?") == "assistant"
    assert query_speaker("What did I say about tea tree oil?") == "user"
    assert query_speaker("What did we discuss about tea tree oil?") is None
    assert query_speaker("tea tree oil ratio") is None
    a = await retrieve(store, "I remember you told me to dilute tea tree oil; the ratio?",
                       k=2, now=NOW)
    assert a[0].role == "assistant" and a[0].signals["speaker"] > 1
    u = await retrieve(store, "did I ask whether to dilute tea tree oil on my skin", k=2,
                       now=NOW)
    assert u[0].role == "user"


async def test_speaker_is_read_only_for_a_query_that_asks_about_one(store):
    """A query with no speaker cue leaves the index's `speaker` column unread (reranking
    does not look at it): its candidates say None, all else as when it is read."""
    from memoryd.index import Filters
    from memoryd.index.tail import TailPolicy

    await put(store, {"t": [("user", "dilute tea tree oil?"),
                            ("assistant", "dilute tea tree oil with a carrier oil")]})
    store.index.tail_policy = TailPolicy(docs=1, seconds=0.0)  # committed: the index's
    store.index.notify_write()  # columns, not the live tail's own records
    while len(store.index.tail):
        await asyncio.sleep(0.01)
    terms = plan_query("tea tree oil").terms

    def ranked(speaker: bool):
        return store.read(lambda c: store.index.ranked(
            c, terms, Filters(), mode="or", limit=30, count=True, speaker=speaker))

    full, bare = await ranked(True), await ranked(False)
    assert sorted(c["speaker"] for c in full[1]) == [1, 2]
    assert [c["speaker"] for c in bare[1]] == [None, None]
    strip = [{k: v for k, v in c.items() if k not in ("speaker", "at")} for c in full[1]]
    assert strip == [{k: v for k, v in c.items() if k not in ("speaker", "at")}
                     for c in bare[1]]
    plain = await retrieve(store, "tea tree oil", k=2, now=NOW)
    assert {h.role for h in plain} == {"user", "assistant"}
    assert not any("speaker" in h.signals for h in plain)


async def test_neighbours_are_returned_as_context_and_lift(store):
    await put(store, {**FILLER, "n": [
        ("user", "The nightly backup job failed again"),
        ("assistant", "The cron entry points at an old path; fix it in crontab."),
        ("user", "Thanks, that worked."),
    ], "m": [("assistant", "The cron entry runs its command on a schedule.")]})
    hits = await retrieve(store, "cron entry for the backup", k=5, now=NOW, neighbours=1)
    got = ids(hits)
    # the fix is lifted above the other "cron entry" line by the question before it
    assert got.index("n:1") < got.index("m:0")
    fix = hits[got.index("n:1")]
    assert fix.signals["neighbour"] > 0 and "neighbour" not in hits[got.index("m:0")].signals
    assert [u["record_id"] for u in fix.context] == ["n:0", "n:2"]
    assert fix.context[0]["content"] == "The nightly backup job failed again"


async def test_session_repeat_spreads_hits_over_sessions(store):
    await put(store, {"long": [("user", f"kafka consumer lag note {i}") for i in range(6)],
                      "other": [("user", "kafka consumer lag in the other cluster, rebalance")]})
    flat = Params(session_repeat=1.0, neighbour=0.0)
    spread = Params(neighbour=0.0)
    got_flat = await store.read(lambda c: ids(retrieve_sync(
        c, store.index, "kafka consumer lag", k=4, now=NOW, params=flat).hits))
    got = await store.read(lambda c: ids(retrieve_sync(
        c, store.index, "kafka consumer lag", k=4, now=NOW, params=spread).hits))
    assert "other:0" not in got_flat and "other:0" in got


async def test_filters_exclusion_and_total(store):
    await put(store, {"a": [("user", f"terraform plan {i}") for i in range(5)],
                      "b": [("user", "terraform apply")]},
              projects={"a": "/proj/a", "b": "/proj/b"})
    r = await store.read(lambda c: retrieve_sync(c, store.index, "terraform", k=2, count=True,
                                                  now=NOW))
    assert r.total == 6 and len(r.hits) == 2
    got = await store.read(lambda c: ids(retrieve_sync(
        c, store.index, "terraform", k=10, project="/proj/b", now=NOW).hits))
    assert got == ["b:0"]
    got = await store.read(lambda c: ids(retrieve_sync(
        c, store.index, "terraform", k=10, exclude_session_recent=("a", 2), now=NOW).hits))
    assert sorted(got) == ["a:0", "a:1", "a:2", "b:0"]
    assert (await retrieve(store, "!!! ???", k=5)) == []


async def test_search_latency_is_sane(store):
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    await put(store, {f"s{j}": [("user" if i % 2 else "assistant",
                                 " ".join(words[(i * j + k) % len(words)] for k in range(30)))
                                for i in range(50)] for j in range(40)})
    t0 = time.perf_counter()
    for _ in range(5):
        await retrieve(store, "what did I say about gamma and kappa?", k=15)
    assert (time.perf_counter() - t0) / 5 < 0.5


# -- through the daemon ---------------------------------------------------------------


@pytest.fixture
def sock():
    with short_dir() as d:
        yield d / "m.sock"


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None


async def test_v1_search_ranks_questions_and_explains(memoryd_home, sock, tmp_path):
    src = tmp_path / "src"
    write_jsonl(src / "p" / "s1.jsonl", [
        {"role": "user", "content": "Where should we store the SQLite database file?",
         "id": "q1"},
        {"role": "assistant", "content": "Keep it under the XDG data dir.", "id": "a1"},
    ])
    write_jsonl(src / "p" / "s2.jsonl", [
        {"role": "user", "content": "I bought my new bookshelf from IKEA last week.",
         "id": "b1"},
        {"role": "assistant", "content": "Great, IKEA shelves are easy to assemble; what "
                                         "did you buy for the rest of the room?", "id": "b2"},
    ])
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        c = AsyncClient(sock)
        await wait_for(lambda: _caught_up(c))
        r = await c.search(query="Where did I buy my new bookshelf from?")
        assert r["results"][0]["record_id"] == "b1"
        assert r["message"].startswith(f"{r['total']} matches, showing {r['shown']}")
        why = r["results"][0]["why"]
        assert "bookshelf" in why["matched"] and "speaker" in why["signals"]
        r = await c.search(query="what about the the", max_results=3)
        assert r["total"] >= 0 and r["shown"] <= 3
        with pytest.raises(ApiError) as e:
            await c.request("POST", "/v1/search", {"query": "x", "max_results": 0})
        assert (e.value.status, e.value.field) == (400, "max_results")
        with pytest.raises(ApiError) as e:
            await c.request("POST", "/v1/search", {"query": ""})
        assert (e.value.status, e.value.field) == (400, "query")


async def test_one_liner_matches_weigh_more_and_are_explained(store):
    await put(store, {**FILLER, "s": [
        ("tool", "x = compute(); y = compute(); z = compute()"),
        ("user", "we should compute the totals again later"),
    ]})

    def set_one_liner(c):
        uid = c.execute("SELECT id FROM units WHERE record_id = 's:0'").fetchone()[0]
        c.execute("UPDATE units SET one_liner = ? WHERE id = ?", ("Recomputed totals", uid))
        c.execute("INSERT INTO index_pending (unit_id) VALUES (?)", (uid,))

    await store.write(set_one_liner)
    await store.indexed()
    hits = await retrieve(store, "totals", k=5, now=NOW)
    by_id = {h.record_id: h for h in hits}
    assert by_id["s:0"].signals["bm25_one_liner"] > 0
    assert "bm25_one_liner" not in by_id["s:1"].signals
    assert hits[0].record_id == "s:0", [(h.record_id, h.score, h.signals) for h in hits]


async def test_units_gone_from_the_database_but_not_the_index_leave_no_hole(store):
    """A forget commits before the index hears of it: the deleted units are not shown,
    the next best take their places, and the total drops by what was found gone."""
    await put(store, {"keep": [("user", f"pelican sighting number {i}") for i in range(6)],
                      "gone": [("user", f"pelican pelican pelican note {i}")
                               for i in range(4)]})
    before = await store.read(lambda c: retrieve_sync(c, store.index, "pelican", k=5,
                                                      now=NOW, count=True))
    assert {h.session_id for h in before.hits[:2]} == {"gone"}
    store.index.close()  # the index's writer stops following: the delete stays unseen
    await store.write(lambda c: c.execute(
        "DELETE FROM units WHERE session_pk = (SELECT id FROM sessions "
        "WHERE session_id = 'gone')"))
    after = await store.read(lambda c: retrieve_sync(c, store.index, "pelican", k=5,
                                                     now=NOW, count=True))
    assert [h.session_id for h in after.hits] == ["keep"] * 5
    assert after.total == 6
    ctx = await store.read(lambda c: retrieve_sync(c, store.index, "pelican", k=3, now=NOW,
                                                   neighbours=1, prefer_project="/p"))
    assert [h.session_id for h in ctx.hits] == ["keep"] * 3
    assert all(h.context for h in ctx.hits)


async def test_project_within_is_a_directory_tree_not_a_pattern(tmp_path):
    from memoryd.models import Record
    from memoryd.recall.retrieval import retrieve_sync
    from memoryd.daemon.store_index import open_store
    from memoryd.store.sessions import session_pk
    from memoryd.store.units import store_record

    store = await open_store(tmp_path / "db.sqlite")
    try:
        def put(c):
            for sid, project in (("a", "/w/my_proj"), ("b", "/w/my_proj/sub"),
                                 ("c", "/w/myXproj/sub"), ("d", "/w/my_proj2"),
                                 # around the range's ends ("root/" .. "root0")
                                 ("e", "/w/my_proj0"), ("f", "/w/my_proj."),
                                 ("g", "/w/my_proj/"), ("h", "/w/My_proj/sub")):
                pk = session_pk(c, "generic", sid, project=project)
                store_record(c, pk, Record("user", f"walrus topic from {sid}"), f"{sid}1", None, 0)

        await store.write(put)
        await store.indexed()
        r = await store.read(lambda c: retrieve_sync(c, store.index, "walrus", k=10,
                                                      project_within="/w/my_proj"))
        assert sorted(h.session_id for h in r.hits) == ["a", "b", "g"]
        r = await store.read(lambda c: retrieve_sync(c, store.index, "walrus", k=10,
                                                      project_within="/w/my_proj/"))
        assert sorted(h.session_id for h in r.hits) == ["a", "b", "g"]
    finally:
        await store.close()


async def test_search_results_are_the_models_model_construct_makes(store):
    """`/v1/search`'s results are set up without `model_construct`'s walk over the
    fields: the same models (fields, fields set, JSON) as it makes from the same values."""
    from memoryd.api import SearchRequest, SearchResult
    from memoryd.recall.search import search

    await put(store, {**FILLER, "s": [("user", "the totals were computed on friday"),
                                      ("assistant", "totals again: 4 and 5")]})
    r = await search(store, SearchRequest(query="totals computed friday", max_results=5))
    assert r.results
    for got in r.results:
        values = {k: getattr(got, k) for k in SearchResult.model_fields}
        want = SearchResult.model_construct(**values)
        assert got == want and got.model_fields_set == want.model_fields_set
        assert got.model_dump_json() == want.model_dump_json()
        assert SearchResult.model_validate(got.model_dump()) == want
