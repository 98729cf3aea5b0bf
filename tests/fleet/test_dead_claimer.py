"""A dead claimer for real (issue 14 item 6): a real daemon process (machine a) claims a
summary job from the namespace's queue, its LLM call held by the fake server, and is
killed -9 while it holds the job's lease. A second real daemon (machine b) takes the job
over once the lease (3 s, `[store] job_lease_s`) has run out and runs it to completion:
the job is done once, by b, one summary and one LLM usage row, nothing lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from memoryd.client import MemorydClient
from tests.fakes import fake_llm as fake_llm  # noqa: F401 (the fixture)
from tests.fleet.daemons import msg
from tests.helpers import short_dir, wait_for, write_jsonl

NS = "memoryd_team"


def start(tmp_path: Path, machine: str, src: Path, sock: Path, env: dict[str, str]
          ) -> subprocess.Popen:
    home = tmp_path / machine / "home"
    home.mkdir(parents=True, exist_ok=True)
    src.mkdir(parents=True, exist_ok=True)
    with open(tmp_path / f"{machine}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
             f"generic={src}", "--socket", str(sock), "--port", "0", "--log-level", "INFO"],
            env={**env, "MEMORYD_HOME": str(home), "MEMORYD_STORE__MACHINE": machine},
            stdout=subprocess.DEVNULL, stderr=log)


def query(url: str, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()


def units(url: str) -> int:
    try:
        return query(url, f"SELECT count(*) FROM {NS}.units")[0][0]
    except psycopg.errors.UndefinedTable:  # the first daemon is still making the schema
        return 0


@pytest.mark.reliability  # two daemon processes: the proof suite, not the quick run
@pytest.mark.timeout(900)
async def test_a_killed_claimer_s_job_is_taken_over_and_done_once(tmp_path, pg_url, fake_llm):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update({"MEMORYD_STORE__URL": pg_url, "MEMORYD_STORE__NAMESPACE": "team",
                "MEMORYD_STORE__JOB_LEASE_S": "3", "MEMORYD_LLM__MODEL": "openai/fake",
                "MEMORYD_LLM__API_BASE": fake_llm.url, "MEMORYD_LLM__TIMEOUT_S": "600",
                "MEMORYD_SUMMARY__WORKERS": "1", "MEMORYD_SUMMARY__ENABLED": "false",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    src_a = tmp_path / "a" / "src"
    write_jsonl(src_a / "chat.jsonl", [msg(i, f"the numbat migration, step {i}")
                                       for i in range(6)])
    procs: list[subprocess.Popen] = []
    with short_dir() as d:
        try:
            a = start(tmp_path, "a", src_a, d / "a.sock", env)
            procs.append(a)
            await wait_for(lambda: units(pg_url) == 6, timeout=60)
            pk = query(pg_url, f"SELECT id FROM {NS}.sessions WHERE machine = 'a'")[0][0]
            fake_llm.delay_next(600)  # a's call hangs: it holds the job until it dies
            now = time.time()
            job = query(pg_url, f"INSERT INTO {NS}.jobs (kind, target, state, reason, params,"
                        " next_run_at, created_at, updated_at) VALUES ('summarize', %s,"
                        " 'pending', 'test', '{\"mode\": \"all\"}', %s, %s, %s) RETURNING id",
                        f"session:{pk}", now, now, now)[0][0]

            def held() -> bool:
                row = query(pg_url, f"SELECT state, claimed_by FROM {NS}.jobs WHERE id = %s",
                            job)[0]
                return row == ("running", "a") and len(fake_llm.requests) == 1
            await wait_for(held, timeout=60)
            a.send_signal(signal.SIGKILL)
            await asyncio.to_thread(a.wait, 30)
            # a is dead holding the job: still running, claimed by a, its lease running out
            assert query(pg_url, f"SELECT state, claimed_by, attempts FROM {NS}.jobs WHERE"
                         " id = %s", job) == [("running", "a", 1)]

            b = start(tmp_path, "b", tmp_path / "b" / "src", d / "b.sock", env)
            procs.append(b)
            await wait_for(lambda: query(pg_url, f"SELECT state FROM {NS}.jobs WHERE id = %s",
                                         job)[0][0] == "done", timeout=90)
            assert MemorydClient(d / "b.sock", timeout=10).health()  # b is up and well
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    await asyncio.to_thread(p.wait, 60)
    b_log = (tmp_path / "b.log").read_text()
    assert query(pg_url, f"SELECT state, claimed_by, attempts FROM {NS}.jobs WHERE kind ="
                 " 'summarize' AND target = %s", f"session:{pk}") == \
        [("done", "b", 2)]  # the one job, taken over by b, no twin
    assert query(pg_url, f"SELECT made_by FROM {NS}.summaries WHERE session_pk = %s",
                 pk) == [("openai/fake",)]  # done once
    assert query(pg_url, f"SELECT summary_by FROM {NS}.sessions WHERE id = %s",
                 pk) == [("openai/fake",)]
    assert query(pg_url, f"SELECT count(*) FROM {NS}.llm_usage WHERE target = %s",
                 f"session:{pk}") == [(1,)]  # a's call never came back: not counted
    assert len(fake_llm.requests) == 2 and all("numbat" in str(r) for r in fake_llm.requests)
    assert "Traceback" not in b_log
