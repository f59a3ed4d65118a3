"""The container set-up (Dockerfile, docker-compose*.yml, .env.example, `memstream init`).

This machine has a docker client but no daemon, so no image is built and no container runs here.
What can be checked is checked:
- the compose files, interpolated from .env.example the way `docker compose` does, validate
  against the Compose Specification's JSON schema (vendored: tests/fixtures/compose-spec/), and
  their cross-references hold (depends_on, health-check ports, variables, listeners);
- the Dockerfile's shape: stages, a non-root user, the README's install script;
- the commands the memstream containers run, run natively against the real local stack: in
  tests/test_containers_native.py (the stack tier).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec" / "compose-spec.json"
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.cluster.yml")
MEMSTREAM_SERVICES = ("init", "pipeline", "api", "mcp")
MEMSTREAM = str(ROOT / ".venv" / "bin" / "memstream")


# -- compose's variable interpolation (https://docs.docker.com/reference/compose-file/interpolation/) --

_VAR = re.compile(r"\$\$|\$\{(?P<braced>[^}]+)\}|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?|:\+|\+)(?P<arg>.*))?$", re.S)


class MissingVariable(Exception):
    pass


def interpolate(value, env: dict[str, str], seen: dict[str, bool]):
    """Compose's rules on every string of a parsed file: `$$` is a literal `$`; ${V}, ${V:-d},
    ${V-d}, ${V:?err}, ${V?err}, ${V:+alt}, ${V+alt}. `seen` records each variable and whether
    its use carries a default (or an error message: a required secret)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, seen) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        if m.group("plain"):
            name, op, arg = m.group("plain"), None, None
        else:
            b = _BRACED.match(m.group("braced"))
            assert b, f"unparsable interpolation ${{{m.group('braced')}}}"
            name, op, arg = b.group("name"), b.group("op"), b.group("arg")
        seen[name] = seen.get(name, False) or op in (":-", "-", ":?", "?")
        val = env.get(name)
        empty_is_unset = op is not None and op.startswith(":")
        present = val is not None and (val != "" or not empty_is_unset)
        if op in (":-", "-"):
            return val if present else arg
        if op in (":?", "?"):
            if not present:
                raise MissingVariable(f"{name}: {arg}")
            return val
        if op in (":+", "+"):
            return arg if present else ""
        return val or ""
    return _VAR.sub(one, value)


def env_example() -> dict[str, str]:
    out = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value
    return out


def filled_env() -> dict[str, str]:
    """.env.example with its empty (required) secrets filled, as a user is told to."""
    return {k: v or f"test-secret-{k.lower()}" for k, v in env_example().items()}


def load(name: str, env: dict[str, str] | None = None, seen: dict | None = None) -> dict:
    return interpolate(yaml.safe_load((ROOT / name).read_text()), filled_env() if env is None else env,
                       {} if seen is None else seen)


def merged(*docs: dict) -> dict:
    """`docker compose -f a -f b`: mappings merge key by key, later files win (enough for these files)."""
    def merge(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return {**a, **{k: merge(a[k], v) if k in a else v for k, v in b.items()}}
        return b
    out: dict = {}
    for d in docs:
        out = merge(out, d)
    return out


def whole_system() -> dict:
    return merged(*(load(n) for n in COMPOSE_FILES[:1]))


def cluster_system() -> dict:
    return merged(*(load(n) for n in COMPOSE_FILES))


# -- (a) the compose files -------------------------------------------------------------------------

@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_validates_against_the_compose_specification(name):
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(load(name)), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_the_schema_catches_a_broken_file():
    """The validation above can fail: a misspelt key and a bad condition are both refused."""
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    doc = load("docker-compose.yml")
    doc["services"]["api"]["depends_on"]["init"]["condition"] = "service_finished"
    doc["services"]["pipeline"]["helthcheck"] = {"test": ["CMD", "true"]}
    assert len(list(validator.iter_errors(doc))) >= 2


def test_memstream_services_are_all_there_with_their_conditions():
    services = whole_system()["services"]
    for name in MEMSTREAM_SERVICES:
        assert name in services, f"docker-compose.yml has no {name} service"
    for store in ("kafka", "postgres", "neo4j"):
        assert services["init"]["depends_on"][store]["condition"] == "service_healthy"
    for name in ("pipeline", "api", "mcp"):
        assert services[name]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert services["init"]["restart"] == "no", "a one-shot must not be restarted after it succeeded"


@pytest.mark.parametrize("system", [whole_system, cluster_system], ids=["single", "cluster"])
def test_every_dependency_names_a_service_with_a_health_check_when_it_waits_for_health(system):
    services = system()["services"]
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on {dep}, which is no service"
            condition = cond["condition"] if isinstance(cond, dict) else "service_started"
            if condition == "service_healthy":
                hc = services[dep].get("healthcheck") or {}
                assert hc.get("test") and not hc.get("disable"), f"{name} waits for {dep} to be healthy: it has no check"


def _health_port(svc: dict) -> int:
    test = svc["healthcheck"]["test"]
    urls = re.findall(r"http://127\.0\.0\.1:(\d+)/", " ".join(test))
    assert len(urls) == 1, f"one URL expected in {test}"
    return int(urls[0])


@pytest.mark.parametrize("name,setting", [("api", "MEMSTREAM_API_PORT"), ("mcp", "MEMSTREAM_MCP_PORT")])
def test_health_check_port_is_the_port_the_service_listens_on_and_publishes(name, setting):
    # with a non-default port from .env, so a hard-coded port anywhere would show
    env = {**filled_env(), setting: "18123"}
    svc = load("docker-compose.yml", env)["services"][name]
    listen = int(svc["environment"][setting])
    published = [p.rsplit(":", 1)[1] for p in svc["ports"]]
    assert _health_port(svc) == listen == 18123
    assert published == ["18123"], "the container port published must be the one it listens on"


def test_containers_reach_the_stores_on_the_compose_network():
    """The memstream containers use each store's in-network address and container port, and
    Kafka advertises exactly that address on a listener (else clients would be sent elsewhere)."""
    system = whole_system()
    services = system["services"]
    kafka_env = services["kafka"]["environment"]
    for name in MEMSTREAM_SERVICES:
        env = services[name]["environment"]
        kafka = f"{env['MEMSTREAM_KAFKA_HOST']}:{env['MEMSTREAM_KAFKA_PORT']}"
        assert f"//{kafka}" in kafka_env["KAFKA_ADVERTISED_LISTENERS"], kafka
        assert env["MEMSTREAM_KAFKA_HOST"] in services
        assert env["MEMSTREAM_PG_HOST"] in services and env["MEMSTREAM_PG_PORT"] == "5432"
        assert env["MEMSTREAM_NEO4J_HOST"] in services and env["MEMSTREAM_NEO4J_BOLT_PORT"] == "7687"
        assert env["MEMSTREAM_STACK_DIR"] == "/var/lib/memstream"
        assert "memstream-state:/var/lib/memstream" in services[name]["volumes"]
    # the cluster: every node's INTERNAL address is in the containers' bootstrap list
    cluster = cluster_system()["services"]
    servers = cluster["api"]["environment"]["MEMSTREAM_KAFKA_BOOTSTRAP_SERVERS"].split(",")
    nodes = [n for n in cluster if re.fullmatch(r"kafka(-\d)?", n)]
    assert sorted(servers) == sorted(f"{n}:19092" for n in nodes) and len(nodes) == 3
    for node in nodes:
        assert f"INTERNAL://{node}:19092" in cluster[node]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert set(cluster["init"]["depends_on"]) >= set(nodes), "init must wait for every node"


def test_every_variable_has_a_default_or_is_in_env_example_and_is_documented():
    seen: dict[str, bool] = {}
    for name in COMPOSE_FILES:
        load(name, seen=seen)
    example = env_example()
    without_default = {v for v, has_default in seen.items() if not has_default}
    assert without_default <= set(example), f"used without a default, not in .env.example: {without_default - set(example)}"
    assert set(example) <= set(seen), f".env.example documents variables nothing uses: {set(example) - set(seen)}"
    # documented: every variable has a comment line right above it (or above its group)
    lines = (ROOT / ".env.example").read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert lines[i - 1].startswith("#"), f".env.example: {line.split('=')[0]} has no comment above it"


def test_a_missing_secret_stops_compose_with_the_variables_name():
    env = {**filled_env(), "MEMSTREAM_PG_API_PASSWORD": ""}
    with pytest.raises(MissingVariable, match="MEMSTREAM_PG_API_PASSWORD"):
        load("docker-compose.yml", env)


def test_the_containers_commands_are_the_clis():
    """Every memstream service's command parses with the real CLI parser (the image's ENTRYPOINT
    is `memstream`), so a renamed subcommand or option fails here, not in a container."""
    from memstream.app.cli import parser
    services = whole_system()["services"]
    for name in MEMSTREAM_SERVICES:
        args = parser().parse_args(services[name]["command"])
        assert callable(args.fn)
    assert services["init"]["command"][0] == "init"
    assert services["pipeline"]["command"] == ["run"]
    assert services["api"]["command"] == ["api"]
    assert services["mcp"]["command"][:3] == ["mcp", "--transport", "http"]


# -- (c) the Dockerfile ------------------------------------------------------------------------------

def _dockerfile() -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """(ARG defaults, [(stage name, its instructions)]), line continuations joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    args: dict[str, str] = {}
    stages: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word = line.split()[0].upper()
        if word == "ARG" and not stages and "=" in line:
            k, _, v = line.split(None, 1)[1].partition("=")
            args[k] = v
        elif word == "FROM":
            parts = line.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], parts[1])
            stages.append((parts[3] if len(parts) > 3 else str(len(stages)), [f"FROM {image}"]))
        elif stages:
            stages[-1][1].append(line)
    return args, stages


def test_dockerfile_is_multi_stage_slim_and_runs_as_a_non_root_user():
    _, stages = _dockerfile()
    assert len(stages) >= 2, "a builder and a runtime stage"
    for name, lines in stages:
        assert re.fullmatch(r"FROM python:3\.11-slim(-\w+)?", lines[0]), f"{name}: {lines[0]}"
    runtime = stages[-1][1]
    users = [l.split()[1] for l in runtime if l.upper().startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the runtime stage must end as a non-root user"
    assert any(l.upper().startswith("HEALTHCHECK ") and "/readyz" in l for l in runtime)
    assert any(l.upper().startswith("COPY --FROM=BUILDER") for l in runtime), "the runtime takes the builder's venv"
    # no compiler or package build in the final image
    for l in runtime:
        assert not re.search(r"\b(gcc|g\+\+|build-essential|clang|pip install)\b", l), l
    entry = [l for l in runtime if l.upper().startswith("ENTRYPOINT")]
    assert entry and json.loads(entry[-1].split(None, 1)[1]) == ["memstream"]


def test_the_image_installs_with_the_readmes_script():
    """The builder runs `./dev install`: the function `./dev demo` and `./dev test` (the README's
    two commands) install with, so the extras and pip flags cannot drift apart."""
    _, stages = _dockerfile()
    runs = " ".join(l for l in stages[0][1] if l.upper().startswith("RUN "))
    assert re.search(r"(^|\s)\./dev install(\s|$)", runs), runs
    assert "MEMSTREAM_EXTRAS" in runs and "mcp" in " ".join(stages[0][1]), "the image needs the mcp extra"
    dev = (ROOT / "dev").read_text()
    assert re.search(r"\n  install\)\n    install_python ;;", dev)
    assert re.search(r"\nsetup\(\) \{\n  install_python\n", dev), "./dev demo|test must install the same way"
    assert "./dev demo" in (ROOT / "README.md").read_text()
    # the image carries every package pyproject.toml installs
    import tomllib
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = {l.split()[1] for l in stages[0][1] if l.upper().startswith("COPY ")}
    for pattern in include:
        assert pattern.rstrip("*") in copied, f"the builder does not copy {pattern}"
    ignored = (ROOT / ".dockerignore").read_text().split()
    for private in (".env", ".venv", ".stack", ".git"):
        assert private in ignored, f".dockerignore must keep {private} out of the build context"


def test_bash_parses_dev():
    subprocess.run(["bash", "-n", str(ROOT / "dev")], check=True)
