"""Fault injection for tests/test_faults_pipeline.py, loaded into worker processes through PYTHONPATH.

With MEMSTREAM_TEST_CRASH_ON set, the extractor worker dies hard (os._exit, as an abort in a C
extension or an out-of-memory kill would: no Python error handling runs) whenever a batch it
extracts holds a turn containing that text. Nothing here is imported by memstream itself.
"""
import os
import sys

_marker = os.environ.get("MEMSTREAM_TEST_CRASH_ON")
if _marker and sys.orig_argv[-2:] == ["worker", "extractor"]:
    import streams.extraction_core as _core

    # events_for: what the extractor worker calls per batch (facts, then relation claims, #26)
    _original = _core.RuleExtractor.events_for

    def _events_for(self, turns, *args, **kwargs):
        if any(_marker in (t.data.content or "") for t in turns):
            os._exit(134)
        return _original(self, turns, *args, **kwargs)

    _core.RuleExtractor.events_for = _events_for

# With MEMSTREAM_TEST_SKIP_ONCE=<topic suffix>:<partition or *>:<first offset>, the memory worker's
# stream skips the first fact record at or after that position once (`*`: on any partition), the
# way faust skips a record fetched across a rebalance (faust#596: a stale generation id; the record
# is neither processed nor acked, its partition reads on). streams/faust_adapter.py must commit nothing over it and read it again.
_skip = os.environ.get("MEMSTREAM_TEST_SKIP_ONCE")
if _skip and sys.orig_argv[-2:] == ["worker", "memory"]:
    from faust.transport.drivers import aiokafka as _driver

    _suffix, _part, _from = _skip.rsplit(":", 2)
    _done = []
    _original_to_message = _driver.Consumer._to_message

    def _to_message(self, tp, record):
        message = _original_to_message(self, tp, record)
        if (not _done and tp.topic.endswith("." + _suffix) and (_part == "*" or tp.partition == int(_part))
                and record.offset >= int(_from) and b'"fact.extracted"' in (record.value or b"")):
            _done.append(record.offset)
            sys.stderr.write(f"test injection: the stream skips {tp.topic}:{tp.partition}:{record.offset}\n")
            message.generation_id = -1
        return message

    _driver.Consumer._to_message = _to_message
