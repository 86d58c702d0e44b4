// "My tournament": the tournament page as its entrant sees it. While the tournament is open,
// a form registers this browser's player (and their partner, at partnership tables); once
// registered, the page shows the entrant, its table each round (and goes there on its own:
// the match page opens as the player's seat, and comes back here when the match ends), a bye,
// the countdown to the next round, its place in the standings, one-time links that carry a
// player to another device, and a withdrawal with its confirmation. The players' tokens are
// in HttpOnly cookies this script never sees, and so is the entrant's client seed: once the
// organiser starts the tournament, the page asks for "my tournament" as soon as its stream
// shows the reveal phase, and the gateway reveals the seed before it answers; round 1 follows
// when every entrant has revealed, or the window closes.
//
// At partnership tables the entrant is two players, each with a seat of their own at the
// table. A browser holding both asks who plays on this device ("Play as Ann" / "Play as Bo")
// and remembers it; it may switch at any time (one browser holds one seat of a match at a
// time, so switching moves this device to the other player's seat).
import { $, h, param, num } from "/static/common.js";
import { signedIn } from "/static/rating.js";

const id = param("id");
const api = (what = "") => `/api/play/tournaments/${encodeURIComponent(id)}${what}`;
const PLAYED = "bergen:tournament-played"; // matches this tab has come back from
const BACK = "bergen:tournament-back"; // the table this tab left by "back to the tournament"
const CHOSEN = `bergen:tournament-player:${id}`; // who plays on this device, at partnership tables

let latest = null; // the tournament as the page's stream showed it last
let me = null; // "my tournament" as the gateway answered it last
let countdown = null; // { round, at: the time the next round starts, in ms }
let revealEnds = null; // while seeds are revealed: when the window closes, in ms
let asking = false;
let again = false;
let goNow = false; // a player was just chosen: to their table at once, if they have one

function chosen() {
  const v = localStorage.getItem(CHOSEN);
  return v === "0" || v === "1" ? Number(v) : null;
}

function choose(player) {
  if (player === null) localStorage.removeItem(CHOSEN);
  else localStorage.setItem(CHOSEN, String(player));
}
const links = {}; // the latest link for another device, by player: { url, minutes, until (ms) }

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

// The registration form: a name (at partnership tables, both players' names), or, for a
// browser signed in with a player, that player as the first (a rated tournament takes
// registered players only).
async function registerForm(t) {
  const pairs = !!(t && t.settings && t.settings.partnerships);
  const me = await signedIn();
  // Drawn meanwhile, or registered meanwhile (the form of a call made before the
  // registration would otherwise be drawn over the entrant's section, its links with it).
  if ($("#register-form") || $("#rated-needs-player") || entered()) return;
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
  const form = h("form", { id: "register-form", class: "form", "data-pairs": pairs ? "1" : "0" }, name);
  if (pairs) {
    form.append(h("label", { class: "field" }, h("span", { text: "Your partner's name" }),
      h("input", { name: "partner", required: true, maxlength: 64, autocomplete: "off" })));
  }
  form.append(h("button", { type: "submit", text: pairs ? "Register the pair" : "Register" }), message);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const body = { name: String(f.get("name") || "") };
    if (pairs) body.partner = String(f.get("partner") || "");
    try {
      await post(api("/register"), body);
      choose(null); // a new entrant: who plays here is asked afresh
      await ask();
    } catch (err) {
      message.textContent = `Not registered: ${err.message}`;
    }
  });
  section().hidden = false;
  const intro = pairs ? [h("p", { text: "Entrants here are pairs: each of you plays a seat of your side at every table." })] : [];
  section().replaceChildren(h("h2", { id: "me-h", text: "Play in this tournament" }), ...intro, form);
  state("register");
}

function clockText(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function tick() {
  const line = $("#countdown");
  if (line && countdown) {
    line.textContent = `Round ${countdown.round} starts in ${clockText((countdown.at - Date.now()) / 1000)}.`;
  }
  const closes = $("#reveal-countdown");
  if (closes && revealEnds !== null) {
    closes.textContent = `Round 1 starts when every entrant has revealed their seed, or in ${clockText((revealEnds - Date.now()) / 1000)} at the latest.`;
  }
}

// The player this device plays as: the one chosen, else the only one it holds; null while a
// browser holding both players has not said which (and for a single player, 0).
function playingAs(m) {
  const held = (m.held || [0]).map(num);
  if (held.length === 1) return held[0];
  const c = chosen();
  return c !== null && held.includes(c) ? c : null;
}

// What the entrant is to do now, in words, and the page's state for it.
function now(m) {
  const t = m.table;
  const as = playingAs(m);
  if (m.cancelled) return ["ended", "The tournament was cancelled before its start."];
  if (m.phase === "ended") {
    return ["ended", m.rank ? `The tournament has ended: you placed ${m.rank} of ${m.standings.length}.` : "The tournament has ended."];
  }
  if (m.withdrawn) return ["withdrawn", "You have withdrawn: you are paired no more."];
  if (m.phase === "registration") return ["waiting", "You are registered. The organiser starts the tournament."];
  if (m.phase === "reveal") {
    const r = m.reveal || {};
    if (!r.revealed) return ["reveal", "Registration has closed, but your entrant's seed could not be revealed from this browser: unless it is revealed elsewhere, you are withdrawn before round 1."];
    return ["reveal", `Registration has closed and your seed is revealed (${r.entrants_revealed} of ${r.entrants} entrants have revealed theirs).`];
  }
  if (t && t.playing && as === null) return ["choose", `Round ${t.round}: your pair plays at table ${t.table}. Choose who plays on this device.`];
  if (t && t.playing) {
    const whose = m.partnerships ? `${m.players[as]}'s` : "your";
    return ["playing", `Round ${t.round}: ${whose} table is table ${t.table}, seat ${num(t.seat) + 1}. Going to the table…`];
  }
  if (m.bye && num(m.bye) === num(m.round)) return ["bye", `Round ${m.bye}: you have a bye (1 match point, no match to play).`];
  if (m.round === 0) return ["waiting", "The tournament has started: round 1 is being paired."];
  if (m.next_round) return ["between", `Round ${m.round} has ended.`];
  if (t && num(t.round) === num(m.round)) return ["between", `Your match of round ${m.round} has ended; the other tables play on.`];
  return ["between", `Round ${m.round} is being played at the other tables.`];
}

// A row of controls drawn again only when what it shows changes (`key`): the section is
// drawn again at every change of the tournament, and a button replaced between the press
// and the release of a click would lose that click (and a question being answered, its
// question).
function kept(id, key) {
  const old = document.getElementById(id);
  return old && old.dataset.key === key ? old : null;
}

function withdrawControls(m) {
  const key = JSON.stringify([!!m.withdrawn, m.phase === "ended", !!m.cancelled]);
  const old = kept("withdraw-row", key);
  if (old) return old;
  const row = h("div", { id: "withdraw-row", class: "controls", "data-key": key });
  if (m.withdrawn || m.phase === "ended" || m.cancelled) return row;
  const button = h("button", { type: "button", id: "withdraw", text: "Withdraw from the tournament" });
  button.addEventListener("click", () => {
    const yes = h("button", { type: "button", id: "withdraw-yes", text: "Yes, withdraw" });
    const no = h("button", { type: "button", id: "withdraw-no", text: "No, stay in" });
    no.addEventListener("click", () => { row.replaceChildren(button); button.focus(); });
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

// One-time links for another device: opened there once, within its minutes, a link holds the
// entrant's player there too (it carries no token). At partnership tables, one for each player
// this browser holds (the partner's own phone, say). Kept across the section's renders until
// they expire.
function deviceControls(m) {
  const held = (m.held || [num(m.player)]).map(num);
  const over = m.phase === "ended" || !!m.cancelled;
  const key = JSON.stringify([over, held, held.map((p) => (m.players || [])[p] ?? null)]);
  const old = kept("device-row", key);
  if (old) {
    for (const p of held) { // a link shown past its minutes goes
      const link = links[p];
      const shown = document.getElementById(held.length > 1 ? `device-url-${p}` : "device-url");
      if (link && Date.now() >= link.until && shown) shown.replaceChildren();
    }
    return old;
  }
  const row = h("div", { id: "device-row", class: "controls", "data-key": key });
  if (over) return row;
  for (const p of held) {
    const id = held.length > 1 ? `device-url-${p}` : "device-url";
    const shown = h("p", { id, class: "device-url" });
    // The section may be drawn again while a link is being made: the link goes to whichever
    // paragraph is on the page by then, not only to the one this button was drawn beside.
    const here = () => document.getElementById(id) || shown;
    const show = () => {
      const link = links[p];
      if (!link || Date.now() >= link.until) return;
      here().replaceChildren(`Open this once, within ${link.minutes} minutes, on ${held.length > 1 ? `${m.players[p]}'s` : "the other"} device: `,
        h("code", { text: link.url }));
    };
    const text = held.length > 1 ? `Link for ${m.players[p]}'s device` : "Link for another device";
    const button = h("button", { type: "button", id: held.length > 1 ? `device-link-${p}` : "device-link", text });
    button.addEventListener("click", async () => {
      try {
        const made = await post(api(`/link?player=${p}`), {});
        links[p] = { url: made.url, minutes: Math.round(made.expires_in_s / 60), until: Date.now() + made.expires_in_s * 1000 };
        show();
      } catch (err) {
        here().replaceChildren(h("span", { class: "problem", text: `No link: ${err.message}` }));
      }
    });
    show();
    row.append(button, shown);
  }
  return row;
}

function markStandings(m) {
  for (const row of document.querySelectorAll("#standings-table tbody tr")) {
    row.classList.toggle("me", num(row.dataset.entrant) === num(m.entrant));
  }
}

// At partnership tables: who plays on this device, and the switch to the other player.
function whoPlaysHere(m) {
  const row = h("div", { id: "playing-as", class: "controls" });
  const held = (m.held || []).map(num);
  const as = playingAs(m);
  const button = (p, text) => {
    const b = h("button", { type: "button", id: `play-as-${p}`, text });
    b.addEventListener("click", () => { choose(p); goNow = true; ask(); });
    return b;
  };
  if (as === null) {
    row.append(h("p", { text: "Who plays on this device? Each of you has a seat of your own at the table; this device plays one of them at a time." }),
      ...held.map((p) => button(p, `Play as ${m.players[p]}`)));
  } else {
    row.append(h("p", { id: "playing-as-text", text: `This device plays as ${m.players[as]}.` }));
    for (const p of held) if (p !== as) row.append(button(p, `Play as ${m.players[p]} instead`));
  }
  return row;
}

function render(m) {
  const as = playingAs(m);
  if (as !== null && num(m.player) !== as) {
    // Answered as another player than this device plays as: ask again as the right one.
    again = true;
    return;
  }
  me = m;
  const [name, text] = now(m);
  state(name);
  document.body.dataset.myRound = String(m.round);
  document.body.dataset.playingAs = as === null ? "" : String(as);
  const who = (m.players || []).join(" & ") || `entrant ${m.entrant}`;
  const parts = [
    h("h2", { id: "me-h", text: `You: ${who} (#${m.entrant})` }),
    h("p", { id: "my-status", class: "status", role: "status", "aria-live": "polite", text: text }),
  ];
  if (m.partnerships && (m.players || []).length === 2) parts.push(whoPlaysHere(m));
  const mine = (m.standings || []).find((s) => num(s.entrant) === num(m.entrant));
  if (mine && m.phase !== "registration") {
    parts.push(h("p", { id: "my-standing", text: `Standing: rank ${mine.rank} of ${m.standings.length}, ${mine.match_points} match points, margin ${mine.margin}.` }));
  }
  countdown = null;
  revealEnds = null;
  if (m.phase === "reveal" && m.reveal && !m.withdrawn) {
    revealEnds = Date.now() + m.reveal.closes_in_s * 1000;
    parts.push(h("p", { id: "reveal-countdown" }));
  }
  const next = m.next_round;
  if (next && m.phase === "running" && !m.withdrawn && !(m.table && m.table.playing)) {
    if (next.by_hand) parts.push(h("p", { id: "countdown", text: `The organiser starts round ${next.round}.` }));
    else {
      countdown = { round: next.round, at: Date.now() + next.starts_in_s * 1000 };
      parts.push(h("p", { id: "countdown" }));
    }
  }
  const t = m.table;
  if (t && t.playing && as !== null) {
    parts.push(h("p", {}, h("a", { id: "my-table", href: tableHref(t.match_id) }, "Go to your table")));
  }
  parts.push(deviceControls(m), withdrawControls(m));
  section().hidden = false;
  section().replaceChildren(...parts);
  tick();
  markStandings(m);
  const go = goNow;
  goNow = false;
  if (t && t.playing && as !== null && (go || (!played().includes(t.match_id) && sessionStorage.getItem(BACK) !== t.match_id))) {
    // The round has seated the player: its seat's cookie came with this answer. (Not back to
    // a table this tab has just left by its "back to the tournament" link.)
    setTimeout(() => { location.href = tableHref(t.match_id); }, go ? 0 : 600);
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
      const as = chosen();
      const r = await fetch(api(as === null ? "" : `?player=${as}`), { headers: { accept: "application/json" } });
      if (r.ok) render(await r.json());
      else if (r.status === 403 && as !== null) {
        choose(null); // a player this browser does not hold (any more): ask as the one it does
        again = true;
      } else if (r.status === 403) shown(latest);
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
  setInterval(() => { if (entered() && me && !(me.table && me.table.playing) && (me.phase === "running" || me.phase === "reveal")) ask(); }, 5000);
}
