"""The web process's edge: what runs in its event loop before, beside or after a request
thread (reads on a small pool of threads of their own, streams handed over by views)."""
