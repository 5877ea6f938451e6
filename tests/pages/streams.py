"""The pages' event streams as a test reads them through Django's client."""

from __future__ import annotations

import re

from django.test import Client


def events(client: Client, url: str, **headers: str) -> list[tuple[str, str]]:
    """(kind, data) of each event the stream sends."""
    response = client.get(url, **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream"
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    found = []
    for block in text.split("\n\n"):
        lines = block.split("\n")
        kind = next((line[7:] for line in lines if line.startswith("event: ")), None)
        if kind is not None:
            data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
            found.append((kind, data))
    return found


def connect_url(html: str) -> str:
    match = re.search(r'sse-connect="([^"]+)"', html)
    assert match is not None, "the page opens no event stream"
    return match.group(1).replace("&amp;", "&")
