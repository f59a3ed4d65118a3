"""The console's guards that need no stack (issue 28): which POSTs count as the console's own
(login CSRF), who sees the stack-wide replay status, and the input checks that keep a NUL away from
Postgres. tests/test_console.py checks the same on the real stack and in a browser."""
from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from memstream.app.console.auth import same_origin
from memstream.app.console.routes import Refused, _text
from kernel.errors import MissingScope
from adapters.privacy.apikeys import _parse
from adapters.privacy.tenants import SCOPES, Principal
from services.access import OPERATOR
from services.operator_view import positions, sees_stack
from schemas.limits import check_content, check_id


def post(headers: dict[str, str], host: str = "127.0.0.1:8080", scheme: str = "http") -> Request:
    raw = [(b"host", host.encode())] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "scheme": scheme, "path": "/console/login",
                    "raw_path": b"/console/login", "query_string": b"", "headers": raw,
                    "server": ("127.0.0.1", 8080), "root_path": ""})


@pytest.mark.parametrize("headers", [
    {"Origin": "http://127.0.0.1:8080"},
    {"Origin": "HTTP://127.0.0.1:8080"},
    {"Referer": "http://127.0.0.1:8080/console/login"},
    {},                                                   # neither: not a browser's form post
])
def test_the_consoles_own_posts_pass(headers):
    assert same_origin(post(headers))


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "null"},                                   # a sandboxed frame, a data: page, no-referrer
    {"Origin": ""},
    {"Origin": "https://127.0.0.1:8080"},                 # another scheme
    {"Origin": "http://127.0.0.1:8081"},                  # another port
    {"Origin": "http://127.0.0.1.evil.example:8080"},
    {"Origin": "http://127.0.0.1:notaport"},
    {"Referer": "http://evil.example/console/login"},
    {"Origin": "http://evil.example", "Referer": "http://127.0.0.1:8080/console/login"},   # Origin decides
])
def test_another_sites_posts_are_refused(headers):
    assert not same_origin(post(headers))


def test_default_ports_and_host_case_are_the_same_origin():
    assert same_origin(post({"Origin": "https://Console.Example.COM"}, host="console.example.com:443", scheme="https"))
    assert same_origin(post({"Origin": "http://console.example.com:80"}, host="console.example.com"))
    assert not same_origin(post({"Origin": "http://console.example.com"}, host="console.example.com", scheme="https"))


def test_replay_status_is_the_stack_operators_alone():
    admin = frozenset(SCOPES)
    assert sees_stack(OPERATOR)
    assert sees_stack(Principal("k1", "default", admin))
    assert not sees_stack(Principal("k2", "acme", admin)), "another tenant's admin"
    assert not sees_stack(Principal("k3", "default", admin, user="alice")), "a key bound to one user"
    assert not sees_stack(Principal("k4", "default", frozenset({"memory:read"})))


def test_positions_refuse_a_tenant_admin_before_reading_anything():
    with pytest.raises(MissingScope, match="operator"):   # no backend: refused before any I/O
        asyncio.run(positions(None, Principal("k2", "acme", frozenset(SCOPES))))


@pytest.mark.parametrize("value", ["a\x00b", "\x00", "x\x01", "\x7f", "\ud800"])
def test_a_control_character_in_a_query_text_is_a_422_naming_it(value):
    for what, check in (("q", check_content), ("category", check_id)):
        with pytest.raises(Refused) as exc:
            _text(value, what, check)
        assert exc.value.status == 422 and exc.value.message.startswith(what)
    assert _text(None, "q", check_content) is None and _text("", "q", check_content) == ""
    assert _text("green tea\n", "q", check_content) == "green tea\n"


def test_an_api_key_with_a_nul_is_no_key():
    assert _parse("msk_abc_def") == ("abc", "def")
    assert _parse("msk_a\x00b_def") is None and _parse("msk_abc_de\x00f") is None and _parse("msk_abc_dé") is None
