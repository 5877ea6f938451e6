"""The people's pages: server-rendered HTML, live parts refreshed by htmx (partials beside pages)."""
