"""The base classes of every API view: bearer tokens, rate limits, one error shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import viewsets
from rest_framework.views import APIView

from runs.api.errors import api_exception_handler
from runs.api.throttling import TokenRateThrottle


class _Api:
    throttle_classes = [TokenRateThrottle]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Any]:
        return api_exception_handler


class ApiView(_Api, APIView):
    """An API view; subclasses add get/post."""


class ApiViewSet(_Api, viewsets.ViewSet):
    """An API view set; subclasses add list/retrieve/... and actions."""
