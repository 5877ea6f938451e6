"""The people's pages. Each view serves its page and, asked by htmx, the partial it refreshes."""

from django.urls import path

from runs.pages import (
    compare,
    housekeeping,
    live,
    run_files,
    run_list,
    run_page,
    servers,
    submit,
)

app_name = "pages"

urlpatterns = [
    path("", run_list.runs, name="runs"),
    path("events/", live.runs_events, name="runs-events"),
    path("runs/<str:run_id>/", run_page.run, name="run"),
    path("runs/<str:run_id>/events/", live.run_events, name="run-events"),
    path("runs/<str:run_id>/cancel/", run_page.cancel, name="cancel"),
    path("runs/<str:run_id>/tasks/<str:task_id>/logs/<str:pod>/", run_files.log, name="log"),
    path(
        "runs/<str:run_id>/tasks/<str:task_id>/logs/<str:pod>/events/",
        live.log_events,
        name="log-events",
    ),
    path("runs/<str:run_id>/files/<path:path>", run_files.download, name="download"),
    path("runs/<str:run_id>/crate/", run_files.crate, name="crate"),
    path("servers/", servers.servers, name="servers"),
    path("servers/events/", servers.servers_events, name="servers-events"),
    path("compare/", compare.compare, name="compare"),
    path("submit/", submit.submit, name="submit"),
    path("submit/types/<str:name>/", submit.task_type, name="task-type"),
    path("cleanup/", housekeeping.cleanup, name="cleanup"),
    path("usage/", housekeeping.usage, name="usage"),
]
