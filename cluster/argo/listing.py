"""Reads of the runs' workflows: one by name, or lists page by page (whole objects, or
their metadata only).

A controller tick first asks for the metadata of every run's workflow — the API serves any
resource as a `PartialObjectMetadataList` when the request's Accept header asks for one
(Kubernetes ≥ 1.15): ~0.4 KB a workflow instead of ~10 KB with its spec and node status —
and then for the whole objects only of the workflows whose resourceVersion it has not parsed
(`ArgoBackend.revisions`, `ArgoBackend.statuses`): those of a few runs in one list selected by
their run label, every run's in one list when there are many.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from kubernetes.client import ApiClient, CustomObjectsApi
from kubernetes.client.rest import ApiException
from pydantic_core import from_json

from cluster.argo.manifest import RUN_LABEL
from cluster.argo.watch import GROUP, PLURAL, VERSION

WHOLE = "application/json"
METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
WHOLE_PAGE = 500  # whole workflows per page (5 MB at ~10 KB a workflow)
METADATA_PAGE = 5000  # workflows' metadata per page
SELECTED_MAX = 100  # run labels in one selector; more runs than that are listed whole


def read_workflow(custom: CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    """The workflow `name`; KeyError when it does not exist."""
    try:
        found: dict[str, Any] = custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except ApiException as error:
        if error.status == 404:
            raise KeyError(name) from None
        raise
    return found


def listed(
    api: ApiClient,
    namespace: str,
    *,
    selector: str = RUN_LABEL,
    metadata_only: bool = False,
) -> Iterator[dict[str, Any]]:
    """The workflows the label `selector` selects (by default every run's), page by page;
    as `{"metadata": …}` only with `metadata_only`. Decoded by pydantic-core's JSON parser,
    a third faster than `json` on a page of 5 MB."""
    token = ""
    while True:
        query: list[tuple[str, Any]] = [
            ("labelSelector", selector),
            ("limit", METADATA_PAGE if metadata_only else WHOLE_PAGE),
        ]
        if token:
            query.append(("continue", token))
        reply = api.call_api(
            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}",
            "GET",
            query_params=query,
            header_params={"Accept": METADATA if metadata_only else WHOLE},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        page = from_json(reply.data)
        yield from page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return


def runs_selector(run_labels: Collection[str]) -> str:
    """The label selector of the workflows of these runs (their run label's values)."""
    return f"{RUN_LABEL} in ({','.join(sorted(run_labels))})"
