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
another site starts: no page acts for a signed-in user on another site's behalf), Secure whenever
the console is served over https, scoped to /console, and expires after COOKIE_MAX_AGE_S; logout
deletes it.

SameSite does not stop login CSRF: another site's form could post *its* key to /console/login and
the answer would set the cookie, signing the victim's browser in as the attacker (whatever they
then browse or do lands in the attacker's tenant). So every console POST must come from the
console's own origin (same_origin): the Origin header, else the Referer, must name the request's
own scheme, host and port. Browsers send Origin on every POST (Fetch standard); the pages send
`Referrer-Policy: same-origin`, under which a same-origin POST carries the real Origin (under
no-referrer it would be `null`, which is refused like any other origin). A POST with neither
header is not a browser's form post (curl, a script) and is accepted: it can only set a cookie in
its own jar. A CSRF token was not added: without a session store it would be a second, pre-login
cookie (double submit) on every page that shows a form (any 401 page shows the login form), and
would protect only browsers too old to send Origin on a form POST (Firefox before 70, 2019).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

from kernel.errors import InvalidInput, MissingScope, NotAuthenticated, RateLimited
from adapters.privacy.tenants import NotYours, Principal
from services.access import NO_KEY, authenticate

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


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL or an Origin header; None for `null` or anything unparsable."""
    try:
        u = urlsplit(url.strip())
        scheme, host, port = u.scheme.lower(), (u.hostname or "").lower(), u.port
    except ValueError:           # a port that is not a number, a bad IPv6 literal
        return None
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


def same_origin(request: Request) -> bool:
    """Whether a POST comes from the console's own origin: its Origin header (else its Referer)
    names the scheme, host and port the request itself was sent to (the URL uvicorn saw: the Host
    header, and the scheme a trusted proxy's X-Forwarded-Proto gave). True when it carries
    neither header (not a browser's form post); False for `Origin: null` or another site."""
    claimed = request.headers.get("origin")
    if claimed is None:
        claimed = request.headers.get("referer")
        if claimed is None:
            return True
    own = _origin(str(request.base_url))
    return own is not None and _origin(claimed) == own


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


async def principal_of(request: Request, backend, token: str) -> Principal | None:
    """The key's principal, or None for an unknown or revoked one (the login form's check);
    Refused(429) when this client is over its rate of unknown keys (services/rate_limits.py)."""
    try:
        return await authenticate(backend, token, client=_client(request))
    except NotAuthenticated:
        return None
    except RateLimited as exc:
        raise Refused(429, str(exc)) from None


async def require(request: Request, backend, *scopes: str) -> Principal:
    """The verified key when it holds every one of `scopes` (services/access.py, as for the API);
    Refused(401) sends the browser to the login form, Refused(403) names the missing scope."""
    try:
        return await authenticate(backend, presented_key(request), *scopes, client=_client(request))
    except RateLimited as exc:
        raise Refused(429, str(exc)) from None
    except NotAuthenticated as exc:
        raise Refused(401, "sign in with an API key" if str(exc) == NO_KEY else str(exc), login=True) from None
    except MissingScope as exc:
        raise Refused(403, str(exc)) from None


def check_user(p: Principal, user: str) -> None:
    """Refused unless the caller may name this user: 404 outside its tenant (or bound user), 422 for
    an id the API would not accept either (answered as pages, before a use case is asked)."""
    if not user or len(user) > 200 or any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in user):
        raise Refused(422, "user: a user id is 1-200 printable characters")
    try:
        p.internal(user)
    except NotYours:
        raise Refused(404, "not found") from None
    except InvalidInput as exc:
        raise Refused(422, str(exc)) from None
