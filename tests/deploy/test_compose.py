"""The one-server deployment (deploy/compose.yaml) and the service image (its Dockerfile)."""

from __future__ import annotations

import re

import yaml

from tests.deploy.manifests import CLUSTER, DEPLOY, ROOT, Obj, documents, find

DOCKERFILE = DEPLOY / "service" / "Dockerfile"


def compose() -> Obj:
    (spec,) = documents(DEPLOY / "compose.yaml")
    return spec


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            found.append((instruction.upper(), arguments.strip()))
    return found


def test_compose_runs_web_the_controller_postgres_and_redis() -> None:
    services = compose()["services"]
    assert set(services) == {"init", "web", "worker", "postgres", "redis"}
    assert services["web"]["command"][:2] == ["uvicorn", "simrun_site.asgi:application"]
    assert services["worker"]["command"] == ["simrun-controller"]
    assert services["worker"]["init"] is True


def test_the_controller_runs_a_worker_with_beat_and_the_watcher() -> None:
    script = (DEPLOY / "service" / "controller.sh").read_text()
    assert "celery -A simrun_site worker -B " in script
    assert "python manage.py simrun watch" in script
    copies = [a.split() for i, a in dockerfile_instructions() if i == "COPY"]
    assert ["deploy/service/controller.sh", "/usr/local/bin/simrun-controller"] in copies


def test_compose_uses_the_local_backend_and_its_servers() -> None:
    services = compose()["services"]
    for name in ("init", "web", "worker"):
        env = services[name]["environment"]
        assert env["SIMRUN_BACKEND"] == "local"
        assert env["DATABASE_URL"].startswith("postgres://simrun:")
        assert env["DATABASE_URL"].endswith("@postgres:5432/simrun")
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert env["SIMRUN_STORE"].startswith(env["SIMRUN_DATA_DIR"] + "/")
        assert any(v.endswith(":" + env["SIMRUN_DATA_DIR"]) for v in services[name]["volumes"])


def test_compose_builds_the_service_image_from_the_dockerfile() -> None:
    for name in ("init", "web", "worker"):
        build = compose()["services"][name]["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE


def test_compose_starts_the_processes_after_migrating_and_importing_tokens() -> None:
    services = compose()["services"]
    assert "migrate --noinput" in services["init"]["command"][-1]
    assert "simrun token import /etc/simrun/tokens.yaml" in services["init"]["command"][-1]
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["init"] == {
            "condition": "service_completed_successfully"
        }
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"


def test_compose_names_only_declared_volumes() -> None:
    spec = compose()
    named = {
        volume.split(":")[0]
        for service in spec["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith((".", "/"))
    }
    assert named == set(spec["volumes"])


def test_the_example_tokens_file_has_the_format_of_the_import() -> None:
    example = documents(DEPLOY / "tokens.example.yaml")[0]
    assert set(example) == {"owner", "people", "agents"}
    assert example["owner"] in {p["name"] for p in example["people"]}
    people = {p["name"] for p in example["people"]}
    assert all(agent["acts_for"] in people for agent in example["agents"])


def test_the_image_is_python_3_13_slim_with_the_pinned_uv() -> None:
    instructions = dockerfile_instructions()
    args = dict(a.split("=", 1) for i, a in instructions if i == "ARG" and "=" in a)
    assert args["PYTHON_IMAGE"] == "python:3.13-slim"
    pinned = re.search(r"^uv==(\S+)$", (ROOT / "requirements/base.txt").read_text(), re.M)
    assert pinned is not None
    assert args["UV_VERSION"] == pinned.group(1)


def test_the_image_installs_the_requirements_the_harness_and_the_plugin() -> None:
    runs = " ".join(a for i, a in dockerfile_instructions() if i == "RUN")
    assert "uv pip install --system --no-cache -r requirements/base.txt" in runs
    assert "uv build --wheel --out-dir /wheels harness" in runs
    assert "uv build --wheel --out-dir /wheels examples/simrun-examples" in runs
    assert "/opt/simrun/wheels/*.whl" in runs
    assert "manage.py collectstatic --noinput" in runs


def test_everything_the_image_copies_exists_and_passes_the_ignore_file() -> None:
    sources = []
    for instruction, arguments in dockerfile_instructions():
        if instruction == "COPY" and not arguments.startswith("--from"):
            sources += arguments.split()[:-1]
    assert sources
    missing = [s for s in sources if not (ROOT / s).exists()]
    assert missing == []
    allowed = [
        line[1:].rstrip("/")
        for line in (DEPLOY / "service" / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    blocked = [s for s in sources if not any(s.rstrip("/").startswith(a) for a in allowed)]
    assert blocked == []


def test_the_image_runs_as_the_user_the_cluster_expects(cluster_objects: list[Obj]) -> None:
    users = [a for i, a in dockerfile_instructions() if i == "USER"]
    assert users == ["1000:1000"]
    web = find(cluster_objects, "Deployment", "simrun-web")
    assert web["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 1000


def test_the_cluster_config_and_compose_set_only_settings_that_exist() -> None:
    """Catches a misspelt variable: each one is read by simrun_site/settings.py, or is one of
    the settings the Argo backend (cluster/argo/, not written yet) is to read."""
    read = set(re.findall(r'"((?:SIMRUN|CELERY|DATABASE)_[A-Z_]+)"', settings_source()))
    for_argo_backend = {
        "SIMRUN_NAMESPACE",
        "SIMRUN_QUEUE",
        "SIMRUN_STORE_CLAIM",
        "SIMRUN_WORKFLOW_SERVICE_ACCOUNT",
        "SIMRUN_REGISTRY",
        "SIMRUN_BUILDKIT_ADDR",
    }
    configured = set(
        yaml.safe_load_all((CLUSTER / "service" / "config.yaml").read_text()).__next__()["data"]
    )
    for name in ("init", "web", "worker"):
        configured |= set(compose()["services"][name]["environment"])
    assert sorted(configured - read - for_argo_backend) == []
    assert for_argo_backend <= configured


def settings_source() -> str:
    return (ROOT / "simrun_site" / "settings.py").read_text()
