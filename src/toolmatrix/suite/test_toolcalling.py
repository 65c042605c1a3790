"""The compatibility suite: every case of the library, non-streamed and streamed, against one pair.

Collected only when a target is given (``--engine``/``--base-url``); parametrized by the plugin.
"""

import pytest

from toolmatrix.plugin import RECORD_KEY, VERDICT_KEY
from toolmatrix.results import encode_record


def test_case(tm_case, tm_mode, toolmatrix_runner, record_property):
    verdict, record = toolmatrix_runner.run(tm_case, tm_mode)
    record_property(RECORD_KEY, encode_record(record))
    record_property(VERDICT_KEY, (tm_case.category, tm_mode, verdict.verdict, verdict.blame))
    if verdict.verdict == "unsupported":
        pytest.xfail(f"unsupported: {verdict.reason}")
    if verdict.verdict != "pass":
        pytest.fail(f"{verdict.verdict} (blame: {verdict.blame}): {verdict.reason}", pytrace=False)
