"""An answer that is none of the API's (a wrong URL, model or key, a server of another kind) is the set-up's, told
in one line; an engine's own wrong answer is still the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolmatrix.formats import get_family
from toolmatrix.judge.checks import NOT_SERVED, CheckInput, check_http_status
from toolmatrix.library.cases import load_cases
from toolmatrix.wire.errors import not_an_answer
from toolmatrix.wire.exchange import Exchange

CASES = {c.id: c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])}
UNKNOWN = {"object": "error", "message": "The model `m` does not exist.", "type": "NotFoundError", "code": 404}

HTML_404 = "<!DOCTYPE HTML>\n<html lang=\"en\"><head><title>Error response</title></head><body>404</body></html>"


@pytest.mark.parametrize(("status", "body", "raw", "says"), [
    (404, {"object": "error", "message": "The model `qwen2.5-x` does not exist.", "code": 404}, None,
     "HTTP 404: The model `qwen2.5-x` does not exist.: the server does not serve this model"),  # vLLM
    (400, {"error": {"message": "Invalid model name passed in model=gpt-5"}}, None, "does not serve this model"),
    (404, {"error": "model 'llama9' not found"}, None, "does not serve this model"),  # Ollama
    (404, None, HTML_404, "HTTP 404 (an HTML page: 'Error response'): no API answered"),  # python -m http.server
    (501, None, HTML_404.replace("404", "501"), "an HTML page"),
    (502, None, "<html><head><title>502 Bad Gateway</title></head></html>", "'502 Bad Gateway'"),  # nginx
    (200, None, "<!doctype html><html><h1>Welcome</h1></html>", "'Welcome'"),  # a web app at that URL
    (404, {"detail": "Not Found"}, None, "HTTP 404: Not Found: the server has no such route or model"),  # FastAPI
    (405, {"detail": "Method Not Allowed"}, None, "no such route"),
    (401, {"error": {"message": "Invalid API key"}}, None, "the server refused the key"),
    (200, {"status": "ok"}, None, "a JSON body that is no answer of this API (keys: status)"),
])
def test_an_answer_that_is_none_of_the_apis_is_named(status, body, raw, says):
    said = not_an_answer(status, body, raw, "choices")
    assert said is not None and says in said


@pytest.mark.parametrize(("status", "body", "raw"), [
    (200, {"id": "c1", "choices": [{"message": {"content": "hi"}}]}, None),
    (200, {"id": "c1", "choices": "not a list"}, None),  # a broken answer is the engine's: wire_shape says so
    (500, {"error": {"message": "Internal error: KeyError 'arguments'"}}, None),  # an engine crash
    (400, {"error": {"message": "tool_choice: invalid value"}}, None),  # a refusal: the reject cases want it
    (200, None, "event: response.created\ndata: {}\n\n"),  # SSE for a non-streamed request: the engine's bug
    (None, None, None),  # nothing came back: the transport's error says so
])
def test_an_engines_own_answer_is_not_taken_for_a_foreign_one(status, body, raw):
    assert not_an_answer(status, body, raw, "choices") is None


@pytest.mark.parametrize("case_id", ["faults.single", "faults.choice_invalid"])
def test_the_http_check_blames_infra_for_an_answer_that_is_none_of_the_apis(case_id):
    # faults.choice_invalid wants a 4xx: a 404 for the model is still no verdict on the request at all.
    case = CASES[case_id]
    for mode in ("nonstream", "stream"):
        checked = CheckInput(case, Exchange(mode, {"model": "m"}, 404, UNKNOWN), get_family("hermes"), case.expect)
        result = check_http_status(checked)
        assert (result.outcome.value, result.blame.value, result.kind) == ("fail", "infra", NOT_SERVED)
