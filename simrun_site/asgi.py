"""ASGI entry point (web, with the event streams): `uvicorn simrun_site.asgi:application`.

Uploads over the size limit are refused by Content-Length (or cut when chunked) before Django
spools the body to disk.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
_django = get_asgi_application()

from runs.api.upload_limit import UploadSizeLimit  # noqa: E402 - needs Django set up first

application = UploadSizeLimit(_django)
