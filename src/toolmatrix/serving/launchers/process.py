"""Start an engine as a local process (llama-server on CPU is the embedded default).

The child is tied to us twice over: it gets SIGKILL from the kernel if the pytest process dies without
cleaning up (PR_SET_PDEATHSIG), and it runs in its own session so that a Ctrl-C in the terminal reaches pytest
first, which then stops the engine in order.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from toolmatrix.base.exitcodes import describe_exit
from toolmatrix.base.settings import binary_override, binary_override_var
from toolmatrix.serving.launchers import cores
from toolmatrix.serving.launchers.base import Endpoint, LaunchError, context_size, log_file, process_of
from toolmatrix.serving.launchers.readiness import Watched, become_ready, probe_version
from toolmatrix.serving.placeholders import names_in, render, render_args
from toolmatrix.serving.registry import CheckSpec, EngineSpec, ModelSpec, WeightsSource, cache_dir
from toolmatrix.serving.weights import WeightsError, chat_template_info, gguf_path, local_weights, sha256_of

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child before exec: the kernel sends it ``sig`` when its parent dies, however the parent died."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except OSError:
        pass  # not Linux: the session/atexit cleanup still applies


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_dir(engine: EngineSpec) -> Path:
    """Where an engine that is a Python package gets its own virtual environment (its pins never meet ours)."""
    return cache_dir() / "venvs" / engine.id


def venv_bin(engine: EngineSpec, name: str) -> Path:
    return venv_dir(engine) / "bin" / name


def find_binary(engine: EngineSpec) -> Path | None:
    spec = process_of(engine)
    name = spec.binary
    override = binary_override(engine.id)
    if override is not None:
        return override
    if spec.venv:  # complete only once every install step has run
        return venv_bin(engine, name) if (venv_dir(engine) / INSTALLED).is_file() else None
    cached = cache_dir() / "bin" / name
    # One toolmatrix builds is complete with the record of what it was built from and its machine check (an older
    # build, made for the CPU that built it, lacks them: it is rebuilt).
    built = not spec.install or build_record(cached).is_file()
    checked = not spec.check or cached.with_name(spec.check.program).is_file()
    if cached.is_file() and built and checked:
        return cached
    found = shutil.which(name)
    return Path(found) if found else None


INSTALLED = "toolmatrix-installed"


def build_record(binary: Path) -> Path:
    """Beside a binary toolmatrix built: what it was built from (written by its install script)."""
    return binary.with_name(binary.name + ".build.json")


def install_venv(engine: EngineSpec) -> Path:
    """Create the engine's virtual environment from the pip steps of its spec (process.venv)."""
    spec, venv = process_of(engine).venv, venv_dir(engine)
    if spec is None:  # install_binary asks for a venv only where the spec has one
        raise LaunchError(f"engine {engine.id!r} installs no virtual environment (its process spec has no `venv:`)")
    print(f"toolmatrix: installing {engine.title} into {venv} (once)", file=sys.stderr, flush=True)
    pip = [str(venv_bin(engine, "python")), "-m", "pip", "--disable-pip-version-check"]
    commands = [[sys.executable, "-m", "venv", "--clear", str(venv)]]
    commands += [[*pip, "install", *step] for step in spec.steps]
    if spec.remove:
        commands.append([*pip, "uninstall", "-y", *spec.remove])
    env = {**os.environ, **spec.env}
    for command in commands:
        result = subprocess.run(command, stdout=sys.stderr, env=env)
        if result.returncode != 0:
            raise LaunchError(f"installing {engine.id} failed (exit {result.returncode}): {shlex.join(command)}")
    freeze = subprocess.run([*pip, "freeze"], capture_output=True, text=True, check=True).stdout
    (venv / INSTALLED).write_text(freeze)  # also what run.json reports as the engine's exact versions
    return venv_bin(engine, process_of(engine).binary)


def install_binary(engine: EngineSpec) -> Path:
    """Build or install the engine into the cache: its venv steps, or its install script (llama-server)."""
    spec = process_of(engine)
    if spec.venv:
        return install_venv(engine)
    script = spec.install
    if not script:
        raise LaunchError(f"{spec.binary} not found (set {binary_override_var(engine.id)} or put it on PATH)")
    path = resources.files("toolmatrix.data").joinpath(script)
    print(f"toolmatrix: {spec.binary}: {script} (a build takes minutes, once; a current one is kept)",
          file=sys.stderr, flush=True)
    with resources.as_file(path) as script_path:
        result = subprocess.run(["bash", str(script_path), str(cache_dir() / "bin")], stdout=sys.stderr)
    found = find_binary(engine)
    if result.returncode != 0 or found is None:
        raise LaunchError(f"{script} failed (exit {result.returncode}); see the output above")
    return found


CHECK_TIMEOUT_S = 120


def machine_check(binary: Path, check: CheckSpec, engine_id: str) -> dict[str, Any] | None:
    """Run the engine spec's check program beside ``binary`` (``process.check``) on this machine; what it printed
    (one JSON object per line, merged) is the run's ``cpu`` provenance. A check that fails, or dies by a signal,
    refuses the start with why. None where no check is beside the binary (one found on PATH or named by the
    user)."""
    program = binary.with_name(check.program)
    if not program.is_file():
        return None
    try:
        result = subprocess.run([str(program)], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{engine_id}: {check.program} did not finish in {CHECK_TIMEOUT_S} s") from None
    found: dict[str, Any] = {}
    for line in result.stdout.splitlines():
        try:
            found.update(json.loads(line))
        except ValueError:
            continue  # not one of its lines
    if found.get("module"):
        found["module"] = Path(found["module"]).name  # run.json names no path of this machine
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-10:])
        raise LaunchError(f"{engine_id}: {binary.name} cannot run on this machine: {check.program} with "
                          f"{found.get('module') or 'its CPU module'}: "
                          f"{found.get('error') or describe_exit(result.returncode)}: {check.refused}"
                          f"\n--- its stderr ---\n{tail}")
    return found


class ProcessLauncher:
    kind = "process"

    def __init__(self, engine: EngineSpec, model: ModelSpec, slots: int = 2, run_id: str = "", log_dir: Path | None = None):
        refusal = engine.refusal(model, self.kind)  # before anything is installed or started
        if refusal:
            raise LaunchError(refusal)
        self.engine, self.model, self.slots = engine, model, slots
        self.log_path = log_file(f"toolmatrix-{run_id or engine.id}-", engine.id, log_dir)
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.weights: Path | None = None
        self.values: dict[str, str] = {}
        self.root_url = ""
        self.lease: cores.Lease | None = None  # the cores the running engine spins on
        self.cpu: dict[str, Any] | None = None  # what the spec's machine check found (process.check)

    def command(self, port: int, fetch: bool = True) -> list[str]:
        """The engine's arguments. fetch=False (plan) names the weights without assembling or converting them."""
        source = self.model.weights_source(self.engine.weights_kind)
        python = venv_bin(self.engine, "python") if process_of(self.engine).venv else None
        try:
            self.weights = local_weights(self.model, source, fetch, python) if source else None
        except WeightsError as exc:
            raise LaunchError(str(exc)) from None
        self.values = {
            "host": "127.0.0.1", "port": str(port), "weights": str(self.weights or ""),
            "chat_template": str(self.model.chat_template or ""), "served_name": self.model.served_name,
            "slots": str(self.slots), "ctx_size": str(context_size(self.slots)),
            **self._cpu_values(),
        }
        # An argument that renders empty goes with its flag (no chat template: no --chat-template-file).
        return render_args([*process_of(self.engine).args, *self.engine.tool_args(self.model)], self.values)

    def _cpu_values(self) -> dict[str, str]:
        """``{threads}`` and ``{cpus}``: the leased cores of a started engine; all usable ones for a plan."""
        if self.lease is not None:
            return {"threads": str(self.lease.threads), "cpus": self.lease.cpu_list}
        usable = cores.usable_cpus()
        return {"threads": str(len(usable)), "cpus": cores.cpu_list(usable)}

    def spec_env(self) -> dict[str, str]:
        """The engine spec's own environment (templates filled in by ``command``), without the caller's."""
        return {name: render(value, self.values) for name, value in process_of(self.engine).env.items()}

    def served_model(self) -> str:
        """The model name requests must carry (``command`` fills in the values)."""
        return render(self.engine.served_model, self.values)

    def start(self) -> Endpoint:
        binary = find_binary(self.engine) or install_binary(self.engine)
        check = process_of(self.engine).check
        if check:  # proven on this machine before trusted (a build may come from another)
            self.cpu = machine_check(binary, check, self.engine.id)
        port = free_port()
        self.lease = cores.lease()
        try:
            self.argv = [str(binary), *self.command(port)]
        except BaseException:
            self._release_cores()
            raise
        self.root_url = f"http://127.0.0.1:{port}"
        env = {**os.environ, **self.spec_env()}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, preexec_fn=die_with_parent, start_new_session=True)
        try:
            become_ready(self.engine, self.root_url, self.values,
                         Watched(f"{self.engine.id} ({binary.name})", self.engine.id, self.alive, self.exit_code,
                                 self.log_tail))
        except BaseException:
            self.stop()  # never leave a half-started engine behind
            raise
        return Endpoint(self.root_url + self.engine.api_prefix, self.served_model())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._release_cores()

    def _release_cores(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.engine.id,
            "version": (probe_version(self.root_url, self.engine.version_probe) if self.alive() else None)
                       or self.package_version(),
            "launcher": self.kind,
            "flags": self.argv[1:],
            "base_url": self.root_url + self.engine.api_prefix,
            "image": None,
            "image_digest": None,
            "binary": Path(self.argv[0]).name if self.argv else None,
            "build": self.build_info(),
            "cpu": self.cpu,
            "packages": self.packages(),
            "log": str(self.log_path),
        }

    def build_info(self) -> dict[str, Any] | None:
        """What a binary toolmatrix built was built from (``<binary>.build.json`` beside it, written by the build
        script: version, commit, source package and its SHA-256); None for a binary found elsewhere."""
        if not self.argv:
            return None
        try:
            return json.loads(build_record(Path(self.argv[0])).read_text())
        except (OSError, ValueError):
            return None

    def package_version(self) -> str | None:
        """The installed version of the package that is the engine (for servers that do not tell theirs)."""
        venv = process_of(self.engine).venv
        wanted = venv.package.lower().replace("_", "-") if venv else None
        for line in self.packages() or ():
            name, _, version = line.partition("==")
            if name.lower().replace("_", "-") == wanted:
                return version
        return None

    def packages(self) -> list[str] | None:
        """Exact versions of a Python engine's environment (pip freeze at install time)."""
        if process_of(self.engine).venv is None:
            return None
        installed = venv_dir(self.engine) / INSTALLED
        return installed.read_text().split() if installed.is_file() else None

    def weights_info(self) -> dict[str, Any]:
        """Which weights and chat template the engine loaded, with their SHA-256 (a local file has no revision:
        its hash pins it)."""
        source = self.model.weights_source(self.engine.weights_kind)
        spec = process_of(self.engine)
        passed = "chat_template" in names_in([*spec.args, *spec.env.values()])
        return {**self._weights_fingerprint(source), **chat_template_info(self.model, source, passed)}

    def _weights_fingerprint(self, source: WeightsSource | None) -> dict[str, Any]:
        if self.weights is None:
            return {"weights": None, "weights_sha256": None}
        if self.weights.is_file():
            return {"weights": self.weights.name, "weights_sha256": sha256_of(self.weights)}
        if source is not None and source.from_gguf:  # a folder converted from a GGUF: fingerprint the GGUF
            gguf = gguf_path(self.model)
            return {"weights": f"{self.weights.name} (converted from {gguf.name})", "weights_sha256": sha256_of(gguf)}
        return {"weights": self.weights.name, "weights_sha256": None}
