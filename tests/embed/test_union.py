"""The union of the lexical ranking and the units nearest the query by meaning
(memoryd.recall.union, issue 31). A real store and index; the nearest units are given
(what the model's process would answer: tested with the real model in test_embed.py),
so what is tested here is the ranking: the fusion, the filters, units gone."""

from __future__ import annotations

import dataclasses

import pytest

from memoryd.daemon.store_index import open_store
from memoryd.models import Record
from memoryd.recall.retrieval import PARAMS, retrieve_sync
from memoryd.store.sessions import forget_units, session_pk
from memoryd.store.units import store_record

# "deploy" four times down to once: the lexical order is d0, d1, d2, d3; m1 and m2 hold
# no query word, m2 in another project
TEXTS = [("a", "/p", [("d0", "deploy deploy deploy deploy the service"),
                      ("d1", "deploy deploy deploy the service"),
                      ("d2", "deploy deploy the service"),
                      ("d3", "deploy the service"),
                      ("m1", "ship the release to production on friday")]),
         ("b", "/q", [("m2", "roll the new build out to the servers")])]


class Nearest:
    """A stand-in for `memoryd.embed.VectorQuery`: the nearest units, best first."""

    def __init__(self, ids: dict[str, int], order: list[str]) -> None:
        self.answer = [(ids[r], 0.9 - 0.01 * i) for i, r in enumerate(order)]
        self.asked: list[int] = []

    def ask(self, conn, n):
        """Started before the words are ranked; `nearest` has the answer."""

    def nearest(self, conn, n):
        self.asked.append(n)
        return self.answer[:n]


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")

    def put(c):
        for sid, project, rows in TEXTS:
            pk = session_pk(c, "generic", sid, project=project)
            for i, (rid, text) in enumerate(rows):
                store_record(c, pk, Record("user", text, ts=1e9 + 3600 * i), rid, None, 0)
        # a vector for each (the model's process reads them; the ranking checks they
        # are there), the bytes do not matter here
        c.execute("INSERT INTO unit_vectors (unit_id, vec) SELECT id, zeroblob(384) FROM units")
        return {r[1]: r[0] for r in c.execute("SELECT id, record_id FROM units")}

    s.ids = await s.write(put)
    await s.indexed()
    yield s
    await s.close()


def _rank(store, vq=None, query="deploy", **kw):
    p = dataclasses.replace(PARAMS, session_repeat=1.0)
    return store.read_sync(lambda c: retrieve_sync(c, store.index, query, k=kw.pop("k", 10),
                                                   params=p, vq=vq, **kw))


def _ids(r):
    return [h.record_id for h in r.hits]


async def test_issue_31_the_union_finds_what_the_words_do_not(store):
    lexical = _rank(store)
    assert _ids(lexical) == ["d0", "d1", "d2", "d3"] and lexical.vectors is None
    vq = Nearest(store.ids, ["m1", "d3", "m2", "d0"])
    r = _rank(store, vq)
    # RRF (k 60, w 1): d0 1/61 + 1/64, d3 1/64 + 1/62, m1 1/61, d1 1/62, d2 1/63, m2
    # 1/63 (a tie: the lexical list's first)
    assert _ids(r) == ["d0", "d3", "m1", "d1", "d2", "m2"]
    assert r.total == 6 and r.vectors == 4
    why = {h.record_id: h.signals for h in r.hits}
    assert why["m1"] == {"vector": 0.9, "vector_rank": 1.0}  # no word matched: no bm25
    assert r.hits[2].matched == [] and r.hits[0].matched == ["deploy"]
    assert why["d3"]["lexical_rank"] == 4.0 and why["d3"]["vector_rank"] == 2.0
    assert why["d0"]["bm25_content"] > 0 and "vector" not in why["d1"]
    assert abs(r.hits[0].score - (1 / 61 + 1 / 64)) < 1e-9
    assert vq.asked == [40]  # unfiltered: the list's 30 and a few spare
    _rank(store, vq, project="/p")
    assert vq.asked == [40, 200]  # filtered: the pool the filters keep from
    # fewer hits asked: the first of the same order
    assert _ids(_rank(store, vq, k=3)) == ["d0", "d3", "m1"]
    # no word of the query in the store: the vectors alone answer
    only = _rank(store, vq, query="shipping")
    assert _ids(only) == ["m1", "d3", "m2", "d0"] and only.total == 4


async def test_issue_31_the_filters_hold_for_units_only_the_vectors_found(store):
    vq = Nearest(store.ids, ["m2", "m1"])
    assert "m2" in _ids(_rank(store, vq))
    assert "m2" not in _ids(_rank(store, vq, project="/p"))
    assert _ids(_rank(store, vq, project="/q", query="rollout")) == ["m2"]
    assert "m2" not in _ids(_rank(store, vq, agent="codex", query="rollout"))
    # the asking session's last units are left out, as the lexical ones are
    got = _rank(store, vq, exclude_session_recent=("a", 1))
    assert "m1" not in _ids(got) and "m2" in _ids(got)


async def test_issue_31_a_unit_gone_or_without_a_vector_is_not_a_vector_hit(store):
    """The model's copy of the vectors may be older than the database: a unit forgotten
    since, or whose vector left (its text changed), is not found through it."""
    vq = Nearest(store.ids, ["m1", "m2"])
    await store.write(lambda c: forget_units(c, [store.ids["m1"]]))
    await store.write(lambda c: c.execute("DELETE FROM unit_vectors WHERE unit_id = ?",
                                          (store.ids["m2"],)))
    r = _rank(store, vq)
    assert _ids(r) == ["d0", "d1", "d2", "d3"] and r.vectors == 0


async def test_issue_31_no_nearest_units_ranks_lexically(store):
    class Failed(Nearest):
        def nearest(self, conn, n):
            return None  # the model failed: `VectorQuery` says None

    r = _rank(store, Failed(store.ids, []))
    assert _ids(r) == ["d0", "d1", "d2", "d3"] and r.vectors is None
    assert all("vector" not in h.signals and "lexical_rank" not in h.signals
               for h in r.hits)


async def test_issue_31_a_duplicate_the_words_folded_is_not_a_hit_again(store):
    """The keyword ranking folds near-identical units into the best one (`duplicates`); the
    vectors find the folded one too (equal texts, equal vectors): it stays folded, listed
    once."""
    from memoryd.store.units import store_record as put

    def twin(c):
        pk = c.execute("SELECT id FROM sessions WHERE session_id = 'b'").fetchone()[0]
        uid = put(c, pk, Record("user", "deploy the service", ts=1e9 + 7200), "d3b", None,
                  0).unit_id
        c.execute("INSERT INTO unit_vectors (unit_id, vec) VALUES (?, zeroblob(384))", (uid,))
        return uid

    store.ids["d3b"] = await store.write(twin)
    await store.indexed()
    lexical = _rank(store)
    folded = {h.record_id: h.duplicates for h in lexical.hits}
    kept = "d3" if "d3" in folded else "d3b"
    other = "d3b" if kept == "d3" else "d3"
    assert folded[kept] == [store.ids[other]]
    r = _rank(store, Nearest(store.ids, [other, "m1"]))
    got = {h.record_id: h.duplicates for h in r.hits}
    assert other not in got and got[kept] == [store.ids[other]]
