"""A big unfiltered OR search estimates its matches from the terms' document frequencies
instead of counting them (counting scores every match: no top-k pruning); small,
filtered and AND searches still count exactly."""

import pytest

from memoryd.api import SearchRequest
from memoryd.index import Filters
from memoryd.index.query import estimate
from memoryd.models import Record
from memoryd.recall.search import search
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")

    def put(c):
        pk = session_pk(c, "generic", "s", project="/p")
        for i in range(400):
            words = ["alpha"] + (["beta"] if i % 2 else []) + (["gamma"] if i % 4 == 0 else [])
            store_record(c, pk, Record("user", " ".join(words) + f" line {i}"), f"r{i}", None, 0)

    await s.write(put)
    await s.indexed()
    yield s
    await s.close()


def test_estimate_from_document_frequencies(store):
    s = store.index._index.searcher()
    an = store.index.analyzer
    # beta (200) or gamma (100) as if independent: 400 * (1 - 0.5 * 0.75) = 250; the
    # exact union is 300 (beta lines are odd, gamma lines even): an estimate, said so
    assert estimate(s, an, ["beta", "gamma"], "or", upto=10) == 250
    assert estimate(s, an, ["beta", "gamma"], "or") is None  # few postings: counted
    assert estimate(s, an, ["beta", "gamma"], "and", upto=10) is None  # AND: counted
    assert estimate(s, an, ["alpha"], "or", upto=10) == 400


async def test_small_and_filtered_searches_count_exactly(store):
    r = await search(store, SearchRequest(query="beta gamma"))
    assert r.total == 300 and not r.message.startswith("about")  # 200 + 100, disjoint
    got = await store.read(lambda c: store.index.ranked(
        c, ["beta"], Filters(session_id="s"), mode="or", limit=5, count=True))
    assert got is not None and got[0] == 200 and got[2] is False
