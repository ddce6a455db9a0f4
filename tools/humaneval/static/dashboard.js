// The dashboard's live update: fetch the panel again every data-refresh seconds and put it in
// place (its plots carry a version, so they are drawn again when the data changed).
(function () {
  "use strict";
  const panel = document.getElementById("panel");
  const updated = document.getElementById("updated");
  const every = 1000 * Number(panel.dataset.refresh || 10);
  async function refresh() {
    try {
      const response = await fetch(panel.dataset.url, {credentials: "same-origin"});
      if (!response.ok) throw new Error("HTTP " + response.status);
      panel.innerHTML = await response.text();
      updated.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (error) {
      updated.textContent = "could not update (" + error.message + "); retrying";
    }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
