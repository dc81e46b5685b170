//===- MonitorPage.cpp - The live panel's page ----------------------------===//

#include "monitor/MonitorPage.h"
#include "codegen/Report.h"
#include "monitor/MonitorData.h"
#include "monitor/PlanView.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace autopar;

/// The panel's own style, after the report's (whose classes the plan's
/// sections use).
static const char *const MonitorStyle = R"CSS(
.row { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.row > section { flex: 0 1 auto; max-width: 100%; overflow-x: auto; }
#status p { margin: 4px 0; }
#status-line { font-size: 15px; font-weight: bold; }
.state-running { color: #276e27; } .state-finished { color: #1f4e79; }
.state-failed, .state-stalled { color: #b00; }
.state-waiting, .state-stopped, .state-unreachable { color: #777; }
p.empty { color: #777; font-style: italic; }
td.warn { background: #fde4e4; }
svg.curve polyline { fill: none; stroke-width: 1.5; }
)CSS";

/// Draws /data.json's document into the sections; polls every second.
static const char *const MonitorScript = R"JS(
"use strict";
const NS = "http://www.w3.org/2000/svg";
const WARN = %WARN%;
const PHASES = {F: ["forward", "#4e79a7"], B: ["backward", "#59a14f"],
  C: ["communication", "#f28e2b"], O: ["optimizer", "#b07aa1"],
  W: ["waiting for a receive", "#bab0ac"]};
function make(doc, tag, attrs, kids) {
  const e = doc(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  for (const c of kids)
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function h(tag, attrs, ...kids) {
  return make(t => document.createElement(t), tag, attrs, kids);
}
function s(tag, attrs, ...kids) {
  return make(t => document.createElementNS(NS, t), tag, attrs, kids);
}
function fill(id, title, ...kids) {
  document.getElementById(id).replaceChildren(h("h2", {}, title), ...kids);
}
function waiting(id, title) {
  fill(id, title, h("p", {class: "empty"}, "waiting for the first step"));
}
function pct(x) { return x == null ? "n/a" : (100 * x).toFixed(1) + "%"; }
function bytes(b) {
  if (b == null) return "n/a";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; ++i; }
  return b.toFixed(i ? 2 : 0) + " " + units[i];
}
function when(t) {
  return t == null ? "" :
    new Date(t * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
function cell(text, cls) { return h("td", cls ? {class: cls} : {}, text); }
function table(head, rows) {
  return h("table", {}, h("tr", {}, ...head.map(x => h("th", {}, x))), ...rows);
}

function drawStatus(d) {
  const st = d.status;
  let text = st.state;
  if (st.last_step != null) text += ": step " + st.last_step;
  if (st.attempt) text += ", attempt " + st.attempt;
  if (st.ranks) text += ", " + st.ranks + (st.ranks == 1 ? " rank" : " ranks");
  if (st.state == "running" && st.age_s != null)
    text += ", last step " + st.age_s.toFixed(1) + " s ago";
  if (st.message) text += " (" + st.message + ")";
  const line = document.getElementById("status-line");
  line.textContent = text;
  line.className = "state-" + st.state;
  line.dataset.state = st.state;
  const log = d.log;
  let info = log.path + ": " + (log.exists ? log.lines + " lines, " +
    log.step_records + " step records" : "not written yet");
  if (log.malformed_lines) info += ", " + log.malformed_lines + " malformed lines skipped";
  if (log.partial_line) info += ", a line being written";
  if (log.error) info += ", " + log.error;
  document.getElementById("log-line").textContent = info;
}

function drawTimeline(d) {
  const title = "Measured timeline of the latest step";
  const ranks = d.ranks.filter(r => Array.isArray(r.record.timeline));
  if (!ranks.length) return waiting("measured-timeline", title);
  let end = 0;
  for (const r of ranks)
    for (const sp of r.record.timeline) end = Math.max(end, sp[3]);
  end = end || 1;
  const L = 70, W = 1000, R = 22;
  const svg = s("svg", {xmlns: NS, width: L + W + 10, height: 20 + ranks.length * R + 26});
  ranks.forEach((r, i) => {
    const y = 20 + i * R;
    svg.append(s("text", {x: 2, y: y + 13}, "rank " + r.rank));
    svg.append(s("rect", {x: L, y: y - 1, width: W, height: R - 4, fill: "#f3f3f3"}));
    for (const [ph, mb, a, b] of r.record.timeline) {
      const p = PHASES[ph] || [ph, "#999"];
      const rect = s("rect", {class: "span phase-" + ph, x: (L + a / end * W).toFixed(1),
        y: y, width: Math.max(0.5, (b - a) / end * W).toFixed(1), height: R - 6, fill: p[1]});
      rect.append(s("title", {}, p[0] + (mb >= 0 ? " micro-batch " + mb : "") +
        ": " + a.toFixed(1) + " to " + b.toFixed(1) + " ms"));
      svg.append(rect);
    }
  });
  const yAxis = 20 + ranks.length * R + 16;
  svg.append(s("text", {x: L, y: yAxis}, "0 ms"));
  svg.append(s("text", {x: L + W, y: yAxis, "text-anchor": "end"}, end.toFixed(1) + " ms"));
  const legend = h("ul", {class: "legend"}, h("li", {},
    ...Object.values(PHASES).flatMap(p => [h("span", {class: "swatch", style: "background:" + p[1]}), p[0] + " "])));
  fill("measured-timeline", title + " (step " + ranks[0].step + ")", svg, legend);
}

function drawBubble(d) {
  const title = "Pipeline bubble per rank: measured (idle / step) against predicted";
  if (!d.ranks.length) return waiting("bubble", title);
  const rows = d.ranks.map(r => h("tr", {},
    cell(r.rank), cell(r.stage == null ? "n/a" : r.stage), cell(r.host || "", "text"),
    cell(r.step == null ? "" : r.step),
    cell(pct(r.bubble.measured), r.bubble.measured_warn ? "warn" : ""),
    cell(pct(r.bubble.predicted), r.bubble.predicted_warn ? "warn" : "")));
  fill("bubble", title, table(["rank", "stage", "host", "step", "measured", "predicted"], rows),
    h("p", {}, "Highlighted: above " + pct(WARN) + " of the step."));
}

function drawMemory(d) {
  const title = "Memory per rank: measured against predicted";
  if (!d.ranks.length) return waiting("memory", title);
  let top = 1;
  for (const r of d.ranks)
    top = Math.max(top, r.memory.device_bytes || 0, r.memory.predicted_bytes || 0);
  const rows = d.ranks.map(r => {
    const m = r.memory, W = 200;
    const bar = s("svg", {xmlns: NS, width: W, height: 18});
    if (m.predicted_bytes != null)
      bar.append(s("rect", {class: "predicted", x: 0, y: 1, width: (m.predicted_bytes / top * W).toFixed(1),
        height: 16, fill: "none", stroke: "#555"}));
    if (m.device_bytes != null)
      bar.append(s("rect", {class: "measured", x: 0, y: 4, width: (m.device_bytes / top * W).toFixed(1),
        height: 10, fill: "#4e79a7"}));
    const ratio = m.device_bytes != null && m.predicted_bytes ?
      (m.device_bytes / m.predicted_bytes).toPrecision(3) : "n/a";
    return h("tr", {}, cell(r.rank), cell(r.stage == null ? "n/a" : r.stage),
      cell(bytes(m.device_bytes)), cell(bytes(m.peak_device_bytes)),
      cell(bytes(m.predicted_bytes)), cell(ratio), cell(bytes(m.host_bytes)),
      h("td", {}, bar));
  });
  const allowance = d.ranks.map(r => r.memory.predicted_allowance_bytes).find(a => a != null);
  fill("memory", title, table(["rank", "stage", "device", "device peak", "predicted",
    "measured / predicted", "host (resident)", "device (bar) against predicted (box)"], rows),
    h("p", {}, "Device: parameters, optimizer state, gradients and activations at the step's peak; " +
      "predicted: the plan's figure for the same" +
      (allowance != null ? " (its runtime allowance of " + bytes(allowance) + " per GPU is not counted)." : ".")));
}

function curve(points, label, colour) {
  const W = 480, H = 160, L = 60, B = 20;
  const svg = s("svg", {class: "curve", xmlns: NS, width: W + L + 10, height: H + B + 20});
  const pts = points.filter(p => p[1] != null);
  svg.append(s("text", {x: L, y: 12}, label));
  if (!pts.length) { svg.append(s("text", {x: L, y: 40}, "no values yet")); return svg; }
  const x0 = pts[0][0], x1 = Math.max(pts[pts.length - 1][0], x0 + 1);
  let y0 = Math.min(...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]));
  if (y1 == y0) { y0 -= 0.5; y1 += 0.5; }
  const X = x => L + (x - x0) / (x1 - x0) * W, Y = y => 20 + (y1 - y) / (y1 - y0) * H;
  svg.append(s("rect", {x: L, y: 20, width: W, height: H, fill: "#fafafa", stroke: "#ccc"}));
  svg.append(s("polyline", {stroke: colour,
    points: pts.map(p => X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1)).join(" ")}));
  svg.append(s("text", {x: L - 4, y: 28, "text-anchor": "end"}, y1.toPrecision(4)));
  svg.append(s("text", {x: L - 4, y: 20 + H, "text-anchor": "end"}, y0.toPrecision(4)));
  svg.append(s("text", {x: L, y: H + B + 16}, "step " + x0));
  svg.append(s("text", {x: L + W, y: H + B + 16, "text-anchor": "end"}, "step " + x1));
  return svg;
}

function drawCurves(d) {
  const title = "Loss and throughput per step (rank 0)";
  if (!d.steps.length) return waiting("curves", title);
  const tps = d.plan && d.plan.predicted_tokens_per_s;
  fill("curves", title, h("div", {class: "row"},
    curve(d.steps.map(p => [p[0], p[1]]), "loss", "#e15759"),
    curve(d.steps.map(p => [p[0], p[2]]), "tokens/s" +
      (tps ? " (predicted " + tps.toFixed(0) + ")" : ""), "#4e79a7")));
}

function describe(e) {
  switch (e.event) {
  case "start": return "ranks " + e.ranks + ", from step " + e.from_step;
  case "failure": return (e.message || "") + (e.exit_code != null ? " (exit code " + e.exit_code + ")" : "");
  case "heartbeat_lost": return "silent for " + e.silent_s + " s" + (e.op ? " in " + e.op : "");
  case "restart": return "from step " + e.from_step + ", lost " + e.lost_s + " s" +
    (e.ranks != null ? ", " + e.ranks + " ranks" : "");
  case "finished": case "stopped": return "steps " + e.steps + ", restarts " + e.restarts;
  case "gave_up": return "restarts " + e.restarts;
  }
  return e.message || "";
}

function drawEvents(d) {
  const title = "Events (failures, restarts)";
  if (!d.events.length) return fill("events", title, h("p", {class: "empty"}, "no events"));
  const rows = d.events.slice().reverse().map(e => h("tr",
    {class: "event-" + e.event},
    cell(when(e.time), "text"), cell(e.attempt == null ? "" : e.attempt), cell(e.event, "text"),
    cell(e.rank == null ? "" : e.rank), cell(e.host || "", "text"),
    cell(e.step == null ? "" : e.step), cell(describe(e), "text")));
  fill("events", title, table(["time (UTC)", "attempt", "event", "rank", "host", "step", "message"], rows));
}

function draw(d) {
  drawStatus(d);
  drawTimeline(d);
  drawBubble(d);
  drawMemory(d);
  drawCurves(d);
  drawEvents(d);
}

async function poll() {
  try {
    const response = await fetch("data.json", {cache: "no-store"});
    draw(await response.json());
  } catch (e) {
    const line = document.getElementById("status-line");
    line.textContent = "cannot reach the monitor: " + e;
    line.className = "state-unreachable";
    line.dataset.state = "unreachable";
  }
  setTimeout(poll, 1000);
}
poll();
)JS";

std::string autopar::renderMonitorPage(StringRef RunDir, const PlanView *Plan,
                                       StringRef PlanError) {
  std::string Html;
  raw_string_ostream OS(Html);
  OS << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
     << "<title>autopar monitor: " << escapeHtml(RunDir) << "</title>\n<style>";
  if (Plan && !Plan->Style.empty())
    OS << Plan->Style;
  OS << MonitorStyle << "</style></head><body>\n";
  OS << "<h1>autopar monitor: " << escapeHtml(RunDir) << "</h1>\n";
  OS << "<section id=\"status\"><p id=\"status-line\" class=\"state-waiting\" "
        "data-state=\"waiting\">waiting for the first data</p>\n"
     << "<p id=\"log-line\"></p>\n<p id=\"plan-line\">";
  if (Plan)
    OS << "plan " << escapeHtml(Plan->Dir) << ": "
       << escapeHtml(Plan->Record.Config.str());
  else
    OS << "no plan: " << escapeHtml(PlanError);
  OS << "</p></section>\n";

  std::string NoPlan =
      "<p class=\"empty\">" +
      escapeHtml(Plan ? Plan->Note : "no plan: " + PlanError.str()) + "</p>";
  if (Plan && !Plan->Topology.empty())
    OS << Plan->Topology << "\n";
  else
    OS << "<section id=\"topology\"><h2>Cluster</h2>" << NoPlan
       << "</section>\n";
  OS << "<div class=\"row\">\n";
  if (Plan && !Plan->Schedule.empty())
    OS << Plan->Schedule << "\n";
  else
    OS << "<section id=\"planned-schedule\"><h2>Pipeline schedule</h2>"
       << NoPlan << "</section>\n";
  // The measured sections, filled by the script.
  auto Placeholder = [&](StringRef Id, StringRef Title) {
    OS << "<section id=\"" << Id << "\"><h2>" << Title
       << "</h2><p class=\"empty\">waiting for the first step</p></section>\n";
  };
  Placeholder("measured-timeline", "Measured timeline of the latest step");
  OS << "</div>\n";
  Placeholder("bubble", "Pipeline bubble per rank");
  Placeholder("memory", "Memory per rank");
  Placeholder("curves", "Loss and throughput");
  Placeholder("events", "Events");
  std::string Script = MonitorScript;
  std::string Warn = std::to_string(BubbleWarnFraction);
  Script.replace(Script.find("%WARN%"), strlen("%WARN%"), Warn);
  OS << "<script>" << Script << "</script>\n</body></html>\n";
  return Html;
}
