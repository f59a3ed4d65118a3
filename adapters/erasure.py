"""Erasing a user by crypto-shredding.

Steps, in this order:
 1. publish `user.erased` (acks=all) — every projection drops the user's rows when it reads it;
 2. erase in the key store: the user enters the erased-users registry and their data key is
    deleted in one transaction, and every process is notified to drop its cached keys — from
    then on every sealed field of theirs, in every topic, backup and replay, is unreadable, and
    no key is ever created for them again (a later publish for them fails with UserErased);
 3. delete their rows from the namespace's shadows: read models that no live projector keeps
    (a what-if's, a `verify --keep`'s, a time-travel's left by a crash; Postgres schemas and graph
    generations named `<ns>__…`) never read the `user.erased` of step 1. A rebuild in progress
    does read it: it replays the log up to the end. Shadows made later cannot open the user's
    events at all (step 2).
The `user.erased` event carries the key store's control MAC (schemas/codec.py): consumers act
only on erasures memstream wrote.
Publishing first means a crash between 1 and 2 leaves an erasure that projections applied and a
key still to delete (re-run the command); the reverse order could leave rows nobody removes.
"""
from __future__ import annotations

from adapters.bus import EventProducer, Position, ensure_topics
from kernel.config import Settings
from adapters.kafka_auth import CONTROL
from adapters.privacy.keystore import KeyStore
from schemas.codec import encode, make_envelope
from schemas.events import UserErased


def erase_user(settings: Settings, user: str, requested_by: str = "operator") -> Position:
    ensure_topics(settings)
    keys = KeyStore(settings)
    producer = EventProducer(settings, CONTROL)   # user.erased goes to the memory topic: an operator's write, as the control principal (it may write only that topic)
    try:
        env = make_envelope(UserErased(requested_by=requested_by), user=user, producer="operator/1")
        position = producer.send(settings.topic("memory"), user, encode(env, keys)).result(timeout=30)
        keys.erase(user)
        erase_from_shadows(settings, user)
        return position
    finally:
        producer.close()
        keys.close()


def request_scrub(settings: Settings, position: Position) -> None:
    """Ask the pipeline for the storage scrub after the erasure at `position` (memstream/app/
    storage_scrub.py: ScrubRequests runs it as the owner): as the API role, through the owner's
    function, so a serving process that erases holds no owner password (#28)."""
    import logging

    import psycopg

    from adapters.privacy import shadow_functions
    try:
        with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
            shadow_functions.request_scrub(conn, settings.namespace, position.token())
    except psycopg.Error as exc:
        # The erasure itself is done (key deleted, event published): its answer stands; the scrub
        # is what an operator must then run by hand.
        logging.getLogger("memstream.erasure").warning(
            "the storage scrub after the erasure at %s could not be filed (%s): run `memstream erase scrub --after %s`",
            position.token(), str(exc).splitlines()[0] if str(exc) else type(exc).__name__, position.token())


def erase_from_shadows(settings: Settings, user: str) -> dict[str, int]:
    """Step 3: the user's rows in every shadow of the namespace, deleted; rows per place."""
    return delete_from_shadows(settings, [user])


def delete_from_shadows(settings: Settings, users: list[str]) -> dict[str, int]:
    """Delete these users' rows from every shadow of the namespace (Postgres schemas and graph
    generations `<ns>__…`); rows per `schema.table` (and `neo4j:shadows`). Erasure tombstones stay:
    a rebuild in progress must go on refusing the users' late events."""
    import psycopg

    from adapters import neo4j_auth
    from adapters.privacy import shadow_functions

    prefix = settings.namespace + "__"
    if not users:
        return {}
    # As the API role, through the owner's function (adapters/privacy/shadow_functions.py): an
    # erasure requested over HTTP runs in a serving process, which holds no owner password (#28).
    with psycopg.connect(settings.pg_dsn(role="api"), autocommit=True) as conn:
        deleted = shadow_functions.erase_from_shadows(conn, settings.namespace, users)
    driver = neo4j_auth.driver(settings)
    try:
        with driver.session() as session:
            n = session.run("MATCH (m:Memory) WHERE m.user IN $users AND m.ns STARTS WITH $prefix DETACH DELETE m "
                            "RETURN count(*) AS n", users=users, prefix=prefix).single()["n"]
            n += session.run("MATCH (x:Entity) WHERE x.user IN $users AND x.ns STARTS WITH $prefix DETACH DELETE x "
                             "RETURN count(*) AS n", users=users, prefix=prefix).single()["n"]
        if n:
            deleted["neo4j:shadows"] = n
    finally:
        driver.close()
    return deleted
