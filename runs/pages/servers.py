"""Servers: each node with its pods as bars of cores and memory, and its reservation."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render

from runs.models import Identity
from runs.pages import plots
from runs.pages.access import HtmxHttpRequest, with_identity
from runs.selectors.servers import ServerUsage
from runs.selectors.servers import servers as all_servers

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


@with_identity
def servers(request: HtmxHttpRequest, identity: Identity) -> HttpResponse:
    """The servers page; the list alone when htmx refreshes it."""
    found = all_servers()
    context = {"servers": [server_view(s) for s in found.servers], "unplaced": found.unplaced}
    if request.htmx and request.htmx.target == "servers-live":
        return render(request, f"{TEMPLATE}#nodes", context)
    return render(request, TEMPLATE, context)
