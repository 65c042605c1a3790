"""The ``toolmatrix`` command's front door: its version, where the suite is, and a misspelled engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.cli import build_parser, main
from toolmatrix.serving.runinfo import toolmatrix_version


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"toolmatrix {toolmatrix_version()}"


def test_python_dash_m_toolmatrix_is_the_command():
    src = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "toolmatrix", "--version"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"toolmatrix {toolmatrix_version()}"), proc.stderr


def test_help_says_the_suite_runs_under_pytest_and_every_positional_is_explained():
    parser = build_parser()
    assert "runs under pytest (pytest -n 2 --engine=llamacpp" in parser.description
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("validate", "check-results", "install"):
        positionals = [a for a in subcommands[name]._actions if not a.option_strings]
        assert positionals and all(a.help for a in positionals), name


def test_a_misspelled_engine_gets_a_suggestion_and_the_list(capsys):
    assert main(["install", "llamcpp"]) == 2
    err = capsys.readouterr().err
    assert "no process launcher for engine 'llamcpp' (did you mean llamacpp?)" in err
    assert "engines with one: llama-cpp-python, llamacpp, mlxlm, transformers, vllm" in err


def test_replay_install_help_names_every_replay_engine(capsys):
    from toolmatrix.replay.adapters import replay_engines

    with pytest.raises(SystemExit):
        main(["replay-install", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(engine in out for engine in replay_engines()) and "tokenizers" in out


def test_check_results_of_a_directory_that_is_not_there_is_a_usage_error(tmp_path, capsys):
    assert main(["check-results", str(tmp_path / "nope")]) == 2
    assert f"not a directory: {tmp_path / 'nope'}" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["check-results", str(tmp_path / "empty")]) == 1, "a directory without results is wrong results"
    assert f"{tmp_path / 'empty'}: no results directory in it" in capsys.readouterr().err


def test_check_results_reads_a_folder_of_runs_and_names_the_broken_one(tmp_path, capsys):
    """A snapshot (a folder of runs, surfaces below their pair) is checked run by run, as show, gate and matrix
    build read it."""
    from tests.helpers_results import suite, write_results

    write_results(tmp_path / "m1@e1", suite({"single.a": "pass"}))
    write_results(tmp_path / "m1@e1-surfaces" / "responses", suite({"single.a": "fail"}, api="responses"),
                  run_id="run-2", api="responses")
    assert main(["check-results", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "2 result dir(s): OK\n"
    broken = tmp_path / "m1@e1-surfaces" / "responses" / "results.jsonl"
    whole = broken.read_text()
    broken.write_text(whole + "{not json\n")
    assert main(["check-results", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "2 result dir(s): 1 problem(s)\n" and err.startswith(f"{broken}:3: ")
    # A run that died (records.partial, no run.json) among them is named, not passed over.
    broken.write_text(whole)
    (tmp_path / "m1@e2").mkdir()
    (tmp_path / "m1@e2" / "results.jsonl.partial").write_text(whole)
    assert main(["check-results", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "3 result dir(s): 1 problem(s)\n"
    assert err == f"{tmp_path / 'm1@e2'}: incomplete run (results.jsonl.partial only: the run did not finish)\n"


def test_commands_that_write_a_file_make_its_folder(tmp_path, capsys):
    """``replay-generate -o new/dir/F`` and ``plan -o .github/workflows/F`` in a new repository: the folder is
    made, not a FileNotFoundError traceback or "cannot write"."""
    fixtures = tmp_path / "new" / "dir" / "fixtures.jsonl"
    assert main(["replay-generate", "-o", str(fixtures), "--every", "50"]) == 0
    assert fixtures.read_text().count("\n") > 100
    workflow = tmp_path / ".github" / "workflows" / "toolmatrix.yml"
    assert main(["plan", "--engine", "llamacpp", "--model", "qwen2.5-coder-0.5b", "--emit", "github-actions", "-o",
                 str(workflow)]) == 0
    assert "jobs:" in workflow.read_text()


def test_output_cut_short_by_the_reader_is_no_traceback():
    """``toolmatrix show … | head -1``: the reader leaves after one line; the command stops quietly, with the status
    a command killed by SIGPIPE gives (141). The pipe is made one page small, so the record (~37 KB) cannot fit."""
    import fcntl
    import os
    import subprocess
    import sys
    from pathlib import Path

    committed = Path(__file__).parents[2] / "results" / "cpu-qwen2.5-coder"
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    command = [sys.executable, "-m", "toolmatrix", "show", str(committed), "many_tools.one_fits_reminder",
               "--pair", "qwen2.5-coder-0.5b@llamacpp", "--mode", "nonstream", "--full"]
    proc = subprocess.Popen(command, stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    with os.fdopen(read) as reader:
        first = reader.readline()
    assert first.startswith("many_tools.one_fits_reminder")
    assert proc.wait(timeout=60) == 141 and proc.stderr.read() == ""
