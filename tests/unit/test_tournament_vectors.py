"""Every figure of TOURNAMENT.md's test vectors (test-vectors/tournament.json), reproduced:
derivations, round-robin tables, and whole tournaments paired round by round from the table
results before each round, down to the standings."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bergen.domain.errors import CorruptRecord
from bergen.domain.tournament_fairness import (
    commitment,
    match_id,
    seeding_key,
    seeding_order,
    table_server_seed,
)
from bergen.domain.tournament_pairing import round_robin_round
from bergen.domain.tournament_record import (
    Tournament,
    build_tournament_record,
    check_tournament_record,
    next_round,
    parse_tournament_record,
)
from bergen.domain.tournament_standings import TableResult, score_result

# A copy of ../shared/test-vectors/tournament.json, so that a fresh clone alone runs these tests.
VECTORS_PATH = Path(__file__).with_name("vectors") / "tournament.json"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "test-vectors" / "tournament.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
TOURNAMENTS = VECTORS["tournaments"]
# test-vectors/tournament-reveal.json: entrants that never revealed their seeds (section 3).
REVEAL_PATH = Path(__file__).with_name("vectors") / "tournament-reveal.json"
SHARED_REVEAL = SHARED.with_name("tournament-reveal.json")
REVEAL: dict[str, Any] = json.loads(REVEAL_PATH.read_text(encoding="utf-8"))


def _vectors() -> dict[str, Any]:
    return VECTORS


@pytest.mark.skipif(not SHARED.exists(), reason="no ../shared beside this clone")
def test_the_copied_vectors_are_the_shared_ones():
    assert json.loads(SHARED.read_text(encoding="utf-8")) == VECTORS


def test_commitment_is_the_sha256_of_the_tournament_seed():
    d = _vectors()["derivations"]
    assert commitment(bytes.fromhex(d["tournament_seed"])) == d["commitment"]


def test_seeding_key_and_order_follow_the_seed_the_id_and_every_client_seed():
    d = _vectors()["derivations"]
    seed = bytes.fromhex(d["tournament_seed"])
    assert seeding_key(seed, d["tournament_id"], d["client_seeds"]).hex() == d["seeding_key"]
    assert list(seeding_order(seed, d["tournament_id"], d["client_seeds"])) == d["seeding"]


def test_match_ids_and_server_seeds_of_tables():
    d = _vectors()["derivations"]
    seed = bytes.fromhex(d["tournament_seed"])
    assert d["matches"]
    for m in d["matches"]:
        mid = match_id(d["tournament_id"], m["round"], m["table"])
        assert mid == m["match_id"]
        assert table_server_seed(seed, mid).hex() == m["server_seed"]


@pytest.mark.parametrize("n", ["4", "5", "6"])
def test_round_robin_tables_byes_and_sides(n):
    rounds = _vectors()["round_robin"][n]
    assert len(rounds) == int(n) + int(n) % 2 - 1
    for r in rounds:
        byes, tables = round_robin_round(int(n), r["round"])
        assert list(byes) == r["byes"], r["round"]
        assert [list(t) for t in tables] == r["tables"], r["round"]


def _replay(record: dict[str, Any]) -> dict[str, Any]:
    """The record rebuilt from the seed, the entrants and the table results alone: each
    round paired by the code from the results before it."""
    given = parse_tournament_record(record)
    seed = bytes.fromhex(record["tournament_seed"])
    part = given.taking_part()
    t: Tournament = dataclasses.replace(
        given,
        seeding=seeding_order(
            seed, given.tournament_id, [e.client_seed for e in part], [e.entrant for e in part]
        ),
        rounds=(),
        tournament_seed=None,
        ended=False,
    )
    for given_round in record["rounds"]:
        paired = next_round(t)
        tables = []
        for table, given_table in zip(paired.tables, given_round["tables"], strict=False):
            if table.result is None:
                res = given_table["result"]
                result = score_result(
                    TableResult(res["reason"], tuple(res["scores"]), res["forfeited_side"])
                )
                table = dataclasses.replace(table, result=result)
            tables.append(table)
        t = dataclasses.replace(
            t, rounds=(*t.rounds, dataclasses.replace(paired, tables=tuple(tables)))
        )
    t = dataclasses.replace(t, ended=True, tournament_seed=record["tournament_seed"])
    return build_tournament_record(t)


@pytest.mark.parametrize("index", range(len(TOURNAMENTS)))
def test_whole_tournament_is_reproduced_from_its_table_results(index):
    record = _vectors()["tournaments"][index]["record"]
    rebuilt = _replay(record)
    for key in ("seeding", "rounds", "standings"):
        assert rebuilt[key] == record[key], key
    assert rebuilt == record


@pytest.mark.parametrize("index", range(len(TOURNAMENTS)))
def test_whole_tournament_record_passes_the_check(index):
    record = _vectors()["tournaments"][index]["record"]
    check_tournament_record(record)


def test_vectors_cover_a_withdrawal_a_forfeit_shared_places_and_a_bye():
    records = [t["record"] for t in _vectors()["tournaments"]]
    assert any(e["withdrawn_after_round"] for r in records for e in r["entrants"])
    results = [tb["result"] for r in records for rd in r["rounds"] for tb in rd["tables"]]
    assert any(res["forfeited_side"] is not None for res in results)
    assert any("/" in p for res in results for p in res["match_points"])
    assert any(rd["byes"] for r in records for rd in r["rounds"])


def _tampered(index: int, change: Any) -> dict[str, Any]:
    record = copy.deepcopy(_vectors()["tournaments"][index]["record"])
    change(record)
    return record


def _swap_sides(r: dict[str, Any]) -> None:
    t = r["rounds"][2]["tables"][1]
    t["sides"].reverse()


def _swap_pairs(r: dict[str, Any]) -> None:
    a, b = r["rounds"][3]["tables"][0], r["rounds"][3]["tables"][1]
    a["sides"][1], b["sides"][1] = b["sides"][1], a["sides"][1]


def _move_bye(r: dict[str, Any]) -> None:
    r["rounds"][1]["byes"] = [7]


def _change_match_id(r: dict[str, Any]) -> None:
    r["rounds"][4]["tables"][3]["match_id"] = r["rounds"][4]["tables"][2]["match_id"]


def _change_score(r: dict[str, Any]) -> None:
    res = r["rounds"][0]["tables"][0]["result"]
    res["scores"] = [15, 13]


def _change_buchholz(r: dict[str, Any]) -> None:
    r["standings"][4]["buchholz"] = "15"


def _swap_seeding(r: dict[str, Any]) -> None:
    r["seeding"][0], r["seeding"][1] = r["seeding"][1], r["seeding"][0]


def _change_client_seed(r: dict[str, Any]) -> None:
    r["entrants"][2]["client_seed"] = "x"


def _change_commitment(r: dict[str, Any]) -> None:
    r["commitment"] = "0" * 64


def _change_withdrawal(r: dict[str, Any]) -> None:
    r["entrants"][3]["withdrawn_after_round"] = 1


@pytest.mark.parametrize(
    ("change", "place"),
    [
        (_swap_sides, "rounds[2].tables[1].sides"),
        (_swap_pairs, "rounds[3].tables[0].sides"),
        (_move_bye, "rounds[1].byes"),
        (_change_match_id, "rounds[4].tables[3].match_id"),
        (_change_score, "rounds[0].tables[0].result.places"),
        (_change_buchholz, "standings[4].buchholz"),
        (_swap_seeding, "seeding"),
        (_change_client_seed, "seeding"),
        (_change_commitment, "commitment"),
        (_change_withdrawal, "rounds[1].byes"),
    ],
)
def test_a_changed_field_is_rejected_with_its_place(change, place):
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(_tampered(0, change))
    assert caught.value.metadata["place"] == place


def test_a_wrong_multi_sided_seat_order_is_rejected():
    def change(r: dict[str, Any]) -> None:
        sides = r["rounds"][1]["tables"][1]["sides"]
        sides[0], sides[1] = sides[1], sides[0]

    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(_tampered(1, change))
    assert caught.value.metadata["place"] == "rounds[1].tables[1].sides"


def test_a_double_round_robin_return_round_with_sides_not_swapped_is_rejected():
    def change(r: dict[str, Any]) -> None:
        r["rounds"][5]["tables"][0]["sides"].reverse()

    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(_tampered(2, change))
    assert caught.value.metadata["place"] == "rounds[5].tables[0].sides"


@pytest.mark.parametrize("after", [-1, 6])
def test_a_withdrawal_after_a_round_not_paired_is_rejected(after):
    def change(r: dict[str, Any]) -> None:
        r["entrants"][6]["withdrawn_after_round"] = after

    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(_tampered(0, change))
    assert caught.value.metadata["place"] == "entrants[6].withdrawn_after_round"


@pytest.mark.skipif(not SHARED_REVEAL.exists(), reason="no ../shared beside this clone")
def test_the_copied_reveal_vectors_are_the_shared_ones():
    assert json.loads(SHARED_REVEAL.read_text(encoding="utf-8")) == REVEAL


@pytest.mark.parametrize("index", range(len(REVEAL["tournaments"])))
def test_entrants_that_never_revealed_take_no_part_in_seeding_pairings_or_standings(index):
    record = REVEAL["tournaments"][index]["record"]
    silent = [e["entrant"] for e in record["entrants"] if e["withdrawn_by"] == "no_reveal"]
    assert silent
    check_tournament_record(record)
    rebuilt = _replay(record)
    for key in ("seeding", "rounds", "standings"):
        assert rebuilt[key] == record[key], key
    assert not set(silent) & set(rebuilt["seeding"])
    assert not set(silent) & {s["entrant"] for s in rebuilt["standings"]}


def test_a_seeding_that_counts_an_entrant_that_never_revealed_is_rejected():
    record = copy.deepcopy(REVEAL["tournaments"][0]["record"])
    record["entrants"][2]["withdrawn_by"] = "entrant"  # as if it had taken part
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(record)
    assert caught.value.metadata["place"] == "seeding"


def test_a_revealed_seed_that_does_not_match_its_commitment_is_rejected():
    record = copy.deepcopy(REVEAL["tournaments"][0]["record"])
    record["entrants"][0]["client_seed_commitment"] = "0" * 64
    with pytest.raises(CorruptRecord) as caught:
        check_tournament_record(record)
    assert caught.value.metadata["place"] == "entrants[0].client_seed_commitment"
