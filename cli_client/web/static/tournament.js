// A tournament live: standings with every tie-break figure, the crosstable, each round's
// tables linking to their matches, and the signed records.
import { $, h, param, word, num } from "/static/common.js";

const id = param("id");

function entrantName(t, n) {
  const e = (t.entrants || []).find((x) => num(x.entrant) === n);
  return e ? (e.players || []).join(" & ") : `entrant ${n}`;
}

function standings(t) {
  const body = h("tbody");
  for (const s of t.standings || []) {
    body.append(h("tr", { "data-entrant": s.entrant },
      h("td", { class: "num", text: s.rank }), h("td", { text: `${entrantName(t, num(s.entrant))} (#${s.entrant})` }),
      h("td", { class: "num", text: s.match_points }), h("td", { class: "num", text: s.margin }),
      h("td", { class: "num", text: s.buchholz }), h("td", { class: "num", text: s.wins })));
  }
  return h("table", { id: "standings-table" }, h("caption", { class: "muted", text: "Ranked by match points, then margin, Buchholz, wins and seeding" }),
    h("thead", {}, h("tr", {}, ...["Rank", "Entrant", "Match points", "Margin", "Buchholz", "Wins"].map((x, i) => h("th", { scope: "col", class: i === 1 ? "" : "num", text: x })))), body);
}

function resultText(table, side) {
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
      return h("td", { text: `vs ${others}: ${resultText(table, side)}` });
    });
    body.append(h("tr", {}, h("th", { scope: "row", text: `#${n} ${entrantName(t, n)}` }), ...cells));
  }
  return h("table", {}, h("thead", {}, head), body);
}

function roundsList(t) {
  const wrap = h("div");
  for (const r of [...(t.rounds || [])].reverse()) {
    const body = h("tbody");
    for (const table of r.tables || []) {
      const sides = (table.sides || []).map((n) => `${entrantName(t, num(n))} (#${n})`).join(" v ");
      const link = table.match_id
        ? h("span", {}, h("a", { href: `/match?id=${encodeURIComponent(table.match_id)}` }, "watch"), " · ", h("a", { href: `/replay?id=${encodeURIComponent(table.match_id)}` }, "replay"))
        : h("span", { text: "not played (withdrawal)" });
      const result = table.result ? (table.result.scores || []).join(" – ") + ` (${word(table.result.reason, "MATCH_END_REASON_")})`
        : `live ${(table.live_scores || []).join(" – ")}`;
      body.append(h("tr", {}, h("td", { class: "num", text: table.table }), h("td", { text: sides }), h("td", { text: result }), h("td", {}, link)));
    }
    wrap.append(h("h3", { text: `Round ${r.round}${(r.byes || []).length ? `, byes: ${r.byes.map((n) => `#${n}`).join(", ")}` : ""}` }),
      h("table", {}, h("thead", {}, h("tr", {}, ...["Table", "Sides", "Result", "Match"].map((x) => h("th", { scope: "col", text: x })))), body));
  }
  return wrap;
}

function render(t) {
  $("#title").textContent = `Tournament: ${t.name || t.tournament_id.slice(0, 8)}`;
  document.title = `${$("#title").textContent} · Bergen`;
  const s = t.settings || {};
  $("#status").textContent = `${word(t.phase, "TOURNAMENT_PHASE_")}: ${word(s.format, "TOURNAMENT_FORMAT_")}, round ${t.round} of ${t.total_rounds}, ${(t.entrants || []).length} entrants, ${s.seats}-seat tables`;
  $("#standings").replaceChildren(standings(t));
  $("#crosstable").replaceChildren(crosstable(t));
  $("#rounds").replaceChildren(roundsList(t));
  document.body.dataset.version = String(t.version);
  const links = $("#links");
  links.replaceChildren(h("a", { href: `/api/tournaments/${encodeURIComponent(id)}/record`, download: `tournament-${id}.json` }, "The signed tournament record"));
  if (t.phase === "TOURNAMENT_PHASE_ENDED") {
    links.append(" · ", h("a", { href: `/api/tournaments/${encodeURIComponent(id)}/audit-pack.zip` }, "The audit pack (zip)"));
  }
}

if (!id) $("#status").textContent = "No tournament named (?id=).";
else {
  const source = new EventSource(`/api/tournaments/${encodeURIComponent(id)}/events`);
  source.addEventListener("tournament", (m) => render(JSON.parse(m.data)));
  source.addEventListener("end", () => { source.close(); document.body.dataset.ended = "1"; });
}
