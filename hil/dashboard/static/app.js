// hil dashboard page: state over a WebSocket, drawn on canvases. No library, nothing fetched.
"use strict";

const COLORS = {
  decoded: "#3ecf8e", header_failed: "#f4a259", cut: "#e5484d", missed: "#7d8a97",
  refused: "#a78bfa", payload: "#5aa9e6", pilots: "#f4a259", grid: "#262c35", text: "#9aa5b1",
};
const FRAMES_SHOWN = 300;

// what the page has drawn and seen, for people and for the browser test
const hil = (window.hil = {
  draws: { spectrum: 0, waterfall: 0, constellation: 0, series: 0, images: 0 },
  messages: 0, frames: [], counts: null, summary: null, radio: {}, rx: {}, connected: false,
  control: false, controlFilled: false, lastControl: null,
});

function el(id) { return document.getElementById(id); }

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/ws${location.search}`);
  ws.onopen = () => { hil.connected = true; setConn(true); };
  ws.onclose = () => { hil.connected = false; setConn(false); setTimeout(connect, 1000); };
  ws.onmessage = (ev) => { hil.messages++; apply(JSON.parse(ev.data)); };
}

function setConn(ok) {
  const c = el("conn");
  c.textContent = ok ? "live" : "disconnected";
  c.className = ok ? "good" : "bad";
}

function apply(d) {
  if (d.frames) {
    hil.frames.push(...d.frames);
    if (hil.frames.length > 2000) hil.frames.splice(0, hil.frames.length - 2000);
    drawSeries();
  }
  if (d.spectrum) drawSpectrum(d.spectrum);
  if (d.constellation) drawConstellation(d.constellation);
  if (d.images) drawImages(d.images);
  if (d.radio) { hil.radio = d.radio; table("radio", d.radio); }
  if (d.rx) {
    hil.rx = d.rx;
    if (d.rx.counts) { hil.counts = d.rx.counts; accounting(d.rx.counts); }
    table("receiver", Object.assign({}, d.rx.stream || {}, d.rx.receiver || {}, d.rx.meta || {}));
  }
  if (d.summary) hil.summary = d.summary;
  if (d.control !== undefined) { hil.control = d.control; el("control").hidden = !d.control; }
  if (hil.control && d.radio && !hil.controlFilled) fillControl(d.radio);
}

// ------------------------------------------------------------------ control (--control only)
const CONTROL = [["rx_gain_db", "ctl-rx_gain_db", 1], ["tx_gain_db", "ctl-tx_gain_db", 1],
  ["lo_hz", "ctl-lo_mhz", 1e6]];

function fillControl(radio) {  // the radio's settings in force, once they are known; then the user's
  if (!CONTROL.every(([key]) => typeof radio[key] === "number")) return;
  for (const [key, id, scale] of CONTROL) el(id).value = radio[key] / scale;
  hil.controlFilled = true;
}

async function sendControl(ev) {
  ev.preventDefault();
  const set = {};
  for (const [key, id, scale] of CONTROL) {
    const v = el(id).value;
    if (v !== "" && Number(v) * scale !== hil.radio[key]) set[key] = Number(v) * scale;
  }
  const out = el("ctl-result");
  if (!Object.keys(set).length) { out.textContent = "nothing changed"; return; }
  try {
    const r = await fetch(`/control${location.search}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ set }),
    });
    const a = await r.json();
    hil.lastControl = a;
    out.textContent = a.ok ? `set ${Object.keys(set).join(", ")}` : `refused: ${a.error}`;
    out.className = a.ok ? "good" : "bad";
  } catch (e) {
    out.textContent = `no answer: ${e}`;
    out.className = "bad";
  }
}

function accounting(c) {
  const n = (k) => c[k] ?? 0;
  el("accounting").textContent =
    `sent ${n("sent")} = decoded ${n("decoded")} + header failed ${n("header_failed")} + ` +
    `cut ${n("cut")} + missed ${n("missed")} + refused ${n("refused")}` +
    (c.pending ? `  (in flight ${c.pending})` : "");
}

function table(id, obj) {
  const rows = Object.entries(obj)
    .filter(([, v]) => typeof v !== "object")
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(fmt(v))}</td></tr>`);
  el(id).innerHTML = rows.join("");
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

function fmt(v) {
  if (typeof v !== "number") return v;
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(3) + " M";
  return Number.isInteger(v) ? v : v.toFixed(2);
}

// ------------------------------------------------------------------ spectrum + waterfall
function drawSpectrum(db) {
  const c = el("spectrum"), g = c.getContext("2d"), W = c.width, H = c.height;
  const lo = -110, hi = 0;
  g.clearRect(0, 0, W, H);
  g.strokeStyle = COLORS.grid; g.fillStyle = COLORS.text; g.font = "10px sans-serif";
  for (let v = lo; v <= hi; v += 20) {
    const y = H - ((v - lo) / (hi - lo)) * H;
    g.beginPath(); g.moveTo(0, y); g.lineTo(W, y); g.stroke();
    g.fillText(`${v} dBFS`, 4, y - 2);
  }
  g.strokeStyle = COLORS.payload; g.beginPath();
  db.forEach((v, i) => {
    const x = (i / (db.length - 1)) * W;
    const y = H - ((Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo)) * H;
    i ? g.lineTo(x, y) : g.moveTo(x, y);
  });
  g.stroke();
  hil.draws.spectrum++;
  const fs = hil.radio.sample_rate_hz;
  if (fs) el("spec-info").textContent = `${(fs / 1e6).toFixed(3)} MSps, DC centre`;
  // waterfall: scroll down one row, newest on top
  const w = el("waterfall"), wg = w.getContext("2d");
  wg.drawImage(w, 0, 0, w.width, w.height - 1, 0, 1, w.width, w.height - 1);
  const row = wg.createImageData(w.width, 1);
  for (let x = 0; x < w.width; x++) {
    const v = db[Math.floor((x / w.width) * db.length)];
    const t = Math.max(0, Math.min(1, (v - lo) / (hi - lo)));
    const [r, gg, b] = heat(t);
    row.data.set([r, gg, b, 255], 4 * x);
  }
  wg.putImageData(row, 0, 0);
  hil.draws.waterfall++;
}

function heat(t) {  // dark blue -> cyan -> yellow -> white
  const s = [[8, 10, 40], [20, 120, 180], [240, 220, 60], [255, 255, 255]];
  const k = Math.min(2, Math.floor(t * 3)), f = t * 3 - k;
  return s[k].map((a, i) => Math.round(a + (s[k + 1][i] - a) * f));
}

// ------------------------------------------------------------------ constellation
function drawConstellation(c) {
  const cv = el("constellation"), g = cv.getContext("2d"), W = cv.width, H = cv.height;
  const R = 2.0, sx = (x) => W / 2 + (x / R) * (W / 2), sy = (y) => H / 2 - (y / R) * (H / 2);
  g.clearRect(0, 0, W, H);
  g.strokeStyle = COLORS.grid;
  g.beginPath(); g.moveTo(0, H / 2); g.lineTo(W, H / 2); g.moveTo(W / 2, 0); g.lineTo(W / 2, H); g.stroke();
  g.beginPath(); g.arc(W / 2, H / 2, W / 2 / R, 0, 2 * Math.PI); g.stroke();
  const dots = (pts, color, r) => {
    g.fillStyle = color;
    for (const [x, y] of pts || []) g.fillRect(sx(x) - r / 2, sy(y) - r / 2, r, r);
  };
  dots(c.payload, COLORS.payload, 2);
  dots(c.pilots, COLORS.pilots, 3);
  el("evm").textContent = c.evm != null ? `frame ${c.seq}, pilot EVM ${(100 * c.evm).toFixed(1)} %` : "";
  hil.draws.constellation++;
}

// ------------------------------------------------------------------ per-frame series
const SERIES = [
  ["snr_db", "SNR dB"], ["cfo_hz", "CFO kHz", 1e-3], ["evm_pilots", "EVM %", 100], ["psnr_db", "PSNR dB"],
  ["ssim", "SSIM"],
];

function drawSeries() {
  const c = el("series"), g = c.getContext("2d"), W = c.width, H = c.height;
  const fr = hil.frames.slice(-FRAMES_SHOWN), rowH = H / SERIES.length, left = 56;
  g.clearRect(0, 0, W, H);
  g.font = "10px sans-serif";
  SERIES.forEach(([key, label, scale], r) => {
    const y0 = r * rowH, vals = fr.map((f) => (f[key] != null ? f[key] * (scale || 1) : null));
    // the axis spans the 2nd to 98th percentile: one wild estimate does not flatten the rest
    // (values beyond are drawn on the edge)
    const have = vals.filter((v) => v != null).sort((a, b) => a - b);
    const q = (f) => have[Math.min(have.length - 1, Math.floor(f * have.length))];
    let lo = have.length ? q(0.02) : 0, hi = have.length ? q(0.98) : 1;
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    const pad = 0.1 * (hi - lo); lo -= pad; hi += pad;
    g.strokeStyle = COLORS.grid; g.strokeRect(left, y0 + 2, W - left - 2, rowH - 4);
    g.fillStyle = COLORS.text;
    g.fillText(label, 4, y0 + 12);
    g.fillText(hi.toFixed(1), 4, y0 + 24); g.fillText(lo.toFixed(1), 4, y0 + rowH - 6);
    fr.forEach((f, i) => {
      const x = left + ((i + 0.5) / FRAMES_SHOWN) * (W - left - 2);
      const v = vals[i];
      // frames without a value (missed, cut, failed) still get a mark, on the floor
      const t = v == null ? 0 : Math.max(0, Math.min(1, (v - lo) / (hi - lo)));
      const y = v == null ? y0 + rowH - 6 : y0 + rowH - 4 - t * (rowH - 8);
      g.fillStyle = COLORS[f.status] || COLORS.text;
      g.fillRect(x - 1.5, y - 1.5, 3, 3);
    });
  });
  hil.draws.series++;
}

// ------------------------------------------------------------------ images
function drawImages(im) {
  if (im.tx) el("img-tx").src = im.tx;
  if (im.rx) el("img-rx").src = im.rx;
  el("img-info").textContent = im.seq != null ? `frame ${im.seq}, item ${im.item_id}` : "";
  hil.draws.images++;
}

el("control").addEventListener("submit", sendControl);
connect();
