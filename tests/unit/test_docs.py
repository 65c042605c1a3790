"""The docs site builds strictly (every page in the nav, every internal link and anchor found) with the CLI
reference generated from the code; the README's links into it resolve; and every command the README and the docs
show is held: each parsed by its own program's parser (toolmatrix's, or pytest's with the plugin loaded), the cheap
ones run from the docs' own text in a scratch checkout, the rest listed with why they are only parsed."""

import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from _pytest.config import get_config

from toolmatrix.cli import build_parser, main

ROOT = Path(__file__).parents[2]


def require_mkdocs() -> None:
    """mkdocs comes with the `docs` extra: skip without it, unless CI (which installs it) says it must be there."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("mkdocs is not installed: pip install -e '.[docs]'")
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")


def test_the_site_builds_strictly_with_the_generated_cli_reference(tmp_path):
    require_mkdocs()
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                            "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text()
    # Generated, not typed: a subcommand's own options and the plugin's pytest options are on the page.
    assert "toolmatrix gate</code>" in cli and "--min-conformance" in cli and "--junit-xml" in cli
    assert "--engine=ENGINE" in cli and "--case-shard=I/N" in cli
    assert (site / "github-actions-gate.yml").is_file() and (site / "matrix-page.png").is_file()


def test_every_page_is_in_the_nav():
    """mkdocs only warns of a page left out of the nav under --strict; this says which, without mkdocs."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert pages and [p for p in pages if f": {p}\n" not in nav] == []


def test_the_readme_links_resolve():
    """The README's relative links (into docs/, which GitHub renders too) name files that exist."""
    links = re.findall(r"\]\(((?!https?:)[^)#\s]+)", (ROOT / "README.md").read_text())
    assert any(link.startswith("docs/") for link in links)
    assert [link for link in links if not (ROOT / link).exists()] == []


SHELL_BLOCKS = ("bash", "sh")  # blocks of commands; a block with no language holds output (an error, a table)
COMMAND = re.compile(r"^(?:toolmatrix|pytest|python -m|python benchmarks/\S+\.py)(?: |$)")
PLACEHOLDER_WORD = r"\b(?!README|TRIAGE|NOTICE)[A-Z][A-Z_]*\b"  # `DIR`, `ENGINE`: not a file the repository has
SKETCH = re.compile(rf"\[|…|\.\.\.|\||<|{PLACEHOLDER_WORD}")  # `[--engine E]`, `DIR CASE`, `A|B`: a syntax sketch
# Programs of the shell blocks that toolmatrix does not own, and what holds their lines instead.
OTHER_PROGRAMS = {
    "pip": "installs: .ci/run installs as the README says, from a new virtual environment",
    "mkdocs": "test_the_site_builds_strictly_with_the_generated_cli_reference runs `mkdocs build --strict`",
    "vllm": "starts vLLM (a GPU and its weights)",
    "python -m sglang.launch_server": "starts SGLang (a GPU and its weights)",
    "kubectl": "needs a Kubernetes cluster",
    "ray": "needs a Ray cluster",
    "bash results/cpu-qwen2.5-coder/regenerate.sh": "reruns the CPU snapshot (hours); test_results.py runs it with "
                                                    "--dry-run and holds every committed run.json to it",
    "apt-get": "installs Debian's packages (root, network): .ci/run installs chromium so",
    "python docs/screenshot.py": "tests/browser/test_page.py runs it (Debian's chromium; "
                                 "test_the_docs_screenshot_script_opens_a_cell_of_the_page_as_it_draws_it)",
}


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_lines() -> list[tuple[str, str]]:
    """Every command line of a shell block in the README and the docs pages (continuation lines joined, `&&`
    chains split, comments dropped) and every inline code span that is a `toolmatrix`, `pytest`, `python -m` or
    benchmark command, with the page it is in."""
    found = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        fence = re.compile(r"^```([\w-]*)\n(.*?)^```", re.S | re.M)
        for info, block in fence.findall(text):
            if info not in SHELL_BLOCKS:
                continue
            for line in re.sub(r"\s*\\\n\s*", " ", block).splitlines():
                for part in re.split(r"\s+&&\s+", re.split(r"(?:^|\s+)#", line.strip())[0]):
                    if part:
                        found.append((page.name, part))
        spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", fence.sub("", text)) if "\n\n" not in span]
        found += [(page.name, span) for span in spans if COMMAND.match(span)]  # a span may wrap: one line again
    return found


def documented_commands() -> list[tuple[str, str]]:
    """The `toolmatrix …` lines among them."""
    return [(page, line) for page, line in documented_lines() if line.startswith("toolmatrix ")]


@functools.cache
def _cli() -> argparse.ArgumentParser:
    return build_parser()  # built once: parsing leaves no state in it


def _subcommand(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser a toolmatrix command line names (`matrix build` two levels down), and the words after it."""
    parser = _cli()
    while words and parser._subparsers is not None:  # argparse keeps its subcommands nowhere public
        choices = parser._subparsers._group_actions[0].choices
        if words[0] not in choices:
            break
        parser, words = choices[words[0]], words[1:]
    return parser, words


def _pytest_config(args: list[str]) -> pytest.Config:
    """pytest's own configuration for these arguments, with every installed plugin (toolmatrix, xdist,
    pytest-base-url, ...) and this checkout's conftest: a renamed or retyped option is pytest's usage error."""
    config = get_config(args)
    try:
        config.parse(args)
    finally:
        config._ensure_unconfigure()
    return config


def _options(words: list[str]) -> list[str]:
    """The option names among a line's words, a sketch's optional ones (`[--fuzz-seed S]`) too."""
    words = [w.strip("[]") for w in words]
    return [w.split("=")[0] for w in words if w.startswith("-") and not re.fullmatch(r"-\d.*", w)]


def _cli_error(words: list[str]) -> str | None:
    """What the CLI's parser says of these words: None where it takes them."""
    with contextlib.redirect_stderr(io.StringIO()) as said, contextlib.redirect_stdout(io.StringIO()):  # --version
        try:
            _cli().parse_args(words)
        except SystemExit as exc:
            return None if exc.code == 0 else said.getvalue() or "exit 2"  # `--version` exits 0 on its own
    return None


def _concrete(command: str) -> bool:
    """A command line to copy, not a syntax sketch (`[--engine E]`, `DIR CASE`, `…`) nor a command or option named
    in prose (`toolmatrix gate`, `toolmatrix replay --engine sglang@0.5.9`: their required arguments left out)."""
    error = _cli_error(shlex.split(command)[1:])
    return not SKETCH.search(command) and not (error and "the following arguments are required" in error)


def _cli_problem(command: str) -> str | None:
    words = shlex.split(command)[1:]
    if _concrete(command):
        error = _cli_error(words)
        return error and "not a command toolmatrix takes: " + error.strip().splitlines()[-1]
    parser, rest = _subcommand(words)
    if parser.prog == "toolmatrix" and not (rest[0].startswith("-") or rest[0].isupper()):  # `COMMAND` is a sketch
        return "no such command"
    unknown = [o for o in _options(rest) if o not in parser._option_string_actions]
    return f"{parser.prog} has no option {', '.join(unknown)}" if unknown else None


def test_every_documented_toolmatrix_command_is_one_the_cli_takes():
    """A command a reader copies must exist with the options it shows: each is parsed by the CLI's own parser. A
    sketch or a command named in prose cannot be parsed whole: its subcommand must exist and each option it names
    must be one of that subcommand's."""
    commands = documented_commands()
    assert len(commands) >= 60
    problems = [f"{page}: `{command}`: {problem}" for page, command in commands
                if (problem := _cli_problem(command))]
    assert problems == []


def _pytest_problem(line: str) -> str | None:
    words = shlex.split(line)[1:]
    if SKETCH.search(line) or len(words) == 1 and words[0].startswith("--"):  # or an option named in prose
        known = _pytest_config([])._parser.optparser._option_string_actions  # set by parse, pytest 8 and 9
        unknown = [o for o in _options(words) if o not in known]
        return f"pytest has no option {', '.join(unknown)}" if unknown else None
    try:
        config = _pytest_config(list(words))  # pytest inserts its ini addopts into the list it is given
    except pytest.UsageError as exc:
        return str(exc).splitlines()[1]
    own_tests = words == ["-n", "2"] or bool(words) and words[0].startswith("tests/") and (ROOT / words[0]).exists()
    if not (config.getoption("--engine") or config.getoption("--base-url") or own_tests):
        return "neither a target (--engine, --base-url) nor toolmatrix's own tests (`pytest -n 2`, `pytest tests/...`)"
    return None


def test_every_documented_pytest_command_is_one_pytest_takes_with_the_plugin():
    """Each `pytest …` line is parsed by pytest's own option parser with the plugin loaded (its option types too:
    `--api`, `--case-shard`); a sketch's options must each be known. All of them start an engine or reach a
    server, or run toolmatrix's own tests (CI does): none is run here."""
    lines = [(page, line) for page, line in documented_lines() if line.startswith("pytest ")]
    assert len(lines) >= 25
    problems = [f"{page}: `{line}`: {problem}" for page, line in lines if (problem := _pytest_problem(line))]
    assert problems == []


# Options the docs show of programs toolmatrix does not own.
FOREIGN_OPTIONS = {
    "ray start": {"--address", "--head", "--num-cpus", "--num-gpus"},
    "engines' own servers": {"--chat-template-file", "--jinja", "--enable-auto-tool-choice", "--tool-call-parser",
                             "--model-path", "--port", "--dyn-tool-call-parser", "--dyn-reasoning-parser",
                             "--reasoning-parser", "--stream-interval"},
    "pip": {"--no-cache-dir", "--no-deps", "--target"},
}


def _every_option(parser: argparse.ArgumentParser) -> set[str]:
    below = parser._subparsers._group_actions[0].choices.values() if parser._subparsers else []
    return set(parser._option_string_actions).union(*map(_every_option, below))


def test_every_option_the_docs_name_is_one_a_program_takes():
    """An option named anywhere in the README or the docs, prose too (`--case-shards N`), is one of toolmatrix's
    commands, of pytest with the plugin, of a benchmark script or a snapshot's regenerate script, or of a program
    listed in FOREIGN_OPTIONS: a renamed option leaves no sentence behind."""
    known = _every_option(_cli()) | set(_pytest_config([])._parser.optparser._option_string_actions)
    known = known.union(*FOREIGN_OPTIONS.values())
    scripts = "".join(path.read_text(encoding="utf-8")
                      for path in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "results").glob("*/*.sh")])
    named = {(page.name, option) for page in _pages()
             for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", page.read_text(encoding="utf-8"))}
    assert sorted((page, option) for page, option in named
                  if option not in known and f'"{option}"' not in scripts) == []


REPO_PATH = re.compile(r"`((?:src|tests|benchmarks|cases|engines|docs|results|\.ci)/[^`\s:]*)")
PLACEHOLDER = re.compile(rf"{PLACEHOLDER_WORD}|\*|…|<|\{{")  # `engines/ENGINE.yaml`, `cells/*.jsonl`


def test_every_repository_path_and_module_the_docs_name_is_there():
    """A file moved or renamed leaves no page naming its old place: each path of the repository a page names in
    code (a pattern such as `engines/ENGINE.yaml` aside; under `results/`, a path into a committed snapshot, not
    an example's output such as `results/local/`) is there, and each `toolmatrix.…` module imports."""
    named = [(page.name, path) for page in _pages() for path in REPO_PATH.findall(page.read_text(encoding="utf-8"))
             if not PLACEHOLDER.search(path)]
    snapshots = {str(p.relative_to(ROOT)) for p in (ROOT / "results").iterdir()}
    checked = [(page, path) for page, path in named
               if not path.startswith("results/") or "/".join(path.split("/")[:2]).rstrip("/") in snapshots]
    assert len(checked) >= 40
    assert [(page, path) for page, path in checked if not (ROOT / path).exists()] == []
    modules = {(page.name, module) for page in _pages()
               for module in re.findall(r"`(toolmatrix(?:\.[a-z_]+)+)`", page.read_text(encoding="utf-8"))}
    assert len(modules) >= 5
    assert sorted((page, module) for page, module in modules if importlib.util.find_spec(module) is None) == []


def test_every_environment_variable_the_docs_name_is_read():
    """A `TOOLMATRIX_…` variable a page tells the reader to set is one the code (or its tests, for
    TOOLMATRIX_REQUIRE_ENGINES) reads: a renamed variable leaves no instruction that silently does nothing."""
    named = {v for page in _pages() for v in re.findall(r"\bTOOLMATRIX_[A-Z_]+\b", page.read_text(encoding="utf-8"))}
    code = "".join(path.read_text(encoding="utf-8") for folder in ("src", "tests") for path in (ROOT / folder).rglob("*")
                   if path.suffix in (".py", ".sh") and path.resolve() != Path(__file__).resolve())
    assert len(named) >= 5
    assert sorted(v for v in named if re.search(rf"\b{v}\b", code) is None) == []


def test_the_running_page_names_every_option_of_the_plugin():
    """Running the suite promises every pytest option of the plugin in its table: one added to the plugin and not
    to the page fails here (the CLI reference has them anyway, generated)."""
    options = [name for option in _pytest_config([])._parser.getgroup("toolmatrix").options
               for name in option.names() if name.startswith("--")]
    table = (ROOT / "docs" / "running.md").read_text(encoding="utf-8").split("## Options", 1)[1].split("\n## ", 1)[0]
    assert len(options) >= 20
    assert [name for name in options if not re.search(rf"`{name}[=`]", table)] == []


def test_the_librarys_size_where_the_docs_state_it_is_the_librarys():
    """The README and the glossary state the case library's size as of today, the engines page the registry's:
    a case or model added updates them."""
    from toolmatrix.library.cases import library_dir, load_cases
    from toolmatrix.serving.registry import load_models

    cases = load_cases([library_dir()])
    categories = len({case.category for case in cases})
    readme = re.search(r"\*\*case library\*\* \((\d+) cases in (\d+) categories\)", (ROOT / "README.md").read_text())
    glossary = re.search(r"a library of (\d+) cases is (\d+) records", (ROOT / "docs" / "glossary.md").read_text())
    assert (int(readme[1]), int(readme[2])) == (len(cases), categories)
    assert (int(glossary[1]), int(glossary[2])) == (len(cases), 2 * len(cases))
    registry = re.search(r"the registry holds (\d+) models", (ROOT / "docs" / "engines.md").read_text())
    assert int(registry[1]) == len(load_models())


def test_every_documented_module_and_program_is_known():
    """`python -m toolmatrix.…` names a module that is there, `python benchmarks/…` a script there with the
    options shown; any other program of a shell block is one of those
    toolmatrix does not own (`OTHER_PROGRAMS`, each with what holds it), so a new kind of line is looked at."""
    modules = [(page, line) for page, line in documented_lines() if line.startswith("python -m toolmatrix")]
    assert len(modules) >= 3
    assert [(page, line) for page, line in modules if importlib.util.find_spec(line.split()[2]) is None] == []
    # The benchmarks (minutes each, and they measure: never run here) read their own argv: each option a line
    # shows must be one the script names.
    scripts = [(page, line) for page, line in documented_lines() if line.startswith("python benchmarks/")]
    assert len(scripts) >= 5
    assert [(page, line) for page, line in scripts if not (ROOT / line.split()[1]).is_file() or any(
        f'"{option}"' not in (ROOT / line.split()[1]).read_text() for option in _options(shlex.split(line)[2:]))] == []
    others = [(page, line) for page, line in documented_lines() if not COMMAND.match(line)]
    assert [(page, line) for page, line in others
            if not any(line == p or line.startswith(p + " ") for p in OTHER_PROGRAMS)] == []


# The toolmatrix commands of the docs that are only parsed, by how the line starts, with why.
ONLY_PARSED = {
    "toolmatrix demo": "tests/integration/test_demo.py runs the README's line (the suite under pytest, ~10 s); "
                       "`--open` would open a browser",
    "toolmatrix install": "builds or downloads an engine (minutes, network)",
    "toolmatrix replay-install": "installs the engines' parser environments (network)",
    "toolmatrix replay --": "replays through the installed parser environments (replay-install)",
    "toolmatrix replay-sweep": "installs and replays released engine versions (network)",
    "toolmatrix replay-agreement": "reads the replay run of the line before it",
    "toolmatrix replay-triage results/replay": "would rewrite the committed results/replay/TRIAGE.md",
    "toolmatrix replay-bugs": "replays through the engine versions `replay-install --bugs` lays down",
    "toolmatrix releases": "reads PyPI (network); tests/unit/test_releases.py runs it against a stand-in index",
    "toolmatrix verify-workflow": "writes into an engine's repository; tests/unit/test_executors.py runs it for "
                                  "every Python engine and lints what it writes",
    "toolmatrix replay-repro --triage": "renders through the installed parser environments; "
                                        "tests/integration/test_replay_repro_run.py holds results/replay/repro/ to it",
    "toolmatrix matrix build shards": "reads the shards a fan-out collected",
    "toolmatrix gate --baseline sweep/": "reads the replay-sweep of the line before it",
    "toolmatrix replay-versions sweep": "reads the replay-sweep of the lines before it, and would rewrite the "
                                        "committed results/versions/versions.json",
    "toolmatrix bfcl-categories": "needs bfcl-eval, an optional package (`pip install --no-deps bfcl-eval==…`)",
}


def _gate_failed(out: str, ws: Path) -> None:
    """The documented gate between two committed runs (0.5B on llama.cpp, then on vLLM): the documented allow
    file is read, regressions are listed and the JUnit report names them."""
    assert "gate: FAILED" in out and re.search(r"allowlisted: [1-9]\d* case x mode", out), out[-2000:]
    report = ET.parse(ws / "reports" / "gate.xml").getroot()
    assert int(report.get("failures") or next(report.iter("testsuite")).get("failures")) > 0


def _plan_file(path: str, want: Callable[[list], bool]) -> Callable[[str, Path], None]:
    return lambda out, ws: want(list(yaml.safe_load_all((ws / path).read_text(encoding="utf-8"))))


def _jsonl(path: str) -> Callable[[str, Path], None]:
    def check(out: str, ws: Path) -> None:
        lines = (ws / path).read_text(encoding="utf-8").splitlines()
        assert lines and all(json.loads(line)["id"] for line in lines) and out.startswith(f"{len(lines)} fixtures")
    return check


def _true(check: bool) -> bool:
    assert check
    return check


# Documented commands run from the docs' own text in the scratch checkout: the exit status, and a check of what
# it did (output, files written).
RUN: dict[str, tuple[int, Callable[[str, Path], object]]] = {
    "toolmatrix --version": (0, lambda out, ws: _true(re.fullmatch(r"toolmatrix \S+\n", out) is not None)),
    "toolmatrix cases": (0, lambda out, ws: _true(re.match(r"\d{3} cases in \d+ categories", out) is not None)),
    "toolmatrix engines": (0, lambda out, ws: _true("vllm/vllm-openai:" in out and "llama-server" in out)),
    "toolmatrix plan --engine vllm --model qwen3 --launcher docker":
        (0, lambda out, ws: _true("pair:       qwen3@vllm" in out and "--tool-call-parser" in out)),
    "toolmatrix plan --emit json --engine llamacpp,vllm --model qwen2.5-coder-0.5b,qwen3 --launcher docker":
        (0, lambda out, ws: _true(json.loads(out)["format"] == "toolmatrix-plan"
                                  and "qwen3@vllm+docker" in {s["id"] for s in json.loads(out)["shards"]})),
    "toolmatrix plan --emit github-actions --engine llamacpp,vllm --model qwen2.5-coder-0.5b,qwen3 --launcher docker "
    "--case-shards 2 --gpu-runs-on self-hosted,gpu -o .github/workflows/toolmatrix.yml":
        (0, _plan_file(".github/workflows/toolmatrix.yml", lambda docs: _true(len(docs[0]["jobs"]) >= 2))),
    "toolmatrix plan --emit kubernetes --engine llamacpp,vllm --model qwen2.5-coder-0.5b,qwen3 --launcher docker "
    "--toolmatrix-image registry.example.com/toolmatrix:0.1.0 --namespace evals -o jobs.yaml":
        (0, _plan_file("jobs.yaml", lambda docs: _true("Job" in {d["kind"] for d in docs if d}))),
    "toolmatrix show results/cpu-qwen2.5-coder choose.cancel_order --pair qwen2.5-coder-0.5b@llamacpp --mode nonstream":
        (0, lambda out, ws: _true(out.startswith("choose.cancel_order [nonstream] on qwen2.5-coder-0.5b@llamacpp")
                                  and "curl " in out)),
    "toolmatrix matrix build results/ -o matrix/":
        (0, lambda out, ws: _true("qwen2.5-coder-0.5b@mlxlm" in (ws / "matrix" / "matrix.md").read_text())),
    "toolmatrix gate --baseline results/baseline --results results/staging --min-pass-rate '*=0.9' "
    "--min-conformance '*=0.95' --allow allow.yaml --junit-xml reports/gate.xml": (1, _gate_failed),
    "toolmatrix gate --baseline results/baseline --results results/staging --min-pass-rate '*=0.9' "
    "--min-pass-rate parallel=0.8 --min-conformance '*=0.95' --allow allow.yaml --junit-xml reports/gate.xml":
        (1, _gate_failed),
    "toolmatrix replay-generate -o fixtures.jsonl": (0, _jsonl("fixtures.jsonl")),
    "toolmatrix replay-generate -o full.jsonl": (0, _jsonl("full.jsonl")),
    "toolmatrix replay-generate --every 8 -o results/replay/fixtures.jsonl": (0, _jsonl("results/replay/fixtures.jsonl")),
    "toolmatrix replay-harvest results/cpu-qwen2.5-coder results/cpu-gemma3-270m -o harvested.jsonl":
        (0, _jsonl("harvested.jsonl")),
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A reader's checkout, for commands run from the docs: the committed runs they read (linked, read only),
    two of them as the gate's baseline and staging, the folders a reader's repository has, a small run copied as the only run `matrix build results/`
    finds, the sweep's summary, and the gate's allow file as the gate page shows it. What the commands write stays here."""
    ws = tmp_path_factory.mktemp("checkout")
    committed = ROOT / "results"
    (ws / "results" / "replay").mkdir(parents=True)
    (ws / ".github" / "workflows").mkdir(parents=True)
    for name in ("cpu-qwen2.5-coder", "cpu-gemma3-270m"):
        (ws / "results" / name).symlink_to(committed / name, target_is_directory=True)
    (ws / "results" / "baseline").symlink_to(committed / "cpu-qwen2.5-coder" / "qwen2.5-coder-0.5b@llamacpp")
    (ws / "results" / "staging").symlink_to(committed / "cpu-qwen2.5-coder" / "qwen2.5-coder-0.5b@vllm")
    shutil.copytree(committed / "mlxlm-measured", ws / "results" / "mlxlm-measured")
    (ws / "results" / "versions").mkdir()  # the sweep's summary, read only: its page is built here
    (ws / "results" / "versions" / "versions.json").symlink_to(committed / "versions" / "versions.json")
    allow = re.search(r"^```yaml\n(allow:\n.*?)^```", (ROOT / "docs" / "gate.md").read_text(), re.S | re.M)
    (ws / "allow.yaml").write_text(allow[1], encoding="utf-8")
    return ws


def test_every_documented_toolmatrix_command_is_run_or_says_why_not():
    """A concrete command of the docs is run below (RUN, or COMMITTED_PAGES where it writes committed files) or
    listed in ONLY_PARSED with why; RUN, COMMITTED_PAGES and ONLY_PARSED hold no line the docs lost (a changed docs
    line must be changed here too, so the two cannot drift apart)."""
    concrete = {line for _, line in documented_commands() if _concrete(line)}
    unheld = [line for line in concrete if line not in RUN and line not in COMMITTED_PAGES
              and not any(map(line.startswith, ONLY_PARSED))]
    assert unheld == []
    assert sorted(set(RUN) - concrete) == []
    assert sorted(set(COMMITTED_PAGES) - concrete - {snapshot_build_line()}) == []
    assert [prefix for prefix in ONLY_PARSED if not any(line.startswith(prefix) for line in concrete)] == []


@pytest.mark.parametrize("command", sorted(RUN), ids=lambda command: " ".join(command.split()[1:4]))
def test_a_documented_command_does_what_the_docs_say(command, checkout, monkeypatch, capsys):
    """Run in process (no interpreter start per command) from the scratch checkout: its exit status and what it
    printed or wrote."""
    status, check = RUN[command]
    monkeypatch.chdir(checkout)
    try:
        code = main(shlex.split(command)[1:])
    except SystemExit as exc:  # argparse's --version
        code = exc.code
    out, err = capsys.readouterr()
    assert code == status, f"`{command}` exited {code}:\n{out[-1500:]}\n{err[-1500:]}"
    check(out, checkout)


# Documented commands that write committed files from committed inputs, with the inputs they read: each is run in
# a scratch checkout holding a copy of those inputs, and what it writes must be what is committed, the build's
# time aside. A change to the page's rendering (or to the records' reading) fails here until the committed page is
# made again by its command, run from the checkout's root, so no committed table says what the code no longer does.
COMMITTED_PAGES = {
    "toolmatrix matrix build results/cpu-samples -o results/cpu-samples/matrix": "results/cpu-samples",
    # regenerate.sh's last line (the snapshot's own script, docs/published-results.md): the page of its runs
    "toolmatrix matrix build results/cpu-qwen2.5-coder -o results/cpu-qwen2.5-coder/matrix": "results/cpu-qwen2.5-coder",
    "toolmatrix matrix build results/replay -o results/replay/matrix --triage results/replay/TRIAGE.md":
        "results/replay",
    "toolmatrix matrix build --versions results/versions/versions.json -o results/versions/matrix "
    "--title \"toolmatrix: engines' parsers across releases (replay)\"": "results/versions",
}
BUILT_AT = re.compile(r"((?:Generated |\"generated\":\s*\")\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d)")


@functools.cache
def snapshot_build_line() -> str:
    """The page build regenerate.sh issues last, as its --dry-run prints it."""
    printed = subprocess.run(["bash", str(ROOT / "results" / "cpu-qwen2.5-coder" / "regenerate.sh"), "--dry-run"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    return printed[-1]


def _copy_inputs(source: Path, target: Path, output: Path) -> None:
    """``source`` into ``target`` less the command's ``output`` folder; hard links where the two file systems allow."""
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_or_copy,
                    ignore=lambda folder, names: [n for n in names if Path(folder, n).resolve() == output.resolve()])


def _files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def test_every_committed_page_command_is_documented_or_the_snapshot_scripts():
    """Each command of COMMITTED_PAGES is a concrete line of the docs or regenerate.sh's page build."""
    concrete = {line for _, line in documented_commands() if _concrete(line)}
    assert snapshot_build_line() in COMMITTED_PAGES
    assert sorted(set(COMMITTED_PAGES) - concrete - {snapshot_build_line()}) == []


@pytest.mark.parametrize("command", sorted(COMMITTED_PAGES), ids=lambda command: COMMITTED_PAGES[command])
def test_a_committed_page_is_what_its_command_writes_today(command, tmp_path, monkeypatch, capsys):
    """matrix.md, matrix.json, index.html and cells/ as committed (those of them the repository keeps) are byte for
    byte what the command writes now, but for the time of the build each states."""
    words = shlex.split(command)
    output = Path(words[words.index("-o") + 1])
    inputs = COMMITTED_PAGES[command]
    _copy_inputs(ROOT / inputs, tmp_path / inputs, ROOT / output)
    monkeypatch.chdir(tmp_path)
    assert main(words[1:]) == 0, capsys.readouterr().err[-2000:]
    committed, built = ROOT / output, tmp_path / output
    kept = _files(committed)
    assert {"matrix.md", "matrix.json"} <= kept and kept <= _files(built), sorted(kept ^ _files(built))
    if any(name.startswith("cells/") for name in kept):  # cells/ is the page's: no stale or missing file
        assert {n for n in kept if n.startswith("cells/")} == {n for n in _files(built) if n.startswith("cells/")}
    stale = [name for name in sorted(kept) if BUILT_AT.sub("TIME", (committed / name).read_text(encoding="utf-8"))
             != BUILT_AT.sub("TIME", (built / name).read_text(encoding="utf-8"))]
    assert stale == [], f"committed {output}/{{{','.join(stale)}}} differ from what `{command}` writes now: run it " \
                        f"from the checkout's root and commit what it writes"


# The selections Running the suite shows (`-k EXPR`), each with the test ids it must select: CASE-MODE.
def _selections() -> dict[str, Callable[[list], set[str]]]:
    return {
        "tool_choice and stream and not nonstream":
            lambda cases: {f"{c.id}-stream" for c in cases if c.category == "tool_choice"},
        "single.get_weather_paris": lambda cases: {"single.get_weather_paris-nonstream", "single.get_weather_paris-stream"},
    }


def test_a_documented_selection_selects_what_the_page_says(tmp_path):
    """`-k "tool_choice and stream"` also selected the non-streamed half (`stream` is in `nonstream`): each `-k` of
    the running page's Selecting cases is collected against the library and holds the ids the page says."""
    from toolmatrix.library.cases import library_dir, load_cases

    section = (ROOT / "docs" / "running.md").read_text(encoding="utf-8").split("## Selecting cases", 1)[1]
    shown = re.findall(r'`-k "?([^`"]+)"?`', section.split("\n## ", 1)[0])
    assert sorted(shown) == sorted(_selections())
    cases = load_cases([library_dir()])
    for expression, selects in _selections().items():
        collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                    "--engine=llamacpp", "--model=qwen2.5-coder-0.5b", "-k", expression],
                                   cwd=tmp_path, capture_output=True, text=True, timeout=120)
        ids = set(re.findall(r"test_case\[(.+)\]$", collected.stdout, re.M))
        assert ids == selects(cases), (expression, collected.stdout[-1500:], collected.stderr[-1500:])


ENGINE_SERVERS = {"vllm serve": "vllm", "python -m sglang.launch_server": "sglang"}  # a line's start: its engine


def test_a_documented_engine_server_is_started_with_the_flags_toolmatrix_plan_prints(capsys):
    """A vLLM or SGLang server line of the docs carries the tool and reasoning flags that `toolmatrix plan` prints
    for its model (looked up in the registry by the weights' repository) on that engine, the flags the suite's own
    launch would give it."""
    from toolmatrix.serving.registry import load_models

    by_repo = {m.weights.get("hf", {}).get("repo"): m.id for m in load_models().values()}
    lines = [(page, line, engine) for page, line in documented_lines() for start, engine in ENGINE_SERVERS.items()
             if line.startswith(start + " ")]
    assert {engine for *_, engine in lines} == set(ENGINE_SERVERS.values())
    for page, line, engine in lines:
        words = shlex.split(line)
        repo = words[words.index("--model-path") + 1] if "--model-path" in words else words[2]
        assert main(["plan", "--engine", engine, "--model", by_repo[repo], "--launcher", "docker"]) == 0
        tool_args = re.search(r"^tool args:\s+(.*)$", capsys.readouterr().out, re.M)[1]
        assert f" {tool_args} " in f" {line} ", f"{page}: `{line}` lacks `{tool_args}`"
