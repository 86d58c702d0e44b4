"""Tournament audit packs: simulated tournaments of each format verify whole, and the same
pack with one field changed anywhere (a pairing, a standing, a seed, a match id, a seat, an
action, a hash, a signature), or a file missing or added, is rejected naming the place."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.exit_status import ExitStatus
from bergen.api.signing import RecordSigner
from bergen.cli_client.main import main
from bergen.cli_client.simulate import simulate_tournament, tournament_settings
from bergen.cli_client.tournament_pack import (
    MANIFEST_FILE,
    TOURNAMENT_FILE,
    build_manifest,
    file_bytes,
    pack_contents,
    served_pack,
)
from bergen.cli_client.verify import Outcome, verify_pack
from bergen.domain.tournament_fairness import match_id, table_server_seed
from bergen.domain.tournament_pairing import seats_of
from bergen.domain.tournament_record import (
    build_tournament_record,
    parse_tournament_record,
)
from bergen.domain.tournament_standings import TableResult, score_result

KEY = RecordSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
OTHER_KEY = RecordSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))

# name: (format, seats, partnerships, rounds, entrants)
FORMATS = {
    "swiss at 2 seats": ("swiss", 2, False, 3, 7),
    "swiss at 4 individual seats": ("swiss", 4, False, 3, 10),
    "double round robin at partnership tables": ("double_round_robin", 4, True, None, 3),
}


@dataclass
class Pack:
    """A pack's files in memory (path -> parsed JSON), signed by KEY when written."""

    files: dict[str, Any]

    @classmethod
    def of(cls, contents: dict[str, bytes]) -> Pack:
        return cls({p: json.loads(b) for p, b in contents.items()})

    def copy(self) -> Pack:
        return Pack(copy.deepcopy(self.files))

    @property
    def tournament(self) -> dict[str, Any]:
        return self.files[TOURNAMENT_FILE]

    def match(self, round_number: int, table: int) -> tuple[str, dict[str, Any]]:
        for path, record in self.files.items():
            place = record.get("tournament") if path.startswith("matches/") else None
            if place and (place["round"], place["table"]) == (round_number, table):
                return path, record
        raise KeyError((round_number, table))

    def write(self, folder: Path, *, resign: set[str] | None = None, manifest: bool = True) -> Path:
        """Write the pack into `folder`: the files named in `resign` signed again by KEY (a
        server signing what it changed), and, with `manifest`, the manifest made again for
        the files as they now are."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "matches").mkdir(exist_ok=True)
        data: dict[str, bytes] = {}
        for path, record in self.files.items():
            if path == MANIFEST_FILE:
                continue
            data[path] = file_bytes(KEY.sign(record) if path in (resign or set()) else record)
        if manifest:
            tid = self.tournament["tournament_id"]
            self.files[MANIFEST_FILE] = KEY.sign(build_manifest(tid, data, KEY.public_key))
        data[MANIFEST_FILE] = file_bytes(self.files[MANIFEST_FILE])
        for path, raw in data.items():
            (folder / path).write_bytes(raw)
        return folder


def simulated(name: str, seed: str = "pack") -> Pack:
    fmt, seats, partnerships, rounds, entrants = FORMATS[name]
    settings = tournament_settings(fmt, seats, partnerships, rounds, "standard")
    record, matches = simulate_tournament(settings, entrants, seed)
    return Pack.of(pack_contents(record, matches, KEY))


@pytest.fixture(scope="module")
def packs() -> dict[str, Pack]:
    return {name: simulated(name) for name in FORMATS}


def verified(folder: Path, key: str | None = KEY.public_key) -> Outcome:
    return verify_pack(folder, key)


def assert_rejected(outcome: Outcome, where: str) -> None:
    assert outcome.status == ExitStatus.INVALID, outcome.line
    assert outcome.line.startswith("REJECTED: "), outcome.line
    assert outcome.facts["where"].startswith(where), outcome.line


# ----- honest packs ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_simulated_pack_of_each_format_verifies(packs, tmp_path, name):
    pack = packs[name].copy()
    outcome = verified(pack.write(tmp_path / "pack"))
    assert outcome.ok, outcome.line
    t = pack.tournament
    assert outcome.facts["rounds"] == len(t["rounds"]) and outcome.facts["matches"] == len(
        [p for p in pack.files if p.startswith("matches/")]
    )
    assert t["ended"] and t["tournament_seed"]


def test_the_formats_play_the_tables_the_tournament_names(packs):
    swiss2 = packs["swiss at 2 seats"].tournament
    assert len(swiss2["rounds"]) == 3 and all(len(r["byes"]) == 1 for r in swiss2["rounds"])
    multi = packs["swiss at 4 individual seats"]
    assert [len(t["sides"]) for t in multi.tournament["rounds"][0]["tables"]] == [4, 3, 3]
    _, three = multi.match(1, 2)
    assert len(three["seats"]) == 3 and three["sides"] == [[0], [1], [2]]
    drr = packs["double round robin at partnership tables"]
    assert len(drr.tournament["rounds"]) == 6
    _, record = drr.match(1, 1)
    assert record["sides"] == [[0, 2], [1, 3]]
    entrants = drr.tournament["entrants"]
    a, b = drr.tournament["rounds"][0]["tables"][0]["sides"]
    assert [s["name"] for s in record["seats"]] == [
        entrants[a[0] - 1]["players"][0],
        entrants[b[0] - 1]["players"][0],
        entrants[a[0] - 1]["players"][1],
        entrants[b[0] - 1]["players"][1],
    ]
    assert {s["client_seed"] for s in record["seats"][::2]} == {entrants[a[0] - 1]["client_seed"]}


def test_the_same_seed_plays_the_same_tournament_and_another_seed_another():
    name = "swiss at 2 seats"
    assert simulated(name, "x").files == simulated(name, "x").files
    x, y = simulated(name, "x").tournament, simulated(name, "y").tournament
    assert (x["tournament_id"], x["tournament_seed"]) != (y["tournament_id"], y["tournament_seed"])


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_match_has_the_derived_id_and_server_seed_and_its_entrants_client_seeds(packs, name):
    pack = packs[name]
    t = pack.tournament
    seed = bytes.fromhex(t["tournament_seed"])
    assert hashlib.sha256(seed).hexdigest() == t["commitment"]
    settings = tournament_settings(*FORMATS[name][:4], "standard")
    for r in t["rounds"]:
        for table in r["tables"]:
            mid = match_id(t["tournament_id"], r["round"], table["table"])
            record = pack.files[f"matches/{mid}.json"]
            assert table["match_id"] == record["match_id"] == mid
            assert record["server_seed"] == table_server_seed(seed, mid).hex()
            assert record["tournament"] == {
                "tournament_id": t["tournament_id"],
                "round": r["round"],
                "table": table["table"],
            }
            sides = [side[0] for side in table["sides"]]
            seeds = [t["entrants"][e - 1]["client_seed"] for e, _ in seats_of(settings, sides)]
            assert [s["client_seed"] for s in record["seats"]] == seeds
            assert record["result"]["scores"] == table["result"]["scores"]


def test_a_match_record_of_the_pack_verifies_on_its_own(packs, tmp_path):
    folder = packs["swiss at 2 seats"].copy().write(tmp_path / "pack")
    path, _ = packs["swiss at 2 seats"].match(2, 1)
    assert main(["verify", str(folder / path), "--public-key", KEY.public_key]) == 0


# ----- one field changed ----------------------------------------------------------------


def _first_table(pack: Pack) -> dict[str, Any]:
    return pack.tournament["rounds"][0]["tables"][0]


def swap_sides(pack: Pack) -> None:
    t = pack.tournament["rounds"][1]["tables"][0]
    t["sides"] = t["sides"][::-1]


def _swap_tables(pack: Pack) -> None:
    tables = pack.tournament["rounds"][2]["tables"]
    tables[0]["sides"], tables[1]["sides"] = tables[1]["sides"], tables[0]["sides"]


def _bye(pack: Pack) -> None:
    r = pack.tournament["rounds"][1]
    r["byes"] = [r["tables"][0]["sides"][0][0]]


def change_standing(key: str, k: int, value: Callable[[Any], Any]) -> Callable[[Pack], None]:
    def change(pack: Pack) -> None:
        line = pack.tournament["standings"][k]
        line[key] = value(line[key])

    return change


def half_more(text: str) -> str:
    return str(Fraction(text) + Fraction(1, 2))


def _seeding(pack: Pack) -> None:
    s = pack.tournament["seeding"]
    s[0], s[1] = s[1], s[0]


def _client_seed(pack: Pack) -> None:
    pack.tournament["entrants"][2]["client_seed"] += "!"


def change_tournament_seed(pack: Pack) -> None:
    seed = pack.tournament["tournament_seed"]
    pack.tournament["tournament_seed"] = ("0" if seed[0] != "0" else "1") + seed[1:]


def _table_match_id(pack: Pack) -> None:
    _first_table(pack)["match_id"] = "00000000-0000-5000-8000-000000000000"


def in_match(
    change: Callable[[dict[str, Any]], None], r: int = 1, t: int = 1
) -> Callable[[Pack], str]:
    def apply(pack: Pack) -> str:
        path, record = pack.match(r, t)
        change(record)
        return path

    return apply


def _server_seed(record: dict[str, Any]) -> None:
    seed = bytes(32)
    record["server_seed"] = seed.hex()
    record["commitment"] = hashlib.sha256(seed).hexdigest()


def _seat_swap(record: dict[str, Any]) -> None:
    record["seats"][0], record["seats"][1] = record["seats"][1], record["seats"][0]


def _seat_name(record: dict[str, Any]) -> None:
    record["seats"][1]["name"] = "mallory"


def change_seat_seed(record: dict[str, Any]) -> None:
    record["seats"][0]["client_seed"] = "chosen"


def change_action(record: dict[str, Any]) -> None:
    for action in record["hands"][0]["actions"]:
        if action["act"] == "play" and action["end"] is not None:
            action["end"] = "left" if action["end"] == "right" else "right"
            return
    raise AssertionError("no play on an end")


def _match_id(record: dict[str, Any]) -> None:
    record["match_id"] = "11111111-1111-5111-8111-111111111111"


def _round_of(record: dict[str, Any]) -> None:
    record["tournament"]["round"] += 1


def _rules(record: dict[str, Any]) -> None:
    record["rules"]["target"] += 5


def _last_result(pack: Pack) -> None:
    """A server lying about the last round's first result, its tournament record rebuilt to
    agree (places, standings): only the match record shows it."""
    t = parse_tournament_record(pack.tournament)
    last = t.rounds[-1]
    table = last.tables[0]
    assert table.result is not None
    scores = table.result.scores[::-1]
    lied = score_result(TableResult(table.result.reason, scores, table.result.forfeited_side))
    tables = (dataclasses.replace(table, result=lied), *last.tables[1:])
    t = dataclasses.replace(t, rounds=(*t.rounds[:-1], dataclasses.replace(last, tables=tables)))
    pack.files[TOURNAMENT_FILE] = build_tournament_record(t)


T = TOURNAMENT_FILE
# (name, change, the place named). A change returning a path changed that match file.
CHANGES: list[tuple[str, Callable[[Pack], Any], str]] = [
    ("a pairing's sides", swap_sides, f"{T}, rounds[1].tables[0].sides (round 2, table 1)"),
    ("two tables swapped", _swap_tables, f"{T}, rounds[2].tables[0].sides (round 3, table 1)"),
    ("a bye", _bye, f"{T}, rounds[1].byes (round 2)"),
    ("a standing's match points", change_standing("match_points", 0, half_more), f"{T}, standings"),
    (
        "a standing's margin",
        change_standing("margin", 1, lambda m: m + 1),
        f"{T}, standings[1].margin",
    ),
    (
        "a standing's Buchholz",
        change_standing("buchholz", 2, half_more),
        f"{T}, standings[2].buchholz",
    ),
    ("a standing's wins", change_standing("wins", 3, lambda w: w + 1), f"{T}, standings[3].wins"),
    (
        "a standing's entrant",
        change_standing("entrant", 0, lambda e: e % 7 + 1),
        f"{T}, standings[0]",
    ),
    ("the seeding order", _seeding, f"{T}, seeding"),
    ("an entrant's client seed", _client_seed, f"{T}, seeding"),
    ("the tournament seed", change_tournament_seed, f"{T}, commitment"),
    ("a table's match id", _table_match_id, f"{T}, rounds[0].tables[0].match_id"),
    ("a result the match did not give", _last_result, f"{T}, rounds[2].tables[0].result"),
    ("a match's server seed", in_match(_server_seed), "matches/"),
    ("a match's seats swapped", in_match(_seat_swap), "matches/"),
    ("a seat's name", in_match(_seat_name, 2, 1), "matches/"),
    ("a seat's client seed", in_match(change_seat_seed, 3, 2), "matches/"),
    ("a match's action", in_match(change_action), "matches/"),
    ("a match's id", in_match(_match_id), "matches/"),
    ("a match's round", in_match(_round_of), "matches/"),
    ("a match's rules", in_match(_rules), "matches/"),
]

MATCH_FIELDS = {
    "a match's server seed": "server_seed",
    "a match's seats swapped": "seats[0].",
    "a seat's name": "seats[1].name",
    "a seat's client seed": "seats[0].client_seed",
    "a match's action": "hand 1, action ",
    "a match's id": "match_id",
    "a match's round": "tournament",
    "a match's rules": "rules.target",
}


@pytest.mark.parametrize(("what", "change", "where"), CHANGES, ids=[c[0] for c in CHANGES])
def test_one_field_changed_and_signed_again_is_rejected_at_its_place(
    packs, tmp_path, what, change, where
):
    pack = packs["swiss at 2 seats"].copy()
    path = change(pack) or TOURNAMENT_FILE
    outcome = verified(pack.write(tmp_path / "pack", resign={path}))
    assert_rejected(outcome, where)
    if path != TOURNAMENT_FILE:
        round_number = pack.files[path]["tournament"]["round"]
        table = pack.files[path]["tournament"]["table"]
        if what == "a match's round":
            round_number -= 1
        if what == "a match's id":
            return  # the file is named after the id the tournament derives
        assert outcome.facts["where"].startswith(
            f"{path} (round {round_number}, table {table}), {MATCH_FIELDS[what]}"
        ), outcome.line


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_match_of_each_format_changed_is_rejected(packs, tmp_path, name):
    pack = packs[name].copy()
    path = in_match(change_seat_seed, 2, 1)(pack)
    assert_rejected(
        verified(pack.write(tmp_path / "pack", resign={path})),
        f"{path} (round 2, table 1), seats[0].client_seed",
    )


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def _each_kind(record: Any, paths: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The first and the last of `paths` of each kind of field: its place with the list
    indices left out, its value's type, and within an action the action's `act` (a play's
    tile is checked otherwise than a draw's). Every kind is changed, at both ends of the
    lists it is in, without verifying the whole pack again for each of its hundreds of
    fields (a deal's every tile, an action's every field)."""
    kinds: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for path in paths:
        kind: tuple[Any, ...] = (
            *("*" if isinstance(key, int) else key for key in path),
            type(_get(record, path)).__name__,
        )
        if len(path) > 4 and path[0] == "hands" and path[2] == "actions":
            kind += (record["hands"][path[1]]["actions"][path[3]]["act"],)
        kinds.setdefault(kind, []).append(path)
    return sorted({p for same in kinds.values() for p in (same[0], same[-1])}, key=paths.index)


TILES = [f"{low}-{high}" for low in range(7) for high in range(low, 7)]
HEX = re.compile(r"^[0-9a-f]+$")


def _other(value: Any) -> Any:
    """A different value of the same kind: a tile another tile, hex other hex digits."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if value is None:
        return 1
    if isinstance(value, str):
        if value in TILES:
            return TILES[(TILES.index(value) + 1) % len(TILES)]
        if value and HEX.match(value):
            return value[:-1] + ("0" if value[-1] != "0" else "1")
        return value + "x"
    raise AssertionError(value)


def _set(record: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value


def _get(record: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        record = record[key]
    return record


FREE_TEXT = {("name",)}
"""What a tournament record states without anything to check it against."""


def test_every_field_of_the_tournament_record_changed_is_rejected(packs, tmp_path):
    base = packs["swiss at 2 seats"]
    paths = [p for p in _leaves(base.tournament) if p[0] != "signature" and p not in FREE_TEXT]
    assert len(paths) > 100
    checked = _each_kind(base.tournament, paths)
    assert len(checked) > 50
    accepted = []
    for i, path in enumerate(checked):
        pack = Pack({**base.files, TOURNAMENT_FILE: copy.deepcopy(base.tournament)})
        _set(pack.tournament, path, _other(_get(pack.tournament, path)))
        outcome = verified(pack.write(tmp_path / str(i), resign={TOURNAMENT_FILE}))
        if outcome.status != ExitStatus.INVALID:
            accepted.append((path, outcome.line))
    assert accepted == []


def test_every_field_of_a_match_record_changed_is_rejected(packs, tmp_path):
    base = packs["swiss at 4 individual seats"]
    match_path, record = base.match(2, 2)
    paths = [p for p in _leaves(record) if p[0] != "signature"]
    assert len(paths) > 400
    checked = _each_kind(record, paths)
    assert len(checked) > 60
    accepted = []
    for i, path in enumerate(checked):
        # The other files as they are (written, not changed): only the match is copied.
        pack = Pack({**base.files, match_path: copy.deepcopy(record)})
        changed = pack.files[match_path]
        _set(changed, path, _other(_get(changed, path)))
        outcome = verified(pack.write(tmp_path / str(i), resign={match_path}))
        if outcome.status != ExitStatus.INVALID or not outcome.facts["where"].startswith(
            match_path
        ):
            accepted.append((path, outcome.line))
    assert accepted == []


# ----- hashes, signatures, files --------------------------------------------------------


def test_a_file_changed_after_signing_fails_its_hash(packs, tmp_path):
    pack = packs["swiss at 2 seats"].copy()
    folder = pack.write(tmp_path / "pack")
    pack.tournament["standings"][0]["margin"] += 1
    (folder / TOURNAMENT_FILE).write_bytes(file_bytes(pack.tournament))
    assert_rejected(verified(folder), TOURNAMENT_FILE)
    assert "SHA-256" in verified(folder).line


def test_a_manifest_hash_changed_breaks_the_manifest_signature(packs, tmp_path):
    pack = packs["swiss at 2 seats"].copy()
    pack.write(tmp_path / "first")
    path, _ = pack.match(1, 1)
    files = pack.files[MANIFEST_FILE]["files"]
    files[path] = "0" * 64
    assert_rejected(
        verified(pack.write(tmp_path / "pack", manifest=False)), f"{MANIFEST_FILE}, signature"
    )
    pack.files[MANIFEST_FILE] = KEY.sign(pack.files[MANIFEST_FILE])
    outcome = verified(pack.write(tmp_path / "resigned", manifest=False))
    assert_rejected(outcome, path)
    assert "SHA-256" in outcome.line


@pytest.mark.parametrize("target", ["tournament", "match", "manifest"])
def test_a_signature_changed_or_by_another_key_is_rejected(packs, tmp_path, target):
    pack = packs["swiss at 2 seats"].copy()
    path = {
        "tournament": TOURNAMENT_FILE,
        "match": pack.match(2, 1)[0],
        "manifest": MANIFEST_FILE,
    }[target]
    pack.write(tmp_path / "first")
    record = pack.files[path]
    value = record["signature"]["value"]
    record["signature"]["value"] = value[:-1] + ("0" if value[-1] != "0" else "1")
    outcome = verified(pack.write(tmp_path / "flipped", manifest=target != "manifest"))
    assert_rejected(outcome, path)
    assert outcome.facts["where"].endswith("signature")
    pack.files[path] = OTHER_KEY.sign(record)
    outcome = verified(pack.write(tmp_path / "other", manifest=target != "manifest"))
    assert_rejected(outcome, path)
    assert "another key" in outcome.line


def test_a_pack_signed_wholly_by_another_key_is_rejected_only_against_the_trusted_one(
    packs, tmp_path
):
    contents = pack_contents(
        packs["swiss at 2 seats"].tournament,
        [r for p, r in packs["swiss at 2 seats"].files.items() if p.startswith("matches/")],
        OTHER_KEY,
    )
    folder = tmp_path / "pack"
    (folder / "matches").mkdir(parents=True)
    for path, data in contents.items():
        (folder / path).write_bytes(data)
    assert verified(folder, None).ok
    assert "not checked" in verified(folder, None).line
    assert_rejected(verified(folder, KEY.public_key), f"{MANIFEST_FILE}, signature")


def test_a_missing_match_file_is_rejected(packs, tmp_path):
    pack = packs["swiss at 2 seats"].copy()
    folder = pack.write(tmp_path / "pack")
    path, _ = pack.match(2, 3)
    (folder / path).unlink()
    assert_rejected(verified(folder), path)
    assert "missing" in verified(folder).line
    del pack.files[path]
    outcome = verified(pack.write(tmp_path / "relisted"))
    assert_rejected(outcome, f"{path} (round 2, table 3)")
    assert "missing" in outcome.line


def test_an_extra_file_is_rejected(packs, tmp_path):
    pack = packs["swiss at 2 seats"].copy()
    folder = pack.write(tmp_path / "pack")
    (folder / "notes.txt").write_text("hello\n")
    assert_rejected(verified(folder), "notes.txt")
    (folder / "notes.txt").unlink()
    (folder / "more").symlink_to(folder / "matches", target_is_directory=True)
    assert_rejected(verified(folder), "more")
    (folder / "more").unlink()
    assert verified(folder).ok
    extra = "matches/22222222-2222-5222-8222-222222222222.json"
    _, record = pack.match(1, 1)
    pack.files[extra] = record
    assert_rejected(verified(pack.write(tmp_path / "listed")), extra)
    assert "no table" in verified(tmp_path / "listed").line


def test_a_folder_without_a_manifest_or_with_a_path_outside_the_pack_is_rejected(packs, tmp_path):
    pack = packs["swiss at 2 seats"].copy()
    folder = pack.write(tmp_path / "pack")
    (folder / MANIFEST_FILE).unlink()
    assert_rejected(verified(folder), MANIFEST_FILE)
    manifest = pack.files[MANIFEST_FILE]
    manifest["files"]["../outside.json"] = "0" * 64
    pack.files[MANIFEST_FILE] = KEY.sign(manifest)
    assert_rejected(
        verified(pack.write(tmp_path / "outside", manifest=False)), f"{MANIFEST_FILE}, files"
    )


# ----- the command line -----------------------------------------------------------------


def test_bergen_simulate_tournament_writes_a_pack_bergen_verify_accepts(tmp_path, capsys):
    out = tmp_path / "pack"
    args = ["simulate", "--tournament", "swiss", "--entrants", "5", "--rounds", "2"]
    assert main([*args, "--seed", "cli", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rounds"] == 2 and summary["matches"] == 4
    assert main(["verify", str(out), "--public-key", summary["public_key"], "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] and verdict["source"] == "pack" and verdict["key_checked"]
    record = json.loads((out / TOURNAMENT_FILE).read_text("utf-8"))
    record["standings"][0]["wins"] += 1
    (out / TOURNAMENT_FILE).write_text(json.dumps(record), "utf-8")
    assert main(["verify", str(out)]) == ExitStatus.INVALID
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"REJECTED: {TOURNAMENT_FILE}: ") and "\n" not in line


def test_bergen_simulate_tournament_signs_with_the_key_given(tmp_path, capsys):
    key_file = tmp_path / "key.pem"
    key_file.write_bytes(
        Ed25519PrivateKey.from_private_bytes(bytes(range(32))).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    out = tmp_path / "pack"
    args = ["simulate", "--tournament", "round_robin", "--entrants", "4", "--seed", "k"]
    assert main([*args, "--signing-key", str(key_file), "--out", str(out)]) == 0
    assert verified(out, KEY.public_key).ok


@pytest.mark.parametrize(
    "args",
    [
        ["--tournament", "swiss", "--entrants", "6"],
        ["--tournament", "round_robin", "--entrants", "6", "--rounds", "3"],
        ["--tournament", "swiss", "--entrants", "6", "--rounds", "2", "--partnerships"],
        ["--tournament", "swiss", "--rounds", "2"],
        ["--tournament", "swiss", "--entrants", "3", "--rounds", "3"],
        ["--tournament", "round_robin", "--entrants", "1"],
        ["--tournament", "swiss", "--entrants", "6", "--rounds", "2", "--matches", "3"],
        ["--tournament", "swiss", "--entrants", "6", "--rounds", "2", "--signing-key", "nope"],
        ["--tournament", "swiss", "--entrants", "6", "--rounds", "2", "--preset", "nope"],
    ],
)
def test_bergen_simulate_refuses_a_tournament_it_cannot_play(tmp_path, args):
    out = tmp_path / "pack"
    assert main(["simulate", *args, "--out", str(out)]) == ExitStatus.USAGE
    assert not out.exists()


def test_bergen_simulate_tournament_refuses_a_folder_holding_files(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    args = ["simulate", "--tournament", "round_robin", "--entrants", "4"]
    assert main([*args, "--out", str(tmp_path)]) == ExitStatus.USAGE


# ----- a pack from what a server served (bergen tournament export) ----------------------------


def _served(pack: Pack) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    matches = [r for p, r in pack.files.items() if p.startswith("matches/")]
    return pack.tournament, matches, pack.files[MANIFEST_FILE]


def _less(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without its last match's file."""
    files = dict(manifest["files"])
    files.pop(max(p for p in files if p.startswith("matches/")))
    return {**manifest, "files": files}


def test_a_served_pack_is_written_byte_for_byte_as_the_server_made_it(packs):
    made = pack_contents(*_served(packs["swiss at 2 seats"])[:2], KEY, signed=True)
    assert served_pack(*_served(packs["swiss at 2 seats"])) == made


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda t, m, f: m.pop(), "is not the file the manifest lists"),
        (lambda t, m, f: m.append(copy.deepcopy(m[0])), "cannot be a file of the pack"),
        (lambda t, m, f: m[0].update(rules_version="0"), "is not the file the manifest lists"),
        (lambda t, m, f: f.update(tournament_id="x"), "manifest.json: the"),  # not re-signed
        (lambda t, m, f: f.update(KEY.sign(_less(f))), "is not the file the manifest lists"),
        (lambda t, m, f: f.update(KEY.sign({**f, "tournament_id": "x"})), "is not the manifest"),
        (lambda t, m, f: f.update(KEY.sign({**f, "files": []})), "lists no files"),
        (lambda t, m, f: f.update(OTHER_KEY.sign(f)), "manifest.json: signed by another key"),
        (lambda t, m, f: f.update(KEY.sign({**f, "public_key": "00" * 32})), "names another key"),
        (lambda t, m, f: t.update(OTHER_KEY.sign(t)), "manifest.json: "),
    ],
)
def test_a_served_pack_that_the_manifest_does_not_list_is_refused(packs, change, why):
    tournament, matches, manifest = copy.deepcopy(_served(packs["swiss at 2 seats"]))
    change(tournament, matches, manifest)
    with pytest.raises(ValueError, match=re.escape(why)):
        served_pack(tournament, matches, manifest)
