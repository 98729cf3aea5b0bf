"""`memoryctl eval` with embeddings on (issue 31 item 5): both rankings scored, the probes
whose top ten the vectors added to counted, the sampled turns' vectors counted; a real
daemon and the real model."""

from __future__ import annotations

import pytest

from tests.helpers import AsyncClient, ctl, running_daemon, wait_for, write_jsonl

TURNS = [
    "How do the database schema migrations work in this repository?",
    "Each migration is a numbered function applied once inside its own transaction.",
    "My work shift starts at nine, so keep the standup meeting short please.",
    "我们把数据库迁移放在服务启动的时候运行",
    "The deploy pipeline pushes container images to the staging registry first.",
]


async def _embedded(c: AsyncClient, done: int):
    st = await c.status()
    return st if st["caught_up"] and st["embed"]["caught_up"] and \
        st["embed"]["done"] >= done else None


@pytest.mark.usefixtures("model_installed")
async def test_issue_31_eval_scores_lexical_and_with_vectors(memoryd_home, sock, tmp_path,
                                                             capsys):
    src = tmp_path / "src"
    write_jsonl(src / "p" / "s1.jsonl", [{"role": "user" if i % 2 == 0 else "assistant",
                                          "content": t, "id": f"m{i}"}
                                         for i, t in enumerate(TURNS)])
    async with running_daemon(memoryd_home, [("generic", src)], sock, embed=True):
        c = AsyncClient(sock)
        await wait_for(lambda: _embedded(c, len(TURNS)), timeout=120)
        d = await c.request("POST", "/v1/eval", {"sample": 50})
        lex, vec = d["scores"]
        assert (lex["mode"], vec["mode"]) == ("lexical", "lexical+vectors")
        assert lex["vector_added"] is None and 0 <= vec["vector_added"] <= d["probes"]
        assert d["probes"] == 5 and lex["r10"] == vec["r10"] == 1.0
        v = d["vectors"]
        assert v["scored"] and v["embedded"] == v["of"] == 5 and v["caught_up"]
        # the suggestion follows the probes the vectors moved (a sign test)
        b, w = v["better"], v["worse"]
        clear = b + w > 0 and abs(b - w) > 1.96 * (b + w) ** 0.5
        said = ("Vectors help" if clear and b > w else "Vectors ranked your turns lower"
                if clear else "Vectors made no clear difference")
        assert any(s.startswith(said) for s in d["suggestions"]), (v, d["suggestions"])
        code, out, _ = await ctl(capsys, sock, "eval")
        assert code == 0 and "lexical+vectors" in out and "vectors added a turn on" in out
        assert "vectors: 5 of 5 sampled turns embedded; the turn ranked higher on " in out
