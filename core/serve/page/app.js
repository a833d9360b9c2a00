// vaultsearch's search page: results as you type, state in the URL, a note view, keyboard.
// Plain ES modules, no build step; every string from the index is shown as text (dom.js).

import { ApiError, api, setToken } from "./api.js";
import { clear, el, folderOf, highlightTerms, highlighted, isoDay, plainLinks, tagChips } from "./dom.js";
import { renderNote } from "./note.js";

const $ = (id) => document.getElementById(id);
const DEBOUNCE_MS = 150;
const FILTERS = ["tag", "type", "folder", "date", "since", "until"];
const INPUTS = { tag: "f-tag", type: "f-type", folder: "f-folder", date: "f-date", since: "f-since", until: "f-until" };
const THEMES = ["auto", "light", "dark"];
const THEME_ICON = { auto: "◐", light: "☀", dark: "☾" };

let pending = null; // the AbortController of the search in flight
let noteRequest = null; // ... of the note being loaded
let timer = 0;
let ranKey = null; // the search the list shows
let hits = [];
let selected = -1;
let terms = [];
let status = null;
let retry = null; // what to run again once a token is given
const seen = { tags: new Set(), types: new Set(), folders: new Set() };

// ------------------------------------------------------------------ state <-> URL and inputs

function readUrl() {
  const p = new URLSearchParams(location.search);
  const state = { q: p.get("q") || "", mode: p.get("mode") || "auto", note: p.get("note") || "", lines: p.get("lines") || "" };
  for (const f of FILTERS) state[f] = p.get(f) || "";
  return state;
}

function readInputs() {
  const state = { q: $("q").value, mode: $("mode").value || "auto", note: $("note").hidden ? "" : $("note").dataset.path || "", lines: "" };
  for (const f of FILTERS) state[f] = $(INPUTS[f]).value.trim();
  state.since = isoDay(state.since);
  state.until = isoDay(state.until);
  return state;
}

function urlFor(state) {
  const p = new URLSearchParams();
  if (state.q) p.set("q", state.q);
  if (state.mode && state.mode !== "auto") p.set("mode", state.mode);
  for (const f of FILTERS) if (state[f]) p.set(f, state[f]);
  if (state.note) p.set("note", state.note);
  if (state.note && state.lines) p.set("lines", state.lines);
  const query = p.toString();
  return "/" + (query ? "?" + query : "");
}

function fillInputs(state) {
  $("q").value = state.q;
  if (![...$("mode").options].some((o) => o.value === state.mode)) $("mode").append(el("option", { value: state.mode }, state.mode));
  $("mode").value = state.mode;
  for (const f of FILTERS) $(INPUTS[f]).value = state[f];
  countFilters(state);
}

function countFilters(state) {
  const n = FILTERS.filter((f) => f !== "date" && state[f]).length;
  $("filter-count").textContent = n ? String(n) : "";
  if (n) $("filters").open = true;
}

const searchKey = (s) => JSON.stringify([s.q.trim(), s.mode, ...FILTERS.map((f) => s[f])]);

// ------------------------------------------------------------------ search

function searchBody(state) {
  const body = { query: state.q.trim(), mode: state.mode, max_results: 30, budget_bytes: 131072 };
  const list = (text) => text.split(",").map((t) => t.trim().replace(/^#/, "")).filter(Boolean);
  if (state.tag) body.tags_all = list(state.tag);
  if (state.type) body.note_types = list(state.type);
  if (state.folder) body.path_prefixes = list(state.folder);
  if (state.date) body.date_field = state.date;
  if (state.since) body.since = state.since;
  if (state.until) body.until = state.until;
  return body;
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(() => search(readInputs()), DEBOUNCE_MS);
}

async function search(state) {
  clearTimeout(timer);
  if (pending) pending.abort(); // a newer search replaces the one in flight
  const key = searchKey(state);
  if (!state.q.trim()) {
    pending = null;
    ranKey = key;
    showStart();
    return;
  }
  const mine = (pending = new AbortController());
  $("list").setAttribute("aria-busy", "true");
  try {
    const data = await api("search", searchBody(state), mine.signal);
    if (mine !== pending) return;
    ranKey = key;
    showResults(data, state);
  } catch (error) {
    if (error.name === "AbortError" || mine !== pending) return;
    fail(error, () => search(readInputs()));
  } finally {
    if (mine === pending) {
      $("list").removeAttribute("aria-busy");
      pending = null;
    }
  }
}

function summary(data) {
  const out = [el("span", { class: "count" }, `${data.hits.length} ${data.hits.length === 1 ? "hit" : "hits"}`), " · ran "];
  out.push(el("strong", { class: "mode", id: "actual-mode" }, data.actual_mode));
  if (data.requested_mode !== data.actual_mode) out.push(` (asked ${data.requested_mode})`);
  if (data.fallback_reason) out.push(" · ", el("span", { class: "fallback", id: "fallback" }, "fallback: " + data.fallback_reason));
  const widened = (data.query_expansions || []).map((e) => `${e.word} → ${e.to.join(", ")}`);
  if (widened.length) out.push(" · ", el("span", { class: "muted", title: "query words widened (prefix, subword, typo)" }, widened.join("; ")));
  if (data.budget && data.budget.hits_dropped) out.push(" · ", el("span", { class: "fallback" }, `${data.budget.hits_dropped} more not shown (size budget)`));
  if ((data.unmatched_words || []).length) out.push(" · ", el("span", { class: "muted" }, "no match: " + data.unmatched_words.join(", ")));
  return out;
}

function hitItem(hit, i, state) {
  const lines = `${hit.line_start}-${hit.line_end}`;
  const link = el("a", { href: urlFor({ ...state, note: hit.path, lines }), class: "hit-title" }, highlighted(hit.title || hit.path, terms));
  link.addEventListener("click", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    select(i);
    openNote(hit.path, lines);
  });
  const meta = el("p", { class: "meta" });
  const folder = folderOf(hit.path);
  if (folder) meta.append(filterButton("folder", folder, folder, "path"), hit.path.slice(folder.length));
  else meta.append(el("span", { class: "path" }, hit.path));
  if (hit.heading_path.length > 1) meta.append(" › ", el("span", { class: "heading" }, hit.heading_path.slice(1).join(" › ")));
  meta.append(` · lines ${lines}`);
  const chips = el("p", { class: "chips" });
  if (hit.note_type) chips.append(filterButton("type", hit.note_type, hit.note_type, "chip type"));
  for (const tag of hit.tags) chips.append(tagChips(tag, (t) => addFilter("tag", t)));
  return el(
    "li",
    { class: "hit", role: "option", id: "hit-" + i, "aria-selected": "false", dataset: { path: hit.path, lines } },
    link,
    meta,
    el("p", { class: "snippet" }, highlighted(plainLinks(hit.snippet), terms)),
    chips.childNodes.length ? chips : null,
  );
}

function filterButton(field, value, label, cls) {
  const button = el("button", { type: "button", class: cls, title: `filter: ${field} ${value}`, dataset: { [field]: value } }, label);
  button.addEventListener("click", (ev) => {
    ev.stopPropagation();
    addFilter(field, value);
  });
  return button;
}

function addFilter(field, value) {
  const input = $(INPUTS[field]);
  const values = field === "tag" && input.value ? input.value.split(",").map((v) => v.trim()) : [];
  input.value = [...values.filter((v) => v && v !== value), value].join(", ");
  changed(true);
}

function showResults(data, state) {
  terms = highlightTerms(data.query, data.query_expansions);
  hits = data.hits;
  selected = -1;
  $("error").hidden = true;
  $("start").hidden = true;
  clear($("summary")).append(...summary(data));
  clear($("results")).append(...hits.map((h, i) => hitItem(h, i, state)));
  if (!hits.length) $("results").append(el("li", { class: "empty" }, "No notes match."));
  $("list").dataset.state = "done";
  $("list").dataset.query = data.query;
  $("list").dataset.search = urlFor({ ...state, note: "" }); // what the list shows (tests wait for it)
  freshness(data.freshness);
  learn(hits);
  if ($("note").hidden) document.title = `${data.query} · vaultsearch`;
}

function showStart() {
  hits = [];
  selected = -1;
  $("error").hidden = true;
  clear($("results"));
  clear($("summary"));
  $("start").hidden = false;
  $("list").dataset.state = "start";
  $("list").dataset.query = "";
  $("list").dataset.search = "/";
  document.title = "vaultsearch";
}

function learn(list) {
  for (const hit of list) {
    for (const tag of hit.tags) tag.split("/").forEach((_, i, parts) => seen.tags.add(parts.slice(0, i + 1).join("/")));
    if (hit.note_type) seen.types.add(hit.note_type);
    const folder = folderOf(hit.path);
    if (folder) seen.folders.add(folder);
  }
  for (const [id, values] of [["dl-tags", seen.tags], ["dl-types", seen.types], ["dl-folders", seen.folders]]) {
    clear($(id)).append(...[...values].sort().map((v) => el("option", { value: v })));
  }
}

// ------------------------------------------------------------------ banner, errors, token

function freshness(f) {
  const banner = $("banner");
  if (!f || !f.stale) {
    banner.hidden = true;
    return;
  }
  const counts = [["changed", f.modified], ["added", f.added], ["removed", f.removed]].filter(([, n]) => n).map(([w, n]) => `${n} ${w}`);
  clear(banner).append(
    el("strong", {}, "The index is behind the vault"),
    `: ${counts.join(", ") || "notes changed"} since it was built`,
    f.sample_paths && f.sample_paths.length ? ` (${f.sample_paths.slice(0, 3).join(", ")})` : "",
    ". Results may miss or misplace them: run ",
    el("code", {}, "vaultsearch index"),
    " (or serve with ",
    el("code", {}, "--watch"),
    ").",
  );
  banner.hidden = false;
}

function fail(error, again) {
  if (error instanceof ApiError && error.status === 401) {
    needToken(again);
    return;
  }
  const info = error.info || { reason: "network", message: error.message };
  clear($("error")).append(el("strong", { dataset: { reason: info.reason } }, info.reason), ": ", info.message, info.hint ? el("span", { class: "hint" }, " — " + info.hint) : "");
  $("error").hidden = false;
  $("list").dataset.state = "error";
}

function needToken(again) {
  if (again) retry = again;
  $("token-form").hidden = false;
  $("main").hidden = true;
  $("token").focus();
}

async function submitToken(ev) {
  ev.preventDefault();
  setToken($("token").value);
  try {
    await loadStatus();
  } catch (error) {
    setToken("");
    $("token-error").textContent = error.status === 401 ? "That token was refused." : error.message;
    $("token").select();
    return;
  }
  $("token").value = "";
  $("token-error").textContent = "";
  $("token-form").hidden = true;
  $("main").hidden = false;
  document.body.dataset.ready = "true";
  const again = retry;
  retry = null;
  if (again) again();
}

// ------------------------------------------------------------------ note view and history

const noteContext = {
  terms: () => (terms.length ? terms : highlightTerms($("q").value)),
  hrefFor: (path) => urlFor({ ...readInputs(), note: path, lines: "" }),
  openNote: (path, lines) => openNote(path, lines),
  closeNote: () => closeNote(),
  filterTag: (tag) => addFilter("tag", tag),
  freshness: (f) => freshness(f),
  needToken: () => needToken(() => applyUrl()),
  vaultName: () => (status ? status.vault.split(/[\\/]/).filter(Boolean).pop() || "" : ""),
  vaultDir: () => (status ? status.vault : ""),
};

function showNote(path, lines) {
  if (noteRequest) noteRequest.abort();
  noteRequest = new AbortController();
  $("main").classList.add("reading");
  return renderNote($("note"), path, lines, noteContext, noteRequest.signal);
}

function hideNote() {
  if (noteRequest) noteRequest.abort();
  $("note").hidden = true;
  $("note").dataset.path = "";
  $("main").classList.remove("reading");
}

function openNote(path, lines) {
  history.pushState({ fromList: true }, "", urlFor({ ...readInputs(), note: path, lines }));
  showNote(path, lines);
}

function closeNote() {
  if (history.state && history.state.fromList) {
    history.back(); // popstate renders the list
    return;
  }
  hideNote();
  history.replaceState(null, "", urlFor(readInputs()));
  focusSelection();
}

function applyUrl() {
  const state = readUrl();
  fillInputs(state);
  if (searchKey(state) !== ranKey) search(state);
  if (state.note) showNote(state.note, state.lines);
  else if (!$("note").hidden) {
    hideNote();
    focusSelection();
  }
}

function changed(immediately) {
  const state = readInputs();
  if (!$("note").hidden) hideNote(); // a new search shows its results
  history.replaceState(null, "", urlFor({ ...state, note: "" }));
  countFilters(state);
  if (immediately) search(state);
  else schedule();
}

// ------------------------------------------------------------------ keyboard

function select(i) {
  const items = $("results").querySelectorAll("li.hit");
  if (!items.length) return;
  selected = Math.max(0, Math.min(items.length - 1, i));
  items.forEach((item, j) => item.setAttribute("aria-selected", j === selected ? "true" : "false"));
  $("q").setAttribute("aria-activedescendant", "hit-" + selected);
  items[selected].scrollIntoView({ block: "nearest" });
}

function focusSelection() {
  const item = selected >= 0 && $("hit-" + selected);
  (item ? item.querySelector("a") : $("q")).focus({ preventScroll: Boolean(item) });
}

function onKey(ev) {
  if (!$("token-form").hidden || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const target = ev.target;
  const inField = target.matches && target.matches("input, select, textarea");
  if (ev.key === "/" && !inField) {
    ev.preventDefault();
    $("q").focus();
    $("q").select();
  } else if (ev.key === "Escape") {
    if (!$("note").hidden) closeNote();
    else if (target === $("q")) $("q").blur();
    else $("q").focus();
    ev.preventDefault();
  } else if (inField && target !== $("q")) {
    return;
  } else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    if (!$("note").hidden && target !== $("q")) return; // the note is open: let the arrows scroll it
    ev.preventDefault();
    select(selected + (ev.key === "ArrowDown" ? 1 : -1));
  } else if (ev.key === "Enter" && hits.length && (target === $("q") || target === document.body)) {
    ev.preventDefault();
    const i = selected >= 0 ? selected : 0;
    select(i);
    openNote(hits[i].path, `${hits[i].line_start}-${hits[i].line_end}`);
  }
}

// ------------------------------------------------------------------ theme, start-up

function setTheme(theme) {
  if (theme === "auto") {
    delete document.documentElement.dataset.theme;
    localStorage.removeItem("vaultsearch.theme");
  } else {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("vaultsearch.theme", theme);
  }
  $("theme").textContent = THEME_ICON[theme];
  $("theme").title = theme === "auto" ? "Theme: follows the system (click: light)" : `Theme: ${theme} (click to change)`;
}

async function loadStatus() {
  status = await api("status");
  const count = status.coverage.indexed_notes;
  clear($("index-info")).append(
    `${count} ${count === 1 ? "note" : "notes"} indexed from `,
    el("span", { class: "path" }, status.vault),
    ` · generation ${status.generation_id}`,
    status.degraded.length ? ` · degraded: ${status.degraded.join(", ")}` : "",
  );
  freshness(status.freshness);
  try {
    const modes = await api("modes");
    const current = $("mode").value;
    clear($("mode")).append(...modes.modes.map((m) => el("option", { value: m.name, title: m.summary }, m.name)));
    $("mode").value = current;
  } catch (error) {
    if (error.status === 401) throw error;
  }
}

async function start() {
  setTheme(localStorage.getItem("vaultsearch.theme") || "auto");
  $("theme").addEventListener("click", () => {
    const now = document.documentElement.dataset.theme || "auto";
    setTheme(THEMES[(THEMES.indexOf(now) + 1) % THEMES.length]);
  });
  $("search-form").addEventListener("submit", (ev) => ev.preventDefault());
  $("token-form").addEventListener("submit", submitToken);
  $("q").addEventListener("input", () => changed(false));
  $("mode").addEventListener("change", () => changed(true));
  for (const f of FILTERS) $(INPUTS[f]).addEventListener(f === "date" || f === "since" || f === "until" ? "change" : "input", () => changed(f === "date"));
  $("f-clear").addEventListener("click", () => {
    for (const f of FILTERS) $(INPUTS[f]).value = "";
    changed(true);
  });
  $("home").addEventListener("click", (ev) => {
    ev.preventDefault();
    $("q").value = "";
    changed(true);
    $("q").focus();
  });
  document.addEventListener("keydown", onKey);
  window.addEventListener("popstate", applyUrl);
  fillInputs(readUrl());
  try {
    await loadStatus();
  } catch (error) {
    fail(error, () => applyUrl());
    return;
  }
  applyUrl();
  if (!readUrl().note) $("q").focus();
  document.body.dataset.ready = "true";
}

start();
