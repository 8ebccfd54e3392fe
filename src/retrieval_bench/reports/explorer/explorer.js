// The report's explorer: renders the JSON embedded in the page (reports/explorer_data.py).
// Vanilla JS, no network. Deep links: #q=<query id>&type=<type>&route=<route>&verdict=<v>&text=<s>.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("explorer-data").textContent);
  const Q = D.queries, P = D.passages, S = D.systems, C = D.comparison, R = D.robustness;
  const LOWER = new Set(D.lower_is_better || []);
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const num = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(3));
  const opts = (values, all) =>
    (all ? `<option value="">${esc(all)}</option>` : "") +
    values.map((v) => `<option value="${esc(v)}">${esc(v)}</option>`).join("");
  const uniq = (xs) => Array.from(new Set(xs)).sort();

  // The stage every verdict is read at: the comparison's stage, else `final`, else the last.
  function verdictStage(sys) {
    if (C && sys.stages.includes(C.stage)) return C.stage;
    return sys.stages.includes("final") ? "final" : sys.stages[sys.stages.length - 1];
  }
  function value(sys, stage, metric, qi) {
    const col = ((sys.values[stage] || {})[metric]) || null;
    return col ? col[qi] : null;
  }
  const metricOf = (sys, base) => `${base}@${sys.top_k}`;

  // ---- header notes
  function notes() {
    const out = [];
    for (const j of D.meta.left_out) {
      out.push(`<div class="warn left-out">Left out: <code>${esc(j.path)}</code> (${esc(j.reason)})</div>`);
    }
    if (D.meta.text_note) out.push(`<div class="warn text-note">${esc(D.meta.text_note)}</div>`);
    if (D.meta.depth_note) out.push(`<div class="warn depth-note">${esc(D.meta.depth_note)}</div>`);
    $("notes").innerHTML = out.join("");
  }

  // ---- heatmap: the per-type win/loss table
  function colour(v, lower) {
    if (v === null || v === undefined || Number.isNaN(v)) return "#eee";
    const x = Math.max(0, Math.min(1, lower ? 1 - v : v));
    return `hsl(${Math.round(x * 120)}, 65%, ${Math.round(88 - 25 * x)}%)`;
  }
  function heatmap() {
    const sel = $("hm-metric");
    if (C) {
      sel.innerHTML = C.metrics.map((m) => `<option value="${esc(m.spec)}">${esc(m.heading)}</option>`).join("");
    } else {
      const names = uniq(S.flatMap((s) => Object.values(s.aggregates).flatMap((a) => Object.keys(a.overall)))).filter((n) => n !== "n");
      sel.innerHTML = opts(names);
      sel.value = names.includes(metricOf(S[0], "recall")) ? metricOf(S[0], "recall") : names[0];
    }
    sel.onchange = drawHeatmap;
    drawHeatmap();
  }
  function drawHeatmap() {
    const spec = $("hm-metric").value;
    let html = "";
    if (C) {
      const set = D.settings || {};
      const alpha = set.alpha === undefined ? 0.05 : set.alpha;
      const labels = C.configurations.map((c) => c.label);
      html += `<p class="note family">Significance: ${esc(set.test || "")}; family: <b>${esc(set.family || "")}</b> (${esc(set.family_scope || "")}), alpha ${alpha}. `
        + `Cell: mean, verdict; <span class="mark">*</span> the test against the best is significant after ${esc((set.correction || "holm").toUpperCase())}; ▲ best.</p>`;
      html += `<table class="hm"><tr><th class="l">type</th><th>n</th>${labels.map((l) => `<th>${esc(l)}</th>`).join("")}<th class="l">best</th></tr>`;
      for (const t of C.types) {
        const cell = C.cells[spec][t];
        html += `<tr data-type="${esc(t)}"><td class="l">${esc(t)}</td><td>${cell.n}</td>`;
        for (const l of labels) {
          const m = cell.means[l], verdict = cell.verdicts[l] || "", test = cell.tests[l];
          const sig = test && test.p_adjusted !== null && test.p_adjusted < alpha;
          const best = cell.best === l ? " ▲" : "";
          const title = test ? `vs ${test.against}: diff ${num(test.diff)}, p ${test.p_value}, adjusted ${test.p_adjusted}` : "";
          html += `<td class="v" style="background:${colour(m, LOWER.has(spec.split("@")[0]))}" title="${esc(title)}">${num(m)} ${esc(verdict)}${sig ? '<span class="mark">*</span>' : ""}${best}</td>`;
        }
        html += `<td class="l">${esc(((C.best[t] || {})[spec] || {}).text || "")}</td></tr>`;
      }
      html += "</table>";
    } else {
      const sys = S[0];
      const stages = Object.keys(sys.aggregates);
      const types = uniq(stages.flatMap((s) => Object.keys(sys.aggregates[s].by_type)));
      html += `<p class="note family">One job: its stages side by side per type, no significance test (a sweep, <code>python -m run -m ...</code>, tests its jobs against each other).</p>`;
      html += `<table class="hm"><tr><th class="l">type</th>${stages.map((s) => `<th>${esc(s)}</th>`).join("")}</tr>`;
      for (const t of [...types, "all"]) {
        html += `<tr data-type="${esc(t)}"><td class="l">${esc(t)}</td>`;
        for (const s of stages) {
          const agg = t === "all" ? sys.aggregates[s].overall : sys.aggregates[s].by_type[t] || {};
          const v = agg[spec];
          html += `<td class="v" style="background:${colour(v, LOWER.has(spec.split("@")[0]))}">${num(v)} <small>n=${agg.n === undefined ? "—" : agg.n}</small></td>`;
        }
        html += "</tr>";
      }
      html += "</table>";
    }
    $("heatmap").innerHTML = html;
  }

  // ---- robustness: arm x kind per type, each cell variant minus original (reports/robustness.py)
  const MARK = { degrades: "▼", improves: "▲", holds: "=", "no effect by construction (normalised before every arm)": "≡" };
  function diffColour(d, limit) {
    if (d === null || d === undefined) return "#eee";
    const x = Math.max(-1, Math.min(1, d / (limit || 1)));
    return x < 0 ? `hsl(0, 70%, ${Math.round(92 - 30 * -x)}%)` : `hsl(120, 55%, ${Math.round(92 - 30 * x)}%)`;
  }
  function robustness() {
    if (!R) return;
    $("sec-robustness").hidden = false;
    $("nav-robustness").hidden = false;
    $("rb-metric").innerHTML = opts(R.metrics);
    $("rb-type").innerHTML = opts(R.types);
    $("rb-type").value = R.types.includes("all") ? "all" : R.types[0];
    $("rb-metric").onchange = drawRobustness;
    $("rb-type").onchange = drawRobustness;
    drawRobustness();
  }
  function drawRobustness() {
    const metric = $("rb-metric").value, t = $("rb-type").value;
    const cells = (R.cells[metric] || {})[t] || {}, stable = R.stable[t] || {};
    const diffs = Object.values(cells).flatMap((byKind) => Object.values(byKind).map((c) => Math.abs(c.diff || 0)));
    const limit = Math.max(0.05, ...diffs);
    let html = `<p class="note family">Cell: mean ${esc(metric)} of the variants minus their originals on the queries with a variant of that kind; ▼ degrades / ▲ improves: significant in the paired sign-flip test after ${esc((R.correction || "holm").toUpperCase())} over the family <b>${esc(R.family)}</b>; = holds: not significant; ≡ no effect by construction (normalised before every arm): every variant is its original once normalised (NFKC, ASCII lowercase) and no value moved, not tested; stable@${R.k}: share of queries whose hit@${R.k} is unchanged.</p>`;
    html += `<table class="hm rb"><tr><th class="l">arm</th>${R.kinds.map((k) => `<th>${esc(k)}</th>`).join("")}</tr>`;
    for (const arm of R.arms) {
      html += `<tr data-arm="${esc(arm)}"><td class="l">${esc(arm)}</td>`;
      for (const kind of R.kinds) {
        const c = (cells[arm] || {})[kind], st = (stable[arm] || {})[kind];
        if (!c) { html += `<td class="v" data-kind="${esc(kind)}">—</td>`; continue; }
        const title = `original ${num(c.original)}, variant ${num(c.variant)}, n ${c.n}, p ${c.p_value}, adjusted ${c.p_adjusted}${c.note ? "; " + c.note : ""}`;
        html += `<td class="v" data-kind="${esc(kind)}" data-verdict="${esc(c.verdict)}" style="background:${diffColour(c.diff, limit)}" title="${esc(title)}">${c.diff === null ? "—" : (c.diff >= 0 ? "+" : "") + Number(c.diff).toFixed(3)} ${MARK[c.verdict] || "?"} ${esc(c.verdict || "no verdict")}<br><small>stable ${st ? Number(st.stable).toFixed(2) : "—"} · n ${c.n}</small></td>`;
      }
      html += "</tr>";
    }
    html += "</table>";
    const left = (R.counts || []).filter((c) => !c.variants).map((c) => c.kind);
    if (left.length) html += `<p class="note">Changed no query: ${left.map(esc).join(", ")}.</p>`;
    $("robustness").innerHTML = html;
  }

  // ---- per-stage table, and where labelled passages were lost
  function stageTables() {
    const types = uniq(S.flatMap((s) => Object.values(s.aggregates).flatMap((a) => Object.keys(a.by_type))));
    $("st-type").innerHTML = opts(types, "all (overall)");
    $("st-type").onchange = drawStageTables;
    drawStageTables();
  }
  function drawStageTables() {
    const t = $("st-type").value;
    let html = "";
    for (const sys of S) {
      html += `<h3>${esc(sys.label)}</h3><table class="stages" data-system="${esc(sys.label)}"><tr><th class="l">stage</th><th>n</th>${sys.metric_names.map((m) => `<th>${esc(m)}</th>`).join("")}</tr>`;
      for (const s of Object.keys(sys.aggregates)) {
        const agg = t ? sys.aggregates[s].by_type[t] || {} : sys.aggregates[s].overall;
        html += `<tr data-stage="${esc(s)}"><td class="l">${esc(s)}</td><td>${agg.n === undefined ? "—" : agg.n}</td>${sys.metric_names.map((m) => `<td>${num(agg[m])}</td>`).join("")}</tr>`;
      }
      html += "</table>";
      html += lostTable(sys, t);
    }
    $("stage-tables").innerHTML = html;
  }
  // Where each labelled relevant passage ends up, as metrics.json's stage_loss recorded it (the
  // page decides nothing itself): the checkpoint that lost it, "kept", or null for a query the
  // job did not score.
  function fate(sys, qi, pid) {
    const lost = sys.loss.per_query[qi];
    if (!lost) return null;
    const hit = lost.find(([p]) => p === pid);
    return hit ? hit[1] : "kept";
  }
  function fateText(stage) {
    if (stage === "kept") return "kept";
    return stage === "pool" ? "lost at pool (in no arm's candidate pool)" : `lost at ${stage}`;
  }
  function lostTable(sys, t) {
    const group = t ? sys.loss.by_type[t] : sys.loss.overall;
    if (!group || !group.labelled) return "";
    const rows = [...sys.loss.checkpoints, "kept"].map((k) =>
      `<tr data-stage="${esc(k)}"><td class="l">${esc(fateText(k))}</td><td>${group.lost_at[k] || 0}</td></tr>`);
    return `<table class="fates" data-system="${esc(sys.label)}"><tr><th class="l">labelled relevant passages (${group.labelled} in ${group.queries} queries)</th><th>count</th></tr>`
      + rows.join("") + "</table>";
  }

  // ---- plots
  function plots() {
    let html = "";
    for (const sys of S) {
      const names = Object.keys(sys.plots);
      if (!names.length) continue;
      html += `<h3>${esc(sys.label)}</h3>` + names.map((n) =>
        `<img class="plot" alt="${esc(n)}" title="${esc(n)}" src="data:image/png;base64,${sys.plots[n]}">`).join("");
    }
    $("plots").innerHTML = html || '<p class="note">No plots.</p>';
  }

  // ---- query explorer
  function verdict(qi) {
    if (Q.excluded[qi]) return `excluded: ${Q.excluded[qi]}`;
    const hits = [], recalls = [];
    for (const sys of S) {
      const st = verdictStage(sys);
      const h = value(sys, st, metricOf(sys, "hit"), qi);
      if (h !== null && h !== undefined) hits.push(h);
      const r = value(sys, st, metricOf(sys, "recall"), qi);
      if (r !== null && r !== undefined) recalls.push(r);
    }
    if (!hits.length) return "not scored";
    if (hits.some((h) => h > 0) && hits.some((h) => h === 0)) return "flip";
    if (hits.every((h) => h === 0)) return "missed";
    return recalls.length && recalls.every((r) => r >= 1) ? "found all" : "found some";
  }
  const VERDICTS = Q.ids.map((_, qi) => verdict(qi));
  function routes(qi) { return S.map((s) => s.route[qi]).filter((r) => r !== null && r !== undefined); }

  function explorer() {
    $("f-type").innerHTML = opts(uniq(Q.type), "any type");
    const allRoutes = uniq(Q.ids.flatMap((_, qi) => routes(qi)));
    $("f-route").innerHTML = opts(allRoutes, allRoutes.length ? "any route" : "no router");
    $("f-route").disabled = !allRoutes.length;
    $("f-verdict").innerHTML = opts(uniq(VERDICTS), "any verdict");
    for (const id of ["f-type", "f-route", "f-verdict"]) $(id).onchange = drawList;
    $("f-text").oninput = drawList;
    drawList();
  }
  function matching() {
    const t = $("f-type").value, r = $("f-route").value, v = $("f-verdict").value;
    const text = $("f-text").value.trim().toLowerCase();
    const out = [];
    for (let qi = 0; qi < Q.ids.length; qi++) {
      if (t && Q.type[qi] !== t) continue;
      if (r && !routes(qi).includes(r)) continue;
      if (v && VERDICTS[qi] !== v) continue;
      if (text && !(Q.text[qi].toLowerCase().includes(text) || Q.ids[qi].toLowerCase().includes(text))) continue;
      out.push(qi);
    }
    return out;
  }
  function drawList() {
    const rows = matching();
    let html = `<tr><th class="l">query</th><th class="l">type</th><th class="l">text</th>${S.map((s) => `<th>${esc(s.label)}<br><small>${esc(metricOf(s, "recall"))} ${esc(verdictStage(s))}</small></th>`).join("")}<th class="l">verdict</th></tr>`;
    for (const qi of rows) {
      const variant = variantOf(qi);
      html += `<tr data-qid="${esc(Q.ids[qi])}"${variant ? ` class="variant" data-variant-of="${esc(variant)}"` : ""}><td class="l">${variant ? "↳ " : ""}${esc(Q.ids[qi])}</td><td class="l">${esc(Q.type[qi])}${variant ? ` · ${esc(kindOf(qi))}` : ""}</td><td class="l">${esc(Q.text[qi])}</td>`
        + S.map((s) => `<td>${num(value(s, verdictStage(s), metricOf(s, "recall"), qi))}</td>`).join("")
        + `<td class="l">${esc(VERDICTS[qi])}</td></tr>`;
    }
    $("query-list").innerHTML = html;
    $("query-count").textContent = `${rows.length} of ${Q.ids.length} queries`;
  }
  const QI = new Map(Q.ids.map((q, i) => [q, i]));
  // A perturbed variant (listed right after its original): its original's id and its kind.
  function variantOf(qi) { return (Q.variant_of || [])[qi] || null; }
  function kindOf(qi) { return ((Q.perturbation || [])[qi] || {}).kind || ""; }
  function openQuery(qid) {
    const qi = QI.get(qid);
    if (qi === undefined) return;
    for (const tr of document.querySelectorAll("#query-list tr.open")) tr.classList.remove("open");
    const row = document.querySelector(`#query-list tr[data-qid="${CSS.escape(qid)}"]`);
    if (row) row.classList.add("open");
    const grades = new Map(Q.labels[qi]);
    let html = `<h3 data-qid="${esc(qid)}">${esc(qid)} · ${esc(Q.type[qi])} · ${esc(VERDICTS[qi])}</h3><p>${esc(Q.text[qi])}</p>`;
    const source = variantOf(qi);
    if (source) {
      const oi = QI.get(source), change = Q.perturbation[qi] || {};
      const stable = S.map((s) => value(s, verdictStage(s), `stable@${s.top_k}`, qi)).filter((v) => v !== null && v !== undefined);
      html += `<p class="note variant-of">Variant (<b>${esc(change.kind)}</b>, ${esc(change.library || "")}) of <a href="#q=${encodeURIComponent(source)}" data-original="${esc(source)}">${esc(source)}</a>: ${esc(oi === undefined ? "" : Q.text[oi])}${stable.length ? ` · stable@K ${stable.map(num).join(", ")}` : ""}</p>`;
    }
    const rel = Q.labels[qi].filter(([, g]) => g > 0);
    html += `<p class="note">Labelled relevant: ${rel.length ? rel.map(([p, g]) => `<span class="pid rel" data-pid="${p}">${esc(P.ids[p])}</span> (${g})`).join(", ") : "none"}. Click a passage id for its text.</p>`;
    html += '<div class="sides">';
    for (const sys of S) {
      html += `<div class="side" data-system="${esc(sys.label)}"><h3>${esc(sys.label)}</h3>`;
      if (sys.route[qi] !== null && sys.route[qi] !== undefined) html += `<p>route: <b>${esc(sys.route[qi])}</b></p>`;
      const fates = rel.map(([p]) => [p, fate(sys, qi, p)]).filter(([, f]) => f !== null);
      if (fates.length) {
        html += '<ul class="fates">' + fates.map(([p, f]) =>
          `<li class="${f === "kept" ? "kept" : "lost"}" data-pid="${p}" data-stage="${esc(f)}">${esc(P.ids[p])}: ${esc(fateText(f))}</li>`).join("") + "</ul>";
      }
      for (const s of sys.stages) {
        const ids = sys.rankings[s][qi];
        if (!ids) { html += `<div class="stage" data-stage="${esc(s)}"><b>${esc(s)}</b>: not run for this query</div>`; continue; }
        const scores = sys.scores[s][qi];
        const vals = sys.metric_names.map((m) => `${m} ${num(value(sys, s, m, qi))}`).join(", ");
        const total = sys.returned[s][qi];
        const shown = total > ids.length ? `; top ${ids.length} shown` : "";
        const item = (p, score, rank) => {
          const g = grades.get(p);
          const cls = g === undefined ? "" : g > 0 ? "rel" : "judged0";
          return `<li class="${cls}" value="${rank}"><span class="pid" data-pid="${p}">${esc(P.ids[p])}</span> ${num(score)}${g === undefined ? "" : g > 0 ? ` ✓ ${g}` : " ✗ judged"}</li>`;
        };
        const below = ((sys.deep[s] || [])[qi] || []).map(([rank, p, score]) => item(p, score, rank)).join("");
        html += `<div class="stage" data-stage="${esc(s)}"><b>${esc(s)}</b> <small>(${total} ids${shown}; ${esc(vals)})</small><ol>`
          + ids.map((p, i) => item(p, scores[i], i + 1)).join("")
          + (below ? `<li class="cut" value="${ids.length + 1}">… labelled passages below the cut:</li>${below}` : "")
          + "</ol></div>";
      }
      html += "</div>";
    }
    html += "</div>";
    $("query-detail").innerHTML = html;
  }
  // Passage text on demand: rendered only when its id is clicked, then toggled.
  function showText(el) {
    const host = el.parentElement.tagName === "LI" ? el.parentElement : null;
    const next = host ? host.querySelector(".ptext") : el.nextElementSibling;
    if (next && next.classList.contains("ptext")) { next.remove(); return; }
    const p = Number(el.dataset.pid);
    const text = P.text[p];
    const span = document.createElement("span");
    span.className = "ptext";
    if (text === null || text === undefined) span.textContent = "(text not at hand)";
    else span.textContent = P.full_chars[p] ? `${text}\n[truncated: showing ${text.length - 1} of ${P.full_chars[p]} characters]` : text;
    if (host) host.appendChild(span); else el.after(span);
  }

  // ---- flips between two chosen systems
  function flips() {
    const labels = S.map((s) => s.label);
    $("flip-a").innerHTML = opts(labels);
    $("flip-b").innerHTML = opts(labels);
    if (labels.length > 1) $("flip-b").value = labels[1];
    const bases = ["hit", "recall", "mrr", "ndcg"];
    $("flip-metric").innerHTML = opts(bases);
    for (const id of ["flip-a", "flip-b", "flip-metric"]) $(id).onchange = drawFlips;
    drawFlips();
  }
  function drawFlips() {
    const a = S[$("flip-a").selectedIndex], b = S[$("flip-b").selectedIndex], base = $("flip-metric").value;
    if (!a || !b || a === b) { $("flip-list").innerHTML = '<tr><td class="l">Choose two different systems.</td></tr>'; $("flip-count").textContent = ""; return; }
    const ma = metricOf(a, base), mb = metricOf(b, base);
    let html = `<tr><th class="l">query</th><th class="l">type</th><th class="l">text</th><th>${esc(a.label)} ${esc(ma)}</th><th>${esc(b.label)} ${esc(mb)}</th><th class="l">better</th></tr>`;
    let n = 0;
    for (let qi = 0; qi < Q.ids.length; qi++) {
      const va = value(a, verdictStage(a), ma, qi), vb = value(b, verdictStage(b), mb, qi);
      if (va === null || vb === null || va === undefined || vb === undefined || va === vb) continue;
      n++;
      html += `<tr data-qid="${esc(Q.ids[qi])}"><td class="l">${esc(Q.ids[qi])}</td><td class="l">${esc(Q.type[qi])}</td><td class="l">${esc(Q.text[qi])}</td><td>${num(va)}</td><td>${num(vb)}</td><td class="l">${esc((va > vb) !== LOWER.has(base) ? a.label : b.label)}</td></tr>`;
    }
    $("flip-list").innerHTML = html;
    $("flip-count").textContent = `${n} queries differ`;
  }

  // ---- wiring
  document.addEventListener("click", (ev) => {
    const pid = ev.target.closest(".pid");
    if (pid) { showText(pid); return; }
    const row = ev.target.closest("tr[data-qid]");
    if (row) { openQuery(row.dataset.qid); $("query-detail").scrollIntoView(); }
  });
  function fromHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    const set = (id, key) => { if (h.has(key)) $(id).value = h.get(key); };
    set("f-type", "type"); set("f-route", "route"); set("f-verdict", "verdict"); set("f-text", "text");
    drawList();
    if (h.has("q")) openQuery(h.get("q"));
  }
  notes();
  heatmap();
  robustness();
  stageTables();
  plots();
  explorer();
  flips();
  fromHash();
  window.addEventListener("hashchange", fromHash);
  document.body.dataset.ready = "true";
  window.explorerReadyMs = performance.now();
})();
