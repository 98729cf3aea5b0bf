"""Fleet leases are measured by the database's clock, not each machine's (issue 28 item
7c): a machine whose clock runs ten minutes ahead (a real skew, `faketime`, on a process
of its own) does not take over a job or a consolidation firing another machine holds a
live lease on, and a machine ten minutes behind does not write leases that the others
read as long run out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from memoryd.daemon.store_index import open_store

from memoryd.store import memory_docs
from memoryd.store.jobs import claim_job, get_job
from memoryd.store_target import StoreTarget
from tests.fleet.test_fleet_jobs import add

pytestmark = pytest.mark.skipif(shutil.which("faketime") is None and not os.environ.get("CI"),
                                reason="needs faketime (CI installs it: .ci/run)")

# machine `name`, its clock skewed by faketime, claims through memoryd's own functions
SKEWED = textwrap.dedent("""
    import json, sys, time
    from memoryd.store import memory_docs
    from memoryd.store.jobs import claim_job
    from memoryd.store.pg.conn import connect
    from memoryd.store_target import StoreTarget

    url, name = sys.argv[1], sys.argv[2]
    conn = connect(StoreTarget(url=url, machine=name, namespace="team"))
    job = claim_job(conn, time.time(), machine=name, lease_s=60)
    firing = memory_docs.claim(conn, "consolidate", "day:2026-11-28", name, time.time(),
                               time.time(), 120)
    conn.commit()
    print(json.dumps({"time": time.time(), "job": job.id if job else None,
                      "firing": firing}))
""")


def skewed(url: str, name: str, offset: str) -> dict:
    out = subprocess.run(["faketime", "-f", offset, sys.executable, "-c", SKEWED, url, name],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


async def test_issue_28_a_clock_ten_minutes_ahead_takes_over_no_live_lease(tmp_path, pg_url):
    a = await open_store(tmp_path / "a" / "memoryd.db",
                         target=StoreTarget(url=pg_url, machine="a", namespace="team"))
    try:
        jid = await a.write(lambda c: add(c, "summarize", "session:1"))
        assert (await a.write(lambda c: claim_job(c, time.time(), machine="a",
                                                  lease_s=60))).id == jid
        assert await a.write(lambda c: memory_docs.claim(
            c, "consolidate", "day:2026-11-28", "a", time.time(), time.time(), 120))
        got = skewed(pg_url, "ahead", "+10m")
        assert got["time"] - time.time() > 500  # the skew is real
        assert got == {**got, "job": None, "firing": False}
        job = await a.read(lambda c: get_job(c, jid))
        assert job.claimed_by == "a" and job.attempts == 1
    finally:
        await a.close()


async def test_issue_28_a_clock_ten_minutes_behind_writes_leases_others_honour(tmp_path,
                                                                             pg_url):
    a = await open_store(tmp_path / "a" / "memoryd.db",
                         target=StoreTarget(url=pg_url, machine="a", namespace="team"))
    try:
        jid = await a.write(lambda c: add(c, "summarize", "session:1"))
        got = skewed(pg_url, "behind", "-10m")
        assert time.time() - got["time"] > 500
        assert got["job"] == jid and got["firing"] is True
        # the behind machine's leases are live for the rest of the fleet
        assert await a.write(lambda c: claim_job(c, time.time(), machine="a")) is None
        assert not await a.write(lambda c: memory_docs.claim(
            c, "consolidate", "day:2026-11-28", "a", time.time(), time.time(), 120))
    finally:
        await a.close()
