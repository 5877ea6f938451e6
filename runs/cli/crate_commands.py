"""`simrun export` and `simrun crate validate`: a run as a Workflow Run RO-Crate, and the check of
any crate with `roc-validator`, offline (docs/provenance.md). The export is a request of the API
(runs/cli/client.py), with a bar of the bytes received in a terminal; validation needs no
service. A crate is run again by `simrun submit --from-crate` (runs/cli/run_commands.py)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from runs.cli.base import CommandError

LOCAL_MAX_FILES = 100_000
LOCAL_MAX_UNPACKED = 64 * 1024**3


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export an ended run as a Workflow Run RO-Crate")
    p.add_argument("run")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR|FILE.zip",
        help="where to write it: a zip (FILE.zip) or a new directory (default: "
        "simrun-RUN.crate.zip here)",
    )
    holds = p.add_mutually_exclusive_group()
    holds.add_argument(
        "--with-outputs",
        dest="metadata_only",
        action="store_false",
        help="hold every byte it describes: sources, environment, logs, outputs (the default)",
    )
    holds.add_argument(
        "--metadata-only",
        dest="metadata_only",
        action="store_true",
        help="describe every file by its digest and size without holding its bytes",
    )
    p.set_defaults(handler=export, metadata_only=False)
    crate = sub.add_parser("crate", help="RO-Crates: check one offline")
    verbs = crate.add_subparsers(dest="crate_command", required=True, metavar="VERB")
    v = verbs.add_parser(
        "validate",
        help="validate a crate (directory or zip) with roc-validator, offline, at the REQUIRED "
        "level of every profile it declares; exit 0 only when valid",
    )
    v.add_argument("crate", type=Path)
    v.set_defaults(handler=validate)


def export(args: argparse.Namespace) -> int:
    """The API's crate of the run: a zip as it comes, or unpacked (with the checks of
    uploads) into a new directory when the target's name does not end in .zip."""
    from urllib.parse import quote

    from runs.cli.client import connect
    from runs.cli.transfers import transfer_bar

    target: Path = args.out or Path(f"simrun-{args.run}.crate.zip")
    zipped = target if target.suffix.lower() == ".zip" else target.with_name(f".{target.name}.zip")
    only = "true" if args.metadata_only else None
    client = connect()
    with transfer_bar(f"exporting {args.run}", None) as moved:
        client.download(
            f"runs/{quote(args.run, safe='')}/crate/", zipped, moved=moved, metadata_only=only
        )
    if zipped != target:
        from runs.services.crate_archives import unpack_crate
        from runs.services.uploads import UploadLimits

        limits = UploadLimits(zipped.stat().st_size, LOCAL_MAX_FILES, LOCAL_MAX_UNPACKED)
        try:
            unpack_crate(zipped, target, limits)
        finally:
            zipped.unlink(missing_ok=True)
    print(f"exported run {args.run} to {target}")
    return 0


def validate(args: argparse.Namespace) -> int:
    """Needs no installation: the crate and the installed validator only."""
    from runs.crates.validation import CrateUnreadable, validate_crate
    from runs.services.crate_archives import unpack_crate
    from runs.services.uploads import UploadLimits, UploadRefused

    crate: Path = args.crate
    if not crate.exists():
        raise CommandError(f"{crate}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="simrun-crate-") as tmp:
        if crate.is_file():
            limits = UploadLimits(
                max_bytes=crate.stat().st_size,
                max_files=LOCAL_MAX_FILES,
                max_unpacked_bytes=LOCAL_MAX_UNPACKED,
            )
            try:
                crate = unpack_crate(crate, Path(tmp) / "crate", limits)
            except UploadRefused as exc:
                raise CommandError(f"{args.crate}: {exc}") from None
        try:
            verdict = validate_crate(crate)
        except CrateUnreadable as exc:
            raise CommandError(f"{args.crate}: {exc}") from None
    for line in verdict.lines():
        print(line)
    return 0 if verdict.valid else 1
