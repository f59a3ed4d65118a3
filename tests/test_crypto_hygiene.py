"""Crypto hygiene of the contract: fork-safe randomness, associated data over the clear envelope,
authenticated control events."""
from __future__ import annotations

import base64
import os

import orjson

from memstream.ids import random_bytes, uuid7
from schemas.codec import encode, make_envelope
from schemas.events import TurnRecorded
from tests.helpers import unique_user


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


def test_forked_child_seals_with_fresh_nonces(keys):
    """The nonce actually used by encode() (the first 12 bytes of the sealed blob) differs between
    a parent and its forked child sealing under the same user key."""
    user = unique_user()
    keys.key_for_write(user)

    def nonces() -> list[str]:
        out = []
        for i in range(50):
            env = make_envelope(TurnRecorded(session="s", role="user", content=f"turn {i}"), user=user)
            ct = orjson.loads(encode(env, keys))["sealed"]["ct"]
            out.append(base64.b64decode(ct)[:12].hex())
        return out

    child = _in_child(nonces)
    parent = nonces()
    assert not set(child) & set(parent), "parent and child sealed with the same nonce under one key"
