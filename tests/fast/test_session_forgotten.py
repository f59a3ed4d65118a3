"""session.forgotten (clearing a conversation session) without a stack: a control event, so it is
signed like memory.forgotten and refused without its proof of origin; its session id follows the
input contract; the thin client's delete_session sends the route the API serves."""
from __future__ import annotations

import json

import orjson
import pytest
from pydantic import ValidationError

from kernel.errors import InvalidEvent
from schemas.codec import CONTROL_TYPES, decode, encode, make_envelope
from schemas.events import REGISTRY, SessionForgotten
from tests.fast.inmemory import KeyRing
from tests.fast.test_python_client_offline import POSITION, stub  # noqa: F401  (the stub server fixture)


def test_session_forgotten_is_a_registered_signed_control_event():
    assert REGISTRY[("session.forgotten", 1)] is SessionForgotten and "session.forgotten" in CONTROL_TYPES
    keys = KeyRing()
    raw = encode(make_envelope(SessionForgotten(session="chat-1", requested_by="api:k1"), user="acme/alice"), keys)
    record = orjson.loads(raw)
    assert record["auth"]["kid"] == "c1" and "sealed" not in record      # nothing personal to seal
    env = decode(raw, keys)
    assert (env.type, env.user, env.data.session, env.data.requested_by) == (
        "session.forgotten", "acme/alice", "chat-1", "api:k1")


def test_a_session_forgotten_without_or_with_a_forged_proof_is_refused():
    keys = KeyRing()
    record = orjson.loads(encode(make_envelope(SessionForgotten(session="chat-1"), user="alice"), keys))
    unsigned = {k: v for k, v in record.items() if k != "auth"}
    with pytest.raises(InvalidEvent, match="proof of origin"):
        decode(orjson.dumps(unsigned), keys)
    moved = {**record, "data": {**record["data"], "session": "chat-2"}}     # the MAC covers the session
    with pytest.raises(InvalidEvent, match="MAC"):
        decode(orjson.dumps(moved), keys)


@pytest.mark.parametrize("session", ["", "bad\x00id", "x" * 201])
def test_the_session_id_follows_the_input_contract(session):
    with pytest.raises(ValidationError):
        SessionForgotten(session=session)


def test_delete_session_sends_the_route(stub):  # noqa: F811
    from memstream_client import MemstreamClient
    url, s = stub
    s.script = [(202, {}, {**POSITION, "memory_ids": ["m1"]})]
    with MemstreamClient(url, api_key="msk_test") as mem:
        out = mem.delete_session("alice", "chat 1?", reason="user asked")
    assert out.memory_ids == ["m1"] and out.token == POSITION["token"]
    method, path, sent, _ = s.seen[0]
    assert method == "DELETE" and path == "/v1/users/alice/sessions/chat%201%3F?reason=user+asked", path
    assert sent["body"] is None and json.dumps(sent["auth"]) == '"Bearer msk_test"'
