// Shared helpers of the pages: fetching the gateway's JSON, words for enums, events in words.
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

export async function getJson(url) {
  const r = await fetch(url, { headers: { accept: "application/json" } });
  if (!r.ok) {
    let why = r.statusText;
    try { why = (await r.json()).error || why; } catch (_) { /* not JSON */ }
    throw new Error(`${r.status}: ${why}`);
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

export function seatName(view, seat) {
  const s = (view.seats || [])[seat];
  return s && s.name ? s.name : `seat ${seat + 1}`;
}

export function sideName(view, side) {
  if (!view.partnerships) return seatName(view, side);
  return `${seatName(view, side)} and ${seatName(view, side + 2)}`;
}

const END = { END_LEFT: "left", END_RIGHT: "right" };

// One event in words, seen as a spectator. `view` gives the names.
export function describe(ev, view) {
  const seat = (s) => seatName(view, num(s));
  if (ev.match_created) return `Match created (${ev.match_created.seats} seats)`;
  if (ev.seat_taken) return `${ev.seat_taken.name} took seat ${num(ev.seat_taken.seat) + 1}`;
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
    return `Hand ${e.hand} ended: ${word(e.reason, "HAND_END_REASON_")}; scores ${scores}`;
  }
  if (ev.match_ended) {
    const r = ev.match_ended.result || {};
    const who = r.winner_side !== undefined ? `${sideName(view, num(r.winner_side))} won` : "no winner";
    return `Match ended (${word(r.reason, "MATCH_END_REASON_")}): ${who}, ${(r.scores || []).join(" to ")}`;
  }
  if (ev.seed_revealed) return `Server seed revealed: ${ev.seed_revealed.server_seed.slice(0, 16)}…`;
  return "(an event)";
}

export function clockText(ms) {
  const s = Math.max(0, Math.floor(num(ms) / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}
