// "My tournament": the tournament page as its entrant sees it. While the tournament is open,
// a form registers this browser's player; once registered, the page shows the entrant, its
// table each round (and goes there on its own: the match page opens as the entrant's seat,
// and comes back here when the match ends), a bye, the countdown to the next round, its place
// in the standings, and a withdrawal with its confirmation. The entrant's token is in an
// HttpOnly cookie this script never sees.
import { $, h, param, num } from "/static/common.js";
import { signedIn } from "/static/rating.js";

const id = param("id");
const api = (what = "") => `/api/play/tournaments/${encodeURIComponent(id)}${what}`;
const PLAYED = "bergen:tournament-played"; // matches this tab has come back from

let latest = null; // the tournament as the page's stream showed it last
let me = null; // "my tournament" as the gateway answered it last
let countdown = null; // { round, at: the time the next round starts, in ms }
let asking = false;
let again = false;

const entered = () => document.cookie.split(";").some((c) => c.trim() === `bergen_entered_${id}=1`);

function played() {
  try { return JSON.parse(sessionStorage.getItem(PLAYED) || "[]"); } catch (_) { return []; }
}

async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) throw new Error(data.error || `status ${r.status}`);
  return data;
}

function section() {
  return $("#me");
}

function state(name) {
  document.body.dataset.myTournament = name;
}

// The registration form: a name, or, for a browser signed in with a player, that player (a
// rated tournament takes registered players only).
async function registerForm(t) {
  const me = await signedIn();
  if ($("#register-form") || $("#rated-needs-player")) return; // drawn meanwhile
  if (t && t.settings && t.settings.rated && !me.signed_in) {
    section().hidden = false;
    section().replaceChildren(h("h2", { id: "me-h", text: "Play in this tournament" }),
      h("p", { id: "rated-needs-player" }, "This tournament is rated: its entrants are registered players. ",
        h("a", { href: "/sign-in", text: "Register a player, or sign in with yours" }), ", then come back to this page."));
    state("register");
    return;
  }
  const message = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const name = me.signed_in ? h("p", { class: "field playing-as", text: `Entering as ${me.player.name}` })
    : h("label", { class: "field" }, h("span", { text: "Your name" }),
      h("input", { name: "name", required: true, maxlength: 64, autocomplete: "nickname" }));
  const form = h("form", { id: "register-form", class: "form" }, name,
    h("button", { type: "submit", text: "Register" }), message);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = String(new FormData(form).get("name") || "");
    try {
      await post(api("/register"), { name });
      await ask();
    } catch (err) {
      message.textContent = `Not registered: ${err.message}`;
    }
  });
  section().hidden = false;
  section().replaceChildren(h("h2", { id: "me-h", text: "Play in this tournament" }), form);
  state("register");
}

function clockText(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function tick() {
  const line = $("#countdown");
  if (!line || !countdown) return;
  line.textContent = `Round ${countdown.round} starts in ${clockText((countdown.at - Date.now()) / 1000)}.`;
}

// What the entrant is to do now, in words, and the page's state for it.
function now(m) {
  const t = m.table;
  if (m.cancelled) return ["ended", "The tournament was cancelled before its start."];
  if (m.phase === "ended") {
    return ["ended", m.rank ? `The tournament has ended: you placed ${m.rank} of ${m.standings.length}.` : "The tournament has ended."];
  }
  if (m.withdrawn) return ["withdrawn", "You have withdrawn: you are paired no more."];
  if (m.phase === "registration") return ["waiting", "You are registered. The organiser starts the tournament."];
  if (t && t.playing) return ["playing", `Round ${t.round}: your table is table ${t.table}, seat ${num(t.seat) + 1}. Going to your table…`];
  if (m.bye && num(m.bye) === num(m.round)) return ["bye", `Round ${m.bye}: you have a bye (1 match point, no match to play).`];
  if (m.round === 0) return ["waiting", "The tournament has started: round 1 is being paired."];
  if (m.next_round) return ["between", `Round ${m.round} has ended.`];
  if (t && num(t.round) === num(m.round)) return ["between", `Your match of round ${m.round} has ended; the other tables play on.`];
  return ["between", `Round ${m.round} is being played at the other tables.`];
}

function withdrawControls(m) {
  const row = h("div", { id: "withdraw-row", class: "controls" });
  if (m.withdrawn || m.phase === "ended" || m.cancelled) return row;
  const button = h("button", { type: "button", id: "withdraw", text: "Withdraw from the tournament" });
  button.addEventListener("click", () => {
    const yes = h("button", { type: "button", id: "withdraw-yes", text: "Yes, withdraw" });
    const no = h("button", { type: "button", id: "withdraw-no", text: "No, stay in" });
    no.addEventListener("click", () => render(me));
    yes.addEventListener("click", async () => {
      try {
        await post(api("/withdraw"), {});
        await ask();
      } catch (err) {
        row.replaceChildren(h("p", { class: "problem", text: `Not withdrawn: ${err.message}` }));
      }
    });
    row.replaceChildren(h("p", { class: "controls" }, "Withdraw? You are paired no more, and a match you are playing goes on. ", yes, no));
    no.focus();
  });
  row.append(button);
  return row;
}

function markStandings(m) {
  for (const row of document.querySelectorAll("#standings-table tbody tr")) {
    row.classList.toggle("me", num(row.dataset.entrant) === num(m.entrant));
  }
}

function render(m) {
  me = m;
  const [name, text] = now(m);
  state(name);
  document.body.dataset.myRound = String(m.round);
  const who = (m.players || []).join(" & ") || `entrant ${m.entrant}`;
  const parts = [
    h("h2", { id: "me-h", text: `You: ${who} (#${m.entrant})` }),
    h("p", { id: "my-status", class: "status", role: "status", "aria-live": "polite", text: text }),
  ];
  const mine = (m.standings || []).find((s) => num(s.entrant) === num(m.entrant));
  if (mine && m.phase !== "registration") {
    parts.push(h("p", { id: "my-standing", text: `Standing: rank ${mine.rank} of ${m.standings.length}, ${mine.match_points} match points, margin ${mine.margin}.` }));
  }
  countdown = null;
  const next = m.next_round;
  if (next && m.phase === "running" && !m.withdrawn && !(m.table && m.table.playing)) {
    if (next.by_hand) parts.push(h("p", { id: "countdown", text: `The organiser starts round ${next.round}.` }));
    else {
      countdown = { round: next.round, at: Date.now() + next.starts_in_s * 1000 };
      parts.push(h("p", { id: "countdown" }));
    }
  }
  const t = m.table;
  if (t && t.playing) {
    parts.push(h("p", {}, h("a", { id: "my-table", href: tableHref(t.match_id) }, "Go to your table")));
  }
  parts.push(withdrawControls(m));
  section().hidden = false;
  section().replaceChildren(...parts);
  tick();
  markStandings(m);
  if (t && t.playing && !played().includes(t.match_id)) {
    // The round has seated the entrant: its seat's cookie came with this answer.
    setTimeout(() => { location.href = tableHref(t.match_id); }, 600);
  }
}

const tableHref = (match) => `/match?id=${encodeURIComponent(match)}&tournament=${encodeURIComponent(id)}`;

// Ask the gateway for "my tournament"; one request at a time, once more if asked meanwhile.
async function ask() {
  if (asking) { again = true; return; }
  asking = true;
  try {
    do {
      again = false;
      const r = await fetch(api(), { headers: { accept: "application/json" } });
      if (r.ok) render(await r.json());
      else if (r.status === 403) shown(latest);
    } while (again);
  } catch (_) {
    /* the next change of the tournament asks again */
  } finally {
    asking = false;
  }
}

// The tournament as its stream shows it, for a browser that holds no entrant.
function shown(t) {
  if (!t) return;
  if (t.phase === "TOURNAMENT_PHASE_REGISTRATION" && !t.cancelled) {
    if (!$("#register-form") && !$("#rated-needs-player")) registerForm(t);
  } else {
    section().hidden = true;
    state("watching");
  }
}

document.addEventListener("bergen:tournament", (e) => {
  latest = e.detail;
  if (entered()) ask();
  else shown(latest);
});

if (id) {
  setInterval(() => {
    tick();
    if (countdown && Date.now() > countdown.at + 1000 && entered()) ask();
  }, 1000);
  // Between the stream's changes, the table's result may be recorded a moment after its
  // match ends: asked again now and then while the entrant waits for a table.
  setInterval(() => { if (entered() && me && !(me.table && me.table.playing) && me.phase === "running") ask(); }, 5000);
}
