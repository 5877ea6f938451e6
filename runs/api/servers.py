"""The servers of the backend with the runs' pods and reservations (S8)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from runs.api.base import ApiView
from runs.api.serializers.errors import ErrorSerializer
from runs.api.serializers.operations import ServersSerializer
from runs.selectors.servers import servers


class ServersView(ApiView):
    """Every server: what it gives runs, its reservation, the pods of runs on it."""

    @extend_schema(responses={200: ServersSerializer, 401: ErrorSerializer, 429: ErrorSerializer})
    def get(self, request: Request) -> Response:
        found = servers()
        data = {
            "servers": [
                {
                    "name": s.name,
                    "cores": s.cores,
                    "memory_gb": s.memory_gb,
                    "gpus": s.gpus,
                    "reserved_by": s.reserved_by,
                    "cores_used": s.cores_used,
                    "memory_used_gb": s.memory_used_gb,
                    "pods": s.pods,
                }
                for s in found.servers
            ],
            "unplaced": found.unplaced,
        }
        return Response(ServersSerializer(data).data)
