"""Embeddings in a fleet (issue 31 item 2: "shared in a fleet"): two real daemons in one
namespace of the real PostgreSQL server, the real model. Each machine embeds its own
sessions' units only; the vectors reach the other machine's row cache through the change
feed, so its search finds them by meaning; a unit whose text changes loses its stale vector
everywhere and is embedded again; a forget takes them from every cache; `memoryctl
reindex` on one machine drops and rebuilds that machine's vectors only."""

from __future__ import annotations

import pytest

from memoryd.store import vectors
from tests.embed.test_embed import FLAT
from tests.fleet.daemons import fleet_daemons
from tests.helpers import short_dir, wait_for, write_jsonl

pytestmark = pytest.mark.usefixtures("model_installed")

SERVER = [
    {"role": "user", "content": "The kestrel backups run nightly at two.", "id": "k1"},
    {"role": "assistant", "content": "Noted: nightly kestrel backups at two.", "id": "k2"},
]


def _cached(dm) -> dict[int, bytes]:
    """The vectors in this machine's row cache (what its search and context search by
    meaning: the model's process reads them there)."""
    rows = dm.store.index.rows
    return rows.read_sync(lambda c: dict(c.execute("SELECT unit_id, vec FROM unit_vectors")))


async def _embedded(c, own: int):
    st = await c.status()
    e = st["embed"]
    return st if st["caught_up"] and e["caught_up"] and e["done"] == own else None


async def test_issue_31_each_machine_embeds_its_own_and_every_cache_holds_all(
        tmp_path, pg_url, monkeypatch):
    from memoryd.embed import worker

    monkeypatch.setattr(worker, "REWALK_S", 1.0)  # the walk that finds a changed unit
    roots = {"laptop": tmp_path / "laptop" / "src", "server": tmp_path / "server" / "src"}
    write_jsonl(roots["laptop"] / "chat.jsonl", FLAT)
    write_jsonl(roots["server"] / "chat.jsonl", SERVER)
    with short_dir() as d:
        async with fleet_daemons(tmp_path, roots, d, pg_url, embed=True) as fleet:
            (ld, lc), (sd, sc) = fleet["laptop"], fleet["server"]
            # each machine's worker embeds its own units, and only those
            st = {"laptop": await wait_for(lambda: _embedded(lc, 3), 120),
                  "server": await wait_for(lambda: _embedded(sc, 2), 120)}
            assert st["laptop"]["embed"]["embedded_this_run"] == 3
            assert st["server"]["embed"]["embedded_this_run"] == 2
            assert await ld.store.read(vectors.count) == 5
            # the feed carries every vector into both machines' row caches
            both = await wait_for(lambda: c if len(c := _cached(sd)) == 5 else None, 60)
            assert await wait_for(lambda: _cached(ld) == both or None, 60)
            # so the server's search ranks the laptop's turns by meaning too: each hit
            # shows its cosine, the server's own turns (no word of the query) come
            # through the vectors alone
            r = await sc.search(query="deploy the service")
            sig = {x["record_id"]: x["why"]["signals"] for x in r["results"]}
            assert {"f1", "f2", "f3", "k1"} <= sig.keys()
            assert all(s.get("vector", 0) > 0 for s in sig.values())
            assert "lexical_rank" in sig["f1"] and "lexical_rank" not in sig["k1"]

            # reindex on the laptop drops the laptop's vectors only; its worker embeds
            # them again and the caches hold all five once more
            job = await lc.run_job("reindex")
            assert job["result"]["vectors_dropped"] == 3
            assert await sd.store.read(lambda c: vectors.count(c, "server")) == 2
            await wait_for(lambda: _embedded(lc, 3), 120)
            await wait_for(lambda: len(_cached(sd)) == 5 or None, 60)

            # a laptop unit's text changes (a merged part): the store drops its stale
            # vector at once, the caches follow, and the laptop embeds it again
            uid = await ld.store.read(lambda c: c.execute(
                "SELECT id FROM units WHERE record_id = 'f1'").fetchone()[0])
            old = _cached(sd)[uid]
            await ld.store.write(lambda c: c.execute(
                "UPDATE units SET content = content || ' Then the docs.' WHERE id = ?",
                (uid,)))
            assert await ld.store.read(lambda c: vectors.vectors_of(c, [uid])) == {}
            await wait_for(lambda: _cached(sd).get(uid, old) != old or None, 120)
            assert len(_cached(sd)) == 5

            # a forget on the server of the laptop's session leaves no vector of it in
            # either cache, nor in the store
            await sc.forget("chat", machine="laptop")
            for dm in (sd, ld):
                await wait_for(lambda dm=dm: len(_cached(dm)) == 2 or None, 60)
            assert await sd.store.read(vectors.count) == 2
