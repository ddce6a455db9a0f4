// Keyboard shortcuts, clocks and a guard against double submission for the rating page.
// The page works without it: every choice is a plain form button or radio.
(function () {
  "use strict";
  const form = document.getElementById("rating-form");

  function clock(el) {
    const start = Date.now() - 1000 * Number(el.dataset.seconds || 0);
    const show = () => {
      const s = Math.floor((Date.now() - start) / 1000);
      el.textContent = Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
    };
    show();
    setInterval(show, 1000);
  }
  document.querySelectorAll(".clock").forEach(clock);
  if (!form) return;

  // One submission per page: a second key press or click while the first is on its way would
  // be refused by the server as a duplicate rating.
  let sent = false;
  form.addEventListener("submit", (event) => {
    if (sent) event.preventDefault();
    sent = true;
  });

  function check(name, value) {
    const input = form.querySelector(`input[name="${name}"][value="${value}"]`);
    if (input) input.checked = true;
  }
  function cycle(name) {
    const inputs = Array.from(form.querySelectorAll(`input[name="${name}"]`));
    const at = inputs.findIndex((input) => input.checked);
    inputs[(at + 1) % inputs.length].checked = true;
  }
  function chosen(name) {
    return form.querySelector(`input[name="${name}"]:checked`) !== null;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const key = event.key;
    if (form.dataset.type !== "thumb") {
      const button = form.querySelector(`button[data-key="${key}"]`);
      if (button) { event.preventDefault(); button.click(); }
      return;
    }
    if (key >= "1" && key <= "5") {
      check(chosen("P") ? "R" : "P", key);
    } else if (key === "f") {
      cycle("Fl");
    } else if (key === "c") {
      cycle("Con");
    } else if (key === "i") {
      cycle("Inc");
    } else if (key === "Enter") {
      event.preventDefault();
      document.getElementById("submit").click();
      return;
    } else {
      return;
    }
    event.preventDefault();
  });
})();
