"""Renderers of the routes that answer with more than JSON: event streams, logs, files.

DRF negotiates a renderer before the view runs; these let a client ask for the media type it
wants. A streamed or file response bypasses rendering; errors are rendered as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer


class _JsonText(BaseRenderer):
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        if isinstance(data, (bytes, str)):
            return data.encode() if isinstance(data, str) else data
        return json.dumps(data, default=str).encode()


class EventStreamRenderer(_JsonText):
    media_type = "text/event-stream"
    format = "sse"


class PlainTextRenderer(_JsonText):
    media_type = "text/plain"
    format = "txt"


class AnyMediaRenderer(_JsonText):
    """Accepts whatever the client asks for (file downloads)."""

    media_type = "*/*"
    format = "bin"
    charset = None  # type: ignore[assignment]
