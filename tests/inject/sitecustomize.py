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

    _original = _core.RuleExtractor.facts_for

    def _facts_for(self, turns):
        if any(_marker in (t.data.content or "") for t in turns):
            os._exit(134)
        return _original(self, turns)

    _core.RuleExtractor.facts_for = _facts_for
