"""Screenshot of a matrix page with one cell opened, for the README (Debian's chromium, no download).

    python docs/screenshot.py MATRIX_DIR/index.html docs/matrix-page.png [MODEL@ENGINE]
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(page_file: str, out: str, pair: str | None = None) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1500})
        page.goto(Path(page_file).resolve().as_uri())
        cell = page.locator(f"#matrix .cell[data-pair='{pair}']" if pair else "#matrix .cell").first
        cell.locator("button").click()
        first = page.locator("#detail details.case").first
        first.locator("summary").click()
        page.evaluate("window.scrollTo(0, 0)")  # the cell and the top of its detail
        page.screenshot(path=out, full_page=False)
        browser.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
