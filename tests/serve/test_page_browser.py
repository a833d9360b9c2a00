"""The search page (``vaultsearch serve`` at ``/``) in a real headless Chromium, driven by Selenium.

Chromium and its driver come from the distribution's packages (``.ci/run`` installs them); a
missing browser fails these tests, it never skips them. One browser session serves the whole
module; each test loads the page it needs. Waits are for a state the page reports
(``data-ready``, ``data-query``, ``data-state``), never for a fixed time.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from core.render import snippet_text
from core.serve.page import ASSETS
from tests.conftest import note
from tests.serve.serve_helpers import VAULTSEARCH, HttpServer, _env, wait_until

CHROMIUM = os.environ.get("VAULTSEARCH_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("VAULTSEARCH_CHROMEDRIVER", "/usr/bin/chromedriver")
TOKEN = "page-token-7f3a"
HOSTILE_TITLE = 'Hostile </title><script>window.__pwned = "title"</script> keeper'
HOSTILE_LINES = [
    "<img src=x onerror=\"window.__pwned = 'img'; alert(1)\">",
    "<script>window.__pwned = 'script'; alert(2)</script>",
    "[click me](javascript:window.__pwned='link') and <a href=\"javascript:alert(3)\">anchor</a>",
]
FILES = {
    "notes/alpha.md": note(
        "Alpha lighthouse",
        """
        # Alpha lighthouse

        Intro line about the harbour.

        ## Setup

        Install the lighthouse lamp carefully.
        Then link it to [[beta]] and to [[secret]].
        """,
        type="howto",
        tags=["sea", "project/lighthouse"],
        created="2024-02-01",
    ),
    "notes/beta.md": note(
        "Beta harbour",
        "The harbour keeper watches the lighthouse and links back to [[alpha]].",
        type="ref",
        tags=["project/harbour"],
        created="2023-05-01",
    ),
    "journal/day.md": note(
        "Harbour diary",
        "A lighthouse seen from the harbour wall.",
        type="journal",
        tags=["diary"],
        created="2024-08-01",
    ),
    "private/secret.md": note(
        "Secret plans", "The lighthouse moonbeam project. See [[alpha]].", classification="secret"
    ),
    "notes/hostile.md": note(HOSTILE_TITLE, "\n".join(["Hostile keeper text.", "", *HOSTILE_LINES]), type="ref"),
}


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    """One headless Chromium for the module (the distribution's, through its chromedriver)."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"no {CHROMIUM} / {CHROMEDRIVER}: apt-get install chromium chromium-driver (.ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    # counts the searches the page cancels (installed before the page's own scripts run)
    d.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {
            "source": "window.__aborted = 0; const f = window.fetch; window.fetch = (u, i) => {"
            " if (i && i.signal) i.signal.addEventListener('abort', () => window.__aborted++); return f(u, i); };"
        },
    )
    yield d
    d.quit()


@pytest.fixture(scope="module")
def vault(make_vault: Callable[..., Path]) -> Path:
    return make_vault(FILES, name="page")


@pytest.fixture(scope="module")
def server(vault: Path) -> Iterator[HttpServer]:
    """``vaultsearch serve`` with the default visibility (the secret note hidden), no watcher."""
    srv = HttpServer([str(vault)])
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def token_server(vault: Path) -> Iterator[HttpServer]:
    srv = HttpServer([str(vault)], env={"VAULTSEARCH_TOKEN": TOKEN})
    yield srv
    srv.close()


# ---------------------------------------------------------------------------------------- helpers


def wait(d: WebDriver, check: Callable[[WebDriver], Any], what: str) -> Any:
    """Wait for a state of the page (a generous deadline guards against a hang, it times nothing)."""
    return WebDriverWait(d, 30, poll_frequency=0.05).until(check, message=f"waiting for {what}")


def load(d: WebDriver, url: str) -> None:
    d.get(url)
    wait(d, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "the page")


SHOWS_THE_URL = """
const list = document.getElementById("list");
const norm = (qs) => [...new URLSearchParams(qs)].filter(([k]) => k !== "note" && k !== "lines").map(String).sort().join("&");
return !list.hasAttribute("aria-busy") && list.dataset.search !== undefined
  && norm(list.dataset.search.slice(1)) === norm(location.search) && list.dataset.query === arguments[0];
"""


def listed(d: WebDriver, query: str) -> list[WebElement]:
    """The result items once the list shows the results of the search in the URL (``query``,
    with its filters), and no search is in flight."""

    def done(d: WebDriver) -> bool:
        return bool(d.execute_script(SHOWS_THE_URL, query))

    wait(d, done, f"the results of {query!r}")
    return d.find_elements(By.CSS_SELECTOR, "#results li.hit")


def paths(items: list[WebElement]) -> list[str]:
    return [str(i.get_attribute("data-path")) for i in items]


def type_query(d: WebDriver, text: str) -> list[WebElement]:
    box = d.find_element(By.ID, "q")
    box.clear()
    box.send_keys(text)
    return listed(d, text)


def set_field(d: WebDriver, element_id: str, value: str, event: str) -> None:
    """Set an input's value as a user would (date inputs take their text in the browser's locale)."""
    d.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event(arguments[2], {bubbles: true}));",
        element_id,
        value,
        event,
    )


def note_view(d: WebDriver, path: str) -> WebElement:
    view = d.find_element(By.ID, "note")
    wait(d, lambda d: view.get_attribute("data-path") == path and view.get_attribute("data-state") == "done", path)
    return view


def url_params(d: WebDriver) -> dict[str, list[str]]:
    return parse_qs(urlsplit(d.current_url).query)


def press(d: WebDriver, key: str) -> None:
    d.switch_to.active_element.send_keys(key)


def script_errors(d: WebDriver) -> list[str]:
    """Console errors other than the refused requests a test asked for (404, 401)."""
    return [
        e["message"]
        for e in d.get_log("browser")
        if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]
    ]


# ---------------------------------------------------------------------------------------- tests


def test_typing_shows_highlighted_results_the_mode_that_ran_and_the_fallback(driver: WebDriver, server) -> None:
    load(driver, server.base + "/")
    assert driver.switch_to.active_element.get_attribute("id") == "q"  # the page starts in the search box
    items = type_query(driver, "lighthouse")
    assert "notes/alpha.md" in paths(items) and "journal/day.md" in paths(items)
    marks = driver.find_elements(By.CSS_SELECTOR, "#results .snippet mark, #results .hit-title mark")
    assert marks and {m.text.lower() for m in marks} == {"lighthouse"}
    assert driver.find_element(By.ID, "actual-mode").text == "fts"  # auto ran fts: no dense index
    assert driver.find_element(By.ID, "fallback").text == "fallback: dense_index_unavailable"
    assert url_params(driver)["q"] == ["lighthouse"]
    assert script_errors(driver) == []


def test_the_page_shows_link_syntax_as_the_terminal_does(driver: WebDriver, server) -> None:
    """The page's plainLinks and the terminal's snippet_text show a snippet's links alike (the page
    showed ``![[x]]`` as ``!x`` and kept ``[[note#heading]]`` and ``[text](url)`` as written)."""
    from tests.test_snippet_links import LINK_CASES

    load(driver, server.base + "/")
    shown = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/page/dom.js').then((m) => done(arguments[0].map(m.plainLinks)), (e) => done(String(e)));",
        [raw for raw, _ in LINK_CASES],
    )
    assert shown == [expected for _, expected in LINK_CASES]
    assert shown == [snippet_text(raw) for raw, _ in LINK_CASES]


def test_a_newer_search_cancels_the_one_in_flight_and_the_list_shows_the_last(driver: WebDriver, server) -> None:
    load(driver, server.base + "/")
    before = driver.execute_script("return window.__aborted")
    driver.execute_script(  # two searches started in one task: the first is still in flight when the second starts
        "const q = document.getElementById('q'), m = document.getElementById('mode');"
        "q.value = 'harbour'; m.dispatchEvent(new Event('change'));"
        "q.value = 'keeper'; m.dispatchEvent(new Event('change'));"
    )
    items = listed(driver, "keeper")
    assert driver.execute_script("return window.__aborted") == before + 1
    assert set(paths(items)) == {"notes/beta.md", "notes/hostile.md"}


def test_filters_narrow_the_results_and_are_kept_in_the_url(driver: WebDriver, server) -> None:
    load(driver, server.base + "/")
    everything = set(paths(type_query(driver, "lighthouse")))
    assert {"notes/alpha.md", "notes/beta.md", "journal/day.md"} <= everything
    # a parent tag chip filters on the whole subtree: project/lighthouse and project/harbour
    alpha = driver.find_element(By.CSS_SELECTOR, '#results li[data-path="notes/alpha.md"]')
    alpha.find_element(By.CSS_SELECTOR, 'button[data-tag="project"]').click()
    wait(driver, lambda d: url_params(d).get("tag") == ["project"], "the tag in the URL")
    assert set(paths(listed(driver, "lighthouse"))) == {"notes/alpha.md", "notes/beta.md"}
    set_field(driver, "f-type", "ref", "input")
    wait(driver, lambda d: set(paths(listed(d, "lighthouse"))) == {"notes/beta.md"}, "type and tag")
    driver.find_element(By.ID, "f-clear").click()
    wait(driver, lambda d: set(paths(listed(d, "lighthouse"))) == everything, "cleared filters")
    set_field(driver, "f-folder", "journal/", "input")
    wait(driver, lambda d: set(paths(listed(d, "lighthouse"))) == {"journal/day.md"}, "the folder filter")
    driver.find_element(By.ID, "f-clear").click()
    set_field(driver, "f-date", "created", "change")
    set_field(driver, "f-since", "2024-01-01", "change")
    wait(driver, lambda d: set(paths(listed(d, "lighthouse"))) == {"notes/alpha.md", "journal/day.md"}, "since")
    assert url_params(driver)["since"] == ["2024-01-01"] and url_params(driver)["date"] == ["created"]


def test_keyboard_slash_arrows_enter_and_escape_and_history(driver: WebDriver, server) -> None:
    load(driver, server.base + "/?q=lighthouse")
    items = listed(driver, "lighthouse")
    driver.find_element(By.TAG_NAME, "body").click()
    press(driver, "/")
    assert driver.switch_to.active_element.get_attribute("id") == "q"
    press(driver, Keys.ARROW_DOWN)
    press(driver, Keys.ARROW_DOWN)
    second = driver.find_element(By.ID, "hit-1")
    assert second.get_attribute("aria-selected") == "true"
    assert driver.find_element(By.ID, "hit-0").get_attribute("aria-selected") == "false"
    press(driver, Keys.ENTER)
    path = str(items[1].get_attribute("data-path"))
    note_view(driver, path)
    assert url_params(driver)["note"] == [path]
    press(driver, Keys.ESCAPE)
    wait(driver, lambda d: not d.find_element(By.ID, "note").is_displayed(), "the note to close")
    assert "note" not in url_params(driver) and url_params(driver)["q"] == ["lighthouse"]
    assert driver.find_element(By.ID, "hit-1").get_attribute("aria-selected") == "true"  # back where we were
    driver.forward()  # the note again, from history
    note_view(driver, path)
    driver.back()
    wait(driver, lambda d: not d.find_element(By.ID, "note").is_displayed(), "back to the list")


def test_opening_a_note_marks_the_hit_lines_and_links_its_neighbours(driver: WebDriver, server, vault) -> None:
    load(driver, server.base + "/?q=lamp")
    item = next(i for i in listed(driver, "lamp") if i.get_attribute("data-path") == "notes/alpha.md")
    first, last = (int(n) for n in str(item.get_attribute("data-lines")).split("-"))
    item.find_element(By.CSS_SELECTOR, "a.hit-title").click()
    view = note_view(driver, "notes/alpha.md")
    marked = [int(str(e.get_attribute("data-line"))) for e in view.find_elements(By.CSS_SELECTOR, ".line.marked")]
    assert marked == list(range(first, last + 1))
    lamp = view.find_element(By.CSS_SELECTOR, ".line.marked mark")
    assert lamp.text == "lamp"
    assert view.find_element(By.CSS_SELECTOR, "a.obsidian").get_attribute("href") == (
        f"obsidian://open?vault={vault.name}&file=notes%2Falpha"
    )
    assert str(view.find_element(By.CSS_SELECTOR, "a.file").get_attribute("href")).endswith("/notes/alpha.md")
    wait(driver, lambda d: view.find_elements(By.CSS_SELECTOR, "a.neighbour"), "the neighbours")
    neighbours = [str(a.get_attribute("data-path")) for a in view.find_elements(By.CSS_SELECTOR, "a.neighbour")]
    assert neighbours == ["notes/beta.md"]  # linked both ways, listed once; the secret note it links to is hidden
    view.find_element(By.CSS_SELECTOR, "a.neighbour").click()
    note_view(driver, "notes/beta.md")
    assert driver.title == "Beta harbour · vaultsearch"


def test_a_hidden_note_never_appears(driver: WebDriver, server) -> None:
    load(driver, server.base + "/")
    assert type_query(driver, "moonbeam") == []
    assert driver.find_element(By.CSS_SELECTOR, "#results li.empty").text == "No notes match."
    assert "private/secret.md" not in paths(type_query(driver, "lighthouse"))
    load(driver, server.base + "/?note=private/secret.md")
    view = driver.find_element(By.ID, "note")
    wait(driver, lambda d: view.get_attribute("data-state") == "error", "the refusal")
    assert view.find_element(By.CSS_SELECTOR, ".error-text").get_attribute("data-reason") == "note_not_found"
    source = driver.page_source
    assert "Secret plans" not in source and "moonbeam" not in source


def test_hostile_note_text_is_shown_as_text_and_never_runs(driver: WebDriver, server) -> None:
    load(driver, server.base + "/")
    items = type_query(driver, "hostile")
    assert paths(items) == ["notes/hostile.md"]
    assert "</title><script>" in items[0].find_element(By.CSS_SELECTOR, "a.hit-title").text
    items[0].find_element(By.CSS_SELECTOR, "a.hit-title").click()
    view = note_view(driver, "notes/hostile.md")
    shown = [e.text for e in view.find_elements(By.CSS_SELECTOR, ".line .text")]
    assert all(line in shown for line in HOSTILE_LINES)
    assert view.find_element(By.CSS_SELECTOR, ".note-title").text == HOSTILE_TITLE
    assert driver.title == f"{HOSTILE_TITLE} · vaultsearch"
    assert driver.find_elements(By.CSS_SELECTOR, "body img, body script, a[href^='javascript']") == []
    assert driver.execute_script("return window.__pwned") is None
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 (reading it is the check)
    assert script_errors(driver) == []  # no CSP violation either: nothing tried to run


def test_the_url_state_is_restored_on_reload(driver: WebDriver, server) -> None:
    load(driver, server.base + "/?q=harbour&type=ref&note=notes/beta.md")
    assert set(paths(listed(driver, "harbour"))) == {"notes/beta.md"}
    note_view(driver, "notes/beta.md")
    driver.refresh()
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "reload")
    assert set(paths(listed(driver, "harbour"))) == {"notes/beta.md"}
    assert driver.find_element(By.ID, "q").get_attribute("value") == "harbour"
    assert driver.find_element(By.ID, "f-type").get_attribute("value") == "ref"
    note_view(driver, "notes/beta.md")


def test_themes_follow_the_system_and_the_toggle(driver: WebDriver, server) -> None:
    def background(d: WebDriver) -> str:
        return str(d.execute_script("return getComputedStyle(document.body).backgroundColor"))

    load(driver, server.base + "/")
    light = background(driver)
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    try:
        dark = background(driver)
        assert dark != light
        driver.find_element(By.ID, "theme").click()  # auto -> light, whatever the system says
        assert background(driver) == light
        driver.find_element(By.ID, "theme").click()  # -> dark
        assert background(driver) == dark
        driver.find_element(By.ID, "theme").click()  # -> auto again
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert background(driver) == light
    driver.find_element(By.ID, "theme").click()
    driver.find_element(By.ID, "theme").click()  # dark on a light system: kept across a reload
    driver.refresh()
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "reload")
    assert background(driver) == dark
    driver.find_element(By.ID, "theme").click()  # -> auto: the system's light
    assert background(driver) == light


def test_a_phone_width_page_does_not_scroll_sideways_and_the_note_replaces_the_list(driver: WebDriver, server) -> None:
    driver.set_window_size(390, 844)
    try:
        load(driver, server.base + "/?q=lighthouse")
        listed(driver, "lighthouse")
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        driver.find_element(By.CSS_SELECTOR, "#results a.hit-title").click()
        note_view(driver, str(url_params(driver)["note"][0]))
        assert not driver.find_element(By.ID, "list").is_displayed()
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        driver.set_window_size(1280, 900)


def test_a_stale_index_shows_the_banner(driver: WebDriver, make_vault) -> None:
    root = make_vault({"notes/a.md": note("A", "The lighthouse at dawn.")}, name="stale")
    srv = HttpServer([str(root), "--freshness-window", "0"])
    try:
        load(driver, srv.base + "/?q=lighthouse")
        listed(driver, "lighthouse")
        assert not driver.find_element(By.ID, "banner").is_displayed()
        with (root / "notes" / "a.md").open("a", encoding="utf-8") as f:
            f.write("\nAn edit after the build, and no watcher.\n")
        load(driver, srv.base + "/?q=lighthouse")
        listed(driver, "lighthouse")
        banner = driver.find_element(By.ID, "banner")
        assert banner.is_displayed()
        assert "index is behind the vault" in banner.text and "1 changed" in banner.text and "notes/a.md" in banner.text
    finally:
        srv.close()


def test_a_token_is_asked_for_kept_in_the_session_and_never_in_the_url(driver: WebDriver, token_server) -> None:
    driver.get(token_server.base + "/?q=lighthouse")
    form = driver.find_element(By.ID, "token-form")
    wait(driver, lambda d: form.is_displayed(), "the token form")
    assert not driver.find_element(By.ID, "main").is_displayed()
    driver.find_element(By.ID, "token").send_keys("wrong", Keys.ENTER)
    wait(driver, lambda d: d.find_element(By.ID, "token-error").text == "That token was refused.", "a refusal")
    driver.find_element(By.ID, "token").clear()
    driver.find_element(By.ID, "token").send_keys(TOKEN, Keys.ENTER)
    assert "notes/alpha.md" in paths(listed(driver, "lighthouse"))
    assert driver.execute_script("return sessionStorage.getItem('vaultsearch.token')") == TOKEN
    assert TOKEN not in driver.current_url
    driver.execute_script("sessionStorage.clear()")


def test_the_page_is_served_with_a_strict_csp_and_the_api_rules(token_server: HttpServer) -> None:
    base = token_server.base
    page = httpx.get(base + "/?q=x", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page.text, re.S)
    assert len(scripts) == page.text.count("<script") == 2
    assert all(' src="/page/' in attrs and body == "" for attrs, body in scripts)  # no inline script
    for name in ASSETS:  # the static files hold no vault data: no token needed
        asset = httpx.get(f"{base}/page/{name}", timeout=30)
        assert asset.status_code == 200 and asset.headers["content-security-policy"] == csp
    assert httpx.post(base + "/search", json={"query": "x"}, timeout=30).status_code == 401  # its data does
    assert httpx.get(base + "/", headers={"Host": "evil.example"}, timeout=30).status_code == 421
    assert httpx.get(base + "/", headers={"Origin": "http://evil.example"}, timeout=30).status_code == 403


def test_open_starts_the_server_and_opens_the_page_in_the_browser(vault: Path, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}.tmp && mv {opened}.tmp {opened}\n', encoding="utf-8")
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    proc = subprocess.Popen(
        [VAULTSEARCH, "open", str(vault), "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**_env(), "BROWSER": str(browser)},
    )
    try:
        wait_until(opened.exists, what="the browser to be started")
        url = opened.read_text(encoding="utf-8")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and 'src="/page/app.js"' in page.text
    finally:
        proc.terminate()
        proc.wait(30)
