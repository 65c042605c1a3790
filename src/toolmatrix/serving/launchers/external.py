"""An engine somebody else runs: reached by URL, never started or stopped here."""

from __future__ import annotations

from typing import Any

from toolmatrix.serving.launchers.base import Endpoint
from toolmatrix.serving.launchers.readiness import http_request
from toolmatrix.serving.launchers.served import check_served


class ExternalLauncher:
    kind = "external"

    def __init__(self, base_url: str, served_model: str, engine_id: str = "external", api_key: str | None = None,
                 answer_timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.served_model = served_model
        self.engine_id = engine_id
        self.api_key = api_key  # the user's key, for check_served; never recorded
        self.answer_timeout = answer_timeout  # for check_served's one-token request

    def start(self) -> Endpoint:
        """The server's endpoint, once it has said that it serves the model (``served.check_served``)."""
        served = check_served(self.base_url, self.served_model, self.api_key, 5.0, self.answer_timeout)
        return Endpoint(self.base_url, self.served_model, served)

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

    def weights_info(self) -> dict[str, Any]:
        """Nothing: the server loaded its own weights and template, which a URL does not tell."""
        return {}
