"""Who may see a page: a logged-in user with an identity; the owner for the lab pages.

A user without an identity (e.g. a bare Django superuser) gets a 403 page that says why,
rather than an empty list of runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Concatenate, ParamSpec

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from runs.selectors.identities import identity_of_user

if TYPE_CHECKING:
    from runs.models import Identity

P = ParamSpec("P")


class HtmxHttpRequest(HttpRequest):
    """A request seen through django-htmx's middleware."""

    htmx: HtmxDetails


PageView = Callable[Concatenate[HtmxHttpRequest, "Identity", P], HttpResponseBase]


def identity_of(request: HttpRequest) -> Identity | None:
    """The identity of the logged-in user, None when the user has none."""
    user = request.user
    if not user.is_authenticated:
        return None
    return identity_of_user(user.pk)


def forbidden(request: HttpRequest, reason: str) -> HttpResponse:
    """The 403 page, saying why."""
    return render(request, "runs/forbidden.html", {"reason": reason}, status=403)


def with_identity(view: PageView[P]) -> Callable[Concatenate[HttpRequest, P], HttpResponseBase]:
    """Log in first; then the view gets the user's identity, or the user gets a 403."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        identity = identity_of(request)
        if identity is None:
            return forbidden(
                request,
                f"The user {request.user.get_username()!r} has no simrun identity. "
                "Ask the owner of the lab to create one for you.",
            )
        return view(request, identity, *args, **kwargs)  # type: ignore[arg-type]

    return wrapper


def owner_only(view: PageView[P]) -> Callable[Concatenate[HttpRequest, P], HttpResponseBase]:
    """Pages that change or measure the whole lab: the owner only, 403 for everyone else."""

    @wraps(view)
    def check(
        request: HtmxHttpRequest, identity: Identity, *args: P.args, **kwargs: P.kwargs
    ) -> HttpResponseBase:
        if not identity.is_owner:
            return forbidden(request, "Only the owner of the lab may open this page.")
        return view(request, identity, *args, **kwargs)

    return with_identity(check)
