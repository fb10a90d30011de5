(function () {
  "use strict";
  var TOKEN_KEY = "llmc-label-token";
  var NAME_KEY = "llmc-annotator";
  var byId = function (id) { return document.getElementById(id); };
  var params = new URLSearchParams(window.location.search);
  var token = params.get("token") || "";
  var state = { annotator: "", current: null, busy: false, skipped: [], done: 0, last: null, changing: false };

  function store(kind, key, value) {
    try { window[kind].setItem(key, value); } catch (e) { /* storage off: keep it in memory */ }
  }
  function stored(kind, key) {
    try { return window[kind].getItem(key) || ""; } catch (e) { return ""; }
  }

  if (token) { store("sessionStorage", TOKEN_KEY, token); } else { token = stored("sessionStorage", TOKEN_KEY); }

  function status(text, isError) {
    var el = byId("label-status");
    el.textContent = text;
    el.className = "status" + (isError ? " error" : "");
  }

  function setChoicesEnabled(on) {
    document.querySelectorAll(".choices button").forEach(function (b) { b.disabled = !on; });
  }

  function filters() {
    return { task: byId("l-task").value, candidate: byId("l-candidate").value };
  }

  function keepFiltersInUrl() {
    var f = filters();
    var q = new URLSearchParams(window.location.search);
    ["task", "candidate"].forEach(function (k) { if (f[k]) { q.set(k, f[k]); } else { q.delete(k); } });
    window.history.replaceState(null, "", window.location.pathname + "?" + q.toString());
  }

  function fill(list, items) {
    list.textContent = "";
    items.forEach(function (t) {
      var li = document.createElement("li");
      li.textContent = t;
      list.appendChild(li);
    });
  }

  function showPrompt(c) {
    byId("system-prompt").textContent = c.system_prompt || "";
    byId("system-prompt-wrap").hidden = !c.system_prompt;
    var box = byId("prompt");
    box.textContent = "";
    if (!c.messages || !c.messages.length) { box.textContent = c.prompt; return; }
    c.messages.forEach(function (m) {
      var div = document.createElement("div");
      div.className = "msg";
      var role = document.createElement("span");
      role.className = "role";
      role.textContent = m.role;
      div.appendChild(role);
      div.appendChild(document.createTextNode(m.content));
      box.appendChild(div);
    });
  }

  function show(c) {
    var art = byId("label-case");
    state.current = c;
    art.dataset.ref = c.ref;
    art.dataset.task = c.task;
    art.dataset.case = c.case_id;
    byId("case-task").textContent = c.task;
    byId("case-id").textContent = c.case_id;
    byId("case-chosen").hidden = !c.chosen;
    showPrompt(c);
    [0, 1].forEach(function (i) {
      var side = byId("answer-" + (i + 1));
      side.querySelector(".answer").textContent = c.answers[i].text;
      fill(side.querySelector(".tools"), (c.answers[i].tools || []).map(function (t) { return "tool call: " + t; }));
    });
    document.querySelectorAll(".choices button.chosen").forEach(function (b) { b.classList.remove("chosen"); });
    byId("note").value = "";
    state.changing = false;
    art.hidden = false;
    byId("label-empty").hidden = true;
    setChoicesEnabled(true);
    if (document.activeElement && document.activeElement !== document.body) { document.activeElement.blur(); }
  }

  function load() {
    var f = filters();
    var q = new URLSearchParams({ annotator: state.annotator });
    if (f.task) { q.set("task", f.task); }
    if (f.candidate) { q.set("candidate", f.candidate); }
    if (state.skipped.length) { q.set("skip", state.skipped.join(",")); }
    state.current = null;
    setChoicesEnabled(false);
    return fetch("api/label/next?" + q.toString(), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json().then(function (data) { return { ok: r.ok, data: data }; }); })
      .then(function (res) {
        if (!res.ok) { status(res.data.error || "the server could not give the next case", true); return; }
        byId("label-left").textContent = String(res.data.left);
        byId("label-chosen-left").textContent = String(res.data.chosen_left || 0);
        byId("label-chosen-wrap").hidden = !res.data.chosen_left;
        if (res.data.case) { show(res.data.case); } else {
          byId("label-case").hidden = true;
          byId("label-empty").hidden = false;
        }
      })
      .catch(function (e) { status("the server did not answer: " + e, true); });
  }

  var WORDS = { first: "answer 1 better", tie: "tie", second: "answer 2 better" };

  function choose(choice) {
    var c = state.current;
    if (!c || state.busy) { return; }
    state.busy = true;
    setChoicesEnabled(false);
    var button = document.querySelector('.choices button[data-choice="' + choice + '"]');
    if (button) { button.classList.add("chosen"); }
    var changing = state.changing;
    var note = byId("note").value;
    var body = { ref: c.ref, choice: choice, annotator: state.annotator, note: note, replace: changing };
    function notSaved(why) {  // the case stays, its keys live again, no button marked as sent
      status("Not saved" + why, true);
      if (button) { button.classList.remove("chosen"); }
      setChoicesEnabled(true);
    }
    fetch("api/label", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-LLM-Connect-Token": token },
      body: JSON.stringify(body)
    })
      .then(function (r) { return r.json().then(function (data) { return { code: r.status, data: data }; }); })
      .then(function (res) {
        if (res.code === 200) {
          if (!changing) { state.done += 1; }
          byId("label-done-count").textContent = String(state.done);
          status((changing ? "Changed " : "Saved ") + c.task + " / " + c.case_id + ": " + WORDS[choice] + ".", false);
          state.last = { c: c, choice: choice, note: note };
          byId("back").hidden = false;
          return load();
        }
        if (res.code === 409 || res.code === 410) {
          status(res.data.error + " (moved on)", true);
          state.skipped.push(c.ref);
          return load();
        }
        notSaved(": " + (res.data.error || ("HTTP " + res.code)));
        return undefined;
      })
      .catch(function (e) { notSaved(", the server did not answer: " + e); })
      .then(function () { state.busy = false; });
  }

  // The case labelled last comes back (the server still knows its ref), its choice marked; the
  // next choice replaces that label (the annotator's own) instead of being refused as different.
  function back() {
    var last = state.last;
    if (!last || state.busy) { return; }
    show(last.c);  // the case that was showing stays first in the queue: it comes back next
    state.changing = true;
    byId("note").value = last.note || "";
    var button = document.querySelector('.choices button[data-choice="' + last.choice + '"]');
    if (button) { button.classList.add("chosen"); }
    status("Changing your label of " + last.c.task + " / " + last.c.case_id + " (was: " + WORDS[last.choice] +
      "). Press 1, 2 or 3.", false);
    byId("back").hidden = true;
    state.last = null;
  }

  function start(name) {
    state.annotator = name;
    byId("annotator").textContent = name;
    byId("who").hidden = true;
    byId("label").hidden = false;
    load();
  }

  function askName() {
    byId("label").hidden = true;
    byId("who").hidden = false;
    var input = byId("annotator-name");
    input.value = state.annotator || stored("localStorage", NAME_KEY);
    input.focus();
  }

  if (!token) {
    byId("label-token-missing").hidden = false;
    return;
  }

  byId("who").addEventListener("submit", function (e) {
    e.preventDefault();
    var name = byId("annotator-name").value.trim();
    if (!name) { return; }
    store("localStorage", NAME_KEY, name);
    state.skipped = [];
    start(name);
  });
  byId("annotator-change").addEventListener("click", askName);
  ["l-task", "l-candidate"].forEach(function (id) {
    byId(id).addEventListener("change", function () { keepFiltersInUrl(); state.skipped = []; load(); });
  });
  document.querySelectorAll(".choices button[data-choice]").forEach(function (b) {
    b.addEventListener("click", function () { choose(b.dataset.choice); });
  });
  byId("back").addEventListener("click", back);
  byId("skip").addEventListener("click", function () {
    if (state.current && !state.busy) { state.skipped.push(state.current.ref); status("Skipped " + state.current.case_id + ".", false); load(); }
  });
  document.addEventListener("keydown", function (e) {
    var tag = e.target && e.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") {
      if (e.key === "Escape") { e.target.blur(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || byId("label").hidden) { return; }
    var choice = { "1": "first", "2": "tie", "3": "second" }[e.key];
    if (choice) { e.preventDefault(); choose(choice); }
    if (e.key === "u") { e.preventDefault(); back(); }
  });

  var name = stored("localStorage", NAME_KEY);
  if (name) { start(name); } else { askName(); }
})();
