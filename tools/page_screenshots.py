"""Screenshots of the search page for the docs: light, dark, phone width and a stale banner.

    python -m tools.page_screenshots [--out docs]

Indexes a copy of examples/vault, starts ``vaultsearch serve`` on a free loopback port and takes
the pictures in the distribution's headless Chromium through Selenium, the same driver as
tests/serve/test_page_browser.py (apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]
VAULTSEARCH = str(Path(sys.executable).with_name("vaultsearch"))
NOTE = "decisions/adr-006-pgbouncer-transaction-pooling.md"

READY = "return document.body.dataset.ready === 'true' && !document.getElementById('list').hasAttribute('aria-busy')"
NOTE_DONE = "return document.getElementById('note').dataset.state === 'done'"


def _serve(vault: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [VAULTSEARCH, "serve", str(vault), "--port", "0", "--freshness-window", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if m:
            return proc, m.group(1)
    raise SystemExit("vaultsearch serve did not start")


def _driver() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def _shot(d: WebDriver, url: str, path: Path, *, size: tuple[int, int], dark: bool = False, note: bool = False) -> None:
    d.set_window_size(*size)
    scheme = "dark" if dark else "light"
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    d.get(url)
    WebDriverWait(d, 30).until(lambda d: d.execute_script(READY))
    if note:
        WebDriverWait(d, 30).until(lambda d: d.execute_script(NOTE_DONE))
    d.execute_script("document.activeElement.blur()")
    d.save_screenshot(str(path))
    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    out = parser.parse_args().out.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        shutil.copytree(ROOT / "examples" / "vault", vault)
        subprocess.run([VAULTSEARCH, "index", str(vault)], check=True, capture_output=True)
        proc, base = _serve(vault)
        d = _driver()
        try:
            lines = "18-25"
            _shot(
                d,
                f"{base}/?q=postgres+pool&note={NOTE}&lines={lines}",
                out / "page-light.png",
                size=(1280, 800),
                note=True,
            )
            _shot(d, f"{base}/?q=incident+postmortem", out / "page-dark.png", size=(1280, 800), dark=True)
            _shot(d, f"{base}/?q=connection+pool&type=decision", out / "page-phone.png", size=(390, 844))
            with (vault / "howtos" / "debug-slow-queries.md").open("a", encoding="utf-8") as f:
                f.write("\nAn edit after the last build: the index is now behind.\n")
            (vault / "meetings" / "new-note.md").write_text("# A note written after the build\n", encoding="utf-8")
            _shot(d, f"{base}/?q=slow+queries", out / "page-stale.png", size=(1280, 560))
        finally:
            d.quit()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
