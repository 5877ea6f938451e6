"""Typed readers of environment variables: every setting of simrun comes through these.

A bad value raises `ImproperlyConfigured` naming the variable, so start-up stops with a
message that says what to fix. Each reader also accepts `<NAME>_FILE`, the path of a file
holding the value (for secrets mounted by Kubernetes or compose).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def raw(name: str) -> str | None:
    """The value of `name`, or of the file named by `name_FILE`; None when neither is set."""
    value = os.environ.get(name)
    file = os.environ.get(f"{name}_FILE")
    if value is not None and file is not None:
        raise ImproperlyConfigured(f"{name} and {name}_FILE are both set; set only one")
    if file is not None:
        try:
            return Path(file).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file!r}: {exc}") from exc
    return value


def string(name: str, default: str) -> str:
    value = raw(name)
    return default if value is None else value


def boolean(name: str, default: bool) -> bool:
    value = raw(name)
    if value is None:
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false, 1/0)")


def integer(name: str, default: int, *, minimum: int | None = None) -> int:
    value = raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below its minimum {minimum}")
    return number


def number(name: str, default: float, *, minimum: float | None = None) -> float:
    value = raw(name)
    if value is None:
        return default
    try:
        result = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if minimum is not None and result < minimum:
        raise ImproperlyConfigured(f"{name}={result} is below its minimum {minimum}")
    return result


def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = string(name, default)
    if value not in allowed:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value


def strings(name: str, default: list[str]) -> list[str]:
    """A comma-separated list."""
    value = raw(name)
    if value is None:
        return default
    return [part.strip() for part in value.split(",") if part.strip()]


def choices(name: str, default: list[str], allowed: tuple[str, ...]) -> list[str]:
    """A comma-separated list of some of `allowed`; `none` (or nothing) is the empty list."""
    value = raw(name)
    if value is None:
        return default
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    if chosen == ["none"]:
        return []
    wrong = [part for part in chosen if part not in allowed]
    if wrong:
        raise ImproperlyConfigured(
            f"{name}={value!r}: {', '.join(wrong)} not one of {', '.join(allowed)} (or none)"
        )
    return chosen


def path(name: str, default: Path) -> Path:
    value = raw(name)
    return default if value is None or not value.strip() else Path(value).expanduser().resolve()


def paths(name: str, default: list[Path]) -> list[Path]:
    """A comma-separated list of paths, each `~` expanded and made absolute (not resolved:
    compared as written)."""
    value = raw(name)
    if value is None:
        return default
    return [
        Path(os.path.abspath(Path(p.strip()).expanduser())) for p in value.split(",") if p.strip()
    ]


def database(name: str, sqlite_file: Path, *, pool_size: int = 0) -> dict[str, object]:
    """Django's database settings from a URL (postgres://… or sqlite:///…), else SQLite.

    SQLite runs in WAL mode with a busy timeout, so the web process, a Celery worker and beat
    can share it on one machine (the embedded default). Postgres connections persist for a
    minute, or with `pool_size` > 0 come from a pool of at most that many (psycopg_pool): the
    web process under ASGI runs each request in a thread of its own, where a persistent
    connection would never be reused and every request would pay for a new one.
    """
    url = raw(name)
    if url is None or not url.strip():
        return _sqlite(sqlite_file)
    parts = urlsplit(url)
    if parts.scheme in {"postgres", "postgresql"}:
        if not parts.path.strip("/"):
            raise ImproperlyConfigured(f"{name}={url!r} names no database (postgres://host/NAME)")
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"{name}={url!r} has an invalid port") from None
        if pool_size > 0:
            pool = {"min_size": min(2, pool_size), "max_size": pool_size, "timeout": 10}
            options["pool"] = pool  # type: ignore[assignment]
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "OPTIONS": options,
            "CONN_MAX_AGE": 0 if pool_size > 0 else 60,
            "CONN_HEALTH_CHECKS": True,
        }
    if parts.scheme == "sqlite":
        file = unquote(parts.path)
        if not file:
            raise ImproperlyConfigured(f"{name}={url!r} names no file (sqlite:////abs/path.db)")
        return _sqlite(Path(file))
    raise ImproperlyConfigured(
        f"{name}={url!r}: unsupported scheme {parts.scheme!r} (use postgres:// or sqlite:///)"
    )


def _sqlite(file: Path) -> dict[str, object]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(file),
        "OPTIONS": {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
