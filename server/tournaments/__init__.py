"""Tournaments on the server, one module a job:

- `tables`: their streams and ids, their tables' matches (names, rules, metadata);
- `seeds`: their seeds, derived from the log keys, in no event before the end;
- `repository`: a tournament as folded, and its repository and unit of work (the same as a
  match's, `bergen.server.unit_of_work`);
- `service`: the commands, the organiser's, the entrants' and the process manager's steps;
- `views`: what the API shows of them (views, watching, listing, records, manifests).

The process manager that drives rounds is `bergen.server.tournament_manager`.
"""

from .repository import Tournament, TournamentRepository, TournamentWork
from .seeds import TournamentSeeds
from .service import TournamentCommands
from .tables import (
    STREAM_PREFIX,
    check_match_text,
    check_tournament_id,
    is_tournament_stream,
    table_match_name,
    table_metadata,
    table_rules,
    tournament_stream,
    tournament_table,
)
from .views import Assignment, TableWakes, TournamentView

__all__ = [
    "STREAM_PREFIX",
    "Assignment",
    "TableWakes",
    "Tournament",
    "TournamentCommands",
    "TournamentRepository",
    "TournamentSeeds",
    "TournamentView",
    "TournamentWork",
    "check_match_text",
    "check_tournament_id",
    "is_tournament_stream",
    "table_match_name",
    "table_metadata",
    "table_rules",
    "tournament_stream",
    "tournament_table",
]
