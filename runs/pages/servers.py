"""Servers: each node with its pods as bars of cores and memory, and its reservation.

The page follows its stream (`/servers/events/`), which asks the backend every
SIMRUN_SERVERS_POLL_S and sends the servers' part only when it differs from the one shown (a
digest of its HTML, as the run page's stream does); without JavaScript the page reloads
itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.template.loader import render_to_string

from runs.pages import plots
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.pages.live import DIGEST, bad_request, event, streamed
from runs.pages.run_page import live_digest
from runs.selectors.servers import ServerUsage
from runs.selectors.servers import servers as all_servers

if TYPE_CHECKING:
    from runs.models import Identity

TEMPLATE = "runs/servers.html"


def server_view(server: ServerUsage) -> dict[str, Any]:
    """A server with its bars drawn."""
    bars = plots.server_bars(
        name=server.name,
        cores=server.cores,
        memory_gb=server.memory_gb,
        pods=[plots.PodBar(p.pod, p.run_id, p.cores, p.memory_gb) for p in server.pods],
    )
    pods = [{"pod": p, "fill": plots.run_fill(p.run_id)} for p in server.pods]
    return {"server": server, "bars": bars, "pods": pods}


def servers_context() -> dict[str, Any]:
    found = all_servers()
    return {"servers": [server_view(s) for s in found.servers], "unplaced": found.unplaced}


@with_identity
def servers(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """The servers page; the servers' part alone when htmx asks for it."""
    context = servers_context()
    nodes = render_to_string(f"{TEMPLATE}#nodes", context, request=request)
    if request.htmx and request.htmx.target == "servers-live":
        return HttpResponse(nodes)
    seen = live_digest(nodes)
    return render(
        request,
        TEMPLATE,
        {**context, "seen": seen, "refresh_s": settings.SIMRUN_SERVERS_POLL_S * 2},
    )


class ServersWatch:
    """The servers' part, sent whenever it differs from the one the page shows."""

    def __init__(self, request: HttpRequest, seen: str) -> None:
        self.request, self.seen = request, seen
        self.ended = False

    def poll(self) -> list[bytes]:
        html = render_to_string(f"{TEMPLATE}#nodes", servers_context(), request=self.request)
        if live_digest(html) == self.seen:
            return []
        self.seen = live_digest(html)
        return [event("servers", html, self.seen)]


@with_identity
def servers_events(request: HtmxHttpRequest, identity: Identity) -> HttpResponseBase:
    """The servers page's stream (see the module's docstring)."""
    seen = request.headers.get("Last-Event-ID") or request.GET.get("seen", "")
    if seen and not DIGEST.match(seen):
        return bad_request(
            f"seen: {seen[:80]!r} is not a digest this page sent (hexadecimal, 1-40)"
        )
    watch = ServersWatch(request, seen)
    return streamed(request, identity, watch, poll_s=settings.SIMRUN_SERVERS_POLL_S)
