// A tournament live: who won once it has ended, standings with every tie-break figure (a
// withdrawn entrant marked), the crosstable, each round's tables linking to their matches
// with their live scores, every intervention, and the signed records. Entrants, rounds and
// tables are numbered from 1 by the API itself; a table's sides are named, never numbered.
import { $, h, param, word, num, getJson, diagnose, showProblem, clearProblem, endStream } from "/static/common.js";
import { playerHref, ratingText, poolName } from "/static/rating.js";

const id = param("id");

// A rated tournament's entrants' ratings in its pool (GET .../ratings), by entrant number; read
// again when a table's result comes in, ratings moving only then.
let ratings = null;
let ratingsKey = "";
let ratingsPool = "";

function ratingCell(n) {
  const cell = h("td", { class: "num rating", "data-entrant": n });
  const players = ratings && ratings[num(n)];
  if (!players) { cell.textContent = ratings ? "–" : "…"; return cell; }
  players.forEach((p, i) => {
    if (i) cell.append(" & ");
    cell.append(h("a", { href: playerHref(p.player_id, ratingsPool), title: `${p.name}${p.bot ? " (a bot)" : ""}: ${ratingText(p.rating)} in the ${poolName(ratingsPool)} pool`, text: ratingText(p.rating) }));
  });
  if (!players.length) cell.textContent = "–";
  return cell;
}

async function fetchRatings() {
  try {
    const got = await getJson(`/api/tournaments/${encodeURIComponent(id)}/ratings`);
    ratingsPool = got.pool;
    ratings = {};
    for (const e of got.entrants || []) ratings[num(e.entrant)] = e.players || [];
  } catch (_) {
    return; // asked again on the next change
  }
  for (const cell of document.querySelectorAll("#standings-table td.rating")) cell.replaceWith(ratingCell(cell.dataset.entrant));
}

// Read when an entrant or a result comes in, and again a few seconds later: the gateway
// answers from a copy a few seconds old, and a match's end reaches the ratings a moment after
// it reaches the tournament. Every minute besides, the entrants playing elsewhere too.
let ratingsLater = null;
let ratingsEvery = null;
function readRatings(t) {
  const key = `${(t.entrants || []).length}:${(t.rounds || []).flatMap((r) => r.tables || []).filter((x) => x.result).length}`;
  if (key === ratingsKey) return;
  ratingsKey = key;
  fetchRatings();
  clearTimeout(ratingsLater);
  ratingsLater = setTimeout(fetchRatings, 4000);
  if (!ratingsEvery) ratingsEvery = setInterval(fetchRatings, 60_000);
}

const ACTOR = {
  ACTOR_ENTRANT: "the entrant",
  ACTOR_ORGANISER: "the organiser",
  ACTOR_SERVER: "the server",
};

function entrant(t, n) {
  return (t.entrants || []).find((x) => num(x.entrant) === num(n));
}

function entrantName(t, n) {
  const e = entrant(t, n);
  return e && (e.players || []).length ? e.players.join(" & ") : `entrant ${n}`;
}

const named = (t, n) => `${entrantName(t, n)} (#${n})`;

// "withdrew after round 2", "withdrawn after round 1 by the organiser", "withdrawn before
// round 1 by the server (no seed revealed)"; "" for an entrant still in.
function withdrawal(e) {
  if (!e || e.withdrawn_after_round === undefined) return "";
  const r = num(e.withdrawn_after_round);
  const when = r === 0 ? "before round 1" : `after round ${r}`;
  if (e.withdrawn_by === "ACTOR_ENTRANT") return `withdrew ${when}`;
  if (e.withdrawn_by === "ACTOR_ORGANISER") return `withdrawn ${when} by the organiser`;
  if (e.withdrawn_by === "ACTOR_SERVER") return `withdrawn ${when} by the server (no seed revealed)`;
  return `withdrawn ${when}`;
}

function standings(t) {
  const rated = !!(t.settings && t.settings.rated);
  const body = h("tbody");
  for (const s of t.standings || []) {
    const gone = withdrawal(entrant(t, s.entrant));
    const who = h("td", {}, named(t, s.entrant));
    if (gone) who.append(" ", h("span", { class: "withdrawn-mark", text: `(${gone})` }));
    body.append(h("tr", { "data-entrant": s.entrant, class: gone ? "withdrawn" : "" },
      h("td", { class: "num", text: s.rank }), who, ...(rated ? [ratingCell(s.entrant)] : []),
      h("td", { class: "num", text: s.match_points }), h("td", { class: "num", text: s.margin }),
      h("td", { class: "num", text: s.buchholz }), h("td", { class: "num", text: s.wins })));
  }
  const heads = ["Rank", "Entrant", ...(rated ? ["Rating"] : []), "Match points", "Margin", "Buchholz", "Wins"];
  const caption = "Ranked by match points, then margin, Buchholz, wins and seeding"
    + (rated ? `. A rated tournament: each entrant's rating now, in the ${poolName(ratingsPool || poolOf(t))} pool (? while provisional)` : "");
  return h("table", { id: "standings-table" }, h("caption", { class: "muted", text: caption }),
    h("thead", {}, h("tr", {}, ...heads.map((x, i) => h("th", { scope: "col", class: i === 1 ? "" : "num", text: x })))), body);
}

function poolOf(t) {
  const s = t.settings || {};
  return s.partnerships ? "pairs" : String(num(s.seats) || 2);
}

const points = (s) => `${s.match_points} match point${s.match_points === "1" ? "" : "s"}`;

// Who won, once ended: the first of the standings, or every entrant equal to it on every
// figure (only the seeding ranks them apart): a shared first place.
function winnerText(t) {
  if (t.phase !== "TOURNAMENT_PHASE_ENDED" || t.cancelled) return "";
  const all = t.standings || [];
  if (!all.length) return "";
  const top = all[0];
  const same = (s) => ["match_points", "margin", "buchholz", "wins"].every((k) => String(s[k]) === String(top[k]));
  const first = all.filter(same);
  if (first.length > 1) {
    const names = first.map((s) => named(t, s.entrant));
    return `First place shared by ${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}, with ${points(top)} each (equal on every figure; the standings order them by seeding).`;
  }
  return `Won by ${named(t, top.entrant)}, with ${points(top)}.`;
}

function liveText(table) {
  return (table.live_scores || []).length ? `live ${table.live_scores.join(" – ")}` : "playing";
}

function cellText(t, table, side) {
  if (!table.result) return (table.live_scores || []).length ? `${table.live_scores[side]} (live)` : "playing";
  const r = table.result;
  return `${r.match_points[side]} MP (${r.scores[side] ?? "-"}, place ${r.places[side] ?? "-"})`;
}

function crosstable(t) {
  const rounds = t.rounds || [];
  const entrants = (t.standings || []).map((s) => num(s.entrant));
  const head = h("tr", {}, h("th", { scope: "col", text: "Entrant" }), ...rounds.map((r) => h("th", { scope: "col", text: `R${r.round}` })));
  const body = h("tbody");
  for (const n of entrants) {
    const cells = rounds.map((r) => {
      if ((r.byes || []).map(num).includes(n)) return h("td", { text: "bye" });
      const table = (r.tables || []).find((x) => (x.sides || []).map(num).includes(n));
      if (!table) return h("td", { text: "–" });
      const side = table.sides.map(num).indexOf(n);
      const others = table.sides.map(num).filter((x) => x !== n).map((x) => `#${x}`).join(", ");
      return h("td", { text: `vs ${others}: ${cellText(t, table, side)}` });
    });
    body.append(h("tr", {}, h("th", { scope: "row", text: `#${n} ${entrantName(t, n)}` }), ...cells));
  }
  return h("table", {}, h("thead", {}, head), body);
}

function resultText(t, table) {
  if (!table.result) return liveText(table);
  const r = table.result;
  const scores = (r.scores || []).join(" – ");
  if (r.forfeited_side !== undefined) {
    const forfeiter = (table.sides || [])[num(r.forfeited_side)];
    return `${scores}, forfeited by ${forfeiter !== undefined ? entrantName(t, forfeiter) : "a side"}`;
  }
  return `${scores} (${word(r.reason, "MATCH_END_REASON_")})`;
}

function roundsList(t) {
  const wrap = h("div");
  for (const r of [...(t.rounds || [])].reverse()) {
    const body = h("tbody");
    for (const table of r.tables || []) {
      const sides = (table.sides || []).map((n) => named(t, n)).join(" v ");
      const link = table.match_id
        ? h("span", {}, h("a", { href: `/match?id=${encodeURIComponent(table.match_id)}` }, "watch"), " · ", h("a", { href: `/replay?id=${encodeURIComponent(table.match_id)}` }, "replay"))
        : h("span", { text: "not played (withdrawal)" });
      body.append(h("tr", { "data-round": r.round, "data-table": table.table },
        h("td", { class: "num", text: table.table }), h("td", { text: sides }),
        h("td", { class: table.result ? "result" : "result live", text: resultText(t, table) }), h("td", {}, link)));
    }
    const byes = (r.byes || []).map((n) => named(t, n));
    wrap.append(h("h3", { text: `Round ${r.round}` }));
    if (byes.length) wrap.append(h("p", { class: "byes", text: `Bye: ${byes.join(", ")}` }));
    wrap.append(h("table", {}, h("thead", {}, h("tr", {}, ...["Table", "Sides", "Result", "Match"].map((x) => h("th", { scope: "col", text: x })))), body));
  }
  return wrap;
}

const ACTION = {
  INTERVENTION_ACTION_WITHDRAW: (t, i) => `${i.entrant !== undefined ? named(t, i.entrant) : "an entrant"} withdrawn`,
  INTERVENTION_ACTION_ABANDON: () => "match abandoned",
  INTERVENTION_ACTION_FORFEIT: (t, i) => `match forfeited by ${i.entrant !== undefined ? named(t, i.entrant) : "a side"}`,
  INTERVENTION_ACTION_START_ROUND: () => "a round paired by hand",
  INTERVENTION_ACTION_CANCEL: () => "tournament cancelled",
};

// "Round 2, table 1: match abandoned, by the organiser: “no-show”".
function interventionText(t, i) {
  const r = num(i.round);
  const where = [r === 0 ? "Before round 1" : `Round ${r}`];
  if (i.table !== undefined) where.push(`table ${i.table}`);
  const action = (ACTION[i.action] || (() => word(i.action, "INTERVENTION_ACTION_")))(t, i);
  const by = ACTOR[i.by] ? `, by ${ACTOR[i.by]}` : "";
  return `${where.join(", ")}: ${action}${by}${i.note ? `: “${i.note}”` : ""}`;
}

function render(t) {
  clearProblem();
  $("#title").textContent = `Tournament: ${t.name || t.tournament_id.slice(0, 8)}`;
  document.title = `${$("#title").textContent} · Bergen`;
  const s = t.settings || {};
  let phase = t.cancelled ? "cancelled before its start" : word(t.phase, "TOURNAMENT_PHASE_");
  if (t.phase === "TOURNAMENT_PHASE_REVEAL") {
    // Registration closed: each entrant reveals the seed it committed to; round 1 follows.
    const still = (t.entrants || []).filter((e) => e.withdrawn_after_round === undefined);
    phase = `revealing seeds (${still.filter((e) => e.revealed).length} of ${still.length} revealed)`;
  }
  $("#status").textContent = `${phase}: ${word(s.format, "TOURNAMENT_FORMAT_")}, round ${t.round} of ${t.total_rounds}, ${(t.entrants || []).length} entrants, ${s.seats}-seat tables${s.rated ? ", rated" : ""}`;
  const winner = winnerText(t);
  $("#winner").textContent = winner;
  $("#winner").hidden = !winner;
  $("#standings").replaceChildren(standings(t));
  if (t.settings && t.settings.rated) readRatings(t);
  $("#crosstable").replaceChildren(crosstable(t));
  $("#rounds").replaceChildren(roundsList(t));
  const interventions = t.interventions || [];
  $("#interventions").replaceChildren(...interventions.map((i) => h("li", { text: interventionText(t, i) })));
  $("#interventions-section").hidden = !interventions.length;
  document.body.dataset.version = String(t.version);
  document.dispatchEvent(new CustomEvent("bergen:tournament", { detail: t }));
  const links = $("#links");
  links.replaceChildren(h("a", { href: `/api/tournaments/${encodeURIComponent(id)}/record`, download: `tournament-${id}.json` }, "The signed tournament record"));
  if (t.phase === "TOURNAMENT_PHASE_ENDED" && !t.cancelled) {
    links.append(" · ", h("a", { href: `/api/tournaments/${encodeURIComponent(id)}/audit-pack.zip` }, "The audit pack (zip)"));
  }
}

async function refused() {
  const problem = await diagnose(`/api/tournaments/${encodeURIComponent(id)}`, "tournament");
  showProblem(problem || { kind: "busy", text: "This site is following as many tournaments as it can.", retry: true }, connect);
}

function connect() {
  const source = new EventSource(`/api/tournaments/${encodeURIComponent(id)}/events`);
  source.addEventListener("tournament", (m) => render(JSON.parse(m.data)));
  endStream(source, refused);
}

if (!id) showProblem({ kind: "no-id", text: "No tournament named (?id=).", retry: false });
else connect();
