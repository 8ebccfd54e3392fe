// A sweep's tiers per type and its cost beside quality (comparison.json's `tiers` and `cost`:
// compare/tiers.py, compare/cost.py). Reads the same embedded JSON as the explorer and decides
// nothing itself: every tier, rank and front shown is the record's. Vanilla JS, no network.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("explorer-data").textContent);
  const C = D.comparison;
  if (!C || !C.tiers) return;
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const num = (v, d = 3) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
  const mb = (v) => (v === null || v === undefined ? "—" : (v / 1048576).toFixed(2));
  const labels = C.configurations.map((c) => c.label);
  const metricOpts = C.metrics.map((m) => `<option value="${esc(m.spec)}">${esc(m.heading)}</option>`).join("");
  const TIER_COLOURS = ["#cdeccd", "#fdf1c4", "#f8dcc4", "#f3c9c9", "#e6d3ef"];

  function section(id, title, body) {
    const s = document.createElement("section");
    s.id = id;
    s.innerHTML = `<h2>${esc(title)}</h2>${body}`;
    const anchor = document.getElementById("sec-stages");
    anchor.parentNode.insertBefore(s, anchor);
    const link = document.createElement("a");
    link.href = `#${id}`;
    link.textContent = title.split(":")[0];
    const nav = document.querySelector("nav");
    nav.insertBefore(link, nav.querySelector('a[href="#sec-stages"]'));
    return s;
  }

  // ---- tiers: per type, which configurations no other beats, and each one's rank interval
  const set = D.settings || {};
  section("sec-tiers", "Tiers per type",
    `<div class="controls"><label>metric<select id="tier-metric">${metricOpts}</select></label></div>`
    + `<p class="note">Every pair of configurations tested (${esc(set.test || "")}); X beats Y when significant and X's mean is better. `
    + "Tier 1: no other configuration beats it; then the same among the rest. A configuration may sit a tier below one it is not separated from "
    + `(≈). Rank: of its mean (1 = best) with its ${esc(String(100 * (set.confidence || 0.95)))}% bootstrap interval (${esc(set.rank_interval || "")}).</p>`
    + '<div id="tiers"></div>');
  function drawTiers() {
    const spec = document.getElementById("tier-metric").value;
    let html = `<table id="tiers-table" data-metric="${esc(spec)}"><tr><th class="l">type</th><th>n</th><th class="l">tiers</th>${labels.map((l) => `<th>${esc(l)}</th>`).join("")}</tr>`;
    for (const t of C.types) {
      const cell = C.tiers[spec][t];
      const tiers = cell.tiers.length
        ? cell.tiers.map((tier, i) => `<span class="tier" data-tier="${i + 1}">${i + 1}: ${esc(tier.join(", "))}</span>`).join(" · ")
        : esc(cell.note);
      html += `<tr data-type="${esc(t)}"><td class="l">${esc(t)}</td><td>${cell.n}</td><td class="l">${tiers}</td>`;
      for (const l of labels) {
        const tier = cell.tier_of[l];
        const rank = cell.ranks[l];
        const above = (cell.unseparated_above || {})[l];
        const bg = tier ? TIER_COLOURS[Math.min(tier, TIER_COLOURS.length) - 1] : "#eee";
        const title = (cell.beaten_by[l] || []).length ? `beaten by ${cell.beaten_by[l].join(", ")}` : "beaten by none";
        html += `<td data-label="${esc(l)}" data-tier="${tier || ""}" style="background:${bg}" title="${esc(title)}">${num(cell.means[l])}`
          + (tier ? ` <b>T${tier}</b>` : "")
          + (rank ? ` <small>r${rank.observed} [${rank.low}–${rank.high}]</small>` : "")
          + (above ? ` <small>≈ ${esc(above.join(", "))}</small>` : "") + "</td>";
      }
      html += "</tr>";
    }
    document.getElementById("tiers").innerHTML = html + "</table>";
  }
  document.getElementById("tier-metric").onchange = drawTiers;
  drawTiers();

  // ---- cost beside quality: the cost table and the Pareto plot per type
  const cost = C.cost;
  if (!cost || !labels.some((l) => cost.systems[l])) return;
  const axisOpts = Object.entries(cost.axes).map(([k, what]) => `<option value="${esc(k)}">${esc(what)}</option>`).join("");
  const typeOpts = C.types.map((t) => `<option value="${esc(t)}">${esc(t)}</option>`).join("");
  let rows = "";
  for (const l of labels) {
    const c = cost.systems[l];
    rows += c
      ? `<tr data-label="${esc(l)}"><td class="l">${esc(l)}</td><td>${num(c.p50_ms)}</td><td>${num(c.p95_ms)}</td><td>${mb(c.index_bytes)}</td><td>${mb(c.disk_bytes)}</td><td>${num(c.build_cold_s)}</td><td>${mb(c.peak_rss_bytes)}</td><td class="l">${esc(c.machine)}</td></tr>`
      : `<tr data-label="${esc(l)}"><td class="l">${esc(l)}</td><td colspan="7" class="l">costs not recorded</td></tr>`;
  }
  const machines = cost.machines.length > 1
    ? `<div class="warn">The jobs ran on different machines (${esc(cost.machines.join("; "))}): their costs do not compare.</div>` : "";
  section("sec-cost", "Cost beside quality",
    machines
    + `<table id="cost-table"><tr><th class="l">configuration</th><th>p50 ms</th><th>p95 ms</th><th>index MiB</th><th>disk MiB</th><th>cold build s</th><th>peak RSS MiB</th><th class="l">machine</th></tr>${rows}</table>`
    + `<div class="controls"><label>metric<select id="pareto-metric">${metricOpts}</select></label><label>type<select id="pareto-type">${typeOpts}</select></label><label>cost<select id="pareto-axis">${axisOpts}</select></label></div>`
    + '<p class="note">Taken cheapest first, a configuration is dominated by a front configuration that is cheaper and not significantly worse (the tiers\' tests), or as cheap and significantly better; otherwise it joins the front. Filled points: the front, joined cheapest first; hollow: dominated.</p>'
    + '<div id="pareto-plot"></div><p id="pareto-front" class="note"></p>');
  document.getElementById("pareto-type").value = "all";

  function drawPareto() {
    const spec = document.getElementById("pareto-metric").value;
    const t = document.getElementById("pareto-type").value;
    const axis = document.getElementById("pareto-axis").value;
    const front = cost.pareto[axis][spec][t];
    const means = C.tiers[spec][t].means;
    const pts = labels
      .filter((l) => cost.systems[l] && cost.systems[l][axis] !== null && cost.systems[l][axis] !== undefined && means[l] !== null)
      .map((l) => ({ l, x: cost.systems[l][axis] / (axis === "index_bytes" ? 1048576 : 1), y: means[l], on: front.front.includes(l) }));
    const W = 640, H = 360, L = 64, R = 150, T = 16, B = 44;
    const xs = pts.map((p) => p.x), ys = pts.map((p) => p.y);
    const positive = xs.length && Math.min(...xs) > 0;
    const logX = positive && Math.max(...xs) / Math.min(...xs) > 20;
    const fx = (v) => (logX ? Math.log10(v) : v);
    const x0 = xs.length ? Math.min(...xs.map(fx)) : 0, x1 = xs.length ? Math.max(...xs.map(fx)) : 1;
    const y0 = ys.length ? Math.min(...ys) : 0, y1 = ys.length ? Math.max(...ys) : 1;
    const padX = (x1 - x0) * 0.08 || 0.5, padY = (y1 - y0) * 0.1 || 0.05;
    const sx = (v) => L + ((fx(v) - x0 + padX) / (x1 - x0 + 2 * padX)) * (W - L - R);
    const sy = (v) => H - B - ((v - y0 + padY) / (y1 - y0 + 2 * padY)) * (H - T - B);
    let svg = `<svg id="pareto-svg" xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" data-metric="${esc(spec)}" data-type="${esc(t)}" data-axis="${esc(axis)}" role="img">`;
    svg += `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#333"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#333"/>`;
    for (let i = 0; i <= 4; i++) {
      const xv = logX ? 10 ** (x0 - padX + (i / 4) * (x1 - x0 + 2 * padX)) : x0 - padX + (i / 4) * (x1 - x0 + 2 * padX);
      const yv = y0 - padY + (i / 4) * (y1 - y0 + 2 * padY);
      svg += `<text x="${sx(xv)}" y="${H - B + 16}" font-size="11" text-anchor="middle">${esc(xv.toPrecision(3))}</text>`;
      svg += `<text x="${L - 6}" y="${sy(yv) + 4}" font-size="11" text-anchor="end">${esc(yv.toFixed(3))}</text>`;
    }
    const unit = axis === "index_bytes" ? "index size (MiB)" : "p95 latency (ms)";
    svg += `<text x="${(L + W - R) / 2}" y="${H - 8}" font-size="12" text-anchor="middle">${esc(unit)}${logX ? " (log scale)" : ""}</text>`;
    svg += `<text x="14" y="${(T + H - B) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 ${(T + H - B) / 2})">${esc(spec)} (${esc(t)})</text>`;
    const line = pts.filter((p) => p.on).sort((a, b) => a.x - b.x);
    if (line.length > 1) svg += `<polyline fill="none" stroke="#2a7a2a" stroke-width="2" points="${line.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ")}"/>`;
    for (const p of pts) {
      svg += `<circle class="pt" data-label="${esc(p.l)}" data-front="${p.on}" cx="${sx(p.x)}" cy="${sy(p.y)}" r="6" fill="${p.on ? "#2a7a2a" : "#fff"}" stroke="${p.on ? "#2a7a2a" : "#a33"}" stroke-width="2"><title>${esc(p.l)}: ${esc(p.y.toFixed(3))} at ${esc(p.x.toPrecision(4))}</title></circle>`;
      svg += `<text x="${sx(p.x) + 9}" y="${sy(p.y) + 4}" font-size="11">${esc(p.l)}</text>`;
    }
    document.getElementById("pareto-plot").innerHTML = svg + "</svg>";
    const dominated = Object.entries(front.dominated_by).map(([x, ys]) => `${esc(x)} (by ${esc(ys.join(", "))})`);
    document.getElementById("pareto-front").innerHTML = `Front: <b>${esc(front.front.join(" → ") || "—")}</b>`
      + (dominated.length ? `; dominated: ${dominated.join("; ")}` : "")
      + (front.unmeasured.length ? `; no costs: ${esc(front.unmeasured.join(", "))}` : "");
  }
  for (const id of ["pareto-metric", "pareto-type", "pareto-axis"]) document.getElementById(id).onchange = drawPareto;
  drawPareto();
})();
