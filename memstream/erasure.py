"""Erasing a user by crypto-shredding.

Steps, in this order:
 1. publish `user.erased` (acks=all) — every projection drops the user's rows when it reads it;
 2. erase in the key store: the user enters the erased-users registry and their data key is
    deleted in one transaction, and every process is notified to drop its cached keys — from
    then on every sealed field of theirs, in every topic, backup and replay, is unreadable, and
    no key is ever created for them again (a later publish for them fails with UserErased).
The `user.erased` event carries the key store's control MAC (schemas/codec.py): consumers act
only on erasures memstream wrote.
Publishing first means a crash between 1 and 2 leaves an erasure that projections applied and a
key still to delete (re-run the command); the reverse order could leave rows nobody removes.
"""
from __future__ import annotations

from memstream.bus import EventProducer, Position, ensure_topics
from memstream.config import Settings
from memstream.privacy.keystore import KeyStore
from schemas.codec import encode, make_envelope
from schemas.events import UserErased


def erase_user(settings: Settings, user: str, requested_by: str = "operator") -> Position:
    ensure_topics(settings)
    keys = KeyStore(settings)
    producer = EventProducer(settings)
    try:
        env = make_envelope(UserErased(requested_by=requested_by), user=user, producer="operator/1")
        position = producer.send(settings.topic("memory"), user, encode(env, keys)).result(timeout=30)
        keys.erase(user)
        return position
    finally:
        producer.close()
        keys.close()
