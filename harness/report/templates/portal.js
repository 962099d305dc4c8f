(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('data').textContent);
  var PAGE = 100;
  var q = document.getElementById('q'), st = document.getElementById('status'), rc = document.getElementById('recipe');
  var op = document.getElementById('op'), model = document.getElementById('model');
  var tbody = document.querySelector('#matrix tbody'), shown = document.getElementById('shown');
  var pageLabel = document.getElementById('page'), prev = document.getElementById('prev'), next = document.getElementById('next');
  var heads = document.querySelectorAll('#matrix thead th.col');
  var page = 0, matches = [];
  // a column is named in the URL by its id (a hash of its key), not its position: a link keeps its column
  function column() { return rc.value === '' ? -1 : data.ids.indexOf(rc.value); }
  function fromHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    q.value = p.get('q') || ''; st.value = p.get('status') || 'all'; rc.value = p.get('recipe') || '';
    op.value = p.get('op') || ''; model.value = p.get('model') || ''; page = Math.max(0, parseInt(p.get('page') || '0', 10) || 0);
  }
  function toHash() {
    var p = new URLSearchParams();
    if (q.value) { p.set('q', q.value); }
    if (st.value !== 'all') { p.set('status', st.value); }
    if (rc.value !== '') { p.set('recipe', rc.value); }
    if (op.value) { p.set('op', op.value); }
    if (model.value) { p.set('model', model.value); }
    if (page) { p.set('page', String(page)); }
    history.replaceState(null, '', '#' + p.toString());
  }
  function cellOk(c, want) {
    if (!c) { return false; }
    if (want === 'all') { return true; }
    if (want === 'flaky' || want === 'overdue' || want === 'stale') { return (' ' + c[3] + ' ').indexOf(' ' + want + ' ') >= 0; }
    return c[1] === want;
  }
  function filter() {
    var text = q.value.toLowerCase(), want = st.value, col = column();
    matches = data.rows.filter(function (r) {
      if (text && (r[0] + ' ' + r[1] + ' ' + r[2]).toLowerCase().indexOf(text) < 0) { return false; }
      if (op.value && r[2] !== op.value) { return false; }
      if (model.value && r[3] !== model.value) { return false; }
      if (col >= 0) { return cellOk(r[4][col], want); }
      return r[4].some(function (c) { return cellOk(c, want); });
    });
  }
  function draw() {
    var pages = Math.max(1, Math.ceil(matches.length / PAGE));
    if (page >= pages) { page = pages - 1; }
    var col = column();
    for (var h = 0; h < heads.length; h++) { heads[h].hidden = col >= 0 && h !== col; }
    var frag = document.createDocumentFragment();
    matches.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) {
      var tr = document.createElement('tr');
      tr.dataset.row = r[0];
      var s = document.createElement('td'); s.textContent = r[1]; tr.appendChild(s);
      var td = document.createElement('td'), code = document.createElement('code'); code.textContent = r[0]; td.appendChild(code); tr.appendChild(td);
      r[4].forEach(function (c, i) {
        if (col >= 0 && i !== col) { return; }
        var cell = document.createElement('td');
        cell.className = 's ' + (c ? c[1] + ' ' + c[3] : 'none');
        if (c) {
          var a = document.createElement('a'); a.href = c[2]; a.textContent = c[0]; cell.appendChild(a);
          cell.title = c[4];
        }
        tr.appendChild(cell);
      });
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    shown.textContent = matches.length + ' of ' + data.rows.length + ' rows match';
    pageLabel.textContent = 'page ' + (page + 1) + ' of ' + pages;
    prev.disabled = page === 0; next.disabled = page >= pages - 1;
  }
  function update(resetPage) { if (resetPage) { page = 0; } toHash(); filter(); draw(); }
  [q].forEach(function (el) { el.addEventListener('input', function () { update(true); }); });
  [st, rc, op, model].forEach(function (el) { el.addEventListener('change', function () { update(true); }); });
  prev.addEventListener('click', function () { page = Math.max(0, page - 1); toHash(); draw(); });
  next.addEventListener('click', function () { page += 1; toHash(); draw(); });
  window.addEventListener('hashchange', function () { fromHash(); filter(); draw(); });
  fromHash(); filter(); draw();
})();
