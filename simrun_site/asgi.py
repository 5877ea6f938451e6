"""ASGI entry point (web, with the event streams): `uvicorn simrun_site.asgi:application`."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
application = get_asgi_application()
