// Shared helpers of the pages: fetching the gateway's JSON, words for enums, events in words,
// what to say when a page cannot show what it was asked for. People read seats and sides
// numbered from 1; the API counts from 0, so every number shown goes through seatLabel or
// sideLabel (or a name), and the server's own notes on a resignation or a timeout ("seat 0
// resigned") are never shown: the words are made here from the result's fields.
export const $ = (sel) => document.querySelector(sel);

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

// An SVG element, as `h` makes an HTML one (the pages' graphs).
const SVG_NS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c);
  return node;
}

// The JSON at `url`. Throws an Error with `status` and `body` (the gateway's error JSON) for
// an answer that is not a success, or without `status` when the gateway does not answer.
export async function getJson(url) {
  const r = await fetch(url, { headers: { accept: "application/json" } });
  if (!r.ok) {
    let body = {};
    try { body = await r.json(); } catch (_) { /* not JSON */ }
    const e = new Error(`${r.status}: ${body.error || r.statusText}`);
    e.status = r.status;
    e.body = body;
    throw e;
  }
  return r.json();
}

export function param(name) {
  return new URLSearchParams(location.search).get(name) || "";
}

// PHASE_PLAYING -> "playing"
export function word(value, prefix) {
  return String(value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ");
}

export const num = (v) => Number(v || 0);
export const tileText = (t) => `${num(t.low)}-${num(t.high)}`;

export const seatLabel = (seat) => `seat ${num(seat) + 1}`;
export const sideLabel = (side) => `side ${num(side) + 1}`;

export function seatName(view, seat) {
  const s = (view.seats || [])[seat];
  return s && s.name ? s.name : seatLabel(seat);
}

export function sideName(view, side) {
  if (!view.partnerships) return seatName(view, side);
  return `${seatName(view, side)} and ${seatName(view, side + 2)}`;
}

// A listing's match (MatchSummary: `players` by seat, "" for a free seat) as a view for the
// names above.
export const summaryView = (m) => ({
  partnerships: !!m.partnerships,
  seats: (m.players || []).map((name, seat) => ({ seat, name })),
});

// How a match ended, in a few words ("won by Ada", "abandoned", "Bo resigned; won by Ada"),
// from its result and a view (or summaryView) naming its seats.
export function endText(result, view) {
  const r = result || {};
  const won = r.winner_side !== undefined ? `won by ${sideName(view, num(r.winner_side))}` : "";
  const withWinner = (what) => (won ? `${what}; ${won}` : `${what}; no winner`);
  if (r.reason === "MATCH_END_REASON_ABANDONED") {
    if (r.resigned_seat !== undefined) return `${seatName(view, num(r.resigned_seat))} resigned; abandoned`;
    return "abandoned";
  }
  if (r.reason === "MATCH_END_REASON_FORFEIT") {
    const who = r.resigned_seat !== undefined ? seatName(view, num(r.resigned_seat))
      : r.forfeited_side !== undefined ? sideName(view, num(r.forfeited_side)) : "a side";
    if (r.cause === "FORFEIT_CAUSE_RESIGNED") return withWinner(`${who} resigned`);
    if (r.cause === "FORFEIT_CAUSE_TIMEOUT") return withWinner(`${who} forfeited on time`);
    return withWinner(`${who} forfeited`);
  }
  return won || "ended, no winner";
}

const END = { END_LEFT: "left", END_RIGHT: "right" };

// One event in words, seen as a spectator. `view` gives the names.
export function describe(ev, view) {
  const seat = (s) => seatName(view, num(s));
  if (ev.match_created) return `Match created (${ev.match_created.seats} seats)`;
  if (ev.seat_taken) {
    const taken = seatLabel(ev.seat_taken.seat);
    return ev.seat_taken.name ? `${ev.seat_taken.name} took ${taken}` : `${taken} taken`;
  }
  if (ev.dealt) return `Hand ${ev.dealt.hand} dealt (attempt ${ev.dealt.attempt}), ${ev.dealt.boneyard_size} in the boneyard`;
  if (ev.deal_voided) return `Hand ${ev.deal_voided.hand}: no double to lead, dealt again`;
  if (ev.tile_played) {
    const p = ev.tile_played;
    const end = END[p.end];
    const how = p.auto ? " (timed out: played for it)" : "";
    return end ? `${seat(p.seat)} played ${tileText(p.tile)} at the ${end} end${how}`
      : `${seat(p.seat)} led ${tileText(p.tile)}${how}`;
  }
  if (ev.tile_drawn) {
    const t = ev.tile_drawn.tile;
    return `${seat(ev.tile_drawn.seat)} drew ${t ? tileText(t) : "a tile"}`;
  }
  if (ev.passed) return `${seat(ev.passed.seat)} passed`;
  if (ev.timed_out) return `${seat(ev.timed_out.seat)}'s clock fell`;
  if (ev.points_scored) {
    const p = ev.points_scored;
    const reason = word(p.reason, "POINTS_REASON_");
    const reduced = num(p.base) !== num(p.points) ? ` (${p.base} before the reduction)` : "";
    return `${sideName(view, num(p.side))} scored ${p.points}: ${reason}${reduced}`;
  }
  if (ev.hand_ended) {
    const e = ev.hand_ended;
    const scores = (e.scores || []).join(" to ");
    const took = e.side !== undefined && num(e.points) ? `, ${sideName(view, num(e.side))} took ${e.points}` : "";
    return `Hand ${e.hand} ended: ${word(e.reason, "HAND_END_REASON_")}${took}; scores ${scores}`;
  }
  if (ev.match_ended) {
    const r = ev.match_ended.result || {};
    return `Match ended: ${endText(r, view)}, ${(r.scores || []).join(" to ")}${abandonNote(r)}`;
  }
  if (ev.seed_revealed) return `Server seed revealed: ${ev.seed_revealed.server_seed.slice(0, 16)}…`;
  return "(an event)";
}

// The organiser's words on abandoning a match, quoted; nothing for any other end (the server's
// note on a resignation or a timeout names the seat from 0).
export function abandonNote(r) {
  const abandoned = r && r.reason === "MATCH_END_REASON_ABANDONED" && r.resigned_seat === undefined;
  return abandoned && r.note ? ` (“${r.note}”)` : "";
}

// A time as the visitor's clock shows it: "14:05", with the date when not today.
export function localTime(iso) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const time = at.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  if (at.toDateString() === new Date().toDateString()) return time;
  return `${at.toLocaleDateString(undefined, { day: "numeric", month: "short" })} ${time}`;
}

// <time> of an API timestamp in local time, with the timestamp itself as its datetime.
// A time in the visitor's local time; "a moment not known" when the listing has none (a
// match listed by a server of an earlier version).
export function timeNode(iso) {
  if (!iso) return h("span", { class: "muted", text: "a moment not known" });
  return h("time", { datetime: iso, title: new Date(iso).toLocaleString(), text: localTime(iso) });
}

// Why a page cannot show what it was asked for, from the gateway's answer (its status and
// JSON body), and whether trying again can help: { kind, text, retry }.
export function failure(status, body, what) {
  const code = (body && body.code) || "";
  if (status === 400 || code === "INVALID_ARGUMENT") {
    return { kind: "bad-id", text: `This is not a ${what} id.`, retry: false };
  }
  if (status === 404) return { kind: "not-found", text: `No ${what} with this id.`, retry: false };
  if (code === "GATEWAY_BUSY") {
    return { kind: "busy", text: "This site is following as many streams as it can.", retry: true };
  }
  if (status === 502 || status === 503 || status === 504) {
    return { kind: "unavailable", text: "The game server does not answer.", retry: true };
  }
  const why = (body && body.error) || `status ${status}`;
  return { kind: "error", text: `The ${what} cannot be shown (${why}).`, retry: false };
}

// Asks `url` (the JSON of what a stream would show) why the stream was refused: a failure as
// above, or null when it answers (the stream was refused for a moment: try again).
export async function diagnose(url, what) {
  let r;
  try {
    r = await fetch(url, { headers: { accept: "application/json" } });
  } catch (_) {
    return { kind: "offline", text: "This site does not answer.", retry: true };
  }
  if (r.ok) return null;
  let body = {};
  try { body = await r.json(); } catch (_) { /* not JSON */ }
  return failure(r.status, body, what);
}

const RETRY_S = [2, 4, 8, 15, 30];

// Says `problem` in #status with a link home, and, when trying again can help, calls `again`
// after a growing delay. The body's data-problem and data-retries say what the page shows.
export function showProblem(problem, again) {
  const tries = Number(document.body.dataset.retries || 0);
  const status = $("#status");
  const wait = RETRY_S[Math.min(tries, RETRY_S.length - 1)];
  status.replaceChildren(problem.text, " ");
  if (problem.retry) status.append(`Trying again in ${wait} s. `);
  status.append(h("a", { href: "/", text: "Back to the matches and tournaments" }));
  status.classList.add("problem");
  document.body.dataset.problem = problem.kind;
  if (!problem.retry) {
    // For good: the page's empty sections would only say nothing more.
    for (const el of $("#main").children) if (el !== status && el.tagName !== "H1") el.hidden = true;
    return;
  }
  setTimeout(() => {
    document.body.dataset.retries = String(tries + 1);
    again();
  }, wait * 1000);
}

// The page shows what it was asked for again: no problem to say.
export function clearProblem() {
  $("#status").classList.remove("problem");
  delete document.body.dataset.problem;
  delete document.body.dataset.retries;
}

export function clockText(ms) {
  const s = Math.max(0, Math.floor(num(ms) / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// Ends a page's event stream as the gateway ends it: an "end" saying the match or tournament
// ended marks the page ended; any other end, or a refusal (an answer other than a stream),
// calls `refused` to say why; a dropped connection says it is reconnecting (EventSource
// reconnects by itself).
export function endStream(source, refused) {
  source.addEventListener("end", (m) => {
    source.close();
    if (JSON.parse(m.data || "{}").ended) document.body.dataset.ended = "1";
    else refused(); // the gateway's stream from the game server failed
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CONNECTING) $("#status").textContent = "Reconnecting…";
    else refused();
  };
}
