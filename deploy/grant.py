"""Give the server's role its grants (deploy/grants.sql) on BERGEN_DATABASE_URL's database, as
the owner of the tables, after `bergen migrate`: the container image's migration step runs
`bergen migrate && python /usr/share/bergen/grant.py`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg

from bergen.server.store.url import psycopg_conninfo, redact

GRANTS = Path(os.environ.get("BERGEN_GRANTS_SQL", Path(__file__).with_name("grants.sql")))


def main() -> int:
    url = os.environ["BERGEN_DATABASE_URL"]
    with psycopg.connect(psycopg_conninfo(url), autocommit=True, connect_timeout=10) as conn:
        conn.execute(GRANTS.read_text(encoding="utf-8"))  # type: ignore[arg-type]
    print(f"grant: {GRANTS} applied to {redact(url)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
