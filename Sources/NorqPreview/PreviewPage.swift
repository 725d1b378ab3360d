/// The page `norq preview` serves: plain HTML, CSS and JavaScript in one string (no build step, no Node). The
/// script is thin: it asks `/api/templates` and `/api/render` and draws what they answer (with `textContent`
/// only, so template text is never markup), and renders again on each `change` event of `/events`.
enum PreviewPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>norq preview</title>
<style>
:root { --bg:#f4f5f7; --fg:#1d1d1f; --dim:#6e6e73; --line:#d9dbe0; --err:#c62828; --warn:#b26a00; --ok:#2e7d32; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); display:grid; grid-template-columns: 220px 1fr; min-height:100vh; }
nav { background:#fff; border-right:1px solid var(--line); padding:12px; }
nav h1 { font-size:15px; margin:0 0 8px; }
nav ul { list-style:none; margin:0; padding:0; }
nav li button { width:100%; text-align:left; border:0; background:none; padding:6px 8px; border-radius:6px; cursor:pointer; font:inherit; }
nav li button.active { background:#e8f0fe; font-weight:600; }
nav .count { float:right; font-size:11px; }
main { padding:14px 18px; overflow:auto; }
.bar { display:flex; gap:10px; align-items:center; flex-wrap:wrap; margin-bottom:10px; }
.bar textarea { width:100%; min-height:60px; font:12px ui-monospace, monospace; }
#status { color:var(--dim); font-size:12px; }
.error-box { background:#fdecea; color:var(--err); border:1px solid #f5c2c0; padding:8px 10px; border-radius:8px; margin:8px 0; white-space:pre-wrap; }
.findings { background:#fff; border:1px solid var(--line); border-radius:8px; padding:6px 10px; margin:8px 0; }
.findings li { font:12px ui-monospace, monospace; margin:3px 0; }
.findings .error { color:var(--err); } .findings .warning { color:var(--warn); }
.platform { display:grid; grid-template-columns: 360px minmax(0, 1fr); gap:14px; background:#fff; border:1px solid var(--line); border-radius:10px; padding:12px; margin:12px 0; }
.platform h2 { grid-column: 1 / -1; margin:0; font-size:14px; }
.meta { font-size:12px; color:var(--dim); }
.meta span { display:inline-block; margin-right:8px; }
/* iOS lock screen banner */
.ios-screen { background:linear-gradient(160deg,#3a4a6b,#7d5a7b); border-radius:18px; padding:18px 12px; }
.ios-banner { background:rgba(245,245,245,.82); border-radius:14px; padding:10px 12px; display:grid; grid-template-columns:34px 1fr; gap:8px; }
.app-icon { width:34px; height:34px; border-radius:8px; background:linear-gradient(135deg,#4c8bf5,#2454c5); }
.ios-banner .n-title, .ios-banner .n-subtitle { font-weight:600; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.ios-banner .n-body { display:-webkit-box; -webkit-line-clamp:4; -webkit-box-orient:vertical; overflow:hidden; }
.ios-banner .when { float:right; color:var(--dim); font-weight:400; font-size:12px; }
/* Android */
.android-shade { background:#202124; border-radius:14px; padding:14px 10px; }
.android-card { background:#fff; border-radius:16px; padding:10px 14px; }
.android-card .head { font-size:11px; color:#5f6368; margin-bottom:3px; }
.android-card .n-title { font-weight:600; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.android-card .n-body { white-space:nowrap; overflow:hidden; text-overflow:ellipsis; color:#3c4043; }
.android-card img, .web-toast img { max-width:100%; max-height:120px; border-radius:8px; margin-top:6px; }
/* Desktop browser */
.desktop { background:#cfd8dc; border-radius:10px; padding:14px; display:flex; justify-content:flex-end; }
.web-toast { width:330px; background:#fff; border-radius:8px; box-shadow:0 3px 10px rgba(0,0,0,.25); padding:10px 12px; }
.web-toast .head { font-size:11px; color:#5f6368; }
.web-toast .n-title { font-weight:600; display:-webkit-box; -webkit-line-clamp:2; -webkit-box-orient:vertical; overflow:hidden; }
.web-toast .n-body { display:-webkit-box; -webkit-line-clamp:3; -webkit-box-orient:vertical; overflow:hidden; }
.fcm-card { border:1px dashed #9aa0a6; border-radius:10px; padding:8px 10px; margin-top:8px; font-size:13px; }
.requests details { border:1px solid var(--line); border-radius:8px; padding:6px 8px; margin-bottom:8px; }
.requests summary { cursor:pointer; font-weight:600; }
.requests pre { font:11.5px/1.35 ui-monospace, monospace; background:#f8f9fb; padding:8px; border-radius:6px; overflow:auto; max-height:320px; margin:6px 0 0; }
.gauge { height:8px; background:#e6e8eb; border-radius:4px; overflow:hidden; margin:4px 0 2px; }
.gauge > div { height:100%; background:var(--ok); }
.gauge.high > div { background:var(--warn); } .gauge.over > div { background:var(--err); }
.dim { color:var(--dim); }
.img-placeholder { margin-top:6px; height:90px; border-radius:8px; background:repeating-linear-gradient(45deg,#eceff1,#eceff1 8px,#e0e4e7 8px,#e0e4e7 16px); color:#5f6368; font-size:11px; display:flex; align-items:flex-end; padding:6px; overflow:hidden; word-break:break-all; }
#project { word-break:break-all; font-size:12px; }
</style>
</head>
<body data-generation="0" data-rendered="">
<nav>
  <h1>norq preview</h1>
  <ul id="templates"></ul>
  <p id="project" class="dim"></p>
</nav>
<main>
  <div class="bar">
    <strong id="template-name"></strong>
    <label>sample <select id="sample"></select></label>
    <span id="status">loading…</span>
  </div>
  <details class="bar" id="paste"><summary>Paste data (JSON, merged on the sample)</summary>
    <textarea id="data" spellcheck="false" placeholder='{"user": {"first_name": "Ada"}}'></textarea>
    <button id="render-data">Render with this data</button> <button id="clear-data">Clear</button>
  </details>
  <div id="error"></div>
  <div id="findings"></div>
  <section class="platform" id="ios"><h2>iOS lock screen</h2>
    <div><div class="ios-screen"><div class="ios-banner"><div class="app-icon" title="app icon"></div><div>
      <div class="n-title"></div><div class="n-subtitle"></div><div class="n-body"></div></div></div></div>
      <div class="refused"></div><div class="meta"></div><div class="fcm"></div></div>
    <div class="requests"></div></section>
  <section class="platform" id="android"><h2>Android notification</h2>
    <div><div class="android-shade"><div class="android-card"><div class="head"></div>
      <div class="n-title"></div><div class="n-body"></div><div class="img"></div></div></div>
      <div class="refused"></div><div class="meta"></div><div class="fcm"></div></div>
    <div class="requests"></div></section>
  <section class="platform" id="web"><h2>Desktop browser (Web Push)</h2>
    <div><div class="desktop"><div class="web-toast"><div class="head"></div>
      <div class="n-title"></div><div class="n-body"></div><div class="img"></div></div></div>
      <div class="refused"></div><div class="meta"></div></div>
    <div class="requests"></div></section>
</main>
<script>
"use strict";
const $ = (s, r = document) => r.querySelector(s);
const el = (tag, props = {}, ...kids) => { const e = document.createElement(tag); Object.assign(e, props); for (const k of kids) e.append(k); return e; };
const state = { template: null, sample: null, data: null, templates: [] };

function fromHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  if (p.get("template")) state.template = p.get("template");
  if (p.get("sample")) state.sample = p.get("sample");
}
function toHash() {
  const p = new URLSearchParams();
  if (state.template) p.set("template", state.template);
  if (state.sample) p.set("sample", state.sample);
  history.replaceState(null, "", "#" + p.toString());
}

async function loadTemplates() {
  const answer = await (await fetch("/api/templates")).json();
  state.templates = answer.templates;
  const list = $("#templates"); list.replaceChildren();
  for (const t of answer.templates) {
    const count = t.errors ? el("span", { className: "count", textContent: t.errors + " ✖", style: "color:var(--err)" })
      : t.warnings ? el("span", { className: "count", textContent: t.warnings + " ⚠", style: "color:var(--warn)" }) : "";
    const b = el("button", { textContent: t.id, className: t.id === state.template ? "active" : "" }, count);
    b.dataset.template = t.id;
    // Pasted data belongs to the template it was pasted for: another template starts from its own first sample.
    b.onclick = () => { state.template = t.id; state.sample = null; state.data = null; $("#data").value = ""; toHash(); render(); markActive(); };
    list.append(el("li", {}, b));
  }
  $("#project").textContent = answer.directory ? "templates: " + answer.directory + (answer.config ? " · config: " + answer.config : " · no config") : "";
  if (answer.loadError) showError(answer.loadError);
  if (!state.template || !answer.templates.some(t => t.id === state.template)) state.template = answer.templates.length ? answer.templates[0].id : null;
  markActive();
  return answer.generation;
}
function markActive() { for (const b of document.querySelectorAll("#templates button")) b.classList.toggle("active", b.dataset.template === state.template); }

function where(f) { return (f.file || "") + (f.line ? ":" + f.line + (f.column ? ":" + f.column : "") : ""); }
function showError(e) {
  const box = $("#error"); box.replaceChildren();
  if (!e) return;
  box.append(el("div", { className: "error-box", textContent: (where(e) ? where(e) + ": " : "") + "error[" + e.code + "]: " + e.message + (e.hint ? " (" + e.hint + ")" : "") }));
}
function showFindings(findings) {
  const box = $("#findings"); box.replaceChildren();
  if (!findings || !findings.length) { box.append(el("div", { className: "findings dim", textContent: "No findings (norq validate's checks)." })); return; }
  const ul = el("ul");
  for (const f of findings) ul.append(el("li", { className: f.severity, textContent: (where(f) ? where(f) + ": " : "") + f.severity + "[" + f.code + "]: " + f.message + (f.hint ? " (" + f.hint + ")" : "") }));
  box.append(el("div", { className: "findings" }, el("strong", { textContent: "Findings" }), ul));
}

// The whole text goes in; the platform's box cuts it where its font and width do (one line with an ellipsis, or
// a line clamp), and the cut is measured from the layout, not counted in characters (`field.shown` is the server's
// estimate, for clients without a layout engine).
function setText(section, selector, field) {
  const node = $(selector, section);
  node.textContent = field ? field.full.replace(/\s*\n\s*/g, " ") : "";
  const cut = !!field && (node.scrollWidth > node.clientWidth + 1 || node.scrollHeight > node.clientHeight + 1);
  node.title = field ? field.full + (cut ? "  (cut on the device's screen)" : "") : "";
  node.dataset.truncated = cut ? "true" : "false";
}
function meta(section, pairs) {
  const box = $(".meta", section); box.replaceChildren();
  for (const [k, v] of pairs) if (v !== null && v !== undefined && v !== "") box.append(el("span", { textContent: k + ": " + v }));
}
function image(section, url) {
  const box = $(".img", section); if (!box) return; box.replaceChildren();
  if (!url) return;
  const img = el("img", { src: url, alt: "", referrerPolicy: "no-referrer" });
  // An image that cannot be loaded here (no network, a private host) is drawn as a placeholder of its size.
  img.onerror = () => img.replaceWith(el("div", { className: "img-placeholder", textContent: "image · " + url }));
  box.append(img);
}
function requests(section, items) {
  const box = $(".requests", section); box.replaceChildren();
  if (!items.length) { box.append(el("p", { className: "dim", textContent: "No provider routes this platform." })); return; }
  for (const r of items) {
    const d = el("details", { open: r === items[0] });
    const title = (r.provider || "no provider") + (r.type ? " (" + r.type + ")" : "") + " · " + r.routing;
    d.append(el("summary", { textContent: title }));
    if (r.request) {
      const s = r.size;
      const pct = s.percent === null ? 0 : Math.min(100, s.percent);
      const gauge = el("div", { className: "gauge" + (s.over ? " over" : pct > 80 ? " high" : "") }, el("div", { style: "width:" + pct.toFixed(1) + "%" }));
      d.append(gauge, el("div", { className: "meta size", textContent: s.bytes + " bytes" + (s.limit !== null ? " of " + s.limit + " allowed (" + s.percent.toFixed(1) + "%)" + (s.over ? " — over the limit" : "") : "") }));
      const head = r.request.method + " " + r.request.url + "\n" + r.request.headers.map(h => h.name + ": " + h.value).join("\n");
      d.append(el("pre", { className: "http", textContent: head + "\n\n" + r.request.bodyText }));
    } else if (r.outcome) {
      d.append(el("div", { className: "error-box", textContent: "no request: " + (r.outcome.code || r.outcome.kind) + ": " + (r.outcome.message || r.outcome.reason || "") }));
    }
    box.append(d);
  }
}
function fcmCards(section, items, view) {
  const box = $(".fcm", section); if (!box) return; box.replaceChildren();
  for (const r of items) {
    if ((r.type !== "fcm" && r.type !== "expo") || !r.shown) continue;
    const t = r.shown.title || "", b = r.shown.body || "";
    const same = view && view.title && view.body && t === view.title.full && b === view.body.full;
    if (same) continue;
    box.append(el("div", { className: "fcm-card" }, el("strong", { textContent: "Through " + (r.type === "expo" ? "Expo" : "FCM") + " (" + r.provider + "): " }),
      el("span", { className: "fcm-title", textContent: t }), el("br"), el("span", { className: "fcm-body", textContent: b })));
  }
}

async function render() {
  if (!state.template) { $("#status").textContent = "no templates"; return; }
  $("#template-name").textContent = state.template;
  const started = performance.now();
  const response = await fetch("/api/render", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ template: state.template, sample: state.sample, data: state.data }) });
  const r = await response.json();
  const select = $("#sample"); select.replaceChildren();
  for (const s of (r.samples || [])) select.append(el("option", { value: s, textContent: s, selected: s === r.sample }));
  if (state.data) select.append(el("option", { value: "", textContent: "(pasted data)", selected: !r.sample }));
  showError(r.error);
  showFindings(r.findings);
  const p = r.platforms;
  const all = r.requests || [];
  for (const name of ["ios", "android", "web"]) {
    const section = $("#" + name);
    section.hidden = !p;
    if (!p) continue;
    const v = p[name];
    setText(section, ".n-title", v.title); setText(section, ".n-body", v.body);
    const refusedBox = $(".refused", section); refusedBox.replaceChildren();
    if (v.refused) refusedBox.append(el("div", { className: "error-box", textContent: "The routed provider refuses this: " + (v.refused.code || v.refused.kind) + ": " + (v.refused.message || v.refused.reason || "") + " (drawn from the rendered content)" }));
    const mine = all.filter(x => x.platform === name);
    requests(section, mine);
    fcmCards(section, mine, v);
    if (name === "ios") {
      setText(section, ".n-subtitle", v.subtitle);
      meta(section, [["thread", v.threadId], ["interruption level", v.interruptionLevel], ["badge", v.badge], ["sound", v.sound], ["category", v.category], ["image", v.image], ["note", v.note], ["drawn from", v.source]]);
    } else if (name === "android") {
      $(".head", section).textContent = "App · now";
      image(section, v.image);
      meta(section, [["note", v.note], ["channel", v.channelId || "(default channel)"], ["priority", v.priority], ["color", v.color], ["icon", v.icon], ["tag", v.tag], ["drawn from", v.source]]);
    } else {
      $(".head", section).textContent = "Browser · " + (v.actionUrl ? new URL(v.actionUrl, location.href).host : "your site");
      image(section, v.image);
      meta(section, [["note", v.note], ["icon", v.icon], ["badge", v.badge], ["opens", v.actionUrl], ["stays until dismissed", v.requireInteraction ? "yes" : null], ["tag", v.tag], ["drawn from", v.source]]);
    }
  }
  if (r.enabled === false) $("#error").append(el("div", { className: "error-box", textContent: "disabled (enabled: false): a send skips every token of this template" }));
  document.body.dataset.rendered = state.template + "@" + r.generation;
  document.body.dataset.generation = String(r.generation);
  $("#status").textContent = "generation " + r.generation + " · rendered in " + (r.renderMicroseconds / 1000).toFixed(1) + " ms on the server, " + (performance.now() - started).toFixed(0) + " ms here";
}

$("#sample").onchange = e => { state.sample = e.target.value || null; if (state.sample) state.data = null; toHash(); render(); };
$("#render-data").onclick = () => {
  try { state.data = JSON.parse($("#data").value || "{}"); state.sample = $("#sample").value || null; render(); }
  catch (e) { showError({ code: "invalid-json", message: "the pasted data is not JSON: " + e }); }
};
$("#clear-data").onclick = () => { state.data = null; $("#data").value = ""; render(); };

async function refresh() { await loadTemplates(); await render(); }
fromHash();
refresh().catch(e => { $("#status").textContent = "error: " + e; });
const events = new EventSource("/events");
events.addEventListener("change", () => { refresh().catch(e => { $("#status").textContent = "error: " + e; }); });
// On (re)connecting: a change made before this page subscribed (or while it was away) renders it again.
events.addEventListener("hello", e => {
  const shown = document.body.dataset.generation;
  if (shown !== "0" && JSON.parse(e.data).generation !== Number(shown)) refresh().catch(() => {});
});
events.onerror = () => { document.body.dataset.live = "reconnecting"; };
events.onopen = () => { document.body.dataset.live = "open"; };
</script>
</body>
</html>
"""#
}
