"""The OpenAPI side of bearer tokens: the security scheme drf-spectacular documents."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "runs.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A token of simrun."}


class PagedListSchema(AutoSchema):
    """The schema of a view set whose `list` answers one page object, not an array, and
    whose media types are chosen by the Accept header only (no `?format=`)."""

    def _get_format_parameters(self) -> list[Any]:
        return []

    def _is_list_view(self, serializer: Any = None) -> bool:
        if getattr(self.view, "action", None) == "list":
            return False
        return bool(super()._is_list_view(serializer))
