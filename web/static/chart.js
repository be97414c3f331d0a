/* Tiny SVG charts for the admin page: a stacked bar chart, a line chart and
 * a histogram.
 *
 * Why plain SVG rather than a charting library: the page draws a few small
 * charts (at most 96 bars or points each) that refresh every few seconds; this is
 * ~150 lines with no build step and no third-party code in the binary, and it
 * works under `Content-Security-Policy: default-src 'self'` (no inline
 * styles: every attribute is set through the DOM). Text is set with
 * textContent only. */
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  /* opts: {partialLast: the last bucket is still filling (drawn faded and
   * labelled), unitX: the time axis' zone, written at its end}. */
  function frame(container, maxY, labels, unit, opts) {
    opts = opts || {};
    const w = Math.max(container.clientWidth, 300), h = Math.max(container.clientHeight, 120);
    const pad = { l: 44, r: 8, t: 8, b: 20 };
    const svg = el("svg", { viewBox: `0 0 ${w} ${h}`, role: "img" });
    const ih = h - pad.t - pad.b, iw = w - pad.l - pad.r;
    for (let i = 0; i <= 4; i++) {
      const y = pad.t + ih - (ih * i) / 4;
      el("line", { x1: pad.l, x2: w - pad.r, y1: y, y2: y, class: "axis" }, svg);
      const t = el("text", { x: pad.l - 4, y: y + 3, "text-anchor": "end" }, svg);
      const v = (maxY * i) / 4;
      t.textContent = v >= 10000 ? Math.round(v / 1000) + "k" : String(v >= 100 ? Math.round(v) : Math.round(v * 10) / 10);
    }
    const n = labels.length;
    const step = n > 0 ? iw / n : iw;
    const every = Math.max(1, Math.ceil(n / 6));
    labels.forEach((lab, i) => {
      if (i % every !== 0 || (opts.unitX && i > n - 1 - every)) return;
      const t = el("text", { x: pad.l + step * i + step / 2, y: h - 5, "text-anchor": "middle" }, svg);
      t.textContent = lab;
    });
    if (opts.unitX) {
      const t = el("text", { x: w - pad.r, y: h - 5, "text-anchor": "end", class: "axis-unit" }, svg);
      t.textContent = opts.unitX;
    }
    if (opts.partialLast && n > 0) {
      const x = pad.l + step * (n - 1);
      el("rect", { x, y: pad.t, width: step, height: ih, class: "partial" }, svg);
      const t = el("text", { x: x + step / 2, y: pad.t + 9, "text-anchor": "middle", class: "partial-label" }, svg);
      t.textContent = "now";
      el("title", {}, t).textContent = "the current bucket is still filling";
    }
    return { svg, pad, iw, ih, step };
  }
  function legend(node, series, unit, opts) {
    node.replaceChildren();
    if (unit) node.appendChild(document.createTextNode(`(${unit})`));
    for (const s of series) {
      const span = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = s.color;
      span.appendChild(sw);
      span.appendChild(document.createTextNode(s.name));
      node.appendChild(span);
    }
    if (opts && opts.partialLast) {
      const note = document.createElement("span");
      note.className = "partial-note";
      note.textContent = "last bar: in progress";
      node.appendChild(note);
    }
  }
  /* series: [{name, color, values: number[]}], labels: string[] */
  function stackedBars(container, legendNode, labels, series, opts) {
    const totals = labels.map((_, i) => series.reduce((a, s) => a + (s.values[i] || 0), 0));
    const maxY = niceMax(Math.max(0, ...totals));
    const f = frame(container, maxY, labels, "", opts);
    const partial = opts && opts.partialLast ? labels.length - 1 : -1;
    const bw = Math.max(1, f.step * 0.75);
    labels.forEach((lab, i) => {
      let acc = 0;
      for (const s of series) {
        const v = s.values[i] || 0;
        if (v <= 0) continue;
        const y0 = f.pad.t + f.ih - (f.ih * (acc + v)) / maxY;
        const hh = (f.ih * v) / maxY;
        const r = el("rect", { x: f.pad.l + f.step * i + (f.step - bw) / 2, y: y0, width: bw, height: Math.max(hh, 0.5), fill: s.color, "fill-opacity": i === partial ? 0.45 : 1 }, f.svg);
        const pct = totals[i] ? ` (${((100 * v) / totals[i]).toFixed(1)}%)` : "";
        el("title", {}, r).textContent = `${lab} UTC ${s.name}: ${v}${pct}${i === partial ? ", so far" : ""}`;
        acc += v;
      }
    });
    container.replaceChildren(f.svg);
    legend(legendNode, series, "", opts);
  }
  function lines(container, legendNode, labels, series, unit, opts) {
    const all = series.flatMap((s) => s.values.filter((v) => v != null));
    const maxY = niceMax(Math.max(0, ...all));
    const f = frame(container, maxY, labels, unit, opts);
    for (const s of series) {
      let d = "";
      s.values.forEach((v, i) => {
        if (v == null) return;
        const x = f.pad.l + f.step * i + f.step / 2, y = f.pad.t + f.ih - (f.ih * v) / maxY;
        d += (d ? " L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
        const c = el("circle", { cx: x, cy: y, r: 2, fill: s.color }, f.svg);
        el("title", {}, c).textContent = `${labels[i]} UTC ${s.name}: ${v} ${unit}`;
      });
      if (d) el("path", { d, fill: "none", stroke: s.color, "stroke-width": 1.6 }, f.svg);
    }
    container.replaceChildren(f.svg);
    legend(legendNode, series, unit, opts);
  }
  /* A histogram of `values` (numbers) in at most `bins` equal ranges from
   * their minimum to their maximum; each bar carries its count in data-n and
   * its range and count in its title. */
  function histogram(container, values, bins, unitX) {
    const lo = Math.min(...values), hi = Math.max(...values);
    const n = values.length && hi > lo ? bins : 1;
    const width = n > 1 ? (hi - lo) / n : 0;
    const counts = new Array(n).fill(0);
    for (const v of values) counts[width ? Math.min(n - 1, Math.floor((v - lo) / width)) : 0]++;
    const fmt = (v) => String(Math.round(v * 1000) / 1000);
    const labels = counts.map((_, i) => (width ? fmt(lo + width * i) : values.length ? fmt(lo) : ""));
    const maxY = niceMax(Math.max(0, ...counts));
    const f = frame(container, maxY, labels, "", n > 1 ? { unitX } : {});
    const bw = Math.max(1, f.step * 0.85);
    counts.forEach((c, i) => {
      const hh = (f.ih * c) / maxY;
      const r = el("rect", { x: f.pad.l + f.step * i + (f.step - bw) / 2, y: f.pad.t + f.ih - hh, width: bw,
        height: Math.max(hh, c ? 0.5 : 0), class: "bar", "data-n": c }, f.svg);
      const range = width ? `${fmt(lo + width * i)} to ${fmt(lo + width * (i + 1))}` : fmt(lo);
      el("title", {}, r).textContent = `Δ ${range}: ${c} row${c === 1 ? "" : "s"}`;
    });
    container.replaceChildren(f.svg);
  }
  window.FpsChart = { stackedBars, lines, histogram };
})();
