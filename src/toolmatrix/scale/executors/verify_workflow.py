"""A GitHub Actions workflow an engine's own repository can add: on a pull request that touches its parsers, replay
the project's fixture set through the last release with and without the pull request's diff (``toolmatrix
replay-verify``) and comment the flips on the pull request. The YAML is dumped from data, never templated."""

from __future__ import annotations

from typing import Any

import yaml

from toolmatrix.scale.executors import header
from toolmatrix.scale.executors.github import CHECKOUT, PYTHON, SETUP_PYTHON, UPLOAD
from toolmatrix.serving.specs import EngineSpec

REPORT = "verify.txt"

# The diff of the pull request's parser files against the branch it targets, verified against the pinned release;
# the report is commented whatever the outcome, and the job fails when a fixture that passed breaks (exit 1).
VERIFY = f"""\
set +e
read -ra paths <<< "$PARSER_PATHS"
git diff "origin/$BASE_REF...HEAD" -- "${{paths[@]}}" > change.diff
toolmatrix replay-generate --every 8 -o fixtures.jsonl
toolmatrix replay-verify --engine "$ENGINE" --patch change.diff --fixtures fixtures.jsonl --results-dir verify \\
  > {REPORT} 2>&1
status=$?
cat {REPORT} >> "$GITHUB_STEP_SUMMARY"
echo "status=$status" >> "$GITHUB_OUTPUT"
"""
COMMENT = f'gh pr comment "$PR" --body-file {REPORT}'


def verify_workflow(engine: EngineSpec, command_line: str) -> str:
    """The workflow for ``engine``'s repository; ValueError where its spec names no parser paths to watch."""
    if engine.replay is None or not engine.replay.parser_paths:
        raise ValueError(f"{engine.id}: its spec names no replay.parser_paths (the repository's parser files)")
    paths = list(engine.replay.parser_paths)
    apt = ([{"name": "Install what the replay harness is built with",
             "run": f"sudo apt-get update -q && sudo apt-get install -y -q --no-install-recommends "
                    f"{' '.join(engine.replay.apt)}"}] if engine.replay.apt else [])
    steps: list[dict[str, Any]] = [
        {"uses": CHECKOUT, "with": {"fetch-depth": 0}},
        {"uses": SETUP_PYTHON, "with": {"python-version": PYTHON}},
        *apt,
        {"name": "Install toolmatrix (from the source named by the TOOLMATRIX_SOURCE variable)",
         "run": 'pip install "${{ vars.TOOLMATRIX_SOURCE }}"\n'
                f"toolmatrix replay-install {engine.id}\ntoolmatrix replay-install tokenizers"},
        {"name": "Replay the fixtures through the last release, with and without this pull request", "id": "verify",
         "env": {"BASE_REF": "${{ github.base_ref }}", "ENGINE": engine.id, "PARSER_PATHS": " ".join(paths)},
         "run": VERIFY},
        {"name": "Comment the flips", "if": "always()",
         "env": {"GH_TOKEN": "${{ github.token }}", "PR": "${{ github.event.pull_request.number }}"},
         "run": COMMENT},
        {"uses": UPLOAD, "if": "always()", "with": {"name": "toolmatrix-verify", "path": "verify"}},
        {"name": "Fail when a fixture that passed breaks", "env": {"STATUS": "${{ steps.verify.outputs.status }}"},
         "run": 'exit "$STATUS"'},
    ]
    workflow = {
        "name": f"toolmatrix: verify {engine.title}'s parser changes",
        "on": {"pull_request": {"paths": [f"{p}**" if p.endswith("/") else p for p in paths]}},
        "permissions": {"contents": "read", "pull-requests": "write"},
        "jobs": {"verify": {"runs-on": "ubuntu-latest", "timeout-minutes": 60, "steps": steps}},
    }
    return header(command_line) + yaml.safe_dump(workflow, sort_keys=False, width=120)
