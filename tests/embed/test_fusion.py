"""The fusion gate (memoryd.recall.fusion, issue 31): the vector rank weighs only where the
lexical top ten is flat. A real store and index; the vectors are written straight into
`unit_vectors` (chosen so the vector order reverses the lexical one), the query's vector
is given: what is tested is the ranking, not the model."""

from __future__ import annotations

import dataclasses

import pytest

from memoryd.daemon.store_index import open_store
from memoryd.models import Record
from memoryd.recall.fusion import lexical_margin
from memoryd.recall.retrieval import PARAMS, retrieve_sync
from memoryd.store import vectors
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record

pytestmark = pytest.mark.usefixtures("model_installed")  # numpy comes with the extra

# "deploy" four times down to once: the lexical order is d0, d1, d2, d3
TEXTS = [("d0", "deploy deploy deploy deploy the service"),
         ("d1", "deploy deploy deploy the service"),
         ("d2", "deploy deploy the service"),
         ("d3", "deploy the service")]


@pytest.fixture
async def store(tmp_path):
    import numpy as np

    from memoryd.embed.engine import quantize

    s = await open_store(tmp_path / "m.db")

    def put(c):
        pk = session_pk(c, "generic", "s", project="/p")
        for i, (rid, text) in enumerate(TEXTS):
            store_record(c, pk, Record("user", text, ts=1e9 + 3600 * i), rid, None, 0)
        ids = {r[1]: r[0] for r in c.execute("SELECT id, record_id FROM units")}
        # the further down lexically, the nearer to the query's vector (axis 0)
        for i, (rid, _) in enumerate(TEXTS):
            v = np.zeros(384, dtype=np.float32)
            v[0], v[1 + i] = 0.25 + 0.25 * i, 1.0
            vectors.save(c, [(ids[rid], quantize(v / np.linalg.norm(v)))])

    await s.write(put)
    await s.indexed()
    yield s
    await s.close()


def _rank(store, qvec=None, **params):
    import numpy as np

    q = np.zeros(384, dtype=np.float32)
    q[0] = 1.0
    q = q if qvec is None else qvec
    p = dataclasses.replace(PARAMS, session_repeat=1.0, **params)
    return store.read_sync(lambda c: retrieve_sync(c, store.index, "deploy", k=10,
                                                   params=p, qvec=q))


async def test_issue_31_the_gate_decides_whether_the_vector_rank_weighs(store):
    lexical = [h.record_id for h in _rank(store, gate_margin=-1.0).hits]
    assert lexical == ["d0", "d1", "d2", "d3"]
    plain = _rank(store, gate_margin=None, w_vector=2.0)
    assert [h.record_id for h in plain.hits] != lexical and plain.hits[0].record_id == "d3"
    assert plain.fusion == {"w_vector": 2.0}
    margin = _rank(store, gate_margin=-1.0).fusion["margin"]
    assert 0 < margin < 1
    # a flatter lexical top than the threshold: fused; a steeper one: lexical, the query
    # never embedded (a callable vector is not called) and `why` the lexical ranking's
    asked = []

    def lazy():
        import numpy as np

        asked.append(1)
        q = np.zeros(384, dtype=np.float32)
        q[0] = 1.0
        return q

    opened = _rank(store, qvec=lazy, gate_margin=margin + 0.01, w_vector=2.0)
    assert [h.record_id for h in opened.hits] == [h.record_id for h in plain.hits]
    assert opened.fusion == {"margin": margin, "w_vector": 2.0} and asked == [1]
    assert all("vector" in h.signals for h in opened.hits)
    closed = _rank(store, qvec=lazy, gate_margin=margin, w_vector=2.0)
    assert [h.record_id for h in closed.hits] == lexical
    assert closed.fusion == {"margin": margin, "w_vector": 0.0} and asked == [1]
    assert all("vector" not in h.signals for h in closed.hits)


async def test_issue_31_the_query_is_not_embedded_where_vectors_could_move_nothing(store):
    """Gate open, but fewer than two of the candidates have a vector (a store still being
    embedded, a one-hit query): no order can change, so the query's embedding (20 ms and
    more) is not made, and the ranking is the lexical one."""
    asked = []

    def lazy():
        asked.append(1)
        return None

    lexical = [h.record_id for h in _rank(store, gate_margin=-1.0).hits]
    await store.write(lambda c: c.execute(
        "DELETE FROM unit_vectors WHERE unit_id IN (SELECT id FROM units "
        "WHERE record_id != 'd3')"))
    one = _rank(store, qvec=lazy, gate_margin=None, w_vector=2.0)
    assert [h.record_id for h in one.hits] == lexical and asked == []
    assert all("vector" not in h.signals for h in one.hits)


def test_lexical_margin():
    assert lexical_margin([]) == 0.0
    assert lexical_margin([0.0, 0.0]) == 0.0
    assert lexical_margin([4.0, 3.0, 1.0]) == 0.75
