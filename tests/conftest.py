"""Test wiring: the real local stack, a fresh namespace per test session, real workers.

Every test session gets its own namespace (topics, consumer groups, Postgres schema, Neo4j `ns`),
so runs never see each other's data. MEMSTREAM_* variables set here are inherited by the
worker processes the pipeline fixture starts.
"""
from __future__ import annotations

import os
import uuid

import pytest

# setdefault: worker processes and re-imports see the same namespace as this session.
NAMESPACE = os.environ.setdefault("MEMSTREAM_TEST_NAMESPACE", "t" + uuid.uuid4().hex[:10])
os.environ["MEMSTREAM_NAMESPACE"] = NAMESPACE
os.environ.setdefault("MEMSTREAM_PARTITIONS", "3")


def _free_port_block(width: int = 8) -> int:
    """A base port whose next `width` ports are free here: workers serve /metrics on base + offset
    (adapters/metrics.py), and sessions side by side (CI and a developer) must not share them."""
    import random
    import socket
    for _ in range(100):
        base = random.randrange(20000, 60000)
        try:
            for port in range(base + 1, base + width):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    return 0   # none found: workers run without metrics endpoints


os.environ.setdefault("MEMSTREAM_METRICS_PORT", str(_free_port_block()))

from kernel.config import Settings, get_settings  # noqa: E402

# Tests that stop services and kill brokers on their private stacks (tests/helpers.py): one group.
FAULT_MODULES = {"test_faults_pipeline", "test_faults_projectors", "test_faults_status"}


def pytest_xdist_make_scheduler(config, log):
    """Two groups for `pytest -n 2 --dist loadgroup` (./dev test): the fault-injection tests in one
    process, everything else in the other. Within a group tests run one at a time, as they assume:
    the fault tests share one private stack they stop and start, and the rest share this session's
    namespace and its pipeline on the shared stack. The two never touch each other's services.

    A scheduler rather than `xdist_group` marks: with pytest 9.2, xdist 3.8's loadgroup ignores
    the marks and deals tests round-robin (pytest-dev/pytest-xdist#1386), which would start a
    second pipeline in the shared namespace."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FaultsApart(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
            return "faults" if module in FAULT_MODULES else "shared-stack"

    return FaultsApart(config, log)


# -- tiers: a test's tier is where it lives ------------------------------------------------------------
# tests/fast/      `fast`: no service (no Kafka, Postgres, Neo4j; no stack fixture), the whole tier
#                  well under a minute: ./dev test runs it first (tests/fast/conftest.py points the
#                  stores' addresses at a tripwire and fails a test that connects).
# tests/*.py       `stack`: the real local stack brought up by the project's own scripts, or slow
#                  self-contained work (a wheel build, a model server).
# FAULT_MODULES    `stack` and `faults`: private stacks they stop and start, in their own process.
FAST_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fast") + os.sep
# Fixtures that start or reach services: every one of them goes through `stack`.
SERVICE_FIXTURES = {"stack", "settings", "admin_key", "keys", "client", "pipeline"}


def is_fast(path) -> bool:
    return str(path).startswith(FAST_DIR)


@pytest.hookimpl(tryfirst=True)        # before `-m` selects by these marks
def pytest_collection_modifyitems(config, items):
    misplaced = []
    for item in items:
        if is_fast(item.path):
            item.add_marker(pytest.mark.fast)
            wants = sorted(SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())))
            if wants:
                misplaced.append(f"{item.nodeid} asks for {', '.join(wants)}")
        else:
            item.add_marker(pytest.mark.stack)
            if item.path.stem in FAULT_MODULES:
                item.add_marker(pytest.mark.faults)
    if misplaced:
        raise pytest.UsageError("fast tests must not use the stack (move them out of tests/fast/):\n  "
                                + "\n  ".join(misplaced))


@pytest.fixture(scope="session")
def stack():
    from memstream import stack as local_stack
    from adapters.privacy.tenants import local_key_file
    local_stack.up()              # also writes this namespace's local admin key (secrets/api-<ns>.key)
    # Named now, not at teardown: a test that left MEMSTREAM_NAMESPACE changed made teardown delete
    # the default namespace's key (secrets/api.key) after a full run.
    own_key = local_key_file(get_settings())
    assert own_key.name == f"api-{NAMESPACE}.key"
    yield True
    own_key.unlink(missing_ok=True)   # one per test namespace: not left behind


@pytest.fixture(scope="session")
def settings(stack) -> Settings:
    get_settings.cache_clear()
    s = get_settings()
    assert s.namespace == NAMESPACE
    from adapters.bus import ensure_topics
    from projections.pg import ensure_schema
    ensure_topics(s)
    ensure_schema(s)
    return s


@pytest.fixture(scope="session")
def admin_key(settings) -> str:
    """The local admin key, made the way `stack up` makes it (a 0600 file under the stack's secrets,
    one per namespace); the HTTP SDK and the CLI find it there by default."""
    from adapters.privacy.apikeys import ensure_local_admin_key
    from adapters.privacy.tenants import local_api_key, local_key_file
    ensure_local_admin_key(settings)          # `stack up` (the stack fixture) made it already: kept as is
    assert local_key_file(settings).stat().st_mode & 0o777 == 0o600
    return local_api_key(settings)


@pytest.fixture(scope="session")
def keys(settings):
    from adapters.privacy.keystore import KeyStore
    ks = KeyStore(settings)
    yield ks
    ks.close()


@pytest.fixture(scope="session")
def client(settings):
    from adapters.sdk import MemoryClient
    c = MemoryClient(settings)
    yield c
    c.close()


@pytest.fixture(scope="session")
def pipeline(settings):
    from memstream.app.workers import start_pipeline, stop_pipeline
    from tests.helpers import WATCHED
    procs = start_pipeline(settings)
    WATCHED.update(procs)
    # Ready means a turn goes all the way through: on a freshly started broker the faust
    # workers need a while to create their internal topics and join their groups.
    from adapters.sdk import MemoryClient
    from projections.queries import preferences
    from tests.helpers import wait_for
    probe = MemoryClient(settings)
    try:
        probe.record_turn("probe-ready", "s", "user", "I live in Probeville")
        wait_for(lambda: preferences(settings, "probe-ready"), timeout=180, what="the pipeline to be ready")
    except BaseException:
        # a fixture that fails before its yield is never torn down: stop the workers here
        WATCHED.clear()
        stop_pipeline(procs)
        raise
    finally:
        probe.close()
    yield procs
    WATCHED.clear()
    stop_pipeline(procs)
    for name in procs:
        log = settings.stack_dir / "logs" / f"{settings.namespace}-{name}.log"
        if log.exists() and b"Traceback" in log.read_bytes():
            print(f"\n--- {log} ---\n" + log.read_text()[-4000:])
