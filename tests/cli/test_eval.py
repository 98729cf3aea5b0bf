"""`memoryctl eval` end to end: JSONL in a watched folder, a real daemon, the table printed,
the dry run, and the usage errors (exit 2) the daemon's 400s become."""

from __future__ import annotations

import json

import pytest

from tests.fakes import Transcript
from tests.helpers import AsyncClient, caught_up, ctl, running_daemon, wait_for

DISTINCT = [
    "Configure the quokka parser with strict tokenizer flags for nightly builds",
    "The wombat scheduler retries failed uploads using exponential backoff",
    "Please rename the platypus migration before merging into release branches",
]
TARGET = "alpha bravo charlie delta echo foxtrot golf hotel"


@pytest.fixture
async def live(memoryd_home, sock, src):
    for i, text in enumerate(DISTINCT):
        Transcript(src, f"d{i}").user(text)
    Transcript(src, "target").user(TARGET)
    for i in range(12):  # tool output holding the target's words twice: found before it
        Transcript(src, f"x{i}").tool("run", {}, f"case{i} {TARGET} {TARGET}")
    async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
        await wait_for(lambda: caught_up(AsyncClient(sock)))
        yield d


async def test_eval_prints_the_scores_misses_and_suggestions(live, sock, capsys):
    code, out, err = await ctl(capsys, sock, "eval", "--sample", "50")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("4 cloze probes from 4 sampled turns (seed 0), ")
    assert lines[2].split() == ["mode", "R@1", "R@5", "R@10", "NDCG@10", "any@10"]
    assert lines[3].split() == ["lexical", "0.750", "0.750", "0.750", "0.750", "0.750"]
    assert "vectors: not scored (embed.enabled is false)" in out
    assert "missed at 10: 1\n  unit " in out and "user generic target  lexical 13" in out
    probe = out.split("probe: ")[1].splitlines()[0].split()
    assert 3 <= len(probe) <= 6 and set(probe) <= set(TARGET.split())
    assert f"turn:  {TARGET}" in out
    assert "suggestions:\n  - 4 probes: differences under about 0.49 are noise" in out
    assert "embed.enabled is false. Set it to true" in out
    assert "favour the" in out and "lexical ranking" in out

    code, out, _ = await ctl(capsys, sock, "eval", "--dry-run")
    assert code == 0 and out.startswith("dry run: 4 cloze probes timed in ")
    assert "4 turns sampled (seed 0); the whole run would take about " in out

    code, out, _ = await ctl(capsys, sock, "--json", "eval", "--seed", "7", "--misses", "0")
    d = json.loads(out)
    assert code == 0 and d["seed"] == 7 and d["missed"] == 1 and d["misses"] == []


async def test_eval_usage_errors_exit_2(live, sock, capsys):
    code, out, err = await ctl(capsys, sock, "eval", "--questions", "model")
    assert (code, out) == (2, "")
    assert "questions=model needs a model" in err and "(questions)" in err
    code, _, err = await ctl(capsys, sock, "eval", "--sample", "2001")
    assert code == 2 and "(sample)" in err
