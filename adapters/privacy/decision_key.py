"""The pipeline's decision key: proof that a memory decision was written by memstream's workers
(#28 item 1).

Why: the API, MCP and CLI write to the memory topic (memory.recalled, and the control events that
erase, forget and tick, which carry the key store's control MAC). Their Kafka principal could
therefore also write decisions — `memory.superseded`, `memory.decayed`, `memory.expired`… — for any
tenant's user, and the projectors applied them (the attack run archived a memory of another tenant
at importance 0). The key store cannot hold the proof: every serving process reads it. So the
workers (memory processor, projectors, replay tools) hold a key of their own, from a setting or a
file the serving processes do not need, and every decision event carries an HMAC with it
(schemas/codec.py: DECISION_TYPES, `auth`). A consumer refuses a decision without a valid one:
dead-lettered, nothing changes.

Logs written before the key existed stay readable: the key carries the moment it was made
(`since`), and a decision without `auth` is accepted only when the broker appended it before that
moment. The topics stamp records with the broker's clock (LogAppendTime, adapters/topology.py), so
no producer can date a forged record into the past.

Format, one line (the file `<stack_dir>/secrets/decision.key`, or MEMSTREAM_DECISION_KEY):
    memstream-decision-key/1 <since: ms since the epoch> <base64 of 32 random bytes>
`memstream stack up` and `memstream init` create the file once (0600, O_EXCL); a process that
must sign or verify decisions and finds neither refuses to start (require()).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
import time
from pathlib import Path

from adapters.secret_files import read_secret, write_new_secret
from kernel.config import Settings
from kernel.errors import ConfigError
from schemas.codec import DecisionKey

MAGIC = "memstream-decision-key/1"
MISSING = ("no decision key: the pipeline's workers sign and check every memory decision with it. Run "
           "`memstream stack up` (or `memstream init`), which creates <stack_dir>/secrets/decision.key, "
           "or set MEMSTREAM_DECISION_KEY")


def path(settings: Settings) -> Path:
    return settings.stack_dir / "secrets" / "decision.key"


def new_line(now_ms: int | None = None) -> str:
    since = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{MAGIC} {since} {base64.b64encode(secrets.token_bytes(32)).decode()}\n"


def parse(text: str, where: str) -> DecisionKey:
    parts = text.split()
    if len(parts) != 3 or parts[0] != MAGIC:
        raise ConfigError(f"{where}: expected '{MAGIC} <since_ms> <base64 key>'")
    try:
        since = int(parts[1])
        key = base64.b64decode(parts[2], validate=True)
    except (ValueError, binascii.Error):
        raise ConfigError(f"{where}: since must be an integer and the key base64") from None
    if len(key) < 32:
        raise ConfigError(f"{where}: the key must be at least 32 bytes (got {len(key)})")
    return DecisionKey(hashlib.sha256(key).hexdigest()[:12], key, since)


def ensure(settings: Settings) -> str:
    """Create the key file unless the setting or the file already gives the key."""
    if settings.decision_key is not None:
        return "from MEMSTREAM_DECISION_KEY"
    return "created" if write_new_secret(path(settings), new_line()) else "present"


def load(settings: Settings) -> DecisionKey | None:
    """The key from the setting, else the file; None when neither is there."""
    if settings.decision_key is not None:
        return parse(settings.decision_key.get_secret_value(), "MEMSTREAM_DECISION_KEY")
    p = path(settings)
    if not p.exists():
        return None
    return parse(read_secret(p, "", "decision key"), str(p))


def require(settings: Settings) -> DecisionKey:
    """The key, for a process that signs or verifies decisions; ConfigError saying what to do."""
    key = load(settings)
    if key is None:
        raise ConfigError(MISSING)
    return key


def check_held(keys) -> None:
    """For a pipeline process (memory processor, projectors, replay): refuse to start without the key
    rather than write decisions nobody accepts, or accept forged ones unchecked."""
    if keys.decision_key() is None:
        raise ConfigError(MISSING)
