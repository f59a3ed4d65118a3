"""Master keys: parse, load and wrap/unwrap user data keys.

Master keys come from MEMSTREAM_MASTER_KEYS ('kid:base64[,kid:base64…]', newest first) or the
file <stack_dir>/secrets/master.keys (one 'kid:base64' per line, newest first). They are never
logged; the first one wraps new data keys, all of them can unwrap (so rotation is re-wrapping
the small key table, never re-writing the log).
"""
from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kernel.config import Settings
from kernel.errors import ConfigError
from adapters.secret_files import write_new_secret


@dataclass(frozen=True)
class MasterKeys:
    current_kid: str
    keys: dict[str, bytes]

    def __repr__(self) -> str:  # never show key material
        return f"MasterKeys(current={self.current_kid!r}, kids={list(self.keys)})"

    def wrap(self, user: str, kid: str, data_key: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        aad = f"{user}|{kid}".encode()
        return self.current_kid, nonce + AESGCM(self.keys[self.current_kid]).encrypt(nonce, data_key, aad)

    def unwrap(self, user: str, kid: str, master_kid: str, wrapped: bytes) -> bytes:
        if master_kid not in self.keys:
            raise ConfigError(f"master key {master_kid!r} is not configured; cannot unwrap data keys it wrapped")
        aad = f"{user}|{kid}".encode()
        return AESGCM(self.keys[master_kid]).decrypt(wrapped[:12], wrapped[12:], aad)


def parse_master_keys(text: str) -> MasterKeys:
    keys: dict[str, bytes] = {}
    order: list[str] = []
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        kid, sep, b64 = item.partition(":")
        if not sep:
            raise ConfigError("master key entries must be 'kid:base64key'")
        try:
            key = base64.b64decode(b64, validate=True)
        except ValueError as exc:
            raise ConfigError(f"master key {kid!r} is not valid base64") from exc
        if len(key) != 32:
            raise ConfigError(f"master key {kid!r} must be 32 bytes (AES-256), got {len(key)}")
        keys[kid] = key
        order.append(kid)
    if not order:
        raise ConfigError("no master key configured")
    return MasterKeys(order[0], keys)


def master_keys_file(settings: Settings) -> Path:
    return settings.stack_dir / "secrets" / "master.keys"


def load_master_keys(settings: Settings) -> MasterKeys:
    if settings.master_keys is not None:
        return parse_master_keys(settings.master_keys.get_secret_value())
    path = master_keys_file(settings)
    if not path.exists():
        raise ConfigError(f"no master key: set MEMSTREAM_MASTER_KEYS or run `memstream stack up` to create {path}")
    return parse_master_keys(path.read_text())


def new_master_key_line(kid: str) -> str:
    return f"{kid}:{base64.b64encode(os.urandom(32)).decode()}"


def ensure_master_keys(settings: Settings) -> str:
    """Create the key file when no keys are configured and none exist yet (`stack up`).

    O_EXCL + mode 0600 at creation: the key is never readable by others, not even for a moment,
    and two concurrent `up`s cannot both write one. Returns a status word, never the key.
    """
    if settings.master_keys is not None:
        return "from MEMSTREAM_MASTER_KEYS"
    path = master_keys_file(settings)
    return f"created ({path})" if write_new_secret(path, new_master_key_line("k1") + "\n") else f"present ({path})"
