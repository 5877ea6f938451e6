"""B13: the opt-in component deploy/cluster/argo-offload/ turns on Argo's node-status offload
to simrun's Postgres and points simrun at the Argo server; without it nothing changes.

Built offline as an operator's overlays of deploy/cluster and of Argo's controllers (on the
stand-in release, conftest.py). What Argo reads is checked as Argo reads it, after Argo
Workflows v4.1.2 (16a52d67daf2f4a8a76fa8bec02a76a46aa46257): the ConfigMap as
`parseConfigMap` in config/controller.go joins it, `persistence` strictly against the fields
of config/config.go (`yaml.UnmarshalStrict`: an unknown field stops the controller).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from django.apps import apps

from simrun_site import env
from tests.deploy.api_rights import Call, grants_of
from tests.deploy.manifests import NAMESPACE, Obj, containers, find, validation_errors

CONTROLLER_CONFIGMAP = "workflow-controller-configmap"
"""The ConfigMap both the controller and the server load (`--configmap`'s default)."""
SETTINGS = {"SIMRUN_ARGO_SERVER_URL", "SIMRUN_ARGO_SERVER_INSECURE"}
"""What the component adds to simrun-config."""

# The fields of Argo's PersistConfig and what it embeds (config/config.go at v4.1.2): a dict
# is an object with exactly these fields, a type a scalar of that type.
_SECRET_KEY = {"name": str, "key": str, "optional": bool}
_DATABASE = {
    "host": str,
    "port": int,
    "database": str,
    "tableName": str,
    "userNameSecret": _SECRET_KEY,
    "passwordSecret": _SECRET_KEY,
}
PERSIST_CONFIG: dict[str, Any] = {
    "postgresql": {
        **_DATABASE,
        "ssl": bool,
        "sslMode": str,
        "azureToken": {"enabled": bool, "scope": str},
        "awsRDSToken": {"enabled": bool, "region": str},
    },
    "mysql": {**_DATABASE, "options": dict},
    "connectionPool": {"maxIdleConns": int, "maxOpenConns": int, "connMaxLifetime": str},
    "reconnectionConfig": {
        "maxRetries": int,
        "baseDelaySeconds": int,
        "maxDelaySeconds": int,
        "retryMultiple": float,
    },
    "connectionTimeoutSeconds": int,
    "nodeStatusOffLoad": bool,
    "archive": bool,
    "archiveLabelSelector": dict,
    "archiveTTL": str,
    "clusterName": str,
    "skipMigration": bool,
}


def schema_errors(value: Any, schema: Any, path: str = "persistence") -> list[str]:
    """Why `value` is not what Argo's strict YAML reading accepts for `schema`."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {value!r}"]
        errors = [f"{path}.{key}: unknown field" for key in value if key not in schema]
        for key, field in schema.items():
            if key in value:
                errors += schema_errors(value[key], field, f"{path}.{key}")
        return errors
    kinds = (int, float) if schema is float else schema
    if isinstance(value, bool) != (schema is bool) or not isinstance(value, kinds):
        return [f"{path}: expected {schema.__name__}, got {value!r}"]
    return []


def argo_config(configmap: Obj) -> dict[str, Any]:
    """The controller's configuration as Argo reads the ConfigMap (`parseConfigMap`): one
    `config` key, or every key joined as a YAML document with its value indented."""
    data: dict[str, str] = configmap.get("data", {})
    if "config" in data:
        assert len(data) == 1, "a `config` key must be the ConfigMap's only key"
        raw = data["config"]
    else:
        raw = "".join(
            f"{name}:\n  " + "\n  ".join(value.strip("\n").split("\n")) + "\n"
            if "\n" in value
            else f"{name}: {value}\n"
            for name, value in data.items()
        )
    return yaml.safe_load(raw) or {}


def persistence(argo_objects: list[Obj]) -> Any:
    """Argo's `persistence` as the controller and the server read it; None when unset."""
    return argo_config(find(argo_objects, "ConfigMap", CONTROLLER_CONFIGMAP)).get("persistence")


def settings(objects: list[Obj]) -> dict[str, str]:
    return dict(find(objects, "ConfigMap", "simrun-config")["data"])


def flag_values(args: list[str], flag: str) -> list[str]:
    """The values a command line gives `flag` (`--flag=v` or `--flag v`)."""
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    values += [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    return values


def container_env(workload: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in containers(workload)[0].get("env", [])}


def postgres_env(objects: list[Obj]) -> dict[str, Any]:
    """POSTGRES_* of simrun's Postgres: a value, or the secretKeyRef it comes from."""
    postgres = find(objects, "StatefulSet", "simrun-postgres")
    return {
        e["name"]: e.get("value", e.get("valueFrom", {}).get("secretKeyRef"))
        for e in containers(postgres)[0]["env"]
    }


def test_the_overlays_with_the_component_build_into_valid_objects(
    offload_cluster_objects: list[Obj], offload_argo_objects: list[Obj]
) -> None:
    everything = [*offload_cluster_objects, *offload_argo_objects]
    assert [e for obj in everything for e in validation_errors(obj)] == []
    assert persistence(offload_argo_objects)
    assert settings(offload_cluster_objects).keys() >= SETTINGS


def test_argo_offloads_node_status_with_a_configuration_it_reads(
    offload_argo_objects: list[Obj],
) -> None:
    found = persistence(offload_argo_objects)
    assert schema_errors(found, PERSIST_CONFIG) == []
    assert found["nodeStatusOffLoad"] is True
    assert found["postgresql"]["tableName"], "Argo refuses persistence without a table name"
    assert not found.get("archive"), "simrun keeps its own records: no workflow archive"


def test_the_strict_reading_refuses_a_misspelt_field() -> None:
    misspelt = {"nodeStatusOffload": True, "postgresql": {"host": "h", "tablename": "t"}}
    assert schema_errors(misspelt, PERSIST_CONFIG) == [
        "persistence.nodeStatusOffload: unknown field",
        "persistence.postgresql.tablename: unknown field",
    ]
    assert schema_errors({"nodeStatusOffLoad": "yes"}, PERSIST_CONFIG) == [
        "persistence.nodeStatusOffLoad: expected bool, got 'yes'"
    ]


def test_argo_uses_the_database_user_and_password_of_simruns_postgres(
    offload_argo_objects: list[Obj], offload_cluster_objects: list[Obj]
) -> None:
    """The credentials are Secret keys in Argo's namespace (simrun): they must exist in the
    build of deploy/cluster, and be those simrun's Postgres is started with."""
    database = persistence(offload_argo_objects)["postgresql"]
    service = find(offload_cluster_objects, "Service", "simrun-postgres")
    assert database["host"] == service["metadata"]["name"]
    assert database["port"] in [p["port"] for p in service["spec"]["ports"]]
    postgres = postgres_env(offload_cluster_objects)
    assert database["database"] == postgres["POSTGRES_DB"]
    secret = find(offload_cluster_objects, "Secret", database["userNameSecret"]["name"])
    assert secret["stringData"][database["userNameSecret"]["key"]] == postgres["POSTGRES_USER"]
    assert {"name": secret["metadata"]["name"], "key": database["passwordSecret"]["key"]} == (
        postgres["POSTGRES_PASSWORD"]
    )
    assert database["passwordSecret"]["key"] in secret["stringData"]


def test_argos_tables_are_none_of_djangos(offload_argo_objects: list[Obj]) -> None:
    """Argo shares simrun's database: its relations (persist/sqldb/migrate.go and
    util/sqldb/migrate.go at v4.1.2: the configured table and its indexes, the archive's
    tables, `schema_history`, the index `idx_name`) must not be named as any of Django's."""
    table = persistence(offload_argo_objects)["postgresql"]["tableName"]
    argo_prefixes = (table, "argo_archived_workflows", "argo_workflow_history")
    argo_names = {"schema_history", "idx_name"}
    django: set[str] = set()
    for model in apps.get_models(include_auto_created=True):
        meta = model._meta
        django |= {meta.db_table, *(i.name for i in meta.indexes)}
        django |= {c.name for c in meta.constraints}
    assert django, "Django's models are loaded"
    shared = sorted(n for n in django if n in argo_names or n.startswith(argo_prefixes))
    assert shared == []


def test_simrun_asks_the_argo_server_of_the_namespace_install(
    offload_cluster_objects: list[Obj], offload_argo_objects: list[Obj]
) -> None:
    url = urlsplit(settings(offload_cluster_objects)["SIMRUN_ARGO_SERVER_URL"])
    service = find(offload_argo_objects, "Service", "argo-server")
    assert url.hostname == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert url.port in [p["port"] for p in service["spec"]["ports"]]
    server = find(offload_argo_objects, "Deployment", "argo-server")
    labels = server["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    args = containers(server)[0]["args"]
    secure = [*flag_values(args, "--secure"), container_env(server).get("ARGO_SECURE")]
    assert "false" not in secure and url.scheme == "https", "the server serves TLS by default"


def test_simrun_accepts_the_servers_self_signed_certificate(
    offload_cluster_objects: list[Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Argo's default certificate is made at every start for localhost: no CA verifies it."""
    found = settings(offload_cluster_objects)
    monkeypatch.setenv("SIMRUN_ARGO_SERVER_INSECURE", found["SIMRUN_ARGO_SERVER_INSECURE"])
    assert env.boolean("SIMRUN_ARGO_SERVER_INSECURE", False) is True
    assert "SIMRUN_ARGO_SERVER_CA_FILE" not in found


def test_the_controller_and_the_server_both_load_the_persistence(
    offload_argo_objects: list[Obj],
) -> None:
    """Both read the ConfigMap `--configmap` names (default workflow-controller-configmap,
    cmd/workflow-controller/main.go and cmd/argo/commands/server.go): the controller to
    offload, the server to read offloaded nodes back."""
    for name in ("workflow-controller", "argo-server"):
        args = containers(find(offload_argo_objects, "Deployment", name))[0].get("args", [])
        assert set(flag_values(args, "--configmap")) <= {CONTROLLER_CONFIGMAP}, name
    assert persistence(offload_argo_objects)["nodeStatusOffLoad"] is True


def test_the_server_reads_the_workflow_with_simruns_own_rights(
    offload_argo_objects: list[Obj], offload_cluster_objects: list[Obj]
) -> None:
    """The server's default --auth-mode=client reads the workflow with the bearer token simrun
    sends (its service account's): that account must be allowed to get workflows."""
    server = find(offload_argo_objects, "Deployment", "argo-server")
    assert set(flag_values(containers(server)[0]["args"], "--auth-mode")) <= {"client"}
    grants = grants_of(offload_cluster_objects, NAMESPACE, "simrun")
    get_workflows = Call("get", "argoproj.io", "workflows", NAMESPACE)
    assert any(g.allows(get_workflows) for g in grants)


def _without(objects: list[Obj], name: str, keys: set[str]) -> dict[tuple[str, str], Obj]:
    """The objects by kind and name, with `keys` left out of the ConfigMap `name`'s data."""
    found = {}
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == name:
            data = {k: v for k, v in obj["data"].items() if k not in keys}
            obj = {**obj, "data": data}
        found[(obj["kind"], obj["metadata"]["name"])] = obj
    return found


def test_without_the_component_nothing_changes(
    cluster_objects: list[Obj],
    argo_objects: list[Obj],
    offload_cluster_objects: list[Obj],
    offload_argo_objects: list[Obj],
) -> None:
    assert persistence(argo_objects) is None
    assert not SETTINGS & settings(cluster_objects).keys()
    assert _without(offload_cluster_objects, "simrun-config", SETTINGS) == _without(
        cluster_objects, "simrun-config", set()
    )
    assert _without(offload_argo_objects, CONTROLLER_CONFIGMAP, {"persistence"}) == _without(
        argo_objects, CONTROLLER_CONFIGMAP, set()
    )
