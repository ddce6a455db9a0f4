// The rating pages' script: sending answers so that no failure goes unseen, the active-time
// clock, keyboard shortcuts. Every page works without it (plain forms and buttons); with it:
//
// - A form is sent with fetch and the server answers JSON: {"next": url} (go on) or
//   {"error": message, "next": url} (shown in the status box, with a Continue link). When the
//   server cannot be reached the status box says the answer was NOT saved and the buttons
//   work again, so a dead server, a second tab or a stale page never swallow a click.
// - Back with the browser's back-forward cache shows a page frozen in the past: it is
//   reloaded at once (pageshow.persisted), so the server sends the rater where they are.
// - Active time: the time the page is visible, from one input (mouse, keys, touch, scroll; the
//   page's start counts as one) to the next, when the gap is at most `data-idle-seconds`. A
//   longer gap is a pause and counts nothing, whole (the page cannot tell when the rater
//   left): the clock then drops back to the time counted and a bar says the clock is paused
//   until the next input. It survives a reload (sessionStorage, per tab and item) and is
//   sent as active_ms.
(function () {
  "use strict";
  const body = document.body;
  const statusBox = document.getElementById("status");
  const statusText = document.getElementById("status-text");
  const statusNext = document.getElementById("status-next");

  window.addEventListener("pageshow", (event) => {
    if (event.persisted) window.location.reload();
  });

  function say(text, next) {
    statusText.textContent = text;
    statusBox.hidden = false;
    if (next) {
      statusNext.href = next;
      statusNext.textContent = body.dataset.continue;
      statusNext.hidden = false;
    } else {
      statusNext.hidden = true;
    }
  }
  function quiet() { statusBox.hidden = true; }

  // The end of a crowd study: back to the platform after a few seconds.
  const completion = document.getElementById("completion-link");
  if (completion) {
    setTimeout(() => window.location.assign(completion.href),
               1000 * Number(completion.dataset.redirect || 5));
  }

  const form = document.getElementById("rating-form");
  const timed = form && form.dataset.timed === "yes";
  const key = "active:" + window.location.pathname;
  let active = timed ? Number(window.sessionStorage.getItem(key) || 0) : 0;
  let settle = () => {};  // counts the time since the last input (on an input, on submit)
  if (timed) {
    const idleMs = 1000 * Number(form.dataset.idleSeconds || 30);
    const before = 1000 * Number(form.dataset.totalSeconds || 0);
    const itemClock = document.getElementById("item-time");
    const totalClock = document.getElementById("total-time");
    const pausedBar = document.getElementById("paused");
    let lastInput = Date.now();
    let pending = 0;  // visible time since the last input, counted if the gap stays short
    let last = Date.now();
    settle = () => {
      const now = Date.now();
      if (now - lastInput <= idleMs) active += pending;
      pending = 0;
      lastInput = now;
      window.sessionStorage.setItem(key, String(active));
    };
    ["pointermove", "pointerdown", "keydown", "wheel", "scroll", "touchstart"].forEach(
      (name) => window.addEventListener(name, settle, {passive: true, capture: true}));
    const show = (el, ms) => {
      const s = Math.floor(ms / 1000);
      el.textContent = Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
    };
    const tick = () => {
      const now = Date.now();
      const idle = now - lastInput > idleMs;
      if (document.visibilityState === "visible") pending += Math.min(now - last, 2000);
      last = now;
      const shown = idle ? active : active + pending;
      itemClock.classList.toggle("paused", idle);
      pausedBar.hidden = !idle;
      show(itemClock, shown);
      show(totalClock, before + shown);
    };
    tick();
    setInterval(tick, 250);
  }

  // Sending a form: one at a time; whatever happens is said in the status box.
  let sending = false;
  function buttons(form, enabled) {
    form.querySelectorAll("button").forEach((b) => { b.disabled = !enabled; });
  }
  async function send(form, submitter) {
    const data = new URLSearchParams(new FormData(form, submitter));
    if (form === document.getElementById("rating-form") && timed) {
      settle();
      data.set("active_ms", String(Math.round(active)));
    }
    sending = true;
    buttons(form, false);
    say(body.dataset.saving);
    let response;
    try {
      response = await fetch(form.action, {
        method: "POST", body: data, credentials: "same-origin",
        headers: {"Accept": "application/json"}});
    } catch (error) {
      sending = false;
      buttons(form, true);
      say(body.dataset.offline);
      return;
    }
    let reply = {};
    try { reply = await response.json(); } catch (error) { reply = {}; }
    if (response.ok && reply.next) {
      if (timed) window.sessionStorage.removeItem(key);
      window.location.assign(reply.next);
      return;
    }
    sending = false;
    const message = reply.error || (body.dataset.failed + " HTTP " + response.status);
    if (response.status === 409) {
      // Already answered (another tab): this page is done; the way on is the link.
      if (timed) window.sessionStorage.removeItem(key);
      say(message, reply.next);
    } else {
      buttons(form, true);
      say(message, response.status >= 500 ? null : reply.next);
    }
  }
  document.querySelectorAll("form[method=post]").forEach((f) => {
    if (new URL(f.action, window.location.href).origin !== window.location.origin) return;
    f.addEventListener("submit", (event) => {
      event.preventDefault();
      if (sending) return;  // the status box already says "Saving..."
      send(f, event.submitter);
    });
  });
  if (!form) return;

  // Keyboard shortcuts.
  function check(name, value) {
    const input = form.querySelector(`input[name="${name}"][value="${value}"]`);
    if (input) input.checked = true;
    return input !== null;
  }
  function cycle(name) {
    const inputs = Array.from(form.querySelectorAll(`input[name="${name}"]`));
    const at = inputs.findIndex((input) => input.checked);
    inputs[(at + 1) % inputs.length].checked = true;
  }
  function activate(name) {
    form.querySelectorAll("fieldset.score").forEach((f) => {
      f.classList.toggle("active", f.dataset.field === name);
    });
  }
  function activeScore() {
    const f = form.querySelector("fieldset.score.active");
    return f ? f.dataset.field : "P";
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const pressed = event.key;
    if (sending) { say(body.dataset.saving); return; }
    if (form.dataset.type !== "thumb") {
      const button = form.querySelector(`button[data-key="${pressed}"]`);
      if (button) { event.preventDefault(); button.click(); }
      return;
    }
    if (pressed >= "0" && pressed <= "9") {
      const field = activeScore();
      if (check(field, pressed) && field === "P") activate("R");
    } else if (pressed === "p" || pressed === "r") {
      activate(pressed.toUpperCase());
    } else if (pressed === "f") {
      cycle("Fl");
    } else if (pressed === "c") {
      cycle("Con");
    } else if (pressed === "i") {
      cycle("Inc");
    } else if (pressed === "Enter") {
      event.preventDefault();
      document.getElementById("submit").click();
      return;
    } else {
      return;
    }
    event.preventDefault();
    quiet();
  });
  // A click in a score chooses it for the digits; choosing a precision moves on to recall,
  // as its digit does.
  form.querySelectorAll("fieldset.score").forEach((f) => {
    f.addEventListener("click", (event) => {
      const chose = event.target.matches("input") && f.dataset.field === "P";
      activate(chose ? "R" : f.dataset.field);
    });
  });
})();
