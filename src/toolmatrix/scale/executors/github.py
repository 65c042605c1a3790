"""A GitHub Actions workflow from a plan: a job per shard, then one job that merges them into the matrix page.

The ``shard`` job is a matrix with one ``include`` entry per shard: its id, its command (shell-quoted), its
results directory, the artifact that carries that directory, and the runner labels (GPU shards on the GPU
labels). Each runs on a fresh runner with a checkout of the repository. The ``matrix`` job downloads every
shard's artifact into a folder of its own, builds the page, gates each shard against a baseline when one is
given, and hands the page to GitHub Pages (``deploy``). The YAML is dumped from data, never templated.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import PurePosixPath
from typing import Any, Sequence

import yaml

from toolmatrix.scale.executors import header
from toolmatrix.scale.shards import Plan, Shard

DEFAULT_RUNS_ON = ("ubuntu-latest",)
DEFAULT_GPU_RUNS_ON = ("self-hosted", "gpu")
PYTHON = "3.12"
ARTIFACT_PREFIX = "shard-"  # download-artifact's pattern picks the shards' artifacts by it
SHARDS_DIR = "shards"  # where the matrix job downloads them, one folder per artifact
PAGE_DIR = "matrix"
REPORTS_DIR = "reports"
EXIT_STATUS_FILE = "pytest-exit-status"
# The first majors on Node 24 (Node 20 actions are deprecated on GitHub's runners).
CHECKOUT, SETUP_PYTHON = "actions/checkout@v5", "actions/setup-python@v6"
UPLOAD, DOWNLOAD = "actions/upload-artifact@v6", "actions/download-artifact@v7"
UPLOAD_PAGES, DEPLOY_PAGES = "actions/upload-pages-artifact@v4", "actions/deploy-pages@v5"

# The shard's pytest exits 1 when cases fail: that is what the matrix is for, not a broken job, so it must not
# stop the merge. The status is kept in the results directory (it travels with the artifact) and in the job
# summary; any other (interrupted, internal or usage error, engine died) fails the job, so a broken shard shows red, and the matrix job still runs (if: always()) with what the other shards wrote.
RUN_SHARD = f"""\
set +e
eval "$SHARD_COMMAND"
status=$?
mkdir -p "$RESULTS_DIR"
echo "$status" > "$RESULTS_DIR/{EXIT_STATUS_FILE}"
echo "pytest exit status $status (0 all passed, 1 cases failed, 5 no case selected)" >> "$GITHUB_STEP_SUMMARY"
case "$status" in 0|1|5) exit 0;; esac  # 5: a slice that selected no case is finished too
exit "$status"
"""

# The gate judges one run against one baseline run, so each shard is gated on its own against the folder of
# the same name in the baseline (a results root of an earlier run of the same plan). Every shard is gated
# even after a failure; the worst status wins (2 input error > 1 regression > 0).
GATE_FUNCTION = """\
set +e
worst=0
gate() {
  toolmatrix gate --baseline "$1" --results "$2" --junit-xml "$3"
  status=$?
  if [ "$status" -gt "$worst" ]; then worst=$status; fi
}
"""


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings (the run scripts) as literal blocks, so they read as scripts."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def artifact_name(shard: Shard) -> str:
    """The shard's artifact name: artifact names forbid ``" : < > | * ? \\ /`` and CR/LF (model ids may hold some);
    an id that had to change gets a hash of itself, so two ids never share a name (an upload would fail)."""
    safe = re.sub(r'[":<>|*?\\/\r\n]', "_", shard.id)
    return ARTIFACT_PREFIX + (safe if safe == shard.id else f"{safe}-{hashlib.sha256(shard.id.encode()).hexdigest()[:8]}")


def downloaded(shard: Shard) -> str:
    """Where the matrix job finds the shard's results: download-artifact puts each artifact in a folder of its name."""
    return f"{SHARDS_DIR}/{artifact_name(shard)}"


def matrix_entry(shard: Shard, runs_on: Sequence[str], gpu_runs_on: Sequence[str]) -> dict[str, Any]:
    return {"id": shard.id, "command": shlex.join(shard.command), "results": shard.results_dir,
            "artifact": artifact_name(shard), "labels": list(gpu_runs_on if shard.gpus > 0 else runs_on)}


def setup_steps() -> list[dict[str, Any]]:
    """A checkout with toolmatrix installed from it: the same in every job."""
    return [{"uses": CHECKOUT},
            {"uses": SETUP_PYTHON, "with": {"python-version": PYTHON}},
            {"name": "Install toolmatrix", "run": "pip install -e ."}]


def shard_job(plan: Plan, runs_on: Sequence[str], gpu_runs_on: Sequence[str]) -> dict[str, Any]:
    return {
        "name": "${{ matrix.id }}",
        "runs-on": "${{ matrix.labels }}",
        "strategy": {"fail-fast": False,
                     "matrix": {"include": [matrix_entry(s, runs_on, gpu_runs_on) for s in plan.shards]}},
        "steps": [
            *setup_steps(),
            # One workflow run is one fan-out: its shards make one matrix cell per pair (a re-run job replaces
            # its shard's earlier attempt).
            {"name": "Run the shard", "env": {"SHARD_COMMAND": "${{ matrix.command }}",
                                              "RESULTS_DIR": "${{ matrix.results }}",
                                              "TOOLMATRIX_BATCH": "github-${{ github.run_id }}"}, "run": RUN_SHARD},
            {"name": "Upload the results", "if": "always()", "uses": UPLOAD,
             "with": {"name": "${{ matrix.artifact }}", "path": "${{ matrix.results }}",
                      "if-no-files-found": "warn"}},
        ],
    }


def gate_script(plan: Plan, baseline: str) -> str:
    """One ``toolmatrix gate`` per shard, each against the baseline folder named like the shard's results."""
    lines = [shlex.join(["gate", str(PurePosixPath(baseline) / PurePosixPath(s.results_dir).name), downloaded(s),
                         f"{REPORTS_DIR}/{artifact_name(s)}.xml"]) for s in plan.shards]
    return GATE_FUNCTION + "\n".join(lines) + '\nexit "$worst"\n'


def matrix_job(plan: Plan, runs_on: Sequence[str], baseline: str | None) -> dict[str, Any]:
    steps = [
        *setup_steps(),
        {"name": "Download every shard's results", "uses": DOWNLOAD,
         "with": {"pattern": f"{ARTIFACT_PREFIX}*", "path": SHARDS_DIR, "merge-multiple": False}},
        {"name": "Build the matrix page", "run": f"toolmatrix matrix build {SHARDS_DIR} -o {PAGE_DIR}/"},
        {"name": "Hand the page to GitHub Pages", "id": "page", "uses": UPLOAD_PAGES,
         "with": {"path": f"{PAGE_DIR}/"}},
    ]
    if baseline:
        steps.append({"name": "Gate each shard against the baseline", "run": gate_script(plan, baseline)})
    steps.append({"name": "Upload the page" + (" and the gate's reports" if baseline else ""), "if": "always()",
                  "uses": UPLOAD,
                  "with": {"name": "toolmatrix-matrix", "path": f"{PAGE_DIR}/\n{REPORTS_DIR}/" if baseline
                           else f"{PAGE_DIR}/", "if-no-files-found": "warn"}})
    return {"needs": "shard", "if": "always()", "runs-on": _labels(runs_on),
            "outputs": {"page": "${{ steps.page.outcome }}"}, "steps": steps}


def deploy_job() -> dict[str, Any]:
    # Published whenever the page was built, a failed gate included: that page is the one people need to see.
    return {"needs": "matrix", "if": "always() && needs.matrix.outputs.page == 'success'",
            "runs-on": "ubuntu-latest", "permissions": {"pages": "write", "id-token": "write"},
            "environment": {"name": "github-pages", "url": "${{ steps.deployment.outputs.page_url }}"},
            "steps": [{"id": "deployment", "uses": DEPLOY_PAGES}]}


def _labels(labels: Sequence[str]) -> str | list[str]:
    return labels[0] if len(labels) == 1 else list(labels)


def workflow(plan: Plan, *, command_line: str, runs_on: Sequence[str] = DEFAULT_RUNS_ON,
             gpu_runs_on: Sequence[str] = DEFAULT_GPU_RUNS_ON, baseline: str | None = None) -> str:
    """The workflow's text: ``shard`` (one job per shard), ``matrix`` (merge, page, optional gate), ``deploy``.

    Args:
        plan: the shards; their commands and results directories are used as they are.
        command_line: the command that generated it, named in the header comment.
        runs_on: runner labels of shards that need no GPU (and of the matrix job).
        gpu_runs_on: runner labels of shards with ``gpus > 0``.
        baseline: a results root of an earlier run of the same plan, in the repository; each shard is gated
            against its folder of the same name.
    """
    data = {
        "name": "toolmatrix",
        "on": {"workflow_dispatch": None},
        "permissions": {"contents": "read"},
        "jobs": {"shard": shard_job(plan, runs_on, gpu_runs_on), "matrix": matrix_job(plan, runs_on, baseline),
                 "deploy": deploy_job()},
    }
    return header(command_line) + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=10**6)
