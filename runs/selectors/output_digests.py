"""The SHA-256 of every output file of a run, to say whether two runs made the same bytes
(`compare`'s outputs section: a run made again from a crate against the original).

Files are listed and read as the outputs are served (`runs.selectors.outputs`, no link
followed). A comparison is a request: a run with more output files or bytes than it hashes
is not compared, and says so, rather than keeping a request thread for minutes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from runs.selectors.outputs import OutputNotFound, output_file, run_outputs

MAX_FILES = 2_000
MAX_BYTES = 2 * 1024**3
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class OutputDigests:
    """Each output file's digest by `<task>/<path below out/>`, or why they were not taken."""

    digests: dict[str, str]
    not_compared: str = ""


def output_digests(
    run_id: str, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES
) -> OutputDigests:
    """The digests of a run's output files, if it has at most `max_files` of them holding
    at most `max_bytes` in all."""
    listing = run_outputs(run_id, limit=max_files + 1)
    if listing.truncated or len(listing.files) > max_files:
        return OutputDigests({}, f"more than {max_files} output files")
    if sum(f.size for f in listing.files) > max_bytes:
        return OutputDigests({}, f"more than {max_bytes} bytes of outputs")
    digests = {}
    for found in listing.files:
        key = found.path.split("/tasks/", 1)[1].replace("/out/", "/", 1)
        try:
            opened = output_file(run_id, found.path)
        except OutputNotFound:
            continue  # gone or replaced by a link since it was listed
        digest = hashlib.sha256()
        with opened.handle as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
        digests[key] = digest.hexdigest()
    return OutputDigests(digests)
