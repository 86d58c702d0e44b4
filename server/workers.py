"""A worker of `bergen serve --workers N`: `python -m bergen.server.workers SPEC`, started by
the supervisor (bergen.server.supervisor), serves as one `bergen serve` does with the config
SPEC holds, and dies with its supervisor."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping

from bergen.api.exit_status import ExitStatus

from .config import Config, ConfigError
from .startup import serve


def _die_with_parent(parent: int) -> None:
    """SIGTERM this process when its supervisor dies (Linux); exit at once when it already
    has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        sys.exit(ExitStatus.ERROR)


def worker_main(argv: list[str], environ: Mapping[str, str] = os.environ) -> int:
    """A worker: `python -m bergen.server.workers SPEC` (SPEC: the JSON the supervisor
    wrote: its config, with this worker's listen address, port file and place, and the
    supervisor's pid); the organiser token comes from `environ`, never the command line."""
    if len(argv) != 1:
        print("usage: python -m bergen.server.workers SPEC (started by bergen serve)")
        return ExitStatus.USAGE
    spec = json.loads(argv[0])
    if not isinstance(spec, dict):
        return ExitStatus.USAGE
    _die_with_parent(int(spec["supervisor_pid"]))
    try:
        config = Config.from_spec(spec["config"], environ)
    except (ConfigError, TypeError, KeyError) as e:
        print(f"bergen serve worker: {e}", file=sys.stderr)
        return ExitStatus.USAGE
    return serve(config)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
