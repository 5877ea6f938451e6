"""ASGI entry point of the web process: `uvicorn simrun_site.asgi:application`.

Requests are served by Django's WSGI handler and the event and log streams by its ASGI
handler (`simrun_site.dispatch`). Postgres connections come from a pool (SIMRUN_DB_POOL,
SIMRUN_DB_POOL_SIZE): each request runs in a thread of its own, so a persistent connection
would never be reused. Uploads over the size limit are refused by Content-Length (or cut
when chunked) before Django spools the body to disk.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
os.environ.setdefault("SIMRUN_DB_POOL", "true")

from simrun_site.dispatch import build_application  # after the variables above

application = build_application()
