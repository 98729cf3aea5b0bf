"""`memoryctl eval` / POST /v1/eval: how well recall finds this user's own turns, scored on
this machine (issue 31).

Turns are sampled and made into probes whose answer is known (`memoryd.recall.probe`);
each probe is searched as /v1/search would (`retrieve_sync`, k = 10) lexically and, with
embeddings on, joined with the units nearest it (`memoryd.recall.union`). Scored per mode:
R@1/5/10 (the exact turn in the top k; a near-duplicate folded into a hit counts),
NDCG@10 (one relevant turn: 1/log2(rank + 1)), any@10 (a hit in the turn's session
within one turn of it) and, with vectors, on how many probes they put a turn in the top
ten that the lexical list did not hold. The misses are listed with where the turn ranked
within 50, and the figures turned into plain suggestions (`memoryd.recall.advice`). A dry
run times a few probes and estimates the whole run.

The work runs as a search's does: rows on the store's readers (`read_rows`), the query
asked of the model there (`VectorQuery`), the model's questions
through `LLM.complete`; one probe at a time, one evaluation at a time (a second gets 409).
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memoryd.api import EvalMiss, EvalRequest, EvalResponse, EvalScore
from memoryd.embed import vector_query
from memoryd.errors import ConflictError
from memoryd.index.protocol import Index
from memoryd.index.text import snippet
from memoryd.llm import LLMError
from memoryd.recall.advice import NOTE, suggest
from memoryd.recall.probe import Probe, Turn, cloze, model_question, refuse_remote, sample_turns
from memoryd.recall.retrieval import Hit, retrieve_sync
from memoryd.recall.rows import read_rows
from memoryd.runtime.idle_release import RELEASE
from memoryd.store import Store
from memoryd.store.vectors import vectors_of

if TYPE_CHECKING:
    from memoryd.embed import Embedder
    from memoryd.llm import LLM

K = 10     # the ranking scored, as a search of ten
DEEP = 50  # a miss's rank is looked for this far
DRY = 10   # probes a dry run times
LEX, VEC = "lexical", "lexical+vectors"


@dataclass(slots=True)
class Ranked:
    probe: Probe
    ranks: dict[str, int | None]  # mode -> the turn's rank in the top K
    near: dict[str, bool]         # mode -> a hit within one turn of it, same session
    deep: dict[str, int | None]   # mode -> its rank within DEEP (misses only)
    added: bool                   # the vectors put a turn in the top ten


class Evaluator:
    def __init__(self, store: Store, index: Index, llm: LLM | None,
                 embed_off: str | None) -> None:
        self.store = store
        self.index = index
        self.llm = llm
        self.embed_off = embed_off  # why the daemon has no embedder (`memoryd.embed.off_reason`)
        self._lock = asyncio.Lock()

    async def run(self, req: EvalRequest, embed: Embedder | None) -> EvalResponse:
        """`embed`: the daemon's embedder (None: embeddings off, scored lexically only)."""
        if req.questions == "model":
            refuse_remote(self.llm)
        if self._lock.locked():
            raise ConflictError("an evaluation is already running; try again when it is done")
        async with self._lock:
            RELEASE.touch()
            return await self._run(req, embed)

    async def _run(self, req: EvalRequest, embed: Embedder | None) -> EvalResponse:
        t0 = time.monotonic()
        index = self.index
        turns, _ = await read_rows(self.store, index,
                                   lambda c: sample_turns(c, req.sample, req.seed))
        sampled_s = time.monotonic() - t0
        todo = turns[:DRY] if req.dry_run else turns
        clozes = cloze(turns, req.seed) if req.questions == "cloze" else []
        ranked: list[Ranked] = []
        took: list[float] = []
        stopped: list[str] = []
        for i, turn in enumerate(todo):
            t1 = time.monotonic()
            try:
                probe = clozes[i] if clozes else await self._model_probe(turn)
            except LLMError as e:  # down, paused, out of budget: score what was asked
                if not ranked:
                    raise
                n = len(ranked)
                stopped.append(f"The model stopped answering after {n} question"
                               f"{'s' if n != 1 else ''} ({e}): the figures are from those.")
                break
            if probe is not None:
                ranked.append(await self._rank(index, probe, embed))
            took.append(time.monotonic() - t1)
        vectors = await self._vectors(turns, embed)
        if embed is not None:  # the probes whose rank the vectors moved, either way
            moved = [(r.ranks[LEX] or K + 1) - (r.ranks[VEC] or K + 1) for r in ranked]
            vectors.update(better=sum(x > 0 for x in moved), worse=sum(x < 0 for x in moved))
        scores = [_score(LEX, ranked)]
        if embed is not None:
            scores.append(_score(VEC, ranked))
        missed = [r for r in ranked if None in r.ranks.values()]
        estimate = None
        if req.dry_run:  # the timed probes as they went, the rest at their median (a
            # one-off, the model's load on the first probe with vectors, is not paid again)
            typical = statistics.median(took) if took else 0.0
            estimate = round(sampled_s + sum(took) + (len(turns) - len(took)) * typical, 1)
        return EvalResponse(
            questions=req.questions, seed=req.seed, sampled=len(turns), probes=len(ranked),
            dry_run=req.dry_run, seconds=round(time.monotonic() - t0, 2),
            estimate_s=estimate, scores=scores, vectors=vectors,
            misses=[_miss(r) for r in missed[:req.show_misses]], missed=len(missed),
            suggestions=[] if req.dry_run else stopped + suggest(
                scores, vectors, len(ranked), req.questions, index.searchable()),
            note=NOTE[req.questions])

    async def _model_probe(self, turn: Turn) -> Probe | None:
        assert self.llm is not None
        text = await model_question(self.llm, turn)
        return Probe(turn, text) if text else None

    async def _rank(self, index: Index, probe: Probe, embed: Embedder | None) -> Ranked:
        # the nearest units, asked on the reader thread once for both searches
        vq = vector_query(embed, probe.text)
        t = probe.turn

        def rank(c: sqlite3.Connection) -> Ranked:
            out = Ranked(probe, {}, {}, {}, False)
            for mode, vec in ((LEX, None), (VEC, vq))[:1 if embed is None else 2]:
                if mode == VEC and vec is None:  # nothing to embed: ranked lexically,
                    # as search does then
                    out.ranks[VEC], out.near[VEC] = out.ranks[LEX], out.near[LEX]
                    if LEX in out.deep:
                        out.deep[VEC] = out.deep[LEX]
                    continue
                r = retrieve_sync(c, index, probe.text, k=K, vq=vec)
                out.ranks[mode] = _rank_of(t, r.hits)
                out.near[mode] = any(h.agent == t.agent and h.session_id == t.session_id
                                     and abs(h.seq - t.seq) <= 1 for h in r.hits)
                if mode == VEC:
                    out.added = any("lexical_rank" not in h.signals for h in r.hits)
                if out.ranks[mode] is None:
                    deep = retrieve_sync(c, index, probe.text, k=DEEP, vq=vec)
                    out.deep[mode] = _rank_of(t, deep.hits)
            return out

        with index.helper.asking():  # a search among the others
            got, _ = await read_rows(self.store, index, rank)
        return got

    async def _vectors(self, turns: list[Turn], embed: Embedder | None) -> dict[str, Any]:
        if embed is None:
            return {"scored": False, "reason": self.embed_off or "not started",
                    "embedded": None, "caught_up": None}
        ids = [t.unit_id for t in turns]
        have = await self.store.read(lambda c: len(vectors_of(c, ids)))
        st = await embed.status()
        return {"scored": True, "reason": None, "embedded": have, "of": len(ids),
                "caught_up": st.get("caught_up"), "pending": st.get("pending")}


def _rank_of(t: Turn, hits: list[Hit]) -> int | None:
    for i, h in enumerate(hits, 1):
        if h.unit_id == t.unit_id or t.unit_id in h.duplicates:
            return i
    return None


def _score(mode: str, ranked: list[Ranked]) -> EvalScore:
    n = len(ranked) or 1
    ranks = [r.ranks.get(mode) for r in ranked]

    def at(k: int) -> float:
        return round(sum(1 for x in ranks if x is not None and x <= k) / n, 3)

    return EvalScore(
        mode=mode, r1=at(1), r5=at(5), r10=at(10),  # type: ignore[arg-type]
        ndcg10=round(sum(1 / math.log2(x + 1) for x in ranks if x is not None) / n, 3),
        any10=round(sum(1 for r in ranked if r.near.get(mode)) / n, 3),
        vector_added=sum(r.added for r in ranked) if mode == VEC else None)


def _miss(r: Ranked) -> EvalMiss:
    t = r.probe.turn
    return EvalMiss(probe=r.probe.text, unit_id=t.unit_id, agent=t.agent,
                    session_id=t.session_id, role=t.role,
                    snippet=snippet(t.content, t.words, width=160),
                    ranks={m: x if x is not None else r.deep.get(m)
                           for m, x in r.ranks.items()})
