"""Render the notebook view of a search (``SearchResults._repr_html_``) and screenshot it in a real
browser (headless Chromium), for docs/notebook-view.png.

    python -m bench.notebook_view [--query "postgres connection pool"] [--out docs/notebook-view.png]

The example vault is copied to a temporary folder and indexed there; the page is the HTML a
Jupyter notebook shows for the result, inside a plain page with a notebook-like margin.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.build.builder import build_index
from core.searcher import search_vault

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run")


def notebook_page(query: str, vault: Path) -> str:
    results = search_vault(vault, query, mode="auto", limit=5)
    cell = results._repr_html_()
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>vaultsearch notebook view</title></head>"
        "<body style='margin:24px 32px;background:#fff'>"
        f"<pre style='color:#333;background:#f5f5f5;padding:8px'>In [1]: search_vault(vault, {query!r})</pre>"
        f"{cell}</body></html>"
    )


def screenshot(html_path: Path, png_path: Path, *, width: int = 1100, height: int = 900) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        raise SystemExit("headless Chromium not found (apt-get install -y chromium)")
    subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--screenshot={png_path}", f"--window-size={width},{height}", html_path.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="postgres connection pool")
    parser.add_argument("--out", default=str(REPO / "docs" / "notebook-view.png"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        vault = shutil.copytree(REPO / "examples" / "vault", Path(tmp) / "example-vault")
        build_index(vault)
        page = Path(tmp) / "notebook-view.html"
        page.write_text(notebook_page(args.query, vault), encoding="utf-8")
        screenshot(page, Path(args.out).resolve())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
