"""Who is looking at the console: the same API keys, tenants and scopes as the HTTP API.

A browser cannot easily send a header, so besides `Authorization: Bearer <key>` / `X-API-Key`
the console reads its own cookie, set by the login form. The cookie holds the API key itself,
not a signed session:
- every request then re-verifies the key through the same ApiKeys cache as the API, so revoking
  a key ends console sessions as fast as API access (MEMSTREAM_API_KEY_CACHE_S), and a key's
  scopes or tenant can never be out of date in a session;
- there is no session store and no signing secret to keep, back up and rotate.
The cost is that the browser's cookie jar holds the key, so the cookie is HttpOnly (no script can
read it: the page's own XSS defences are a second line), SameSite=Strict (never sent on a request
another site starts: no CSRF on the login/logout POSTs), Secure whenever the console is served
over https, scoped to /console, and expires after COOKIE_MAX_AGE_S; logout deletes it.
"""
from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from memstream.errors import InvalidInput
from memstream.privacy.tenants import NotYours, Principal

COOKIE = "memstream_console"
COOKIE_PATH = "/console"
COOKIE_MAX_AGE_S = 8 * 3600


class Refused(Exception):
    """A console request that cannot be answered: rendered as an HTML page with `status`."""

    def __init__(self, status: int, message: str, login: bool = False):
        super().__init__(message)
        self.status, self.message, self.login = status, message, login


def presented_key(request: Request) -> str | None:
    """The key a request carries: the Authorization header, X-API-Key, else the console cookie."""
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    return request.headers.get("x-api-key") or request.cookies.get(COOKIE) or None


async def principal_of(keys, token: str) -> Principal | None:
    known, p = keys.cached(token)            # no I/O in the common case
    if not known:
        p = await run_in_threadpool(keys.verify, token)
    return p


async def require(request: Request, keys, *scopes: str) -> Principal:
    """The verified key when it holds every one of `scopes`; Refused(401) sends the browser to the
    login form, Refused(403) names the missing scope (as the API does)."""
    token = presented_key(request)
    if not token:
        raise Refused(401, "sign in with an API key", login=True)
    p = await principal_of(keys, token)
    if p is None:
        raise Refused(401, "unknown or revoked API key", login=True)
    missing = [s for s in scopes if s not in p.scopes]
    if missing:
        raise Refused(403, f"this API key lacks the scope {missing[0]}")
    return p


def internal(p: Principal, user: str) -> str:
    """The internal id of a user the caller names: 404 outside its tenant (or bound user), 422 for
    an id the API would not accept either."""
    if not user or len(user) > 200 or any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in user):
        raise Refused(422, "user: a user id is 1-200 printable characters")
    try:
        return p.internal(user)
    except NotYours:
        raise Refused(404, "not found") from None
    except InvalidInput as exc:
        raise Refused(422, str(exc)) from None
