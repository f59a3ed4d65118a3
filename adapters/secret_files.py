"""Secrets `stack up` generates into <stack_dir>/secrets: made once, private, read back plainly.

One place for what every credential file shares (master keys, the Postgres roles', Kafka
principals' and Neo4j's passwords): created with O_EXCL and mode 0600 (never readable by others,
not even for a moment, and two concurrent `up`s cannot both write one), never printed or logged.
"""
from __future__ import annotations

import os
from pathlib import Path

from kernel.errors import ConfigError


def write_new_secret(path: Path, text: str) -> bool:
    """Create `path` holding `text` unless it exists; True when this call created it."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def read_secret(path: Path, missing: str, what: str) -> str:
    """The stripped content of a secret file; ConfigError naming `missing` (what to set or run)
    when it is absent, and saying so when it is unreadable or empty."""
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        raise ConfigError(missing) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    if not value:
        raise ConfigError(f"the {what} file {path} is empty")
    return value
