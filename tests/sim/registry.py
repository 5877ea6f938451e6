"""A stub of an OCI registry on loopback, and the simulated BuildKit that pushes to it.

Registry (the OCI distribution API, as Zot and the registry of k3d answer it): `GET /v2/`
answers 200; `GET|HEAD /v2/<name>/manifests/<tag or digest>` answers 200 with the manifest,
its media type and `Docker-Content-Digest` for an image it has, 404 `MANIFEST_UNKNOWN` for
one it does not; `PUT` of a manifest stores the image. `answer_with(code)` makes every
manifest request answer that code instead (an unreachable or misconfigured registry: seed
000 B7, "an answer that is neither found nor not found").

BuildKit: a container whose command is `buildctl` (or `buildctl-daemonless.sh`) is not run;
it ends after `build_seconds` on the simulator's clock with exit 0 and the image of its
`--output type=image,name=<ref>,push=true` pushed into the registry, or with exit 1 and an
error in its log when a failure was queued with `fail_next` (seed 000 B6). `hang()` makes
builds never end (for the backend's build timeout). Every build is recorded with its image
and the files of the ConfigMaps mounted into its pod (the build context).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.sim.containers import Launch
from tests.sim.resources import CONFIGMAPS
from tests.sim.store import Obj, Store, meta

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def split_ref(ref: str) -> tuple[str, str, str]:
    """`host:port/repo/name:tag` (or `@sha256:...`) as (host, repository, tag or digest)."""
    host, _, rest = ref.partition("/")
    if "." not in host and ":" not in host and host != "localhost":
        host, rest = "", ref
    if "@" in rest:
        repository, _, reference = rest.partition("@")
    else:
        repository, _, reference = rest.rpartition(":") if ":" in rest else (rest, "", "latest")
    return host, repository, reference or "latest"


class Registry:
    """An in-memory registry served over HTTP on 127.0.0.1."""

    def __init__(self) -> None:
        self._images: dict[tuple[str, str], bytes] = {}
        self._forced: int | None = None
        self.requests: list[tuple[str, str]] = []
        handler = type("Handler", (_Handler,), {"registry": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True, name="sim-registry"
        ).start()

    @property
    def host(self) -> str:
        """`127.0.0.1:<port>`, the registry part of its image references."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def add_image(self, ref: str) -> str:
        """Store an image (a reference with or without this registry's host); its digest."""
        _, repository, reference = split_ref(ref)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": "sha256:" + "0" * 64,
                    "size": 2,
                },
                "layers": [],
                "annotations": {"ref": ref},
            }
        ).encode()
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        self._images[(repository, reference)] = manifest
        self._images[(repository, digest)] = manifest
        return digest

    def remove_image(self, ref: str) -> None:
        _, repository, reference = split_ref(ref)
        self._images.pop((repository, reference), None)

    def has_image(self, ref: str) -> bool:
        _, repository, reference = split_ref(ref)
        return (repository, reference) in self._images

    def answer_with(self, code: int | None) -> None:
        """Answer every manifest request with `code` (None: answer normally again)."""
        self._forced = code

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    registry: Registry

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""

    def _reply(
        self, code: int, body: bytes, headers: dict[str, str] | None = None, send_body: bool = True
    ) -> None:
        self.send_response(code)
        for key, value in {
            "Content-Length": str(len(body)),
            "Docker-Distribution-API-Version": "registry/2.0",
            **(headers or {}),
        }.items():
            self.send_header(key, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def _manifest(self, send_body: bool) -> None:
        path = self.path.split("?")[0]
        self.registry.requests.append((self.command, path))
        if path.rstrip("/") == "/v2":
            self._reply(200, b"{}", {"Content-Type": "application/json"}, send_body)
            return
        name, marker, reference = path[len("/v2/") :].rpartition("/manifests/")
        if not marker or not path.startswith("/v2/"):
            self._reply(
                404,
                b'{"errors":[{"code":"NAME_UNKNOWN","message":"repository name '
                b'not known to registry"}]}',
                {"Content-Type": "application/json"},
                send_body,
            )
            return
        if self.registry._forced is not None:
            self._reply(
                self.registry._forced,
                b'{"errors":[{"code":"UNKNOWN","message":"forced by the simulator"}]}',
                {"Content-Type": "application/json"},
                send_body,
            )
            return
        manifest = self.registry._images.get((name, reference))
        if manifest is None:
            error = {
                "errors": [
                    {
                        "code": "MANIFEST_UNKNOWN",
                        "message": "manifest unknown",
                        "detail": {"name": name, "reference": reference},
                    }
                ]
            }
            self._reply(
                404, json.dumps(error).encode(), {"Content-Type": "application/json"}, send_body
            )
            return
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        self._reply(
            200,
            manifest,
            {"Content-Type": MANIFEST_TYPE, "Docker-Content-Digest": digest},
            send_body,
        )

    def do_GET(self) -> None:
        self._manifest(True)

    def do_HEAD(self) -> None:
        self._manifest(False)

    def do_PUT(self) -> None:
        path = self.path.split("?")[0]
        self.registry.requests.append(("PUT", path))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name, _, reference = path[len("/v2/") :].rpartition("/manifests/")
        digest = self.registry.add_image(f"{name}:{reference}")
        self._reply(201, b"", {"Docker-Content-Digest": digest})


@dataclass(frozen=True)
class Build:
    """One simulated build: its image, whether it succeeded, its context files."""

    image: str
    succeeded: bool
    context: dict[str, str]
    pod: str


class BuildKit:
    """The simulated BuildKit daemon behind `buildctl` containers."""

    def __init__(self, store: Store, registry: Registry | None) -> None:
        self.store = store
        self.registry = registry
        self.builds: list[Build] = []
        self.build_seconds = 0.0
        self._failures: deque[str] = deque()
        self._hang = False

    def fail_next(
        self,
        message: str = 'process "/bin/sh -c uv sync --frozen" did not '
        "complete successfully: exit code: 1",
    ) -> None:
        """Make the next build fail with this error."""
        self._failures.append(message)

    def hang(self, hanging: bool = True) -> None:
        """Make builds never end (or end again)."""
        self._hang = hanging

    def _context(self, pod: Obj) -> dict[str, str]:
        files: dict[str, str] = {}
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            source = volume.get("configMap")
            found = source and self.store.find(
                CONFIGMAPS, meta(pod)["namespace"], source.get("name", "")
            )
            if found:
                files.update(found.get("data") or {})
                files.update(
                    {
                        k: f"<{len(v)} base64 chars>"
                        for k, v in (found.get("binaryData") or {}).items()
                    }
                )
        return files

    def __call__(self, pod: Obj, run: Launch) -> tuple[int, str, float | None]:
        """Simulate `buildctl build ...`: exit code, log, seconds until it ends (None: never)."""
        outputs = [run.argv[i + 1] for i, a in enumerate(run.argv[:-1]) if a in ("--output", "-o")]
        outputs += [a.split("=", 1)[1] for a in run.argv if a.startswith("--output=")]
        fields = dict(kv.split("=", 1) for o in outputs for kv in o.split(",") if "=" in kv)
        image = fields.get("name", "")
        context = self._context(pod)
        if self._hang:
            return 0, "#1 [internal] load build definition\n", None
        if self._failures:
            error = self._failures.popleft()
            self.builds.append(Build(image, False, context, meta(pod)["name"]))
            return (
                1,
                f"#1 [internal] load build definition\nerror: failed to solve: {error}\n",
                self.build_seconds,
            )
        host = split_ref(image)[0]
        if self.registry is None or (host and host != self.registry.host):
            self.builds.append(Build(image, False, context, meta(pod)["name"]))
            return (
                1,
                f"error: failed to push {image}: dial tcp: lookup {host}: no such host\n",
                self.build_seconds,
            )
        if fields.get("push", "false") == "true":
            self.registry.add_image(image)
        self.builds.append(Build(image, True, context, meta(pod)["name"]))
        return (
            0,
            (
                f"#1 [internal] load build definition\n#1 DONE 0.0s\n"
                f"#9 exporting to image\n#9 pushing {image} DONE\n"
            ),
            self.build_seconds,
        )
