"""WSGI entry point (the admin and pages without event streams)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simrun_site.settings")
application = get_wsgi_application()
