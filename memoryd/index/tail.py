"""The live tail: units added to the index writer since its last commit, searchable at once.

A tantivy commit writes and syncs a new segment (16 `fdatasync` calls, 130-470 ms on a
loaded disk), and a unit reaches tantivy's searchers only after one. So the writer keeps
what it added since its last commit here as well, and every search asks the tail beside
the index (`SearchIndex.ranked`, `matched_ids`, `field_scores`). Commits can then be
rare (`TailPolicy`); a crash loses nothing, since the gap since the last commit is
indexed again from the store on start, as before.

Scores. The tail scores its documents itself with tantivy's own BM25 and the statistics
the index will have once they are committed: document count, document frequency and
average body length of the index *plus* the tail (`MainStats` read from the index by an
`explain`, the tail's own counted here), field lengths quantized with tantivy's
`FIELD_NORMS_TABLE`, tokens from the index's own analyzer, and the query's shape from
`memoryd.index.query.text_query`: per term, BM25 of each of its tokens in the body
(all required), a flat `w_one_liner * idf` for a one-liner match, a single CJK character
as a prefix scoring 1, a weak term times `WEAK`, AND or OR over the terms. A tail
document's score is therefore what tantivy gives it after the commit (to f32 rounding,
~1e-6 relative); the committed documents' scores move by the tail's share of the
statistics when it is committed, as they would have anyway. A RAM tantivy index for the
tail was the other way: its BM25 uses the tail's own statistics (a word new to a
20-document tail is "rare"), and a score cannot be corrected afterwards without each
term's frequency and the field length, which tantivy-py does not give out.

Deletes. `drop(ids)` takes changed and deleted units out of the tail and marks them
`replaced`: the index's (older) documents for them are left out of its answers until the
commit that deletes them, so a forgotten unit can never come back through the tail.

Consistency with the index. `lock` is held while a reader takes the index's searcher and
asks the tail, and while the writer reloads the searchers after a commit and empties the
tail (`SearchIndex.committed`): a reader sees the tail and the index from the same side of
a commit, never a unit in neither and never one in both.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import tantivy

from memoryd.index.bm25 import K1, B, MainStats, fieldnorm, idf
from memoryd.index.query import WEAK, Filters, term_tokens
from memoryd.index.text import is_cjk, weak_term

TAIL_COMMIT_DOCS = 500   # commit when the tail holds this many documents,
TAIL_COMMIT_S = 5.0      # or when its oldest is this old (and at shutdown)


@dataclass(frozen=True, slots=True)
class TailPolicy:
    """When the writer commits what the tail holds: the `[index]` settings
    `tail_commit_docs` and `tail_commit_s` (the daemon sets them from its config, which
    validates them). A store opened without a daemon (benches, the fleet's tests) reads
    the same settings' environment variables, `MEMORYD_INDEX__TAIL_COMMIT_DOCS` and
    `MEMORYD_INDEX__TAIL_COMMIT_S`; a value that is not a positive number is ignored."""

    docs: int = TAIL_COMMIT_DOCS
    seconds: float = TAIL_COMMIT_S

    @classmethod
    def from_env(cls, environ: Any = os.environ) -> TailPolicy:
        return cls(docs=int(_positive(environ.get(ENV_DOCS), TAIL_COMMIT_DOCS)),
                   seconds=_positive(environ.get(ENV_S), TAIL_COMMIT_S))


ENV_DOCS = "MEMORYD_INDEX__TAIL_COMMIT_DOCS"
ENV_S = "MEMORYD_INDEX__TAIL_COMMIT_S"


def _positive(raw: str | None, default: float) -> float:
    try:
        v = float(raw) if raw is not None else default
    except ValueError:
        return default
    return v if v > 0 and v == v and v != float("inf") else default


@dataclass(slots=True)
class TailDoc:
    unit_id: int
    session_pk: int
    seq: int
    ts: float
    speaker: int
    dup: int
    chars: int
    body: Counter[str]   # token -> frequency
    length: int          # body tokens, as tantivy counts them
    one_liner: frozenset[str]

    def rank_fields(self, score: float) -> dict[str, Any]:
        return {"unit_id": self.unit_id, "session_pk": self.session_pk, "seq": self.seq,
                "ts": self.ts, "speaker": self.speaker, "dup": self.dup,
                "chars": self.chars, "bm25": score}


@dataclass(slots=True)
class _Term:
    """One query term as the tail matches it (`memoryd.index.query.text_query`)."""

    at: int            # its index in the query's terms
    text: str
    tokens: list[str]
    unique: list[str]
    prefix: bool       # a single CJK character: any token starting with it
    weight: float      # WEAK for a lone digit or letter
    avgdl: float = 1.0
    one_liner: float = 0.0  # a one-liner match's flat score
    body_w: list[float] = field(default_factory=list)  # per unique token: idf * (1 + K1)


class Tail:
    def __init__(self, analyzer: tantivy.TextAnalyzer) -> None:
        self.analyzer = analyzer
        self.lock = threading.RLock()
        self.docs: dict[int, TailDoc] = {}
        self.replaced: set[int] = set()
        # statistics of what the writer holds: like tantivy's, they keep a document
        # deleted before its commit (its segment counts it until a merge)
        self.df: Counter[str] = Counter()
        self.ol_df: Counter[str] = Counter()
        # postings of the documents held (no ghosts): which ones a query can match
        self.postings: dict[str, set[int]] = {}
        self.ol_postings: dict[str, set[int]] = {}
        self.tokens = 0
        self.ghosts = 0     # tail documents replaced or deleted since the commit
        self.main_gone = 0  # committed documents deleted since (not in `live` any more)
        self.since: float | None = None  # monotonic time of the first add since a commit
        self.last_tokens: tuple[str, ...] = ()  # a few tokens of the last commit (probes)
        # while a commit is under way (`mark`): what came after it, not in that commit
        self._after: list[tuple[str, Any]] | None = None

    def __len__(self) -> int:
        return len(self.docs)

    def age(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    # -- the writer's side ------------------------------------------------------------

    def doc(self, row: Any, body: str, one_liner: str, *, speaker: int, dup: int
            ) -> TailDoc:
        """A tail document of a unit row (`UNIT_ROWS`) and its index text (made outside
        the lock: analysis is the costly part)."""
        toks = self.analyzer.analyze(body)
        return TailDoc(int(row["unit_id"]), int(row["session_pk"]), int(row["seq"]),
                       float(row["ts"]) if row["ts"] is not None else 0.0, speaker, dup,
                       len(row["content"]), Counter(toks), len(toks),
                       frozenset(self.analyzer.analyze(one_liner)) if one_liner
                       else frozenset())

    def mark(self) -> None:
        """A commit of everything held so far starts (the writer's commit runs in another
        thread while new units keep coming): what is added or dropped from now on stays
        in the tail after that commit (`committed`)."""
        with self.lock:
            self._after = []

    def abort(self) -> None:
        """The commit begun at `mark` failed: everything stays in the tail."""
        self._after = None

    def add(self, docs: list[TailDoc]) -> None:
        with self.lock:
            if self._after is not None:
                self._after.append(("add", docs))
            if docs and self.since is None:
                self.since = time.monotonic()
            for d in docs:
                self._remove(d.unit_id)
                self.docs[d.unit_id] = d
                self.df.update(d.body.keys())
                self.ol_df.update(d.one_liner)
                for x in d.body:
                    self.postings.setdefault(x, set()).add(d.unit_id)
                for x in d.one_liner:
                    self.ol_postings.setdefault(x, set()).add(d.unit_id)
                self.tokens += d.length

    def drop(self, ids: list[int]) -> None:
        """Changed or deleted units: out of the tail, and the index's documents for them
        out of every answer until the next commit."""
        with self.lock:
            if self._after is not None:
                self._after.append(("drop", ids))
            for u in ids:
                if u not in self.docs and u not in self.replaced:
                    self.main_gone += 1
                self._remove(u)
                self.replaced.add(u)

    def _remove(self, uid: int) -> None:
        d = self.docs.pop(uid, None)
        if d is None:
            return
        self.ghosts += 1  # its statistics stay, as in tantivy
        for post, toks in ((self.postings, d.body), (self.ol_postings, d.one_liner)):
            for x in toks:
                got = post.get(x)
                if got is not None:
                    got.discard(uid)
                    if not got:
                        del post[x]

    def committed(self) -> None:
        """The commit started at `mark` is done (call with `lock` held, with the reload):
        the tail keeps only what came after the mark, as if added to an empty tail."""
        after, self._after = self._after or [], None
        self.clear()
        for op, arg in after:
            (self.add if op == "add" else self.drop)(arg)

    def clear(self) -> None:
        """Everything is committed (call with `lock` held, with the reload)."""
        self._after = None
        if self.df:
            self.last_tokens = tuple(t for t, _ in self.df.most_common(3))
        self.docs.clear()
        self.replaced.clear()
        self.df.clear()
        self.ol_df.clear()
        self.postings.clear()
        self.ol_postings.clear()
        self.tokens = 0
        self.ghosts = self.main_gone = 0
        self.since = None

    # -- readers (with `lock` held, and the searcher taken under it) -----------------------

    def plan(self, searcher: tantivy.Searcher, main: MainStats, terms: list[str], *,
             w_body: float, w_one_liner: float) -> list[_Term]:
        """The terms with their weights under the committed-plus-tail statistics."""
        n = main.docs + len(self.docs) + self.ghosts
        avgdl = (main.tokens + self.tokens) / n if n else 1.0
        live = main.live + len(self.docs) - self.main_gone
        out = []
        for at, t in enumerate(terms):
            tokens = term_tokens(self.analyzer, t)
            if not tokens:
                continue
            unique = list(dict.fromkeys(tokens))
            dfs = {x: searcher.doc_freq("body", x) + self.df.get(x, 0) for x in unique}
            df_min = min(dfs[x] for x in tokens)
            p = _Term(at, t, tokens, unique, is_cjk(t) and len(t) == 1,
                      WEAK if weak_term(t) else 1.0, avgdl)
            p.one_liner = w_one_liner * idf(df_min, live)
            p.body_w = [w_body * (1.0 + K1) * idf(dfs[x], n) for x in unique]
            out.append(p)
        return out

    def _body(self, p: _Term, d: TailDoc) -> float | None:
        """The term's body score in `d`, or None when it does not match there."""
        if p.prefix:
            return 1.0 if any(x.startswith(p.text) for x in d.body) else None
        if not all(x in d.body for x in p.unique):
            return None
        norm = K1 * (1.0 - B + B * fieldnorm(d.length) / p.avgdl)
        return sum(w * d.body[x] / (d.body[x] + norm)
                   for x, w in zip(p.unique, p.body_w, strict=True))

    def _one_liner(self, p: _Term, d: TailDoc) -> bool:
        if not d.one_liner:
            return False
        if p.prefix:
            return any(x.startswith(p.text) for x in d.one_liner)
        return all(x in d.one_liner for x in p.unique)

    def score(self, plan: list[_Term], d: TailDoc, mode: str,
              fields: tuple[str, ...] = ("body", "one_liner")) -> tuple[float, set[int]]:
        """(score, indexes of the query's terms it matches); a score of -1 when the
        document does not match the query."""
        total, hit = 0.0, set()
        for p in plan:
            s, matched = 0.0, False
            if "body" in fields:
                b = self._body(p, d)
                if b is not None:
                    s, matched = b, True
            if "one_liner" in fields and self._one_liner(p, d):
                s, matched = s + p.one_liner, True
            if matched:
                total += s * p.weight
                hit.add(p.at)
            elif mode == "and":
                return -1.0, hit
        return (total, hit) if hit else (-1.0, hit)

    def matched(self, plan: list[_Term], ids: list[int]) -> dict[int, set[int]]:
        """`SearchIndex.matched_ids` for those of `ids` the tail holds."""
        out = {}
        for u in ids:
            d = self.docs.get(u)
            if d is not None and (got := self.score(plan, d, "or")[1]):
                out[u] = got
        return out

    def field_scores(self, plan: list[_Term], ids: list[int]
                     ) -> dict[int, tuple[float, float]]:
        """`SearchIndex.field_scores` for those of `ids` the tail holds."""
        out = {}
        for u in ids:
            d = self.docs.get(u)
            if d is None:
                continue
            one = self.score(plan, d, "or", fields=("one_liner",))[0]
            if one >= 0:
                body = self.score(plan, d, "or", fields=("body",))[0]
                out[u] = (max(0.0, body), one)
        return out

    def others(self, ids: list[int]) -> list[int]:
        """Those of `ids` the index answers for: not in the tail, not replaced by it."""
        return [u for u in ids if u not in self.docs and u not in self.replaced]

    def search(self, plan: list[_Term], f: Filters, pks: list[int] | None, mode: str
               ) -> list[dict[str, Any]]:
        """The tail's matches under the filters, as `SearchIndex.ranked` candidates,
        best first (ties: older unit first, as tantivy's doc order would have them)."""
        allowed = set(pks) if pks is not None else None
        out = []
        for u in self._candidates(plan, mode):
            d = self.docs[u]
            if not _passes(d, f, allowed):
                continue
            sc, _ = self.score(plan, d, mode)
            if sc >= 0:
                out.append(d.rank_fields(sc))
        out.sort(key=lambda c: (-c["bm25"], c["unit_id"]))
        return out

    def _candidates(self, plan: list[_Term], mode: str) -> set[int]:
        """The documents that can match: by the postings, not a look at every one."""
        per = []
        for p in plan:
            got: set[int] = set()
            for post in (self.postings, self.ol_postings):
                if p.prefix:
                    for x, ids in post.items():
                        if x.startswith(p.text):
                            got |= ids
                    continue
                sets = [post.get(x) for x in p.unique]
                if all(sets):
                    got |= set.intersection(*sets)  # type: ignore[arg-type]
            per.append(got)
        if not per:
            return set()
        return set.intersection(*per) if mode == "and" else set().union(*per)


def _passes(d: TailDoc, f: Filters, allowed: set[int] | None) -> bool:
    if allowed is not None and d.session_pk not in allowed:
        return False
    if f.since is not None and d.ts < f.since:
        return False
    if f.until is not None and d.ts > f.until:
        return False
    return not any(d.session_pk == pk and d.seq >= max(0, from_seq)
                   for pk, from_seq in f.exclude)


class Combined:
    """The index's searcher with the tail counted in, for `text_query`: its document
    count and frequencies are the committed index's plus the tail's, so a one-liner's
    flat IDF is what it will be after the commit; and `boost` rescales each body token's
    BM25 in the index from the index's IDF to that one. A committed unit then scores as
    it will after the commit, but for the average body length (the tail's share of it:
    a small fraction of a percent once the index holds more than a few hundred units).
    Call with the tail's lock held."""

    def __init__(self, searcher: tantivy.Searcher, tail: Tail, main: MainStats) -> None:
        self.searcher, self.tail, self.main = searcher, tail, main
        self.num_docs = main.live + len(tail.docs) - tail.main_gone
        self._n = main.docs + len(tail.docs) + tail.ghosts

    def doc_freq(self, fname: str, token: str) -> int:
        extra = self.tail.df if fname == "body" else self.tail.ol_df
        return int(self.searcher.doc_freq(fname, token)) + extra.get(token, 0)

    def boost(self, token: str) -> float:
        df = self.searcher.doc_freq("body", token)
        add = self.tail.df.get(token, 0)
        if not df or (not add and self._n == self.main.docs):
            return 1.0
        return idf(df + add, self._n) / idf(df, self.main.docs)
