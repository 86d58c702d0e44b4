"""`bergen migrate` and `bergen token`: the server's commands that do not serve."""

from __future__ import annotations

import argparse
import os
import sys

from bergen.api.exit_status import ExitStatus
from bergen.api.helptext import error_line

from . import auth
from .store import open_store, schema_is_behind, upgrade_to_head
from .store.ratings import RATINGS
from .store.url import redact


def migrate_command(args: argparse.Namespace) -> int:
    if schema_is_behind(args.database):
        upgrade_to_head(args.database)
        print(f"migrated {redact(args.database)} to the current schema")
    else:
        print(f"{redact(args.database)} is up to date")
    if getattr(args, "rebuild_ratings", False):
        store = open_store(args.database)
        try:
            store.ratings().reset(RATINGS)
        finally:
            store.close()
        print("the ratings are emptied: the servers fold every rated match again")
    return ExitStatus.SUCCESS


def token_command(args: argparse.Namespace) -> int:
    if args.file is None:
        print(auth.new_organiser_token())
        return ExitStatus.SUCCESS
    try:
        with open(args.file, encoding="utf-8") as f:
            held = f.read().strip()
    except FileNotFoundError:
        held = ""
    except OSError as e:
        print(error_line("token", f"{args.file}: {e.strerror or e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    if held:
        try:
            auth.check_organiser_token(held)
        except auth.WeakToken as e:
            print(error_line("token", f"{args.file}: {e}", "USAGE"), file=sys.stderr)
            return ExitStatus.USAGE
        print(f"{args.file} holds a good organiser token; left as it is")
        return ExitStatus.SUCCESS
    try:
        fd = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(auth.new_organiser_token() + "\n")
    except OSError as e:
        print(error_line("token", f"{args.file}: {e.strerror or e}", "USAGE"), file=sys.stderr)
        return ExitStatus.USAGE
    print(f"wrote a fresh organiser token to {args.file}")
    return ExitStatus.SUCCESS
