// A tournament's table: the match page opened from "my tournament" (?tournament=ID) links
// back to the tournament, and goes back there on its own once the match has ended.
import { $, h, param } from "/static/common.js";

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/;
const PLAYED = "bergen:tournament-played";
const BACK = "bergen:tournament-back";
const tournament = param("tournament");
const match = param("id");
const BACK_AFTER_MS = 4000;

function remember() {
  let done = [];
  try { done = JSON.parse(sessionStorage.getItem(PLAYED) || "[]"); } catch (_) { /* none yet */ }
  if (!done.includes(match)) done.push(match);
  sessionStorage.setItem(PLAYED, JSON.stringify(done.slice(-100)));
}

if (tournament && ID.test(tournament) && match) {
  const href = `/tournament?id=${encodeURIComponent(tournament)}`;
  const back = h("a", { href }, "back to the tournament");
  // Left by choice while the match is played: the tournament page does not send this tab
  // straight back here (it offers the table, and at partnership tables the other player).
  back.addEventListener("click", () => {
    if (document.body.dataset.ended !== "1") sessionStorage.setItem(BACK, match);
  });
  const note = h("p", { id: "table-return", class: "status" }, "A table of a tournament: ", back, ".");
  $("#main").prepend(note);
  let leaving = false;
  const check = () => {
    if (leaving || document.body.dataset.ended !== "1") return;
    leaving = true;
    remember();
    note.replaceChildren("The match has ended: back to the tournament in a moment (",
      h("a", { href }, "now"), ").");
    setTimeout(() => { location.href = href; }, BACK_AFTER_MS);
  };
  new MutationObserver(check).observe(document.body, { attributes: true, attributeFilter: ["data-ended"] });
  check();
}
