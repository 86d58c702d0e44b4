// A live match as a spectator sees it: the view after each burst, every event in order.
// The log and the last seq are kept in sessionStorage, so a reloaded page resumes its stream
// after the last event it showed (no gap, no repeat); EventSource's own reconnects send
// Last-Event-ID, which the gateway maps onto the seq.
import {
  $, h, param, describe, num, word, seatName, clockText, endText, abandonNote, diagnose, showProblem,
  clearProblem, endStream,
} from "/static/common.js";
import { line, tile } from "/static/tiles.js";
import { startPlayer } from "/static/play.js";
import { botMark, playerHref } from "/static/rating.js";

const id = param("id");
const key = `bergen:match:${id}`;
const saved = JSON.parse(sessionStorage.getItem(key) || '{"last":0,"log":[]}');
let view = null;
let viewAt = 0;

function save() { sessionStorage.setItem(key, JSON.stringify(saved)); }

function addLog(seq, text) {
  const item = h("li", { "data-seq": seq, value: seq, text });
  $("#log").append(item);
  item.scrollIntoView({ block: "nearest" });
}

function renderView(v) {
  view = v;
  viewAt = performance.now();
  $("#title").textContent = v.name ? `Match: ${v.name}` : `Match ${v.match_id.slice(0, 8)}`;
  document.title = `${$("#title").textContent} · Bergen`;
  const phase = word(v.phase, "PHASE_");
  const turn = v.turn !== undefined ? `${seatName(v, num(v.turn))} to play` : "nobody to play";
  let status = `${phase}, hand ${v.hand_number}, ${turn}, ${v.boneyard_size} in the boneyard`;
  if (v.phase === "PHASE_SEATING") {
    const free = (v.seats || []).filter((s) => !s.name).length;
    status = v.rematch_of ? `A rematch: waiting for ${free} of its players to accept`
      : `Waiting for ${free} player${free === 1 ? "" : "s"}`;
  }
  if (v.phase === "PHASE_ENDED" && v.result) {
    const r = v.result;
    status = `Ended: ${endText(r, v)}, ${(r.scores || []).join(" to ")}${abandonNote(r)}`;
  }
  $("#status").textContent = v.rated ? `${status} · a rated match` : status;
  $("#board").replaceChildren(line(v.line || []));
  $("#ends").textContent = v.ends ? `Open ends: ${v.ends.left} and ${v.ends.right}` : "";
  const clocks = {};
  for (const c of v.clocks || []) clocks[num(c.seat)] = c;
  const body = h("tbody");
  for (const s of v.seats || []) {
    const seat = num(s.seat);
    const c = clocks[seat];
    const isTurn = v.turn !== undefined && num(v.turn) === seat;
    // A registered player's name links to their page (ratings and rated matches).
    const who = s.player_id ? [h("a", { href: playerHref(s.player_id), text: s.name }), ...(s.bot ? [" ", botMark()] : [])] : [s.name || (v.rematch_of ? "(kept for its player)" : "(free)")];
    body.append(h("tr", { "data-seat": seat },
      h("td", { class: isTurn ? "turn" : "" }, `${seat + 1}. `, ...who, isTurn ? " (to play)" : ""),
      h("td", { class: "num", text: s.tile_count }),
      h("td", { class: "num", text: (v.scores || [])[num(s.side)] ?? 0 }),
      h("td", { class: `num clock${c && low(num(c.left_ms)) ? " low" : ""}`, "data-seat": seat, text: c ? clockText(c.left_ms) + (c.running ? " running" : "") + (low(num(c.left_ms)) ? ", low" : "") : "–" })));
  }
  $("#seats").replaceChildren(h("table", {},
    h("caption", { class: "muted", text: [v.partnerships ? "Partnerships: seats 1 and 3, 2 and 4" : "", clockRules(v.rules)].filter(Boolean).join(". ") }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "Seat" }), h("th", { scope: "col", class: "num", text: "Tiles" }),
      h("th", { scope: "col", class: "num", text: "Score" }), h("th", { scope: "col", class: "num", text: "Clock" }))), body));
  const hands = $("#hands");
  hands.replaceChildren();
  if ((v.revealed_hands || []).length) {
    hands.append(h("h2", { text: "Hands at the end" }));
    v.revealed_hands.forEach((hand, seat) => {
      const row = h("div", { class: "hand", "aria-label": `${seatName(v, seat)}'s tiles` }, h("span", { text: `${seatName(v, seat)}: ` }));
      for (const t of hand.tiles || []) row.append(tile(num(t.low), num(t.high)));
      hands.append(row);
    });
  }
  $("#links").replaceChildren(h("a", { href: `/replay?id=${encodeURIComponent(id)}` }, "Replay this match"));
  if (v.rematch_of) {
    $("#links").append(" · ", h("a", { id: "rematch-of", href: `/match?id=${encodeURIComponent(v.rematch_of)}` }, "the match this one is a rematch of"));
  }
}

// The clock and what a timeout does (RULES.md section 11): "Clock 180 s + 2 s: a timeout
// plays for the seat, 3 in a row forfeit".
function clockRules(r) {
  if (!r || r.clock !== "CLOCK_FISCHER") return "";
  const what = r.on_timeout === "ON_TIMEOUT_FORFEIT" ? "a timeout forfeits"
    : `a timeout plays for the seat, ${num(r.timeouts_to_forfeit)} in a row forfeit`;
  return `Clock ${num(r.clock_initial)} s + ${num(r.clock_increment)} s: ${what}`;
}

// Low on time: under 10 s, or under a tenth of the time each seat started with.
function low(leftMs) {
  const initialMs = num(view && view.rules && view.rules.clock_initial) * 1000;
  return leftMs < 10_000 || leftMs < initialMs / 10;
}

// The running clock counts down here between the server's views, from the time it gave.
function tickClocks() {
  if (!view || !(view.clocks || []).length) return;
  const elapsed = performance.now() - viewAt;
  for (const c of view.clocks) {
    if (!c.running || c.falls_at_ms === undefined) continue;
    const left = num(c.falls_at_ms) - num(view.server_at_ms) - elapsed;
    const cell = document.querySelector(`td.clock[data-seat="${num(c.seat)}"]`);
    if (!cell) continue;
    cell.textContent = `${clockText(left)} running${low(left) ? ", low" : ""}`;
    cell.classList.toggle("low", low(left));
  }
}

// The stream was refused or ended early: say why (no such match, not a match id: for good;
// the game server or this site not answering: trying again).
async function refused() {
  const problem = await diagnose(`/api/matches/${encodeURIComponent(id)}`, "match");
  showProblem(problem || { kind: "busy", text: "This site is following as many matches as it can.", retry: true }, connect);
}

function connect() {
  const source = new EventSource(`/api/matches/${encodeURIComponent(id)}/events?after=${saved.last}`);
  source.addEventListener("view", (m) => { clearProblem(); renderView(JSON.parse(m.data)); });
  source.addEventListener("event", (m) => {
    const ev = JSON.parse(m.data);
    const seq = num(ev.seq);
    if (seq <= saved.last) return;
    const text = describe(ev, view || {});
    saved.last = seq;
    saved.log.push([seq, text]);
    save();
    addLog(seq, text);
  });
  endStream(source, refused);
}

if (!id) showProblem({ kind: "no-id", text: "No match named (?id=).", retry: false });
else {
  // A seat holder's page shows the seat's view (play.js); anyone else's, the spectator's.
  startPlayer(id, { renderView, addLog }).then((playing) => {
    if (playing) return;
    for (const entry of saved.log) addLog(entry[0], entry[1]);
    connect();
  });
}
setInterval(tickClocks, 250);
