"""The base classes of every API view: bearer tokens, rate limits, one error shape."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from rest_framework import viewsets
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.views import APIView

from runs.api.errors import api_exception_handler
from runs.api.throttling import TokenRateThrottle


class AcceptOnly(DefaultContentNegotiation):
    """Media types by the Accept header alone: a `format` query parameter means nothing."""

    settings = cast(Any, SimpleNamespace(URL_FORMAT_OVERRIDE=None))


class ApiView(APIView):
    """An API view; subclasses add get/post."""

    throttle_classes = [TokenRateThrottle]
    content_negotiation_class = AcceptOnly

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Any]:
        return api_exception_handler


class ApiViewSet(viewsets.ViewSetMixin, ApiView):
    """An API view set; subclasses add list/retrieve/... and actions."""
