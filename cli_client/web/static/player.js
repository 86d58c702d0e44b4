// A registered player: name and bot flag, a rating in each pool (provisional ones with "?",
// explained), a graph of the rating over the player's rated matches in one pool, drawn here
// as inline SVG (each point a match: hover or focus it for the match and the rating before
// and after; it links to the match's row below), a text summary of it, and the table of
// those matches, newest first, each linking to its replay. The pool is `?pool=`, else the
// one the player has played most in.
import { $, h, param, getJson, localTime, svg } from "/static/common.js";
import { POOLS, POOL_OF, PROVISIONAL_NOTE, botMark, isPool, playerHref, poolName, ratingText, signedIn } from "/static/rating.js";

const id = param("id");
const MAX_MATCHES = 1000; // the newest ones shown at most, 100 a request
let points = []; // the pool's rated matches, oldest first
let pool = "";

const signed = (n) => (n > 0 ? `+${n}` : n < 0 ? `−${-n}` : "±0");
const when = (m) => (m.ended_at ? localTime(m.ended_at) : "a moment not known");

function ratingsTable(ratings) {
  const body = h("tbody");
  for (const r of ratings) {
    const word = POOL_OF[r.pool];
    const played = Number(r.rated_matches || 0);
    body.append(h("tr", { "data-pool": word },
      h("th", { scope: "row" }, played ? h("a", { href: playerHref(id, word), text: poolName(word) }) : poolName(word)),
      h("td", { class: "num rating", text: ratingText(r) }),
      h("td", { class: "num", text: played }),
      h("td", { class: "num", text: `${Number(r.mu).toFixed(2)}, ${Number(r.sigma).toFixed(2)}` }),
      h("td", {}, r.provisional ? "not yet" : h("a", { href: `/leaderboard?pool=${encodeURIComponent(word)}`, text: "yes" }))));
  }
  return h("table", { class: "compact", id: "ratings-table" },
    h("thead", {}, h("tr", {}, ...["Pool", "Rating", "Rated matches", "mu, sigma", "On the leaderboard"].map((x, i) => h("th", { scope: "col", class: i === 1 || i === 2 || i === 3 ? "num" : "", text: x })))),
    body);
}

// Round `lo`..`hi` out to a step, and the ticks between.
function scale(lo, hi, count) {
  const span = Math.max(hi - lo, 20);
  const raw = span / count;
  const step = [10, 20, 25, 50, 100, 200, 250, 500, 1000].find((s) => s >= raw) || 1000;
  const from = Math.floor(lo / step) * step;
  const to = Math.max(Math.ceil(hi / step) * step, from + step);
  const ticks = [];
  for (let v = from; v <= to; v += step) ticks.push(v);
  return { from, to, ticks };
}

function pointText(m, i, n) {
  const place = `place ${m.place}, seat ${Number(m.seat) + 1}`;
  return `Rated match ${i + 1} of ${n}, ended ${when(m)}: ${ratingText(m.before)} to ${ratingText(m.after)} (${signed(m.after.rating - m.before.rating)}), ${place}`;
}

// The graph, as wide as its box (drawn again when that changes): the rating after each rated
// match, oldest on the left; hollow points are provisional ratings; the dashed line is 1500,
// where everyone starts.
function draw() {
  const box = $("#graph");
  if (!points.length) { box.replaceChildren(); return; }
  const width = Math.max(280, Math.floor(box.clientWidth || 600));
  const narrow = width < 520;
  const height = narrow ? 230 : 300;
  const pad = { left: 64, right: 16, top: 14, bottom: 44 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const values = points.flatMap((m) => [m.before.rating, m.after.rating]).concat([1500]);
  const { from, to, ticks } = scale(Math.min(...values), Math.max(...values), narrow ? 4 : 6);
  const n = points.length;
  const x = (i) => pad.left + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v) => pad.top + plotH - ((v - from) * plotH) / (to - from);
  const shape = svg("svg", {
    width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "graph-title graph-summary",
    id: "rating-graph", "data-points": n,
  }, svg("title", { id: "graph-title", text: `Rating in the ${poolName(pool)} pool over ${n} rated match${n === 1 ? "" : "es"}` }));
  for (const v of ticks) {
    shape.append(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: pad.left - 6, y: y(v) + 4, "text-anchor": "end", text: v }));
  }
  if (from <= 1500 && 1500 <= to) {
    shape.append(svg("line", { class: "start", x1: pad.left, x2: width - pad.right, y1: y(1500), y2: y(1500) }));
  }
  const every = Math.max(1, Math.ceil(n / (narrow ? 5 : 10)));
  for (let i = 0; i < n; i += 1) {
    if (i % every !== 0 && i !== n - 1) continue;
    if (i !== n - 1 && n - 1 - i < every / 2) continue; // keep the last tick's label clear
    shape.append(svg("text", { class: "tick", x: x(i), y: pad.top + plotH + 16, "text-anchor": "middle", text: i + 1 }));
  }
  shape.append(
    svg("line", { class: "axis", x1: pad.left, x2: pad.left, y1: pad.top, y2: pad.top + plotH }),
    svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: pad.top + plotH, y2: pad.top + plotH }),
    svg("text", { class: "label", x: pad.left + plotW / 2, y: height - 6, "text-anchor": "middle", text: "rated matches, oldest first" }),
    svg("text", { class: "label", x: 14, y: pad.top + plotH / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${pad.top + plotH / 2})`, text: "rating" }));
  shape.append(svg("polyline", { class: "line", points: points.map((m, i) => `${x(i)},${y(m.after.rating)}`).join(" ") }));
  const r = n > 150 ? 3 : 5;
  points.forEach((m, i) => {
    const text = pointText(m, i, n);
    shape.append(svg("a", { href: `#m-${m.match_id}`, "aria-label": text, class: "point-link" },
      svg("circle", { class: `point${m.after.provisional ? " provisional" : ""}`, cx: x(i), cy: y(m.after.rating), r, "data-match": m.match_id },
        svg("title", { text }))));
  });
  box.replaceChildren(shape, h("figcaption", { class: "muted", text: "Filled points: a settled rating; hollow: provisional. The dashed line is 1500, where everyone starts. Hover or focus a point for its match; each links to the match's row below." }));
}

function summary(name) {
  const n = points.length;
  if (!n) return `${name} has no rated match in the ${poolName(pool)} pool yet.`;
  const first = points[0];
  const last = points[n - 1];
  const afters = points.map((m) => m.after.rating);
  const best = Math.max(...afters);
  const worst = Math.min(...afters);
  const wins = points.filter((m) => Number(m.place) === 1).length;
  return `${name} has played ${n} rated match${n === 1 ? "" : "es"} in the ${poolName(pool)} pool${n === MAX_MATCHES ? " (the latest shown)" : ""}: `
    + `from ${ratingText(first.before)} before the first to ${ratingText(last.after)} after the latest (${signed(last.after.rating - first.before.rating)}), `
    + `highest ${best}, lowest ${worst}; placed first in ${wins ? `${wins} of them` : "none"}. The latest ended ${when(last)}.`;
}

function history() {
  if (!points.length) return h("p", { text: "None yet." });
  const body = h("tbody");
  const n = points.length;
  for (let i = n - 1; i >= 0; i -= 1) {
    const m = points[i];
    const change = m.after.rating - m.before.rating;
    body.append(h("tr", { id: `m-${m.match_id}`, "data-match": m.match_id, tabindex: "-1" },
      h("td", { class: "num", "data-label": "Match", text: i + 1 }),
      h("td", { "data-label": "Ended" }, m.ended_at ? h("time", { datetime: m.ended_at, title: new Date(m.ended_at).toLocaleString(), text: localTime(m.ended_at) }) : "–"),
      h("td", { class: "num", "data-label": "Seat", text: Number(m.seat) + 1 }),
      h("td", { class: "num", "data-label": "Place", text: m.place }),
      h("td", { class: "num", "data-label": "Before", text: ratingText(m.before) }),
      h("td", { class: "num", "data-label": "After", text: ratingText(m.after) }),
      h("td", { class: `num ${change >= 0 ? "up" : "down"}`, "data-label": "Change", text: signed(change) }),
      h("td", { class: "links" }, h("a", { href: `/replay?id=${encodeURIComponent(m.match_id)}`, text: "replay" }), " · ",
        h("a", { href: `/api/matches/${encodeURIComponent(m.match_id)}/record`, download: `match-${m.match_id}.json`, text: "record" }))));
  }
  return h("table", { class: "compact", id: "history-table" },
    h("caption", { class: "muted", text: `${poolName(pool)}: newest first` }),
    h("thead", {}, h("tr", {}, ...["#", "Ended", "Seat", "Place", "Before", "After", "Change", "Match"].map((x, i) => h("th", { scope: "col", class: [0, 2, 3, 4, 5, 6].includes(i) ? "num" : "", text: x })))),
    body);
}

async function matches(word) {
  const found = [];
  let token = "";
  do {
    const q = new URLSearchParams({ pool: word, page_size: "100", ...(token ? { page_token: token } : {}) });
    const page = await getJson(`/api/players/${encodeURIComponent(id)}/matches?${q}`);
    found.push(...(page.matches || []));
    token = page.next_page_token || "";
  } while (token && found.length < MAX_MATCHES);
  return found.slice(0, MAX_MATCHES).reverse();
}

function problem(text, kind) {
  $("#status").textContent = text;
  $("#status").classList.add("problem");
  document.body.dataset.problem = kind;
  for (const el of $("#main").children) if (el.id !== "status" && el.tagName !== "H1") el.hidden = true;
}

async function load() {
  if (!id) { problem("No player named (?id=).", "no-id"); return; }
  let got;
  try {
    got = await getJson(`/api/players/${encodeURIComponent(id)}`);
  } catch (e) {
    if (e.status === 404) problem("No player with this id.", "not-found");
    else if (e.status === 400) problem("This is not a player's id.", "bad-id");
    else problem("The player cannot be shown now: the game server does not answer. Reload the page to try again.", "unavailable");
    return;
  }
  const p = got.player;
  const ratings = got.ratings || [];
  document.title = `${p.name} · Bergen`;
  const me = await signedIn();
  const mine = me.signed_in && me.player.player_id === p.player_id;
  $("#title").replaceChildren(p.name, ...(p.bot ? [" ", botMark()] : []), ...(mine ? [h("span", { class: "muted", text: " (you)" })] : []));
  $("#ratings").replaceChildren(ratingsTable(ratings));
  const provisional = ratings.some((r) => r.provisional);
  $("#provisional-note").textContent = provisional ? PROVISIONAL_NOTE : "";
  $("#provisional-note").hidden = !provisional;
  const most = [...ratings].sort((a, b) => Number(b.rated_matches || 0) - Number(a.rated_matches || 0))[0];
  pool = isPool(param("pool")) ? param("pool") : (most && Number(most.rated_matches) ? POOL_OF[most.pool] : "2");
  $("#pools").replaceChildren(...POOLS.map(([word, words]) => h("a", {
    href: playerHref(id, word), "data-pool": word, "aria-current": word === pool ? "page" : false, text: words,
  })));
  try {
    points = await matches(pool);
  } catch (_) {
    $("#status").textContent = "The rated matches cannot be read now. Reload the page to try again.";
    return;
  }
  $("#graph-summary").textContent = summary(p.name);
  draw();
  $("#history").replaceChildren(history());
  $("#status").textContent = p.bot ? `${p.name} is a program (a bot), not a person.` : "";
  document.body.dataset.loaded = "1";
}

let resized = null;
window.addEventListener("resize", () => {
  clearTimeout(resized);
  resized = setTimeout(draw, 150);
});

load();
