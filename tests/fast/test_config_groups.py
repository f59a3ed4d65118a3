"""Every setting is in one group of a known list; the internal ones are the ones meant; the docs and
`memstream config` show the groups in order, internal last (no services needed)."""
from __future__ import annotations

import re
import subprocess
import sys

import orjson
import pytest

from memstream.app.readme import CONFIG_DOC
from kernel.config import GROUPS, INTERNAL, REPO_ROOT, Field, Settings, _Settings, env_var
from domain.rules_profile import FROM_RULES

ORDER = ["connections", "models", "api", "rules", "recall", "pipeline", "stack", "observability", INTERNAL]

# Set by the tools themselves, not by hand: the supervisor gives each worker copy its MEMSTREAM_INSTANCE;
# replay (rebuild, what-if) and the tests' clean-run comparisons point a namespace at another one's log;
# the changelog segment is a faust internal topic's knob that benchmarks and tests shorten.
MEANT_INTERNAL = {"instance", "log_namespace_override", "changelog_segment_ms"}


def test_every_setting_has_a_group_from_the_known_list():
    assert list(GROUPS) == ORDER
    ungrouped = {n: f.group for n, f in Settings.model_fields.items() if f.group not in GROUPS}
    assert not ungrouped
    assert [n for names in Settings.by_group().values() for n in names] == sorted(
        Settings.model_fields, key=lambda n: (ORDER.index(Settings.model_fields[n].group), list(Settings.model_fields).index(n)))
    assert list(Settings.by_group()) == ORDER   # no empty group


def test_internal_settings_are_the_ones_meant():
    assert set(Settings.by_group()[INTERNAL]) == MEANT_INTERNAL


def test_the_rules_group_is_the_rules_profile_and_its_switch():
    assert set(Settings.by_group()["rules"]) == set(FROM_RULES) | {"rules_rollover"}


def test_an_unknown_group_fails_at_declaration():
    with pytest.raises(TypeError, match="group 'nope'"):
        type("Bad", (_Settings,), {"__annotations__": {"x": "int"}, "x": Field(1, group="nope", description="")})


def test_the_docs_show_the_groups_in_order_internal_last():
    text = CONFIG_DOC.read_text()
    headings = re.findall(r"^## (.+)$", text.split("<!-- config-table:start -->", 1)[1], flags=re.M)
    assert headings == [GROUPS[g][0] for g in ORDER]
    tables = re.split(r"^## .+$", text.split("<!-- config-table:start -->", 1)[1], flags=re.M)[1:]
    for group, table in zip(ORDER, tables, strict=True):
        assert "| variable | default | description |" in table
        shown = re.findall(r"^\| `(MEMSTREAM_\w+)` \|", table, flags=re.M)
        assert shown == [env_var(n, Settings.model_fields[n]) for n in Settings.by_group()[group]], group


def test_memstream_config_prints_by_group_with_secrets_masked():
    env = {"MEMSTREAM_PG_PASSWORD": "s3cret-pg", "MEMSTREAM_EMBED_API_KEY": "s3cret-embed", "PATH": ""}
    cli = [sys.executable, "-m", "memstream.app.cli", "config"]
    text = subprocess.run(cli, capture_output=True, text=True, check=True, env=env).stdout
    as_json = orjson.loads(subprocess.run([*cli, "--json"], capture_output=True, check=True, env=env).stdout)
    assert "s3cret" not in text and b"s3cret" not in orjson.dumps(as_json)
    assert list(as_json) == ORDER and as_json["connections"]["pg_password"] == "********"
    assert [line for line in text.splitlines() if line and not line.startswith(" ")] == [GROUPS[g][0] for g in ORDER]
    assert re.search(r"^  pg_password +\*{8}$", text, flags=re.M) and re.search(r"^  pg_api_password +\(not set\)$", text, flags=re.M)


def test_env_example_names_only_settings():
    """.env.example (compose's variables) names settings by their variables: a renamed one shows here."""
    compose_only = {"MEMSTREAM_IMAGE", "PUBLISH_ADDRESS"}   # read by docker-compose.yml, not by memstream
    variables = {env_var(n, f) for n, f in Settings.model_fields.items()}
    names = {line.split("=", 1)[0] for line in (REPO_ROOT / ".env.example").read_text().splitlines()
             if line and not line.startswith("#")}
    assert names - compose_only <= variables, names - compose_only - variables
    assert not names & {env_var(n, Settings.model_fields[n]) for n in Settings.by_group()[INTERNAL]}
