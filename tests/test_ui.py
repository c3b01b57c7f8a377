"""`serve --ui`, the memory browser: a real server on a store made from sample_logs, driven over HTTP and
through headless Chromium (Debian's chromium and chromedriver, via selenium). Without the browser they
fail in CI (a skipped browser test there would prove nothing); elsewhere they skip, saying what to install."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from helpers import free_port, start_server, stop

from expengine.service.client import TOKEN_FILE

REPO = Path(__file__).resolve().parents[1]
HOSTILE = '<script>alert(1)</script> the checkout page <b>crashed</b> & printed "oops"'
SEARCH = "get_weather returned 429 Too Many Requests"
SAMPLE_LINES = 400  # the first sessions of the support bot's log: enough for units and a compaction


def _bench_ui() -> Any:
    spec = importlib.util.spec_from_file_location("bench_ui", REPO / "bench" / "ui.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench_ui = _bench_ui()


@pytest.fixture(scope="module")
def browsed(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    """The start of sample_logs/support_bot.jsonl plus one record of markup-like text, compacted once,
    then served with --http --ui: (base URL, token, facts read before the server took the store)."""
    from expengine import Engine

    tmp = tmp_path_factory.mktemp("ui")
    store, log = tmp / "store", tmp / "log.jsonl"
    lines = (REPO / "sample_logs" / "support_bot.jsonl").read_text(encoding="utf-8").splitlines()[:SAMPLE_LINES]
    hostile = {"id": "hostile-1", "ts": "2026-03-02T09:00:00Z", "kind": "message", "agent": "support-bot"}
    hostile |= {"session": "hostile-s", "role": "user", "content": HOSTILE}
    log.write_text("\n".join([*lines, json.dumps(hostile)]) + "\n", encoding="utf-8")
    with Engine(store=store, embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        engine.ingest([str(log)])
        engine.compact()
        units = engine.units(status="active")
        changed = engine.store.con.execute(
            "SELECT item_id FROM history WHERE action LIKE 'state:%' ORDER BY item_id LIMIT 1"
        ).fetchone()[0]
        facts = {"unit": engine.trace(units[0]["id"]), "changed": engine.show(changed).to_dict()}
    assert units and facts["changed"]["history"], "the sample compaction made no unit or history"
    port = free_port()
    child = start_server(store, "--http", f"127.0.0.1:{port}", "--ui")
    yield f"http://127.0.0.1:{port}", (store / TOKEN_FILE).read_text().strip(), facts
    code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err


def fetch(base: str, path: str, *, method: str = "GET", body: str | None = None, headers: dict[str, str] | None = None):
    """(status, headers, text) of one request, redirects not followed."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read().decode("utf-8")
    finally:
        connection.close()


def login_cookie(base: str, token: str) -> str:
    status, headers, _ = fetch(
        base,
        "/ui/login",
        method="POST",
        body=urlencode({"token": token, "next": "/ui/units"}),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert status == 303 and headers["location"] == "/ui/units"
    return headers["set-cookie"]


@pytest.fixture(scope="module")
def browser(browsed: Any) -> Any:
    """One headless Chromium, logged in through the form."""
    base, token, _ = browsed
    try:
        driver = bench_ui.chromium()
    except RuntimeError as missing:  # no chromium or chromedriver here
        if os.environ.get("CI"):  # CI installs both (.ci/run): there a missing browser fails the test
            raise
        pytest.skip(f"{missing} (CI=true makes this a failure)")
    bench_ui.login(driver, base, token)
    yield driver
    driver.quit()


# --- login, over plain HTTP ----------------------------------------------------------------------------
@pytest.mark.slow
def test_every_page_needs_login_first(browsed):
    base, _, facts = browsed
    for path in ("/ui/search?q=x", "/ui/units", "/ui/growth", f"/ui/item/{facts['unit']['unit']['id']}"):
        status, headers, text = fetch(base, path)
        assert status == 401, path
        assert 'id="login"' in text and "set-cookie" not in headers
        assert facts["unit"]["unit"]["text"] not in text


@pytest.mark.slow
def test_login_sets_an_httponly_strict_cookie_for_the_browser_only(browsed):
    base, token, _ = browsed
    cookie = login_cookie(base, token)
    value, *attributes = [part.strip() for part in cookie.split(";")]
    assert {a.lower() for a in attributes} >= {"httponly", "samesite=strict", "path=/ui"}
    status, _, text = fetch(base, "/ui/units", headers={"cookie": value})
    assert status == 200 and 'class="unit"' in text
    # the API still wants the bearer header: the cookie alone opens nothing there
    status, _, _ = fetch(base, "/v1/stats", method="POST", body="{}", headers={"cookie": value})
    assert status == 401


@pytest.mark.slow
def test_a_wrong_token_is_refused(browsed):
    base, token, _ = browsed
    status, headers, text = fetch(
        base,
        "/ui/login",
        method="POST",
        body=urlencode({"token": token + "x"}),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert status == 401 and "wrong token" in text and "set-cookie" not in headers
    status, _, text = fetch(base, "/ui/units", headers={"cookie": f"expengine_ui={token[:-1]}"})
    assert status == 401 and 'id="login"' in text
    status, headers, _ = fetch(base, "/ui/login", method="POST", body="token=" + token + "x" * 10_000)
    assert status == 413 and "set-cookie" not in headers  # an unauthenticated body is read only so far


@pytest.mark.slow
def test_a_token_in_the_url_is_refused(browsed):
    base, token, _ = browsed
    for path in (f"/ui/search?q=x&token={token}", f"/ui/units?access_token={token}", f"/ui/login?token={token}"):
        status, headers, text = fetch(base, path)
        assert status == 400, path
        assert "token in the URL refused" in text and "set-cookie" not in headers
    # refused even with a good cookie, so a link carrying the token never "works"
    cookie = login_cookie(base, token).split(";")[0]
    status, _, _ = fetch(base, f"/ui/units?q={quote(token)}", headers={"cookie": cookie})
    assert status == 400


@pytest.mark.slow
def test_the_browser_has_no_write_endpoint(browsed):
    base, token, facts = browsed
    cookie = login_cookie(base, token).split(";")[0]
    unit_id = facts["unit"]["unit"]["id"]
    for path in ("/ui/search", f"/ui/item/{unit_id}", "/ui/units"):
        status, _, _ = fetch(base, path, method="POST", body="", headers={"cookie": cookie})
        assert status == 405, path
    status, _, _ = fetch(base, "/ui/feedback", headers={"cookie": cookie})
    assert status == 404


# --- the pages, in the browser -------------------------------------------------------------------------
@pytest.mark.slow
def test_the_token_cookie_is_out_of_scripts_reach(browser, browsed):
    _, token, _ = browsed
    assert browser.current_url.endswith("/ui/search")
    assert token not in browser.execute_script("return document.cookie")
    assert any(
        c["name"] == "expengine_ui" and c["httpOnly"] and c["sameSite"] == "Strict" for c in browser.get_cookies()
    )


@pytest.mark.slow
def test_search_runs_the_real_query_and_shows_each_score_part(browser, browsed):
    from selenium.webdriver.common.by import By

    base, _, _ = browsed
    browser.get(f"{base}/ui/search")
    box = browser.find_element(By.ID, "q")
    box.send_keys(SEARCH)
    box.submit()
    rows = browser.find_elements(By.CSS_SELECTOR, "#hits tr.hit")
    assert rows, browser.page_source[:2000]
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#hits th.part")]
    assert headers == ["similarity", "weight", "recency", "utility", "named_time"]
    for row in rows:
        parts = {td.get_attribute("data-part"): float(td.text) for td in row.find_elements(By.CSS_SELECTOR, "td.part")}
        assert set(parts) == set(headers) and 0 < parts["similarity"] <= 1
        assert float(row.find_element(By.CSS_SELECTOR, "td.score").text) > 0
    assert "get_weather" in browser.find_element(By.ID, "hits").text


@pytest.mark.slow
def test_a_unit_links_to_the_raw_records_it_came_from(browser, browsed):
    from selenium.webdriver.common.by import By

    base, _, facts = browsed
    trace = facts["unit"]
    browser.get(f"{base}/ui/units")
    link = browser.find_element(By.CSS_SELECTOR, f'a.trace[href="/ui/trace/{quote(trace["unit"]["id"])}"]')
    link.click()
    shown = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#records tr.record td:first-child a")]
    assert shown == [r["id"] for r in trace["records"]] and shown
    browser.find_element(By.LINK_TEXT, shown[0]).click()
    assert browser.find_element(By.TAG_NAME, "h1").text.endswith(shown[0])
    assert trace["unit"]["id"] in browser.find_element(By.ID, "provenance").text  # cited by the unit


@pytest.mark.slow
def test_an_item_page_shows_why_it_changed(browser, browsed):
    from selenium.webdriver.common.by import By

    base, _, facts = browsed
    changed = facts["changed"]
    browser.get(f"{base}/ui/item/{quote(changed['id'])}")
    actions = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#history td.action")]
    assert actions == [row["action"] for row in changed["history"]]
    assert changed["history"][0]["detail"] in browser.find_element(By.ID, "history").text


@pytest.mark.slow
def test_markup_in_memory_text_is_shown_as_text(browser, browsed):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    base, _, _ = browsed
    for path in (f"/ui/search?q={quote(HOSTILE)}&k=20", "/ui/item/hostile-1"):
        browser.get(base + path)
        assert "<script>alert(1)</script>" in browser.find_element(By.TAG_NAME, "main").text, path
        assert browser.execute_script("return document.scripts.length") == 0
        assert browser.find_elements(By.CSS_SELECTOR, "main b") == []
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.accept()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in browser.page_source


@pytest.mark.slow
def test_the_growth_page_draws_the_history_series(browser, browsed):
    from selenium.webdriver.common.by import By

    base, _, _ = browsed
    browser.get(f"{base}/ui/growth")
    chart = browser.find_element(By.CSS_SELECTOR, "#chart svg")
    assert len(chart.find_elements(By.CSS_SELECTOR, "polyline")) == 7  # 2 token lines, 5 count lines
    assert len(browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")) == 1  # one compaction
    assert bench_ui.navigation_ms(browser) > 0


def test_the_growth_chart_is_an_svg_with_a_line_per_series_on_round_axes():
    from expengine.charts import growth_svg

    series = {"cycle": [1, 2, 3], "raw_tokens": [900, 900, 900], "hot_tokens": [700, 500, 420]}
    series |= {
        "units": [3, 5, 5],
        "forgotten": [2705, 40, 0],
        "merged": [0] * 3,
        "purged": [0] * 3,
        "refined": [3, 2, 0],
    }
    svg = growth_svg(series)
    assert svg.startswith("<svg") and svg.count("<polyline") == 7
    assert ">1,000</text>" in svg and ">3,000</text>" in svg  # each panel's top: the next round number
    assert "hot tokens: 420" in svg  # each point says its value on hover
    assert growth_svg({"cycle": []}) == ""


# --- off by default --------------------------------------------------------------------------------------
def test_without_ui_the_pages_are_not_served(make_engine):
    from starlette.testclient import TestClient

    from expengine.service import ops
    from expengine.service.server import Service, build_app

    engine = make_engine()
    app = build_app(Service(engine, ops.Reach.of([], engine.config.serve)), token="secret")
    with TestClient(app) as client:
        for path in ("/ui", "/ui/login", "/ui/search?q=x", "/ui/style.css"):
            assert client.get(path, headers={"authorization": "Bearer secret"}).status_code == 404, path
        assert client.get("/ui/login").status_code == 401  # no token, no hint that anything is there


def test_ui_without_http_is_a_usage_error(tmp_path):
    import subprocess

    command = [sys.executable, "-m", "expengine", "--store", str(tmp_path / "store"), "serve", "--ui"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--ui needs --http" in done.stderr and "Traceback" not in done.stderr


def test_the_browser_session_is_not_the_token_and_logout_ends_it(make_engine):
    from starlette.testclient import TestClient

    from expengine.service import ops
    from expengine.service.server import Service, build_app
    from expengine.service.ui import COOKIE

    engine = make_engine()
    app = build_app(Service(engine, ops.Reach.of([], engine.config.serve)), token="secret", ui=True)
    with TestClient(app, follow_redirects=False) as client:
        login = client.post("/ui/login", data={"token": "secret", "next": "/ui/units"})
        assert login.status_code == 303
        session = login.cookies[COOKIE]
        assert session and "secret" not in session
        client.cookies.clear()
        cookie = {"cookie": f"{COOKIE}={session}"}
        assert client.get("/ui/units", headers=cookie).status_code == 200
        assert client.get("/ui/units", headers={"cookie": f"{COOKIE}=secret"}).status_code == 401
        assert client.post("/ui/logout", headers=cookie).status_code == 303
        assert client.get("/ui/units", headers=cookie).status_code == 401  # revoked, not just deleted


def test_a_host_that_is_not_this_server_is_refused(make_engine):
    from starlette.testclient import TestClient

    from expengine.service import ops
    from expengine.service.server import Service, build_app

    engine = make_engine()
    app = build_app(Service(engine, ops.Reach.of([], engine.config.serve)), token="secret")
    bearer = {"authorization": "Bearer secret"}
    with TestClient(app) as client:
        for host in ("rebind.attacker.example", "rebind.attacker.example:8765"):
            refused = client.get("/health", headers={**bearer, "host": host})
            assert refused.status_code == 421 and refused.json()["error"]["type"] == "MisdirectedRequest"
        for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "testserver"):
            assert client.get("/health", headers={**bearer, "host": host}).status_code == 200, host
