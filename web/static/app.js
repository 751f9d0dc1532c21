// jobqueue dashboard: live refresh, selections, actions. No build step.
(function () {
  "use strict";
  var base = document.body.dataset.base || "";
  var main = document.getElementById("content");
  var picker = document.getElementById("refresh");
  var flash = document.getElementById("flash");
  var dialog = document.getElementById("confirm");
  var timer = null;
  var busy = false;
  // A page that answered a POST (a 405 page) is not refreshed: a GET of
  // its URL is another page, whose content would replace it.
  var live = !document.body.hasAttribute("data-no-refresh");

  // ---- live refresh -------------------------------------------------------
  var saved = null;
  try { saved = localStorage.getItem("jobqueue.refresh"); } catch (e) {}
  picker.value = saved !== null ? saved : "5";
  if (!picker.value) picker.value = "5";

  function seconds() { return parseInt(picker.value, 10) || 0; }

  function schedule() {
    if (timer) clearInterval(timer);
    timer = null;
    if (live && seconds() > 0 && !document.hidden) timer = setInterval(refresh, seconds() * 1000);
    var paused = document.getElementById("paused");
    if (paused) paused.hidden = !(live && document.hidden && seconds() > 0);
  }

  function selectedIDs() {
    return Array.prototype.map.call(main.querySelectorAll("input.pick:checked"), function (el) { return el.value; });
  }

  // refresh fetches the page again and swaps its content, keeping the
  // selection. It waits while an action runs, a dialog is open or the user
  // is typing in a field of the page; it never runs on a page that
  // answered a POST.
  function refresh() {
    if (!live || document.hidden || busy || (dialog && dialog.open)) return Promise.resolve();
    var active = document.activeElement;
    if (active && main.contains(active) && (active.tagName === "INPUT" && active.type !== "checkbox" || active.tagName === "SELECT")) {
      return Promise.resolve();
    }
    var keep = selectedIDs();
    return fetch(location.href, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        if (busy) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("content");
        if (!fresh) return;
        main.innerHTML = fresh.innerHTML;
        main.dataset.page = fresh.dataset.page;
        follow(doc);
        keep.forEach(function (id) {
          var box = main.querySelector('input.pick[value="' + id + '"]');
          if (box) box.checked = true;
        });
        updateSelection();
        schedule();
      })
      .catch(function () { /* the next tick tries again */ });
  }

  // follow makes what lies outside #content and differs per page match
  // the refreshed page (doc), as a fresh load would show it: the refresh
  // may turn the page into another kind (a job's page into the 404 page
  // once the job is deleted). The picker keeps its value and listener.
  function follow(doc) {
    document.title = doc.title;
    var nav = document.querySelector("header.top nav"), freshNav = doc.querySelector("header.top nav");
    if (nav && freshNav) nav.innerHTML = freshNav.innerHTML;
    var freshPicker = doc.getElementById("refresh");
    if (freshPicker) {
      picker.disabled = freshPicker.disabled;
      if (freshPicker.hasAttribute("title")) picker.title = freshPicker.title;
      else picker.removeAttribute("title");
    }
    live = !doc.body.hasAttribute("data-no-refresh");
    document.body.toggleAttribute("data-no-refresh", !live);
  }

  picker.addEventListener("change", function () {
    try { localStorage.setItem("jobqueue.refresh", picker.value); } catch (e) {}
    schedule();
  });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && seconds() > 0) refresh();
    schedule();
  });

  // ---- selection ----------------------------------------------------------
  function updateSelection() {
    var ids = selectedIDs();
    var count = document.getElementById("selcount");
    if (count) count.textContent = ids.length + " selected";
    main.querySelectorAll("button[data-selection]").forEach(function (b) { b.disabled = ids.length === 0; });
    main.querySelectorAll("input.pick").forEach(function (box) {
      var tr = box.closest("tr");
      if (tr) tr.classList.toggle("selected", box.checked);
    });
    var all = document.getElementById("select-all");
    if (all) {
      var boxes = main.querySelectorAll("input.pick");
      all.checked = boxes.length > 0 && ids.length === boxes.length;
      all.indeterminate = ids.length > 0 && ids.length < boxes.length;
    }
  }
  main.addEventListener("change", function (ev) {
    var t = ev.target;
    if (t.id === "select-all") {
      main.querySelectorAll("input.pick").forEach(function (box) { box.checked = t.checked; });
    }
    if (t.id === "select-all" || t.classList.contains("pick")) updateSelection();
  });

  // ---- messages -----------------------------------------------------------
  var flashTimer = null;
  function say(text, bad) {
    flash.textContent = text;
    flash.classList.toggle("bad", !!bad);
    flash.hidden = false;
    if (flashTimer) clearTimeout(flashTimer);
    flashTimer = setTimeout(function () { flash.hidden = true; }, bad ? 12000 : 5000);
  }

  // confirmAction asks in the page's dialog, whose confirming button says
  // label; it answers from the button pressed (or Escape), never from a
  // close event that an earlier dialog may still have queued.
  function confirmAction(text, label) {
    return new Promise(function (resolve) {
      if (!dialog || typeof dialog.showModal !== "function") {
        resolve(window.confirm(text));
        return;
      }
      var yesBtn = document.getElementById("confirm-ok");
      var noBtn = document.getElementById("confirm-cancel");
      function finish(answer) {
        yesBtn.removeEventListener("click", yes);
        noBtn.removeEventListener("click", no);
        dialog.removeEventListener("cancel", no);
        if (dialog.open) dialog.close();
        resolve(answer);
      }
      function yes(ev) { ev.preventDefault(); finish(true); }
      function no(ev) { ev.preventDefault(); finish(false); }
      document.getElementById("confirm-text").textContent = text;
      yesBtn.textContent = label;
      yesBtn.addEventListener("click", yes);
      noBtn.addEventListener("click", no);
      dialog.addEventListener("cancel", no);
      dialog.showModal();
      noBtn.focus();
    });
  }

  function confirmDelete(n) {
    return confirmAction("Delete " + n + " job" + (n === 1 ? "" : "s") + "? This cannot be undone.", "Delete");
  }

  function post(path, body) {
    return fetch(base + path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      credentials: "same-origin",
      body: JSON.stringify(body || {})
    }).then(function (r) {
      return r.json().catch(function () { return { error: "HTTP " + r.status }; }).then(function (data) {
        if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
        return data;
      });
    });
  }

  var past = { retry: "retried", cancel: "cancelled", "delete": "deleted" };

  // ---- job actions --------------------------------------------------------
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("button[data-action]");
    if (!btn) return;
    ev.preventDefault();
    var action = btn.dataset.action;
    var ids = btn.hasAttribute("data-selection") ? selectedIDs() : (btn.dataset.ids || "").split(",");
    ids = ids.filter(Boolean).map(Number);
    if (ids.length === 0) return;
    var go = action === "delete" ? confirmDelete(ids.length) : Promise.resolve(true);
    go.then(function (ok) {
      if (!ok) return;
      busy = true;
      btn.disabled = true;
      return post("/api/jobs/" + action, { ids: ids }).then(function (data) {
        var done = data.results.filter(function (r) { return r.ok; }).length;
        var lines = [done + " of " + ids.length + " job" + (ids.length === 1 ? "" : "s") + " " + past[action]];
        data.results.forEach(function (r) { if (!r.ok) lines.push("#" + r.id + ": " + r.error); });
        say(lines.join("\n"), done < ids.length);
        busy = false;
        if (done === ids.length && btn.dataset.then) { location.href = btn.dataset.then; return; }
        return refresh();
      });
    }).catch(function (err) {
      say(action + " failed: " + err.message, true);
    }).then(function () { busy = false; btn.disabled = false; updateSelection(); });
  });

  // ---- maintenance --------------------------------------------------------
  var maintDone = { expire: "overdue jobs expired", reclaim: "abandoned attempts reclaimed", prune: "finished jobs pruned" };
  function maintain(op, body, el) {
    busy = true;
    if (el) el.disabled = true;
    post("/api/maintenance/" + op, body).then(function (data) {
      say(data.count + " " + maintDone[op]);
      busy = false;
      return refresh();
    }).catch(function (err) {
      say(op + " failed: " + err.message, true);
    }).then(function () { busy = false; if (el) el.disabled = false; });
  }
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("button[data-maint]");
    if (btn) { ev.preventDefault(); maintain(btn.dataset.maint, {}, btn); }
  });
  document.addEventListener("submit", function (ev) {
    var form = ev.target.closest("form[data-maint]");
    if (!form) return;
    ev.preventDefault();
    // Prune deletes jobs, so it asks first, as a delete does.
    var age = form.elements.older_than.value;
    confirmAction("Delete every completed, failed and expired job that finished more than " + age +
      " ago? This cannot be undone.", "Prune").then(function (ok) {
      if (ok) maintain(form.dataset.maint, { older_than: age }, form.querySelector("button"));
    });
  });

  updateSelection();
  schedule();
})();
