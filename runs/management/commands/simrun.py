"""`python manage.py simrun ...`: the `simrun` command inside manage.py."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "The simrun command (see `simrun --help`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*")

    def run_from_argv(self, argv: list[str]) -> None:
        from runs.cli.main import main

        sys.exit(main(argv[2:]))

    def handle(self, *args: Any, **options: Any) -> None:
        from runs.cli.main import main

        code = main(list(args))
        if code:
            sys.exit(code)
