"""Sealing without services: records sealed by older formats still open, a forked child never
repeats its parent's nonces or ids. Sealed events on the real stack: tests/test_crypto_hygiene.py."""
from __future__ import annotations

import os
from pathlib import Path

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kernel.ids import random_bytes, uuid7
from schemas.codec import decode


def _in_child(produce) -> list[str]:
    """Run `produce` in a forked child and return what it produced (hex strings, via a pipe)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write and leave without running the parent's atexit/pytest machinery
        try:
            os.close(r)
            os.write(w, orjson.dumps(produce()))
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return orjson.loads(b"".join(chunks))


def _nonces_and_ids(n: int = 200) -> list[str]:
    return [random_bytes(12).hex() for _ in range(n)] + [uuid7() for _ in range(n)]


def test_forked_child_never_repeats_the_parents_nonces_or_ids():
    random_bytes(12)   # the parent has drawn before forking (a buffer, if any, is now warm)
    child = _in_child(_nonces_and_ids)
    parent = _nonces_and_ids()
    assert len(child) == len(parent) == 400
    assert not set(child) & set(parent), "a forked child repeated its parent's nonces/ids"


FIXTURES = Path(__file__).parent.parent / "fixtures"


class FixtureKeys:
    """The fixed key the seal-v1 fixture was written with (a test-only key, not a secret)."""
    aead = AESGCM(bytes(range(32)))

    def key_for_write(self, user):
        return "fixture-kid", self.aead

    def key_for_read(self, user, kid):
        return self.aead if kid == "fixture-kid" else None


def test_a_record_sealed_before_seal_v2_still_opens():
    """tests/fixtures/turn.recorded.v2.seal-v1.json was written by the codec as it was before seal
    v2 (associated data = the event id, no `sealed.v`): it still opens, as the log is never rewritten."""
    raw = (FIXTURES / "turn.recorded.v2.seal-v1.json").read_bytes()
    assert "v" not in orjson.loads(raw)["sealed"]
    env = decode(raw, FixtureKeys())
    assert env.data.content == "我叫张三 (sealed before seal v2)" and env.user == "fixture-user"
