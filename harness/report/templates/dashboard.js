(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('data').textContent);
  var PAGE = 100;
  var q = document.getElementById('q'), st = document.getElementById('status');
  var tbody = document.querySelector('#matrix tbody'), shown = document.getElementById('shown');
  var pageLabel = document.getElementById('page'), prev = document.getElementById('prev'), next = document.getElementById('next');
  var page = 0, matches = [];
  // each row once: its tags (every cell's filter groups and triage) and its lower-case search key
  var rows = data.rows.map(function (r) {
    var tags = {};
    r[1].forEach(function (c) {
      if (c === null) { return; }
      var s = data.statuses[typeof c === 'number' ? c : c[0]];
      s[2].split(' ').forEach(function (t) { tags[t] = true; });
      if (typeof c !== 'number' && c[2]) { tags['triage-' + c[2]] = true; }
    });
    var t = Object.keys(tags).sort().join(' ');
    return {group: r[0], cells: r[1], tags: ' ' + t + ' ', key: (r[0] + ' ' + t).toLowerCase()};
  });
  function fromHash() {
    var params = new URLSearchParams(location.hash.slice(1));
    q.value = params.get('q') || ''; st.value = params.get('status') || 'all';
    page = Math.max(0, parseInt(params.get('page') || '0', 10) || 0);
  }
  function toHash() {
    var params = new URLSearchParams();
    if (q.value) { params.set('q', q.value); }
    if (st.value !== 'all') { params.set('status', st.value); }
    if (page) { params.set('page', String(page)); }
    history.replaceState(null, '', '#' + params.toString());
  }
  function filter() {
    var text = q.value.toLowerCase(), want = ' ' + st.value + ' ';
    matches = rows.filter(function (r) {
      return (!text || r.key.indexOf(text) >= 0) && (want === ' all ' || r.tags.indexOf(want) >= 0);
    });
  }
  function draw() {
    var pages = Math.max(1, Math.ceil(matches.length / PAGE));
    if (page >= pages) { page = pages - 1; }
    var frag = document.createDocumentFragment();
    matches.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) {
      var tr = document.createElement('tr');
      tr.dataset.key = r.key; tr.dataset.tags = r.tags.trim();
      var td = document.createElement('td'), code = document.createElement('code');
      code.textContent = r.group; td.appendChild(code); tr.appendChild(td);
      r.cells.forEach(function (c) {
        var cell = document.createElement('td');
        if (c === null) { cell.className = 's none'; } else {
          var s = data.statuses[typeof c === 'number' ? c : c[0]];
          cell.className = 's ' + s[1]; cell.textContent = s[0];
          if (typeof c !== 'number') { cell.title = c[1]; }
        }
        tr.appendChild(cell);
      });
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    shown.textContent = matches.length + ' of ' + rows.length + ' rows shown';
    pageLabel.textContent = 'page ' + (page + 1) + ' of ' + pages;
    prev.disabled = page === 0; next.disabled = page >= pages - 1;
  }
  function update() { page = 0; toHash(); filter(); draw(); }
  q.addEventListener('input', update); st.addEventListener('change', update);
  prev.addEventListener('click', function () { page = Math.max(0, page - 1); toHash(); draw(); });
  next.addEventListener('click', function () { page += 1; toHash(); draw(); });
  window.addEventListener('hashchange', function () { fromHash(); filter(); draw(); });
  fromHash(); filter(); draw();
})();
