"""Settings from MEMORYD_<SECTION>__<KEY>: strings stay strings, lists take JSON."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.config import load_settings


def test_scalar_looking_strings_stay_strings():
    s = load_settings(None, environ={"MEMORYD_LLM__MODEL": "123",
                                     "MEMORYD_SERVER__TCP_HOST": "1.5",
                                     "MEMORYD_LLM__API_KEY_ENV": "true",
                                     "MEMORYD_LLM__API_BASE": '"quoted"'})
    assert s.llm.model == "123"
    assert s.server.tcp_host == "1.5"
    assert s.llm.api_key_env == "true"
    assert s.llm.api_base == '"quoted"'


def test_numbers_booleans_and_lists_still_convert():
    s = load_settings(None, environ={"MEMORYD_SERVER__TCP_PORT": "2222",
                                     "MEMORYD_LLM__TIMEOUT_S": "1.5",
                                     "MEMORYD_LOG__FILE": "true",
                                     "MEMORYD_WATCH__EXCLUDE": '["*.tmp", "x/**"]',
                                     "MEMORYD_WATCH__SOURCES":
                                         '[{"agent": "codex", "path": "/x"}]'})
    assert s.server.tcp_port == 2222 and s.llm.timeout_s == 1.5 and s.log.file is True
    assert s.watch.exclude == ("*.tmp", "x/**")
    assert s.watch.sources[0].agent == "codex"


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1))
def test_any_string_for_a_string_field_arrives_unchanged(value):
    s = load_settings(None, environ={"MEMORYD_LLM__MODEL": value,
                                     "MEMORYD_LLM__API_BASE": value,
                                     "MEMORYD_LLM__API_KEY_ENV": value})
    assert s.llm.model == value and s.llm.api_base == value and s.llm.api_key_env == value
