"""`memoryctl eval`'s service (memoryd.recall.evaluate, .probe): probes from a real store's
turns, searched through the real index, scored where the answer is known."""

from __future__ import annotations

import math

import pytest

from memoryd.api import EvalRequest
from memoryd.daemon.store_index import open_store
from memoryd.errors import BadRequestError
from memoryd.index.text import is_cjk
from memoryd.models import Record
from memoryd.recall.evaluate import Evaluator, Ranked, _score
from memoryd.recall.probe import Probe, Turn, refuse_remote, sample_turns
from memoryd.store import Store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record

OLD = 1_600_000_000.0  # long ago: no recency bonus tells the turns apart

# four turns whose words no other turn shares: each probe finds its own turn first
DISTINCT = [
    ("user", "Configure the quokka parser with strict tokenizer flags for nightly builds"),
    ("assistant", "The wombat scheduler retries failed uploads using exponential backoff"),
    ("user", "Please rename the platypus migration before merging into release branches"),
]
TARGET = "alpha bravo charlie delta echo foxtrot golf hotel"  # found by twelve decoys first


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "memoryd.db")
    yield s
    await s.close()


async def put(store: Store, turns: list[tuple[str, str, str]], kind: str = "message") -> None:
    """turns: (session, role, text), each session its own project; record ids s:i."""

    def write(c):
        for i, (sid, role, text) in enumerate(turns):
            pk = session_pk(c, "generic", sid, project="/p")
            store_record(c, pk, Record(role, text, ts=OLD + i, kind=kind), f"{sid}:{i}",
                         None, 0)

    await store.write(write)
    await store.indexed()


def evaluator(store: Store, llm=None) -> Evaluator:
    return Evaluator(store, store.index, llm, "embed.enabled is false")


def test_scores_from_ranks():
    """R@k: the share of probes whose turn is in the top k; NDCG@10 with one relevant
    turn: 1/log2(rank + 1), 0 beyond ten."""
    turn = Turn(1, 0, "user", "x", "generic", "s", [])
    ranked = [Ranked(Probe(turn, "q"), {"lexical": r}, {"lexical": r is not None}, {}, False)
              for r in (1, 3, None, 7)]
    s = _score("lexical", ranked)
    assert (s.r1, s.r5, s.r10, s.any10) == (0.25, 0.5, 0.75, 0.75)
    assert s.ndcg10 == round((1 + 1 / math.log2(4) + 1 / math.log2(8)) / 4, 3) == 0.458
    assert s.vector_added is None


async def test_eval_scores_a_store_where_the_answer_is_known(store):
    await put(store, [(f"d{i}", role, text) for i, (role, text) in enumerate(DISTINCT)])
    await put(store, [("t", "user", TARGET)])
    # tool output: searchable, never a probe; each holds the target's words twice (and
    # starts its own way: not folded together as near-duplicates)
    await put(store, [(f"x{i}", "assistant", f"case{i} {TARGET} {TARGET}") for i in range(12)],
              kind="tool_result")
    await put(store, [("short", "user", "ok thanks"),  # too short to be a probe
                      ("reply", "assistant", "Now rebuild the zebra bundle first:")])  # thin
    r = await evaluator(store).run(EvalRequest(sample=50, show_misses=5), None)
    assert (r.sampled, r.probes, r.dry_run) == (4, 4, False)
    (lex,) = r.scores
    # three turns first; the target under the twelve decoys, at 13
    assert (lex.mode, lex.r1, lex.r5, lex.r10, lex.ndcg10, lex.any10) == (
        "lexical", 0.75, 0.75, 0.75, 0.75, 0.75)
    assert r.missed == 1
    (miss,) = r.misses
    assert (miss.session_id, miss.role, miss.ranks) == ("t", "user", {"lexical": 13})
    assert set(miss.probe.split()) <= set(TARGET.split()) and len(miss.probe.split()) >= 3
    assert r.vectors == {"scored": False, "reason": "embed.enabled is false",
                         "embedded": None, "caught_up": None}
    assert any("embed.enabled is false" in s for s in r.suggestions)
    assert any("4 probes" in s for s in r.suggestions)  # too few: the noise is said
    assert "favour the lexical ranking" in r.note

    # the same seed: the same probes; another seed: other words kept
    again = await evaluator(store).run(EvalRequest(sample=50), None)
    assert again.misses[0].probe == miss.probe
    other = {(await evaluator(store).run(EvalRequest(sample=50, seed=s), None)).misses[0].probe
             for s in range(1, 6)}
    assert other - {miss.probe}


async def test_sample_draws_a_bounded_reproducible_subset(store):
    await put(store, [(f"s{i}", "user", f"topic{i} parser{i} gadget{i} widget{i} line")
                      for i in range(40)])
    draw = lambda seed: store.read_sync(lambda c: [t.unit_id for t in sample_turns(c, 5, seed)])
    assert len(draw(1)) == 5 and draw(1) == draw(1) != draw(2)
    # a big store is drawn at random ids, never all of it
    assert len(store.read_sync(lambda c: sample_turns(c, 10, 3))) == 10


async def test_dry_run_times_a_few_probes_and_estimates(store):
    await put(store, [(f"s{i}", "user", f"topic{i} parser{i} gadget{i} widget{i} line")
                      for i in range(20)])
    r = await evaluator(store).run(EvalRequest(sample=20, dry_run=True), None)
    assert r.dry_run and r.sampled == 20 and r.probes == 10
    assert r.estimate_s is not None and r.estimate_s >= 0
    assert r.suggestions == [] and r.scores[0].r1 == 1.0  # distinct turns: each found first


async def test_cjk_probes_are_bigrams_of_the_turn(store):
    texts = ["我们决定用数据库迁移工具管理表结构变更", "周末去公园散步然后喝咖啡聊天",
             "服务器日志显示内存泄漏需要重启进程"]
    await put(store, [(f"z{i}", "user", t) for i, t in enumerate(texts)])
    r = await evaluator(store).run(EvalRequest(sample=10, show_misses=10), None)
    assert r.probes == 3
    assert r.scores[0].r1 == 1.0 and r.missed == 0
    # the probes themselves: 3-6 CJK bigrams of each turn
    turns = store.read_sync(lambda c: sample_turns(c, 10, 0))
    from memoryd.recall.probe import cloze

    for p in cloze(turns, 0):
        got = p.text.split()
        assert 3 <= len(got) <= 6
        assert all(is_cjk(w) and len(w) == 2 and w in p.turn.content for w in got)


def test_model_questions_only_from_a_model_on_this_machine():
    from memoryd.config import LLMSettings
    from memoryd.llm import LLM

    def llm(**kw):
        return LLM(LLMSettings(**kw), ledger=None, environ={})  # type: ignore[arg-type]

    for remote in (llm(model="openai/gpt", api_base="https://api.example.com/v1"),
                   llm(model="openai/gpt"), llm(), None,
                   llm(model="openai/x", api_base="http://127.0.0.1.example.com/v1")):
        with pytest.raises(BadRequestError) as e:
            refuse_remote(remote)
        assert e.value.field == "questions"
    assert "nothing may leave this machine" in str(
        pytest.raises(BadRequestError, refuse_remote,
                      llm(model="openai/gpt", api_base="https://api.example.com")).value)
    for base in ("http://localhost:11434", "http://127.0.0.1:8080/v1", "http://[::1]:8000",
                 "/run/user/1000/llm.sock", "unix:///tmp/x.sock"):
        refuse_remote(llm(model="openai/fake", api_base=base))


def test_suggestions_follow_the_figures():
    from memoryd.api import EvalScore
    from memoryd.recall.advice import suggest

    def s(mode, r10, ndcg, added=None):
        return EvalScore(mode=mode, r1=0.5, r5=0.6, r10=r10, ndcg10=ndcg, any10=r10,
                         vector_added=added)

    on = {"scored": True, "reason": None, "embedded": 500, "of": 500, "caught_up": True,
          "pending": 0}
    lex = s("lexical", 0.8, 0.6)
    vec = s("lexical+vectors", 0.84, 0.63, 90)
    # a sign test on the probes whose rank moved: 30 up and 10 down is clear ...
    gain = suggest([lex, vec], {**on, "better": 30, "worse": 10}, 500, "cloze", True)
    assert gain == ["Vectors help on your history (R@10 0.800 → 0.840, NDCG@10 0.600 → "
                    "0.630; the turn ranked higher on 30 probes, lower on 10; the vectors "
                    "added a turn to the top ten on 90 of 500): keep embed.enabled on."]
    # ... 3 up and 1 down is not, whatever R@10 says
    (none,) = suggest([lex, vec], {**on, "better": 3, "worse": 1}, 500, "cloze", True)
    assert none.startswith("Vectors made no clear difference") and \
        "embed.enabled = false" in none
    assert "--questions model" in none  # cloze probes favour lexical: said
    (model,) = suggest([lex, vec], {**on, "better": 0, "worse": 0}, 500, "model", True)
    assert "no clear difference" in model and "--questions model" not in model
    (worse,) = suggest([lex, vec], {**on, "better": 2, "worse": 20}, 500, "cloze", True)
    assert worse.startswith("Vectors ranked your turns lower") and "= false" in worse
    behind = {**on, "embedded": 300, "caught_up": False, "pending": 4000}
    (wait,) = suggest([lex, s("lexical+vectors", 0.8, 0.6, 0)], behind, 500, "cloze", True)
    assert wait.startswith("Only 300 of the 500 sampled turns have a vector yet")
    assert "4000 units pending" in wait and "embed.caught_up" in wait
    off = {"scored": False, "reason": "the memoryd[embed] extra is not installed"}
    rebuilding, extra, low = suggest([s("lexical", 0.4, 0.3)], off, 500, "cloze", False)
    assert rebuilding.startswith("The search index is rebuilding")
    assert "uv tool install 'memoryd[embed]'" in extra and "nothing downloaded" in extra
    assert low.startswith("Lexical R@10 is 0.400")
    assert suggest([lex], off, 0, "cloze", True)[-1].startswith("No turn could be made")


async def test_a_second_evaluation_while_one_runs_is_refused(store):
    """One evaluation at a time (each probe is a search among the users'): the second is a
    409 saying so, and the first completes."""
    import asyncio

    from memoryd.errors import ConflictError

    await put(store, [(f"s{i}", "user", f"topic{i} parser{i} gadget{i} widget{i} line")
                      for i in range(40)])
    ev = evaluator(store)
    first = asyncio.ensure_future(ev.run(EvalRequest(sample=40), None))
    while not ev._lock.locked():  # the first holds the evaluation
        await asyncio.sleep(0)
    with pytest.raises(ConflictError, match="already running"):
        await ev.run(EvalRequest(sample=5), None)
    assert (await first).probes == 40
