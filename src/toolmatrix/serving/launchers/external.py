"""An engine somebody else runs: reached by URL, never started or stopped here."""

from __future__ import annotations

from typing import Any

from toolmatrix.serving.launchers.base import Endpoint, LaunchError
from toolmatrix.serving.launchers.readiness import http_request


class ExternalLauncher:
    kind = "external"

    def __init__(self, base_url: str, served_model: str, engine_id: str = "external"):
        self.base_url = base_url.rstrip("/")
        self.served_model = served_model
        self.engine_id = engine_id

    def start(self) -> Endpoint:
        # /models is the one endpoint every OpenAI-compatible server has; a 401 still proves it is there.
        try:
            status, _ = http_request("GET", self.base_url + "/models", timeout=5.0)
        except OSError as exc:
            raise LaunchError(f"--base-url {self.base_url}: cannot connect ({exc})") from None
        if status >= 500:
            raise LaunchError(f"--base-url {self.base_url}: /models answered HTTP {status}")
        return Endpoint(self.base_url, self.served_model)

    def stop(self) -> None:
        """Nothing to stop: the server is not ours."""

    def alive(self) -> bool:
        try:
            return http_request("GET", self.base_url + "/models", timeout=5.0)[0] < 500
        except OSError:
            return False

    def exit_code(self) -> int | None:
        return None  # not ours: a server that stopped answering tells us no status

    def log_tail(self, lines: int = 40) -> str:
        return "(external server: no log)"

    def describe(self) -> dict[str, Any]:
        return {"id": self.engine_id, "version": None, "launcher": self.kind, "flags": [], "base_url": self.base_url,
                "image": None, "image_digest": None, "binary": None}
