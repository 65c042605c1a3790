"""The compatibility suite: every case of the library, non-streamed and streamed, over each surface asked
(``--api``), against one pair.

Collected only when a target is given (``--engine``/``--base-url``); parametrized by the plugin.
"""

import pytest

from toolmatrix.plugin.keys import RECORD_KEY
from toolmatrix.records import Posted, Verdict


def test_case(tm_case, tm_mode, tm_api, tm_sample, toolmatrix_runners, record_property):
    record = toolmatrix_runners(tm_api).run(tm_case, tm_mode, tm_sample)
    record_property(RECORD_KEY, tuple(Posted.of(record)))
    if record.verdict is Verdict.UNSUPPORTED:
        pytest.xfail(f"unsupported: {record.reason}")
    if record.verdict is not Verdict.PASS:
        about = f" [{tm_case.description}]" if tm_case.description else ""
        pytest.fail(f"{record.verdict.value} (blame: {record.blame and record.blame.value}): {record.reason}{about}",
                    pytrace=False)
