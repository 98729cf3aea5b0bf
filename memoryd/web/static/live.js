// memoryd's page, live: follows /live (server-sent events, the page's cookie). On the
// overview, the parts marked data-live are fetched again (at most once a second) and
// swapped in place; on search and session pages a mark says new messages arrived, with a
// plain link to see them. Without JavaScript the page is the same, with plain links.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch || !window.DOMParser) return;
  var timer = null;

  function refresh() {
    timer = null;
    var parts = document.querySelectorAll("[data-live]");
    if (!parts.length) return;
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = el.id && doc.getElementById(el.id);
          if (fresh) el.replaceWith(document.importNode(fresh, true));
        });
      })
      .catch(function () {});
  }

  var events = new EventSource("/live");
  events.addEventListener("activity", function (e) {
    var ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    if (!timer && document.querySelector("[data-live]")) timer = setTimeout(refresh, 1000);
    var mark = document.getElementById("live-mark");
    if (mark && ev.event === "ingested" && ev.units > 0) {
      var paths = mark.getAttribute("data-paths");
      if (!paths || JSON.parse(paths).indexOf(ev.path) >= 0) mark.hidden = false;
    }
  });
})();
