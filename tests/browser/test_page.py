"""The matrix page in real headless Chromium (Debian's, driven by Playwright): cells, detail, filters, inert data.

Needs /usr/bin/chromium (``apt-get install chromium``); never a browser downloaded by ``playwright install``. Without
it every test here skips, and says so: a warning in pytest's summary, the reason with ``-rs``.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from tests.helpers_results import answer, chunks_of, record, suite, write_replay_results, write_results
from toolmatrix.matrix import build_matrix

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=\"window.__pwned = 1; alert(2)\">"

NO_CHROMIUM = (f"{CHROMIUM} is not installed: the page's tests drive Debian's chromium (apt-get install chromium), "
               "never the browser `playwright install chromium` downloads (its download host is unreachable from "
               "many machines); docs/contributing.md, 'The browser tests'")

if not CHROMIUM.exists():  # a skip alone is one 's' in pytest's output: say why, once, in its warnings summary
    warnings.warn(f"tests/browser/ skipped: {NO_CHROMIUM}", stacklevel=1)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # launch() gives every run a fresh temporary user-data-dir of its own.
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    evil = answer(content=f"{SCRIPT}{IMG}", calls=[{"name": "get_weather", "arguments": {"city": IMG}}])
    write_results(root / "m1-e1-old", suite({"single.a": "pass", "single.b": "fail", "parallel.p": "pass"}),
                  run_id="old", started="2026-01-01T00:00:00+00:00")
    write_results(root / "m1-e1", [
        *suite({"single.a": "pass", "single.b": "pass"}),
        record("parallel.p", "fail", blame="engine", reason="PARALLEL_SPLIT: one call of two"),
        record("parallel.p", "fail", mode="stream", blame="engine", reason="PARALLEL_SPLIT: one call of two"),
        {**record("types.t", "fail", blame="model", reason="WRONG_TYPE: days is a string",
                  body=answer(calls=[{"name": "get_weather", "arguments": {"city": "Pariss"}}])),
         "description": "a typed argument must keep its type", "blamed_by": "evidence",
         "evidence": {"status": "obtained", "method": "llamacpp_apply_template + llamacpp_completion",
                      "prompt_sha256": "0" * 64, "raw_text": f'<tool_call>{{"name": "get_weather", "city": "{IMG}"}}',
                      "calls": [{"name": "get_weather", "arguments": {"city": "Pariss"}}],
                      "template": {"reference": "gemma3-tools.jinja", "same": False,
                                   "diff": "--- reference template\n+++ engine render\n-a\n+b"}}},
        record("types.t", "pass", mode="stream"),
    ], run_id="new", started="2026-01-02T00:00:00+00:00")
    write_results(root / "m1-e2", [
        record(f"single.{SCRIPT}", "fail", body=evil, reason=f"{IMG} {SCRIPT}"),
        record("single.b", "fail", mode="stream", body=evil, blame="template", reason="STREAM_MISMATCH: x"),
    ], engine="e2", run_id="xss", flags=["--tool-call-parser", IMG])
    write_results(root / "m2-e2", suite({"single.a": "pass", "single.b": "unsupported"}), model="m2", engine="e2",
                  run_id="m2", launcher="external", flags=["--tool-call-parser", IMG])
    out = root / "matrix"
    report = build_matrix([root], out)
    assert len(report.cells) == 3 and not report.skipped
    return out / "index.html"


@pytest.fixture
def page(browser, matrix):
    context = browser.new_context()
    page = context.new_page()
    events = {"dialogs": [], "errors": [], "requests": []}
    page.on("dialog", lambda dialog: (events["dialogs"].append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: events["errors"].append(str(error)))
    page.on("request", lambda request: events["requests"].append(request.url))
    page.goto(matrix.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    page.events = events
    yield page
    assert events["errors"] == [], events["errors"]
    assert [u for u in events["requests"] if not u.startswith("file:")] == []  # offline: nothing fetched
    context.close()


def cell(page, pair: str):
    """The live table's cell of ``pair``: one surface's cell inside its engine's column."""
    return page.locator(f"#matrix .cell[data-pair='{pair}']")


def test_cells_render_with_rates_counts_categories_and_history(page):
    assert page.locator("#matrix tbody tr").count() == 2  # m1, m2
    assert page.locator("#matrix .cell").count() == 3 and page.locator("td.empty").count() == 1  # m2@e1 never ran
    assert page.locator("#matrix .surface").count() == 0  # Chat Completions alone: its cells need no name
    assert page.locator("#matrix thead th[data-engine='e2'] .flags").inner_text() == f"--tool-call-parser {IMG}"
    m1e1 = cell(page, "m1@e1")
    assert m1e1.locator(".rate").inner_text() == "63%"  # 5 of 8
    assert "5/8 pass \u00b7 3 fail" in m1e1.locator(".counts").inner_text()
    assert "lv-warn" in m1e1.get_attribute("class")
    # Beside the end-to-end rate, the engine's own: the two parallel.p failures are its, types.t is the model's.
    assert m1e1.locator(".conformance").inner_text() == "engine 75% (6/8)"
    assert m1e1.locator("ul.cats li").all_inner_texts() == ["parallel 0%", "single 100%", "types 50%"]
    assert "\u25bc2" in m1e1.locator(".changes").inner_text()  # parallel.p newly failing in both modes
    assert cell(page, "m2@e2").locator(".rate").inner_text() == "50%"
    assert "2 unsupported" in cell(page, "m2@e2").locator(".counts").inner_text()


def test_a_click_on_a_cell_opens_its_failing_cases(page):
    assert page.locator("#detail").is_hidden()
    cell(page, "m1@e1").locator("button").click()

    detail = page.locator("#detail")
    assert detail.is_visible() and detail.locator("h2").inner_text() == "m1@e1"
    assert detail.locator("details.case").count() == 3
    assert detail.locator(".newly_failing li").count() == 2
    case = detail.locator("details.case[data-case='types.t'][data-mode='nonstream']")
    case.locator("summary").click()
    assert "blame: model" in case.locator("summary").inner_text()
    assert case.locator("code.repro").inner_text() == (
        "pytest --engine=e1 --model=m1 -k 'types.t and nonstream'")
    assert '"content": "types.t: weather in Paris?"' in case.locator("pre.request").inner_text()
    assert '\\"city\\": \\"Pariss\\"' in case.locator("pre.response").inner_text()  # arguments: a JSON string
    expectation = case.locator("pre.diff").first  # the second one is the render diff, below
    assert expectation.locator("span.del").all_inner_texts() == ['-        "city": "Paris"']
    assert expectation.locator("span.add").all_inner_texts() == ['+        "city": "Pariss"']
    assert "args_object (blame: model): WRONG_TYPE" in case.locator("ul.checks").inner_text()
    assert case.locator("p.description").inner_text() == "Case: a typed argument must keep its type"
    assert case.locator("p.blamed-by").inner_text() == "blame decided by: the model's own words (evidence)"
    assert "What the model wrote (evidence: obtained, via llamacpp_apply_template" in case.inner_text()
    assert case.locator("pre.raw-text").inner_text() == f'<tool_call>{{"name": "get_weather", "city": "{IMG}"}}'
    assert '"city": "Pariss"' in case.locator("pre.model-calls").inner_text()
    assert case.locator("pre.diff").nth(1).locator("span.add").all_inner_texts() == ["+b"]


def test_the_category_table_shows_conformance_beside_the_pass_rate(page):
    cell(page, "m1@e1").locator("button").click()
    rows = page.locator("#detail table.categories tr").all_inner_texts()
    assert rows[0].split("\t")[-2:] == ["pass rate", "engine conformance"]
    assert next(r for r in rows if r.startswith("parallel")).split("\t")[-2:] == ["0%", "0%"]
    assert next(r for r in rows if r.startswith("types")).split("\t")[-2:] == ["50%", "100%"]


def test_a_stream_case_shows_its_raw_chunks(page):
    cell(page, "m1@e1").locator("button").click()
    case = page.locator("details.case[data-case='parallel.p'][data-mode='stream']")
    case.locator("summary").click()
    chunks = case.locator("pre.chunks").inner_text().splitlines()
    assert chunks[0].startswith("#0 {") and len(chunks) == len(chunks_of(answer(calls=[{"name": "x"}])))
    assert case.locator("pre.response").count() == 0


def test_an_external_launcher_gets_a_base_url_repro(page):
    cell(page, "m2@e2").locator("button").click()
    repro = page.locator("details.case code.repro").first.text_content()
    assert repro.startswith("pytest --base-url=http://staging.example:8000/v1 --model=m2-served -k 'single.b and")


@pytest.mark.parametrize(("select", "value", "cases", "rate"), [
    ("#f-category", "types", ["types.t"], "50%"),
    ("#f-mode", "stream", ["parallel.p"], "75%"),
    ("#f-blame", "model", ["types.t"], "63%"),
])
def test_a_filter_changes_the_cells_and_the_failing_cases(page, select, value, cases, rate):
    cell(page, "m1@e1").locator("button").click()
    assert page.locator("#detail details.case").count() == 3

    page.select_option(select, value)

    assert page.locator("#detail details.case").evaluate_all("els => els.map(e => e.dataset.case)") == cases
    assert cell(page, "m1@e1").locator(".rate").inner_text() == rate
    if select == "#f-blame":
        assert cell(page, "m1@e1").locator(".blamed").inner_text() == "1 blamed on model"
    if select == "#f-category":
        assert cell(page, "m1@e1").locator("ul.cats li").all_inner_texts() == ["types 50%"]
        assert cell(page, "m2@e2").locator(".rate").inner_text() == "-"  # no types cases there


def test_model_output_stays_inert_text(page):
    cell(page, "m1@e2").locator("button").click()
    for summary in page.locator("#detail details.case summary").all():
        summary.click()
    page.wait_for_timeout(300)  # time for an onerror or a script to fire, were there one

    assert page.events["dialogs"] == []
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2
    case = page.locator("#detail details.case").first
    assert case.locator(".case-id").inner_text() == f"single.{SCRIPT}"
    assert case.locator(".reason").inner_text() == f"{IMG} {SCRIPT}"
    response = page.locator("#detail pre.response").first.inner_text()
    assert f'"content": "{SCRIPT}{IMG.replace(chr(34), chr(92) + chr(34))}"' in response
    assert IMG in page.locator("#detail pre.chunks").first.inner_text().replace('\\"', '"')


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory) -> Path:
    """One pair run on an H100 box and on a CPU box, the same configuration, disagreeing on one case."""
    root = tmp_path_factory.mktemp("machines")
    write_results(root / "gpu", suite({"single.a": "pass", "single.b": "pass"}), run_id="on-gpu",
                  started="2026-03-01T10:00:00+00:00", host="gpu-box-7", gpus=("NVIDIA H100 80GB HBM3",))
    write_results(root / "cpu", suite({"single.a": "pass", "single.b": "fail"}), run_id="on-cpu",
                  started="2026-03-01T10:05:00+00:00", host=f"cpu{SCRIPT}")
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def open_page(browser, path: Path):
    """A fresh page on ``path``, once its script has drawn everything."""
    page = browser.new_page()
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    return page


def test_a_cell_of_two_machines_lists_both_and_shows_where_they_disagree(browser, two_machines):
    page = open_page(browser, two_machines)
    m1e1 = cell(page, "m1@e1")
    assert m1e1.locator(".rate").inner_text() == "50%"  # single.b in both modes is mixed: not a pass
    m1e1.locator("button").click()
    runs = page.locator("#detail table.runs tr").all_inner_texts()
    assert len(runs) == 3 and "gpu-box-7\tNVIDIA H100 80GB HBM3" in runs[2] and f"cpu{SCRIPT}\tCPU" in runs[1]
    mixed = page.locator("#detail ul.mixed > li")
    assert mixed.count() == 2 and {mixed.nth(i).get_attribute("data-case") for i in range(2)} == {"single.b"}
    lines = mixed.first.inner_text().lower().splitlines()  # verdicts are shown in capitals
    assert f"fail cpu{SCRIPT} (run on-cpu), blame: engine: args_not_object: arguments are not an object" in lines
    assert "pass gpu-box-7 (run on-gpu)" in lines
    assert page.locator("script").count() == 2  # the host name stayed text
    page.close()


@pytest.fixture(scope="module")
def with_replay(tmp_path_factory) -> Path:
    """A live pair beside two engines' parser-replay runs; vLLM did not replay glm45 (with its reason)."""
    root = tmp_path_factory.mktemp("replay")
    write_results(root / "live", suite({"single.a": "pass"}), engine="vllm")
    write_replay_results(root / "sglang", "sglang", {"hermes": "pass", "glm45": "fail"}, {})
    write_replay_results(root / "vllm", "vllm", {"hermes": "pass"}, {"glm45": f"vllm glm45: no tokenizer {SCRIPT}"})
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def test_replay_cells_are_a_table_of_their_own_with_the_reason_in_each_empty_cell(browser, with_replay):
    page = open_page(browser, with_replay)
    assert page.locator("#matrix tbody tr").all_inner_texts()[0].startswith("m1")  # no parser-replay row
    assert page.locator("#matrix tbody tr").count() == 1
    assert "no model ran" in page.locator("#replay h2").inner_text()
    assert page.locator("#replay-matrix tbody th").all_inner_texts() == ["glm45", "hermes"]
    empty = page.locator("#replay-matrix td.replay-reason[data-family='glm45'][data-engine='vllm']")
    assert empty.inner_text() == f"not replayed: vllm glm45: no tokenizer {SCRIPT}"
    failing = page.locator("#replay-matrix td[data-family='glm45'][data-engine='sglang']")
    assert failing.locator(".rate").inner_text() == "0%" and "lv-bad" in failing.get_attribute("class")
    failing.locator("button").click()
    assert page.locator("#detail h2").inner_text() == "parser-replay@sglang"
    assert page.locator("#f-category").input_value() == "replay.glm45"
    assert page.locator("#detail details.case").count() == 2
    assert page.locator("script").count() == 2  # the reason stayed text
    page.close()


@pytest.fixture(scope="module")
def with_sweep(tmp_path_factory) -> Path:
    """SGLang at two releases (a replay-sweep folder): hermes regresses, glm45 is fixed, gemma4 not replayed at
    the older one (a reason holding markup)."""
    root = tmp_path_factory.mktemp("sweep")
    write_replay_results(root / "sglang@0.5.9", "sglang", {"hermes": "pass", "glm45": "fail"},
                         {"gemma4": f"not a choice {SCRIPT}"}, version="0.5.9")
    write_replay_results(root / "sglang@0.5.10", "sglang", {"hermes": "fail", "glm45": "pass", "gemma4": "pass"}, {},
                         version="0.5.10")
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def test_a_sweep_is_a_families_x_releases_table_whose_marks_open_the_flipped_records(browser, with_sweep):
    page = open_page(browser, with_sweep)
    assert page.locator("#versions").is_visible() and "no model ran" in page.locator("#versions h2").inner_text()
    assert page.locator("#versions thead th").all_inner_texts()[1:] == ["0.5.9", "0.5.10"]
    assert page.locator("#versions tbody th").all_inner_texts() == ["gemma4", "glm45", "hermes"]
    assert page.locator("#versions td[data-family='gemma4'][data-release='0.5.9']").inner_text() == \
        f"not replayed: not a choice {SCRIPT}"
    regressed = page.locator("#versions td[data-family='hermes'][data-release='0.5.10']")
    assert regressed.locator(".rate").inner_text() == "0%" and "lv-bad" in regressed.get_attribute("class")
    mark = regressed.locator("a.down")
    assert mark.inner_text() == "\u25bc 2 regression"
    assert page.locator("#versions td[data-family='glm45'][data-release='0.5.10'] a.up").inner_text() == "\u25b2 2 fix"
    assert page.locator("#versions td[data-family='hermes'][data-release='0.5.9'] a").count() == 0
    target = page.locator("#versions li.regression")
    assert not target.locator("details").evaluate("d => d.open")
    mark.click()
    assert target.locator("details").evaluate("d => d.open")
    # each flipped record with why it fails now (a fix: why it failed before)
    assert target.locator("details > ul > li").all_inner_texts() == [
        f"hermes.case [{mode}] pass \u2192 fail\nnow: ARGS_NOT_OBJECT: arguments are not an object"
        for mode in ("nonstream", "stream:token")]
    assert page.evaluate("location.hash") == "#" + target.get_attribute("id")
    assert page.locator("script").count() == 2  # the reason stayed text
    page.close()


@pytest.fixture(scope="module")
def with_surfaces(tmp_path_factory) -> Path:
    """m1 on e1 over Chat Completions, the Responses API and the Messages API (a wrong call over Responses, in
    that surface's own shapes); m2 on e1 over Chat Completions only."""
    root = tmp_path_factory.mktemp("surfaces")
    write_results(root / "chat", suite({"single.a": "pass", "single.b": "pass"}))
    wrong = answer(calls=[{"name": "get_weather", "arguments": {"city": "Pariss"}}])
    write_results(root / "responses", [*suite({"single.a": "pass"}, api="responses"),
                                       *suite({"single.b": "fail"}, api="responses", body=wrong)],
                  run_id="run-2", api="responses")
    write_results(root / "messages", suite({"single.a": "pass", "single.b": "pass"}, api="messages"),
                  run_id="run-3", api="messages")
    write_results(root / "m2", suite({"single.a": "pass"}), model="m2", run_id="run-4")
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def test_the_surfaces_of_an_engine_are_cells_inside_its_one_column(browser, with_surfaces):
    page = open_page(browser, with_surfaces)
    assert page.locator("#matrix thead th").all_inner_texts()[1:] == ["e1\nb1234\n--jinja"]
    column = page.locator("#matrix td.column[data-model='m1'][data-engine='e1']")
    assert column.locator(".cell").evaluate_all("els => els.map(e => e.dataset.api)") == ["chat", "responses", "messages"]
    assert column.locator(".surface").all_inner_texts() == ["Chat Completions", "Responses", "Anthropic Messages"]
    assert [c.inner_text() for c in column.locator(".rate").all()] == ["100%", "50%", "100%"]
    assert "lv-warn" in cell(page, "m1@e1 [responses]").get_attribute("class")  # 50 %: its own colour
    # m2 went over Chat Completions only: the other surfaces say so, in line with m1's
    assert page.locator("td.column[data-model='m2'] .cell.not-run").all_inner_texts() == [
        "Responses: not run", "Anthropic Messages: not run"]
    cell(page, "m1@e1 [responses]").locator("button").click()
    assert "selected" in cell(page, "m1@e1 [responses]").get_attribute("class")
    assert "selected" not in cell(page, "m1@e1").get_attribute("class")
    assert page.locator("#detail h2").inner_text() == "m1@e1 [responses]"
    case = page.locator("#detail details.case[data-case='single.b'][data-mode='stream']")
    case.locator("summary").click()
    # The diff reads the Responses events as the Responses client does: the call the model made, not "no call"
    assert case.locator("pre.diff span.add").all_inner_texts() == ['+        "city": "Pariss"']
    page.close()


@pytest.fixture(scope="module")
def unserved(tmp_path_factory) -> Path:
    """A pair over Chat Completions (a category of it all unsupported: the model does not think) and over a
    surface its engine does not serve (every record unsupported)."""
    root = tmp_path_factory.mktemp("unserved")
    write_results(root / "chat", suite({"single.a": "pass", "single.b": "fail", "reasoning.r": "unsupported"}))
    reason = f"api.messages: e1 has no /v1/messages route {SCRIPT}"
    write_results(root / "messages", suite({"single.a": "unsupported", "single.b": "unsupported"}, reason=reason),
                  run_id="run-2", api="messages")
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def test_a_surface_the_engine_does_not_serve_is_grey_with_its_reason_not_a_red_0_percent(browser, unserved):
    page = open_page(browser, unserved)
    over = cell(page, "m1@e1 [messages]")
    assert "lv-none" in over.get_attribute("class") and "lv-bad" not in over.get_attribute("class")
    assert over.locator(".rate").inner_text() == "unsupported"
    assert over.locator(".unsupported-reason").inner_text() == f"api.messages: e1 has no /v1/messages route {SCRIPT}"
    assert over.locator("ul.cats li").count() == 0 and over.locator(".conformance").count() == 0
    chat = cell(page, "m1@e1")
    assert "lv-bad" in chat.get_attribute("class")  # a real failure keeps its colour (2 of 6 pass)
    # A category the run could not judge is grey "unsupported", in the chips and under the category filter.
    assert chat.locator("ul.cats li").all_inner_texts() == ["reasoning unsupported", "single 50%"]
    assert "lv-none" in chat.locator("ul.cats li").first.get_attribute("class")
    page.select_option("#f-category", "reasoning")
    assert chat.locator(".rate").inner_text() == "unsupported" and "lv-none" in chat.get_attribute("class")
    page.select_option("#f-category", "single")
    assert chat.locator(".rate").inner_text() == "50%" and "lv-none" not in chat.get_attribute("class")
    over.locator("button").click()
    assert page.locator("#detail p.unsupported-reason").inner_text().startswith("Every case unsupported: api.messages")
    assert page.locator("script").count() == 2  # the reason stayed text
    page.close()


def test_a_category_the_run_could_not_judge_is_grey_in_the_category_table_too(browser, unserved):
    page = open_page(browser, unserved)
    cell(page, "m1@e1").locator("button").click()
    rows = page.locator("#detail table.categories tr")
    reasoning = rows.filter(has_text="reasoning")
    assert "lv-none" in reasoning.get_attribute("class"), "not a red 0 %"
    assert reasoning.locator("td").all_inner_texts() == ["reasoning", "0", "0", "2", "0", "0", "unsupported", "-"]
    assert "lv-warn" in rows.filter(has_text="single").get_attribute("class")  # 2 of 4: 50 %
    page.close()


@pytest.fixture(scope="module")
def just_under_half(tmp_path_factory) -> Path:
    """99 passes of 200 records: 49.5 %, printed as 50 %."""
    root = tmp_path_factory.mktemp("half")
    verdicts = {f"single.c{n}": "pass" for n in range(49)} | {"single.c49": "pass/fail"}
    write_results(root / "run", suite({**verdicts, **{f"single.d{n}": "fail" for n in range(50)}}))
    build_matrix([root], root / "matrix")
    return root / "matrix" / "index.html"


def test_a_rate_takes_the_colour_of_the_figure_it_prints(browser, just_under_half):
    """The legend says >= 50 % is amber: 49.5 % reads "50%", and is amber, not red, in the cell, its chip and its
    category table; the legend's colours are drawn from the thresholds the colours are chosen by."""
    page = open_page(browser, just_under_half)
    half = cell(page, "m1@e1")
    assert half.locator(".rate").inner_text() == "50%"
    assert "lv-warn" in half.get_attribute("class") and "lv-bad" not in half.get_attribute("class")
    chip = half.locator("ul.cats li")
    assert chip.inner_text() == "single 50%" and "lv-warn" in chip.get_attribute("class")
    half.locator("button").click()
    row = page.locator("#detail table.categories tr", has_text="single")
    assert row.locator("td").all_inner_texts()[-2] == "50%" and "lv-warn" in row.get_attribute("class")
    legend = page.locator("#live-legend span.levels span")
    assert legend.all_inner_texts() == ["\u2265 95%", "\u2265 80%", "\u2265 50%", "< 50%"]
    assert legend.evaluate_all("els => els.map(e => e.className)") == ["lv-good", "lv-ok", "lv-warn", "lv-bad"]
    page.close()


def test_a_page_of_replay_cells_has_no_empty_model_x_engine_table_nor_its_legend(browser, tmp_path):
    write_replay_results(tmp_path / "sglang", "sglang", {"hermes": "pass", "glm45": "fail"}, {})
    build_matrix([tmp_path], tmp_path / "m")
    page = open_page(browser, tmp_path / "m" / "index.html")
    assert page.locator("#meta").inner_text().startswith("1 engine parser replayed on 2 format families; generated ")
    assert not page.locator("#matrix").is_visible() and not page.locator("#live-legend").is_visible()
    assert page.locator("#replay").is_visible() and page.locator("#filters").is_visible()  # the details' filters
    page.close()


def test_the_version_page_says_it_holds_releases_and_nothing_of_the_live_matrix(browser, tmp_path):
    summary = Path(__file__).parents[2] / "results" / "versions" / "versions.json"
    build_matrix([], tmp_path / "m", versions=[summary])
    page = open_page(browser, tmp_path / "m" / "index.html")
    assert page.locator("h1").inner_text() == "toolmatrix"  # no "compatibility matrix" of pairs it does not hold
    meta = page.locator("#meta").inner_text()
    assert re.match(r"6 engines' parsers across 3\d releases, \d+ groups of flipped records "
                    r"\(\d+ regressions?, \d+ fix(es)?\); generated ", meta), meta
    for live in ("#filters", "#matrix", "#live-legend"):  # "0 cells", an empty model x engine table, pass@1
        assert not page.locator(live).is_visible(), live
    headings = page.locator("#versions h3").all_inner_texts()
    assert headings and all(re.fullmatch(r"[\w.-]+: \d+ releases", h) for h in headings), headings  # no file path
    assert page.locator("#versions .legend span.levels span").all_inner_texts() == [
        "\u2265 95%", "\u2265 80%", "\u2265 50%", "< 50%"]  # a legend for the release cells
    page.close()


def test_the_docs_screenshot_script_opens_a_cell_of_the_page_as_it_draws_it(matrix, tmp_path):
    """docs/screenshot.py (the README's picture) clicks the cell it is named and a failing case of it. Run as its
    docstring says, in a process of its own: Playwright's sync API allows one driver loop per process."""
    import subprocess
    import sys

    shot = tmp_path / "page.png"
    script = Path(__file__).parents[2] / "docs" / "screenshot.py"
    done = subprocess.run([sys.executable, str(script), str(matrix), str(shot), "m1@e1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
