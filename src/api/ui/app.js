// Retrieval playground: one page over the service's own API (no framework, no build step).
// Every value from the API is written with textContent, never as HTML.
"use strict";

const API = "/internal/retrieval";
const $ = (id) => document.getElementById(id);
const KNOBS = ["max_results", "doc_top_k", "section_top_k", "topk_per_doc"];
const FILTERS = ["product", "version", "tags", "theme"];
let lastHits = [];
let lastSteps = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function credentials() {
  return { key: $("api-key").value.trim(), admin: $("admin-token").value.trim() };
}

/** Calls the API; resolves to the JSON body, or throws an Error with the API's own message. */
async function call(method, path, body, token) {
  const headers = { accept: "application/json" };
  const bearer = token ?? credentials().key;
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new Error(`the service cannot be reached (${error.message})`);
  }
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!response.ok) {
    const detail = json?.error ? `${json.error.code}: ${json.error.message}` : (text || response.statusText);
    throw new Error(`${method} ${path} → ${response.status} ${detail}`);
  }
  return json;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function number(value, digits = 3) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
}

// ---------- URL state (shareable links; a link with a question runs it) ----------

function readUrl() {
  const params = new URLSearchParams(location.search);
  if (params.has("q")) $("query").value = params.get("q");
  for (const name of [...KNOBS, ...FILTERS, "router_mode"]) if (params.has(name)) $(name).value = params.get(name);
  return params;
}

function writeUrl(request) {
  const params = new URLSearchParams();
  params.set("tenant", request.tenant_id);
  params.set("q", request.query);
  for (const name of [...KNOBS, "router_mode"]) if (request[name] !== undefined) params.set(name, request[name]);
  for (const name of FILTERS) if ($(name).value.trim()) params.set(name, $(name).value.trim());
  history.replaceState(null, "", `${location.pathname}?${params}`);
}

// ---------- the request ----------

function buildRequest() {
  const query = $("query").value;
  if (!query.trim()) throw new Error("Type a question first.");
  const tenant = $("tenant").value;
  if (!tenant) throw new Error("Pick a tenant first (none is readable with this key?).");
  const request = { query, tenant_id: tenant, explain: true, include_steps: true };
  for (const name of KNOBS) {
    const raw = $(name).value.trim();
    if (raw) request[name] = Number(raw);
  }
  if ($("router_mode").value) request.router_mode = $("router_mode").value;
  const filters = {};
  if ($("product").value.trim()) filters.product = $("product").value.trim();
  if ($("version").value.trim()) filters.version = $("version").value.trim();
  const tags = $("tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  if (tags.length) filters.tags = tags;
  if (Object.keys(filters).length) request.filters = filters;
  if ($("theme").value.trim()) request.theme = $("theme").value.trim();
  return request;
}

async function runSearch() {
  let request;
  try { request = buildRequest(); } catch (error) { showError(error.message); return; }
  showError("");
  writeUrl(request);
  const button = $("search-button");
  button.disabled = true;
  $("summary").textContent = "Searching…";
  try {
    const answer = await call("POST", "/search", request);
    render(answer);
  } catch (error) {
    showError(error.message);
    $("summary").textContent = "The search failed; see the message above.";
  } finally {
    button.disabled = false;
  }
}

async function runContext() {
  let request;
  try { request = buildRequest(); } catch (error) { showError(error.message); return; }
  delete request.explain;
  delete request.include_steps;
  showError("");
  try {
    const answer = await call("POST", "/context", request);
    $("context-panel").hidden = false;
    $("context").textContent = answer.context || "(no context: nothing matched)";
    if (answer.system_prompt_rule) $("context").textContent += `\n\n— system prompt rule —\n${answer.system_prompt_rule}`;
  } catch (error) {
    showError(error.message);
  }
}

// ---------- rendering ----------

function render(answer) {
  lastHits = answer.hits;
  lastSteps = answer.steps ?? null;
  const count = answer.hits.length;
  $("summary").textContent =
    `${count} hit${count === 1 ? "" : "s"} (${answer.hits_level}) in ${number(answer.took_ms, 1)} ms` +
    (answer.trace_id ? ` · trace ${answer.trace_id}` : "");
  const degradations = $("degradations");
  degradations.replaceChildren(...answer.degradations.map((d) => el("div", { text: `${d.code}: ${d.message}` })));
  degradations.hidden = answer.degradations.length === 0;
  renderRouting(answer.routing);
  renderClarification(answer.clarification);
  renderHits(answer.hits);
  renderCascade(answer.steps, answer.hits);
}

function renderRouting(routing) {
  const box = $("routing");
  const scores = Object.entries(routing.scores || {}).sort((a, b) => b[1] - a[1]);
  const list = el("ul", { class: "themes" },
    scores.map(([theme, score]) => barRow(theme === routing.primary_theme ? `${theme} (primary)` : theme, score, 1)));
  const facts = el("dl", { class: "kv" },
    el("dt", { text: "mode" }), el("dd", { text: routing.mode_used }),
    el("dt", { text: "hard filter" }),
    el("dd", { text: routing.filter_applied ? `applied: ${JSON.stringify(routing.hard_filter)}` :
      routing.hard_filter ? `proposed, not applied (the hits did not agree): ${JSON.stringify(routing.hard_filter)}` : "none" }),
    el("dt", { text: "needs clarification" }), el("dd", { text: routing.requires_disambiguation ? "yes" : "no" }),
    routing.chosen_theme ? [el("dt", { text: "chosen theme" }), el("dd", { text: routing.chosen_theme })] : null,
    routing.degradation ? [el("dt", { text: "router problem" }), el("dd", { text: routing.degradation })] : null);
  box.replaceChildren(scores.length ? list : el("p", { class: "muted", text: "No theme scored." }), facts);
}

function renderClarification(clarification) {
  const box = $("clarification");
  if (!clarification) {
    box.replaceChildren(el("p", { class: "muted", text: "None offered: the question reads as clear." }));
    return;
  }
  box.replaceChildren(
    el("p", { text: clarification.question }),
    el("div", { class: "options" }, clarification.options.map((option) =>
      el("button", { type: "button", title: `search again within ${option.theme_id}`, onclick: () => {
        $("theme").value = option.theme_id;
        runSearch();
      } }, option.display_name))));
}

/** One labelled bar; `max` scales it. A `diverging` bar grows from the middle (boosts). */
function barRow(label, value, max, diverging = false, shown = number(value)) {
  const track = el("span", { class: diverging ? "bar-track diverging" : "bar-track" });
  const bar = el("span", { class: "bar" });
  if (diverging) {
    const share = Math.min(Math.abs(value) / max, 1) * 50;
    bar.classList.add(value >= 0 ? "boost-up" : "boost-down");
    bar.style.width = `${share}%`;
    bar.style.left = value >= 0 ? "50%" : `${50 - share}%`;
  } else {
    bar.style.width = `${Math.max(0, Math.min(1, (value ?? 0) / max)) * 100}%`;
  }
  track.append(bar);
  return el("li", { class: "bar-row", "data-testid": "bar" },
    el("span", { class: "bar-label", title: label, text: label }), track, el("span", { class: "bar-value", text: shown }));
}

/** The explain breakdown as bars: dense, lexical (scaled to the best lexical score of the
 * hits), fused, each boost that changed the score (neutral ones are counted), rerank, final. */
function explainChart(explain, lexicalMax) {
  if (!explain) return el("p", { class: "muted", text: "No explanation." });
  const rows = [
    barRow(`dense${explain.dense_rank ? ` #${explain.dense_rank}` : ""}`, explain.dense_score ?? 0, 1, false,
      number(explain.dense_score)),
    barRow(`lexical${explain.lexical_rank ? ` #${explain.lexical_rank}` : ""}`, explain.lexical_score ?? 0,
      lexicalMax, false, number(explain.lexical_score)),
    barRow("fused (normalised)", explain.fused_normalized, 1),
  ];
  let neutral = 0;
  for (const boost of explain.boosts) {
    if (boost.multiply !== undefined && Math.abs(boost.multiply - 1) > 1e-6) {
      rows.push(barRow(`× ${boost.rule}`, boost.multiply - 1, 0.3, true, `×${number(boost.multiply)}`));
    } else if (boost.add !== undefined && Math.abs(boost.add) > 1e-6) {
      rows.push(barRow(`+ ${boost.rule}`, boost.add, 0.3, true, `+${number(boost.add)}`));
    } else {
      neutral += 1;
    }
  }
  if (neutral) rows.push(el("li", { class: "muted", text: `${neutral} boosting rule${neutral === 1 ? "" : "s"} left the score as is` }));
  if (explain.page_evidence) {
    rows.push(barRow("+ page's 2nd section", explain.page_evidence, 0.3, true, `+${number(explain.page_evidence)}`));
  }
  if (explain.rerank_score !== null && explain.rerank_score !== undefined) rows.push(barRow("rerank", explain.rerank_score, 1));
  rows.push(barRow(explain.padded ? "final (padded)" : "final", explain.final_score, Math.max(1, explain.final_score)));
  return el("ul", { class: "chart", "data-testid": "explain-chart", "aria-label": "how the score was made" }, rows);
}

function renderHits(hits) {
  const list = $("hits");
  if (!hits.length) {
    list.replaceChildren(el("li", { class: "muted", text: "Nothing found. Try fewer filters or another tenant." }));
    return;
  }
  const lexicalMax = Math.max(1e-9, ...hits.map((hit) => hit.explain?.lexical_score ?? 0));
  list.replaceChildren(...hits.map((hit, index) => {
    const text = el("pre", { class: "text", hidden: true, "data-testid": "hit-text" });
    const path = hit.metadata.heading_path?.length ? hit.metadata.heading_path.join(" › ") : hit.title;
    return el("li", { class: "hit", "data-testid": "hit" },
      el("div", { class: "hit-head" },
        el("span", { class: "pill", text: `#${index + 1} ${hit.level}` }),
        el("span", { class: "hit-title", text: hit.title }),
        hit.metadata.theme_label ? el("span", { class: "pill theme", text: hit.metadata.theme_label }) : null,
        el("span", { class: "score", title: "final score (relevance before boosts in brackets)",
          text: `${number(hit.score)} (${number(hit.relevance)})` })),
      el("div", { class: "hit-path", text: `${path} · ${hit.metadata.url || hit.metadata.source}` }),
      el("div", { class: "hit-body" },
        el("div", {},
          el("p", { class: "summary-text", text: hit.summary }),
          el("div", { class: "hit-actions" },
            el("button", { type: "button", onclick: () => showWindow(hit, text) }, "Chunk window"),
            /^https?:\/\//.test(hit.metadata.url) ? el("a", { href: hit.metadata.url, target: "_blank", rel: "noopener" }, "Open page") : null),
          text),
        explainChart(hit.explain, lexicalMax)));
  }));
}

/** The anchor chunk of a hit: its own chunk, else the first chunk of its section in the steps. */
function anchorChunk(hit) {
  if (hit.chunk_id) return hit.chunk_id;
  const prefix = hit.section_id ? `${hit.section_id}-` : `${hit.doc_id}#`;
  const chosen = (lastSteps?.chunks ?? []).find((chunk) => chunk.id.startsWith(prefix));
  return chosen ? chosen.id : `${hit.section_id ?? `${hit.doc_id}#s0`}-c0`;
}

async function showWindow(hit, box) {
  box.hidden = false;
  box.textContent = "Loading…";
  try {
    const answer = await call("POST", "/chunks/window", {
      tenant_id: $("tenant").value, doc_id: hit.doc_id, anchor_chunk_id: anchorChunk(hit), window_before: 1, window_after: 1,
    });
    box.textContent = answer.chunks.map((chunk) => `[${chunk.chunk_id}]\n${chunk.text}`).join("\n\n");
  } catch (error) {
    box.textContent = `Could not load the text: ${error.message}`;
  }
}

function renderCascade(steps, hits) {
  const kept = new Set(hits.map((hit) => hit.id));
  const fill = (id, items, padded = new Set()) => {
    const list = $(id);
    if (!items?.length) {
      list.replaceChildren(el("li", { class: "muted", text: "—" }));
      return;
    }
    list.replaceChildren(...items.map((item) => el("li", {
      class: [kept.has(item.id) ? "kept" : "", padded.has(item.id) ? "padded" : ""].join(" ").trim() || null,
      title: item.id,
      text: `${number(item.score)} ${item.title}${item.level !== "doc" && item.metadata.heading ? ` › ${item.metadata.heading}` : ""}` +
        `${padded.has(item.id) ? " (padded)" : ""}${kept.has(item.id) ? " ✓" : ""}`,
    })));
  };
  if (!steps) {
    for (const id of ["cascade-docs", "cascade-sections", "cascade-chunks"]) fill(id, []);
    return;
  }
  fill("cascade-docs", steps.docs, new Set(steps.padded_doc_ids));
  fill("cascade-sections", steps.sections);
  fill("cascade-chunks", steps.chunks);
  if (steps.fallback_used) $("summary").textContent += " · answered by the text fallback";
}

// ---------- config ----------

async function loadConfig() {
  try {
    const config = await call("GET", "/config");
    const editable = Boolean(credentials().admin);
    $("config").replaceChildren(...Object.entries(config).map(([key, value]) => {
      const input = typeof value === "boolean"
        ? el("select", { name: key, disabled: !editable }, el("option", { value: "true", selected: value }, "true"),
          el("option", { value: "false", selected: !value }, "false"))
        : el("input", { name: key, value, disabled: !editable, "data-kind": typeof value });
      return el("label", {}, key, input);
    }));
    $("config-save").hidden = !editable;
    $("config-note").textContent = editable
      ? "Changes apply to every tenant's searches at once."
      : "Read-only: enter the admin token (Credentials) to change it for every tenant.";
  } catch (error) {
    $("config").replaceChildren(el("p", { class: "error", text: error.message }));
  }
}

async function saveConfig(event) {
  event.preventDefault();
  const patch = {};
  for (const field of $("config").querySelectorAll("input, select")) {
    if (field.tagName === "SELECT") patch[field.name] = field.value === "true";
    else patch[field.name] = field.dataset.kind === "number" ? Number(field.value) : field.value;
  }
  try {
    await call("POST", "/config", patch, credentials().admin);
    showError("");
    await loadConfig();
  } catch (error) {
    showError(error.message);
  }
}

// ---------- start-up ----------

async function loadTenants(wanted) {
  const select = $("tenant");
  try {
    const answer = await call("GET", "/tenants");
    select.replaceChildren(...answer.tenants.map((tenant) => el("option", {
      value: tenant.tenant_id, selected: tenant.tenant_id === wanted,
    }, `${tenant.tenant_id} (${tenant.docs} docs, ${tenant.chunks} chunks)`)));
    if (!answer.tenants.length) showError("No tenant is readable with this key.");
    if (wanted && !answer.tenants.some((tenant) => tenant.tenant_id === wanted)) {
      showError(`Tenant "${wanted}" is not available: it does not exist, or this API key may not read it.`);
      return false;
    }
    return answer.tenants.length > 0;
  } catch (error) {
    select.replaceChildren();
    showError(`Tenants unavailable: ${error.message}`);
    return false;
  }
}

async function loadHealth() {
  const badge = $("health");
  try {
    const response = await fetch("/health");
    const health = await response.json();
    badge.textContent = `${health.status} · ${health.backend}${health.mock_mode ? " · mock mode" : ""}`;
    badge.className = `badge ${health.status === "ok" ? "ok" : "bad"}`;
  } catch {
    badge.textContent = "unreachable";
    badge.className = "badge bad";
  }
}

async function start() {
  for (const [id, key] of [["api-key", "retrieval.apiKey"], ["admin-token", "retrieval.adminToken"]]) {
    $(id).value = sessionStorage.getItem(key) ?? "";
    $(id).addEventListener("change", () => {
      sessionStorage.setItem(key, $(id).value.trim());
      if (id === "api-key") loadTenants($("tenant").value);
      else loadConfig();
    });
  }
  $("search-form").addEventListener("submit", (event) => { event.preventDefault(); runSearch(); });
  $("query").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      runSearch();
    }
  });
  $("context-button").addEventListener("click", runContext);
  $("config-form").addEventListener("submit", saveConfig);
  const params = readUrl();
  const [, tenantsReady] = await Promise.all([loadHealth(), loadTenants(params.get("tenant")), loadConfig()]);
  if (tenantsReady && params.get("q")?.trim()) await runSearch();
  else $("query").focus();
}

start();
