// Metastore previews: small progressive enhancements (no network but this app's own endpoints).
(function () {
  "use strict";
  // the static report: filter the cards by name, in the page
  var filter = document.getElementById("ms-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0, cards = document.querySelectorAll(".ms-card");
      cards.forEach(function (card) {
        var name = (card.getAttribute("data-name") || card.getAttribute("data-column") || "").toLowerCase();
        var ok = words.every(function (w) { return name.indexOf(w) >= 0; });
        card.hidden = !ok;
        if (ok) shown++;
      });
      var count = document.getElementById("matched");
      if (count) count.textContent = shown + " of " + cards.length + " columns";
    });
  }
  // sortable tables (the overview): a click on a heading sorts by its column, again reverses
  document.querySelectorAll("table.ms-sortable").forEach(function (tbl) {
    tbl.querySelectorAll("thead th").forEach(function (th, index) {
      th.addEventListener("click", function () {
        var numeric = th.getAttribute("data-type") === "number";
        var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
        if (!numeric && !th.getAttribute("aria-sort")) dir = 1;
        tbl.querySelectorAll("thead th").forEach(function (o) { o.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
        var body = tbl.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        function key(row) {
          var v = row.cells[index].getAttribute("data-sort") || "";
          if (!numeric) return v.toLowerCase();
          var x = parseFloat(v);
          return isNaN(x) ? null : x;
        }
        rows.sort(function (a, b) {
          var ka = key(a), kb = key(b);
          if (ka === kb) return 0;
          if (ka === null) return 1;  // missing values last either way
          if (kb === null) return -1;
          return ka < kb ? -dir : dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll(".ms-autosubmit").forEach(function (select) {
    if (!document.querySelector(".ms-head[data-url]")) select.addEventListener("change", function () { select.form.submit(); });
  });
  // a histogram's log scale: heights by log(1 + count) (the server draws them linear), and back
  document.addEventListener("click", function (event) {
    var button = event.target.closest(".ms-log");
    if (!button) return;
    var figure = button.closest(".ms-hist"), log = button.getAttribute("aria-pressed") !== "true";
    var axis = figure.querySelector(".ms-yaxis"), largest = parseFloat(axis.getAttribute("data-largest")) || 1;
    var full = 120;
    function height(count) {
      if (!(count > 0)) return 0;
      var h = log ? full * Math.log1p(count) / Math.log1p(largest) : full * count / largest;
      return Math.min(full, Math.max(0.5, h));
    }
    figure.querySelectorAll("svg.ms-chart rect.ms-bar, svg.ms-chart rect.ms-bar-other, rect.ms-bar-nan").forEach(function (rect) {
      var h = height(parseFloat(rect.getAttribute("data-count")));
      rect.setAttribute("height", h.toFixed(3));
      rect.setAttribute("y", (full - h).toFixed(3));
    });
    var mid = log ? Math.round(Math.expm1(Math.log1p(largest) / 2)) : Math.floor(largest / 2);
    axis.querySelector('[data-tick="mid"]').textContent = mid.toLocaleString("en-US");
    button.setAttribute("aria-pressed", log ? "true" : "false");
  });
  var head = document.querySelector(".ms-head[data-url]");
  if (!head) return;  // not the app
  document.querySelectorAll(".ms-autosubmit").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  var table = head.getAttribute("data-table");
  // lazy cards: the full card (histogram, top values) is fetched when it comes near the viewport
  function loadCard(placeholder) {
    if (placeholder.getAttribute("data-loading")) return;
    placeholder.setAttribute("data-loading", "1");
    fetch(placeholder.getAttribute("data-src"), { credentials: "same-origin" }).then(function (r) {
      return r.text().then(function (text) { return { ok: r.ok, text: text }; });
    }).then(function (res) {
      var section = placeholder.closest(".ms-card");
      if (!res.ok) {
        placeholder.className = "ms-error";
        placeholder.textContent = "cannot load this card (HTTP error)";
        return;
      }
      var wrap = document.createElement("div");
      wrap.innerHTML = res.text;  // our own server-rendered, escaped fragment
      section.replaceWith(wrap.querySelector(".ms-card"));
    });
  }
  var lazy = document.querySelectorAll(".ms-lazy[data-src]");
  if (lazy.length && "IntersectionObserver" in window) {
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) { observer.unobserve(entry.target); loadCard(entry.target); }
      });
    }, { rootMargin: "600px 0px" });
    lazy.forEach(function (el) { observer.observe(el); });
  } else {
    lazy.forEach(loadCard);
  }
  function histogramUrl(column, params) {
    var q = new URLSearchParams(params);
    q.set("column", column);
    if (head.getAttribute("data-partition")) q.set("partition", head.getAttribute("data-partition"));
    if (head.getAttribute("data-at")) q.set("at", head.getAttribute("data-at"));
    return "/table/" + encodeURIComponent(table) + "/histogram?" + q.toString();
  }
  function load(figure, params) {
    var column = figure.getAttribute("data-column");
    fetch(histogramUrl(column, params), { credentials: "same-origin" }).then(function (r) {
      return r.text().then(function (text) { return { ok: r.ok, text: text }; });
    }).then(function (res) {
      if (!res.ok) {
        var err = figure.querySelector(".ms-zoom-error") || document.createElement("div");
        err.className = "ms-error ms-zoom-error";
        err.textContent = new DOMParser().parseFromString(res.text, "text/html").querySelector(".ms-message, body").textContent.trim();
        figure.appendChild(err);
        return;
      }
      var wrap = document.createElement("div");
      wrap.innerHTML = res.text;  // our own server-rendered, escaped fragment
      var fresh = wrap.querySelector(".ms-hist");
      figure.replaceWith(fresh);
    });
  }
  document.addEventListener("click", function (event) {
    var bar = event.target.closest(".ms-chart .ms-bar");
    if (bar) {
      var figure = bar.closest(".ms-hist");
      var bars = figure.querySelector("select[name=bars]");
      load(figure, { start: bar.getAttribute("data-start"), stop: bar.getAttribute("data-stop"), bars: bars ? bars.value : "" });
      return;
    }
    var reset = event.target.closest(".ms-reset");
    if (reset) {
      var fig = reset.closest(".ms-hist");
      var b = fig.querySelector("select[name=bars]");
      load(fig, { bars: b ? b.value : "" });
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target.closest(".ms-zoom");
    if (!form) return;
    event.preventDefault();
    var figure = form.closest(".ms-hist"), params = { bars: form.bars.value };
    if (form.lo.value) params.lo = form.lo.value;
    if (form.hi.value) params.hi = form.hi.value;
    if (!form.lo.value && !form.hi.value && figure.getAttribute("data-zoomed") === "true") {
      params.start = figure.getAttribute("data-start");
      params.stop = figure.getAttribute("data-stop");
    }
    load(figure, params);
  });
})();
