// The live dashboard: one self-contained page (no CDN, works offline) that polls /api/stats once
// a second and draws the numbers, small time-series charts, the upstream endpoints, admission
// (SLO shedding, refusals), canaries and tenants when configured, where TTFT goes (the proxy's
// phases and the engine's account) and the slowest recent requests.
#include "proxy/admin.hpp"

namespace tokentap::proxy::admin {

namespace {
constexpr std::string_view page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tokentap — live latency</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>
:root{--bg:#0f1419;--panel:#171e26;--line:#263241;--text:#d8e1ea;--dim:#8497a8;--a:#4fb3ff;--b:#ffb84f;--c:#ff5f7a;--d:#6fdc8c}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--text);font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif}
header{display:flex;align-items:baseline;gap:16px;padding:14px 20px;border-bottom:1px solid var(--line)}
h1{font-size:18px;margin:0}h2{font-size:13px;color:var(--dim);font-weight:600;margin:0 0 8px;text-transform:uppercase;letter-spacing:.04em}
#status{color:var(--dim)}main{padding:16px 20px;display:grid;gap:16px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .v{font-size:22px;font-variant-numeric:tabular-nums}.card .l{color:var(--dim);font-size:12px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}
.chart{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px}
canvas{width:100%;height:140px;display:block}.legend span{margin-right:12px;font-size:12px;color:var(--dim)}
code.cmd{cursor:pointer;font-size:12px;border-bottom:1px dashed var(--dim)}code.cmd.copied::after{content:" copied";color:var(--d)}.legend i{display:inline-block;width:10px;height:3px;margin-right:4px;vertical-align:middle}
table{width:100%;border-collapse:collapse;background:var(--panel);border:1px solid var(--line);border-radius:8px;font-variant-numeric:tabular-nums}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}th{color:var(--dim);font-weight:600;font-size:12px}
td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}.err{color:var(--c)}.ok{color:var(--d)}
footer{color:var(--dim);font-size:12px;padding:0 20px 16px}
</style></head><body>
<header><h1>tokentap</h1><span id="status">connecting…</span></header>
<main>
<section class="cards">
 <div class="card"><div class="v" id="req-rate">–</div><div class="l">requests / s (window)</div></div>
 <div class="card"><div class="v" id="err-rate">–</div><div class="l">error rate</div></div>
 <div class="card"><div class="v" id="active">–</div><div class="l">active streams</div></div>
 <div class="card"><div class="v" id="tok-rate">–</div><div class="l">output tokens / s</div></div>
 <div class="card"><div class="v" id="ttft-p50">–</div><div class="l">TTFT p50 (ms)</div></div>
 <div class="card"><div class="v" id="ttft-p95">–</div><div class="l">TTFT p95 (ms) · <span id="ttft-n">–</span> requests</div></div>
 <div class="card"><div class="v" id="ttft-p99">–</div><div class="l">TTFT p99 (ms)</div></div>
 <div class="card"><div class="v" id="answer-p50">–</div><div class="l">answer TTFT p50 (ms)</div></div>
 <div class="card"><div class="v" id="itl">–</div><div class="l">inter-token p50 / p95 / p99 (ms)</div></div>
 <div class="card"><div class="v" id="e2e">–</div><div class="l">end-to-end p50 / p95 / p99 (ms)</div></div>
 <div class="card"><div class="v" id="overhead-p99">–</div><div class="l">proxy overhead p99 (ms)</div></div>
 <div class="card"><div class="v" id="cache-hit">–</div><div class="l">cache hit (cached / input tokens)</div></div>
</section>
<section class="charts">
 <div class="chart"><h2>Time to first token (ms, trailing <span id="span-s">10</span> s · <span id="span-n">–</span> requests)</h2><canvas id="c-ttft"></canvas>
  <div class="legend"><span><i style="background:var(--a)"></i>p50</span><span><i style="background:var(--b)"></i>p95</span><span><i style="background:var(--c)"></i>p99</span></div></div>
 <div class="chart"><h2>Requests and errors per second</h2><canvas id="c-req"></canvas>
  <div class="legend"><span><i style="background:var(--a)"></i>requests</span><span><i style="background:var(--c)"></i>errors</span></div></div>
 <div class="chart"><h2>Output tokens per second</h2><canvas id="c-tok"></canvas>
  <div class="legend"><span><i style="background:var(--d)"></i>tokens</span></div></div>
 <div class="chart"><h2>Inter-token latency (ms)</h2><canvas id="c-itl"></canvas>
  <div class="legend"><span><i style="background:var(--a)"></i>p50</span><span><i style="background:var(--b)"></i>p95</span><span><i style="background:var(--c)"></i>p99</span></div></div>
</section>
<section><h2>Prompt-cache events (sliding window) — why the cache missed</h2>
<div class="cards" id="cache-events"></div></section>
<section><h2>By route and model (sliding window)</h2>
<table id="series"><thead><tr><th>route</th><th>model</th><th>req/s</th><th>errors</th><th>active</th><th>TTFT p50</th><th>p95</th><th>p99</th><th>answer p50</th><th>ITL p50</th><th>p95</th><th>p99</th><th>e2e p50</th><th>p95</th><th>p99</th><th>tok/s</th><th>cache hit (tokens)</th><th>hit requests</th></tr></thead><tbody></tbody></table></section>
<section><h2>Where TTFT goes (sliding window) — mean of each phase, by route and model</h2>
<table id="ttft-phases"><thead><tr><th>route</th><th>model</th><th>requests</th><th>TTFT mean (ms)</th><th style="text-align:left">phases</th><th style="text-align:left">ms</th></tr></thead><tbody></tbody></table>
<div class="legend" id="phase-legend" style="margin-top:6px"></div></section>
<section><h2>Upstream endpoints (sliding window) — where requests went and why</h2>
<table id="endpoints"><thead><tr><th>upstream</th><th>endpoint</th><th>state</th><th>req/s</th><th>active</th><th>errors</th><th>cache hit (tokens)</th><th>TTFT p50</th><th>p99</th><th title="the engine's own TTFT, from its histogram (engine_metrics)">engine TTFT p50 / p99</th><th title="the proxy's TTFT less the engine's: network, the engine's HTTP front end, the proxy">between p50 / p99</th><th>engine running / queued</th><th>engine KV use</th><th>routed by</th></tr></thead><tbody></tbody></table></section>
<section id="admission-section" hidden><h2>Admission — SLO shedding and refusals</h2>
<table id="shedding"><thead><tr><th>route</th><th>state</th><th>TTFT p95 (window)</th><th>SLO</th><th>measured</th><th>drops</th><th>for</th><th>shed</th><th>rerouted</th></tr></thead><tbody></tbody></table>
<table id="admission-rules"><thead><tr><th>rule</th><th>refused: concurrency</th><th>requests/min</th><th>tokens/min</th></tr></thead><tbody></tbody></table></section>
<section id="canary-section" hidden><h2>Canaries — share, gates and verdict (current step)</h2>
<table id="canaries"><thead><tr><th>route</th><th>canary</th><th>state</th><th>share</th><th>step</th><th>requests canary / baseline</th><th>errors</th><th>truncated</th><th>TTFT p99</th><th>ITL p99</th><th style="text-align:left">why</th></tr></thead><tbody></tbody></table></section>
<section id="tenants-section" hidden><h2>Tenants (sliding window)</h2>
<table id="tenants"><thead><tr><th>tenant</th><th>req/s</th><th>requests</th><th>refused</th><th>errors</th><th>input tokens</th><th>output tokens</th><th>TTFT p50</th><th>p95</th></tr></thead><tbody></tbody></table></section>
<section><h2>Slowest recent requests</h2>
<table id="slowest"><thead><tr><th>route</th><th>model</th><th>provider</th><th>status</th><th>outcome</th><th>TTFT</th><th>answer TTFT</th><th>e2e (ms)</th><th>tokens</th><th>cache</th><th>reasoning steps over time</th><th>trace record</th></tr></thead><tbody></tbody></table>
<div class="legend" style="margin-top:6px"><span><i style="background:#4fb3ff"></i>step</span><span><i style="background:#6fdc8c"></i>conclusion</span><span><i style="background:#ffb84f"></i>verification</span><span><i style="background:#ff5f7a"></i>backtrack</span><span><i style="background:#8497a8"></i>other</span><span>hatched: redundant</span></div></section>
</main>
<footer>Quantiles from a log-bucketed sketch (relative error ≤ <span id="qerr">2</span> %) over the last <span id="win">60</span> s. Raw metrics: <a href="/metrics" style="color:var(--a)">/metrics</a> · <a href="/api/stats" style="color:var(--a)">/api/stats</a></footer>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const fmt = (v, d = 0) => (v === null || v === undefined || v < 0) ? "–" : Number(v).toFixed(d);
const signed = (v) => (v === null || v === undefined) ? "–" : (v >= 0 ? "+" : "") + Number(v).toFixed(0);
const pct = (v) => (v === null || v === undefined) ? "–" : (100 * v).toFixed(1) + " %";
function esc(s) { return String(s).replace(/[&<>"']/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c])); }
function draw(id, series) {
  const c = $(id), dpr = window.devicePixelRatio || 1, w = c.clientWidth, h = c.clientHeight;
  c.width = w * dpr; c.height = h * dpr;
  const g = c.getContext("2d"); g.scale(dpr, dpr); g.clearRect(0, 0, w, h);
  let max = 0; for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  max = max > 0 ? max * 1.1 : 1;
  g.strokeStyle = "#263241"; g.fillStyle = "#8497a8"; g.font = "11px system-ui"; g.lineWidth = 1;
  for (let i = 0; i <= 2; i++) { const y = h - 14 - (h - 24) * i / 2; g.beginPath(); g.moveTo(30, y); g.lineTo(w, y); g.stroke(); g.fillText((max * i / 2).toFixed(max < 10 ? 1 : 0), 0, y + 4); }
  for (const s of series) {
    g.strokeStyle = getComputedStyle(document.body).getPropertyValue(s.color); g.lineWidth = 1.8; g.beginPath();
    let started = false;
    s.values.forEach((v, i) => {
      if (v === null || v < 0) { started = false; return; }
      const x = 30 + (w - 32) * i / Math.max(1, s.values.length - 1), y = h - 14 - (h - 24) * v / max;
      if (started) g.lineTo(x, y); else { g.moveTo(x, y); started = true; }
    });
    g.stroke();
  }
}
const stepColor = {step: "#4fb3ff", conclusion: "#6fdc8c", verification: "#ffb84f", backtrack: "#ff5f7a", other: "#8497a8"};
// A request's reasoning steps as coloured spans on its own time axis (0 .. end to end).
function timeline(r) {
  const steps = r.steps || [];
  if (!steps.length || !(r.e2e_ms > 0)) return "";
  const w = 240, h = 14;
  const spans = steps.map((s) => {
    const x = w * s.start_ms / r.e2e_ms, x2 = w * s.end_ms / r.e2e_ms;
    return `<rect x="${x.toFixed(1)}" y="1" width="${Math.max(1, x2 - x).toFixed(1)}" height="${h - 2}" fill="${stepColor[s.kind] || "#888"}"${s.redundant ? ' fill-opacity="0.45" stroke="#fff" stroke-dasharray="2 2"' : ""}><title>${esc(s.kind)} ${s.start_ms.toFixed(0)}–${s.end_ms.toFixed(0)} ms${s.redundant ? " (redundant)" : ""}</title></rect>`;
  }).join("");
  return `<svg class="steps" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><rect width="${w}" height="${h}" fill="#0f1419"/>${spans}</svg>`;
}
// Where TTFT goes: the proxy's phases before the first token; with the engine's account (every
// request of the row had one), the wait for the first token split into the engine's queue, its
// prefill and the rest (network, its HTTP front end).
const phaseColor = {proxy: "#d8e1ea", fault: "#ff5f7a", failed_attempts: "#c45fff", connect: "#8497a8", upstream_head: "#4fb3ff", first_token: "#6fdc8c", engine_queue: "#ffb84f", engine_prefill: "#2f6fd6", unexplained: "#a8e6bb"};
const phaseLabel = {proxy: "tokentap", fault: "injected fault", failed_attempts: "failed attempts", connect: "connect", upstream_head: "to response head", first_token: "head to first token", engine_queue: "engine queue", engine_prefill: "engine prefill", unexplained: "network + engine front end"};
function ttftPhases(p) {
  const ours = ["proxy", "fault", "failed_attempts", "connect"];
  const engine = p.engine_n > 0 && p.engine_n === p.n;
  const names = ours.concat(engine ? ["engine_queue", "engine_prefill", "unexplained"] : ["upstream_head", "first_token"]);
  const parts = names.map((k) => [k, Math.max(0, p[k] || 0)]);
  const total = parts.reduce((t, [, v]) => t + v, 0);
  return {total, parts};
}
function phaseBar(ph) {
  const w = 320, h = 14;
  if (!(ph.total > 0)) return "";
  let x = 0;
  const rects = ph.parts.map(([k, v]) => { const pw = w * v / ph.total, r = `<rect x="${x.toFixed(1)}" y="1" width="${pw.toFixed(1)}" height="${h - 2}" fill="${phaseColor[k]}"><title>${esc(phaseLabel[k])}: ${v.toFixed(2)} ms</title></rect>`; x += pw; return r; }).join("");
  return `<svg class="phases" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><rect width="${w}" height="${h}" fill="#0f1419"/>${rects}</svg>`;
}
// An endpoint's state, with when an ejection ends (or ended, within the last minutes).
function state(e) {
  const t = e.ejection_ends_in_s;
  if (!e.healthy && e.probe_failing) return "failing its probe";
  if (!e.healthy) return t > 0 ? `ejected · back in ${Math.ceil(t)} s` : "ejected";
  return t !== null && t > -300 ? `healthy · back ${Math.round(-t)} s ago` : "healthy";
}
// A shell word: as it is when safe, else single-quoted.
function shq(s) { return /^[\w@%+=:,./-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }
// Copies a slowest request's command (works on plain http, where navigator.clipboard is absent).
function copyText(el) {
  const t = document.createElement("textarea");
  t.value = el.dataset.cmd; document.body.appendChild(t); t.select();
  try { document.execCommand("copy"); el.classList.add("copied"); } catch (e) {}
  t.remove();
  setTimeout(() => el.classList.remove("copied"), 1200);
}
function render(d) {
  const a = d.all;
  $("req-rate").textContent = fmt(a.request_rate, 2);
  $("err-rate").textContent = pct(a.error_rate);
  $("err-rate").className = "v " + (a.error_rate > 0.05 ? "err" : "ok");
  $("active").textContent = a.active;
  $("tok-rate").textContent = fmt(a.tokens_per_s, 0);
  $("ttft-p50").textContent = fmt(a.ttft_ms.p50);
  $("ttft-p95").textContent = fmt(a.ttft_ms.p95);
  $("ttft-p99").textContent = fmt(a.ttft_ms.p99);
  $("answer-p50").textContent = fmt(a.ttft_answer_ms.p50);
  $("ttft-n").textContent = a.ttft_ms.n;
  $("itl").textContent = [a.itl_ms.p50, a.itl_ms.p95, a.itl_ms.p99].map((x) => fmt(x, 1)).join(" / ");
  $("e2e").textContent = [a.e2e_ms.p50, a.e2e_ms.p95, a.e2e_ms.p99].map((x) => fmt(x)).join(" / ");
  $("overhead-p99").textContent = fmt(a.overhead_ms.p99, 3);
  $("cache-hit").textContent = pct(a.cache_hit_ratio);
  $("win").textContent = d.window_s; $("qerr").textContent = (100 * d.quantile_relative_error).toFixed(0);
  const t = d.timeline;
  draw("c-ttft", [{color: "--a", values: t.map((x) => x.ttft_p50)}, {color: "--b", values: t.map((x) => x.ttft_p95)}, {color: "--c", values: t.map((x) => x.ttft_p99)}]);
  draw("c-req", [{color: "--a", values: t.map((x) => x.requests)}, {color: "--c", values: t.map((x) => x.errors)}]);
  draw("c-tok", [{color: "--d", values: t.map((x) => x.tokens)}]);
  draw("c-itl", [{color: "--a", values: t.map((x) => x.itl_p50)}, {color: "--b", values: t.map((x) => x.itl_p95)}, {color: "--c", values: t.map((x) => x.itl_p99)}]);
  $("span-s").textContent = d.chart_span_s; $("span-n").textContent = t.length ? t[t.length - 1].ttft_n : 0;
  $("series").tBodies[0].innerHTML = d.series.map((s) => { const w = s.window; return `<tr><td>${esc(s.route)}</td><td>${esc(s.model)}</td><td>${fmt(w.request_rate, 2)}</td><td class="${w.errors ? "err" : ""}">${w.errors}</td><td>${w.active}</td><td>${fmt(w.ttft_ms.p50)}</td><td>${fmt(w.ttft_ms.p95)}</td><td>${fmt(w.ttft_ms.p99)}</td><td>${fmt(w.ttft_answer_ms.p50)}</td><td>${fmt(w.itl_ms.p50, 1)}</td><td>${fmt(w.itl_ms.p95, 1)}</td><td>${fmt(w.itl_ms.p99, 1)}</td><td>${fmt(w.e2e_ms.p50)}</td><td>${fmt(w.e2e_ms.p95)}</td><td>${fmt(w.e2e_ms.p99)}</td><td>${fmt(w.tokens_per_s, 0)}</td><td>${pct(w.cache_hit_ratio)}</td><td>${pct(w.cache_hit_requests_share)}</td></tr>`; }).join("");
  const phased = d.series.filter((s) => s.window.ttft_phases_ms && s.window.ttft_phases_ms.n > 0);
  $("ttft-phases").tBodies[0].innerHTML = phased.map((s) => { const p = s.window.ttft_phases_ms, ph = ttftPhases(p); return `<tr><td>${esc(s.route)}</td><td>${esc(s.model)}</td><td>${p.n}</td><td>${fmt(ph.total, 1)}</td><td style="text-align:left">${phaseBar(ph)}</td><td style="text-align:left">${ph.parts.filter(([, v]) => v > 0).map(([k, v]) => `${esc(phaseLabel[k])} ${v.toFixed(v < 10 ? 2 : 0)}`).join(" · ")}</td></tr>`; }).join("");
  $("phase-legend").innerHTML = Object.keys(phaseLabel).map((k) => `<span><i style="background:${phaseColor[k]}"></i>${esc(phaseLabel[k])}</span>`).join("");
  $("endpoints").tBodies[0].innerHTML = (d.endpoints || []).map((e) => `<tr><td>${esc(e.upstream)}</td><td>${esc(e.endpoint)}</td><td class="${e.healthy ? "ok" : "err"}">${state(e)}</td><td>${fmt(e.request_rate, 2)}</td><td>${e.active}</td><td class="${e.errors ? "err" : ""}">${e.errors}</td><td>${pct(e.hit_ratio)}</td><td>${fmt(e.ttft_ms.p50)}</td><td>${fmt(e.ttft_ms.p99)}</td><td>${e.engine_ttft_ms ? fmt(e.engine_ttft_ms.p50) + " / " + fmt(e.engine_ttft_ms.p99) : "–"}</td><td>${e.ttft_gap_ms ? signed(e.ttft_gap_ms.p50) + " / " + signed(e.ttft_gap_ms.p99) : "–"}</td><td>${e.engine_running === null || e.engine_running === undefined ? "–" : fmt(e.engine_running) + " / " + fmt(e.engine_waiting)}</td><td>${pct(e.engine_kv_usage)}</td><td style="text-align:left">${Object.entries(e.reasons).map(([k, v]) => `${esc(k)} ${v}`).join(" · ")}</td></tr>`).join("");
  const adm = d.admission;
  $("admission-section").hidden = !adm;
  if (adm) {
    $("shedding").tBodies[0].innerHTML = adm.shedding.map((x) => `<tr><td>${esc(x.route)}</td><td class="${x.active ? "err" : "ok"}">${x.active ? "SHEDDING" : "within SLO"}</td><td class="${x.ttft_p95_ms > x.slo_ms ? "err" : ""}">${fmt(x.ttft_p95_ms)}</td><td>${fmt(x.slo_ms)}</td><td>${x.samples} / ${x.min_requests}</td><td>${x.drop.map(esc).join(", ")}</td><td>${x.since_s} s</td><td class="${x.shed ? "err" : ""}">${x.shed}</td><td>${x.reroute ? x.rerouted + " → " + esc(x.reroute) : "–"}</td></tr>`).join("");
    $("admission-rules").tBodies[0].innerHTML = adm.rules.map((x) => `<tr><td>${esc(x.rule)}</td><td>${x.concurrency}</td><td>${x.requests}</td><td>${x.tokens}</td></tr>`).join("");
  }
  $("canary-section").hidden = !d.canaries;
  if (d.canaries) $("canaries").tBodies[0].innerHTML = d.canaries.map((x) => { const c = x.canary, b = x.baseline, bad = x.phase === "rolled_back"; return `<tr><td>${esc(x.route)}</td><td>${esc(x.upstream)}</td><td class="${bad ? "err" : "ok"}">${bad ? "ROLLED BACK (" + esc(x.reason) + ")" : esc(x.phase.replace("_", " "))}</td><td>${fmt(x.weight, 1)} %</td><td>${x.step} / ${x.steps} · ${x.step_age_s} / ${x.interval_s} s</td><td>${c.requests} / ${b.requests} (min ${x.min_requests})</td><td>${pct(c.error_rate)} / ${pct(b.error_rate)}</td><td>${pct(c.truncated_rate)} / ${pct(b.truncated_rate)}</td><td>${fmt(c.ttft_ms.p99)} / ${fmt(b.ttft_ms.p99)}</td><td>${fmt(c.itl_ms.p99, 1)} / ${fmt(b.itl_ms.p99, 1)}</td><td style="text-align:left">${esc(x.evidence)}</td></tr>`; }).join("");
  $("tenants-section").hidden = !d.tenants;
  if (d.tenants) $("tenants").tBodies[0].innerHTML = d.tenants.map((x) => `<tr><td>${esc(x.tenant)}</td><td>${fmt(x.request_rate, 2)}</td><td>${x.requests}</td><td class="${x.rejected ? "err" : ""}">${x.rejected}</td><td class="${x.errors ? "err" : ""}">${x.errors}</td><td>${x.input_tokens}</td><td>${x.output_tokens}</td><td>${fmt(x.ttft_ms.p50)}</td><td>${fmt(x.ttft_ms.p95)}</td></tr>`).join("");
  $("slowest").tBodies[0].innerHTML = d.slowest.map((r) => `<tr><td>${esc(r.route)}</td><td>${esc(r.model)}</td><td>${esc(r.provider)}</td><td class="${r.status >= 400 ? "err" : ""}">${r.status}</td><td class="${r.outcome === "ok" ? "" : "err"}">${esc(r.outcome)}</td><td>${fmt(r.ttft_ms)}</td><td>${fmt(r.ttft_answer_ms)}</td><td>${fmt(r.e2e_ms)}</td><td>${r.output_tokens ?? "–"}</td><td>${esc(r.cache)}</td><td style="text-align:left">${timeline(r)}</td><td style="text-align:left">${r.trace_id && d.trace_dir ? `<code class="cmd" data-cmd="${esc(`tokentap analyze ${shq(d.trace_dir)} --id ${r.trace_id}`)}" title="click: copy the command that shows this exchange" onclick="copyText(this)">${esc(r.trace_id)}</code>` : esc(r.trace_id || "–")}</td></tr>`).join("");
  const ev = a.cache_events || {};
  const order = ["hit", "partial", "miss", "write", "prefix_divergence", "truncation", "unexpected_miss", "expired", "prefill_anomaly", "repeated_miss"];
  $("cache-events").innerHTML = order.map((k) => `<div class="card"><div class="v${["hit","partial","miss","write"].includes(k) || !ev[k] ? "" : " err"}" id="cache-${k}">${ev[k] || 0}</div><div class="l">${k.replace(/_/g, " ")}</div></div>`).join("");
  $("status").textContent = "live · updated " + new Date().toLocaleTimeString() + " · " + a.requests + " requests in window";
}
async function tick() {
  try {
    const r = await fetch("/api/stats", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
  } catch (e) { $("status").textContent = "disconnected (" + e.message + "), retrying…"; }
  setTimeout(tick, 1000);
}
tick();
</script></body></html>
)HTML";
}  // namespace

std::string_view dashboard_html() noexcept {
  return page;
}

}  // namespace tokentap::proxy::admin
