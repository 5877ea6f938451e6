"""The production settings docs/security.md names leave `manage.py check --deploy` without a
warning; a bad SIMRUN_COMMAND_TIERS stops start-up naming the variable."""

from __future__ import annotations

import secrets
from pathlib import Path

from tests.simrun_site.processes import manage

PRODUCTION = {
    "SIMRUN_SECRET_KEY": secrets.token_urlsafe(60),
    "SIMRUN_ALLOWED_HOSTS": "simrun.example.org",
    "SIMRUN_CSRF_TRUSTED_ORIGINS": "https://simrun.example.org",
    "SIMRUN_HTTPS": "true",
}


def test_the_production_settings_pass_the_deploy_checks(tmp_path: Path) -> None:
    """HTTPS behind the TLS proxy, a secret key of its own, the service's host names."""
    result = manage("check", "--deploy", "--fail-level", "WARNING", cwd=tmp_path, env=PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)" in result.stdout


def test_without_https_the_deploy_checks_warn(tmp_path: Path) -> None:
    """The checks do look: without SIMRUN_HTTPS they name the cookies, the redirect, HSTS."""
    plain = {k: v for k, v in PRODUCTION.items() if k != "SIMRUN_HTTPS"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", cwd=tmp_path, env=plain)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


def test_an_unknown_tier_in_command_tiers_stops_start_up(tmp_path: Path) -> None:
    result = manage("check", cwd=tmp_path, env={"SIMRUN_COMMAND_TIERS": "owner,admin"})
    assert result.returncode != 0
    assert "SIMRUN_COMMAND_TIERS='owner,admin': admin not one of owner, person, agent" in (
        result.stderr
    )
