"""URLs: the admin, the API under /api/, the pages."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
