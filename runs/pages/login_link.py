"""`/login/link/<uid>/<token>/`: a one-time link logs its holder in (services/login_links)."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from runs.services.login_links import user_of_link


def login_link(request: HttpRequest, uid: str, token: str) -> HttpResponse:
    """Log in as the link's user and go to the runs; a used or expired link says how to get
    a new one (410)."""
    user = user_of_link(uid, token)
    if user is None:
        return render(
            request,
            "registration/login_link_gone.html",
            {"reason": "This login link was used already or has expired."},
            status=410,
        )
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect("pages:runs")
