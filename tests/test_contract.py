"""The event contract: schemas on disk, sealing, validation with precise reasons, upcasting."""
from __future__ import annotations

from datetime import datetime, timezone

import orjson
import pytest

from kernel.errors import InvalidEvent, UnknownEventVersion
from schemas.codec import decode, encode, make_envelope
from schemas.events import FactExtracted, TurnRecorded, TurnRecordedV1
from tests.helpers import unique_user

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc)


def test_roundtrip_seals_personal_fields(keys):
    user = unique_user()
    env = make_envelope(TurnRecorded(session="s1", role="user", content="我叫张三，住在北京"), user=user, time=T0)
    raw = encode(env, keys)
    assert "张三".encode() not in raw and "北京".encode() not in raw and b"content" not in raw
    wire = orjson.loads(raw)
    assert wire["data"] == {"session": "s1", "task": None, "role": "user"}
    back = decode(raw, keys)
    assert back.data == env.data and back.id == env.id and back.time == T0 and back.user == user


def test_embedding_roundtrips_at_float32(keys):
    user = unique_user()
    vec = [0.25, -0.5, 0.125, 1.0]
    data = FactExtracted(fact_id="f", source_turn="t", channel="rule", content="x", importance=0.5,
                         embedding=vec, embed_model="m")
    back = decode(encode(make_envelope(data, user=user, time=T0), keys), keys)
    assert back.data.embedding == vec


def test_ciphertext_moved_to_another_event_is_rejected(keys):
    user = unique_user()
    a = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="a"), user=user), keys))
    b = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="b"), user=user), keys))
    a["sealed"] = b["sealed"]
    with pytest.raises(InvalidEvent, match="authentication"):
        decode(orjson.dumps(a), keys)


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: r.pop("user"), "user: Field required"),
    # Clear data of an event with nothing sealed is validated field by field (a sealed event's
    # clear data is authenticated first: altering it is tampering, see test_crypto_hygiene.py).
    (lambda r: r.update(type="task.finished", v=1, data={"status": "done"}, sealed=None), "data.task: Field required"),
    (lambda r: r.update(type="task.finished", v=1, data={"task": "t", "status": "robot"}, sealed=None),
     "data.status: Input should be"),
    (lambda r: r["data"].update(role="robot"), "fails authentication against its clear envelope"),
    (lambda r: r.update(time="yesterday"), "time: Input should be a valid datetime"),
    (lambda r: r.update(id="not-a-uuid"), "id: String should match pattern"),
])
def test_invalid_records_say_precisely_what_is_wrong(keys, mutate, reason):
    rec = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="x"), user=unique_user()), keys))
    mutate(rec)
    with pytest.raises(InvalidEvent) as err:
        decode(orjson.dumps(rec), keys)
    assert reason in err.value.reason


def test_unknown_version_and_invalid_utf8(keys):
    rec = orjson.loads(encode(make_envelope(TurnRecorded(session="s", role="user", content="x"), user=unique_user()), keys))
    rec["v"] = 9
    with pytest.raises(UnknownEventVersion, match=r"turn.recorded v9 \(known versions: \[1, 2\]\)"):
        decode(orjson.dumps(rec), keys)
    with pytest.raises(InvalidEvent, match="(?i)utf-8|unicode|invalid JSON"):
        decode(b'{"id": "\xff\xfe"}', keys)
    with pytest.raises(InvalidEvent, match="empty record"):
        decode(None, keys)


def test_v1_turn_is_upcast_to_v2_on_read(keys):
    user = unique_user()
    env = make_envelope(TurnRecordedV1(session="s", role="user", text="I live in Oslo"), user=user, time=T0)
    back = decode(encode(env, keys), keys)
    assert back.stored_version == 1 and back.version == 2
    assert isinstance(back.data, TurnRecorded)
    assert back.data.content == "I live in Oslo" and back.data.task is None


def test_erased_key_reads_as_erased_not_as_error(keys):
    user = unique_user()
    raw = encode(make_envelope(TurnRecorded(session="s", role="user", content="secret"), user=user), keys)
    assert keys.erase(user)
    back = decode(raw, keys)
    assert back.erased and back.data is None and back.type == "turn.recorded"


def test_master_key_rotation_rewraps_without_touching_events(settings):
    from adapters.privacy.keystore import KeyStore
    from adapters.privacy.masterkeys import new_master_key_line, parse_master_keys
    # A namespace of its own: rotation re-wraps every key of a namespace, and the running
    # workers of this session must keep reading theirs with the configured master key.
    own = settings.model_copy(update={"namespace": settings.namespace + "_rot"})
    old_line, new_line = new_master_key_line("old"), new_master_key_line("new")
    user = unique_user()
    before = KeyStore(own, master=parse_master_keys(old_line))
    raw = encode(make_envelope(TurnRecorded(session="s", role="user", content="before rotation"), user=user), before)

    # re-wrapping updates keys in place: the owner role's right, as `memstream keys rotate` uses it
    rotating = KeyStore(own, master=parse_master_keys(new_line + "," + old_line), role="owner")
    assert rotating.rotate_master() == 1
    assert rotating.rotate_master() == 0  # idempotent

    # The old master key can now be dropped: the new one alone opens the event written before.
    after = KeyStore(own, master=parse_master_keys(new_line))
    assert decode(raw, after).data.content == "before rotation"
    for ks in (before, rotating, after):
        ks.close()
