"""The web console (memstream/app/console/) in a real headless browser, on the real pipeline.

The API runs as a server (uvicorn in a subprocess, as in test_api.py); Debian's chromium, driven by
chromedriver through selenium, signs in with an API key and reads the pages a user of the console
would. A test user tells three things that become memories — one of them an XSS canary, markup in
user text — and a raw record that the extractor dead-letters. Every page must load without a
browser console error. Screenshots go to SCREENSHOTS (printed), under the ignored .stack/.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from memstream.app.workers import worker_command
from adapters.bus import producer_config
from adapters.kafka_auth import ADMIN
from adapters.privacy.tenants import SCOPES
from tests.auth_helpers import bearer, make_key
from tests.helpers import unique_user, wait_for

pytestmark = pytest.mark.timeout(300)

SCREENSHOTS = Path(__file__).resolve().parent.parent / ".stack" / "screenshots"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
XSS_TURN = "I like <img src=x onerror=window.__xss=1> jazz <script>window.__xss=2</script>"
TURNS = ("I live in Lisbon", "I like green tea", XSS_TURN)


@pytest.fixture(scope="module")
def api_url(settings, pipeline):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = worker_command("x")[:3] + ["api", "--port", str(port)]
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-console-api.log", "ab")
    # a verified key is trusted 0.5 s (not 5): the revocation test need not wait long
    proc = subprocess.Popen(cmd, env={**os.environ, "MEMSTREAM_API_KEY_CACHE_S": "0.5"}, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _up(url), timeout=60, what="the API to serve")
    yield url
    proc.terminate()
    proc.wait(timeout=15)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/console/login", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def world(settings, api_url):
    """A user with three memories (one the XSS canary), their audit rows and graph, a dead letter."""
    w = {"user": unique_user("console"), "admin": make_key(settings, "default", SCOPES, name="console-admin"),
         "reader": make_key(settings, "default", ("memory:read",), name="console-reader"),
         "auditor": make_key(settings, "default", ("memory:read", "audit:read"), name="console-auditor"),
         "other": make_key(settings, "acme", SCOPES, name="console-acme"),
         "settings": settings}
    h = bearer(w["admin"])
    for text in TURNS:   # one after another: FOLLOWS links consecutive memories
        r = httpx.post(api_url + "/v1/turns", headers=h, json={"user": w["user"], "session": "s1", "role": "user",
                                                             "content": text}, timeout=10)
        assert r.status_code == 201, r.text
    from projections.queries import memories
    rows = wait_for(lambda: (lambda m: m if len(m) == 3 else None)(memories(settings, w["user"])),
                    timeout=120, what="three memories")
    w["memories"] = {m["content"]: m["memory_id"] for m in rows}
    from replay.audit import memory_user
    wait_for(lambda: all(memory_user(settings, m) for m in w["memories"].values()), timeout=60,
             what="the memories in the audit index")
    wait_for(lambda: httpx.get(f"{api_url}/console/users/{w['user']}/graph", headers=h).text.count('class="node"') == 3,
             timeout=60, what="the memories in the graph")
    raw = Producer(producer_config(settings, ADMIN))   # a record no consumer can decode: dead-lettered with a reason
    raw.produce(settings.topic("turns"), key=w["user"].encode(), value=b"\xff\xfe not json")
    raw.flush(10)
    from tests.kafka_helpers import dead_letters
    wait_for(lambda: [d for d in dead_letters(settings) if d["key"] == w["user"]], timeout=60, what="the dead letter")
    return w


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000"):
        opts.add_argument(arg)
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def console_errors(driver) -> list[dict]:
    """The browser console's errors since the last read (a CSP violation is one, a failed load too)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def load(driver, url: str, shot: str | None = None):
    driver.get(url)
    assert console_errors(driver) == [], f"browser console errors on {url}"
    if shot:
        path = SCREENSHOTS / f"console-{shot}.png"
        driver.save_screenshot(str(path))
        print(f"screenshot: {path}")


def gone(element):
    """A WebDriverWait condition: `element` left the document (the page it was on navigated away).
    Selenium's staleness_of expects StaleElementReferenceException; chromedriver in the middle of
    a navigation may answer "Node with given id does not belong to the document" instead (a CI
    failure), which says the same thing."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def check(_driver) -> bool:
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
    return check


def sign_in(driver, api_url: str, key: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(api_url + "/console/login")
    driver.find_element("id", "api_key").send_keys(key)
    button = driver.find_element("id", "sign-in")
    button.click()
    # the form's POST navigates asynchronously: wait until the login page is gone, or a loaded
    # page after it would race the redirect (a loaded CI machine landed on the wrong page)
    WebDriverWait(driver, 30).until(gone(button))
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def texts(driver, css: str) -> list[str]:
    return [e.text for e in driver.find_elements("css selector", css)]


# -- in the browser --------------------------------------------------------------------------------

def test_login_refuses_a_bad_key_and_keeps_a_good_one_in_an_httponly_strict_cookie(browser, api_url, world):
    browser.delete_all_cookies()
    browser.get(api_url + "/console/")
    assert browser.find_elements("id", "login"), "no key: the login form"
    sign_in(browser, api_url, "msk_not-a-key")
    assert "unknown or revoked API key" in browser.find_element("id", "login-error").text
    assert browser.get_cookie("memstream_console") is None
    # the only console errors are the two 401 answers themselves (the browser logs them as failed loads)
    assert all(" 401 " in e["message"] for e in console_errors(browser))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "console-login-refused.png"))
    sign_in(browser, api_url, world["admin"])
    assert browser.current_url == api_url + "/console/"
    cookie = browser.get_cookie("memstream_console")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert browser.execute_script("return document.cookie") == "", "a script can read the key"
    # (the refused attempt's 401 can reach the browser log late on a loaded machine; nothing else may)
    assert [e for e in console_errors(browser) if " 401 " not in e["message"]] == []
    listed = {e.get_attribute("data-user") for e in browser.find_elements("css selector", "#users tr[data-user]")}
    assert world["user"] in listed, "the home page lists the tenant's users"
    from selenium.webdriver.support.ui import WebDriverWait
    out = browser.find_element("css selector", "header form button")
    out.click()          # sign out; its POST navigates asynchronously, as the sign-in's does
    WebDriverWait(browser, 30).until(gone(out))
    assert browser.get_cookie("memstream_console") is None and browser.find_elements("id", "login")


def test_a_revoked_key_ends_the_console_session(browser, api_url, world, settings):
    from adapters.privacy.apikeys import ApiKeys
    key = make_key(settings, "default", ("memory:read",), name="console-revoked")
    sign_in(browser, api_url, key)
    load(browser, f"{api_url}/console/users/{world['user']}/memories")
    store = ApiKeys(settings, role="owner")   # revoking is the operator's
    try:
        assert store.revoke(key.split("_")[1])
    finally:
        store.close()
    time.sleep(1.0)                  # past the API's key cache (MEMSTREAM_API_KEY_CACHE_S=0.5 above)
    browser.get(f"{api_url}/console/users/{world['user']}/memories")
    # Waited for, not read at once: on a loaded machine the page can still be replacing its nodes,
    # and chromium then answers "Node with given id does not belong to the document" (a CI run).
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, 30, ignored_exceptions=(WebDriverException,)).until(
        ec.text_to_be_present_in_element((By.ID, "login-error"), "unknown or revoked API key"))
    assert "Lisbon" not in browser.page_source
    assert browser.get_cookie("memstream_console") is None, "the revoked key stays in the cookie"
    assert all(" 401 " in e["message"] for e in console_errors(browser))


def test_memories_page_lists_and_filters_the_users_memories(browser, api_url, world):
    sign_in(browser, api_url, world["admin"])
    base = f"{api_url}/console/users/{world['user']}/memories"
    load(browser, base, "memories")
    shown = {e.get_attribute("data-memory-id") for e in browser.find_elements("css selector", "tr[data-memory-id]")}
    assert shown == set(world["memories"].values())
    assert "User likes green tea" in texts(browser, "td.content")
    load(browser, base + "?status=active&q=green")
    assert texts(browser, "td.content") == ["User likes green tea"]
    load(browser, base + "?status=superseded")
    assert browser.find_elements("css selector", "tr[data-memory-id]") == []


def test_timeline_shows_the_memory_created_and_its_causation_chain_down_to_the_turn(browser, api_url, world):
    sign_in(browser, api_url, world["admin"])
    memory_id = world["memories"]["User likes green tea"]
    load(browser, f"{api_url}/console/memories/{memory_id}", "timeline")
    origin = [e.get_attribute("data-type") for e in browser.find_elements("css selector", "#origin > li")]
    assert origin == ["memory.created", "fact.extracted", "turn.recorded"]
    assert "user said: I like green tea" in browser.find_element("id", "origin").text   # decrypted (audit:content)
    life = [e.get_attribute("data-type") for e in browser.find_elements("css selector", "#life > li")]
    assert "memory.created" in life and "memory.linked" in life, life     # linked: FOLLOWS the first memory
    assert browser.find_element("id", "memory-status").text == "active"


def test_graph_draws_the_users_memories_and_their_edges(browser, api_url, world):
    sign_in(browser, api_url, world["admin"])

    def drawn():   # the graph projector is its own consumer: reload until it has the memories
        load(browser, f"{api_url}/console/users/{world['user']}/graph", "graph")
        return {e.get_attribute("data-memory-id") for e in browser.find_elements("css selector", "svg#graph g.node")}
    nodes = wait_for(lambda: (n := drawn()) == set(world["memories"].values()) and n, timeout=60, interval=1.0,
                     what="the graph's nodes")
    assert nodes == set(world["memories"].values())
    kinds = [e.get_attribute("data-kind") for e in browser.find_elements("css selector", "svg#graph line.edge")]
    assert kinds.count("FOLLOWS") == 2, kinds          # three memories in a row: two FOLLOWS links


def test_xss_canary_in_user_text_renders_as_text_and_never_runs(browser, api_url, world):
    sign_in(browser, api_url, world["admin"])
    canary = next(m for c, m in world["memories"].items() if "<img" in c)
    for url in (f"{api_url}/console/users/{world['user']}/memories", f"{api_url}/console/users/{world['user']}/graph",
                f"{api_url}/console/memories/{canary}"):
        load(browser, url)
        assert browser.execute_script("return window.__xss === undefined"), f"the canary ran on {url}"
        assert browser.find_elements("css selector", "main script, main img, main [onerror]") == [], url
    # the timeline shows the turn's markup as the text it is
    assert "<script>window.__xss=2</script>" in browser.find_element("id", "origin").text
    browser.save_screenshot(str(SCREENSHOTS / "console-xss-timeline.png"))


def test_dead_letters_and_replay_status_for_admins(browser, api_url, world, settings):
    sign_in(browser, api_url, world["admin"])
    load(browser, f"{api_url}/console/deadletters", "deadletters")
    table = browser.find_element("id", "deadletters").text
    assert world["user"] in table and settings.topic("turns") in table
    assert any(r for r in texts(browser, "td.reason") if r), "a dead letter without its reason"
    load(browser, f"{api_url}/console/replay", "replay")
    from projections.registry import PROJECTORS
    shown = {row.split()[0] for row in texts(browser, "#positions tr")[1:]}
    assert shown == set(PROJECTORS)


# -- the trust boundary, over plain HTTP ------------------------------------------------------------

def make_key_for(world, user: str) -> str:
    return make_key(world["settings"], "default", SCOPES, user=user, name="console-bound")


def test_scopes_tenants_and_bad_input(api_url, world):
    user, canary = world["user"], world["memories"]["User likes green tea"]
    def get(path: str, key: str | None = None, headers: dict | None = None) -> httpx.Response:
        return httpx.get(api_url + path, headers=headers or (bearer(key) if key else {}), timeout=30)

    assert get(f"/console/users/{user}/memories").status_code == 401
    ok = get(f"/console/users/{user}/memories", world["reader"])
    assert ok.status_code == 200 and "User lives in Lisbon" in ok.text
    assert "script-src" not in ok.headers["content-security-policy"] and "default-src 'none'" in ok.headers["content-security-policy"]
    assert get(f"/console/users/{user}/memories", headers={"X-API-Key": world["reader"]}).status_code == 200
    for path in (f"/console/memories/{canary}", "/console/deadletters", "/console/replay"):
        r = get(path, world["reader"])
        assert r.status_code == 403 and "lacks the scope" in r.text, path
    # audit:read without audit:content: the timeline's clear fields, not the turn's text
    r = get(f"/console/memories/{canary}", world["auditor"])
    assert r.status_code == 200 and "turn.recorded" in r.text and "I like green tea" not in r.text
    # another tenant: the same user id names its own (empty) user, as on the API; a memory id is
    # global, and another tenant's memory is a 404; its admin sees none of this tenant's dead letters
    r = get(f"/console/users/{user}/memories", world["other"])
    assert r.status_code == 200 and "no memories match" in r.text and "Lisbon" not in r.text
    r = get(f"/console/users/{user}/graph", world["other"])
    assert r.status_code == 200 and 'class="node"' not in r.text
    bound = make_key_for(world, user="someone-else")
    assert get(f"/console/users/{user}/memories", bound).status_code == 404     # a key bound to another end user
    r = get(f"/console/memories/{canary}", world["other"])
    assert r.status_code == 404 and "green tea" not in r.text
    r = get("/console/deadletters", world["other"])
    assert r.status_code == 200 and user not in r.text
    r = get("/console/", world["other"])
    assert r.status_code == 200 and user not in r.text           # nor among its users
    for bad in ("/console/memories/not%20an%20id", f"/console/users/{user}/memories?status=bogus",
                "/console/users/a%01b/memories", f"/console/users/{user}/memories?limit=0"):
        assert 400 <= get(bad, world["admin"]).status_code < 500, bad
    r = httpx.post(api_url + "/console/login", data={"api_key": world["reader"]}, timeout=10)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert re.search(r"HttpOnly", cookie, re.I) and re.search(r"SameSite=strict", cookie, re.I) and "Path=/console" in cookie
    assert httpx.post(api_url + "/console/login", data={"api_key": "x" * 5000}, timeout=10).status_code == 401


# -- relational memory: the people & places page and a page per entity (issue 26 item 7) -------

@pytest.fixture(scope="module")
def rel_world(settings):
    """A user's entities and relations (Ana moved Rome -> Berlin; 小美 a friend), published as events into
    a namespace of their own and projected (tests/test_relations.py's helpers); the console in-process."""
    from fastapi.testclient import TestClient

    from memstream.app.api import create_app
    from adapters.privacy.keystore import KeyStore
    from tests.test_relations import end, ent, project, rel, t
    from tests.test_replay import namespace, publish_all
    ns = namespace(settings, "relcon")
    keys = KeyStore(ns)
    u = unique_user("relcon")
    publish_all(ns, keys, [
        ent(u, "ana", "person", "Ana", ["Annie"]), ent(u, "rome", "place", "Rome"),
        ent(u, "berlin", "place", "Berlin"), ent(u, "xiaomei", "person", "小美"),
        rel(u, "r1", "self", "sister", "ana", t(2001)), rel(u, "r2", "ana", "lives_in", "rome", t(2020, 2)),
        rel(u, "r3", "self", "friend", "xiaomei", t(2015)),
        rel(u, "r4", "ana", "lives_in", "berlin", t(2022, 6)), end(u, "r2", t(2022, 6), by="r4")])
    project(ns, keys)
    w = {"user": u, "reader": make_key(ns, "default", ("memory:read",), name="relcon-reader"),
         "other": make_key(ns, "acme", SCOPES, name="relcon-acme"),
         "nothing": make_key(ns, "default", ("audit:read",), name="relcon-noread")}
    with TestClient(create_app(ns)) as http:
        w["http"] = http
        yield w
    keys.close()


def _get(w, path: str, key: str | None = None, **params) -> httpx.Response:
    return w["http"].get(path, headers=bearer(key or w["reader"]), params=params)


def test_people_and_places_draws_entities_and_relations_ended_dashed(rel_world):
    w, u = rel_world, rel_world["user"]
    r = _get(w, f"/console/users/{u}/entities")
    assert r.status_code == 200, r.text
    html = r.text
    for name in ("Ana", "Rome", "Berlin", "小美", "the user"):
        assert name in html
    svg = html.split('<svg id="entity-graph"', 1)[1].split("</svg>", 1)[0]
    ended = re.search(r'data-relation-id="r2"[^>]*data-ended="yes">\s*<line[^>]*stroke-dasharray', svg)
    assert ended, svg
    assert re.search(r'data-relation-id="r4"[^>]*data-ended="no">\s*<line(?![^>]*dasharray)', svg), svg
    assert "valid from 2020-02-01" in svg and "ended: superseded" in svg   # the hover <title>
    table = html.split('<table id="relations">', 1)[1]
    assert table.count("<tr data-relation-id=") == 4 and "turn-r2" in table and "lives_in" in table
    assert f'href="/console/users/{u}/entities/ana"' in html
    assert f'href="/console/users/{u}/entities"' in _get(w, f"/console/users/{u}/memories").text


def test_as_of_before_the_move_draws_the_old_city(rel_world):
    w, u = rel_world, rel_world["user"]
    for when in ("2021-01-01", "2021-01-01T00:00:00+00:00"):
        r = _get(w, f"/console/users/{u}/entities", as_of=when)
        assert r.status_code == 200, r.text
        svg = r.text.split('<svg id="entity-graph"', 1)[1].split("</svg>", 1)[0]
        assert 'data-relation-id="r2"' in svg and 'data-relation-id="r4"' not in svg, svg
    svg = _get(w, f"/console/users/{u}/entities").text.split("</svg>", 1)[0]
    assert 'data-relation-id="r4" data-predicate="lives_in" data-ended="no"' in svg


def test_an_entity_page_lists_its_relations_both_ways(rel_world):
    w, u = rel_world, rel_world["user"]
    r = _get(w, f"/console/users/{u}/entities/ana")
    assert r.status_code == 200, r.text
    assert ">Ana<" in r.text and "person" in r.text and "Annie" in r.text
    rows = r.text.split('<table id="relations">', 1)[1]
    assert {m for m in re.findall(r'data-relation-id="(r\d)"', rows)} == {"r1", "r2", "r4"}
    assert f'href="/console/users/{u}/entities/rome"' in rows and "Ana is the user&#39;s sister" in rows
    assert _get(w, f"/console/users/{u}/entities/rome").status_code == 200


def test_relational_pages_refuse_bad_input_and_other_tenants(rel_world):
    w, u = rel_world, rel_world["user"]
    assert _get(w, f"/console/users/{u}/entities/nobody").status_code == 404
    for bad in ("yesterday", "2021-13-45", "2021\x00", "x" * 65):
        r = _get(w, f"/console/users/{u}/entities", as_of=bad)
        assert 400 <= r.status_code < 500, (bad, r.status_code)
    assert 400 <= _get(w, f"/console/users/{u}/entities/an%00a").status_code < 500
    assert 400 <= _get(w, f"/console/users/{u}%00/entities").status_code < 500
    # another tenant's key names its own user of that id: nothing of this one's shows
    r = _get(w, f"/console/users/{u}/entities", key=w["other"])
    assert r.status_code in (200, 404) and "Ana" not in r.text and "Berlin" not in r.text, r.text
    assert _get(w, f"/console/users/{u}/entities/ana", key=w["other"]).status_code == 404
    assert _get(w, f"/console/users/{u}/entities", key=w["nothing"]).status_code == 403
    assert w["http"].get(f"/console/users/{u}/entities").status_code == 401


def test_people_and_places_renders_in_a_browser(browser, api_url, world, settings):
    """The entity drawing in chromium: published into the pipeline's namespace, projected by its
    pg-relations projector. A name in Chinese is in the SVG's text (it shows as glyphs only where a
    CJK font is installed; the DOM text is checked either way)."""
    from adapters.privacy.keystore import KeyStore
    from tests.test_relations import ent, rel, t
    from tests.test_replay import publish_all
    keys = KeyStore(settings)
    try:
        publish_all(settings, keys, [ent(world["user"], "xiaomei", "person", "小美"),
                                     rel(world["user"], "rb1", "self", "friend", "xiaomei", t(2015))])
    finally:
        keys.close()
    sign_in(browser, api_url, world["admin"])

    def drawn():   # pg-relations is its own consumer: reload until it has the entity
        load(browser, f"{api_url}/console/users/{world['user']}/entities", "entities")
        return [e.text for e in browser.find_elements("css selector", "svg#entity-graph g.entity text")]
    labels = wait_for(lambda: x if "小美" in (x := drawn()) else None, timeout=60, interval=1.0, what="the entity")
    assert "the user" in labels
    svg = browser.find_element("id", "entity-graph")
    assert svg.size["width"] > 100 and svg.size["height"] > 100
    # "I live in Lisbon" (a world turn) is extracted as a relation too: the drawing holds both
    assert "friend" in texts(browser, "svg#entity-graph g.relation text")


# -- issue 28: bad input never a 500, login CSRF, tenant-scoped operator pages ------------------------

def test_a_nul_in_any_console_parameter_is_a_4xx_page_never_a_500(api_url, world):
    """Postgres refuses a NUL in text: every console route with a query or path parameter refuses
    one first (422 naming the parameter where the console checks it), so none reaches a store."""
    user, memory = world["user"], world["memories"]["User likes green tea"]
    h = bearer(world["admin"])
    named = {f"/console/users/{user}/memories?q=a%00b": "q", f"/console/users/{user}/memories?category=a%00b": "category",
             f"/console/users/{user}/memories?q=%01": "q", f"/console/users/{user}/memories?category=%7F": "category",
             "/console/users?user=a%00b": "user", f"/console/users/{user}/entities?as_of=2021%00": "as_of",
             f"/console/users/{user}/entities/a%00b": "entity"}
    for path, what in named.items():
        r = httpx.get(api_url + path, headers=h, timeout=30)
        assert r.status_code == 422 and what in r.text, (path, r.status_code, r.text[-300:])
    for path in (f"/console/users/a%00b/{page}" for page in ("memories", "graph", "entities", "entities/x")):
        r = httpx.get(api_url + path, headers=h, timeout=30)
        assert r.status_code == 422 and "user" in r.text, (path, r.status_code)
    for path in (f"/console/memories/{memory[:-1]}%00", f"/console/users/{user}/memories?status=%00",
                 f"/console/users/{user}/memories?limit=%00", "/console/users/%00/memories"):
        assert 400 <= httpx.get(api_url + path, headers=h, timeout=30).status_code < 500, path
    for key in ("msk_a%00b_c", "msk_ab_c%00", "%00"):    # the login form's key: no key, never a query
        r = httpx.post(api_url + "/console/login", content=f"api_key={key}", timeout=10,
                       headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 401 and "set-cookie" not in r.headers, key
    # and the filters still work with ordinary text
    r = httpx.get(api_url + f"/console/users/{user}/memories", params={"q": "green"}, headers=h, timeout=30)
    assert r.status_code == 200 and "User likes green tea" in r.text


def test_login_and_logout_refuse_another_sites_posts(api_url, world):
    """Login CSRF: another site's form must not sign a browser in (with the attacker's key)."""
    login, key = api_url + "/console/login", world["reader"]
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Referer": "http://evil.example/x"},
                    {"Origin": api_url.replace("http://", "https://")}, {"Origin": "http://127.0.0.1:1"}):
        r = httpx.post(login, data={"api_key": key}, headers=headers, timeout=10)
        assert r.status_code == 403 and "set-cookie" not in r.headers and "another site" in r.text, headers
        r = httpx.post(api_url + "/console/logout", headers=headers, timeout=10)
        assert r.status_code == 403 and "set-cookie" not in r.headers, headers
    for headers in ({"Origin": api_url}, {"Referer": login}, {}):
        r = httpx.post(login, data={"api_key": key}, headers=headers, timeout=10)
        assert r.status_code == 303 and "memstream_console=" in r.headers["set-cookie"], headers
        assert re.search(r"HttpOnly", r.headers["set-cookie"], re.I) and re.search(r"SameSite=strict", r.headers["set-cookie"], re.I)
    # the pages' referrer policy lets a same-origin POST carry its real Origin (no-referrer sends `null`)
    assert httpx.get(login, timeout=10).headers["referrer-policy"] == "same-origin"


def test_a_cross_site_form_cannot_sign_a_browser_in(browser, api_url, world):
    """In chromium: a page of another origin (a data: URL: origin `null`) posts a key to the login form."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get(api_url + "/console/login")
    browser.delete_all_cookies()
    attack = (f"<form method='post' action='{api_url}/console/login'><input name='api_key' value='{world['admin']}'>"
              "</form><script>document.forms[0].submit()</script>")
    browser.get("data:text/html," + attack)
    WebDriverWait(browser, 30).until(lambda d: d.current_url.startswith(api_url))
    WebDriverWait(browser, 30).until(ec.text_to_be_present_in_element((By.ID, "error"), "another site"))
    assert browser.get_cookie("memstream_console") is None, "another site signed the browser in"
    console_errors(browser)          # the 403 itself is logged as a failed load
    sign_in(browser, api_url, world["admin"])    # the console's own form still works
    assert browser.current_url == api_url + "/console/" and browser.get_cookie("memstream_console")


def test_replay_status_is_the_operators_and_dead_letters_stay_in_their_tenant(api_url, world, settings):
    """Two tenants: projector positions count every tenant's records, so only the operator (an admin
    key of tenant default bound to no user) sees them; a dead letter shows only to its user's tenant."""
    acme_user = unique_user("console-acme")
    raw = Producer(producer_config(settings, ADMIN))    # a dead letter of one of acme's users
    raw.produce(settings.topic("turns"), key=f"acme/{acme_user}".encode(), value=b"\xff\xfe not json")
    raw.flush(10)
    from tests.kafka_helpers import dead_letters
    wait_for(lambda: [d for d in dead_letters(settings) if d["key"] == f"acme/{acme_user}"], timeout=60,
             what="acme's dead letter")

    def get(path: str, key: str) -> httpx.Response:
        return httpx.get(api_url + path, headers=bearer(key), timeout=30)
    acme, admin = world["other"], world["admin"]
    r = get("/console/deadletters", acme)
    assert r.status_code == 200 and acme_user in r.text and f"acme/{acme_user}" not in r.text
    assert world["user"] not in r.text, "acme's admin sees a default user's dead letter"
    r = get("/console/deadletters", admin)
    assert r.status_code == 200 and world["user"] in r.text and acme_user not in r.text
    bound = make_key(settings, "default", SCOPES, user="someone-else", name="console-bound-admin")
    r = get("/console/deadletters", bound)
    assert r.status_code == 200 and world["user"] not in r.text and acme_user not in r.text
    from projections.registry import PROJECTORS
    for key in (acme, bound):
        r = get("/console/replay", key)
        assert r.status_code == 403 and "operator" in r.text, r.text[-300:]
        assert not any(name in r.text for name in PROJECTORS) and "log end" not in r.text
        assert 'href="/console/replay"' not in get("/console/", key).text
    r = get("/console/replay", admin)
    assert r.status_code == 200 and all(name in r.text for name in PROJECTORS)
    assert 'href="/console/replay"' in get("/console/", admin).text
