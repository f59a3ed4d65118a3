"""Settings come from MEMSTREAM_* variables (keyword arguments override them); a bad value is one line
naming the variable (no services needed)."""
from __future__ import annotations

import pytest

from memstream.config import Settings
from memstream.errors import ConfigError


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


def test_settings_import_without_pydantic_settings():
    import subprocess
    import sys
    code = "import sys, memstream.config; print('pydantic_settings' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
