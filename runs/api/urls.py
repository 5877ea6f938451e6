"""The routes of the API under /api/ (see docs/api.md); the OpenAPI document and its docs.

The document (/api/schema/) and the docs pages (/api/docs/, /api/redoc/) answer without a
token: they describe the API and hold no data of the lab. Every other route needs one.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from runs.api import schema  # noqa: F401  (registers the bearer scheme)
from runs.api.admin_ops import CleanupView, CompareView, UsageView
from runs.api.crate_runs import CrateRunView
from runs.api.runs import RunViewSet
from runs.api.servers import ServersView
from runs.api.snapshots import SnapshotListView, SnapshotRegisterView, SnapshotView
from runs.api.workflows import (
    EstimateView,
    ExplainReuseView,
    TaskTypeListView,
    TaskTypeView,
    ValidateView,
    WhoAmIView,
)


@csrf_exempt  # a POST to no route is a 404, not the CSRF failure page
def not_found(request: HttpRequest) -> JsonResponse:
    """Any other path below /api/: a 404 in the API's shape, not an HTML page."""
    hint = "; routes end with a slash" if not request.path.endswith("/") else ""
    return JsonResponse(
        {"detail": f"no route {request.path} (see /api/docs/){hint}", "code": "no_route"},
        status=404,
    )


router = SimpleRouter()
router.register("runs", RunViewSet, basename="run")

_public: dict[str, Any] = {"authentication_classes": [], "permission_classes": []}

urlpatterns = [
    path("runs/from_crate/", CrateRunView.as_view(), name="runs-from-crate"),
    path("", include(router.urls)),
    path("whoami/", WhoAmIView.as_view(), name="whoami"),
    path("validate/", ValidateView.as_view(), name="validate"),
    path("estimate/", EstimateView.as_view(), name="estimate"),
    path("explain-reuse/", ExplainReuseView.as_view(), name="explain-reuse"),
    path("task-types/", TaskTypeListView.as_view(), name="task-types"),
    path("task-types/<str:name>/", TaskTypeView.as_view(), name="task-type"),
    path("servers/", ServersView.as_view(), name="servers"),
    path("cleanup/", CleanupView.as_view(), name="cleanup"),
    path("usage/", UsageView.as_view(), name="usage"),
    path("compare/", CompareView.as_view(), name="compare"),
    path("snapshots/", SnapshotListView.as_view(), name="snapshots"),
    path("snapshots/register/", SnapshotRegisterView.as_view(), name="snapshot-register"),
    re_path(r"^snapshots/(?P<digest>[^/\x00]+)/$", SnapshotView.as_view(), name="snapshot"),
    path("schema/", SpectacularAPIView.as_view(**_public), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema", **_public), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema", **_public), name="redoc"),
    re_path(r"^.*$", not_found),
]
