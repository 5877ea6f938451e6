"""URLs: the admin, the API under /api/, the pages."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness of the web process (no database access)."""
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("healthz", healthz),
    path("admin/", admin.site.urls),
]
