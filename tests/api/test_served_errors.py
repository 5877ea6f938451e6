"""The error shape over real HTTP: the web process as the service starts it (uvicorn running
`simrun_site.asgi`, `service_command("web")`), on both of its paths (the WSGI handler on
threads, Django's ASGI handler for streams and uploads). Its store is a file, so a route that
reads the store fails: the server error of these tests."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings

from runs.cli.service_commands import ROOT, service_command
from tests import factories
from tests.waiting import wait_for

MIB = 1024 * 1024


@dataclass
class Web:
    url: str
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def web(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """One web process for the module, on the test database, its store broken on purpose."""
    folder = tmp_path_factory.mktemp("web")
    broken_store = folder / "store-is-a-file"
    broken_store.write_text("")
    db = django_settings.DATABASES["default"]
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}",
        "SIMRUN_DATA_DIR": str(folder / "data"),
        "SIMRUN_STORE": str(broken_store),
        "SIMRUN_REDIS_URL": "",
        "PYTHONUNBUFFERED": "1",
    }
    log = folder / "web.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            service_command("web", port=port),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url) or proc.poll() is not None, timeout=60, what="the web process")
        assert proc.poll() is None, log.read_text()
        yield Web(url, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def token(transactional_db: None) -> str:
    """A token in the database the web process reads (committed rows)."""
    return factories.token(factories.person()).secret


def _call(web: Web, token: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{web.url}{path}", headers=headers, timeout=30, **kwargs)


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


def _chunks(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """A body httpx sends chunked (no Content-Length)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_a_chunked_json_body_is_read(web: Web, token: str) -> None:
    """A body sent `Transfer-Encoding: chunked` reaches the view whole (not taken as empty)."""
    body = json.dumps({"workflow": "name: chunked\ntasks: []\n"}).encode()
    response = _call(
        web,
        token,
        "POST",
        "/api/validate/",
        content=_chunks(body, 16),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"valid", "errors"}


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_memory_limit_is_413_in_json(web: Web, token: str, chunked: bool) -> None:
    """Over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB): 413 whether announced or chunked."""
    body = json.dumps({"workflow": "x" * 3 * MIB}).encode()
    content: Any = _chunks(body) if chunked else body
    response = _call(
        web,
        token,
        "POST",
        "/api/validate/",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert "2621440 bytes" in _error(response, 413, "too_large")["detail"]


def test_a_body_nested_beyond_the_limit_is_400_in_json(web: Web, token: str) -> None:
    deep = 100_000
    body = '{"workflow": ' + "[" * deep + "]" * deep + "}"
    response = _call(
        web,
        token,
        "POST",
        "/api/validate/",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert "64 levels" in _error(response, 400, "too_deep")["detail"]


def test_a_bad_host_is_400_in_json(web: Web, token: str) -> None:
    response = _call(web, token, "GET", "/api/whoami/", headers={"Host": "evil.example"})
    _error(response, 400, "bad_request")


@pytest.mark.parametrize("path", ["/api/nothing/here/", "/api/runs/x/nothing/"])
def test_an_unknown_path_is_404_in_json(web: Web, token: str, path: str) -> None:
    _error(_call(web, token, "POST", path, content=b"{}"), 404, "no_route")


def _tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("model/m.py")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"x = 1\n"))
    return out.getvalue()


@pytest.mark.parametrize(
    ("method", "path", "content", "content_type"),
    [
        ("GET", "/api/usage/", None, None),  # the WSGI handler
        ("POST", "/api/snapshots/", _tar(), "application/x-tar"),  # Django's ASGI handler
    ],
    ids=["wsgi", "asgi"],
)
def test_a_server_error_is_500_in_json_with_the_id_of_its_log_line(
    web: Web, token: str, method: str, path: str, content: bytes | None, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = _call(web, token, method, path, content=content, headers=headers)
    error_id = _error(response, 500, "server_error")["id"]
    line = wait_for(
        lambda: next(
            (line for line in web.log.read_text(errors="replace").splitlines() if error_id in line),
            None,
        ),
        timeout=10,
        what=f"the log line of {error_id}",
    )
    assert f"server error {error_id}: {method} {path}" in line
