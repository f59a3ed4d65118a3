"""Neo4j credentials without services: a setting wins over the password file, a missing one says
what to do. Logins against the real Neo4j: tests/test_neo4j_auth.py."""
from __future__ import annotations

import pytest

from adapters import neo4j_auth
from kernel.config import Settings
from kernel.errors import ConfigError


def test_a_setting_wins_over_the_file_and_a_missing_one_says_what_to_do(tmp_path):
    given = Settings(stack_dir=tmp_path, neo4j_password="from-a-secret-manager", neo4j_user="app")
    assert neo4j_auth.auth(given) == ("app", "from-a-secret-manager")
    assert "from-a-secret-manager" not in repr(given.masked())
    assert neo4j_auth.ensure_password(given) == "from MEMSTREAM_NEO4J_PASSWORD"
    assert not neo4j_auth.password_file(given).exists()

    bare = Settings(stack_dir=tmp_path)
    with pytest.raises(ConfigError, match="MEMSTREAM_NEO4J_PASSWORD"):
        neo4j_auth.password(bare)
    assert neo4j_auth.ensure_password(bare) == "created"
    first = neo4j_auth.password(bare)
    assert neo4j_auth.ensure_password(bare) == "present"          # idempotent: never replaced
    assert neo4j_auth.password(bare) == first
    assert neo4j_auth.password_file(bare).stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "secrets").stat().st_mode & 0o777 == 0o700
