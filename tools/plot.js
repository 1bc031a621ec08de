/* vram plot: what the pointer shows over a chart (embedded in the page).
 * Each device's section carries its columns as JSON (script.data); a
 * chart is an <svg class="chart"> whose plot area starts at data-left,
 * one pixel column per recorded column. */
(function () {
  'use strict';
  var tip = document.getElementById('tip');
  var units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

  /* As vram writes sizes everywhere: "3.96 GiB", "512 B". */
  function bytes(b) {
    if (b < 1024) return b + ' B';
    var v = b / 1024, u = 0;
    while (v >= 1024 && u < 5) { v /= 1024; u++; }
    return v.toFixed(2) + ' ' + units[u];
  }

  /* Seconds with the decimals a column's width asks for. */
  function seconds(s, resolution) {
    var d = 0;
    while (d < 9 && resolution < 0.95 * Math.pow(10, -d)) d++;
    return s.toFixed(d) + ' s';
  }

  function hide(svg) {
    tip.hidden = true;
    var cursor = svg.querySelector('.cursor');
    if (cursor) cursor.setAttribute('visibility', 'hidden');
  }

  function describe(data, chart, c) {
    var span = data.span_ns / 1e9, width = span / data.ncols;
    var lines = [seconds(c * width, width) + ' \u2013 ' + seconds((c + 1) * width, width)];
    var hi = data.total_max[c], lo = data.total_min[c];
    lines.push('in use ' + bytes(hi) + (lo !== hi ? ' (lowest in this column ' + bytes(lo) + ')' : ''));
    if (data.budget[c]) lines.push('budget ' + bytes(data.budget[c]));
    if (chart === data.charts.family && data.nvml && data.nvml[c] !== null)
      lines.push('NVML: ' + bytes(data.nvml[c]));
    if (data.refusals[c]) lines.push(data.refusals[c] + ' refused');
    for (var s = chart.names.length - 1; s >= 0; s--)
      lines.push(chart.names[s] + ': ' + bytes(chart.last[s][c]));
    return lines.join('\n');
  }

  function attach(section) {
    var data = JSON.parse(section.querySelector('script.data').textContent);
    section.querySelectorAll('svg.chart').forEach(function (svg) {
      var chart = data.charts[svg.dataset.chart];
      var left = +svg.dataset.left, viewWidth = svg.viewBox.baseVal.width;
      var cursor = svg.querySelector('.cursor');
      svg.addEventListener('mousemove', function (ev) {
        var box = svg.getBoundingClientRect();
        var c = Math.floor((ev.clientX - box.left) * viewWidth / box.width - left);
        if (c < 0 || c >= data.ncols) { hide(svg); return; }
        tip.textContent = describe(data, chart, c);
        tip.dataset.device = data.device;
        tip.dataset.chart = svg.dataset.chart;
        tip.dataset.column = c;
        tip.hidden = false;
        var x = ev.pageX + 14, y = ev.pageY + 14;
        if (x + tip.offsetWidth > window.scrollX + document.documentElement.clientWidth)
          x = ev.pageX - 14 - tip.offsetWidth;
        tip.style.left = x + 'px';
        tip.style.top = y + 'px';
        cursor.setAttribute('x1', left + c + 0.5);
        cursor.setAttribute('x2', left + c + 0.5);
        cursor.setAttribute('visibility', 'visible');
      });
      svg.addEventListener('mouseleave', function () { hide(svg); });
    });
  }

  document.querySelectorAll('section.device').forEach(attach);
  document.body.dataset.ready = 'true';
})();
