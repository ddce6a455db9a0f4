// The captioning page: an image chosen or dropped, sent with the form, captions shown in a table.
(function () {
  "use strict";
  const form = document.getElementById("form");
  const input = document.getElementById("image");
  const drop = document.getElementById("drop");
  const preview = document.getElementById("preview");
  const status = document.getElementById("status");
  const table = document.getElementById("captions");
  let image = null;  // the File to caption

  function show(file) {
    image = file;
    preview.src = URL.createObjectURL(file);
    preview.hidden = false;
    document.getElementById("drop-text").textContent = file.name;
  }

  input.addEventListener("change", () => { if (input.files.length) show(input.files[0]); });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files.length) show(e.dataTransfer.files[0]);
  });

  function tickAll(on) {
    for (const box of document.querySelectorAll('input[name="langs"]')) box.checked = on;
  }
  document.getElementById("all-langs").addEventListener("click", () => tickAll(true));
  document.getElementById("no-langs").addEventListener("click", () => tickAll(false));

  // Only the chosen decoding's settings are shown, and sent (a disabled field is not).
  function showSettings() {
    const method = form.elements.decode.value;
    for (const span of document.querySelectorAll(".settings")) {
      span.hidden = span.dataset.for !== method;
      for (const field of span.querySelectorAll("input")) field.disabled = span.hidden;
    }
  }
  for (const radio of form.elements.decode) radio.addEventListener("change", showSettings);
  showSettings();

  function render(answer) {
    const body = table.querySelector("tbody");
    body.replaceChildren();
    for (const c of answer.captions) {
      const row = body.insertRow();
      row.className = "caption-row";
      row.insertCell().textContent = c.lang;
      const text = row.insertCell();
      text.className = "caption";
      text.lang = c.lang;
      text.dir = "auto";  // right to left for Arabic, Persian, Hebrew
      text.textContent = c.caption;
      const score = row.insertCell();
      score.className = "log-prob";
      score.textContent = c.log_prob.toFixed(3);
    }
    table.hidden = false;
    status.textContent = `${answer.image}: ${answer.decoding}, ${answer.seconds.toFixed(2)} s`;
    status.className = "status";
  }

  // While a request is out the button is disabled and says so (a first request for a new
  // decoding or number of languages compiles, which takes seconds).
  const submit = document.getElementById("submit");
  function busy(on) {
    submit.disabled = on;
    submit.textContent = on ? "Captioning…" : "Caption";
    form.setAttribute("aria-busy", on ? "true" : "false");
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (submit.disabled) return;
    const data = new FormData(form);
    data.delete("image");
    if (image) data.append("image", image, image.name);
    status.textContent = "Captioning…";
    status.className = "status busy";
    busy(true);
    let answer;
    try {
      const response = await fetch(form.action, { method: "POST", body: data });
      answer = await response.json();
    } catch (err) {
      answer = { error: `no answer from the server (${err})` };
    } finally {
      busy(false);
    }
    if (answer.error) {
      status.textContent = answer.error;
      status.className = "status error";
      table.hidden = true;
    } else {
      render(answer);
    }
  });
}());
