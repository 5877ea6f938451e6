"""The people's pages: server-rendered HTML; htmx refreshes the live parts (partials)."""
