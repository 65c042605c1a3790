"""replay-verify's page in real headless Chromium, opened from disk: a verification's fixtures (broken, fixed,
unchanged) with both sides' records, the text of a record inert; and the committed example,
results/verify/sglang-18102/. The browser as tests/browser/test_page.py drives it (Debian's chromium); skipped
without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.test_page import CHROMIUM, IMG, NO_CHROMIUM, SCRIPT, browser  # noqa: F401 - browser: the fixture
from tests.helpers_results import write_replay_results
from toolmatrix.matrix.verifypage import write_verify_page
from toolmatrix.replay.verify import Change, compare, verdicts

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)
EXAMPLE = Path(__file__).parents[2] / "results" / "verify" / "sglang-18102"


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> Path:
    """A verification of engine ``e``: ``hermes.case`` passed and fails with the change (its reason hostile),
    ``qwen25.case`` failed and passes, ``glm45.case`` passes on both sides."""
    folder = tmp_path_factory.mktemp("verify")
    write_replay_results(folder / "base" / "e", "e", {"hermes": "pass", "qwen25": "fail", "glm45": "pass"}, {})
    write_replay_results(folder / "change" / "e", "e", {"hermes": "fail", "qwen25": "pass", "glm45": "pass"}, {})
    results = folder / "change" / "e" / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in records:
        if record["verdict"] == "fail":
            record["reason"] = f"{SCRIPT}{IMG}"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    flips = compare(verdicts(folder / "base" / "e"), verdicts(folder / "change" / "e"))
    write_verify_page(folder, "e", Change(folder, ("a/e/parser.py",), ("a/docs/index.md",)), flips)
    return folder


def _open(chromium, path: Path):
    """A fresh page on ``path`` in a context of its own, and what it did: dialogs, errors, requests (the page has no
    script: nothing to wait for but its summary line)."""
    context = chromium.new_context()
    page = context.new_page()
    events: dict[str, list] = {"dialogs": [], "errors": [], "requests": []}

    def dialog(shown) -> None:
        events["dialogs"].append(shown.message)
        shown.dismiss()

    page.on("dialog", dialog)
    page.on("pageerror", lambda error: events["errors"].append(str(error)))
    page.on("request", lambda request: events["requests"].append(request.url))
    page.goto(path.as_uri())
    page.wait_for_selector("#summary", timeout=10_000)
    return context, page, events


@pytest.fixture
def page(browser, verified):  # noqa: F811
    context, page, events = _open(browser, verified / "index.html")
    yield page
    assert events == {"dialogs": [], "errors": [], "requests": [(verified / "index.html").as_uri()]}
    context.close()


def test_the_page_opens_from_disk_and_lists_broken_then_fixed_then_unchanged(page) -> None:
    assert page.locator("#summary").inner_text() == ("1 fixed, 1 broken, 1 unchanged of 3 fixtures; "
                                                     "exit status 1: a fixture that passed breaks")
    fixtures = page.locator(".fixture")
    assert [fixtures.nth(i).get_attribute("data-fixture") for i in range(fixtures.count())] == [
        "hermes.case", "qwen25.case", "glm45.case"]
    assert page.locator("#broken .fixture").get_attribute("data-outcome") == "broken"
    assert page.locator("#fixed .fixture").get_attribute("data-outcome") == "fixed"
    # A mode per row, its verdict before -> after, both records beside it.
    rows = page.locator("#broken .fixture tbody tr")
    assert rows.count() == 2
    assert [rows.nth(i).get_attribute("data-mode") for i in range(2)] == ["nonstream", "stream:token"]
    assert rows.nth(0).locator("th").text_content() == "nonstreampass \u2192 failbroken"
    assert rows.nth(0).locator("td").count() == 2


def test_both_records_of_a_mode_are_linked_with_their_line(page, verified) -> None:
    report = json.loads((verified / "verify.json").read_text())
    row = page.locator("#fixed .fixture tbody tr[data-mode='stream:token']")
    for side, cell in (("base", row.locator("td.base")), ("change", row.locator("td.change"))):
        link = cell.locator("a.record")
        number = report["fixtures"][1][side]["lines"]["stream:token"]
        assert link.inner_text() == f"{side}/e/results.jsonl line {number}"
        assert link.evaluate("a => a.href") == (verified / side / "e" / "results.jsonl").as_uri()
    assert row.locator("td.base pre.output").count() == row.locator("td.change pre.output").count() == 1


def test_a_records_text_is_text(page) -> None:
    """A hostile reason reads as itself: no element made of it, no script run."""
    reason = page.locator("#broken td.change .reason").first
    assert reason.inner_text() == f"{SCRIPT}{IMG}"
    assert page.locator("#broken td.change img, body script").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_the_unchanged_fixtures_are_collapsed(page) -> None:
    unchanged = page.locator("#unchanged .fixture[data-fixture='glm45.case']")
    assert not unchanged.is_visible()
    page.locator("#unchanged > details > summary").click()
    assert unchanged.is_visible()
    unchanged.locator("summary").click()
    assert unchanged.locator("tbody tr").count() == 2


def test_the_committed_example_opens_from_disk(browser) -> None:  # noqa: F811
    context, page, events = _open(browser, EXAMPLE / "index.html")
    report = json.loads((EXAMPLE / "verify.json").read_text())
    assert page.locator("#summary").inner_text().startswith("1 fixed, 0 broken, 0 unchanged of 1 fixtures; exit status 0")
    assert report["counts"] == {"broken": 0, "fixed": 1, "unchanged": 0, "fixtures": 1}
    fixture = page.locator("#fixed .fixture")
    assert fixture.get_attribute("data-fixture") == "sglang-18102.qwen25.parallel_stream"
    rows = fixture.locator("tbody tr")
    assert [rows.nth(i).get_attribute("data-mode") for i in range(rows.count())] == [
        "nonstream", "stream", "stream:token", "stream:special", "stream:random"]
    assert fixture.locator("tr.flip-fixed").count() == 3
    assert events["errors"] == events["dialogs"] == [] and all(u.startswith("file:") for u in events["requests"])
    context.close()
