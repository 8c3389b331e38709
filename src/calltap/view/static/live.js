// Live updates for the pair list: new pairs arrive on calltap's own event stream and are put on
// top of the table. The rows are rendered (and escaped) by the server; the page works without
// this script.
"use strict";
(function () {
  const table = document.querySelector("table[data-events]");
  if (!table || typeof EventSource === "undefined") return;
  const body = table.querySelector("tbody");
  const counter = document.getElementById("live-count");
  const source = new EventSource(table.dataset.events);
  source.addEventListener("pair", function (message) {
    const update = JSON.parse(message.data);
    const holder = document.createElement("template");
    holder.innerHTML = update.html;
    const empty = body.querySelector("tr.empty");
    if (empty) empty.remove();
    body.prepend(holder.content);
    if (counter) counter.textContent = String(update.total);
  });
  table.dataset.live = "on";
})();
