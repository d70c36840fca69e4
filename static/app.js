// Sluice console: the few behaviours that need a script. Every page works
// without it; this adds the viewer's time zone, the "/" shortcut, typed
// confirmations and the live tail.
(function () {
  "use strict";

  // Time zone: the server renders times in the zone named by the tz cookie.
  // On the first visit there is none, so set it and convert what is shown.
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) {}
  var current = (document.cookie.match(/(?:^|; )tz=([^;]*)/) || [])[1];
  if (zone && decodeURIComponent(current || "") !== zone) {
    document.cookie = "tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; SameSite=Lax";
    localizeTimes(document);
  }

  function pad(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
  function localizeTimes(root) {
    var els = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute("datetime"));
      if (isNaN(d)) continue;
      var s = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
        pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
      if (els[i].hasAttribute("data-ms")) s += "." + pad(d.getMilliseconds(), 3);
      els[i].textContent = s;
    }
  }

  // The Admin menu of the nav closes on a click elsewhere and on Escape.
  function closeMenus(except) {
    var open = document.querySelectorAll("li.navmore details[open]");
    for (var i = 0; i < open.length; i++) {
      if (open[i] !== except) open[i].removeAttribute("open");
    }
  }
  document.addEventListener("click", function (e) {
    var t = e.target;
    closeMenus(t && t.closest ? t.closest("li.navmore details") : null);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") closeMenus(null);
  });

  // "/" focuses the page's search box unless the user is typing.
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var box = document.querySelector('[data-hotkey="/"]');
    if (box) { ev.preventDefault(); box.focus(); box.select && box.select(); }
  });

  function init(root) {
    // Typed confirmation: the button stays disabled until the name matches.
    // The server checks again; this only saves a round trip.
    var inputs = root.querySelectorAll("[data-confirm-value]");
    for (var i = 0; i < inputs.length; i++) {
      (function (input) {
        var form = input.form;
        var btn = form && form.querySelector("[data-confirm-button]");
        if (!btn) return;
        var check = function () { btn.disabled = input.value !== input.getAttribute("data-confirm-value"); };
        input.addEventListener("input", check);
        check();
      })(inputs[i]);
    }
    var asks = root.querySelectorAll("form[data-confirm-click]");
    for (var j = 0; j < asks.length; j++) {
      asks[j].addEventListener("submit", function (ev) {
        if (!window.confirm(this.getAttribute("data-confirm-click"))) ev.preventDefault();
      });
    }
    var tails = root.querySelectorAll("[data-tail]");
    for (var k = 0; k < tails.length; k++) tail(tails[k]);
    var kinds = root.querySelectorAll("[data-kind-select]");
    for (var m = 0; m < kinds.length; m++) kindForm(kinds[m]);
    var vals = root.querySelectorAll(".msgval");
    for (var n = 0; n < vals.length; n++) msgTools(vals[n]);
  }

  // A record's key or value: a long one is cut with an Expand button, and
  // every one has Copy (the text as shown: pretty JSON stays valid JSON).
  function msgTools(box) {
    if (box.getAttribute("data-tools")) return;
    box.setAttribute("data-tools", "1");
    var pre = box.querySelector("pre");
    if (!pre) return;
    var tools = document.createElement("div");
    tools.className = "msgtools";
    if (pre.scrollHeight > pre.clientHeight + 4) {
      box.classList.add("clamped");
      var more = document.createElement("button");
      more.type = "button";
      more.className = "link";
      more.textContent = "Expand";
      more.addEventListener("click", function () {
        var open = box.classList.toggle("open");
        more.textContent = open ? "Collapse" : "Expand";
      });
      tools.appendChild(more);
    }
    var copy = document.createElement("button");
    copy.type = "button";
    copy.className = "link";
    copy.textContent = "Copy";
    copy.addEventListener("click", function () {
      var text = pre.textContent;
      var done = function () { copy.textContent = "Copied"; setTimeout(function () { copy.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text) && done(); });
      } else if (fallbackCopy(text)) {
        done();
      }
    });
    tools.appendChild(copy);
    box.appendChild(tools);
  }

  // fallbackCopy copies through a hidden textarea where the clipboard API
  // is not offered (a console served over plain HTTP from another host).
  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "sr-only";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) {}
    document.body.removeChild(ta);
    return ok;
  }

  // The alert rule form shows the fields the chosen kind uses (threshold,
  // minimum status, topic) and the threshold's unit. Without the script
  // every field shows and the server ignores what the kind does not use.
  function kindForm(sel) {
    var form = sel.form;
    if (!form) return;
    function apply() {
      var kind = sel.value;
      var parts = form.querySelectorAll("[data-kinds]");
      for (var i = 0; i < parts.length; i++) {
        parts[i].hidden = (" " + parts[i].getAttribute("data-kinds") + " ").indexOf(" " + kind + " ") < 0;
      }
      var opt = sel.options[sel.selectedIndex];
      var unit = form.querySelector("[data-kind-unit]");
      if (unit && opt) unit.textContent = opt.getAttribute("data-unit") || "none";
    }
    sel.addEventListener("change", apply);
    apply();
  }

  // Live tail over server-sent events. The server sends "records" events
  // whose data is rendered table rows, and "note" events with a status line.
  function tail(panel) {
    var src = panel.getAttribute("data-tail");
    var btn = panel.querySelector("[data-tail-toggle]");
    var status = panel.querySelector("[data-tail-status]");
    var table = panel.querySelector("[data-tail-table]");
    var rows = panel.querySelector("[data-tail-rows]");
    if (!src || !btn || !window.EventSource) return;
    btn.hidden = false;
    var es = null, count = 0, dropped = 0;
    function say(s) { status.textContent = s; }
    function stop(msg) {
      if (es) { es.close(); es = null; }
      btn.textContent = "Start";
      say(msg || "Stopped");
    }
    btn.addEventListener("click", function () {
      if (es) { stop(); return; }
      es = new EventSource(src, { withCredentials: true });
      btn.textContent = "Stop";
      say("Connecting…");
      es.addEventListener("open", function () { say("Live · " + count + " new records"); });
      es.addEventListener("records", function (ev) {
        table.hidden = false;
        rows.insertAdjacentHTML("afterbegin", ev.data);
        var fresh = rows.querySelectorAll(".msgval");
        for (var f = 0; f < fresh.length; f++) msgTools(fresh[f]);
        count = rows.children.length;
        while (rows.children.length > 500) rows.removeChild(rows.lastElementChild);
        say("Live · " + count + " shown" + (dropped ? " · " + dropped + " skipped over the rate limit" : ""));
      });
      es.addEventListener("dropped", function (ev) {
        dropped += parseInt(ev.data, 10) || 0;
        say("Live · " + count + " shown · " + dropped + " skipped over the rate limit");
      });
      es.addEventListener("note", function (ev) { say(ev.data); });
      es.addEventListener("end", function (ev) { stop(ev.data || "Stopped by the server"); });
      es.addEventListener("error", function () {
        if (es && es.readyState === EventSource.CLOSED) stop("Disconnected");
        else say("Reconnecting…");
      });
    });
    window.addEventListener("pagehide", function () { if (es) es.close(); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { init(document); });
  else init(document);
  // htmx swaps in new content (search results, refreshed tables).
  document.addEventListener("htmx:afterSettle", function (ev) {
    if (current === undefined) localizeTimes(ev.target);
    init(ev.target);
  });
})();
