"""A reader of a run's server-sent event stream for the tests (httpx; the `simrun` command
follows runs by polling and has no need of it): one connection's events, or every event
until the run ends, reconnecting with `Last-Event-ID` whenever the service ends a stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

END_EVENTS = frozenset({"end", "deleted"})


@dataclass(frozen=True)
class ServerEvent:
    """One event of a run's stream: `state`, `progress`, `end` or `deleted`."""

    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass
class EventParser:
    """Server-sent events from lines (the text/event-stream format)."""

    kind: str = "message"
    data: list[str] = field(default_factory=list)
    id: str | None = None

    def feed(self, line: str) -> ServerEvent | None:
        if not line:
            if not self.data:
                return None
            text = "\n".join(self.data)
            event = ServerEvent(self.kind, json.loads(text) if text else {}, self.id)
            self.kind, self.data, self.id = "message", [], None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self.kind = value
        elif name == "data":
            self.data.append(value)
        elif name == "id":
            self.id = value
        return None


class StreamClient:
    """The API with one token: a run's event streams, and the run itself."""

    def __init__(self, url: str, token: str, *, timeout: float = 20.0) -> None:
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def show(self, run_id: str) -> Any:
        response = self.http.get(f"runs/{run_id}/")
        response.raise_for_status()
        return response.json()

    def events(self, run_id: str, *, last_event_id: str | None = None) -> Iterator[ServerEvent]:
        """The events of one connection to the run's stream (it ends when the service ends it)."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        with self.http.stream(
            "GET", f"runs/{run_id}/events/", headers=headers, timeout=timeout
        ) as response:
            response.raise_for_status()
            parser = EventParser()
            for line in response.iter_lines():
                event = parser.feed(line)
                if event is not None:
                    yield event

    def follow(self, run_id: str, *, last_event_id: str | None = None) -> Iterator[ServerEvent]:
        """Every event of a run until it ends, reconnecting where the last stream stopped."""
        last = last_event_id
        while True:
            for event in self.events(run_id, last_event_id=last):
                if event.id is not None:
                    last = event.id
                yield event
                if event.kind in END_EVENTS:
                    return
