// tidelog dashboard: renders the snapshot the page embeds, then every snapshot the
// node pushes over Server-Sent Events (/v1/dashboard/events, about once a second).
// If the feed goes quiet or fails, the page says so and tries the other brokers it
// knows from the last snapshot, in turn, with backoff; their feeds allow cross-origin
// reads. Hand-written, no dependencies; sparklines are inline SVG.
"use strict";
(() => {
  const main = document.getElementById("main");
  const view = main.dataset.view;
  const detail = view === "partition"
    ? { topic: main.dataset.topic, partition: Number(main.dataset.partition) } : null;
  const pushMs = Number(main.dataset.pushIntervalMs) || 1000;
  const STALE_MS = 5 * pushMs; // no snapshot for this long: the connection is lost (a hung node)
  const conn = document.getElementById("conn");
  const connText = document.getElementById("conn-text");

  let brokers = [];            // from the last snapshot: [{id, url, status, reachable}]
  let current = location.origin;
  let source = null;
  let lastMsg = 0;
  let attempt = 0;
  let retryTimer = null;
  let lostFrom = null;         // URL whose feed was lost, until another one delivers
  let lastSnap = null;
  let linkBase = "";           // "" while served by the page's own node, else that broker's URL

  // ---- helpers -------------------------------------------------------------------------
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
  const num = (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"));
  const list = (xs) => (xs && xs.length ? xs.join(", ") : "none");
  const ago = (ms) => (ms === null || ms === undefined ? "—" : `${num(ms)} ms ago`);
  const rate = (r) => (r === null || r === undefined ? "—" : `${num(Math.round(r))}/s`);
  const clock = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  const pkey = (t, p) => `${t}/${p}`;
  const plural = (n, word) => `${num(n)} ${word}${n === 1 ? "" : "s"}`;
  const partHref = (t, p) => `${linkBase}/topics/${encodeURIComponent(t)}/partitions/${p}`;

  // Replace an element's content only when it changed, keeping keyboard focus on the
  // element with the same data-fid (links are re-created, focus must not jump away).
  function setHTML(el, html) {
    if (el._html === html) return;
    const active = document.activeElement;
    const fid = active && el.contains(active) ? active.dataset.fid : undefined;
    el.innerHTML = html;
    el._html = html;
    if (fid !== undefined) {
      const again = el.querySelector(`[data-fid="${CSS.escape(fid)}"]`);
      if (again) again.focus();
    }
  }

  // Keyed rows: add, update (only if changed), remove, keep order.
  function patchRows(tbody, rows) {
    const have = new Map();
    for (const tr of Array.from(tbody.rows)) have.set(tr.dataset.key, tr);
    let prev = null;
    for (const [key, attrs, html] of rows) {
      let tr = have.get(key);
      have.delete(key);
      if (!tr) {
        tr = document.createElement("tr");
        tr.dataset.key = key;
      }
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null) tr.removeAttribute(k);
        else if (tr.getAttribute(k) !== v) tr.setAttribute(k, v);
      }
      setHTML(tr, html);
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== tr) tbody.insertBefore(tr, want);
      prev = tr;
    }
    for (const tr of have.values()) tr.remove();
  }

  function table(id, caption, heads, extraClass = "") {
    const th = heads.map((h) => `<th scope="col">${h}</th>`).join("");
    return `<div class="scroll ${extraClass}" role="region" tabindex="0" aria-labelledby="${id}-cap">
      <table id="${id}"><caption id="${id}-cap">${caption}</caption>
      <thead><tr>${th}</tr></thead><tbody></tbody></table></div>`;
  }

  function badge(kind, icon, text) {
    return `<span class="badge ${kind}"><span aria-hidden="true">${icon}</span> ${esc(text)}</span>`;
  }

  function partitionStatus(p) {
    if (p.status === "offline") return badge("bad", "✖", "offline");
    if (p.status === "election") return badge("warn", "…", "electing");
    if (p.under_replicated) return badge("warn", "⚠", "under-replicated");
    return badge("ok", "✓", "online");
  }

  // Lag bar: log scale, empty when caught up, full at a million records behind.
  function lagBar(lag) {
    const pct = !lag ? 0 : Math.min(100, 8 + (92 * Math.log10(1 + lag)) / 6);
    return `<span class="bar" aria-hidden="true"><span style="width:${pct.toFixed(1)}%"></span></span>`;
  }

  function replicaLine(p, r) {
    const role = r.broker === p.leader ? "leader" : "follower";
    const flags = [
      r.in_sync ? "in ISR" : "out of ISR",
      r.live ? "live" : "not live",
    ];
    const cls = !r.live ? "bad" : r.in_sync ? "ok" : "warn";
    return `<li class="rep ${cls}" data-broker="${r.broker}"><span class="rep-id">${r.broker}</span>
      <span class="rep-txt">${role} · ${flags.join(" · ")} · LEO ${num(r.log_end_offset)}
      · lag ${num(r.lag)} · fetched ${ago(r.last_fetch_ms)}</span>${lagBar(r.lag)}</li>`;
  }

  // ---- cluster header ------------------------------------------------------------------
  const clusterEl = document.getElementById("cluster");
  function renderCluster(s) {
    const c = s.cluster;
    if (!clusterEl._built) {
      clusterEl.innerHTML = `<dl class="facts" id="facts"></dl>` + table("brokers", "Brokers",
        ["Broker", "Status", "Zone", "Broker epoch", "Last heartbeat", "Role", "Leads", "URL"]);
      clusterEl._built = true;
    }
    const ctl = c.controller;
    setHTML(document.getElementById("facts"), [
      ["Cluster id", c.cluster_id ?? "—"],
      ["Active controller", ctl.node_id ?? "none"],
      ["Raft leader", ctl.raft_leader ?? (ctl.mode === "standalone" ? "standalone" : "unknown")],
      ["Metadata version", num(c.metadata_version)],
      ["Served by", `node ${c.node.id}`],
      ["Updated", clock(s.time_ms)],
    ].map(([k, v]) => `<div><dt>${k}</dt><dd data-field="${esc(k.toLowerCase().replace(/ /g, "-"))}">${esc(v)}</dd></div>`).join(""));
    patchRows(clusterEl.querySelector("#brokers tbody"), c.brokers.map((b) => {
      let st = b.status === "alive" ? badge("ok", "✓", "alive") : badge("bad", "✖", "fenced");
      if (b.reachable === false) st += " " + badge("warn", "⚠", `unreachable from node ${c.node.id}`);
      const role = (b.id === ctl.node_id ? "active controller" : b.voter ? "voter" : "observer");
      return [String(b.id), { class: b.status === "alive" ? null : "row-bad" },
        `<th scope="row">${b.id}</th><td data-field="status">${st}</td><td>${esc(b.zone ?? "—")}</td>
         <td>${num(b.broker_epoch)}</td><td>${ago(b.last_heartbeat_ms)}</td><td>${role}</td>
         <td>${b.leads ?? "—"}</td><td class="url">${esc(b.url)}</td>`];
    }));
  }

  // ---- overview ------------------------------------------------------------------------
  const topicsEl = document.getElementById("topics");
  const summaryEl = document.getElementById("summary");
  const filterTopic = document.getElementById("filter-topic");
  const filterProblems = document.getElementById("filter-problems");
  // What matters most first: on a phone the first columns are what fits on screen.
  const PCOLS = ["Partition", "Status", "Leader", "ISR", "LRS", "HW", "LEO", "In", "Log start",
    "Leader epoch", "Partition epoch", "Replicas", "Replica progress"];

  function configText(cfg) {
    return Object.entries(cfg).map(([k, v]) =>
      `<div><dt>${esc(k)}</dt><dd>${esc(v === null ? "none" : v)}</dd></div>`).join("");
  }

  function partitionRow(t, p) {
    const problem = p.status === "offline" ? "row-bad" : (p.under_replicated || p.status !== "online") ? "row-warn" : null;
    const reps = p.replica_states.length
      ? `<ul class="reps">${p.replica_states.map((r) => replicaLine(p, r)).join("")}</ul>` : "—";
    return [pkey(t.name, p.partition), { class: problem, "data-problem": problem ? "1" : null },
      `<th scope="row"><a data-fid="p:${esc(pkey(t.name, p.partition))}" href="${partHref(t.name, p.partition)}">${p.partition}</a></th>
       <td data-field="status">${partitionStatus(p)}</td>
       <td data-field="leader">${p.leader ?? "none"}</td>
       <td data-field="isr">${list(p.isr)}</td>
       <td data-field="lrs">${list(p.lrs)}</td>
       <td data-field="hw">${num(p.high_watermark)}</td>
       <td data-field="leo">${num(p.log_end_offset)}</td>
       <td data-field="rate">${rate(p.records_per_s)}</td>
       <td data-field="lso">${num(p.log_start_offset)}</td>
       <td data-field="leader-epoch">${num(p.leader_epoch)}</td>
       <td data-field="partition-epoch">${num(p.partition_epoch)}</td>
       <td data-field="replicas">${list(p.replicas)}</td>
       <td class="progress">${reps}</td>`];
  }

  function renderTopics(s) {
    const sm = s.summary;
    setHTML(summaryEl, `${plural(sm.topics, "topic")}, ${plural(sm.partitions, "partition")}: ` +
      `<strong>${num(sm.under_replicated)} under-replicated</strong>, <strong>${num(sm.offline)} offline</strong>.`);
    const q = (filterTopic?.value || "").trim().toLowerCase();
    const onlyProblems = !!filterProblems?.checked;
    if (!s.topics.length) {
      setHTML(topicsEl, "<p>No topics yet.</p>");
      topicsEl._built = false;
      return;
    }
    if (!topicsEl._built) { topicsEl.innerHTML = ""; topicsEl._html = undefined; topicsEl._built = true; }
    const seen = new Set();
    let prev = null;
    for (const t of s.topics) {
      const id = "t-" + t.name.replace(/[^A-Za-z0-9_-]/g, "_");
      seen.add(id);
      let sec = document.getElementById(id);
      if (!sec) {
        sec = document.createElement("section");
        sec.id = id;
        sec.className = "topic";
        sec.setAttribute("aria-labelledby", id + "-h");
        sec.innerHTML = `<h3 id="${id}-h"></h3><details class="config"><summary>Configuration</summary>
          <dl class="facts"></dl></details>` + table(id + "-p", `Partitions of topic ${esc(t.name)}`, PCOLS);
      }
      const want = prev ? prev.nextSibling : topicsEl.firstChild;
      if (want !== sec) topicsEl.insertBefore(sec, want);
      prev = sec;
      const bad = t.partitions.filter((p) => p.under_replicated || p.status !== "online").length;
      setHTML(sec.querySelector("h3"), `${esc(t.name)} <span class="muted">· ${plural(t.partition_count, "partition")} · RF ${t.replication_factor}` +
        (bad ? ` · <span class="warn-text">${bad} with problems</span>` : "") + "</span>");
      setHTML(sec.querySelector("dl"), configText(t.config));
      const rows = t.partitions.map((p) => partitionRow(t, p))
        .filter((r) => !onlyProblems || r[1]["data-problem"]);
      patchRows(sec.querySelector("tbody"), rows);
      sec.hidden = (q && !t.name.toLowerCase().includes(q)) || rows.length === 0;
    }
    for (const sec of Array.from(topicsEl.querySelectorAll("section.topic"))) {
      if (!seen.has(sec.id)) sec.remove();
    }
  }

  // ---- partition detail ----------------------------------------------------------------
  const KINDS = {
    leader_change: "Leader change", unclean_election: "⚠ Unclean election", isr_shrink: "ISR shrink",
    isr_expand: "ISR expand", truncation: "Truncation", recovery_truncation: "Recovery truncation",
  };

  function eventDetail(e) {
    const d = e.detail || {};
    if (e.kind === "isr_shrink" || e.kind === "isr_expand") return `ISR ${list(d.old_isr)} → ${list(d.new_isr)}`;
    if (e.kind === "leader_change" || e.kind === "unclean_election") {
      return `leader ${d.leader ?? "none"}, ISR ${list(d.isr)}, ${esc(d.status ?? "")}`;
    }
    if (e.kind === "truncation") return `LEO ${num(d.from_leo)} → ${num(d.to_offset)}`;
    if (e.kind === "recovery_truncation") return `${num(d.bytes_truncated)} bytes`;
    return "";
  }

  function sparkline(label, values, times, unit) {
    if (!values || values.length < 2) return `<figure class="spark"><figcaption>${label}: not enough samples yet</figcaption></figure>`;
    const w = 300, h = 60;
    const lo = Math.min(...values), hi = Math.max(...values);
    const span = hi - lo || 1;
    const pts = values.map((v, i) => `${((i / (values.length - 1)) * w).toFixed(1)},${(h - 2 - ((v - lo) / span) * (h - 4)).toFixed(1)}`).join(" ");
    const mins = Math.round((times[times.length - 1] - times[0]) / 60000 * 10) / 10;
    const last = values[values.length - 1];
    const summary = `${label}, last ${mins} min: now ${num(Math.round(last))}${unit}, min ${num(Math.round(lo))}, max ${num(Math.round(hi))}`;
    return `<figure class="spark"><svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img" aria-label="${esc(summary)}">
      <polyline points="${pts}" fill="none" stroke="currentColor" stroke-width="1.5" vector-effect="non-scaling-stroke"/></svg>
      <figcaption>${esc(summary)}</figcaption></figure>`;
  }

  function renderDetail(s) {
    const d = s.detail;
    const pstate = document.getElementById("pstate");
    const t = s.topics[0];
    const p = t && t.partitions[0];
    if (!d || !d.found || !p) {
      setHTML(pstate, "<p>This partition does not exist (any more).</p>");
      return;
    }
    if (!pstate._built) {
      pstate.innerHTML = `<div id="pfacts"></div>` + table("preps", "Replicas",
        ["Broker", "Role", "In ISR", "Live (LRS)", "LEO", "Lag (records)", "Last fetch", "Lag bar"]);
      pstate._built = true;
    }
    const facts = [
      ["Status", partitionStatus(p)], ["Leader", p.leader ?? "none"], ["Replicas", list(p.replicas)],
      ["ISR", list(p.isr)], ["LRS", list(p.lrs)], ["Leader epoch", num(p.leader_epoch)],
      ["Partition epoch", num(p.partition_epoch)], ["Log start offset", num(p.log_start_offset)],
      ["High watermark", num(p.high_watermark)], ["Log end offset", num(p.log_end_offset)],
      ["Records in", rate(p.records_per_s)], ["Offsets from", p.state_from === null ? "—" : `broker ${p.state_from}`],
    ];
    setHTML(document.getElementById("pfacts"), `<table class="kv" id="pfacts-t"><caption>State of ${esc(t.name)}/${p.partition}</caption><tbody>` +
      facts.map(([k, v]) => `<tr><th scope="row">${k}</th><td data-field="${k.toLowerCase().replace(/ /g, "-")}">${v}</td></tr>`).join("") + "</tbody></table>");
    patchRows(pstate.querySelector("#preps tbody"), p.replica_states.map((r) => [String(r.broker),
      { class: !r.live ? "row-bad" : r.in_sync ? null : "row-warn" },
      `<th scope="row">${r.broker}</th><td>${r.broker === p.leader ? "leader" : "follower"}</td>
       <td data-field="in-sync">${r.in_sync ? badge("ok", "✓", "yes") : badge("warn", "✖", "no")}</td>
       <td data-field="live">${r.live ? badge("ok", "✓", "yes") : badge("bad", "✖", "no")}</td>
       <td data-field="leo">${num(r.log_end_offset)}</td><td data-field="lag">${num(r.lag)}</td>
       <td>${ago(r.last_fetch_ms)}</td><td>${lagBar(r.lag)}</td>`]));
    const hist = d.history;
    document.getElementById("spark-src").textContent = hist ? `(sampled every ${hist.step_ms / 1000} s by leader ${d.history_from})` : "";
    setHTML(document.getElementById("sparks"), hist
      ? sparkline("Records in per second", hist.records_per_s, hist.time_ms, "/s")
        + sparkline("High watermark", hist.high_watermark, hist.time_ms, "")
        + sparkline("Largest follower lag (records)", hist.max_lag, hist.time_ms, "")
      : "<p>No samples: the partition has no reachable leader right now.</p>");
    const ev = document.getElementById("events");
    if (!ev._built) {
      ev.innerHTML = table("evt", "Events, newest first", ["Time", "Event", "Leader epoch", "Reason", "Details", "Recorded by"]);
      ev._built = true;
    }
    patchRows(ev.querySelector("tbody"), d.events.map((e, i) => [`${e.ts_ms}-${e.kind}-${i}`,
      { class: e.kind === "unclean_election" || e.kind === "truncation" ? "row-warn" : null },
      `<th scope="row"><time datetime="${new Date(e.ts_ms).toISOString()}">${clock(e.ts_ms)}</time></th>
       <td data-field="kind">${esc(KINDS[e.kind] || e.kind)}</td><td>${num(e.leader_epoch)}</td>
       <td>${esc(e.reason)}</td><td>${eventDetail(e)}</td><td>${list(e.brokers)}</td>`]));
  }

  // ---- push subscriptions ----------------------------------------------------------------
  const subsEl = document.getElementById("subs");
  function subState(x) {
    if (x.state === "paused") return badge("warn", "‖", "paused");
    if (x.state === "failing") return badge("bad", "✖", `failing (attempt ${x.attempts})`);
    if (x.dead_lettered) return badge("warn", "⚠", "delivering, some dead-lettered");
    return badge("ok", "✓", "delivering");
  }
  function renderSubscriptions(s) {
    if (!subsEl) return;
    const subs = s.subscriptions || [];
    if (!subs.length) { setHTML(subsEl, "<p>No push subscriptions.</p>"); subsEl._built = false; return; }
    if (!subsEl._built) {
      subsEl.innerHTML = table("subs-t", "Push subscriptions and their delivery status",
        ["Subscription", "Topic", "Target", "State", "Lag (records)", "Delivered", "Dead-lettered",
         "Last success", "Last error"]);
      subsEl._html = undefined;
      subsEl._built = true;
    }
    patchRows(subsEl.querySelector("#subs-t tbody"), subs.map((x) => {
      const err = x.last_error ? `${esc(x.last_error)} (${ago(x.last_error_ago_ms)})` : "—";
      const warn = x.state === "paused" || x.dead_lettered > 0;
      return [x.id, { class: x.state === "failing" ? "row-bad" : warn ? "row-warn" : null,
                      "data-sub": x.id },
        `<th scope="row">${esc(x.id)}</th><td>${esc(x.topic)}</td><td class="url">${esc(x.target)}</td>
         <td data-field="state">${subState(x)}</td><td data-field="lag">${num(x.lag)}</td>
         <td data-field="delivered">${num(x.delivered)}</td>
         <td data-field="dead-lettered">${num(x.dead_lettered)}${x.dead_lettered ? ` → ${esc(x.dead_letter_topic)}` : ""}</td>
         <td data-field="last-success">${ago(x.last_success_ago_ms)}</td><td data-field="last-error">${err}</td>`];
    }));
  }

  // ---- applying a snapshot -------------------------------------------------------------
  function apply(s, base) {
    lastSnap = s;
    brokers = s.cluster.brokers;
    linkBase = base === location.origin ? "" : base;
    for (const a of document.querySelectorAll("a[data-home]")) a.href = `${linkBase}/`;
    renderCluster(s);
    if (view === "overview") { renderTopics(s); renderSubscriptions(s); }
    else renderDetail(s);
    main.dataset.servedBy = String(s.cluster.node.id);
    main.dataset.updatedMs = String(s.time_ms);
  }

  // ---- connection ----------------------------------------------------------------------
  function setConn(state, text) {
    conn.dataset.state = state;
    if (connText.textContent !== text) connText.textContent = text;
  }

  function feedUrl(base) {
    const q = detail ? `?topic=${encodeURIComponent(detail.topic)}&partition=${detail.partition}` : "";
    return `${base}/v1/dashboard/events${q}`;
  }

  function connect(base) {
    clearTimeout(retryTimer);
    if (source) source.close();
    current = base;
    lastMsg = Date.now();
    const es = new EventSource(feedUrl(base));
    source = es;
    es.onmessage = (ev) => {
      if (es !== source) return;
      let snap;
      try { snap = JSON.parse(ev.data); } catch { return; }
      lastMsg = Date.now();
      attempt = 0;
      lostFrom = null;
      setConn("live", `Live: updated every second by node ${snap.cluster.node.id} (${base})`);
      apply(snap, base);
    };
    es.onerror = () => { if (es === source) lost(); };
  }

  function candidates() {
    const urls = brokers.filter((b) => b.status === "alive").map((b) => b.url)
      .concat(brokers.filter((b) => b.status !== "alive").map((b) => b.url));
    if (!urls.includes(location.origin)) urls.push(location.origin);
    return urls;
  }

  function lost() {
    if (source) { source.close(); source = null; }
    if (lostFrom === null) lostFrom = current;
    const urls = candidates();
    const i = urls.indexOf(current);
    const next = urls[(i + 1) % urls.length];
    attempt += 1;
    // One quick pass over the brokers, then back off (0.5, 1, 2, 4, 8 s per round).
    const round = Math.floor((attempt - 1) / urls.length);
    const delay = round === 0 ? 250 : Math.min(500 * 2 ** (round - 1), 8000);
    setConn("lost", `Connection to ${lostFrom} lost — reconnecting to ${next} (attempt ${attempt})…`);
    retryTimer = setTimeout(() => connect(next), delay);
  }

  setInterval(() => {
    if (source && Date.now() - lastMsg > STALE_MS) lost();
  }, 500);

  for (const el of [filterTopic, filterProblems]) {
    el?.addEventListener("input", () => lastSnap && renderTopics(lastSnap));
  }

  const initial = document.getElementById("initial-snapshot");
  if (initial) {
    try { apply(JSON.parse(initial.textContent), location.origin); } catch { /* the feed will fill in */ }
  }
  connect(location.origin);
})();
