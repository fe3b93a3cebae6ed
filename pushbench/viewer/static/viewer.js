/* PushBench run viewer (MIT, see LICENSE). Plain JavaScript, no dependencies, no network.
 *
 * Data files are scripts that call PB.loaded(name, data) (a page opened from disk may not
 * fetch local files). Every value is rendered as text through DOM nodes: nothing from a
 * record is ever parsed as HTML.
 */
"use strict";
(function () {
  const PB = (window.PB = { cache: {}, pending: {} });
  const app = document.getElementById("app");
  const PAGE = 100;
  const OUTCOMES = ["success", "false_claim", "honest_stop", "premature_stop", "budget_exhausted",
    "backend_error", "tampered", "incomplete"];

  PB.loaded = function (name, data) {
    PB.cache[name] = data;
    const p = PB.pending[name];
    if (p) { delete PB.pending[name]; p.resolve(data); }
  };

  function load(name, src) {
    if (name in PB.cache) return Promise.resolve(PB.cache[name]);
    if (PB.pending[name]) return PB.pending[name].promise;
    const d = {};
    d.promise = new Promise((res, rej) => { d.resolve = res; d.reject = rej; });
    PB.pending[name] = d;
    const s = document.createElement("script");
    s.src = src;
    s.onerror = () => { delete PB.pending[name]; d.reject(new Error("cannot load " + src)); };
    s.onload = () => {
      if (PB.pending[name]) { delete PB.pending[name]; d.reject(new Error(src + " holds no " + name)); }
    };
    document.head.appendChild(s);
    return d.promise;
  }

  // ----- DOM helpers (text only) -------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "on") { for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn); }
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    append(el, kids);
    return el;
  }
  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return el;
  }
  function svg(tag, attrs) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }
  const missing = (v) => v === null || v === undefined || (typeof v === "number" && isNaN(v));
  const fmt = (v) => (missing(v) ? "-" : String(v));
  const json = (v) => JSON.stringify(v, null, 1);
  const clip = (s, n) => (s.length > n ? s.slice(0, n) + " \u2026" : s);
  const badge = (o) => h("span", { class: "badge o-" + String(o).replace(/[^a-z_]/g, "") }, o);
  const enc = encodeURIComponent;
  function show(...kids) { app.replaceChildren(); append(app, kids); window.scrollTo(0, 0); }
  function fail(err) { show(h("p", { class: "error" }, String(err && err.message || err))); }
  function num(col, v) {
    if (missing(v)) return "-";
    if (typeof v !== "number") return String(v);
    if (/rate|precision|pass\^|^success$/.test(col)) return (100 * v).toFixed(1) + "%";
    return Number.isInteger(v) ? String(v) : v.toFixed(3);
  }
  function select(label, values, current, onchange) {
    const s = h("select", { "aria-label": label, "data-filter": label, on: { change: () => onchange(s.value) } },
      h("option", { value: "" }, "all"), values.map((v) => h("option", { value: v }, v)));
    s.value = current || "";
    return h("label", {}, label + " ", s);
  }
  const arr = (x) => (Array.isArray(x) ? x : []);
  const uniq = (xs) => [...new Set(xs.filter((x) => !missing(x)).map(String))].sort(
    (a, b) => (isNaN(a) || isNaN(b) ? a.localeCompare(b) : a - b));

  // A sortable table: rows are arrays; cols [{name, label, num}]; re-renders its own body.
  function sortable(cols, rows, rowFn, attrs) {
    let key = -1, dir = 1;
    const body = h("tbody");
    const heads = cols.map((c, i) => h("th", {
      class: "sortable" + (c.num ? " num" : ""), title: "sort by " + c.label,
      on: { click: () => { dir = key === i ? -dir : 1; key = i; paint(); } } }, c.label));
    function paint() {
      heads.forEach((th, i) => th.classList.toggle("sorted-asc", i === key && dir > 0));
      heads.forEach((th, i) => th.classList.toggle("sorted-desc", i === key && dir < 0));
      const rs = key < 0 ? rows : [...rows].sort((a, b) => dir * cmp(a[key], b[key]));
      body.replaceChildren(...rs.map(rowFn));
    }
    paint();
    return h("div", { class: "scroll" }, h("table", attrs || {}, h("thead", {}, h("tr", {}, heads)), body));
  }
  function cmp(a, b) {
    if (Array.isArray(a) && Array.isArray(b)) return cmp(a[0], b[0]) || cmp(a[1], b[1]);
    if (missing(a)) return missing(b) ? 0 : 1;
    if (missing(b)) return -1;
    return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
  }

  // ----- overview ------------------------------------------------------------------------------
  function overview(ov) {
    const info = ov.info;
    const exp = (info && info.experiment) || {};
    const facts = h("dl", { class: "facts" });
    const fact = (k, ...v) => append(facts, [h("dt", {}, k), h("dd", {}, ...v)]);
    fact("run folder", h("code", {}, ov.run_dir));
    if (info) {
      const git = info.git;
      fact("revision", git ? [h("code", {}, git.commit), git.dirty ? " (uncommitted changes)" : ""] : "unknown (not a git checkout)");
      if (info.other_revisions && info.other_revisions.length) fact("resumed under", info.other_revisions.join(", "));
      fact("versions", Object.entries(info.packages || {}).map(([k, v]) => k + " " + fmt(v)).join(", "));
      fact("invocations", fmt(info.invocations));
    } else fact("manifest", "none: counts come from the episode lines alone");
    const counts = [["finished episodes (lines)", ov.n_episodes]];
    if (info) {
      counts.unshift(["planned", info.planned]);
      counts.push(["missing (planned, not finished)", info.n_missing], ["raised (errors.jsonl, not finished)", info.n_raised]);
    }
    counts.push(["backend errors (excluded from metrics)", ov.n_backend_errors],
      ["tampered (excluded from metrics)", ov.tampered.length], ["incomplete black-box runs", ov.n_incomplete]);
    const parts = [
      h("h1", {}, "Run: " + (exp.name || "episodes")),
      exp.description ? h("p", {}, exp.description) : null,
      ov.simulated_policies.length ? h("p", { class: "sim" }, "Simulated agents (mechanism-based stand-ins, not LLMs): " + ov.simulated_policies.join(", ")) : null,
      facts,
      h("h2", {}, "Episodes"),
      h("table", { id: "counts" }, h("tbody", {}, counts.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { class: "num" }, fmt(v)))))),
      h("p", {}, "Outcomes: ", OUTCOMES.concat(Object.keys(ov.outcomes).filter((o) => !OUTCOMES.includes(o)))
        .filter((o) => ov.outcomes[o]).map((o) => [h("a", { href: "#/episodes?outcome=" + enc(o) }, badge(o), " " + ov.outcomes[o]), "  "])),
      info && info.plan_problem ? h("p", { class: "note" }, "Planned episodes could not be listed: " + info.plan_problem) : null,
      listing("Missing episodes", info && info.missing, info && info.n_missing, ["key", "task_id", "instance", "policy", "controller", "seed"]),
      listing("Raised episodes (tracebacks in errors.jsonl)", info && info.raised, info && info.n_raised, ["key", "task_id", "controller", "policy", "seed", "error"]),
      listing("Tampered episodes", ov.tampered.map((t) => ({ key: h("a", { href: "#/episode/" + enc(t.file) }, t.key), task_id: t.task_id,
        reasons: (t.reasons || []).join("; ") })), ov.tampered.length, ["key", "task_id", "reasons"]),
      listing("Backend errors (the model backend failed for good; excluded from metrics)", ov.backend_errors.map((b) => ({
        key: h("a", { href: "#/episode/" + enc(b.file) }, b.key), task_id: b.task_id, error: b.error })), ov.n_backend_errors, ["key", "task_id", "error"]),
      summaryTable(ov.summary), deltaTable(ov.deltas),
      ov.condition_deltas && ov.condition_deltas.rows.length ? deltaTable(ov.condition_deltas, "condition") : null,
      figures(ov.figures)];
    show(...parts);
  }

  function listing(title, items, total, cols) {
    if (!items || !items.length) return null;
    return h("details", {}, h("summary", {}, title + " (" + total + (total > items.length ? ", first " + items.length + " listed" : "") + ")"),
      h("div", { class: "scroll" }, h("table", {}, h("thead", {}, h("tr", {}, cols.map((c) => h("th", {}, c)))),
        h("tbody", {}, items.map((it) => h("tr", {}, cols.map((c) => h("td", {}, it[c] instanceof Node ? it[c] : fmt(it[c])))))))));
  }

  function filtered(table, dims, title, id, extra) {
    const state = {};
    const idx = (c) => table.columns.indexOf(c);
    const holder = h("div");
    const present = dims.filter((d) => idx(d) >= 0);
    function paint() {
      const rows = table.rows.filter((r) => present.every((d) => !state[d] || String(r[idx(d)]) === state[d]));
      holder.replaceChildren(extra.render(rows, idx));
    }
    const bar = h("div", { class: "filters" }, present.map((d) =>
      select(d, uniq(table.rows.map((r) => r[idx(d)])), state[d], (v) => { state[d] = v; paint(); })));
    if (extra.init) extra.init(state, present);
    paint();
    return h("section", { id }, h("h2", {}, title), h("p", { class: "note" }, "Source: " + table.source), bar, holder);
  }

  function summaryTable(t) {
    if (!t || !t.rows.length) return h("section", {}, h("h2", {}, "Summary"), h("p", {}, "No episodes."));
    return filtered(t, ["family", "policy", "controller", "target"], "Summary (per family, policy, controller, target)", "summary", {
      render: (rows, idx) => sortable(t.columns.map((c) => ({ label: c, num: c !== "family" && c !== "policy" && c !== "controller" })), rows,
        (r) => h("tr", {}, r.map((v, i) => h("td", { class: typeof v === "number" ? "num" : null },
          t.columns[i] === "policy" && r[idx("simulated")] ? [v, " ", h("span", { class: "sim" }, "(simulated)")] : num(t.columns[i], v)))),
        { "data-testid": "summary-table" }) });
  }

  function deltaTable(t, side) {
    if (!t || !t.rows.length) return h("section", {}, h("h2", {}, "Paired deltas"), h("p", {}, "No controller pairs in this run."));
    const cond = side === "condition";
    const shown = ["family", "policy", "agent", "simulated", "pooled", "target", "controller", "controller_a", "controller_b", "condition_a", "condition_b", "metric", "delta",
      "ci_low", "ci_high", "ci_method", "n_better", "n_worse", "n_tied", "p_value", "testable", "p_holm", "n_pairs", "n_clusters", "mean_a", "mean_b", "confidence"].filter((c) => t.columns.includes(c));
    const title = cond ? "Condition deltas (prompt condition A minus B, matched on target, task, instance, seed)"
      : "Paired deltas (controller A minus B, matched on target, task, instance, seed)";
    return filtered(t, ["metric", "family", "policy", "agent", "pooled"], title, cond ? "condition-deltas" : "deltas", {
      render: (rows, idx) => sortable(shown.map((c) => ({ label: c, num: !["family", "policy", "agent", "controller", "controller_a", "controller_b",
        "condition_a", "condition_b", "metric", "ci_method"].includes(c) })),
        rows.map((r) => shown.map((c) => r[idx(c)])),
        (r) => h("tr", {}, r.map((v, i) => h("td", { class: typeof v === "number" ? "num" : null },
          typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : fmt(v))))) });
  }

  function figures(figs) {
    if (!figs.length) return null;
    return h("section", { class: "figs" }, h("h2", {}, "Figures"),
      figs.map((f) => h("figure", {}, h("img", { src: "figures/" + f.file, alt: f.title, loading: "lazy" }), h("figcaption", {}, f.title))));
  }

  // ----- episode list --------------------------------------------------------------------------
  function episodeList(data, query) {
    const C = Object.fromEntries(data.columns.map((c, i) => [c, i]));
    const state = Object.fromEntries(new URLSearchParams(query));
    let page = 0;
    const dims = ["family", "policy", "controller", "target", "outcome"];
    const body = h("tbody"), count = h("span", { "data-testid": "episode-count" }), pager = h("span");
    const search = h("input", { type: "search", placeholder: "task id, instance or key", "aria-label": "search", value: state.q || "",
      on: { input: () => { state.q = search.value; page = 0; paint(); } } });
    const bar = h("div", { class: "filters" }, dims.map((d) =>
      select(d, d === "outcome" ? uniq(data.rows.map((r) => r[C.outcome])) : uniq(data.rows.map((r) => r[C[d]])),
        state[d], (v) => { state[d] = v; page = 0; paint(); })), h("label", {}, "search ", search));
    const prev = h("button", { on: { click: () => { page--; paint(); } } }, "previous");
    const next = h("button", { on: { click: () => { page++; paint(); } } }, "next");
    function paint() {
      const q = (state.q || "").trim().toLowerCase();
      const rows = data.rows.filter((r) => dims.every((d) => !state[d] || String(r[C[d]]) === state[d]) &&
        (!q || [r[C.task_id], r[C.instance], r[C.key]].some((v) => String(v).toLowerCase().includes(q))));
      const pages = Math.max(1, Math.ceil(rows.length / PAGE));
      page = Math.min(Math.max(page, 0), pages - 1);
      count.textContent = rows.length + " of " + data.rows.length + " episodes";
      pager.textContent = "page " + (page + 1) + " of " + pages;
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
      body.replaceChildren(...rows.slice(page * PAGE, (page + 1) * PAGE).map(row));
      const qs = new URLSearchParams(Object.entries(state).filter(([, v]) => v)).toString();
      history.replaceState(null, "", "#/episodes" + (qs ? "?" + qs : ""));
    }
    function row(r) {
      return h("tr", { "data-testid": "episode-row", "data-key": r[C.key] },
        h("td", {}, badge(r[C.outcome])),
        h("td", {}, h("a", { href: "#/episode/" + enc(r[C.file]) }, r[C.task_id])),
        h("td", {}, fmt(r[C.instance])), h("td", {}, r[C.policy], r[C.simulated] ? [" ", h("span", { class: "sim" }, "(sim)")] : null),
        h("td", {}, r[C.controller]), h("td", { class: "num" }, fmt(r[C.target])), h("td", { class: "num" }, fmt(r[C.seed])),
        h("td", { class: "num" }, fmt(r[C.valid_count]) + " / " + fmt(r[C.target])),
        h("td", { class: "num" }, fmt(r[C.steps_used]) + " / " + fmt(r[C.budget])),
        h("td", { class: "num" }, fmt(r[C.duplicates])), h("td", { class: "num" }, fmt(r[C.interventions])),
        h("td", { class: "num" }, fmt(r[C.reported_count])), h("td", {}, fmt(r[C.terminated_by])));
    }
    const head = ["outcome", "task", "instance", "policy", "controller", "N", "seed", "verified / target", "steps / budget",
      "duplicates", "interventions", "reported", "ended by"].map((x) => h("th", {}, x));
    paint();
    show(h("h1", {}, "Episodes"), bar, h("div", { class: "pager" }, count, prev, pager, next),
      h("div", { class: "scroll" }, h("table", { id: "episodes" }, h("thead", {}, h("tr", {}, head)), body)),
      h("p", { class: "note" }, "duplicates = duplicate_submit_rate x submissions of the line; reported = the count the agent reported at final."));
  }

  // ----- one episode ---------------------------------------------------------------------------
  function verdictCounts(call) {
    const v = call.verdicts;
    if (!Array.isArray(v)) return null;
    const c = {};
    for (const x of v) { const k = Array.isArray(x) ? x[x.length - 1] : (x && x.verdict) || json(x); c[k] = (c[k] || 0) + 1; }
    const order = ["accepted", "duplicate", "rejected"];
    return Object.fromEntries(Object.entries(c).sort(([a], [b]) => cmp(order.indexOf(a) < 0 ? 9 : order.indexOf(a), order.indexOf(b) < 0 ? 9 : order.indexOf(b)) || cmp(a, b)));
  }

  function curve(rec, w, hgt) {
    const prog = Array.isArray(rec.progress) ? rec.progress : arr(rec.calls).map((c) => c && c.valid_count);
    const budget = rec.budget || prog.length || 1, target = rec.target || 0;
    const ymax = Math.max(target, ...prog.filter((x) => typeof x === "number"), 1);
    const L = 34, B = 22, W = w - L - 8, H = hgt - B - 8;
    const X = (s) => L + (W * s) / budget, Y = (v) => 8 + H - (H * v) / ymax;
    const g = svg("svg", { class: "curve", width: w, height: hgt, viewBox: "0 0 " + w + " " + hgt, role: "img",
      "aria-label": "verified count per step against target and budget" });
    const txt = (x, y, s, a) => { const t = svg("text", { x, y, "font-size": 10, fill: "#5b6576", "text-anchor": a || "start" }); t.textContent = s; g.appendChild(t); };
    g.appendChild(svg("line", { x1: L, y1: Y(0), x2: L + W, y2: Y(0), stroke: "#8893a5" }));
    g.appendChild(svg("line", { x1: L, y1: Y(target), x2: L + W, y2: Y(target), stroke: "#b3261e", "stroke-dasharray": "5 4" }));
    g.appendChild(svg("line", { x1: X(budget), y1: 8, x2: X(budget), y2: Y(0), stroke: "#8a5a00", "stroke-dasharray": "3 3" }));
    const ivSteps = new Set(arr((rec.controller || {}).steps).map((s) => s && s.step));
    for (const s of ivSteps) g.appendChild(svg("line", { x1: X(s), y1: Y(0), x2: X(s), y2: Y(0) - 6, stroke: "#d08a00", "stroke-width": 2 }));
    const pts = [[X(0), Y(0)]].concat(prog.map((v, i) => [X(i + 1), Y(v || 0)]));
    g.appendChild(svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), fill: "none", stroke: "#2456a6", "stroke-width": 2 }));
    if (typeof rec.reported_count === "number" && rec.steps_used) {  // the count claimed at final
      const ry = Y(Math.min(rec.reported_count, ymax));
      g.appendChild(svg("circle", { cx: X(rec.steps_used), cy: ry, r: 4, fill: "none", stroke: "#6a1b9a", "stroke-width": 2 }));
      txt(X(rec.steps_used) + 6, ry + 12, "reported " + rec.reported_count);
    }
    txt(L - 4, Y(target) + 3, "N=" + target, "end"); txt(L - 4, Y(0) + 3, "0", "end");
    txt(X(budget), hgt - 6, "budget " + budget, "end"); txt(L, hgt - 6, "step 0");
    return g;
  }

  function episodeFacts(page) {
    const r = page.record, pol = r.policy || {}, ctl = r.controller || {};
    const facts = h("dl", { class: "facts" });
    const fact = (k, ...v) => append(facts, [h("dt", {}, k), h("dd", {}, ...v)]);
    fact("outcome", badge(page.outcome));
    fact("verified / target", h("span", { "data-testid": "final-verified" }, fmt(r.valid_count)), " / " + fmt(r.target));
    fact("steps / budget", h("span", { "data-testid": "steps-used" }, fmt(r.steps_used)), " / " + fmt(r.budget));
    fact("ended by", fmt(r.terminated_by));
    fact("reported count at final", h("span", { "data-testid": "reported-count" }, fmt(r.reported_count)));
    const blocked = (r.metrics || {}).blocked_reported_counts;
    if (blocked && blocked.length) fact("reported counts of blocked finals", blocked.map(fmt).join(", "));
    fact("task", r.task_id, r.instance ? " (instance " + r.instance + ")" : "");
    fact("policy", pol.label || pol.name || fmt(pol), r.simulated ? [" ", h("span", { class: "sim" }, "(simulated)")] : null);
    fact("controller", fmt(ctl.name || ctl), arr(ctl.components).length ? " [" + arr(ctl.components).join(", ") + "]" : "");
    fact("seed", fmt(r.seed)); fact("family", fmt(r.family)); fact("key", h("code", {}, page.key));
    const iv = (r.metrics || {}).interventions || {};
    if (Object.keys(iv).length) fact("interventions", Object.entries(iv).map(([k, v]) => [h("span", { class: "badge iv" }, k + " " + v), " "]));
    if (r.tampered) fact("tampered", h("span", { class: "error" }, (r.tamper_reasons || []).join("; ") || "yes"));
    if (r.error) fact("error", h("pre", {}, String(r.error)));
    fact("final message", missing(r.final_message) ? "-" : h("pre", { "data-testid": "final-message" }, String(r.final_message)));
    return facts;
  }

  function llmSection(r) {
    const perStep = Array.isArray(r.transcript);
    if (!r.usage && !r.llm && !perStep) return null;
    const kv = (o) => h("table", {}, h("tbody", {}, Object.entries(o || {}).map(([k, v]) =>
      h("tr", {}, h("td", {}, k), h("td", { class: "num" }, typeof v === "object" && v !== null ? json(v) : fmt(v))))));
    return h("section", {}, h("h2", {}, "Model use"),
      r.usage ? [h("h3", {}, "Tokens and cost (episode totals)"), kv(r.usage)] : null,
      r.llm ? [h("h3", {}, "Agent loop"), kv(r.llm)] : null,
      perStep ? h("p", { class: "note" }, "Per step: the timeline's 'model tokens' column gives each model reply's token use at the step it led to; " +
        "'record' on a step shows the reply, the observation sent back and the step as recorded.")
        : h("p", { class: "note" }, "This record holds the model use of the whole episode only (written before records kept a transcript)."));
  }

  // An LLM record's transcript by step: the model replies that led to each step (a reply
  // leads to the step after the last answered one) and the message sent back for each step.
  function transcriptBySteps(events) {
    const turns = {}, answers = {}, memory = {};
    let last = 0;
    for (const e of events || []) {
      if (e && "turn" in e) (turns[last + 1] = turns[last + 1] || []).push(e);
      else if (e && !missing(e.step)) { answers[e.step] = e.message; last = Math.max(last, e.step); }
      else if (e) (memory[last + 1] = memory[last + 1] || []).push(e.message);
    }
    return { turns, answers, memory };
  }
  const msgText = (m) => (m && typeof m.content === "string" && m.content) || "";

  function timeline(r, compact) {
    const steps = Object.fromEntries(arr((r.controller || {}).steps).filter((s) => s).map((s) => [s.step, s]));
    const calls = arr(r.calls).filter((c) => c && typeof c === "object");
    const tx = Array.isArray(r.transcript) ? transcriptBySteps(r.transcript) : null;
    const perStepUsage = !!tx;
    const head = ["step", "tool", compact ? null : "arguments", "ok", "verdicts", "verified", compact ? null : "reward",
      perStepUsage ? "model tokens" : null, "controller"].filter(Boolean);
    const rows = calls.map((c) => {
      const s = steps[c.step], vc = verdictCounts(c);
      const cells = [h("td", { class: "num" }, fmt(c.step)), h("td", { class: "tool" }, fmt(c.tool))];
      if (!compact) cells.push(h("td", {}, h("code", {}, clip(c.args === undefined || c.args === null ? "-" : json(c.args).replace(/\s+/g, " "), 160))));
      cells.push(h("td", {}, c.ok ? "ok" : "no" + (c.error_type ? " (" + c.error_type + ")" : "")));
      cells.push(h("td", { class: "verdicts" }, vc ? Object.entries(vc).map(([k, n]) => h("div", {}, k + " " + n)) : ""));
      cells.push(h("td", { class: "num" }, fmt(c.valid_count)));
      if (!compact) cells.push(h("td", { class: "num" }, fmt(c.reward)));
      const turns = tx ? tx.turns[c.step] || [] : [];
      if (perStepUsage) cells.push(h("td", { class: "num", "data-testid": "step-tokens" }, turns.length ? turns.map((t) =>
        h("div", {}, "turn " + t.turn + ": " + fmt(t.prompt_tokens) + " + " + fmt(t.completion_tokens) + (t.usage_estimated ? " (est.)" : ""))) : ""));
      const ctl = h("td", {});
      if (s) {
        append(ctl, [(s.interventions || []).map((k) => [h("span", { class: "badge iv", "data-testid": "intervention" }, k), " "])]);
        if (!compact) append(ctl, [h("div", { class: "pv" },
          h("div", {}, h("div", { class: "lbl" }, "proposed"), h("pre", {}, JSON.stringify(s.proposed))),
          h("div", {}, h("div", { class: "lbl" }, "executed"), h("pre", {}, JSON.stringify(s.executed))))]);
      }
      cells.push(ctl);
      const tr = h("tr", { "data-testid": "step-row", "data-step": c.step, class: (s ? "intervened " : "") + (c.ok ? "" : "failed-call") }, cells);
      if (compact) return [tr];
      const model = tx ? [
        turns.map((t) => [h("div", { class: "lbl" }, "model reply, turn " + t.turn + " (" + fmt(t.prompt_tokens) + " prompt + " +
          fmt(t.completion_tokens) + " completion tokens, finish: " + fmt(t.finish_reason) + ")"),
          msgText(t.message) ? h("pre", { "data-testid": "model-text" }, msgText(t.message)) : null,
          t.message && Array.isArray(t.message.tool_calls) ? h("pre", { "data-testid": "tool-calls" }, t.message.tool_calls.map((tc) =>
            fmt(tc && tc.function && tc.function.name) + " " + fmt(tc && tc.function && tc.function.arguments)).join("\n")) : null]),
        (tx.memory[c.step] || []).map((m) => [h("div", { class: "lbl" }, "memory call answered before this step"), h("pre", {}, msgText(m) || json(m))]),
        h("div", { class: "lbl" }, "observation sent back to the model"),
        tx.answers[c.step] ? h("pre", { "data-testid": "observation" }, msgText(tx.answers[c.step]) || json(tx.answers[c.step]))
          : h("p", { class: "note" }, "none: the episode ended with this step, so no answer was sent")] : null;
      const detail = h("tr", { class: "step-detail", hidden: true }, h("td", { colspan: head.length + 1 },
        model, h("div", { class: "lbl" }, "the step as recorded"), h("pre", {}, json(s ? { call: c, controller: s } : { call: c }))));
      tr.appendChild(h("td", {}, h("button", { class: "show-step", title: "the step as the record holds it",
        on: { click: () => { detail.hidden = !detail.hidden; } } }, "record")));
      return [tr, detail];
    });
    if (!compact) head.push("");
    return h("div", { class: "scroll" }, h("table", { class: "timeline" }, h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))), h("tbody", {}, rows)));
  }

  function episode(page) {
    const r = page.record;
    document.title = "PushBench: " + (r.task_id || page.key);
    const sib = page.siblings || [];
    show(h("h1", {}, "Episode: " + fmt(r.task_id), " ", badge(page.outcome)),
      page.problem ? h("p", { class: "error" }, page.problem) : null,
      episodeFacts(page),
      sib.length ? h("p", {}, "Same policy, task, instance, target and seed under: ",
        sib.map((s) => [h("a", { href: "#/pair/" + (cmp(page.rank, s.rank) <= 0 ? enc(fileOf(page)) + "/" + enc(s.file) : enc(s.file) + "/" + enc(fileOf(page))),
          "data-testid": "pair-link" }, s.controller + " (side by side)"), " "])) : null,
      h("h2", {}, "Verified count per step"),
      curve(r, 720, 220),
      h("p", { class: "note" }, "Blue: verified count after each step; red dashed: target N; brown dashed: step budget; orange ticks: steps where the controller intervened; purple circle: the count the agent reported at final."),
      llmSection(r),
      h("h2", {}, "Timeline (" + arr(r.calls).length + " recorded steps)"),
      Array.isArray(r.calls) ? timeline(r, false) : h("p", {}, "This record holds no calls (no trace file)."),
      h("p", { class: "note" }, "Highlighted rows: the controller changed the proposed action (proposed and executed side by side). " +
        "'record' shows the step exactly as stored (arguments, result facts, verdicts) and, where the record holds a transcript (LLM agents), " +
        "the model's reply and the observation sent back. Records of scripted and simulated agents keep no observation text beyond these facts."));
  }
  const fileOf = (page) => page.file || page.key;

  function pair(a, b) {
    const col = (p) => h("section", {}, h("h2", {}, fmt((p.record.controller || {}).name), " ", badge(p.outcome)),
      h("p", {}, h("a", { href: "#/episode/" + enc(fileOf(p)) }, "open episode"), " \u00b7 verified ", fmt(p.record.valid_count), " / ", fmt(p.record.target),
        " \u00b7 steps ", fmt(p.record.steps_used), " / ", fmt(p.record.budget), " \u00b7 ended by ", fmt(p.record.terminated_by)),
      curve(p.record, 560, 180), timeline(p.record, true));
    show(h("h1", {}, "Paired: " + fmt(a.record.task_id) + " (seed " + fmt(a.record.seed) + ", N " + fmt(a.record.target) + ")"),
      h("p", {}, "Policy ", fmt((a.record.policy || {}).label), a.record.simulated ? " (simulated)" : ""),
      h("div", { class: "pair" }, col(a), col(b)));
  }

  // ----- leaderboard (pushbench leaderboard: one sortable table per family and target) -------------
  const pct = (v) => (missing(v) ? "-" : (100 * v).toFixed(1) + "%");
  function leaderboard(lb) {
    document.title = "PushBench leaderboard";
    const cols = [["policy", "policy"], ["controller", "controller"], ["n", "episodes", 1], ["flagged", "flagged", 1],
      ["success", "success [interval]", 1], ["pass_k", "pass^k", 1], ["precision", "precision", 1],
      ["false_claim_rate", "false claims", 1], ["steps", "steps", 1], ["cost_usd", "cost (USD)", 1],
      ["bundle", "bundle"], ["date", "date"], ["link", "run pages"]].map(([key, label, n]) => ({ key, label, num: !!n }));
    const cell = (c, r) => {
      const v = r[c.key];
      if (c.key === "policy") return [v, r.simulated ? [" ", h("span", { class: "sim" }, "(simulated)")] : null];
      if (c.key === "success") return [pct(v), missing(r.success_low) ? "" : " [" + pct(r.success_low) + ", " + pct(r.success_high) + "]"];
      if (c.key === "pass_k") return missing(v) ? "-" : "pass^" + r.k + " " + pct(v);
      if (c.key === "precision" || c.key === "false_claim_rate") return pct(v);
      if (c.key === "steps") return missing(v) ? "-" : v.toFixed(1);
      if (c.key === "cost_usd") return missing(v) ? "-" : "$" + v.toFixed(4);
      if (c.key === "bundle") return h("code", { title: r.sha256 + " (" + r.bundle_name + ")" }, v);
      if (c.key === "link") return h("a", { href: v, "data-testid": "run-link" }, "episodes");
      if (c.key === "date") return h("span", { title: fmt(v) }, missing(v) ? "-" : String(v).slice(0, 10));
      return fmt(v);
    };
    const tables = arr(lb.tables).map((t) => h("section", { class: "board", "data-family": t.family, "data-target": t.target },
      h("h2", {}, t.family + ", N = " + t.target + " (" + t.rows.length + " rows)"),
      sortable(cols, t.rows.map((r) => cols.map((c) => r[c.key]).concat([r])),
        (vals) => { const r = vals[vals.length - 1];
          return h("tr", { "data-testid": "board-row", "data-bundle": r.bundle }, cols.map((c) => h("td", { class: c.num ? "num" : null }, cell(c, r)))); },
        { "data-testid": "board" })));
    const refused = arr(lb.refused);
    show(h("h1", {}, "Leaderboard"),
      h("p", { class: "note" }, "Every number is rebuilt by replaying each bundle's calls through a fresh environment on this machine " +
        "(pushbench verify); flagged episodes (replay disagreed) are left out of every number. Success interval: over instances (clusters). " +
        "Click a column to sort."),
      tables.length ? tables : h("p", {}, "No verified bundle."),
      refused.length ? h("section", { id: "refused" }, h("h2", {}, "Refused bundles (" + refused.length + ")"),
        h("ul", {}, refused.map((b) => h("li", { "data-testid": "refused" }, h("code", {}, b.bundle), ": " + b.reason)))) : null);
  }

  // ----- routing -------------------------------------------------------------------------------
  // Only file names the site wrote (data/files.js) are ever loaded, and the path is built from
  // the list's own entry, never from the URL: a crafted #/episode/.. route loads nothing.
  function known(f) {
    return load("files", "data/files.js").then((files) => {
      if (!PB.files) PB.files = new Map(files.map((x) => [x, x]));
      const name = PB.files.get(f);
      if (name === undefined) throw new Error("this run has no episode " + JSON.stringify(String(f).slice(0, 80)));
      return name;
    });
  }
  const epFile = (f) => known(f).then((name) => load("ep:" + name, "data/ep/" + name + ".js")
    .then((p) => Object.assign({ file: name }, p)));
  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    let job;
    if (document.body.getAttribute("data-page") === "leaderboard") job = load("leaderboard", "data/leaderboard.js").then(leaderboard);
    else if (parts[0] === "episodes") job = load("episodes", "data/episodes.js").then((d) => episodeList(d, query || ""));
    else if (parts[0] === "episode" && parts[1]) job = epFile(parts[1]).then(episode);
    else if (parts[0] === "pair" && parts[2]) job = Promise.all([epFile(parts[1]), epFile(parts[2])]).then(([a, b]) => pair(a, b));
    else job = load("overview", "data/overview.js").then(overview);
    // data-ready-ms: milliseconds from navigation start (first view) or from the hash change.
    job.then(() => {
      document.body.setAttribute("data-ready-ms", (performance.now() - PB.t0).toFixed(1));
      document.body.setAttribute("data-ready", hash);
      if (document.body.getAttribute("data-page") !== "leaderboard") named();
    }, fail);
  }
  PB.t0 = 0;
  window.addEventListener("hashchange", () => {
    PB.t0 = performance.now();
    document.body.removeAttribute("data-ready");
    route();
  });
  // The header's run name, loaded after a view is shown so an episode page never waits for it.
  function named() {
    load("overview", "data/overview.js").then((ov) => {
      const n = ((ov.info || {}).experiment || {}).name;
      document.getElementById("run-name").textContent = n ? "run: " + n : ov.run_dir;
    }, () => {});
  }
  route();
})();
