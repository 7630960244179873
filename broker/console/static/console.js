// Shoal console: polls the broker's JSON API and renders it. No framework, no build step. Every string from the
// broker (topic, group and member names, DLQ headers) goes through textContent, never innerHTML.
"use strict";

const REFRESH_MS = 1500;
const MAX_WINDOWS = 8; // share-partition pictures fetched per refresh
const MAX_DLQS = 4;
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c === null || c === undefined ? "" : String(c)));
  return node;
}

function row(cells, attrs) {
  return el("tr", attrs, ...cells.map((c) => el("td", {}, c)));
}

function table(headers, rows, attrs) {
  return el("table", attrs, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))), el("tbody", {}, ...rows));
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// A share-partition's name in the URL's fragment: each part percent-encoded, so a group id holding "/", "%" or "#"
// neither runs into the next part nor breaks the page (the fragment is compared as it is, never decoded).
function windowKey(s) {
  return [s.group, s.topic, String(s.partition)].map(encodeURIComponent).join("/");
}

function renderTopics(data) {
  const body = document.querySelector("#topics tbody");
  const rows = [];
  for (const t of data.topics) {
    for (const p of t.partitions) {
      rows.push(row([t.name, p.partition, p.log_start_offset, p.high_watermark, p.log_end_offset, p.size_bytes, p.segments],
        { class: "topic-partition" + (t.internal ? " internal" : ""), "data-topic": t.name, "data-partition": p.partition }));
    }
  }
  body.replaceChildren(...rows);
}

function assignment(a) {
  return a ? a.map((x) => `${x.topic}[${x.partitions.join(",")}]`).join(" ") : "";
}

function renderGroups(data) {
  const cards = data.groups.map((g) => {
    const card = el("div", { class: "card group", "data-group": g.group_id, "data-type": g.type, "data-state": g.state },
      el("h3", {}, `${g.type} group `, el("code", {}, g.group_id), ` · ${g.state} · epoch ${g.epoch} · `,
        el("span", { class: "member-count" }, g.member_count), " members"));
    card.append(table(["member id", "client id", "host", "assignment"], g.members.map((m) =>
      row([m.member_id, m.client_id, m.client_host, assignment(m.assignment)], { class: "member", "data-member-id": m.member_id }))));
    if (g.offsets && g.offsets.length) {
      card.append(table(["topic", "partition", "committed", "high watermark", "lag"], g.offsets.map((o) =>
        row([o.topic, o.partition, o.committed_offset, o.high_watermark, o.lag], { class: "lag" }))));
    }
    if (g.type === "share") {
      if (g.dlq_topic) card.append(el("p", {}, "dead-letter queue: ", el("code", { class: "dlq-topic" }, g.dlq_topic)));
      card.append(table(["topic", "partition", "start", "end", "available", "acquired", "acknowledged", "archived", "lag"],
        g.share_partitions.map((s) => row([el("a", { href: "#" + windowKey(s), title: "show this window first" },
          `${s.topic}`), s.partition, s.start_offset, s.end_offset, s.available, s.acquired,
          s.acknowledged, s.archived, s.lag], { class: "share-partition-row", "data-topic": s.topic, "data-partition": s.partition }))));
    }
    return card;
  });
  document.getElementById("groups").replaceChildren(...cards);
}

function renderWindow(sp) {
  const width = 960, height = 46, barY = 14, barH = 22;
  const span = Math.max(1, sp.end_offset - sp.start_offset);
  const x = (offset) => ((offset - sp.start_offset) / span) * width;
  const svg = el("svg:svg", { class: "window", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  svg.append(el("svg:text", { class: "axis", x: 2, y: 10 }, sp.start_offset));
  svg.append(el("svg:text", { class: "axis", x: width - 2, y: 10, "text-anchor": "end" }, sp.end_offset));
  for (const r of sp.ranges) {
    const x0 = x(r.first), w = Math.max(1, x(r.last + 1) - x0);
    const lock = r.lock_deadline_ms !== null ? `, lock ${Math.max(0, r.lock_deadline_ms - sp.now_ms)} ms left` : "";
    const who = r.member ? `, member ${r.member}` : "";
    const rect = el("svg:rect", { class: `range ${r.state}`, x: x0, y: barY, width: w, height: barH, "data-state": r.state,
      "data-member": r.member, "data-first": r.first, "data-last": r.last, "data-delivery-count": r.delivery_count },
      el("svg:title", {}, `${r.first}-${r.last} ${r.state}, delivery count ${r.delivery_count}${who}${lock}`));
    svg.append(rect);
    if (w > 18) svg.append(el("svg:text", { x: x0 + 3, y: barY + 15 }, `×${r.delivery_count}`));
  }
  return svg;
}

function renderSharePartition(sp) {
  const card = el("div", { class: "card share-partition", "data-group": sp.group, "data-topic": sp.topic, "data-partition": sp.partition },
    el("h3", {}, "group ", el("code", {}, sp.group), " · ", el("code", {}, `${sp.topic}-${sp.partition}`),
      ` · start ${sp.start_offset} · end ${sp.end_offset} · high watermark ${sp.high_watermark} · lag ${sp.lag}`));
  const counts = el("div", { class: "counts" });
  for (const state of ["available", "acquired", "acknowledged", "archived"]) {
    counts.append(el("span", { class: "count", "data-state": state.toUpperCase() }, `${state} `, el("b", {}, sp[state])));
  }
  card.append(counts, renderWindow(sp));
  if (sp.ranges_truncated) card.append(el("p", { class: "muted" }, `first ${sp.ranges.length} ranges shown`));
  card.append(table(["first", "last", "state", "delivery count", "member", "lock left (ms)"], sp.ranges.map((r) =>
    row([r.first, r.last, r.state, r.delivery_count, r.member || "", r.lock_deadline_ms === null ? "" : Math.max(0, r.lock_deadline_ms - sp.now_ms)],
      { class: "range", "data-state": r.state, "data-member": r.member, "data-first": r.first, "data-last": r.last,
        "data-delivery-count": r.delivery_count }))));
  return card;
}

function renderDlq(d) {
  const card = el("div", { class: "card dlq", "data-group": d.group },
    el("h3", {}, "group ", el("code", {}, d.group), " → ", el("code", {}, d.topic), d.exists ? "" : " (topic not created yet)"));
  card.append(table(["partition", "offset", "timestamp", "source", "delivery count", "message"], d.records.map((r) => {
    const h = r.headers;
    const source = `${h["__dlq.errors.topic"] || "?"}-${h["__dlq.errors.partition"] || "?"}@${h["__dlq.errors.offset"] || "?"}`;
    return row([r.partition, r.offset, new Date(r.timestamp).toISOString(), source, h["__dlq.errors.delivery.count"] || "",
      h["__dlq.errors.message"] || ""], { class: "dlq-record", "data-source-offset": h["__dlq.errors.offset"] });
  })));
  return card;
}

async function refresh() {
  try {
    const [topics, groups] = await Promise.all([getJson("/api/topics"), getJson("/api/groups")]);
    renderTopics(topics);
    renderGroups(groups);
    const shareGroups = groups.groups.filter((g) => g.type === "share");
    // The window named in the URL's fragment (a link in the group's table) first, then the others.
    const selected = location.hash.slice(1);
    const all = shareGroups.flatMap((g) => g.share_partitions);
    const wanted = [...all.filter((s) => windowKey(s) === selected), ...all.filter((s) => windowKey(s) !== selected)]
      .slice(0, MAX_WINDOWS);
    const enc = encodeURIComponent;
    const windows = await Promise.all(wanted.map((s) =>
      getJson(`/api/share-groups/${enc(s.group)}/partitions/${enc(s.topic)}/${s.partition}`)));
    document.getElementById("share-partitions").replaceChildren(...windows.filter((w) => w).map(renderSharePartition));
    const dlqs = await Promise.all(shareGroups.filter((g) => g.dlq_topic).slice(0, MAX_DLQS)
      .map((g) => getJson(`/api/share-groups/${enc(g.group_id)}/dlq`)));
    document.getElementById("dlqs").replaceChildren(...dlqs.filter((d) => d).map(renderDlq));
    document.getElementById("refreshed").textContent = new Date().toLocaleTimeString();
    document.getElementById("error").hidden = true;
    document.body.dataset.loaded = "true";
  } catch (err) {
    const banner = document.getElementById("error");
    banner.textContent = String(err);
    banner.hidden = false;
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

document.getElementById("max-windows").textContent = MAX_WINDOWS;
refresh();
