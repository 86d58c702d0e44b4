import { $, h, getJson, word } from "/static/common.js";

function matchesTable(matches) {
  if (!matches.length) return h("p", { text: "None." });
  const body = h("tbody");
  for (const m of matches) {
    const label = m.name || m.match_id.slice(0, 8);
    body.append(h("tr", {},
      h("td", {}, h("a", { href: `/match?id=${encodeURIComponent(m.match_id)}` }, label)),
      h("td", { text: (m.players || []).map((p) => p || "(free)").join(", ") }),
      h("td", { class: "num", text: (m.scores || []).join(" – ") }),
      h("td", {}, h("a", { href: `/replay?id=${encodeURIComponent(m.match_id)}` }, "replay"))));
  }
  return h("table", {}, h("thead", {}, h("tr", {},
    h("th", { scope: "col", text: "Match" }), h("th", { scope: "col", text: "Players" }),
    h("th", { scope: "col", class: "num", text: "Scores" }), h("th", { scope: "col", text: "Replay" }))), body);
}

function tournamentsTable(list) {
  if (!list.length) return h("p", { text: "None." });
  const body = h("tbody");
  for (const t of list) {
    body.append(h("tr", {},
      h("td", {}, h("a", { href: `/tournament?id=${encodeURIComponent(t.tournament_id)}` }, t.name || t.tournament_id.slice(0, 8))),
      h("td", { text: word(t.phase, "TOURNAMENT_PHASE_") }),
      h("td", { text: word(t.format, "TOURNAMENT_FORMAT_") }),
      h("td", { class: "num", text: t.entrants }),
      h("td", { class: "num", text: `${t.round} of ${t.total_rounds}` })));
  }
  return h("table", {}, h("thead", {}, h("tr", {},
    h("th", { scope: "col", text: "Tournament" }), h("th", { scope: "col", text: "Phase" }),
    h("th", { scope: "col", text: "Format" }), h("th", { scope: "col", class: "num", text: "Entrants" }),
    h("th", { scope: "col", class: "num", text: "Round" }))), body);
}

async function load() {
  const [live, ended, tours] = await Promise.all([
    getJson("/api/matches?phase=playing"),
    getJson("/api/matches?phase=ended"),
    getJson("/api/tournaments"),
  ]);
  $("#live").replaceChildren(matchesTable(live.matches || []));
  $("#ended").replaceChildren(matchesTable(ended.matches || []));
  const all = tours.tournaments || [];
  all.sort((a, b) => (a.phase === "TOURNAMENT_PHASE_RUNNING" ? -1 : 0) - (b.phase === "TOURNAMENT_PHASE_RUNNING" ? -1 : 0));
  $("#tournaments").replaceChildren(tournamentsTable(all));
}

load().catch((e) => { $("#live").textContent = `Cannot load: ${e.message}`; });
setInterval(() => load().catch(() => {}), 5000);
