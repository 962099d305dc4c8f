(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('data').textContent);
  var main = document.getElementById('item');
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }
  function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function list(v) { return Array.isArray(v) ? v : []; }
  function num(v) {
    if (v === null || v === undefined || v === '') { return '—'; }
    if (typeof v === 'number') { return Number.isInteger(v) ? String(v) : v.toPrecision(4); }
    return String(v);
  }
  function facts(rows) {
    var t = el('table'), b = el('tbody');
    t.className = 'facts';
    rows.forEach(function (r) {
      if (r[1] === undefined || r[1] === null || r[1] === '') { return; }
      var tr = el('tr'); tr.appendChild(el('th', r[0]));
      var td = el('td', r[1], r[2]); if (r[3]) { td.id = r[3]; } tr.appendChild(td); b.appendChild(tr);
    });
    t.appendChild(b); return t;
  }
  function table(id, head, rows) {
    var t = el('table'), th = el('thead'), tr = el('tr'), b = el('tbody');
    t.id = id;
    head.forEach(function (h) { tr.appendChild(el('th', h)); });
    th.appendChild(tr); t.appendChild(th);
    rows.forEach(function (r) { var x = el('tr'); r.forEach(function (c) { x.appendChild(el('td', c)); }); b.appendChild(x); });
    t.appendChild(b); return t;
  }
  function kv(o) { return Object.keys(obj(o)).map(function (k) { return k + ' ' + num(o[k]); }).join(' · '); }
  function draw() {
    var key = location.hash.slice(1);
    try { key = decodeURIComponent(key); } catch (e) { /* a malformed fragment is looked up as written */ }
    var it = Object.prototype.hasOwnProperty.call(data.items, key) ? data.items[key] : null;
    main.replaceChildren();
    if (!it) { main.appendChild(el('p', 'No item ' + key + ' on this page.', 'meta')); return; }
    var rec = obj(it.rec), part = obj(rec.partition), lat = obj(rec.latency_ms), err = obj(rec.error), xf = obj(rec.xfail);
    document.title = it.row + ' · ' + data.column;
    var h = el('h1'); h.appendChild(el('code', rec.id)); main.appendChild(h);
    main.appendChild(el('p', data.column + ' · run ' + it.run + ' (' + it.when + ') · ' + it.under_test, 'meta'));
    var blobs = list(rec.delegate_blobs).map(function (b) { return obj(b).backend + ' blob ' + obj(b).bytes + ' bytes'; });
    main.appendChild(facts([
      ['status', it.status, 's ' + it.group, 'status'],
      ['triage', rec.triage ? rec.triage + ' (the first suspect)' : ''],
      ['detail', rec.detail],
      ['xfail', xf.reason],
      ['stale', it.stale ? 'this record is ' + it.stale + ' (which did not include the item)' : '', it.stale ? 'stale' : ''],
      ['failing', it.age ? it.age + (it.overdue ? ' — past the 72-hour rule' : '') : '', it.overdue ? 'overdue' : ''],
      ['flaky', it.flaky ? 'flipped between ' + it.flaky.join(' / ') + ' at the same versions' : ''],
      ['suite · op', [rec.suite, rec.op].filter(Boolean).join(' · ')],
      ['backend · runtime', [rec.backend, rec.runtime].filter(Boolean).join(' · ')],
      ['program', rec.pte_bytes ? [rec.pte_bytes + ' bytes'].concat(blobs).join(' · ') : ''],
      ['latency', lat.median !== undefined ? 'median ' + num(lat.median) + ' ms · p90 ' + num(lat.p90) + ' ms' +
        (rec.load_ms !== undefined ? ' · load ' + num(rec.load_ms) + ' ms' : '') : ''],
      ['accuracy', kv(rec.accuracy)],
      ['baseline', kv(rec.baseline)],
      ['tolerance', kv(rec.tolerance)]
    ]));
    main.appendChild(el('h2', 'Reproduce'));
    var pre = el('pre', (it.install ? it.install + '\n' : '') + it.command); pre.id = 'command'; main.appendChild(pre);
    if (it.repro_command) {  // a failure: a standalone script, torch + executorch only (bti repro)
      var p = el('p', 'Without bti (a script that needs torch and executorch alone): ');
      if (it.repro) { var a = document.createElement('a'); a.href = it.repro; a.id = 'repro'; a.textContent = 'the script bti wrote'; p.appendChild(a); p.appendChild(document.createTextNode(', or:')); }
      main.appendChild(p);
      var rp = el('pre', it.repro_command); rp.id = 'repro-command'; main.appendChild(rp);
    }
    if (part.total_nodes !== undefined) {
      main.appendChild(el('h2', 'Partition'));
      main.appendChild(el('p', (part.delegated_nodes || 0) + ' of ' + part.total_nodes + ' nodes delegated'));
      if (list(part.delegated_ops).length) { main.appendChild(el('p', 'delegated: ' + list(part.delegated_ops).join(', '))); }
      if (list(part.undelegated_ops).length) { main.appendChild(el('p', 'left on the CPU: ' + list(part.undelegated_ops).join(', '))); }
      if (part.vela) { main.appendChild(el('p', 'vela estimates (Ethos-U compiler): ' + kv(part.vela))); }
    }
    var outs = list(rec.outputs).map(obj);
    if (outs.length) {
      main.appendChild(el('h2', 'Outputs'));
      main.appendChild(table('outputs', ['output', 'shape', 'dtype', 'max abs', 'max rel', 'MAE', 'SQNR dB', 'cosine'], outs.map(function (o, i) {
        return [o.name || i, o.shape ? JSON.stringify(o.shape) : '—', o.dtype || '', num(o.max_abs), num(o.max_rel), num(o.mae), num(o.sqnr_db), num(o.cosine)];
      })));
    }
    var stages = obj(rec.stages);
    if (Object.keys(stages).length) {
      main.appendChild(el('h2', 'Stages'));
      main.appendChild(table('stages', ['stage', 'seconds'], Object.keys(stages).map(function (k) { return [k, num(stages[k])]; })));
    }
    if (err.type || err.message) {
      main.appendChild(el('h2', 'Error'));
      main.appendChild(el('p', (err.type || '') + ': ' + (err.message || '')));
      if (err.trace) { main.appendChild(el('pre', err.trace)); }
    }
    if (list(rec.attempts).length) {
      main.appendChild(el('h2', 'Attempts'));
      main.appendChild(table('attempts', ['attempt', 'status', 'detail'], list(rec.attempts).map(function (a) { a = obj(a); return [a.attempt, a.status, a.detail]; })));
    }
    main.appendChild(el('h2', 'History in this column'));
    main.appendChild(table('trail', ['run', 'when', 'under test', 'status'], list(it.trail).slice().reverse().map(function (t) {
      var r = data.runs[t[0]] || []; return [r[0], r[1], r[2], t[1]];
    })));
  }
  window.addEventListener('hashchange', draw);
  draw();
})();
