"""Proof suite, issue 8 item 1: generated bad lines (malformed, truncated, nested,
binary, wrong types) for every adapter at every position, and every hand-written kind at
every position under an explicit and an auto-detected source."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ingest.bad_lines import BAD_LINES, deep, ingest_once, with_bad
from tests.ingest.test_bad_lines import AGENTS, _baseline, _corpus

pytestmark = pytest.mark.reliability


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
@pytest.mark.parametrize("where", ["first", "second", "middle", "last"])
@pytest.mark.parametrize("source", ["generic", "auto"])
def test_bad_line_kinds_at_every_position(kind, where, source):
    rel, lines = _corpus()["generic"]
    pos = {"first": 0, "second": 1, "middle": len(lines) // 2, "last": len(lines)}[where]
    units, bad = ingest_once(with_bad(lines, BAD_LINES[kind](), pos), rel, source)
    assert units == _baseline()["generic"]
    assert bad == 1


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("explicit", [True, False])
def test_bad_first_line_every_adapter(agent, explicit):
    rel, lines = _corpus()[agent]
    for kind in sorted(BAD_LINES):
        units, bad = ingest_once(with_bad(lines, BAD_LINES[kind](), 0), rel,
                                 agent if explicit else "auto")
        assert (units, bad) == (_baseline()[agent], 1), kind


def _no_newline(b: bytes) -> bytes:
    return b.replace(b"\n", b" ").replace(b"\r", b" ")


_bad_lines = st.one_of(
    st.binary(min_size=1, max_size=300).map(lambda b: b"\xff" + _no_newline(b)),  # not UTF-8
    st.binary(min_size=1, max_size=300).map(lambda b: b"\x00" + _no_newline(b)),
    st.integers(6000, 9000).map(deep),
    st.integers(6000, 9000).map(lambda n: deep(n, "[")),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                 lambda kids: st.lists(kids, max_size=4), max_leaves=10)
    .map(lambda v: json.dumps(v).encode()),  # valid JSON but never an object
    st.fixed_dictionaries({"role": st.integers() | st.lists(st.integers(), max_size=2)},
                          optional={"content": st.text(max_size=20)})
    .map(lambda d: json.dumps(d).encode()),  # wrong field types
)


@pytest.mark.parametrize("agent", AGENTS)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(bad=_bad_lines, where=st.floats(0, 1), truncate=st.booleans(), data=st.data())
def test_bad_lines_property_every_adapter_every_position(agent, bad, where, truncate, data):
    corpus, baseline = _corpus(), _baseline()
    rel, lines = corpus[agent]
    pos = round(where * len(lines))
    if truncate:  # a good line of this dialect cut short: a torn write
        victim = lines[data.draw(st.integers(0, len(lines) - 1))]
        bad = victim[: data.draw(st.integers(1, max(1, len(victim) - 2)))]
    units, n_bad = ingest_once(with_bad(lines, bad, pos), rel, agent)
    assert units == baseline[agent]
    assert n_bad == 1
