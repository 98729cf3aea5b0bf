"""The vector signal fused into the lexical ranking (issue 31, the `memoryd[embed]` extra).

The best `fuse_top` candidates of the lexical ranking (`memoryd.recall.retrieval`) are
re-ordered by weighted reciprocal-rank fusion of their lexical rank and their rank by
cosine to the query's embedding (`memoryd.embed`); the fused order takes over the lexical
scores (the best score goes to the first, and so on), so the steps after it (duplicates,
session diversity) work as before. A unit not yet embedded keeps its lexical rank for
both: ranked as without vectors. Every embedded candidate shows its cosine in `why`, and
the weight its vector rank had (`vector_weight`). Where the gate (below) stays shut, or
fewer than two candidates have a vector (a store still being embedded, a one-hit query),
the query is not even embedded (`memoryd.embed.QueryVector`): nothing of it shows in `why`.

**The gate.** On the dev split (bench/eval_embed.py, 30 questions) fusing every query
ranked worse than the lexical ranking alone (R@10 0.920 -> 0.880-0.887 at any weight):
where the lexical ranking is sure of itself, the vector rank only pulls in plausible
turns that do not answer. So the vector rank weighs only where the lexical ranking is
flat: its tenth hit scores close to its first (`lexical_margin` below the gate's
threshold), no turn stands out by its words. What it is worth, measured since on 297
probes left out by set (bench/eval_embed_paraphrase.py: the admission sets' labelled
statements and the dev questions): nothing either way (R@10 0.881 -> 0.877, NDCG@10 0.729
-> 0.724, both intervals spanning zero), and no weight or pool depth of this re-ordering
does better. What pays is the union with the vector ranking over the whole store (R@10
0.923, NDCG@10 0.790 there): the evidence it finds shares no word with the query, so no
lexical candidate list holds it. That needs a vector index, which memoryd does not have
yet (issue 31).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memoryd.embed.model import cosines
from memoryd.store.vectors import vectors_of


def fuse(conn: sqlite3.Connection, cands: list[dict[str, Any]], qvec: Any, *, top_n: int,
         rrf_k: float, w_vector: float) -> None:
    """Re-order the best `top_n` candidates by 1/(k + lexical rank) + w_vector/(k + vector
    rank) and give them the lexical scores in that order; `signals["vector"]` is a unit's
    cosine to the query, `vector_rank` its rank by it. The embedded units share out the
    lexical ranks they hold by cosine; a unit without a vector keeps its lexical rank as
    its vector rank: with no vectors the order is the lexical one, and half-embedded
    candidates do not push out the others. So with fewer than two embedded candidates
    nothing can move, and the query is not embedded (`qvec` may be a callable giving the
    vector, or None when embedding fails: then nothing moves either)."""
    top = sorted(cands, key=lambda c: -c["score"])[:top_n]
    got = vectors_of(conn, [c["unit_id"] for c in top])
    if len(got) < 2:
        return
    if callable(qvec):
        qvec = qvec()
    if qvec is None:
        return
    have = [c for c in top if c["unit_id"] in got]
    sims = cosines(qvec, [got[c["unit_id"]] for c in have])
    lex = {c["unit_id"]: r for r, c in enumerate(top, 1)}
    vec = dict(lex)
    slots = sorted(lex[c["unit_id"]] for c in have)
    by_sim = sorted(zip(sims, (c["unit_id"] for c in have)), key=lambda x: -x[0])
    for r, (_, uid) in zip(slots, by_sim):
        vec[uid] = r
    for c, sim in zip(have, sims):  # why: the cosine, where it put the unit, its weight
        c["signals"]["vector"] = round(sim, 4)
        c["signals"]["vector_rank"] = float(vec[c["unit_id"]])
        c["signals"]["vector_weight"] = w_vector
    if w_vector <= 0:
        return
    fused = sorted(top, key=lambda c: -(1.0 / (rrf_k + lex[c["unit_id"]])
                                        + w_vector / (rrf_k + vec[c["unit_id"]])))
    scores = [c["score"] for c in top]  # best first
    for c, score in zip(fused, scores):
        c["score"] = score


def lexical_margin(scores: list[float]) -> float:
    """How far the last of these scores (best first: the lexical top ten) falls below
    the first, as a share of the first; 0 for no scores."""
    if not scores or scores[0] <= 0:
        return 0.0
    return round((scores[0] - scores[-1]) / scores[0], 4)


def gate_features(terms: list[str], hits: list[Any]) -> dict[str, float]:
    """What the lexical ranking says of itself, for the gate that decides whether the
    vector rank weighs: `cover1` the share of the query's terms the first hit holds,
    `cover5` the same over the first five (mean), `full10` the share of the first ten that
    hold every term, `margin` how far the tenth score falls below the first ((s1 -
    s10) / s1), `gap12` the first's lead over the second ((s1 - s2) / s1), `top_share`
    the first's share of the first ten's scores, `n_terms` the terms searched."""
    n = len(terms) or 1
    cover = [len(set(h.matched)) / n for h in hits[:10]]
    s = [h.score for h in hits[:10]]
    first = s[0] if s and s[0] > 0 else 0.0
    return {
        "cover1": round(cover[0], 4) if cover else 0.0,
        "cover5": round(sum(cover[:5]) / len(cover[:5]), 4) if cover else 0.0,
        "full10": round(sum(c >= 1.0 for c in cover) / 10, 4),
        "margin": round((first - s[-1]) / first, 4) if first else 0.0,
        "gap12": round((first - s[1]) / first, 4) if first and len(s) > 1 else 0.0,
        "top_share": round(first / sum(s), 4) if first else 0.0,
        "n_terms": float(len(terms)),
    }
