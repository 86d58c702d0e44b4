// A match step by step and hand by hand (buttons and arrow keys), each action with its
// points and reason; the deal is shown once the match has ended (the replay is complete).
import { $, h, getJson, param, describe, num, seatName, sideName, failure, showProblem, clearProblem, svg } from "/static/common.js";
import { line, tile } from "/static/tiles.js";

const id = param("id");
let events = [];
let view = {};
let complete = false;
let at = 0; // events[0..at) are applied
const sameTile = (a, b) => num(a.low) === num(b.low) && num(a.high) === num(b.high);

function stateAt(n) {
  const seats = (view.seats || []).length;
  const sides = view.partnerships ? 2 : seats;
  const s = { line: [], hands: [], counts: [], scores: new Array(sides).fill(0), hand: 0 };
  for (const ev of events.slice(0, n)) {
    if (ev.dealt) {
      s.hand = num(ev.dealt.hand);
      s.line = [];
      s.hands = (ev.dealt.hands || []).map((x) => (x.tiles || []).map((t) => ({ low: num(t.low), high: num(t.high) })));
      s.counts = (ev.dealt.hands || []).map((x) => num(x.count) || (x.tiles || []).length);
    } else if (ev.tile_played) {
      const p = ev.tile_played;
      const t = { low: num(p.tile.low), high: num(p.tile.high) };
      if (p.end === "END_LEFT" && s.line.length) {
        const left = s.line[0].left;
        s.line.unshift(t.low === left ? { left: t.high, right: t.low } : { left: t.low, right: t.high });
      } else if (p.end === "END_RIGHT" && s.line.length) {
        const right = s.line[s.line.length - 1].right;
        s.line.push(t.low === right ? { left: t.low, right: t.high } : { left: t.high, right: t.low });
      } else {
        s.line = [{ left: t.low, right: t.high }];
      }
      const seat = num(p.seat);
      s.counts[seat] = (s.counts[seat] || 1) - 1;
      if (s.hands[seat]) s.hands[seat] = s.hands[seat].filter((x) => !sameTile(x, t));
    } else if (ev.tile_drawn) {
      const seat = num(ev.tile_drawn.seat);
      s.counts[seat] = (s.counts[seat] || 0) + 1;
      if (ev.tile_drawn.tile && s.hands[seat]) s.hands[seat].push({ low: num(ev.tile_drawn.tile.low), high: num(ev.tile_drawn.tile.high) });
    } else if (ev.points_scored) {
      s.scores[num(ev.points_scored.side)] += num(ev.points_scored.points);
    } else if (ev.hand_ended) {
      s.scores = (ev.hand_ended.scores || []).map(num);
    } else if (ev.match_ended && ev.match_ended.result) {
      s.scores = (ev.match_ended.result.scores || s.scores).map(num);
    }
  }
  return s;
}

function render() {
  const s = stateAt(at);
  $("#board").replaceChildren(line(s.line));
  const body = h("tbody");
  s.scores.forEach((score, side) => body.append(h("tr", {}, h("td", { text: sideName(view, side) }), h("td", { class: "num", text: score }))));
  $("#scores").replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "Side" }), h("th", { scope: "col", class: "num", text: "Score" }))), body));
  const hands = $("#hands");
  hands.replaceChildren();
  s.counts.forEach((count, seat) => {
    const row = h("div", { class: "hand" }, h("span", { text: `${seatName(view, seat)} (${count}): ` }));
    if (complete && s.hands[seat]) for (const t of s.hands[seat]) row.append(tile(t.low, t.high));
    else row.append(h("span", { class: "muted", text: "hidden until the match ends" }));
    hands.append(row);
  });
  for (const li of document.querySelectorAll("#log li")) li.classList.toggle("current", Number(li.dataset.index) === at - 1);
  const current = document.querySelector("#log li.current");
  if (current) { current.scrollIntoView({ block: "nearest" }); current.setAttribute("aria-current", "step"); }
  for (const li of document.querySelectorAll("#log li:not(.current)")) li.removeAttribute("aria-current");
  $("#position").textContent = `step ${at} of ${events.length}, hand ${s.hand}`;
  $("#prev").disabled = at === 0;
  $("#prev-hand").disabled = at === 0;
  $("#next").disabled = at === events.length;
  $("#next-hand").disabled = at === events.length;
  document.body.dataset.step = String(at);
}

const handStarts = () => events.map((e, i) => (e.dealt ? i + 1 : -1)).filter((i) => i > 0);
function go(n) { at = Math.max(0, Math.min(events.length, n)); render(); }
function nextHand() { const next = handStarts().find((i) => i > at); go(next === undefined ? events.length : next); }
function prevHand() { const prev = handStarts().filter((i) => i < at).pop(); go(prev === undefined ? 0 : prev); }

async function load() {
  const [v, r] = await Promise.all([
    getJson(`/api/matches/${encodeURIComponent(id)}`),
    getJson(`/api/matches/${encodeURIComponent(id)}/replay`),
  ]);
  clearProblem();
  view = v;
  events = r.events || [];
  complete = r.complete;
  $("#title").textContent = `Replay: ${v.name || v.match_id.slice(0, 8)}`;
  $("#status").textContent = complete ? `${events.length} events; the deal is shown (the match has ended)`
    : `${events.length} events so far; hands stay hidden until the match ends`;
  const log = $("#log");
  events.forEach((ev, i) => {
    const item = h("li", { "data-index": i, "data-seq": ev.seq, value: ev.seq });
    item.append(h("a", { href: "#", "data-step": i + 1, text: describe(ev, view) }));
    log.append(item);
  });
  log.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-step]");
    if (a) { e.preventDefault(); go(Number(a.dataset.step)); }
  });
  const links = $("#links");
  if (complete) links.append(h("a", { href: `/api/matches/${encodeURIComponent(id)}/record`, download: `match-${id}.json` }, "Download the signed record"), " · ");
  links.append(h("a", { href: `/match?id=${encodeURIComponent(id)}` }, "Live page"));
  go(param("step") ? Number(param("step")) : events.length);
  if (complete) {
    $("#analysis-section").hidden = false;
    await askAnalysis("GET");
  }
}

// --- the analysis: asked for once (POST), then read until it is worked out (GET) ---

const pct = (x) => `${Math.round(100 * x)}%`;
const optionText = (o) => `${o.tile} ${o.end}`;
const sideOf = (seat) => (view.partnerships ? seat % 2 : seat);

async function askAnalysis(method) {
  const url = `/api/matches/${encodeURIComponent(id)}/analysis`;
  const said = $("#analysis-state");
  const button = $("#analyse");
  for (;;) {
    let r;
    try {
      r = await fetch(url, { method, headers: { accept: "application/json" } });
    } catch (_) {
      said.textContent = "This site does not answer; try again.";
      button.disabled = false;
      return;
    }
    const body = await r.json().catch(() => ({}));
    if (r.status === 200 && body.analysis) {
      said.textContent = "";
      button.hidden = true;
      showAnalysis(body.analysis);
      document.body.dataset.analysed = "1";
      return;
    }
    if (r.status === 404 && method === "GET") {
      said.textContent = "Not analysed yet: it takes a few seconds.";
      button.disabled = false;
      return;
    }
    if (r.status !== 202) {
      said.textContent = `No analysis: ${body.error || r.statusText}.`;
      button.disabled = false;
      return;
    }
    said.textContent = "Working it out: every decision against every world its seat could not tell apart…";
    button.disabled = true;
    method = "GET";
    await new Promise((done) => setTimeout(done, 1000));
  }
}

function showAnalysis(a) {
  const two = (view.partnerships || (view.seats || []).length === 2);
  for (const d of a.decisions) {
    const li = document.querySelector(`#log li[data-seq="${d.seq}"]`);
    if (!li) continue;
    const chosen = d.options[d.chosen];
    const best = d.options[d.best];
    li.dataset.judged = "1";
    const words = d.chosen === d.best ? `the best option (${pct(best.win.mean)} to win)`
      : `${pct(chosen.win.mean)} to win; best: ${optionText(best)}, ${pct(best.win.mean)}`;
    if (d.mark) {
      li.dataset.mark = d.mark;
      li.append(" ", h("span", { class: `mark ${d.mark}`, text: d.mark }));
    }
    li.append(h("span", { class: "best", text: ` (${words})` }));
  }
  const figure = $("#chances");
  figure.replaceChildren();
  if (two && a.decisions.length) figure.append(...chancesGraph(a));
  const tables = $("#analysis-tables");
  const seats = (view.seats || []).map((_, seat) => h("tr", {},
    h("td", { text: seatName(view, seat) }),
    h("td", { class: "num", text: a.accuracy[seat] === null ? "no decision" : a.accuracy[seat].toFixed(1) })));
  tables.replaceChildren(h("table", { id: "accuracy" },
    h("caption", { text: "Accuracy (100: every decision the best)" }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "Seat" }), h("th", { scope: "col", class: "num", text: "Accuracy" }))),
    h("tbody", {}, ...seats)));
  if (a.pars) {
    const rows = a.pars.map((p) => h("tr", {}, h("td", { class: "num", text: p.hand }),
      h("td", { class: "num", text: p.par }), h("td", { class: "num", text: p.played }),
      ...p.loss.map((x) => h("td", { class: "num", text: x }))));
    tables.append(h("table", { id: "pars" },
      h("caption", { text: `Each hand against its par: ${sideName(view, 0)}'s points minus ${sideName(view, 1)}'s with perfect play and every tile seen, what the hand gave, and the points each side gave away` }),
      h("thead", {}, h("tr", {}, ...["Hand", "Par", "Played", `Given away by ${sideName(view, 0)}`, `by ${sideName(view, 1)}`]
        .map((t) => h("th", { scope: "col", class: "num", text: t })))),
      h("tbody", {}, ...rows)));
  }
}

function chancesGraph(a) {
  const width = 640;
  const height = 240;
  const pad = { left: 52, right: 12, top: 12, bottom: 36 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const n = a.decisions.length;
  const x = (i) => pad.left + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v) => pad.top + plotH - v * plotH;
  const first = sideName(view, 0);
  const chance = (d) => {
    const w = d.options[d.chosen].win.mean;
    return sideOf(d.seat) === 0 ? w : 1 - w;
  };
  const shape = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", id: "chances-graph",
    "aria-labelledby": "chances-title", "data-points": n },
  svg("title", { id: "chances-title", text: `${first}'s chance of winning the match after each decision` }));
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    shape.append(svg("line", { class: v === 0.5 ? "start" : "grid", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: pad.left - 6, y: y(v) + 4, "text-anchor": "end", text: pct(v) }));
  }
  shape.append(
    svg("line", { class: "axis", x1: pad.left, x2: pad.left, y1: pad.top, y2: pad.top + plotH }),
    svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: pad.top + plotH, y2: pad.top + plotH }),
    svg("text", { class: "label", x: pad.left + plotW / 2, y: height - 8, "text-anchor": "middle", text: "decisions, in order" }),
    svg("polyline", { class: "line", points: a.decisions.map((d, i) => `${x(i)},${y(chance(d))}`).join(" ") }));
  a.decisions.forEach((d, i) => {
    const best = d.options[d.best];
    const text = `Hand ${d.hand}, ${seatName(view, d.seat)}: ${optionText(d.options[d.chosen])}${d.mark ? `, a ${d.mark}` : ""}; `
      + `${first} ${pct(chance(d))} to win; best option ${optionText(best)}`;
    const link = svg("a", { href: "#", "aria-label": text, class: "point-link", "data-seq": d.seq },
      svg("circle", { class: `point${d.mark ? ` ${d.mark}` : ""}`, cx: x(i), cy: y(chance(d)), r: d.mark ? 6 : 4 }, svg("title", { text })));
    link.addEventListener("click", (e) => {
      e.preventDefault();
      const li = document.querySelector(`#log li[data-seq="${d.seq}"]`);
      if (li) go(Number(li.dataset.index) + 1);
    });
    shape.append(link);
  });
  return [shape, h("figcaption", { class: "muted", text: `${first}'s chance of winning the match after each decision (large points: the marked ones). Hover or focus a point for the decision and the best option; choose it to step there.` })];
}

$("#analyse").addEventListener("click", () => askAnalysis("POST"));
$("#prev").addEventListener("click", () => go(at - 1));
$("#next").addEventListener("click", () => go(at + 1));
$("#prev-hand").addEventListener("click", prevHand);
$("#next-hand").addEventListener("click", nextHand);
document.addEventListener("keydown", (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  const k = { ArrowLeft: () => go(at - 1), ArrowRight: () => go(at + 1), PageUp: prevHand, PageDown: nextHand, Home: () => go(0), End: () => go(events.length) }[e.key];
  if (k) { e.preventDefault(); k(); }
});
function failed(e) {
  const problem = e.status ? failure(e.status, e.body, "match")
    : { kind: "offline", text: "This site does not answer.", retry: true };
  showProblem(problem, () => load().catch(failed));
}

if (!id) showProblem({ kind: "no-id", text: "No match named (?id=).", retry: false });
else load().catch(failed);
