"""Which query terms each unit matched, and its score split by field (body, one-liner):
what a search's hits say about themselves (`why.matched`, `why.signals`), asked of the
committed index and the live tail together. `IndexReader` (`memoryd.index.reader`) is
built on it; `ranked` leaves, in each candidate's `at`, where it found the unit, so these
ask the same searcher again without reading the `unit_id` column.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import tantivy

from memoryd.index.bm25 import Freqs, MainStats
from memoryd.index.query import (
    WEAK,
    Occur,
    Q,
    field_match_queries,
    idf,
    ids_query,
    match_query,
    restricted,
    term_tokens,
    text_query,
)
from memoryd.index.tail import Combined, Tail
from memoryd.index.text import index_text, is_cjk, weak_term

MASK_TERMS = 20  # terms matched per search in `matched_ids` (f32: 24 exact bits)


class TermMatches:
    """`IndexReader`'s answers about given units (its base): which terms they matched,
    their scores by field."""

    schema: tantivy.Schema
    analyzer: Any
    tail: Tail
    _index: tantivy.Index | None
    _gen: int

    def searchable(self) -> bool:
        raise NotImplementedError

    def _view(self, idx: tantivy.Index, terms: list[str]
              ) -> tuple[tantivy.Searcher, MainStats | None]:
        raise NotImplementedError

    def matched_ids(self, terms: list[str], ids: list[int], at: dict[int, At] | None = None
                    ) -> dict[int, set[int]]:
        """Which of `terms` (by index) each of the given units matches in its body or
        one-liner, asked of the index: exactly what retrieval matched, with no text
        analyzed here. One search for up to `MASK_TERMS` terms: term i scores a constant
        2**i, so a unit's score is the bit set of the terms it matches (sums of distinct
        powers of two below 2**24 are exact in tantivy's f32 scores).

        `at`: where `ranked` found units (its candidates' "at"). When it found all of
        these in one searcher, that searcher is asked and the hits' addresses say which
        unit each is: no read of the `unit_id` fast field, whose reader costs ~50 µs a
        call at 1M units whatever the addresses (~20 at 200k)."""
        idx = self._index
        if not ids or not self.searchable() or idx is None:
            return {}
        if (held := _held(ids, at)) is not None:
            return _masked(self, held[0], terms, ids, held[2], freqs=held[3])[0]
        out: dict[int, set[int]] = {}
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            t = self.tail
            if stats is not None:
                out = t.matched(t.plan(s, stats, terms, w_body=1.0, w_one_liner=1.0), ids)
            ids = t.others(ids)
        if not ids:
            return out
        got, _ = _masked(self, s, terms, ids, _unit_ids(s))
        for u, bits in got.items():
            out.setdefault(u, set()).update(bits)
        return out

    def matched_fields(self, terms: list[str], ids: list[int], at: dict[int, At] | None
                       ) -> tuple[dict[int, set[int]], dict[int, set[int]] | None]:
        """`matched_ids`, and which of the terms each unit's one-liner holds, from the
        same search, where `ranked` found all of them in one searcher (else None: what
        `split_scores` then analyzes the one-liners' text for, ~6 us each)."""
        held = _held(ids, at) if ids and self.searchable() else None
        if held is None:
            return self.matched_ids(terms, ids, at), None
        return _masked(self, held[0], terms, ids, held[2], one_liners=True, freqs=held[3])

    def matched(self, terms: list[str], texts: dict[int, str]) -> dict[int, set[int]]:
        """Which of `terms` (by index) each text (unit id -> content and one-liner)
        contains, by the index's own analysis (a phrase: all of its tokens; a single CJK
        character: as a prefix). For the fallback scan, when the index cannot answer."""
        wanted = [(i, term_tokens(self.analyzer, t), is_cjk(t) and len(t) == 1)
                  for i, t in enumerate(terms)]
        out: dict[int, set[int]] = {}
        for uid, text in texts.items():
            have = set(self.analyzer.analyze(index_text(text)))
            got = set()
            for i, tokens, prefix in wanted:
                if prefix:
                    if any(h.startswith(tokens[0]) for h in have):
                        got.add(i)
                elif tokens and all(t in have for t in tokens):
                    got.add(i)
            out[uid] = got
        return out

    def field_scores(self, terms: list[str], ids: list[int], *, w_body: float = 1.0,
                     w_one_liner: float = 3.0, at: dict[int, At] | None = None
                     ) -> dict[int, tuple[float, float]]:
        """(body score, one-liner score) of those of the given units whose one-liner
        matches (for the others the body score is the whole score). `at`: as for
        `matched_ids`, used while no commit came since `ranked` (the scores are the
        present searcher's)."""
        idx = self._index
        if not ids or not self.searchable() or idx is None:
            return {}
        live: dict[int, tuple[float, float]] = {}
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            held = _held(ids, at)
            if held is not None and held[1] == self._gen:
                s, unit_ids = held[0], held[2]  # the same segments as the present one
            else:
                unit_ids = _unit_ids(s)
            t = self.tail
            if stats is not None:
                live = t.field_scores(t.plan(s, stats, terms, w_body=w_body,
                                             w_one_liner=w_one_liner), ids)
            ids = t.others(ids)
            c = Combined(s, t, stats) if stats is not None else None
            qs = {fs: text_query(self.schema, self.analyzer, c or s, terms, w_body=w_body,
                                 w_one_liner=w_one_liner, fields=fs,
                                 boost=c.boost if c else None)
                  for fs in (("one_liner",), ("body",))}
        if not ids:
            return live
        only = [(tantivy.Occur.Must, ids_query(self.schema, ids))]

        def scores(fields: tuple[str, ...]) -> dict[int, float]:
            q = qs[fields]
            if q is None:
                return {}
            res = s.search(restricted(q, only), len(ids), count=False)
            uids = unit_ids([a for _, a in res.hits])
            return {u: float(sc) for u, (sc, _) in zip(uids, res.hits, strict=True)}

        one = scores(("one_liner",))
        if not one:
            return live
        body = scores(("body",))
        return {**{u: (body.get(u, 0.0), sc) for u, sc in one.items()}, **live}

    def split_scores(self, terms: list[str], lines: dict[int, str], scores: dict[int, float],
                     *, w_body: float = 1.0, w_one_liner: float = 3.0,
                     at: dict[int, At] | None = None, held: dict[int, set[int]] | None = None
                     ) -> dict[int, tuple[float, float]]:
        """`field_scores` of the units with these one-liners (unit id -> its one-liner)
        and whole scores (`ranked`'s), without a search while the tail holds no units: a
        one-liner match scores a flat weight times the term's IDF (`text_query`), so a
        unit's one-liner share is that sum over the terms its one-liner holds (`matched`:
        the index's analysis of a short text) and the body's is the rest. The same
        figures to f32 rounding as the two searches `field_scores` runs (0.2 ms of a
        search's 1.6 at 200k units with one-liners). While the tail holds units their
        statistics join the index's: `field_scores`. `held`: the terms each unit's
        one-liner holds, when `matched_fields` said (no analysis then)."""
        idx = self._index
        if not lines or not self.searchable() or idx is None:
            return {}
        with self.tail.lock:
            live = bool(self.tail.docs)
            found_at = _held(list(lines), at)
            # the IDFs as `ranked` read them while no commit came since (the same segments)
            s: Any = found_at[3] if found_at is not None and found_at[1] == self._gen \
                else idx.searcher()
        if live:
            return self.field_scores(terms, list(lines), w_body=w_body,
                                     w_one_liner=w_one_liner, at=at)
        weights: dict[int, float] = {}
        out: dict[int, tuple[float, float]] = {}
        found = self.matched(terms, lines) if held is None else {
            u: held.get(u, ()) for u in lines}
        for uid, hit in found.items():
            if not hit:
                continue
            one = 0.0
            for i in sorted(hit):  # in f32, as tantivy scores (the query's term order)
                if i not in weights:
                    w = _f32(w_one_liner * idf(s, term_tokens(self.analyzer, terms[i])))
                    weights[i] = _f32(w * _f32(WEAK)) if weak_term(terms[i]) else w
                one = _f32(one + weights[i])
            whole = scores[uid]
            body = _f32(whole - one)
            out[uid] = (body if body > whole * 1e-6 else 0.0, one)
        return out


def _f32(x: float) -> float:
    """`x` rounded to the f32 tantivy scores in."""
    return array("f", (x,))[0]


At = tuple[tantivy.Searcher, tantivy.DocAddress, int, Freqs]
"""Where `ranked` found a unit: the searcher, the address in it, the searchers'
generation then (`SearchIndex._gen`), and the frequencies it read of that searcher (the
hits' terms and one-liners ask for the same ones again)."""
UnitIds = Callable[[list[tantivy.DocAddress]], list[int]]
"""The unit id of each of a list of addresses (of one searcher)."""


def _unit_ids(s: tantivy.Searcher) -> UnitIds:
    """Unit ids by address from the `unit_id` fast field."""
    return lambda addrs: [int(u) for u in s.fast_field_values("unit_id", addrs)]


def _held(ids: list[int], at: dict[int, At] | None
          ) -> tuple[tantivy.Searcher, int, UnitIds, Freqs] | None:
    """When `ranked` found all of `ids` in one searcher: that searcher, its generation,
    unit ids by address from what `ranked` found (no fast-field read), and the
    frequencies `ranked` read of it; else None."""
    found = [at.get(i) for i in ids] if at else []
    if not found or any(f is None or f[0] is not found[0][0] for f in found):
        return None
    where = {(f[1].segment_ord, f[1].doc): u for u, f in zip(ids, found, strict=True)}
    return found[0][0], found[0][2], lambda addrs: [
        where[(a.segment_ord, a.doc)] for a in addrs], found[0][3]


def _masked(ix: TermMatches, s: tantivy.Searcher, terms: list[str], ids: list[int],
            unit_ids: UnitIds, *, one_liners: bool = False, freqs: Any = None
            ) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """`matched_ids` in one searcher: the terms each of `ids` matches there, one search
    per `MASK_TERMS` terms (`unit_ids`: the unit id of each of a list of addresses); with
    `one_liners`, also the terms each one's one-liner holds (a term's body and one-liner
    clauses scoring their own bits: half as many terms per search), else {}. `freqs`:
    `s`'s frequencies as `ranked` read them (`Freqs`), when it found the units.

    The units asked about are the query's one required clause and each term's clause
    an optional one beside it (a unit matching none scores 0 and is left out): the
    same hits and scores as a required union of the terms' clauses (0.14 ms at 1M
    units with one-liners, 2-3 terms, CPU p50) or each clause intersected with the
    units (0.11: the units' clause built once per term), in 0.07 (bench/README, branch
    `reader3`)."""
    matched: dict[int, set[int]] = {}
    ones: dict[int, set[int]] = {}
    only = (Occur.Must, ids_query(ix.schema, ids))
    step = MASK_TERMS // 2 if one_liners else MASK_TERMS
    freqs = freqs or s
    for lo in range(0, len(terms), step):
        group = []
        for i, t in enumerate(terms[lo:lo + step]):
            if one_liners:
                body, one = field_match_queries(ix.schema, ix.analyzer, freqs, t)
                bits = [(body, 1 << i), (one, 1 << (step + i))]
            else:
                bits = [(match_query(ix.schema, ix.analyzer, freqs, t), 1 << i)]
            group += [(Occur.Should, Q.const_score_query(q, float(bit)))
                      for q, bit in bits if q is not None]
        if not group:
            continue
        res = s.search(Q.boolean_query([only, *group]), len(ids), count=False)
        for u, (score, _) in zip(unit_ids([a for _, a in res.hits]), res.hits, strict=True):
            bits = round(score)
            got = {lo + i for i in range(step) if bits >> i & 1}
            if one_liners:
                held = {lo + i for i in range(step) if bits >> (step + i) & 1}
                got |= held
                if held:
                    ones.setdefault(u, set()).update(held)
            if got:
                matched.setdefault(u, set()).update(got)
    return matched, ones
