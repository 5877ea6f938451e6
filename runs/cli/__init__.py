"""The `simrun` command: the same commands as `python manage.py simrun`."""
