// The fleet page's filter and sort. It works on the tables the page already
// holds (without it the page shows everything): it reads their text and
// changes only which rows and columns show and in what order. It writes no
// markup, only textContent.
(function () {
  "use strict";
  var doc = document;
  var q = doc.getElementById("q");
  var fw = doc.getElementById("fw");
  doc.getElementById("tools").hidden = false;

  function rows(t) { return Array.prototype.slice.call(t.tBodies[0].rows); }

  // The two rankings: each row's text, read once; the top rows show until
  // "show all" or a filter.
  var ranked = [];
  Array.prototype.forEach.call(doc.querySelectorAll("table[data-filter=row]"), function (t) {
    var r = { t: t, all: false, limit: +t.getAttribute("data-limit") || 0, text: new Map() };
    rows(t).forEach(function (tr) { r.text.set(tr, tr.textContent.toLowerCase()); });
    if (r.limit && r.text.size > r.limit) {
      var p = doc.createElement("p"), b = doc.createElement("button");
      p.className = "more";
      b.type = "button";
      b.addEventListener("click", function () { r.all = !r.all; apply(); });
      p.appendChild(b);
      r.note = doc.createElement("span");
      r.note.className = "note";
      p.appendChild(doc.createTextNode(" "));
      p.appendChild(r.note);
      t.parentNode.insertBefore(p, t.nextSibling);
      r.button = b;
    }
    ranked.push(r);
  });

  // The matrix: rows by host, columns by check ID.
  var m = doc.getElementById("t-matrix"), mx = null;
  if (m) {
    var head = m.tHead.rows[0], cols = [];
    Array.prototype.forEach.call(head.cells, function (th, i) {
      if (th.classList.contains("col")) {
        cols.push({ i: i, id: th.textContent.toLowerCase(), fw: th.classList.contains("fw"), shown: true });
      }
    });
    mx = { t: m, cols: cols, hosts: new Map(), all: false, note: doc.getElementById("colnote") };
    rows(m).forEach(function (tr) { mx.hosts.set(tr, tr.cells[0].textContent.toLowerCase()); });
    var b = doc.createElement("button");
    b.type = "button";
    b.addEventListener("click", function () { mx.all = !mx.all; apply(); });
    mx.button = b;
    mx.note.parentNode.appendChild(b);
  }

  // fit is how many check columns fit beside the host columns in the
  // window: the page never needs scrolling sideways unless asked.
  function fit() {
    if (!mx.cols.length) { return 0; }
    // The column before the first check's, always shown; a check's
    // column is 18 pixels wide (17 and its border).
    var left = mx.t.tHead.rows[0].cells[mx.cols[0].i - 1].getBoundingClientRect().right;
    return Math.max(5, Math.floor((doc.documentElement.clientWidth - left - 16) / 18));
  }

  function apply() {
    var term = q.value.trim().toLowerCase();
    ranked.forEach(function (r) {
      var shown = 0, match = 0;
      rows(r.t).forEach(function (tr) {
        var ok = !term || r.text.get(tr).indexOf(term) >= 0;
        if (ok) { match++; }
        var show = ok && (term || r.all || !r.limit || shown < r.limit);
        if (show) { shown++; }
        tr.hidden = !show;
      });
      if (r.button) {
        r.button.hidden = !!term;
        r.button.textContent = r.all ? "show the top " + r.limit : "show all " + r.text.size;
        r.note.textContent = term ? match + " of " + r.text.size + " match" : (r.all ? "" : shown + " of " + r.text.size + " shown");
      }
    });
    if (!mx) { return; }
    var colMatch = term && mx.cols.some(function (c) { return c.id.indexOf(term) >= 0; });
    var rowMatch = false;
    if (term) {
      mx.hosts.forEach(function (h) { if (h.indexOf(term) >= 0) { rowMatch = true; } });
    }
    mx.hosts.forEach(function (h, tr) {
      tr.hidden = !!term && (rowMatch ? h.indexOf(term) < 0 : !colMatch);
    });
    // Which columns: those matching the filter, else the separating ones
    // (and the fleet-wide ones when asked), as many as fit.
    var want = mx.cols.filter(function (c) {
      if (colMatch) { return c.id.indexOf(term) >= 0; }
      return !c.fw || fw.checked;
    });
    var room = mx.all ? want.length : fit();
    var nfw = want.filter(function (c) { return c.fw; }).length;
    var sep = 0, hiddenSep = 0;
    var keep = new Set(want.filter(function (c) {
      if (c.fw || colMatch) { return true; }
      if (sep < room - nfw) { sep++; return true; }
      hiddenSep++;
      return false;
    }));
    var body = rows(mx.t), headRow = mx.t.tHead.rows[0];
    mx.cols.forEach(function (c) {
      var show = keep.has(c);
      if (show === c.shown) { return; }
      c.shown = show;
      var d = show ? "" : "none";
      headRow.cells[c.i].style.display = d;
      body.forEach(function (tr) { tr.cells[c.i].style.display = d; });
    });
    mx.note.textContent = hiddenSep ? hiddenSep + " less telling checks do not fit the window. " :
      (!keep.size && !term ? "Every check failing somewhere fails fleet-wide: tick \u201cfleet-wide checks\u201d to see them. " : "");
    mx.button.hidden = !hiddenSep && !mx.all;
    mx.button.textContent = mx.all ? "fit the window" : "show all checks";
  }

  // Sorting: a header with data-sort orders its table's rows by that
  // column (numbers and verdicts worst first, text A to Z; again reverses).
  var verdict = { "f-critical": 5, "f-warning": 4, "f-info": 3, "u": 2, "p": 1, "na": 0 };
  function key(cell, how) {
    if (how === "num") { return parseFloat(cell.textContent) || 0; }
    if (how === "verdict") { return verdict[cell.classList[0]] || 0; }
    return cell.textContent.toLowerCase();
  }
  Array.prototype.forEach.call(doc.querySelectorAll("th[data-sort]"), function (th) {
    th.tabIndex = 0;
    function sort() {
      var t = th.closest("table"), how = th.getAttribute("data-sort"), i = th.cellIndex;
      var desc = th.getAttribute("aria-sort") ? th.getAttribute("aria-sort") === "ascending" : how !== "text";
      Array.prototype.forEach.call(t.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", desc ? "descending" : "ascending");
      var rs = rows(t).map(function (tr, n) { return { tr: tr, k: key(tr.cells[i], how), n: n }; });
      rs.sort(function (a, b) {
        if (a.k < b.k) { return desc ? 1 : -1; }
        if (a.k > b.k) { return desc ? -1 : 1; }
        return a.n - b.n;
      });
      var tb = t.tBodies[0];
      rs.forEach(function (r) { tb.appendChild(r.tr); });
      apply();
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
  });

  var timer = 0;
  q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 120); });
  fw.addEventListener("change", apply);
  window.addEventListener("resize", function () { clearTimeout(timer); timer = setTimeout(apply, 120); });
  apply();
})();
