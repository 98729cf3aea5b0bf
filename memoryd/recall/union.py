"""The vector signal beside the lexical ranking (issue 31, the `memoryd[embed]` extra): the
union of the two rankings.

The units nearest the query by meaning (`memoryd.embed.VectorQuery`: the model's process
ranks every vector of the database the search reads) are kept to those that pass the
search's filters and are still there with a vector (`vector_list`, one statement), and
joined with the lexical ranking (`memoryd.recall.retrieval`): each unit's place is
weighted reciprocal-rank fusion of its ranks in the two lists, 1/(k + lexical rank) +
w/(k + vector rank), a unit of one list taking that list's share only (`fuse`). A unit
both find rises; a unit the keywords never found (the question asked in other words or
in another language, a turn that shares no word with it) gets in. A unit not yet
embedded is in the lexical list only: ranked as without vectors.

Why the union and not a re-ordering of the lexical candidates (what shipped before): on
297 probes held out by set (bench/eval_embed_paraphrase.py: the admission sets' labelled
statements and paraphrases, and the LongMemEval dev questions), re-ordering the best 30,
gated or not, at any weight or pool depth, moved nothing (R@10 0.881 -> 0.869-0.884, the
intervals spanning zero): the evidence the vectors find shares no word with the probe,
so no lexical list holds it. The union (k 60, lists of 30; w 1, chosen in every fold
left out by set): R@10 0.881 -> 0.931, NDCG@10 0.729 -> 0.799, R@1 0.502 -> 0.584. No
gate: it ranks every query.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memoryd.index.fallback import unit_where
from memoryd.index.query import Filters
from memoryd.recall.rows import candidates

POOL = 200
"""Nearest units asked of the model's process for a filtered search: the filters (a
project, an agent, the asking session's tail) keep those of the search, the first
`union_depth` of them count. Unfiltered, a few more than those (`SPARE`: units gone
since the model's copy was read) will do, and reading their rows costs less."""
SPARE = 10


def asked(f: Filters, n: int) -> int:
    """How many nearest units a search with filters `f` asks for, to keep its first
    `n`."""
    return max(POOL, n) if f.narrows() else n + SPARE


def vector_list(conn: sqlite3.Connection, vq: Any, f: Filters, n: int
                ) -> list[dict[str, Any]] | None:
    """The first `n` units nearest the query (`vq`: a `VectorQuery`) that pass the
    filters and are still in the database with a vector, best first: their candidate
    rows (as the lexical ranking's), each with its `cosine`. None when the nearest
    cannot be had (the ranking is lexical)."""
    nearest = vq.nearest(conn, asked(f, n))
    if nearest is None:
        return None
    clauses, args = unit_where(f)
    clauses.append("EXISTS (SELECT 1 FROM unit_vectors v WHERE v.unit_id = u.id)")
    rows = candidates(conn, [u for u, _ in nearest], where=(clauses, args))
    out = []
    for uid, cosine in nearest:
        if (r := rows.get(uid)) is None:  # filtered out, or gone since the copy was read
            continue
        r.update(bm25=0.0, cosine=cosine, signals={}, lexical=False)
        out.append(r)
        if len(out) == n:
            break
    return out


def fuse(lexical: list[dict[str, Any]], vector: list[dict[str, Any]],
         known: dict[int, dict[str, Any]], *, rrf_k: float, w_vector: float
         ) -> list[dict[str, Any]]:
    """Both lists as one, best first: `score` is 1/(rrf_k + lexical rank) + w_vector /
    (rrf_k + vector rank), of the lists a unit is in. A unit of the vector list is its
    lexical candidate when it is one (`known`: every candidate by id, its score's parts
    and `why` kept; below the lexical list it takes no lexical share), else its row from
    `vector_list` (`lexical` False: no words matched). `why`: `vector` the cosine,
    `vector_rank`, `lexical_rank`."""
    fused: dict[int, dict[str, Any]] = {}
    for rank, c in enumerate(lexical, 1):
        c["score"] = 1.0 / (rrf_k + rank)
        c["signals"]["lexical_rank"] = float(rank)
        fused[c["unit_id"]] = c
    folded = {d for c in lexical for d in c.get("dups", ())}  # their twins are listed
    for rank, v in enumerate(vector, 1):
        uid = v["unit_id"]
        if uid in folded:
            continue
        c = fused.get(uid)
        if c is None:
            c = fused[uid] = known.get(uid, v)
            c["score"] = 0.0
            c.pop("dups", None)
            c["signals"].pop("lexical_rank", None)
            c["signals"].pop("session_repeat", None)
        c["score"] += w_vector / (rrf_k + rank)
        c["signals"]["vector"] = round(v["cosine"], 4)
        c["signals"]["vector_rank"] = float(rank)
    return sorted(fused.values(), key=lambda c: -c["score"])
