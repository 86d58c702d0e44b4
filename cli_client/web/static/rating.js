// Registered players and their ratings on the pages: the pools, a rating in words ("1532?"
// while provisional), a player's name linking to their page with the bot flag, who this
// browser plays as, and POSTs of the players' API. The player token is in an HttpOnly cookie
// no script sees; `bergen_player_in` (no secret) only says that there is one.
import { h, getJson } from "/static/common.js";

// Each pool as the API names it, and in words.
export const POOLS = [["2", "2 seats"], ["3", "3 seats"], ["4", "4 seats"], ["pairs", "4 seats in pairs"]];
export const POOL_OF = {
  RATING_POOL_TWO: "2", RATING_POOL_THREE: "3", RATING_POOL_FOUR: "4", RATING_POOL_PAIRS: "pairs",
};
export const poolName = (word) => (POOLS.find(([w]) => w === word) || [word, word])[1];
export const isPool = (word) => POOLS.some(([w]) => w === word);

// "1532", or "1532?" while provisional; "–" for none.
export const ratingText = (r) => (r ? `${r.rating}${r.provisional ? "?" : ""}` : "–");

export const PROVISIONAL_NOTE = "A rating with ? is provisional: too few rated matches yet for it to be settled "
  + "(its uncertainty, sigma, is still above 6; about a dozen two-seat matches bring it down). "
  + "It moves faster meanwhile, and the player is not on the pool's leaderboard until it settles.";

export function botMark() {
  return h("abbr", { class: "bot", title: "a program, not a person", text: "bot" });
}

export const playerHref = (id, pool) => `/player?id=${encodeURIComponent(id)}${pool ? `&pool=${encodeURIComponent(pool)}` : ""}`;

// The player's name linking to their page, with the bot flag.
export function playerLink(p, pool) {
  const a = h("a", { href: playerHref(p.player_id, pool), class: "player-name", text: p.name });
  return p.bot ? h("span", {}, a, " ", botMark()) : a;
}

const marked = () => document.cookie.split(";").some((c) => c.trim() === "bergen_player_in=1");

let asked = null;

// Who this browser plays as: {signed_in: false}, or {signed_in: true, player, ratings}.
export function signedIn() {
  if (!marked()) return Promise.resolve({ signed_in: false });
  if (!asked) asked = getJson("/api/play/me").catch(() => ({ signed_in: false }));
  return asked;
}

// POST `body` as JSON; the answer's JSON, or throws an Error with `status`, `code`, `body`.
export async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const wait = r.headers.get("retry-after");
    const e = new Error(`${data.error || `status ${r.status}`}${wait ? ` (try again in ${wait} s)` : ""}`);
    e.status = r.status;
    e.code = data.code || "";
    e.body = data;
    throw e;
  }
  return data;
}

// "2 seats 1532?, 3 seats 1500?": the pools a player has played rated matches in.
export function ratingsLine(ratings) {
  const played = (ratings || []).filter((r) => Number(r.rated_matches || 0) > 0);
  if (!played.length) return "no rated match yet";
  return played.map((r) => `${poolName(POOL_OF[r.pool])} ${ratingText(r)}`).join(", ");
}
