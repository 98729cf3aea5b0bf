"""Issue 8 proof suite: kill -9 during backfill, live appends and summaries, restart:
0 lost, 0 duplicated units, 0 lost jobs. Five runs here; bench/kill9.py runs 50+."""

from __future__ import annotations

import pytest

from tests.helpers import short_dir
from tests.reliability.kill9 import kill_runs

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]


def test_kill_9_five_times_loses_and_duplicates_nothing(tmp_path):
    with short_dir() as d:
        out = kill_runs(tmp_path, d / "m.sock", runs=5, seed=8)
    assert out.runs == 5
    assert out.units == out.expected_units, out
    assert out.duplicated == 0, out
    assert out.jobs_lost == 0 and out.jobs_stuck_running == 0, out
