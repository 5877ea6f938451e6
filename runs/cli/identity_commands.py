"""`simrun owner|person|agent create`, `simrun token create|list|revoke|import` and
`simrun login`: admin commands, which work on this machine's database directly."""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError, setup_django


def register(sub: Any) -> None:
    for kind in ("owner", "person", "agent"):
        p = sub.add_parser(
            kind, help=f"manage the {kind}" if kind == "owner" else f"manage {kind}s"
        )
        verbs = p.add_subparsers(dest="verb", required=True)
        c = verbs.add_parser("create", help=f"create the {kind}")
        c.add_argument("name")
        if kind == "agent":
            c.add_argument("--acts-for", required=True, help="the person the agent acts for")
        else:
            c.add_argument(
                "--password-env",
                metavar="VAR",
                help="read the login password from this environment variable (else prompt, "
                "or no password when there is no terminal)",
            )
        c.set_defaults(handler=create_identity, kind=kind)

    token = sub.add_parser("token", help="manage bearer tokens")
    verbs = token.add_subparsers(dest="verb", required=True)
    c = verbs.add_parser("create", help="create a token; it is shown once")
    c.add_argument("name", help="the identity")
    c.add_argument("--label", default="")
    c.set_defaults(handler=create_token)
    ls = verbs.add_parser("list", help="list tokens (prefixes only)")
    ls.set_defaults(handler=list_tokens)
    rv = verbs.add_parser("revoke", help="revoke a token by its prefix or id")
    rv.add_argument("token")
    rv.set_defaults(handler=revoke_token)
    im = verbs.add_parser("import", help="create identities and tokens from a YAML file")
    im.add_argument("file", type=Path)
    im.set_defaults(handler=import_tokens)

    login = sub.add_parser(
        "login", help="print a one-time link that logs in to the pages (the owner by default)"
    )
    login.add_argument("name", nargs="?", help="the person to log in as (default: the owner)")
    login.set_defaults(handler=print_login_link)


def login_link_line(data_dir: Path, url: str, name: str | None = None) -> str:
    """The line that gives a one-time login link of `name` (the owner by default) to the
    service at `url`; Django set up."""
    from django.conf import settings

    from runs.services.login_links import NoLoginLink, login_link_for

    try:
        who, path = login_link_for(name)
    except NoLoginLink as exc:
        raise CommandError(str(exc)) from None
    minutes = settings.SIMRUN_LOGIN_LINK_S / 60
    return (
        f"{url.rstrip('/')}{path}  (logs in as {who} once, within {minutes:g} "
        "minutes; `simrun login` prints another)"
    )


def print_login_link(args: argparse.Namespace) -> int:
    setup_django()
    from django.conf import settings

    from runs.cli.service_state import read_state

    data_dir = Path(settings.DATA_DIR)
    record = read_state(data_dir)
    if record is None or not record.alive() or not record.url:
        raise CommandError(
            f"simrun is not serving this data directory ({data_dir}): start it with "
            "`simrun serve`, which prints a login link, or run `simrun login` again then"
        )
    print(login_link_line(data_dir, record.url, args.name))
    return 0


def create_identity(args: argparse.Namespace) -> int:
    setup_django()
    from runs.services.identities import IdentityError
    from runs.services.identities import create_identity as create

    password = None
    if args.kind != "agent":
        if args.password_env:
            password = os.environ.get(args.password_env)
            if not password:
                raise CommandError(f"--password-env {args.password_env}: the variable is empty")
        elif os.isatty(0):
            password = getpass.getpass(f"password for {args.name} (empty: none): ") or None
    try:
        identity = create(
            name=args.name,
            kind=args.kind,
            acts_for=getattr(args, "acts_for", None),
            password=password,
        )
    except IdentityError as exc:
        raise CommandError(str(exc)) from None
    print(f"created {identity.kind} {identity.name}")
    return 0


def create_token(args: argparse.Namespace) -> int:
    setup_django()
    from runs.selectors.identities import identity_named
    from runs.services.identities import create_token as create

    identity = identity_named(args.name)
    if identity is None:
        raise CommandError(f"no identity named {args.name!r}")
    new = create(identity=identity, label=args.label)
    print(new.secret)
    print(f"# token {new.token.prefix}… for {identity.name}: shown once, keep it now", flush=True)
    return 0


def list_tokens(args: argparse.Namespace) -> int:
    setup_django()
    from runs.selectors.identities import tokens

    print(f"{'ID':>4}  {'PREFIX':10} {'IDENTITY':20} {'STATE':8} {'LAST USED':20} LABEL")
    for t in tokens():
        state = "revoked" if t.revoked_at else "active"
        used = t.last_used_at.strftime("%Y-%m-%d %H:%M") if t.last_used_at else "never"
        print(f"{t.pk:>4}  {t.prefix:10} {t.identity.name:20} {state:8} {used:20} {t.label}")
    return 0


def revoke_token(args: argparse.Namespace) -> int:
    setup_django()
    from runs.services.identities import IdentityError
    from runs.services.identities import revoke_token as revoke

    try:
        token = revoke(prefix_or_id=args.token)
    except IdentityError as exc:
        raise CommandError(str(exc)) from None
    print(f"revoked {token.prefix}… of {token.identity.name}")
    return 0


def import_tokens(args: argparse.Namespace) -> int:
    import yaml

    setup_django()
    from runs.services.identities import IdentityError
    from runs.services.identities import import_tokens as load

    try:
        data = yaml.safe_load(args.file.read_text())
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise CommandError(f"{args.file}: not valid YAML: {exc}") from None
    try:
        created = load(data=data)
    except IdentityError as exc:
        raise CommandError(f"{args.file}: {exc}") from None
    print(f"imported: {created['identities']} identities, {created['tokens']} tokens")
    return 0
