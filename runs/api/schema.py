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


NO_NUL = "^[^\\u0000\\ud800-\\udfff]*$"
"""No text the API reads may hold a NUL character (DRF refuses them; Postgres cannot keep them)
or an unpaired surrogate (no UTF-8 can carry one; the workflow reader refuses it)."""


def _no_nul(schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not {"pattern", "enum", "format"} & set(schema):
        schema["pattern"] = NO_NUL
    for key in ("properties",):
        for child in (schema.get(key) or {}).values():
            _no_nul(child)
    for key in ("oneOf", "anyOf", "allOf"):
        for child in schema.get(key) or []:
            _no_nul(child)
    _no_nul(schema.get("items"))


EMPTY = {"type": "string", "maxLength": 0}
"""The empty text: what an optional filter given empty (`?limit=`) is taken as, nothing given."""


def _empty_is_none(parameter: dict[str, Any]) -> None:
    """An optional query parameter may be given empty: DRF reads `?x=` as x not given.

    drf-spectacular offers the empty text beside some texts as `oneOf`, which a pattern that
    takes the empty text too (`^$|…`) makes false (both match); `anyOf` says what is meant.
    Numbers and booleans get the same alternative.
    """
    schema = parameter.get("schema")
    if parameter.get("in") != "query" or parameter.get("required") or not isinstance(schema, dict):
        return
    if "oneOf" in schema and EMPTY.items() <= schema["oneOf"][-1].items():
        schema["anyOf"] = schema.pop("oneOf")
    elif schema.get("type") in ("integer", "number", "boolean"):
        parameter["schema"] = {"anyOf": [schema, dict(EMPTY)]}


def no_nul_in_requests(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A postprocessing hook: every text of a request (bodies, parameters) says it holds no
    NUL, so the document calls valid only what the API takes."""
    components = result.get("components", {}).get("schemas", {})
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                _empty_is_none(parameter)
                _no_nul(parameter.get("schema"))
            for media in (operation.get("requestBody") or {}).get("content", {}).values():
                ref = media.get("schema", {}).get("$ref", "")
                _no_nul(components.get(ref.rsplit("/", 1)[-1]) if ref else media.get("schema"))
    return result
