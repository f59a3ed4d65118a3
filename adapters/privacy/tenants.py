"""Tenants and scopes: who a caller is, what it may do, and which users it can name.

A tenant is part of every user's identity from the edge inward: the internal user id is
`"<tenant>/<user>"`, except for the tenant `default`, whose internal ids are the bare user ids.
So events, partition keys, data keys and every read model carry the tenant with no change to the
pipeline, two tenants may both have a user `alice` without ever meeting, and the log written
before tenants existed (all of it `default`) stays valid as it is — the log is never rewritten.

At the HTTP edge a user id may not contain "/" (it would let one tenant name another's users);
the tenant prefix counts against the 200-character id limit of schemas/limits.py. A user id with
"/" published straight to Kafka (the Kafka SDK is a trusted, key-less path) belongs to the tenant
named before its first "/".
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from kernel.config import Settings
from kernel.errors import ConfigError, InvalidInput, MemstreamError
from schemas.limits import ID_MAX_CHARS

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
_TENANT = re.compile(TENANT_PATTERN)

# memory:write  POST /v1/turns, /v1/steps
# memory:read   recall, context, profile, preferences, task steps, sessions
# audit:read    the audit routes (clear fields: types, times, positions, ids)
# audit:content decrypted content in audit answers (content=true; a memory audit's text)
# admin         erase, forget, key management, replay (where exposed)
SCOPES = ("memory:write", "memory:read", "audit:read", "audit:content", "admin")


def check_tenant(name: str) -> str:
    if not isinstance(name, str) or not _TENANT.match(name):
        raise InvalidInput(f"tenant {name!r} is not a tenant name ({TENANT_PATTERN}: lower-case letters, digits "
                           f"and '-', 1-40 characters)")
    return name


def check_scopes(scopes) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(s.strip() for s in scopes if s.strip()))
    unknown = [s for s in out if s not in SCOPES]
    if unknown or not out:
        raise InvalidInput(f"scopes {', '.join(unknown) or '(none)'}: each must be one of {', '.join(SCOPES)}")
    return out


def internal_user(tenant: str, user: str) -> str:
    """The user id inside memstream (events, keys, read models) of `user` of `tenant`."""
    if "/" in user:
        raise InvalidInput(f"user: user id {user!r} contains '/', which the HTTP API does not accept "
                           f"(it separates a tenant from its users)")
    if tenant == DEFAULT_TENANT:
        return user
    room = ID_MAX_CHARS - len(tenant) - 1
    if len(user) > room:
        raise InvalidInput(f"user: user id has {len(user)} characters, over the limit of {room} for tenant "
                           f"{tenant!r} (ids are at most {ID_MAX_CHARS} characters with the tenant prefix)")
    return f"{tenant}/{user}"


def split_user(internal: str) -> tuple[str, str]:
    """(tenant, the tenant's own user id) of an internal user id."""
    tenant, sep, user = internal.partition("/")
    if sep and _TENANT.match(tenant) and tenant != DEFAULT_TENANT:
        return tenant, user
    return DEFAULT_TENANT, internal


@dataclass(frozen=True)
class Principal:
    """A verified API key: its tenant, scopes and (optionally) the one end user it acts for."""
    key_id: str
    tenant: str
    scopes: frozenset[str]
    user: str | None = None
    name: str = ""

    def internal(self, user: str) -> str:
        """The internal id of a user this key names; NotYours when the key is bound to another user."""
        if self.user is not None and user != self.user:
            raise NotYours("no such user")
        return internal_user(self.tenant, user)

    def owns(self, internal: str) -> bool:
        """Whether the internal user id belongs to this key's tenant (and bound user)."""
        tenant, user = split_user(internal)
        return tenant == self.tenant and (self.user is None or user == self.user)

    def external(self, internal: str) -> str:
        return split_user(internal)[1]


class NotYours(MemstreamError):
    """A user or memory outside the caller's reach: answered as 404, as if it did not exist."""


def externalize(obj, p: Principal):
    """An answer with every `user` in the caller's own ids (the HTTP API and the MCP server both
    answer with it). A user outside the caller's reach is a bug upstream and is never shown (NotYours)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "user" and isinstance(v, str):
                if not p.owns(v):
                    logging.getLogger("memstream.tenants").error("answer for tenant %s held a user outside it; "
                                                                 "refused", p.tenant)
                    raise NotYours("no such user")
                v = p.external(v)
            out[k] = externalize(v, p)
        return out
    if isinstance(obj, list):
        return [externalize(x, p) for x in obj]
    return obj


# -- the local admin key (created by `stack up`: privacy/apikeys.py) -------------------------------
# Here, not in apikeys.py, so the HTTP SDK finds its key without the database driver.

def local_key_file(settings: Settings) -> Path:
    name = "api.key" if settings.namespace == "memstream" else f"api-{settings.namespace}.key"
    return settings.stack_dir / "secrets" / name


def local_api_key(settings: Settings) -> str | None:
    """The key local clients use: MEMSTREAM_API_KEY, else the file `stack up` wrote, else None."""
    if settings.api_key is not None:
        return settings.api_key.get_secret_value()
    path = local_key_file(settings)
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the local API key {path}: {exc.strerror}") from None
