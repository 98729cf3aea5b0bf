"""The TOML memoryd writes (`memoryctl config default|show`) always parses, and back
to the same values."""

import re
import tomllib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.cli.commands import main
from memoryd.config_doc import as_toml, default_config

scalars = st.one_of(st.text(), st.integers(), st.booleans(),
                    st.floats(allow_nan=False))
values = st.one_of(scalars, st.lists(st.text(), max_size=4),
                   st.lists(st.dictionaries(st.text(min_size=1), st.text(), max_size=3),
                            max_size=2))
documents = st.dictionaries(st.text(min_size=1),
                            st.dictionaries(st.text(min_size=1), values, max_size=5),
                            max_size=4)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_as_toml_round_trips_through_tomllib(data):
    assert tomllib.loads(as_toml(data)) == data


def test_control_characters_are_escaped():
    data = {"llm": {"model": "a\x7fb\x00c\x1bd\te\n\"f\\g 迁移"}}
    text = as_toml(data)
    assert "\x7f" not in text and "\x00" not in text and "\x1b" not in text
    assert tomllib.loads(text) == data


def test_default_config_uncommented_parses_to_the_defaults():
    from memoryd.config import Settings

    setting = re.compile(r"# [a-z_]+ = ")
    lines = [ln[2:] if setting.match(ln) else ln for ln in default_config().splitlines()]
    parsed = tomllib.loads("\n".join(ln for ln in lines if not ln.startswith("#")))
    dumped = Settings().model_dump(mode="json")
    for section, vals in parsed.items():
        for key, v in vals.items():
            assert v == dumped[section][key] or dumped[section][key] is None, (section, key)


def test_config_show_with_a_control_character_in_a_value_parses(memoryd_home, capsys,
                                                                 monkeypatch):
    monkeypatch.setenv("MEMORYD_LLM__MODEL", "odd\x7fname")
    assert main(["config", "show"]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["llm"]["model"] == "odd\x7fname"
