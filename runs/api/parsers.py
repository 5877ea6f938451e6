"""The API's one parser of request bodies: JSON, bounded in size and in nesting depth.

A body longer than DATA_UPLOAD_MAX_MEMORY_SIZE is refused (413) before it is read, or as soon
as it is found longer (no Content-Length); a body nested deeper than SIMRUN_API_MAX_JSON_DEPTH
is refused (400) naming the limit, and one with a key twice in an object (400 `duplicate_key`,
naming the key). Python's decoder itself gives up at about a thousand levels
with a RecursionError, which is caught too: no nesting reaches a view or a serializer.
Uploads of archives read their body themselves (runs.api.snapshots).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import BaseParser


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class TooDeep(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "too_deep"


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"the body is larger than the limit of {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); "
        "send sources as snapshots, not inside the body"
    )


def _too_deep(limit: int) -> TooDeep:
    return TooDeep(
        f"the JSON body is nested deeper than {limit} levels (SIMRUN_API_MAX_JSON_DEPTH)"
    )


def depth_within(value: Any, limit: int) -> bool:
    """Whether `value` nests at most `limit` containers deep (the outermost is level 1).

    Iterative, so a deep value costs no recursion; it visits each container once and stops
    going down at the limit.
    """
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return False
                level.append((child, depth + 1))
    return True


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number of JSON")


class DuplicateKey(exceptions.ParseError):
    default_code = "duplicate_key"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of the body, refused when a key appears twice: parsers disagree on which of
    the two counts (YAML refuses it), so the service takes neither."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(
                f"the body has the key {key!r} twice in one object; each key may appear once"
            )
        found[key] = value
    return found


def read_bounded(stream: IO[bytes], *, declared: int | None, limit: int) -> bytes:
    """At most `limit` bytes of the body; BodyTooLarge when it announces or holds more."""
    if declared is not None and declared > limit:
        raise _too_large(limit)
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_large(limit)
    return data


class BoundedJSONParser(BaseParser):
    """application/json within the size and depth limits; ParseError for what is not JSON."""

    media_type = "application/json"

    def parse(
        self,
        stream: IO[bytes] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        if stream is None:
            return None
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH", "") if request is not None else ""
        declared = int(length) if str(length).isdigit() else None
        data = read_bounded(
            stream, declared=declared, limit=int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        )
        limit = int(settings.SIMRUN_API_MAX_JSON_DEPTH)
        try:
            value = json.loads(
                data, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
            )
        except RecursionError:
            raise _too_deep(limit) from None
        except ValueError as exc:
            raise exceptions.ParseError(f"the body is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise exceptions.ParseError(
                f"the body is a JSON object ({{...}}), not {type(value).__name__}"
            )
        if not depth_within(value, limit):
            raise _too_deep(limit)
        return value
