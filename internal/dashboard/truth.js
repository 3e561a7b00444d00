// Makes asynqmon's pages say what retryd means. asynq counts task runs,
// and one request's task runs once per attempt, so asynq's counters are
// attempts: they are relabelled as such, and every page first shows the
// requests by status, the numbers GET /requests lists, and the endpoints
// whose breaker holds their requests. Times and budgets
// in asynqmon's task JSON are retryd's already (the dashboard rewrites
// them); a request that an event, not a time, starts has no time, which
// asynqmon would print as "in NaN…": it reads "on an event" instead.
// asynqmon's Schedulers page lists asynq's periodic tasks, which retryd
// does not use: its link leads to retryd's schedules instead, and a
// task's page links to retryd's page of the request (Resend, Expunge).
(function () {
  var COUNTS = "{{COUNTS}}", ROOT = "{{ROOT}}";
  var SCHEDULES = ROOT + "/retryd/schedules";
  var STATUSES = ["pending", "retrying", "completed", "failed", "canceled"];
  var LABELS = {
    "Processed": "Attempts processed",
    "Succeeded": "Attempts succeeded",
    "Failed": "Attempts failed",
    "Error rate": "Attempt error rate",
    "Error Rate": "Attempt error rate",
    "Tasks Processed": "Attempts processed",
    "Tasks Failed": "Attempts failed",
    "Retry:": "Attempts this run:",
    "Retried": "Run attempts",
    "Max Retry": "Allowed",
    "Next Process Time:": "Next attempt:",
    "Process In": "Next attempt",
    "Retry In": "Next attempt",
    "Schedulers": "Schedules"
  };
  var line = "";

  function relabel(root) {
    var walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, null);
    var n;
    while ((n = walk.nextNode())) {
      var v = n.nodeValue, t = v.trim();
      if (Object.prototype.hasOwnProperty.call(LABELS, t)) {
        n.nodeValue = v.replace(t, LABELS[t]);
      } else if (/^in NaN/.test(t)) {
        n.nodeValue = "on an event";
      }
    }
  }

  function banner() {
    // Inside the content wrapper, which leaves room for the app bar; it
    // lays pages out in a row, so the line takes a row of its own.
    var main = document.querySelector("main");
    var wrap = main && main.firstElementChild;
    if (!wrap) return;
    if (wrap.style.flexWrap !== "wrap") { wrap.style.flexWrap = "wrap"; wrap.style.alignContent = "flex-start"; }
    var b = document.getElementById("retryd-requests");
    if (!b) {
      b = document.createElement("div");
      b.id = "retryd-requests";
      b.setAttribute("role", "status");
      b.style.cssText = "flex:0 0 100%;box-sizing:border-box;margin:16px 0 0;padding:12px 24px;background:#e3f2fd;color:#0d47a1;" +
        "font:500 15px sans-serif";
    }
    if (wrap.firstChild !== b) wrap.insertBefore(b, wrap.firstChild);
    var counts = document.getElementById("retryd-counts");
    if (!counts) {
      counts = document.createElement("span");
      counts.id = "retryd-counts";
      b.appendChild(counts);
      b.appendChild(anchor("retryd-schedules", SCHEDULES, "Schedules"));
    }
    if (counts.textContent !== line) counts.textContent = line;
    // A task's page: its request's own page, with Resend and Expunge.
    var m = location.pathname.match(/\/queues\/[^/]+\/tasks\/([0-9a-z]+)$/);
    var open = document.getElementById("retryd-open-request");
    var href = m ? ROOT + "/retryd/requests/" + m[1] : "";
    if (open && open.getAttribute("href") !== href) { open.remove(); open = null; }
    if (m && !open) b.appendChild(anchor("retryd-open-request", href, "Resend or expunge this request"));
  }

  function anchor(id, href, label) {
    var a = document.createElement("a");
    a.id = id;
    a.href = href;
    a.textContent = label;
    a.style.cssText = "margin-left:24px;color:#0d47a1;font-weight:700";
    return a;
  }

  // asynqmon's Schedulers link (a client-side route) goes to retryd's
  // schedules page instead, as does a visit to its address.
  function schedulers(path) { return /\/schedulers\/?$/.test(path); }
  if (schedulers(location.pathname)) location.replace(SCHEDULES);
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[href]");
    if (a && schedulers(new URL(a.href, location.href).pathname)) {
      e.preventDefault();
      e.stopPropagation();
      location.href = SCHEDULES;
    }
  }, true);

  function refresh() {
    fetch(COUNTS, { credentials: "same-origin" }).then(function (r) { return r.ok ? r.json() : null; }).then(function (n) {
      if (!n) return;
      line = "Requests: " + STATUSES.map(function (s) { return s + " " + n[s]; }).join(" · ") +
        " (asynq's counters below count attempts)";
      // Endpoints whose breaker is open hold their requests: say which,
      // and when each is next probed.
      if (n.endpointsError) line += " · endpoints: " + n.endpointsError;
      // The endpoint and its tenant are quoted: a name can never read as
      // the line's own words.
      (n.endpoints || []).forEach(function (e) {
        line += " · endpoint " + JSON.stringify(e.endpoint) + (e.tenant ? " of tenant " + JSON.stringify(e.tenant) : "") +
          " " + e.state + ", " + e.waiting + " waiting, " +
          (e.nextProbe ? "next probe " + e.nextProbe :
            e.openedBy === "operator" ? "no probe: opened by an operator" : "its next request is the probe");
      });
      banner();
    }).catch(function () {});
  }

  var busy = false;
  function tidy() {
    if (busy) return;
    busy = true;
    try { relabel(document.body); if (line) banner(); } finally { busy = false; }
  }

  document.addEventListener("DOMContentLoaded", function () {
    new MutationObserver(tidy).observe(document.body, { childList: true, subtree: true, characterData: true });
    tidy();
    refresh();
    setInterval(refresh, 5000);
  });
})();
