// A pool's leaderboard: its players by rank, each name linking to the player's page with the
// bot flag, their rating and rated matches; a tab for each pool, and a page at a time
// (`page_token` in the address, so that the browser's back goes to the page before).
import { $, h, param, getJson } from "/static/common.js";
import { POOLS, isPool, poolName, playerLink, ratingText } from "/static/rating.js";

const pool = param("pool") || "2";
const token = param("page_token");
const size = param("page_size");

const here = (extra = {}) => {
  const q = new URLSearchParams({ pool, ...(size ? { page_size: size } : {}), ...extra });
  return `/leaderboard?${q}`;
};

function tabs() {
  $("#pools").replaceChildren(...POOLS.map(([word, words]) => h("a", {
    href: `/leaderboard?pool=${encodeURIComponent(word)}`, "data-pool": word,
    "aria-current": word === pool ? "page" : false, text: words,
  })));
}

function table(entries) {
  const body = h("tbody");
  for (const e of entries) {
    body.append(h("tr", { "data-player": e.player.player_id },
      h("td", { class: "num", "data-label": "Rank", text: e.rank }),
      h("th", { scope: "row", class: "name" }, playerLink(e.player, pool)),
      h("td", { class: "num", "data-label": "Rating", text: ratingText(e.rating) }),
      h("td", { class: "num", "data-label": "Rated matches", text: e.rating.rated_matches })));
  }
  return h("table", { class: "cards", id: "leaderboard-table" },
    h("caption", { class: "muted", text: `${poolName(pool)}: by rating, then the surer rating, then fewer matches` }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", class: "num", text: "Rank" }), h("th", { scope: "col", text: "Player" }),
      h("th", { scope: "col", class: "num", text: "Rating" }), h("th", { scope: "col", class: "num", text: "Rated matches" }))),
    body);
}

async function load() {
  tabs();
  if (!isPool(pool)) {
    $("#status").textContent = `There is no pool “${pool}”: choose one above.`;
    document.body.dataset.problem = "bad-pool";
    return;
  }
  document.title = `Leaderboard, ${poolName(pool)} · Bergen`;
  $("#title").textContent = `Leaderboard: ${poolName(pool)}`;
  const q = new URLSearchParams({ pool, ...(size ? { page_size: size } : {}), ...(token ? { page_token: token } : {}) });
  let page;
  try {
    page = await getJson(`/api/leaderboard?${q}`);
  } catch (e) {
    $("#status").textContent = e.status === 400 ? "This page of the leaderboard does not exist: go back to its first page."
      : "The leaderboard cannot be read now: the game server does not answer. Reload the page to try again.";
    $("#status").classList.add("problem");
    $("#pager").replaceChildren(h("a", { href: here(), text: "First page" }));
    document.body.dataset.problem = "unavailable";
    return;
  }
  const entries = page.entries || [];
  if (!entries.length) {
    $("#status").textContent = token ? "No more players." : "Nobody is on this leaderboard yet: a player shows here once their rating has settled, after about a dozen rated matches in this pool (until then it is provisional, shown with ?).";
    $("#board").replaceChildren();
  } else {
    const first = entries[0].rank;
    const last = entries[entries.length - 1].rank;
    $("#status").textContent = `Ranks ${first} to ${last}${page.next_page_token ? "" : " (the last page)"}.`;
    $("#board").replaceChildren(table(entries));
  }
  const pager = [];
  if (token) pager.push(h("a", { href: here(), id: "first-page", text: "First page" }));
  if (page.next_page_token) pager.push(h("a", { href: here({ page_token: page.next_page_token }), id: "next-page", rel: "next", text: "Next page" }));
  $("#pager").replaceChildren(...pager.flatMap((a, i) => (i ? [" · ", a] : [a])));
  document.body.dataset.loaded = "1";
}

load();
