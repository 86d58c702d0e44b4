// Playing in the browser: the lobby's form that creates a match, the match page's join form,
// and, for a browser that holds a seat, the seat's view: its own tiles face up (the legal ones
// highlighted), the others' as backs with their counts, and the plays made by clicks or keys
// (arrows or numbers choose a tile, L and R an end, Enter confirms). The seat's token is in an
// HttpOnly cookie this script never sees; the view comes from the seat's own stream.
import { $, h, num, word, seatName, sideName, describe } from "/static/common.js";
import { tile } from "/static/tiles.js";
import { signedIn } from "/static/rating.js";

const api = (id, what = "") => `/api/play/matches/${encodeURIComponent(id)}${what}`;
// A tournament's table (opened from "my tournament"): its players go back to the tournament,
// which pairs their next match; the game server rematches no tournament match.
const inTournament = new URLSearchParams(location.search).has("tournament");

// POST `body` as JSON; the answer's JSON, or throws an Error with `status` and `body`.
async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const e = new Error(data.error || `status ${r.status}`);
    e.status = r.status;
    e.body = data;
    throw e;
  }
  return data;
}

function field(label, control) {
  return h("label", { class: "field" }, h("span", { text: label }), control);
}

function select(name, options, chosen) {
  const s = h("select", { name });
  for (const [value, text] of options) s.append(h("option", { value, selected: value === chosen }, text));
  return s;
}

// The lobby's form: a new match with this browser seated; the page goes to it.
// The page's own id for one request it may send twice (a double click): the gateway does it
// once and answers the repeat alike. getRandomValues works on plain http too.
function requestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// What a timeout does (RULES.md section 11), asked only once a clock is chosen; how many
// timeouts in a row forfeit, only when a timeout plays for the seat. The defaults are the rules'.
function timeoutFields(form) {
  const onTimeout = field("On timeout", select("on_timeout", [["autoplay", "play automatically"], ["forfeit", "forfeit"]], "autoplay"));
  const inARow = field("Timeouts in a row that forfeit", h("input", { name: "timeouts_to_forfeit", type: "number", min: 1, max: 99, value: 3, required: true }));
  const show = () => {
    const clocked = form.elements.clock.value !== "";
    onTimeout.hidden = !clocked;
    inARow.hidden = !clocked || form.elements.on_timeout.value === "forfeit";
    // A hidden field is no field: the browser neither checks it nor sends it.
    for (const f of [onTimeout, inARow]) for (const c of f.querySelectorAll("input, select")) c.disabled = f.hidden;
  };
  form.addEventListener("change", show);
  return [onTimeout, inARow, show];
}

// The creation's clock: null, or {initial_s, increment_s, on_timeout[, timeouts_to_forfeit]}.
function clockOf(f) {
  const clock = String(f.get("clock") || "");
  if (!clock) return null;
  const [initial, increment] = clock.split("+").map(Number);
  const out = { initial_s: initial, increment_s: increment, on_timeout: String(f.get("on_timeout") || "autoplay") };
  if (out.on_timeout === "autoplay") out.timeouts_to_forfeit = Number(f.get("timeouts_to_forfeit"));
  return out;
}

// The name a seat is taken under: a field, or the signed-in player's name (the seat is then
// that player's, and the field is gone).
function nameField(me) {
  if (me && me.signed_in) {
    return h("p", { class: "field playing-as", text: `Playing as ${me.player.name}` });
  }
  return field("Your name", h("input", { name: "name", required: true, maxlength: 64, autocomplete: "nickname" }));
}

// The lobby's "rated" choice: a rated match needs every seat held by a registered player.
function ratedField(me) {
  const box = h("input", { name: "rated", type: "checkbox", disabled: !(me && me.signed_in) });
  const label = h("label", { class: "field check" }, box, h("span", { text: "Rated" }));
  if (me && me.signed_in) return label;
  return h("span", { class: "field" }, label, h("a", { class: "hint", href: "/sign-in", text: "sign in to play rated" }));
}

export function createForm(container) {
  const request = requestId();
  const message = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const name = h("span", { class: "name-slot" }, nameField(null));
  const rated = h("span", { class: "rated-slot" }, ratedField(null));
  signedIn().then((me) => {
    name.replaceChildren(nameField(me));
    rated.replaceChildren(ratedField(me));
    container.dataset.signedIn = me.signed_in ? "1" : "";
  });
  const form = h("form", { id: "create-form", class: "form" },
    name,
    field("Match name", h("input", { name: "match_name", maxlength: 100 })),
    field("Seats", select("seats", [["2", "2"], ["3", "3"], ["4", "4"], ["p", "4 in partnerships"]], "2")),
    field("Rules", select("preset", [["standard", "standard"], ["american", "american"], ["pips", "pips"], ["eastern", "eastern"]], "standard")),
    field("Clock", select("clock", [["", "none"], ["180+2", "3 min + 2 s"], ["300+5", "5 min + 5 s"], ["600+10", "10 min + 10 s"]], "")));
  const [onTimeout, inARow, showTimeouts] = timeoutFields(form);
  form.append(onTimeout, inARow,
    field("Computer seats", h("input", { name: "bots", type: "number", min: 0, max: 3, value: 0 })),
    field("Computer strength", select("bot_policy", [["random", "random"], ["greedy", "greedy"], ["montecarlo", "monte carlo"], ["ismcts", "tree search (ISMCTS)"]], "greedy")),
    rated,
    h("button", { type: "submit", text: "Create and take seat 1" }), message);
  showTimeouts();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const seats = f.get("seats");
    try {
      const made = await post("/api/play/matches", {
        request,
        name: String(f.get("name") || ""),
        match_name: String(f.get("match_name") || ""),
        seats: seats === "p" ? 4 : Number(seats),
        partnerships: seats === "p",
        preset: f.get("preset"),
        clock: clockOf(f),
        bots: Number(f.get("bots") || 0),
        bot_policy: f.get("bot_policy"),
        rated: f.get("rated") === "on",
      });
      location.href = `/match?id=${encodeURIComponent(made.match_id)}`;
    } catch (err) {
      message.textContent = `Not created: ${err.message}`;
    }
  });
  container.replaceChildren(form);
}

// The match page's join form, while the match has a free seat and this browser holds none.
// A rematch offers none: its seats are kept for the players of the match before it, who
// accept it from that match's page.
async function joinForm(id) {
  let view;
  try {
    const r = await fetch(`/api/matches/${encodeURIComponent(id)}`, { headers: { accept: "application/json" } });
    if (!r.ok) return;
    view = await r.json();
  } catch (_) { return; }
  if (view.phase !== "PHASE_SEATING") return;
  if (view.rematch_of) {
    $("#player").replaceChildren(h("p", { id: "rematch-note", class: "status" },
      "A rematch: its seats are kept for the players of ",
      h("a", { href: `/match?id=${encodeURIComponent(view.rematch_of)}` }, "the match before"),
      ", who accept it there."));
    return;
  }
  const me = await signedIn();
  if (view.rated && !me.signed_in) {
    $("#player").replaceChildren(h("h2", { text: "Play in this match" }),
      h("p", { id: "rated-needs-player" }, "This match is rated: its seats are taken by registered players. ",
        h("a", { href: "/sign-in", text: "Register a player, or sign in with yours" }), ", then come back to this page."));
    return;
  }
  const request = requestId();
  const free = (view.seats || []).filter((s) => !s.taken);
  const message = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const form = h("form", { id: "join-form", class: "form" },
    nameField(me),
    field("Seat", select("seat", [["", "any free seat"], ...free.map((s) => [String(num(s.seat)), `seat ${num(s.seat) + 1}`])], "")),
    h("button", { type: "submit", text: "Join this match" }), message);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    const seat = f.get("seat");
    try {
      await post(api(id, "/join"), { request, name: String(f.get("name") || ""), seat: seat === "" ? null : Number(seat) });
      location.reload();
    } catch (err) {
      message.textContent = `Not joined: ${err.message}`;
    }
  });
  $("#player").replaceChildren(h("h2", { text: "Play in this match" }), form);
}

// A tile's back, for the other seats' hands.
function back() {
  return h("span", { class: "back", "aria-hidden": "true" });
}

const END_WORDS = { left: "left", right: "right" };

// The player's view and its controls, once the browser is known to hold a seat.
class Seat {
  constructor(id, hooks) {
    this.id = id;
    this.hooks = hooks;
    this.view = null;
    this.selected = null; // the chosen tile ("3-5")
    this.end = null; // the chosen end ("left" or "right")
    this.busy = false;
    this.asking = false; // the resign question is on the page
    this.deviceUrl = null; // the link for another device, while it holds
    this.key = `bergen:play:${id}`;
    this.saved = JSON.parse(sessionStorage.getItem(this.key) || '{"last":0,"log":[]}');
  }

  playable() {
    const out = {};
    for (const p of (this.view && this.view.playable) || []) out[p.tile] = p.ends;
    return out;
  }

  myTurn() {
    const v = this.view;
    return !!v && v.turn !== undefined && num(v.turn) === num(v.viewer_seat) && v.phase === "PHASE_PLAYING";
  }

  say(text, problem = false) {
    const m = $("#play-msg");
    m.textContent = text;
    m.classList.toggle("problem", problem);
  }

  render(v) {
    if (this.view && num(v.version) < num(this.view.version)) return; // an older answer
    this.view = v;
    this.hooks.renderView(v);
    const fits = this.playable();
    if (this.selected && !fits[this.selected]) { this.selected = null; this.end = null; }
    const me = num(v.viewer_seat);
    document.body.dataset.seat = String(me);
    document.body.dataset.version = String(num(v.version));
    document.body.dataset.turn = this.myTurn() ? "mine" : "";
    const others = h("ul", { class: "others", "aria-label": "the other seats" });
    for (const s of v.seats || []) {
      if (num(s.seat) === me) continue;
      const count = num(s.tile_count);
      const row = h("li", { "data-seat": num(s.seat), "aria-label": `${seatName(v, num(s.seat))}: ${count} tiles` },
        h("span", { text: `${seatName(v, num(s.seat))}: ${count} ` }));
      for (let i = 0; i < Math.min(count, 12); i += 1) row.append(back());
      others.append(row);
    }
    const hand = h("div", { id: "hand", class: "hand", role: "group", "aria-label": "your tiles" });
    (v.my_tiles || []).forEach((t, i) => {
      const text = `${num(t.low)}-${num(t.high)}`;
      const legal = this.myTurn() && !!fits[text];
      const b = h("button", {
        type: "button", class: `mytile${legal ? " legal" : ""}`, "data-tile": text, "data-index": i + 1,
        "aria-label": text, "aria-pressed": this.selected === text ? "true" : "false", disabled: !legal,
      }, tile(num(t.low), num(t.high)));
      b.addEventListener("click", () => this.choose(text, true));
      hand.append(b);
    });
    const ends = h("div", { id: "end-choice", class: "controls", hidden: !(this.selected && (fits[this.selected] || []).length > 1) });
    for (const side of ["left", "right"]) {
      const at = v.ends ? num(v.ends[side]) : "";
      const b = h("button", { type: "button", "data-end": side, "aria-pressed": this.end === side ? "true" : "false", text: `${side === "left" ? "Left" : "Right"} end (${at})` });
      b.addEventListener("click", () => { this.end = side; this.confirm(); });
      ends.append(b);
    }
    const turn = v.phase === "PHASE_SEATING" ? (v.rematch_of ? "Waiting for the other players to accept the rematch."
      : "Waiting for the other players. Send them this page's address.")
      : v.phase === "PHASE_ENDED" ? "The match has ended."
        : this.myTurn() ? "Your turn: choose a tile (arrows or its number), then an end (L or R), then Enter."
          : `${v.turn !== undefined ? seatName(v, num(v.turn)) : "Nobody"} to play.`;
    const controls = h("div", { class: "controls" });
    if (v.phase !== "PHASE_ENDED") {
      const resign = h("button", { type: "button", id: "resign", text: "Resign" });
      resign.addEventListener("click", () => this.askResign());
      const link = h("button", { type: "button", id: "device-link", text: "Link for another device" });
      link.addEventListener("click", () => this.deviceLink());
      controls.append(resign, link);
    } else if (!inTournament) {
      const r = this.rematch || {};
      const text = r.you_accepted ? "Rematch accepted" : r.state === "proposed" ? "Accept the rematch" : "Rematch";
      const again = h("button", { type: "button", id: "rematch", text, disabled: !!r.you_accepted || r.state === "started" });
      again.addEventListener("click", () => this.askRematch());
      controls.append(again);
    }
    const mine = seatName(v, me);
    $("#player").replaceChildren(
      h("h2", { id: "play-h", text: `Your seat: ${me + 1}, ${mine}${v.partnerships ? `, with ${seatName(v, (me + 2) % 4)}` : ""}` }),
      h("p", { id: "turn-line", class: "status", text: turn }),
      h("p", { id: "play-msg", role: "status", "aria-live": "polite" }),
      others, hand, ends, controls, h("p", { id: "rematch-state", role: "status", "aria-live": "polite", text: this.rematchText(v) }),
      h("div", { id: "confirm-row" }), h("p", { id: "device-url" }));
    // A question asked or a link given stays on the page while the match moves on.
    if (v.phase === "PHASE_ENDED") this.asking = false;
    if (this.asking) this.showResignQuestion();
    if (this.deviceUrl) this.showDeviceUrl();
    if (v.phase === "PHASE_ENDED" && !inTournament) this.watchRematch();
    if (this.lastMessage) this.say(...this.lastMessage);
  }

  // Choose a tile; played at once when it fits one end only (or leads).
  choose(text, byClick = false) {
    const fits = this.playable()[text];
    if (!fits || !this.myTurn()) return;
    if (this.selected !== text) this.end = null;
    this.selected = text;
    this.render(this.view);
    const button = document.querySelector(`#hand button[data-tile="${text}"]`);
    if (button) button.focus();
    if (byClick && fits.length === 1) this.confirm();
  }

  // Move the choice to the next (or previous) legal tile.
  step(by) {
    const legal = (this.view.my_tiles || []).map((t) => `${num(t.low)}-${num(t.high)}`).filter((t) => this.playable()[t]);
    if (!legal.length) return;
    const at = legal.indexOf(this.selected);
    const next = at < 0 ? (by > 0 ? 0 : legal.length - 1) : (at + by + legal.length) % legal.length;
    this.choose(legal[next]);
  }

  chooseEnd(side) {
    const fits = this.playable()[this.selected] || [];
    if (!fits.includes(side)) { this.say(`${this.selected || "No tile chosen"}: not at the ${side} end.`, true); return; }
    this.end = side;
    this.render(this.view);
  }

  async confirm() {
    if (!this.selected || this.busy) return;
    const fits = this.playable()[this.selected] || [];
    const end = fits.length === 1 ? fits[0] : this.end;
    if (fits.length > 1 && !end) { this.say("Choose an end: L or R.", true); return; }
    this.busy = true;
    const played = this.selected;
    try {
      const v = await post(api(this.id, "/play"), { tile: played, end, version: num(this.view.version) });
      this.lastMessage = [`You played ${played}${END_WORDS[end] ? ` at the ${end} end` : ""}.`, false];
      this.selected = null;
      this.end = null;
      this.render(v);
    } catch (err) {
      this.lastMessage = [`Not played: ${err.message}`, true];
      this.say(...this.lastMessage);
      await this.refresh();
    } finally {
      this.busy = false;
    }
  }

  async refresh() {
    try {
      const r = await fetch(api(this.id), { headers: { accept: "application/json" } });
      if (r.ok) this.render(await r.json());
    } catch (_) { /* the stream brings it */ }
  }

  askResign() {
    this.asking = true;
    this.showResignQuestion();
    $("#resign-no").focus();
  }

  showResignQuestion() {
    const yes = h("button", { type: "button", id: "resign-yes", text: "Yes, resign" });
    const no = h("button", { type: "button", id: "resign-no", text: "No, play on" });
    no.addEventListener("click", () => {
      this.asking = false;
      $("#confirm-row").replaceChildren();
    });
    yes.addEventListener("click", async () => {
      this.asking = false;
      try {
        this.render(await post(api(this.id, "/resign"), {}));
      } catch (err) {
        this.say(`Not resigned: ${err.message}`, true);
      }
    });
    $("#confirm-row").replaceChildren(h("p", { class: "controls" }, "Resign? Your side loses the match. ", yes, no));
  }

  // The rematch in words: who has accepted it, whom it waits for, where it is played.
  rematchText(v) {
    const r = this.rematch;
    if (!r || r.state === "none") return "";
    const names = (seats) => seats.map((s) => `seat ${num(s) + 1} (${seatName(v, num(s))})`).join(", ");
    if (r.state === "started") return `The rematch has started: ${r.link}`;
    if (r.state === "failed") return `No rematch: ${r.error}. Propose it again?`;
    const accepted = (r.accepted || []).length ? `accepted by ${names(r.accepted)}; ` : "";
    const problem = r.error ? ` (${r.error})` : "";
    return `Rematch: ${accepted}waiting for ${names(r.waiting_for || [])}.${problem}`;
  }

  showRematch(r) {
    this.rematch = r;
    document.body.dataset.rematch = r.state;
    if (this.view) this.render(this.view);
    if (r.state === "started" && r.you_accepted && r.match_id) {
      // The answer set this browser's seat in the new match: play it there.
      location.href = `/match?id=${encodeURIComponent(r.match_id)}`;
    }
  }

  // Asks for the rematch's state every 2 s once the match has ended (for 10 minutes).
  watchRematch() {
    if (this.rematchTimer) return;
    const until = Date.now() + 600_000;
    const ask = async () => {
      try {
        const r = await fetch(api(this.id, "/rematch"), { headers: { accept: "application/json" } });
        if (r.ok) {
          const state = await r.json();
          if (JSON.stringify(state) !== JSON.stringify(this.rematch)) this.showRematch(state);
        }
      } catch (_) { /* asked again below */ }
      if (Date.now() < until && !(this.rematch && this.rematch.state === "started")) this.rematchTimer = setTimeout(ask, 2000);
    };
    this.rematchTimer = setTimeout(ask, 0);
  }

  async askRematch() {
    try {
      this.showRematch(await post(api(this.id, "/rematch"), {}));
    } catch (err) {
      this.say(`No rematch: ${err.message}`, true);
    }
  }

  async deviceLink() {
    try {
      const made = await post(api(this.id, "/link"), {});
      this.deviceUrl = { url: made.url, until: Date.now() + made.expires_in_s * 1000 };
      this.showDeviceUrl();
    } catch (err) {
      this.say(`No link: ${err.message}`, true);
    }
  }

  showDeviceUrl() {
    const left = this.deviceUrl.until - Date.now();
    if (left <= 0) {
      this.deviceUrl = null;
      return;
    }
    $("#device-url").replaceChildren(`Open this once, within ${Math.max(1, Math.round(left / 60000))} minutes, on the other device: `,
      h("code", { text: this.deviceUrl.url }));
  }

  onKey(e) {
    if (!this.view || e.target.closest("input, select, textarea, form")) return;
    const k = e.key;
    if (k === "ArrowRight" || k === "ArrowDown") this.step(1);
    else if (k === "ArrowLeft" || k === "ArrowUp") this.step(-1);
    else if (/^[1-9]$/.test(k)) {
      const t = (this.view.my_tiles || [])[Number(k) - 1];
      if (t) this.choose(`${num(t.low)}-${num(t.high)}`);
    } else if (k === "l" || k === "L") this.chooseEnd("left");
    else if (k === "r" || k === "R") this.chooseEnd("right");
    else if (k === "Enter" && this.selected && !e.target.closest("#end-choice, .controls, #confirm-row")) this.confirm();
    else return;
    e.preventDefault();
  }

  onEvent(ev) {
    const v = this.view || {};
    const seq = num(ev.seq);
    if (seq <= this.saved.last) return;
    const text = describe(ev, v);
    this.saved.last = seq;
    this.saved.log.push([seq, text]);
    sessionStorage.setItem(this.key, JSON.stringify(this.saved));
    this.hooks.addLog(seq, text);
    if (ev.points_scored) {
      const p = ev.points_scored;
      this.lastMessage = [`${sideName(v, num(p.side))} scored ${p.points}: ${word(p.reason, "POINTS_REASON_")}.`, false];
      this.say(...this.lastMessage);
    }
    if (ev.timed_out) {
      this.lastMessage = [`${seatName(v, num(ev.timed_out.seat))}'s clock fell.`, true];
      this.say(...this.lastMessage);
    }
    if (ev.hand_ended) {
      this.lastMessage = [`Hand ${ev.hand_ended.hand} ended (${word(ev.hand_ended.reason, "HAND_END_REASON_")}); scores ${(ev.hand_ended.scores || []).join(" to ")}.`, false];
      this.say(...this.lastMessage);
    }
  }

  connect() {
    const source = new EventSource(`${api(this.id, "/events")}?after=${this.saved.last}`);
    source.addEventListener("view", (m) => {
      $("#banner").hidden = true;
      delete document.body.dataset.reconnecting;
      this.render(JSON.parse(m.data));
    });
    source.addEventListener("event", (m) => this.onEvent(JSON.parse(m.data)));
    source.addEventListener("end", () => {
      source.close();
      document.body.dataset.ended = "1";
    });
    // A dropped stream: the banner shows until a view arrives again. EventSource reconnects
    // by itself (with Last-Event-ID); when it gives up (a refusal while the gateway restarts),
    // a new one starts after the last event this page holds.
    source.onerror = () => {
      $("#banner").hidden = false;
      document.body.dataset.reconnecting = "1";
      if (source.readyState === EventSource.CLOSED) setTimeout(() => this.connect(), 2000);
    };
  }

  start(first) {
    for (const [seq, text] of this.saved.log) this.hooks.addLog(seq, text);
    this.render(first);
    document.addEventListener("keydown", (e) => this.onKey(e));
    this.connect();
  }
}

// Shows the seat's view when this browser holds a seat in match `id` (true), else the join
// form while the match has a free seat (false: the page stays a spectator's).
export async function startPlayer(id, hooks) {
  // The gateway marks (in a cookie holding no secret) the matches this browser holds a seat in.
  const marked = document.cookie.split(";").some((c) => c.trim() === `bergen_seated_${id}=1`);
  if (!marked) {
    joinForm(id);
    return false;
  }
  let r;
  try {
    r = await fetch(api(id), { headers: { accept: "application/json" } });
  } catch (_) {
    return false;
  }
  if (r.status !== 200) {
    if (r.status === 403) joinForm(id);
    return false;
  }
  document.body.dataset.player = "1";
  new Seat(id, hooks).start(await r.json());
  return true;
}
