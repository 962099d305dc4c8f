(function () {
  var q = document.getElementById('q'), st = document.getElementById('status');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  var shown = document.getElementById('shown');
  function fromHash() {
    var params = new URLSearchParams(location.hash.slice(1));
    q.value = params.get('q') || ''; st.value = params.get('status') || 'all';
  }
  function apply() {
    var text = q.value.toLowerCase(), want = st.value, n = 0;
    rows.forEach(function (tr) {
      var ok = (!text || tr.dataset.key.indexOf(text) >= 0) &&
               (want === 'all' || (' ' + tr.dataset.tags + ' ').indexOf(' ' + want + ' ') >= 0);
      tr.hidden = !ok; if (ok) { n++; }
    });
    shown.textContent = n + ' of ' + rows.length + ' rows shown';
  }
  function update() {
    var params = new URLSearchParams();
    if (q.value) { params.set('q', q.value); }
    if (st.value !== 'all') { params.set('status', st.value); }
    history.replaceState(null, '', '#' + params.toString()); apply();
  }
  q.addEventListener('input', update); st.addEventListener('change', update);
  window.addEventListener('hashchange', function () { fromHash(); apply(); });
  fromHash(); apply();
})();
