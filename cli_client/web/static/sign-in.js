// Registering a player and signing in with one. A new player's token is shown once, with what
// it is for and the buttons to copy it and to save it to a file; the gateway keeps it for this
// browser in an HttpOnly cookie no script reads, so the page forgets it once the person says
// it is kept. Signing in takes a pasted token, or the file saved at registration.
import { $, h } from "/static/common.js";
import { playerLink, post, ratingsLine, signedIn } from "/static/rating.js";

const TOKEN = /bgp_[A-Za-z0-9_-]+/;

function field(label, control, hint) {
  return h("label", { class: "field" }, h("span", { text: label }), control, ...(hint ? [h("span", { class: "muted hint", text: hint })] : []));
}

function say(text, problem = false) {
  $("#status").textContent = text;
  $("#status").classList.toggle("problem", problem);
}

function current(me) {
  const section = $("#current");
  if (!me.signed_in) {
    section.hidden = true;
    document.body.dataset.signedIn = "";
    return;
  }
  const out = h("button", { type: "button", id: "sign-out", text: "Sign out" });
  out.addEventListener("click", async () => {
    try {
      await post("/api/play/me/sign-out", {});
      location.reload();
    } catch (err) {
      say(`Not signed out: ${err.message}`, true);
    }
  });
  section.replaceChildren(h("h2", { id: "current-h", text: "Signed in" }),
    h("p", { id: "signed-in-as" }, "This browser plays as ", playerLink(me.player), `: ${ratingsLine(me.ratings)}.`),
    h("p", { class: "muted", text: "Signing out forgets your player on this browser only (the seats it holds stay yours); sign in again with your token." }),
    h("p", { class: "controls" }, out, h("a", { href: "/", text: "Play" })));
  section.hidden = false;
  document.body.dataset.signedIn = me.player.player_id;
}

// The new player's token, once: copy it, save it, then say it is kept.
function showToken(made) {
  const section = $("#token-shown");
  const code = h("code", { id: "player-token", class: "token", text: made.player_token });
  const copy = h("button", { type: "button", id: "copy-token", text: "Copy the token" });
  const save = h("button", { type: "button", id: "save-token", text: "Save it to a file" });
  const done = h("button", { type: "button", id: "token-kept", text: "I have kept it" });
  const note = h("p", { id: "copy-note", role: "status", "aria-live": "polite" });
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(made.player_token);
      note.textContent = "Copied.";
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      note.textContent = "Selected: copy it with your keyboard or menu.";
    }
  });
  save.addEventListener("click", () => {
    const text = `Bergen player token of ${made.name} (player ${made.player_id}) on ${location.host}.\n`
      + "Keep it secret: whoever has it plays as this player. Sign in with it at /sign-in.\n"
      + `${made.player_token}\n`;
    const url = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
    const a = h("a", { href: url, download: `bergen-player-${made.name.replace(/[^A-Za-z0-9_-]+/g, "_")}.txt` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    note.textContent = "Saved to your downloads.";
  });
  done.addEventListener("click", () => {
    section.replaceChildren();
    section.hidden = true;
    location.reload();
  });
  section.replaceChildren(h("h2", { id: "token-h", text: `Keep your player token, ${made.name}` }),
    h("p", { class: "banner", id: "keep-it", text: "This is the only time it is shown. It is the only way to play as your player on another browser, or here after signing out: the server keeps only a hash of it, so it can be neither shown again nor replaced, and your name cannot be registered again. Whoever has it plays as you: keep it secret." }),
    h("p", {}, code),
    h("p", { class: "controls" }, copy, save, done), note);
  section.hidden = false;
  document.body.dataset.tokenShown = "1";
  copy.focus();
}

function registerForm() {
  const message = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const form = h("form", { id: "register-form", class: "form" },
    field("Name", h("input", { name: "name", required: true, maxlength: 24, autocomplete: "nickname" }),
      "1 to 24 letters, digits, spaces, - or _; unique whatever its case"),
    h("button", { type: "submit", text: "Register" }), message);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = String(new FormData(form).get("name") || "");
    try {
      const made = await post("/api/play/players", { name });
      message.textContent = "";
      showToken(made);
      $("#register-section").hidden = true;
      $("#sign-in-section").hidden = true;
      say(`Registered: you play as ${made.name} on this browser.`);
    } catch (err) {
      message.textContent = err.code === "NAME_TAKEN" ? `Not registered: the name is taken (names differing only in case are one name). Choose another.`
        : `Not registered: ${err.message}`;
      document.body.dataset.refused = err.code || String(err.status || "");
    }
  });
  $("#register").replaceChildren(form);
}

function signInForm() {
  const message = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const input = h("input", { name: "player_token", type: "password", required: true, autocomplete: "off", spellcheck: "false", maxlength: 400 });
  const file = h("input", { name: "file", type: "file", accept: ".txt,text/plain" });
  const form = h("form", { id: "sign-in-form", class: "form" },
    field("Player token", input, "starts with bgp_"),
    field("Or the file you saved", file),
    h("button", { type: "submit", text: "Sign in" }), message);
  file.addEventListener("change", async () => {
    const f = file.files && file.files[0];
    if (!f) return;
    const found = (await f.text()).match(TOKEN);
    input.value = found ? found[0] : "";
    message.textContent = found ? "The token was read from the file." : "That file holds no player token.";
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = String(input.value || "");
    const found = text.match(TOKEN);
    try {
      await post("/api/play/me", { player_token: found ? found[0] : text.trim() });
      location.reload();
    } catch (err) {
      message.textContent = `Not signed in: ${err.message}`;
      document.body.dataset.refused = err.code || String(err.status || "");
    }
  });
  $("#sign-in").replaceChildren(form);
}

async function start() {
  registerForm();
  signInForm();
  const me = await signedIn();
  current(me);
  if (me.signed_in) {
    $("#register-h").textContent = "Register another player";
    $("#sign-in-h").textContent = "Sign in with another player";
  }
  document.body.dataset.loaded = "1";
}

start();
