"""URLs: the admin, the API under /api/, the pages."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from runs.pages.login_link import login_link


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness of the web process (no database access)."""
    return HttpResponse("ok", content_type="text/plain")


# Under /api/ Django's own error answers are JSON in the API's shape (runs/api/django_errors.py)
handler400 = "runs.api.django_errors.bad_request"
handler403 = "runs.api.django_errors.permission_denied"
handler404 = "runs.api.django_errors.page_not_found"
handler500 = "runs.api.django_errors.server_error"

urlpatterns = [
    path("healthz", healthz),
    path("admin/", admin.site.urls),
    path("api/", include("runs.api.urls")),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("login/link/<str:uid>/<str:token>/", login_link, name="login-link"),
    path("logout/", auth_views.LogoutView.as_view(next_page="/login/"), name="logout"),
    path("", include("runs.pages.urls")),
]
