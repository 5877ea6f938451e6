"""JSON calls to this machine's service with the standard library only.

The commands that reach the local service (`runs/cli/service_lab.py`) must start fast:
httpx, which `runs/cli/api_client.py` uses for uploads and event streams, loads its own
command line (click, rich, pygments) on import, more than half a second on a loaded machine.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from runs.states import TaskState


class ServiceDown(Exception):
    """The service did not take the request (nothing was sent that could change anything)."""


class ServiceLost(Exception):
    """The connection failed after the request may have been sent (reset, timed out)."""


class ServiceRefused(Exception):
    """An answer of the API that is not a success: its status, detail, code and body (the
    local service's answers and `api_client`'s, which names it `ApiError`)."""

    def __init__(self, status: int, detail: str, code: str = "", body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.code = code
        self.body = body

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The workflow's errors of a refused submission (loc, line, text)."""
        return list(self.body.get("errors", [])) if isinstance(self.body, dict) else []

    def report(self) -> str:
        """What a command prints: the detail, then each workflow error at its line."""
        lines = [str(self)]
        for error in self.errors:
            at = f"line {error['line']}: " if error.get("line") else ""
            lines.append(f"  {at}{error.get('text', '')}")
        return "\n".join(lines)


class ServiceHttp:
    """The API under `url` with a bearer token."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0) -> None:
        self.base = url.rstrip("/") + "/api/"
        self.token = token
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The decoded JSON answer; ServiceRefused for an error answer, ServiceDown when the
        connection could not be made."""
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                content = response.read()
        except urllib.error.HTTPError as error:
            raise _refusal(error.code, error.read(), error.reason) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, ConnectionRefusedError | FileNotFoundError):
                raise ServiceDown(str(error.reason)) from None  # nothing was sent
            raise ServiceLost(str(error.reason)) from None
        except (OSError, http.client.HTTPException) as error:  # reset, timed out, cut short
            raise ServiceLost(str(error) or type(error).__name__) from None
        try:
            return json.loads(content) if content else None
        except ValueError:
            raise ServiceLost(f"an answer that is not JSON: {content[:200]!r}") from None


def _refusal(status: int, content: bytes, reason: str) -> ServiceRefused:
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict):
        return ServiceRefused(status, str(body.get("detail", "")), str(body.get("code", "")), body)
    return ServiceRefused(status, content.decode(errors="replace")[:500] or str(reason))


def with_task_totals(run: dict[str, Any]) -> dict[str, Any]:
    """Add to each task `id`, `done` and `total` (units; 1 for a task without a ledger), the
    shape the command's progress bars read for the API and this machine alike."""
    for task in run.get("tasks", []):
        counts = task.get("counts")
        task["id"] = task["task_id"]
        task["done"] = counts["done"] if counts else int(task["state"] == TaskState.DONE)
        task["total"] = counts["total"] if counts else 1
    return run
