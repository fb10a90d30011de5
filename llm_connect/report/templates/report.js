/* llm-connect case browser: plain JavaScript, no network request except the view server's own
   /api/cases (when the page holds no #case-data). Texts are inserted with textContent only.
   One card (.case-row) per case of a task x candidate x judge; each grade of it (one per run,
   .case-run) sits inside the card with its run id and time. */
(function () {
  "use strict";
  var root = document.getElementById("cases");
  if (!root) { return; }
  var PAGE = 200;
  var dataEl = document.getElementById("case-data");
  var data = dataEl ? JSON.parse(dataEl.textContent) : null;
  var list = document.getElementById("case-list");
  var countEl = document.getElementById("case-count");
  var cardsEl = document.getElementById("card-count");
  var totalEl = document.getElementById("case-total");
  var more = document.getElementById("case-more");
  var ids = ["f-task", "f-candidate", "f-judge", "f-min", "f-max", "f-failures", "f-search", "f-sort"];
  var controls = {};
  ids.forEach(function (id) { controls[id] = document.getElementById(id); });
  var shown = 0;
  var matching = [];
  var groups = [];
  var cardsShown = 0;
  var cards = {};
  var nCards = 0;
  var request = 0;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function num(value, digits) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(digits);
  }

  function filters() {
    var lo = parseFloat(controls["f-min"].value);
    var hi = parseFloat(controls["f-max"].value);
    return {
      task: controls["f-task"].value,
      candidate: controls["f-candidate"].value,
      judge: controls["f-judge"].value,
      min: isNaN(lo) ? 0 : lo,
      max: isNaN(hi) ? 1 : hi,
      failures: controls["f-failures"].checked,
      q: controls["f-search"].value.trim().toLowerCase(),
      sort: controls["f-sort"].value || "score-asc"
    };
  }

  function promptOf(row) { return row.prompt !== undefined ? row.prompt : data.prompts[row.p]; }
  function diffOf(row) { return row.diff !== undefined ? row.diff : data.diffs[row.d]; }

  function haystack(row) {
    if (row._text === undefined) {
      var parts = [promptOf(row), row.notes, row.case || "", row.run || "", row.cand_served || "", row.base_served || ""];
      diffOf(row).forEach(function (seg) { parts.push(seg[1]); });
      row._text = parts.join("\n").toLowerCase();
    }
    return row._text;
  }

  function keep(row, f) {
    if (f.task && row.task !== f.task) { return false; }
    if (f.candidate && row.cand !== f.candidate) { return false; }
    if (f.judge && row.judge !== f.judge) { return false; }
    if (row.score < f.min || row.score > f.max) { return false; }
    if (f.failures && !row.fail) { return false; }
    if (f.q && haystack(row).indexOf(f.q) < 0) { return false; }
    return true;
  }

  function side(title, model, served, cost, ms, tools, segments, own, cls) {
    var box = el("div", "side");
    var head = el("h4", null, title + ": " + model + (served && served !== model ? " (served as " + served + ")" : ""));
    box.appendChild(head);
    box.appendChild(el("div", "meta", "cost " + (cost === null || cost === undefined ? "-" : "$" + Number(cost).toPrecision(3)) +
      ", latency " + (ms === null || ms === undefined ? "-" : Math.round(ms) + " ms")));
    var text = el("div", "text");
    segments.forEach(function (seg) {
      if (seg[0] === "=") { text.appendChild(document.createTextNode(seg[1])); }
      else if (seg[0] === own) { text.appendChild(el("mark", cls, seg[1])); }
    });
    box.appendChild(text);
    (tools || []).forEach(function (call) { box.appendChild(el("div", "tools", "tool call: " + call)); });
    return box;
  }

  function details(row) {
    var body = document.createDocumentFragment();
    body.appendChild(el("h4", null, "Prompt"));
    body.appendChild(el("div", "text", promptOf(row)));
    var legend = el("p", "diff-legend");
    legend.appendChild(el("span", null, "highlighted: words that differ ("));
    legend.appendChild(el("mark", "diff-base", "baseline's words"));
    legend.appendChild(el("span", null, " / "));
    legend.appendChild(el("mark", "diff-cand", "candidate's words instead"));
    legend.appendChild(el("span", null, ")"));
    body.appendChild(legend);
    var sides = el("div", "sides");
    var segments = diffOf(row);
    sides.appendChild(side("Baseline", row.base, row.base_served, row.cost_base, row.ms_base, row.tools_base, segments, "-", "diff-base"));
    sides.appendChild(side("Candidate", row.cand, row.cand_served, row.cost_cand, row.ms_cand, row.tools_cand, segments, "+", "diff-cand"));
    body.appendChild(sides);
    body.appendChild(el("p", "notes", "Judge " + row.judge + ": " + num(row.score, 3) + (row.notes ? " \u2014 " + row.notes : "")));
    var meta = "run " + (row.run || "-") + ", case " + (row.case || "-") + ", grade #" + row.id + (row.at ? ", " + row.at : "");
    body.appendChild(el("p", "meta", meta));
    if (row.meta !== null && row.meta !== undefined) {
      body.appendChild(el("div", "text", "metadata: " + JSON.stringify(row.meta, null, 2)));
    }
    return body;
  }

  function keyOf(row) {
    return [row.task, row.base, row.cand, row.judge, row.case ? "c:" + row.case : "g:" + row.id].join("\u0000");
  }

  function when(at) { return at ? String(at).replace("T", " ").slice(0, 19) + " UTC" : "-"; }

  function cardElement(row) {
    var item = el("article", "case-row" + (row.fail ? " fail" : ""));
    item.setAttribute("data-task", row.task);
    item.setAttribute("data-candidate", row.cand);
    item.setAttribute("data-judge", row.judge);
    item.setAttribute("data-case", row.case || "");
    item.setAttribute("data-score", String(row.score));
    var head = el("header");
    head.appendChild(el("span", "score", num(row.score, 3)));
    head.appendChild(el("span", null, row.task));
    head.appendChild(el("span", null, row.cand + " vs " + row.base));
    head.appendChild(el("span", "meta", row.judge));
    head.appendChild(el("span", "meta", "case " + (row.case || "-")));
    var runs = el("span", "runs", "");
    head.appendChild(runs);
    item.appendChild(head);
    var box = el("div", "case-runs");
    item.appendChild(box);
    return { el: item, runs: box, label: runs, n: 0 };
  }

  function runElement(row) {
    var box = el("details", "case-run" + (row.fail ? " fail" : ""));
    box.setAttribute("data-run", row.run || "");
    box.setAttribute("data-at", row.at || "");
    box.setAttribute("data-score", String(row.score));
    var summary = el("summary");
    summary.appendChild(el("span", "run-score", num(row.score, 3)));
    summary.appendChild(el("span", null, "run " + (row.run || "-")));
    summary.appendChild(el("span", "meta", when(row.at)));
    summary.appendChild(el("span", "meta", row.notes ? row.notes.slice(0, 120) : "answers side by side"));
    box.appendChild(summary);
    box.addEventListener("toggle", function () {
      if (box.open && !box._filled) { box._filled = true; box.appendChild(details(row)); }
    });
    return box;
  }

  function addRun(row) {
    var key = keyOf(row);
    var card = cards[key];
    if (!card) {
      card = cardElement(row);
      cards[key] = card;
      nCards += 1;
      list.appendChild(card.el);
    }
    var node = runElement(row);
    var at = row.at || "";
    var next = null;
    Array.prototype.forEach.call(card.runs.children, function (other) {
      if (!next && (other.getAttribute("data-at") || "") > at) { next = other; }
    });
    card.runs.insertBefore(node, next);
    card.n += 1;
    card.label.textContent = card.n === 1 ? "1 run" : card.n + " runs";
  }

  function reset() {
    list.replaceChildren();
    cards = {};
    nCards = 0;
    shown = 0;
  }

  function append(rows, total) {
    rows.forEach(addRun);
    shown += rows.length;
    countEl.textContent = String(shown);
    if (cardsEl) { cardsEl.textContent = String(nCards); }
    totalEl.textContent = String(total);
  }

  function grouped(rows) {
    var index = {};
    var out = [];
    rows.forEach(function (row) {
      var key = keyOf(row);
      if (index[key] === undefined) { index[key] = out.length; out.push([]); }
      out[index[key]].push(row);
    });
    return out;
  }

  function showGroups() {
    var next = groups.slice(cardsShown, cardsShown + PAGE);
    cardsShown += next.length;
    append([].concat.apply([], next), matching.length);
    more.hidden = cardsShown >= groups.length;
  }

  function order(f) {
    var sign = f.sort === "score-desc" ? -1 : 1;
    return function (a, b) { return sign * (a.score - b.score) || sign * (a.id - b.id); };
  }

  function fetchPage(f, offset, replace) {
    var params = new URLSearchParams();
    if (f.task) { params.set("task", f.task); }
    if (f.candidate) { params.set("candidate", f.candidate); }
    if (f.judge) { params.set("judge", f.judge); }
    params.set("min", String(f.min));
    params.set("max", String(f.max));
    if (f.failures) { params.set("failures", "1"); }
    if (f.q) { params.set("q", f.q); }
    params.set("sort", f.sort);
    params.set("offset", String(offset));
    params.set("limit", String(PAGE));
    var mine = ++request;
    return fetch("api/cases?" + params.toString(), { headers: { "Accept": "application/json" } })
      .then(function (resp) { return resp.json(); })
      .then(function (page) {
        if (mine !== request) { return; }
        if (replace) { reset(); }
        append(page.rows, page.total);
        more.hidden = shown >= page.total;
      })
      .catch(function (err) { totalEl.textContent = "?"; countEl.textContent = String(shown); more.hidden = true; void err; });
  }

  function apply() {
    var f = filters();
    if (data) {
      matching = data.rows.filter(function (row) { return keep(row, f); }).sort(order(f));
      groups = grouped(matching);
      cardsShown = 0;
      reset();
      showGroups();
    } else {
      fetchPage(f, 0, true);
    }
  }

  more.addEventListener("click", function () {
    if (data) { showGroups(); }
    else { fetchPage(filters(), shown, false); }
  });
  var timer = null;
  ids.forEach(function (id) {
    var node = controls[id];
    if (!node) { return; }
    var typed = node.type === "search" || node.type === "number";
    node.addEventListener(typed ? "input" : "change", function () {
      if (timer) { clearTimeout(timer); timer = null; }
      if (data || !typed) { apply(); } else { timer = setTimeout(apply, 150); }
    });
  });
  apply();
}());
