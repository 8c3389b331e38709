"""A recorded pair exported as a self-contained regression case.

A case is a pair directory cut down to what a replay needs, in the recordings format (so every
tool that reads a pair reads a case): pair.json with the legs and the expected comparison, the
client's request, the provider's answers attempt by attempt (the cassette), the client's answer
for reference, and a README that says how to run it. Header and query values the recording
redacted stay `[redacted]`: secrets are supplied when the case runs (`--header`, `--query`),
never stored in it.
"""

from __future__ import annotations

from pathlib import Path

from calltap import recordings
from calltap.replay.cassette import Recorded

README = """\
calltap regression case {request_id}: recorded verdict {verdict}{codes}.

Run it against a gateway whose provider base URL points at 127.0.0.1:8701:

  calltap replay --case {directory} --gateway http://127.0.0.1:4000{headers}

Exit 0: the gateway still answers as recorded; 1: it answers differently (fixed, or broken
another way); 3: it asked the provider for something this case does not hold.
"""


def export(recorded: Recorded, directory: Path) -> None:
    """Write `recorded` as a case in `directory`, which must not exist (FileExistsError)."""
    files: dict[str, bytes] = {}
    legs = recorded.document.get("legs")
    for leg in _legs(legs):
        for name in recordings.leg_files(leg):
            if name not in files:
                files[name] = (recorded.directory / name).read_bytes()
    recordings.write_pair_directory(directory, recorded.document, files, readme(recorded,
                                                                                 directory))


def readme(recorded: Recorded, directory: Path) -> str:
    codes = recorded.codes
    secrets = [*(f"--header '{name}: …'" for name in recorded.client.redacted),
               *(f"--query '{name}=…'" for name in recorded.client.redacted_parameters)]
    return README.format(
        request_id=recorded.request_id,
        verdict=recorded.verdict,
        codes=f" ({', '.join(codes)})" if codes else "",
        directory=directory,
        headers="".join(f" \\\n      {flag}" for flag in secrets),
    )


def _legs(legs: object) -> list[dict[str, object]]:
    if not isinstance(legs, dict):
        return []
    found = [leg for side in recordings.SIDES if isinstance(leg := legs.get(side), dict)]
    attempts = legs.get("upstream_attempts")
    if isinstance(attempts, list):
        found.extend(leg for leg in attempts if isinstance(leg, dict))
    return found
