"""Where tantivy's time goes in the query memoryd builds: the same queries timed in other
shapes against one index (a copy of bench/search.py's bare-tantivy twin, or memoryd's
own index directory), per query class, CPU of this thread per search.

tantivy's block-max WAND prunes a top-level union of plain term scorers, but only under
a bare `TopDocs` collector: tantivy-py's `Searcher.search` always collects through a
`MultiCollector`, so every shape scores every match (bench/README.md, "wand" section:
the shapes cost the same, CPU grows with the postings walked). Shapes:

  memoryd      text_query as memoryd builds it (as of this run), top 15, no count
  memoryd-30   the same, top 30 (what `ranked` asks for k=15 since the `wand` pass)
  maxscore-30  what `ranked` runs for an OR query: `memoryd.index.maxscore` where its cost
               model says pruning pays, else the plain query; top 30
  memoryd-75   the same, top 75 (what `ranked` asked for k=15 before), no count
  memoryd-cnt  the same, top 75, counted
  no-1liner    text_query over the body only
  no-wrap      body and one-liner as plain term queries, no WEAK boost, no const score
  flat         a flat OR of every term's body tokens (AND mode: a flat AND)
  flat+1l      flat, with the one-liner's tokens as further plain term clauses

    .venv/bin/python bench/query_shapes.py --index /path/to/tantivy-dir --queries 150
    .venv/bin/python bench/query_shapes.py --index ... --collector   # does search prune?
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from bigstore import bare_tantivy  # noqa: E402

import tantivy  # noqa: E402

from memoryd.index import maxscore, query as mq  # noqa: E402
from memoryd.index.bm25 import main_stats  # noqa: E402
from memoryd.index.schema import build_analyzer, build_schema  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402

Q, Occur = tantivy.Query, tantivy.Occur
SCHEMA = build_schema()
AN = build_analyzer()


def _flat(s: tantivy.Searcher, terms: list[str], mode: str, one_liner: bool
          ) -> tantivy.Query | None:
    occur = Occur.Must if mode == "and" else Occur.Should
    clauses = []
    for t in terms:
        toks = mq.term_tokens(AN, t)
        if not toks:
            continue
        if mode == "and":
            clauses += [(occur, Q.term_query(SCHEMA, "body", x)) for x in dict.fromkeys(toks)]
        else:
            clauses += [(occur, Q.term_query(SCHEMA, "body", x)) for x in dict.fromkeys(toks)]
            if one_liner:
                clauses += [(Occur.Should, Q.term_query(SCHEMA, "one_liner", x))
                            for x in dict.fromkeys(toks) if s.doc_freq("one_liner", x)]
    return Q.boolean_query(clauses) if clauses else None


def _no_wrap(s: tantivy.Searcher, terms: list[str], mode: str) -> tantivy.Query | None:
    occur = Occur.Must if mode == "and" else Occur.Should
    clauses = []
    for t in terms:
        toks = mq.term_tokens(AN, t)
        per = []
        for f in ("body", "one_liner"):
            if f == "one_liner" and not mq._may_match(s, f, t, toks):
                continue
            q = mq.term_clause(SCHEMA, f, t, toks)
            if q is not None:
                per.append((Occur.Should, q))
        if per:
            clauses.append((occur, per[0][1] if len(per) == 1 else Q.boolean_query(per)))
    return Q.boolean_query(clauses) if clauses else None


_N: list[int] = []


def _n_docs(s: tantivy.Searcher) -> int:
    if not _N:
        _N.append(main_stats(s, SCHEMA).docs)
    return _N[0]


def shapes() -> dict[str, tuple[Callable, int, bool]]:
    """name -> (build(searcher, terms, mode), top k, count); count None: build(searcher,
    terms, mode, k) searches itself."""
    def memoryd(s, terms, mode):
        return mq.text_query(SCHEMA, AN, s, terms, mode)

    def pruned(s, terms, mode, k):
        if mode == "or":
            body, always = maxscore.parts(SCHEMA, AN, s, s, terms, n_docs=_n_docs(s),
                                          w_body=1.0, w_one_liner=3.0, boost=None)
            got = maxscore.top(s, body, always, [], k)
            if got is not None:
                return got
        q = memoryd(s, terms, mode)
        return s.search(q, k, count=False).hits if q is not None else []

    return {
        "memoryd": (memoryd, 15, False),
        "memoryd-30": (memoryd, 30, False),
        "maxscore-30": (pruned, 30, None),
        "memoryd-75": (memoryd, 75, False),
        "memoryd-cnt": (memoryd, 75, True),
        "no-1liner": (lambda s, t, m: mq.text_query(SCHEMA, AN, s, t, m, fields=("body",)),
                      15, False),
        "no-wrap": (_no_wrap, 15, False),
        "flat": (lambda s, t, m: _flat(s, t, m, False), 15, False),
        "flat+1l": (lambda s, t, m: _flat(s, t, m, True), 15, False),
    }


def collector_check(docs: int = 400_000) -> None:
    """Whether `Searcher.search` prunes at all: one term in every document, the first 15
    scoring highest (five times the term in a shorter text). A pruning top 15 stops after
    the first block; an exhaustive one walks all postings, as a count does."""
    import tempfile

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", index_option="freq")
    schema = sb.build()
    with tempfile.TemporaryDirectory() as d:
        idx = tantivy.Index(schema, path=d)
        w = idx.writer(heap_size=100_000_000, num_threads=1)
        for i in range(docs):
            doc = tantivy.Document()
            doc.add_text("body", "alpha alpha alpha alpha alpha beta" if i < 15
                         else "alpha beta gamma delta epsilon zeta")
            w.add_document(doc)
        w.commit()
        w.wait_merging_threads()
        idx.reload()
        s = idx.searcher()
        q = Q.term_query(schema, "body", "alpha")
        for label, kw in (("top 15", {"count": False}), ("top 15 + count", {"count": True}),
                          ("top 1", {"count": False, "limit": 1})):
            kw.setdefault("limit", 15)
            s.search(q, **kw)
            c0 = time.thread_time()
            for _ in range(20):
                s.search(q, **kw)
            print(f"  one term in {docs:,} docs ({s.num_segments} segment), {label}: "
                  f"{(time.thread_time() - c0) / 20 * 1000:.2f} ms CPU")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", type=Path, required=True, help="a tantivy index directory")
    p.add_argument("--queries", type=int, default=150)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated shapes")
    p.add_argument("--collector", action="store_true",
                   help="first check whether tantivy-py's search prunes at all")
    args = p.parse_args(argv)
    print(f"query shapes: {h.machine()}")
    if args.collector:
        collector_check()
    idx = bare_tantivy(args.index, create=False)
    s = idx.searcher()
    print(f"{s.num_docs:,} docs in {s.num_segments} segments")
    gen = h.TextGen(args.seed)
    qs = [(cls, plan_query(q, mode).terms, mode)
          for cls, q, mode in gen.queries(random.Random(args.seed * 101), args.queries)]
    qs = [(("en-and" if "-and-" in c else c), t, m) for c, t, m in qs if t]
    sh = shapes()
    if args.only:
        sh = {k: v for k, v in sh.items() if k in args.only.split(",")}
    cpu: dict[tuple[str, str], list[float]] = defaultdict(list)
    for rep in range(args.repeat + 1):  # the first pass warms the page cache
        for i, (cls, terms, mode) in enumerate(qs):
            names = list(sh)
            k = (i + rep) % len(names)
            for name in names[k:] + names[:k]:
                build, top, count = sh[name]
                c0 = time.thread_time()
                if count is None:  # searches itself
                    build(s, terms, mode, top)
                elif (q := build(s, terms, mode)) is not None:
                    s.search(q, top, count=count)
                if rep:
                    cpu[(name, cls)].append(time.thread_time() - c0)
                    cpu[(name, "all")].append(time.thread_time() - c0)
    classes = sorted({c for _, c in cpu} - {"all"}) + ["all"]
    rows = []
    for name in sh:
        rows.append([name] + [f"{statistics.median(cpu[(name, c)]) * 1000:.2f} / "
                              f"{statistics.fmean(cpu[(name, c)]) * 1000:.2f}"
                              for c in classes])
    n = {c: len(cpu[(next(iter(sh)), c)]) // args.repeat for c in classes}
    print(h.table(rows, ["CPU ms p50 / mean"] + [f"{c} ({n[c]})" for c in classes]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
