// The home page: matches waiting for players, being played and recently finished, each with
// when it started (or was created, while seating), its state, its hand, its players' scores
// and its table; and the tournaments. Times are the visitor's local time.
import { $, h, getJson, word, num, endText, abandonNote, summaryView, sideName, timeNode } from "/static/common.js";
import { createForm } from "/static/play.js";
import { playerLink, post, ratingsLine, signedIn } from "/static/rating.js";

const link = (path, id) => `${path}?id=${encodeURIComponent(id)}`;

// The state cell: "waiting for 1 player since 14:05", "playing since 14:07", "won by Ada,
// started 14:07".
function stateCell(m) {
  const cell = h("td", { class: "state", "data-label": "State" });
  if (m.phase === "PHASE_SEATING") {
    const free = (m.players || []).filter((p) => !p).length;
    const who = m.rematch_of ? `a rematch: waiting for ${free} of its players` : `waiting for ${free} player${free === 1 ? "" : "s"}`;
    cell.append(`${who} since `, timeNode(m.created_at));
  } else if (m.phase === "PHASE_PLAYING") {
    cell.append("playing since ", timeNode(m.started_at || m.created_at));
  } else {
    cell.append(m.result ? endText(m.result, summaryView(m)) + abandonNote(m.result) : "ended");
    if (m.started_at) cell.append(", started ", timeNode(m.started_at));
  }
  return cell;
}

// Each side's name and score ("Ada: 12 · Bo: 7"), or while seating each seat's player
// ("Ada · (free seat)"; a rematch's free seats are kept for the players of the match before).
function playersText(m) {
  const view = summaryView(m);
  for (const s of view.seats) if (!s.name) s.name = m.rematch_of ? "(kept)" : "(free seat)";
  const scores = m.scores || [];
  if (m.phase === "PHASE_SEATING") return view.seats.map((s) => s.name).join(" · ");
  return scores.map((score, side) => `${sideName(view, side)}: ${score}`).join(" · ");
}

function tableText(m) {
  const seats = num(m.seat_count);
  return `${seats} seats${m.partnerships ? " in partnerships" : ""}, ${word(m.preset, "PRESET_")}`;
}

function matchesTable(matches, id) {
  if (!matches.length) return h("p", { text: "None." });
  const body = h("tbody");
  for (const m of matches) {
    const name = m.name || `Match ${m.match_id.slice(0, 8)}`;
    const watch = m.phase === "PHASE_ENDED" ? "" : h("a", { href: link("/match", m.match_id) }, "watch");
    body.append(h("tr", { "data-match": m.match_id, "data-phase": word(m.phase, "PHASE_") },
      h("th", { scope: "row", class: "name" }, h("a", { href: link(m.phase === "PHASE_ENDED" ? "/replay" : "/match", m.match_id) }, name)),
      stateCell(m),
      h("td", { class: "num hand-number", "data-label": "Hand", text: num(m.hand) ? m.hand : "–" }),
      h("td", { class: "players", "data-label": m.phase === "PHASE_SEATING" ? "Players" : "Players and scores", text: playersText(m) }),
      h("td", { class: "table", "data-label": "Table", text: tableText(m) }),
      h("td", { class: "links" }, watch, watch ? " · " : "", h("a", { href: link("/replay", m.match_id) }, "replay"))));
  }
  return h("table", { class: "cards matches", id }, h("thead", {}, h("tr", {},
    h("th", { scope: "col", text: "Match" }), h("th", { scope: "col", text: "State" }),
    h("th", { scope: "col", class: "num", text: "Hand" }), h("th", { scope: "col", text: "Players and scores" }),
    h("th", { scope: "col", text: "Table" }), h("th", { scope: "col", text: "Follow" }))), body);
}

function tournamentsTable(list) {
  if (!list.length) return h("p", { text: "None." });
  const body = h("tbody");
  for (const t of list) {
    body.append(h("tr", {},
      h("th", { scope: "row", class: "name" }, h("a", { href: link("/tournament", t.tournament_id) }, t.name || `Tournament ${t.tournament_id.slice(0, 8)}`)),
      h("td", { "data-label": "Phase", text: word(t.phase, "TOURNAMENT_PHASE_") }),
      h("td", { "data-label": "Format", text: word(t.format, "TOURNAMENT_FORMAT_") }),
      h("td", { class: "num", "data-label": "Entrants", text: t.entrants }),
      h("td", { class: "num", "data-label": "Round", text: `${t.round} of ${t.total_rounds}` })));
  }
  return h("table", { class: "cards" }, h("thead", {}, h("tr", {},
    h("th", { scope: "col", text: "Tournament" }), h("th", { scope: "col", text: "Phase" }),
    h("th", { scope: "col", text: "Format" }), h("th", { scope: "col", class: "num", text: "Entrants" }),
    h("th", { scope: "col", class: "num", text: "Round" }))), body);
}

async function load() {
  const [seating, live, ended, tours] = await Promise.all([
    getJson("/api/matches?phase=seating"),
    getJson("/api/matches?phase=playing"),
    getJson("/api/matches?phase=ended"),
    getJson("/api/tournaments"),
  ]);
  $("#seating").replaceChildren(matchesTable(seating.matches || [], "seating-table"));
  $("#live").replaceChildren(matchesTable(live.matches || [], "live-table"));
  $("#ended").replaceChildren(matchesTable(ended.matches || [], "ended-table"));
  const all = tours.tournaments || [];
  all.sort((a, b) => (a.phase === "TOURNAMENT_PHASE_RUNNING" ? -1 : 0) - (b.phase === "TOURNAMENT_PHASE_RUNNING" ? -1 : 0));
  $("#tournaments").replaceChildren(tournamentsTable(all));
  $("#status").textContent = "";
  document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
}

function failed(e) {
  const why = e.status ? "The game server does not answer" : "This site does not answer";
  $("#status").textContent = `${why}; the lists are kept up to date again as soon as it does.`;
}

// Who this browser plays as, or how to get a player (and a rating); the leaderboard.
async function mePanel() {
  const me = await signedIn();
  const board = h("a", { href: "/leaderboard", text: "the leaderboard" });
  if (!me.signed_in) {
    $("#me").replaceChildren(h("p", { id: "me-line" }, h("a", { href: "/sign-in", text: "Register a player, or sign in with yours" }),
      " to play rated matches and get a rating. See ", board, "."));
    return;
  }
  const out = h("button", { type: "button", id: "sign-out", text: "Sign out" });
  out.addEventListener("click", async () => {
    try {
      await post("/api/play/me/sign-out", {});
    } finally {
      location.reload();
    }
  });
  $("#me").replaceChildren(h("p", { id: "me-line" }, "You play as ", playerLink(me.player), `: ${ratingsLine(me.ratings)}. See `, board, ". "),
    h("p", { class: "controls" }, out));
  document.body.dataset.signedIn = me.player.player_id;
}

mePanel();
createForm($("#create"));
load().catch(failed);
setInterval(() => load().catch(failed), 5000);
