"""streams/faust_adapter.py holds every faust workaround, for a bounded faust version range.

Each test here fails when the faust behaviour a workaround relies on changes — a private name gone
or re-signed, the off-by-one fixed, the timestamps in other units, the options no longer popped —
so a faust upgrade shows at once which workaround to revisit (or drop). The last test holds the
rule that no module outside the adapter touches a private attribute of faust or aiokafka.
No broker: the app and consumer are built, never started.
"""
from __future__ import annotations

import ast
import inspect
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

import faust
import pytest
from faust.stores import rocksdb as faust_rocksdb
from faust.transport.consumer import Consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from streams import faust_adapter
from streams.faust_adapter import FAUST_SUPPORTED, faust_supported, faust_version
from tests.product_packages import product_packages

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = "streams/faust_adapter.py"
TP0 = TP("t.facts", 0)


def app(**kw):
    return faust.App("faust-adapter-test", broker="kafka://127.0.0.1:1", web_enabled=False,
                     key_serializer="raw", value_serializer="raw", **kw)


# -- the version bound --------------------------------------------------------------------------

def test_the_installed_faust_is_within_the_bound_and_pyproject_says_the_same():
    assert faust_supported(), f"faust-streaming {faust_version()} is outside {FAUST_SUPPORTED}: re-check the workarounds"
    low, high = FAUST_SUPPORTED
    line = next(x for x in (ROOT / "pyproject.toml").read_text().splitlines() if '"faust-streaming' in x)
    assert f'"faust-streaming>={low},<{high}"' in line, line
    assert faust_supported("0.15.3") and faust_supported("0.15.10")
    assert not faust_supported("0.15.2") and not faust_supported("0.16.0") and not faust_supported("1.0.0")


# -- 1, 2: the offset guard --------------------------------------------------------------------

def test_the_patched_consumer_methods_exist_with_the_signatures_the_patch_wraps():
    faust_adapter.install()
    new_offset = faust_adapter.faust_new_offset()
    assert new_offset is not Consumer._new_offset, "install() did not patch Consumer._new_offset"
    assert list(inspect.signature(new_offset).parameters) == ["self", "tp"]
    commit = getattr(Consumer._commit_offsets, "memstream_original", None)
    assert commit is not None and inspect.iscoroutinefunction(commit)
    assert list(inspect.signature(commit).parameters)[:2] == ["self", "offsets"]
    assert list(inspect.signature(faust_aiokafka.Consumer._to_message).parameters) == ["self", "tp", "record"]


def test_faust_still_commits_over_one_unacked_head_offset():
    """faust#606: the bug install() guards against. When this fails faust fixed it: the patch of
    _new_offset may go (its other half, the log start when nothing is committed, may not)."""
    _, c = consumer()
    c._committed_offset[TP0] = 37
    c._acked[TP0].extend([38, 39, 40])
    assert faust_adapter.faust_new_offset()(c, TP0) == 41
    # and with nothing committed (None), faust commits the first run of acks wherever it starts
    _, c = consumer()
    c._acked[TP0].extend([3, 4])
    assert c._committed_offset[TP0] is None
    assert faust_adapter.faust_new_offset()(c, TP0) == 5


def consumer():
    a = app()
    return a, a.consumer


def test_the_consumer_bookkeeping_the_guard_reads_is_where_it_was():
    a, c = consumer()
    c._committed_offset[TP0] = 3       # defaultdicts keyed by TP, as the guard indexes them
    for name in ("_acked", "_gap", "_read_offset", "_committed_offset"):
        assert hasattr(getattr(c, name), "__getitem__"), name
    assert c._committed_offset.get(TP("other", 0)) is None
    assert isinstance(c._unacked_messages, (set, dict)) or hasattr(c._unacked_messages, "add")
    assert hasattr(c._paused_partitions, "add")
    assert hasattr(c._gap[TP0], "at")  # an IntervalTree
    assert callable(c.callback) and callable(c.highwater) and callable(c.earliest_offsets)
    assert isinstance(a.topics._topics, set)
    assert hasattr(a.topic("t", key_type=bytes, value_type=bytes), "_queue")
    assert callable(a.topics.acks_enabled_for)
    assert hasattr(a, "rebalancing") and hasattr(a, "flow_control")


def test_faust_turns_a_fetched_record_into_a_message_the_healer_can_feed_back():
    """OffsetHealer hands records it read itself to consumer.callback(consumer._to_message(tp, r)):
    its FetchedRecord must still be what faust's aiokafka driver reads."""
    _, c = consumer()
    record = faust_adapter.FetchedRecord("t.facts", 0, 37, 1_700_000_000_123, 0, [], b"alice", b"{}")
    msg = c._to_message(TP0, record)
    assert (msg.topic, msg.partition, msg.offset, msg.key, msg.value) == ("t.facts", 0, 37, b"alice", b"{}")


# -- 3: table options ---------------------------------------------------------------------------

def test_faust_rocksdb_store_pops_from_the_options_it_is_given():
    """Why table_options copies: faust's RocksDB store pops "driver" from the dict. When this
    fails the copy is harmless but no longer needed."""
    with tempfile.TemporaryDirectory() as d:
        a = app(store="rocksdb://", datadir=d)
        given = {"driver": "rocksdict", "write_buffer_size": 1 << 20}
        table = a.Table("t", default=None, partitions=2, key_type=bytes, value_type=bytes, options=given)
        assert isinstance(table.data, faust_rocksdb.Store)
        assert "driver" not in given, "faust no longer pops from the options"
        kept = {"driver": "rocksdict"}
        other = a.Table("u", default=None, partitions=2, key_type=bytes, value_type=bytes,
                        options=faust_adapter.table_options(kept))
        assert isinstance(other.data, faust_rocksdb.Store)
        assert kept == {"driver": "rocksdict"}
    assert faust_adapter.table_options(None) is None


# -- 4: table sizes -----------------------------------------------------------------------------

def test_table_size_reads_the_rocksdb_stores_databases_and_the_memory_stores_values():
    with tempfile.TemporaryDirectory() as d:
        a = app(store="rocksdb://", datadir=d)
        table = a.Table("t", default=None, partitions=2, key_type=bytes, value_type=bytes,
                        options={"driver": "rocksdict"})
        assert isinstance(table.data._dbs, dict), "faust's RocksDB store keeps its databases elsewhere now"
        assert "_dbs" in inspect.getsource(faust_rocksdb.Store._db_for_partition)
        assert faust_adapter.table_size(table) == {"keys": 0, "bytes": 0, "estimated": True}
    mem = app().Table("m", default=None, partitions=2, key_type=bytes, value_type=bytes)
    assert not hasattr(mem.data, "_dbs")
    assert faust_adapter.table_size(mem) == {"keys": 0, "bytes": 0}


# -- 5: message timestamps ----------------------------------------------------------------------

def test_faust_gives_a_messages_timestamp_in_float_seconds():
    _, c = consumer()
    record = faust_adapter.FetchedRecord("t.facts", 0, 1, 1_700_000_000_123, 0, [], b"k", b"v")
    msg = c._to_message(TP0, record)
    assert msg.timestamp == pytest.approx(1_700_000_000.123)
    assert faust_adapter.appended_ms(msg) == 1_700_000_000_123
    none = c._to_message(TP0, faust_adapter.FetchedRecord("t.facts", 0, 2, None, 0, [], b"k", b"v"))
    assert none.timestamp is None and faust_adapter.appended_ms(none) is None
    assert faust_adapter.appended_ms(SimpleNamespace(timestamp=0)) is None


# -- the rule: faust's private parts are touched in the adapter only -------------------------------

PACKAGES = product_packages()
FAUST = {"faust", "aiokafka", "mode"}
# Names whose underscore attributes are public API, not faust's: os._exit, sys._getframe, and
# confluent-kafka's error codes (KafkaError._PARTITION_EOF).
PUBLIC = {"self", "cls", "os", "sys", "KafkaError"}


def _imports_faust(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in FAUST for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FAUST:
            return True
    return False


def private_accesses(path: Path, name: str) -> list[str]:
    """`x._name` (x not in PUBLIC) and getattr/hasattr/setattr(x, "_name") in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), name)):
        if isinstance(node, ast.Attribute) and re.match(r"_[^_]", node.attr):
            base = node.value.id if isinstance(node.value, ast.Name) else None
            if base not in PUBLIC:
                found.append(f"{name}:{node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and re.match(r"_[^_]", node.args[1].value)):
            found.append(f"{name}:{node.lineno}: {node.func.id}(…, {node.args[1].value!r})")
    return found


def test_no_module_outside_the_adapter_touches_a_private_attribute_of_faust_or_aiokafka():
    """Every module of streams/ (they all handle faust's objects) and every other module that
    imports faust, aiokafka or mode: no underscore attribute of anything but its own (self, cls)."""
    offenders = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == ADAPTER:
                continue
            if pkg == "streams" or _imports_faust(ast.parse(path.read_text(), rel)):
                offenders += private_accesses(path, rel)
    assert offenders == [], "faust's private parts belong in streams/faust_adapter.py:\n" + "\n".join(offenders)


def test_the_rule_catches_what_it_is_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(consumer, table):\n    consumer._acked\n    getattr(table.data, '_dbs', None)\n"
                     "    import os\n    os._exit\n    self = consumer\n    self._mine\n    consumer.__dict__\n")
    assert [x.split(": ", 1)[1] for x in private_accesses(probe, "probe.py")] == ["._acked",
                                                                                 "getattr(…, '_dbs')"]
