"""The kustomizations build into the cluster the design describes (deploy/cluster, deploy/k3d,
the controllers on their releases): names, namespaces, queues, store, registry, placement."""

from __future__ import annotations

import tomllib
from typing import Any

import yaml
from hera.workflows import models as argo_models

from tests.deploy.manifests import (
    K3D,
    NAMESPACE,
    Obj,
    containers,
    documents,
    find,
    workloads,
)
from tests.sim.kueue_schemas import KUEUE_SCHEMAS
from tests.sim.schemas import FieldError, model_errors


def _meta(schema: Any) -> Any:
    return schema["properties"]["metadata"]["properties"]


CLUSTER_SCOPED_KINDS = {
    "Namespace",
    "PriorityClass",
    "StorageClass",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
} | {kind for (_, kind), s in KUEUE_SCHEMAS.items() if "namespace" not in _meta(s)}


def off_workers(workload: Obj) -> bool:
    """Whether a workload's pods are required to stay off the nodes labelled as workers."""
    affinity = workload["spec"]["template"]["spec"].get("affinity", {})
    terms = (
        affinity.get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    keep_off = {"key": "simrun/worker", "operator": "NotIn", "values": ["true"]}
    return bool(terms) and all(keep_off in t.get("matchExpressions", []) for t in terms)


def config(objects: list[Obj]) -> dict[str, str]:
    return dict(find(objects, "ConfigMap", "simrun-config")["data"])


def buildkit_registries(objects: list[Obj]) -> set[str]:
    toml = find(objects, "ConfigMap", "buildkitd-config")["data"]["buildkitd.toml"]
    return set(tomllib.loads(toml).get("registry", {}))


def test_namespaced_objects_are_in_simrun_and_cluster_objects_in_none(
    cluster_objects: list[Obj], k3d_objects: list[Obj]
) -> None:
    for obj in [*cluster_objects, *k3d_objects]:
        namespace = obj["metadata"].get("namespace")
        expected = None if obj["kind"] in CLUSTER_SCOPED_KINDS else NAMESPACE
        assert namespace == expected, f"{obj['kind']}/{obj['metadata']['name']}: {namespace}"


def test_the_cluster_holds_one_namespace_simrun(cluster_objects: list[Obj]) -> None:
    assert [o["metadata"]["name"] for o in cluster_objects if o["kind"] == "Namespace"] == [
        NAMESPACE
    ]


def test_kueue_admits_by_host_on_nodes_labelled_as_workers(cluster_objects: list[Obj]) -> None:
    topology = find(cluster_objects, "Topology", "simrun-hosts")
    assert topology["spec"]["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
    flavor = find(cluster_objects, "ResourceFlavor", "simrun-worker")
    assert flavor["spec"] == {
        "nodeLabels": {"simrun/worker": "true"},
        "topologyName": "simrun-hosts",
    }


def test_the_cluster_queue_preempts_lower_priorities_of_the_simrun_namespace(
    cluster_objects: list[Obj],
) -> None:
    queue = find(cluster_objects, "ClusterQueue", "simrun")["spec"]
    assert queue["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert queue["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    (group,) = queue["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["simrun-worker"]
    quotas = [r["name"] for r in group["flavors"][0]["resources"]]
    assert quotas == group["coveredResources"]
    assert {"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"} <= set(quotas)


def test_the_local_queue_is_the_one_pods_name_in_their_queue_label(
    cluster_objects: list[Obj],
) -> None:
    local = find(cluster_objects, "LocalQueue", "simrun")
    assert local["metadata"]["namespace"] == NAMESPACE
    assert local["spec"] == {"clusterQueue": "simrun"}
    assert config(cluster_objects)["SIMRUN_QUEUE"] == "simrun"


def test_the_store_is_nfs_4_2_without_negative_lookup_caching(cluster_objects: list[Obj]) -> None:
    """K12: the store's NFS mounts cache no lookup that missed (`lookupcache=positive`)."""
    storage_class = find(cluster_objects, "StorageClass", "simrun-store")
    assert storage_class["provisioner"] == "nfs.csi.k8s.io"
    assert {"nfsvers=4.2", "lookupcache=positive"} <= set(storage_class["mountOptions"])
    assert storage_class["parameters"]["server"] == "storage.cluster.internal"
    assert storage_class["parameters"]["share"] == "/tank/simrun"
    claim = find(cluster_objects, "PersistentVolumeClaim", "simrun-store")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "simrun-store"


def test_a_file_a_pod_wrote_is_seen_by_the_service_at_its_next_look(
    cluster_objects: list[Obj],
) -> None:
    """K12: the claim the service and every pod mount (SIMRUN_STORE_CLAIM) is provisioned by
    a storage class whose mounts keep no negative lookup, so a merge marker a pod wrote is
    seen at the next poll; the wait for a marker that does not appear is left at its
    default (SIMRUN_MERGE_MARKER_GRACE_S unset: 120 s)."""
    settings = config(cluster_objects)
    claim = find(cluster_objects, "PersistentVolumeClaim", settings["SIMRUN_STORE_CLAIM"])
    storage_class = find(cluster_objects, "StorageClass", claim["spec"]["storageClassName"])
    assert "lookupcache=positive" in storage_class["mountOptions"]
    assert "SIMRUN_MERGE_MARKER_GRACE_S" not in settings


def test_the_store_settings_are_local_to_the_build(cluster_objects: list[Obj]) -> None:
    names = {o["metadata"]["name"] for o in cluster_objects if o["kind"] == "ConfigMap"}
    assert "simrun-store-settings" not in names


def test_every_process_of_the_service_mounts_the_store_where_the_settings_say(
    cluster_objects: list[Obj],
) -> None:
    store_path = config(cluster_objects)["SIMRUN_STORE"]
    service = [w for w in workloads(cluster_objects) if w["metadata"]["name"].startswith("simrun-")]
    service = [w for w in service if w["metadata"]["labels"]["app.kubernetes.io/name"] == "simrun"]
    assert {w["metadata"]["name"] for w in service} == {
        "simrun-web",
        "simrun-worker",
        "simrun-beat",
        "simrun-watcher",
    }
    for workload in service:
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        main = workload["spec"]["template"]["spec"]["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        claim = volumes[mounts[store_path]]["persistentVolumeClaim"]["claimName"]
        assert claim == config(cluster_objects)["SIMRUN_STORE_CLAIM"] == "simrun-store"


def test_the_processes_run_the_commands_of_the_service(cluster_objects: list[Obj]) -> None:
    commands = {
        w["metadata"]["name"]: w["spec"]["template"]["spec"]["containers"][0]["command"]
        for w in workloads(cluster_objects)
        if w["metadata"]["labels"]["app.kubernetes.io/name"] == "simrun"
    }
    assert commands["simrun-web"][:2] == ["uvicorn", "simrun_site.asgi:application"]
    assert commands["simrun-worker"][:4] == ["celery", "-A", "simrun_site", "worker"]
    assert commands["simrun-beat"][:4] == ["celery", "-A", "simrun_site", "beat"]
    assert commands["simrun-watcher"] == ["python", "manage.py", "simrun", "watch"]


def test_the_web_pod_migrates_and_imports_the_tokens_before_it_serves(
    cluster_objects: list[Obj],
) -> None:
    web = find(cluster_objects, "Deployment", "simrun-web")
    init = [c["command"] for c in web["spec"]["template"]["spec"]["initContainers"]]
    assert init == [
        ["python", "manage.py", "migrate", "--noinput"],
        ["python", "manage.py", "simrun", "token", "import", "/etc/simrun/tokens.yaml"],
    ]
    tokens = find(cluster_objects, "Secret", "simrun-tokens")
    assert set(yaml.safe_load(tokens["stringData"]["tokens.yaml"])) == {
        "owner",
        "people",
        "agents",
    }


def test_only_beat_and_the_watcher_are_never_two_at_once(cluster_objects: list[Obj]) -> None:
    for name in ("simrun-beat", "simrun-watcher"):
        workload = find(cluster_objects, "Deployment", name)
        assert workload["spec"]["replicas"] == 1
        assert workload["spec"]["strategy"]["type"] == "Recreate"


def test_the_service_uses_its_own_account_and_the_workflows_theirs(
    cluster_objects: list[Obj],
) -> None:
    service = [
        w
        for w in workloads(cluster_objects)
        if w["metadata"]["labels"].get("app.kubernetes.io/name") == "simrun"
    ]
    assert {w["spec"]["template"]["spec"]["serviceAccountName"] for w in service} == {"simrun"}
    assert config(cluster_objects)["SIMRUN_WORKFLOW_SERVICE_ACCOUNT"] == "simrun-workflow"
    executor = find(cluster_objects, "Role", "simrun-workflow-executor")
    assert executor["rules"] == [
        {
            "apiGroups": ["argoproj.io"],
            "resources": ["workflowtaskresults"],
            "verbs": ["create", "patch"],
        }
    ]
    find(cluster_objects, "ServiceAccount", "simrun-workflow")


def registry_is_one_address_everywhere(objects: list[Obj]) -> None:
    registry = config(objects)["SIMRUN_REGISTRY"]
    assert buildkit_registries(objects) == {registry}
    images = {
        c["image"]
        for w in workloads(objects)
        if w["metadata"]["labels"].get("app.kubernetes.io/name") == "simrun"
        for c in containers(w)
    }
    assert {image.rsplit("/", 1)[0] for image in images} == {registry}


def test_the_registry_has_one_address_everywhere(cluster_objects: list[Obj]) -> None:
    registry_is_one_address_everywhere(cluster_objects)


def test_k3d_has_its_registry_address_everywhere(k3d_objects: list[Obj]) -> None:
    registry_is_one_address_everywhere(k3d_objects)


def test_buildkit_keeps_its_state_on_a_volume(cluster_objects: list[Obj]) -> None:
    buildkit = find(cluster_objects, "Deployment", "buildkitd")
    volumes = {v["name"]: v for v in buildkit["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in containers(buildkit)[0]["volumeMounts"]}
    claim = volumes[mounts["/var/lib/buildkit"]]["persistentVolumeClaim"]["claimName"]
    assert claim == "buildkitd-state"
    find(cluster_objects, "PersistentVolumeClaim", "buildkitd-state")
    assert config(cluster_objects)["SIMRUN_BUILDKIT_ADDR"] == "tcp://buildkitd:1234"


def test_all_infrastructure_keeps_off_the_worker_nodes(
    cluster_objects: list[Obj], argo_objects: list[Obj], kueue_objects: list[Obj]
) -> None:
    everything = workloads([*cluster_objects, *argo_objects, *kueue_objects])
    assert {w["metadata"]["name"] for w in everything} == {
        *("simrun-web", "simrun-worker", "simrun-beat", "simrun-watcher"),
        *("simrun-postgres", "simrun-redis", "zot", "buildkitd"),
        *("workflow-controller", "argo-server", "kueue-controller-manager"),
    }
    assert [w["metadata"]["name"] for w in everything if not off_workers(w)] == []


def test_argo_requeues_after_one_second(argo_objects: list[Obj]) -> None:
    controller = find(argo_objects, "Deployment", "workflow-controller")
    env = {e["name"]: e.get("value") for e in containers(controller)[0]["env"]}
    assert env["DEFAULT_REQUEUE_TIME"] == "1s"
    assert env.keys() >= {"LEADER_ELECTION_IDENTITY"}, "the release's own settings are kept"


def test_argo_executor_containers_request_what_they_limit(argo_objects: list[Obj]) -> None:
    configmap = find(argo_objects, "ConfigMap", "workflow-controller-configmap")
    resources = yaml.safe_load(configmap["data"]["executor"])["resources"]
    assert resources["requests"] == resources["limits"]
    assert resources["limits"]["memory"] == "256Mi"


def test_argo_executor_config_is_a_container_argo_can_read(argo_objects: list[Obj]) -> None:
    """Argo reads `executor` as a core Container: checked strictly, as the simulator's API
    server checks every object."""
    configmap = find(argo_objects, "ConfigMap", "workflow-controller-configmap")
    assert model_errors(argo_models.Container, yaml.safe_load(configmap["data"]["executor"])) == []
    assert model_errors(argo_models.Container, {"resources": {"limit": {"cpu": "1"}}}) == [
        FieldError("resources.limit", "unknown field", unknown=True)
    ]


def test_argo_is_installed_into_simrun_and_kueue_into_its_own_namespace(
    argo_objects: list[Obj], kueue_objects: list[Obj]
) -> None:
    assert {o["metadata"].get("namespace") for o in argo_objects} == {NAMESPACE}
    assert {o["metadata"].get("namespace") for o in kueue_objects} == {None, "kueue-system"}


# --- the k3d overlay --------------------------------------------------------------------------


def test_k3d_stores_runs_in_a_host_directory_under_the_same_claim(k3d_objects: list[Obj]) -> None:
    assert not [o for o in k3d_objects if o["kind"] == "StorageClass"]
    volume = find(k3d_objects, "PersistentVolume", "simrun-store-k3d")
    assert volume["spec"]["hostPath"]["path"] == "/simrun-store"
    assert volume["spec"]["claimRef"] == {"namespace": NAMESPACE, "name": "simrun-store"}
    claim = find(k3d_objects, "PersistentVolumeClaim", "simrun-store")
    assert claim["spec"]["volumeName"] == "simrun-store-k3d"
    assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"]


def test_k3d_uses_its_own_registry_instead_of_zot(k3d_objects: list[Obj]) -> None:
    assert not [o for o in k3d_objects if "zot" in o["metadata"]["name"]]
    assert config(k3d_objects)["SIMRUN_REGISTRY"] == "k3d-simrun-registry:5000"


def test_k3d_runs_the_service_in_the_test_process(k3d_objects: list[Obj]) -> None:
    replicas = {w["metadata"]["name"]: w["spec"]["replicas"] for w in workloads(k3d_objects)}
    assert replicas == {
        "simrun-web": 0,
        "simrun-worker": 0,
        "simrun-beat": 0,
        "simrun-watcher": 0,
        "simrun-redis": 0,
        "simrun-postgres": 0,
        "buildkitd": 1,
    }
    find(k3d_objects, "Role", "simrun")  # the rights stay, for the tests to act as the service


def test_k3d_quotas_are_those_of_three_agents(k3d_objects: list[Obj]) -> None:
    cluster = documents(K3D / "k3d-cluster.yaml")[0]
    assert cluster["agents"] == 3
    memory_per_agent = int(cluster["options"]["runtime"]["agentsMemory"].rstrip("g"))
    (group,) = find(k3d_objects, "ClusterQueue", "simrun")["spec"]["resourceGroups"]
    quotas = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quotas["memory"] == f"{3 * memory_per_agent}Gi"
    assert quotas["cpu"] == "6"


def test_k3d_labels_only_the_agents_as_workers_and_mounts_the_store_everywhere() -> None:
    cluster = documents(K3D / "k3d-cluster.yaml")[0]
    assert cluster["apiVersion"] == "k3d.io/v1alpha5"
    assert cluster["kind"] == "Simple"
    assert cluster["options"]["k3s"]["nodeLabels"] == [
        {"label": "simrun/worker=true", "nodeFilters": ["agent:*"]}
    ]
    (volume,) = cluster["volumes"]
    assert volume["volume"].endswith(":/simrun-store")
    assert volume["nodeFilters"] == ["all"]
    assert cluster["registries"]["create"]["name"] == "simrun-registry"


SECRETS_DIR = "/run/secrets/simrun"


def service_workloads(objects: list[Obj]) -> list[Obj]:
    return [
        w
        for w in workloads(objects)
        if w["metadata"]["labels"]["app.kubernetes.io/name"] == "simrun"
    ]


def test_no_process_of_the_service_holds_a_secret_in_its_environment(
    cluster_objects: list[Obj],
) -> None:
    """Run code reading the web process's environment (`/proc/self/environ` through a link)
    must find no secret there: no variable of any container comes from a Secret."""
    for workload in service_workloads(cluster_objects):
        for container in containers(workload):
            from_secrets = [
                e["name"]
                for e in container.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})
            ]
            whole = [e for e in container.get("envFrom", []) if "secretRef" in e]
            where = f"{workload['metadata']['name']}/{container['name']}"
            assert (from_secrets, whole) == ([], []), where


def test_the_service_reads_its_secrets_from_files_of_the_mounted_secret(
    cluster_objects: list[Obj],
) -> None:
    """DATABASE_URL_FILE and SIMRUN_SECRET_KEY_FILE name files of simrun-secrets, mounted
    read-only and readable by the service's group only."""
    secret = find(cluster_objects, "Secret", "simrun-secrets")
    for workload in service_workloads(cluster_objects):
        pod = workload["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
        for container in containers(workload):
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            assert env["DATABASE_URL_FILE"] == f"{SECRETS_DIR}/database-url"
            assert env["SIMRUN_SECRET_KEY_FILE"] == f"{SECRETS_DIR}/secret-key"
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            mount = mounts[SECRETS_DIR]
            assert mount["readOnly"] is True
            volume = volumes[mount["name"]]["secret"]
            assert volume["secretName"] == "simrun-secrets"
            assert volume["defaultMode"] == 0o440
            keys = {item["key"] for item in volume["items"]}
            assert (
                keys
                == {"database-url", "secret-key"}
                <= set(secret.get("stringData", secret.get("data", {})))
            )
