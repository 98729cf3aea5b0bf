"""schemathesis against the running daemon's own OpenAPI document, over the loopback TCP
site with the bearer token: generated valid and invalid requests for every operation,
and not one may answer 5xx (a bad input is a 4xx naming the field)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from memoryd.client import MemorydClient
from tests.helpers import short_dir, write_jsonl
from tests.helpers import wait_until as wait

pytestmark = [pytest.mark.reliability, pytest.mark.e2e, pytest.mark.timeout(900)]

# Bounded for CI: 1-2 minutes on a shared 2-core machine.
# 8 per operation and mode: about 250 cases. MEMORYD_FUZZ_EXAMPLES=40 for a longer run.
EXAMPLES = int(os.environ.get("MEMORYD_FUZZ_EXAMPLES", "8"))
# Left out, each for a reason:
# - GET /v1/events streams forever (tested by tests/server/test_events.py);
# - POST /v1/ingest with a generated path reads that path, and "/" is a valid one: the
#   fuzzer would make the daemon walk the machine (its 400s are tested elsewhere).
SKIP = {("GET", "/v1/events"), ("POST", "/v1/ingest")}



@pytest.fixture
def daemon(tmp_path):
    home, src, userhome = tmp_path / "home", tmp_path / "src", tmp_path / "user"
    userhome.mkdir()
    write_jsonl(src / "proj" / "s1.jsonl", [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i} quokka 你好",
         "id": f"m{i}"} for i in range(20)])
    with short_dir() as d:
        sock = d / "m.sock"
        env = {**os.environ, "MEMORYD_HOME": str(home), "HOME": str(userhome)}
        with open(tmp_path / "memoryd.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "memoryd", "--no-default-sources", "--source",
                 f"generic={src}", "--socket", str(sock), "--port", "0"],
                env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            client = MemorydClient(sock)
            try:
                st = wait(lambda: proc.poll() is None and (s := client.status())["caught_up"]
                          and s, timeout=300)
            except AssertionError:
                raise AssertionError(f"memoryd did not come up (exit {proc.poll()}):\n"
                                     + (tmp_path / "memoryd.log").read_text()[-3000:]) from None
            token = (home / "state" / "token").read_text().strip()
            yield f"http://127.0.0.1:{st['tcp_port']}", token, tmp_path / "memoryd.log"
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 0


def test_schemathesis_no_server_errors(daemon):
    base, token, log_path = daemon
    auth = {"Authorization": f"Bearer {token}"}
    schema = schemathesis.openapi.from_url(f"{base}/v1/openapi.json", headers=auth)
    session = requests.Session()
    cases, failures, per_op = 0, [], {}

    timing: dict[str, float] = {}
    for result in schema.get_all_operations():
        op = result.ok()
        if (op.method.upper(), op.path) in SKIP:
            continue
        t0 = time.monotonic()
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            def run(case):
                nonlocal cases
                cases += 1
                per_op[op.label] = per_op.get(op.label, 0) + 1
                r = case.call(base_url=base, session=session, headers=auth, timeout=30)
                if r.status_code >= 500:
                    failures.append(f"{r.status_code} {op.label} {case.path_parameters} "
                                    f"{case.query} {str(case.body)[:200]}: {r.text[:300]}")

            try:
                run()
            except Unsatisfiable:
                # an operation without parameters or body has no invalid form
                assert mode is schemathesis.GenerationMode.NEGATIVE, op.label
        timing[op.label] = time.monotonic() - t0

    print(f"\nschemathesis: {cases} cases over {len(per_op)} operations, "
          f"{len(failures)} server errors; slowest: " + ", ".join(
              f"{k} {v:.1f}s" for k, v in sorted(timing.items(), key=lambda x: -x[1])[:4]))
    assert cases > 0
    assert not failures, "\n".join(failures[:20]) + "\n" + log_path.read_text()[-3000:]
