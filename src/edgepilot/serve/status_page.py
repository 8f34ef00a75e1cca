"""The live status page at `/`: a static page whose script polls /status.json every two seconds.

No data is in the page itself (it is public); /status.json needs the API key when the server has one: the
page asks for it (or takes `#key=...`, which stays in the browser) and keeps it for the tab's session.
Values go in with textContent only, and the CSP allows scripts from this server alone.
"""

from __future__ import annotations

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>edgepilot serve</title>
<link rel="stylesheet" href="/status.css">
<script src="/status.js" defer></script>
</head>
<body>
<header>
  <h1>edgepilot serve</h1>
  <span id="phase" class="badge">connecting</span>
  <span id="model" class="dim"></span>
</header>
<form id="keyform" hidden>
  <label>API key <input id="keyinput" type="password" autocomplete="off"></label>
  <button type="submit">Show status</button>
</form>
<main>
  <section class="card">
    <h2>Speed</h2>
    <div class="big"><span id="gen_tps">–</span> <small>tokens/s</small></div>
    <dl>
      <dt>average generation</dt><dd id="avg_tps">–</dd>
      <dt>last prompt</dt><dd id="prompt_tps">–</dd>
      <dt>tokens generated</dt><dd id="gen_tokens">–</dd>
      <dt>prompt tokens from cache</dt><dd id="cached_tokens">–</dd>
      <dt id="spec_label" hidden>drafts kept · tokens/step</dt><dd id="spec" hidden>–</dd>
    </dl>
    <canvas id="tps_chart" width="300" height="48"></canvas>
  </section>
  <section class="card">
    <h2>Memory</h2>
    <div class="big"><span id="available">–</span> <small>available</small></div>
    <div class="bar"><div id="mem_bar"></div></div>
    <dl>
      <dt>pressure (PSI avg10)</dt><dd id="psi">–</dd>
      <dt>model server now</dt><dd id="worker_rss">–</dd>
      <dt>model server peak</dt><dd id="worker_peak">–</dd>
      <dt>planned peak</dt><dd id="planned">–</dd>
      <dt>new requests</dt><dd id="gate">–</dd>
    </dl>
  </section>
  <section class="card">
    <h2>Temperature</h2>
    <div class="big"><span id="temp">–</span></div>
    <dl><dt>sensor</dt><dd id="zone">–</dd></dl>
  </section>
  <section class="card">
    <h2>Requests</h2>
    <dl>
      <dt>answered</dt><dd id="ok">–</dd>
      <dt>generating · waiting</dt><dd id="queue">–</dd>
      <dt>503: busy · memory · restart</dt><dd id="rejected">–</dd>
      <dt>401: wrong or no key</dt><dd id="unauthorized">–</dd>
      <dt>errors: client · server</dt><dd id="errors">–</dd>
    </dl>
  </section>
  <section class="card wide">
    <h2>Model server</h2>
    <dl>
      <dt>context</dt><dd id="ctx">–</dd>
      <dt>threads · KV cache</dt><dd id="threads">–</dd>
      <dt>process</dt><dd id="pid">–</dd>
      <dt>uptime · restarts</dt><dd id="uptime">–</dd>
      <dt>kill class · oom_score_adj</dt><dd id="background">–</dd>
    </dl>
    <p id="background_note" class="death" hidden></p>
    <p id="death" class="death" hidden></p>
  </section>
</main>
<footer class="dim">Updated every 2 s · OpenAI-compatible API at <code>/v1</code></footer>
</body>
</html>
"""

CSS = """
:root { color-scheme: light dark; --bg:#f6f7f9; --card:#fff; --fg:#1b1f24; --dim:#6a737d; --ok:#1a7f37;
  --warn:#bf8700; --bad:#cf222e; --bar:#0969da; }
@media (prefers-color-scheme: dark) { :root { --bg:#0d1117; --card:#161b22; --fg:#e6edf3; --dim:#8b949e;
  --bar:#2f81f7; } }
* { box-sizing: border-box; }
body { margin:0; padding:16px; font:15px/1.4 system-ui, sans-serif; background:var(--bg); color:var(--fg); }
header { display:flex; gap:12px; align-items:baseline; flex-wrap:wrap; margin-bottom:12px; }
h1 { font-size:20px; margin:0; }
h2 { font-size:13px; text-transform:uppercase; letter-spacing:.05em; color:var(--dim); margin:0 0 8px; }
main { display:grid; grid-template-columns:repeat(auto-fit, minmax(240px, 1fr)); gap:12px; }
.card { background:var(--card); border-radius:10px; padding:14px; box-shadow:0 1px 3px rgba(0,0,0,.12); }
.wide { grid-column:1 / -1; }
.big { font-size:30px; font-weight:600; margin-bottom:6px; }
.big small { font-size:13px; font-weight:400; color:var(--dim); }
dl { display:grid; grid-template-columns:1fr auto; gap:2px 12px; margin:0; }
dt { color:var(--dim); }
dd { margin:0; text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.badge { padding:2px 10px; border-radius:999px; font-weight:600; background:var(--dim); color:#fff; }
.badge.ready { background:var(--ok); } .badge.starting, .badge.restarting { background:var(--warn); }
.badge.failed, .badge.unreachable { background:var(--bad); }
.bar { height:8px; background:rgba(127,127,127,.25); border-radius:4px; overflow:hidden; margin:4px 0 8px; }
.bar div { height:100%; width:0; background:var(--bar); }
.bar div.hot { background:var(--bad); }
.dim { color:var(--dim); }
.death { margin:10px 0 0; padding:8px; border-left:3px solid var(--bad); background:rgba(207,34,46,.08); }
canvas { width:100%; height:48px; margin-top:8px; }
form { margin:0 0 12px; } footer { margin-top:14px; font-size:13px; }
"""

JS = r"""
"use strict";
const $ = (id) => document.getElementById(id);
const history_tps = [];
function mib(n) {
  if (n === null || n === undefined) return "–";
  return n >= 1073741824 ? (n / 1073741824).toFixed(2) + " GiB" : (n / 1048576).toFixed(0) + " MiB";
}
function num(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }
function set(id, text) { $(id).textContent = text; }
function apiKey() {
  const m = location.hash.match(/key=([^&]+)/);
  if (m) {
    sessionStorage.setItem("edgepilot-key", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname);
  }
  return sessionStorage.getItem("edgepilot-key");
}
function duration(s) {
  if (s < 60) return s.toFixed(0) + " s";
  if (s < 3600) return (s / 60).toFixed(0) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function chart() {
  const c = $("tps_chart"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const vals = history_tps.filter((v) => v !== null);
  if (vals.length < 2) return;
  const max = Math.max(...vals) * 1.1 || 1;
  g.strokeStyle = getComputedStyle(document.documentElement).getPropertyValue("--bar");
  g.lineWidth = 2;
  g.beginPath();
  history_tps.forEach((v, i) => {
    const x = (i / Math.max(1, history_tps.length - 1)) * c.width, y = c.height - ((v || 0) / max) * c.height;
    i ? g.lineTo(x, y) : g.moveTo(x, y);
  });
  g.stroke();
}
function render(s) {
  const phase = $("phase");
  phase.textContent = s.phase;
  phase.className = "badge " + s.phase;
  const w = s.worker || {}, st = w.settings || {}, e = s.engine || {};
  const p = s.pressure || {}, r = s.requests || {};
  set("model", s.model);
  set("gen_tps", num(e.last_gen_tps, 1));
  set("avg_tps", e.avg_gen_tps == null ? "–" : num(e.avg_gen_tps, 1) + " t/s");
  set("prompt_tps", e.last_prompt_tps == null ? "–" : num(e.last_prompt_tps, 1) + " t/s");
  set("gen_tokens", e.gen_tokens ?? "–");
  const last_cached = e.last_cached_tokens == null ? "" : " (last " + e.last_cached_tokens + ")";
  const cached = e.cached_tokens + " of " + e.prompt_tokens + last_cached;
  set("cached_tokens", e.cached_tokens == null ? "–" : cached);
  const sp = s.speculation;
  $("spec_label").hidden = $("spec").hidden = !sp;
  if (sp) {
    const rate = sp.acceptance_rate == null ? "" : " (" + Math.round(sp.acceptance_rate * 100) + " %)";
    set("spec_label", sp.kind + ": drafts kept · tokens/step");
    set("spec", sp.accepted + "/" + sp.drafted + rate + " · " + num(sp.tokens_per_step, 2));
  }
  history_tps.push(e.last_gen_tps ?? null);
  if (history_tps.length > 60) history_tps.shift();
  chart();
  set("available", mib(p.available_bytes));
  const used = p.total_bytes && p.available_bytes != null ? 1 - p.available_bytes / p.total_bytes : 0;
  $("mem_bar").style.width = (used * 100).toFixed(1) + "%";
  $("mem_bar").className = p.gated ? "hot" : "";
  set("psi", p.psi_some_avg10 == null ? "unknown" : num(p.psi_some_avg10, 1) + " %");
  set("worker_rss", mib(s.worker_rss_bytes));
  set("worker_peak", mib(s.worker_peak_rss_bytes));
  set("planned", mib(s.predicted_peak_bytes));
  set("gate", p.gated ? "paused: " + (p.reason || "memory pressure") : "accepted");
  set("temp", p.celsius == null ? "unknown" : num(p.celsius, 1) + " °C");
  set("zone", p.zone || "–");
  set("ok", r.ok || 0);
  set("queue", (r.in_flight || 0) + " · " + (r.waiting || 0) + " of " + s.max_queue);
  set("rejected", (r.busy || 0) + " · " + (r.pressure || 0) + " · " + (r.restarting || 0));
  set("unauthorized", r.unauthorized || 0);
  set("errors", (r.client_errors || 0) + " · " + (r.server_errors || 0));
  set("ctx", w.n_ctx ? w.n_ctx + " tokens" : "–");
  set("threads", (st.n_threads || "–") + " · " + (st.type_k || "–") + "/" + (st.type_v || "–"));
  set("pid", w.pid ? "pid " + w.pid : "–");
  set("uptime", duration(s.uptime_seconds || 0) + " · " + s.restarts);
  const b = s.background || {};
  set("background", b.class == null ? "–" : b.class + " · " + (b.oom_score_adj ?? "unknown"));
  $("background_note").hidden = !b.warning;
  if (b.warning) set("background_note", b.warning);
  const d = (s.deaths || []).slice(-1)[0];
  $("death").hidden = !d;
  if (d) {
    const how = d.signal_name || "exit " + d.exit_code;
    set("death", "Last restart: " + how + " — " + d.cause + ": " + d.title + ". " + d.action);
  }
}
async function tick() {
  const headers = {};
  const k = apiKey();
  if (k) headers["Authorization"] = "Bearer " + k;
  try {
    const res = await fetch("/status.json", { headers, cache: "no-store" });
    if (res.status === 401) {
      $("keyform").hidden = false;
      set("phase", "API key needed");
      return;
    }
    $("keyform").hidden = true;
    render(await res.json());
  } catch (err) {
    $("phase").className = "badge unreachable";
    set("phase", "unreachable");
  }
}
$("keyform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("edgepilot-key", $("keyinput").value.trim());
  tick();
});
tick();
setInterval(tick, 2000);
"""
