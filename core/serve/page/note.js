// The note view: the note's lines with the hit's lines marked, its frontmatter, links to open it
// elsewhere (obsidian://, file://) and its neighbours (the related tool's links and backlinks).

import { api } from "./api.js";
import { append, clear, el, highlighted, tagChips } from "./dom.js";

const READ = { max_lines: 5000, max_bytes: 262144 };

/** "18-25" -> [18, 25]; "" or junk -> null. */
export function parseLines(text) {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text || "");
  if (!m) return null;
  const a = Number(m[1]);
  const b = m[2] ? Number(m[2]) : a;
  return a <= b ? [a, b] : null;
}

function obsidianHref(vaultName, path) {
  const file = path.replace(/\.md$/i, "");
  return `obsidian://open?vault=${encodeURIComponent(vaultName)}&file=${encodeURIComponent(file)}`;
}

function fileHref(vaultDir, path) {
  const segments = (vaultDir.replace(/\/+$/, "") + "/" + path).split("/");
  return "file://" + segments.map(encodeURIComponent).join("/");
}

function lineNodes(text, range, terms) {
  const out = [];
  for (const entry of text ? text.split("\n") : []) {
    const i = entry.indexOf(": ");
    const n = Number(i < 0 ? entry.replace(/:$/, "") : entry.slice(0, i));
    const body = i < 0 ? "" : entry.slice(i + 2);
    const hit = range && n >= range[0] && n <= range[1];
    out.push(
      el(
        "div",
        { class: hit ? "line marked" : "line", id: "L" + n, dataset: { line: n } },
        el("span", { class: "ln", "aria-hidden": "true" }, String(n)),
        el("span", { class: "text" }, highlighted(body, terms)),
      ),
    );
  }
  return out;
}

function frontmatterList(frontmatter) {
  const dl = el("dl", { class: "frontmatter" });
  for (const [key, value] of Object.entries(frontmatter || {})) {
    const shown = Array.isArray(value) ? value.join(", ") : typeof value === "object" ? JSON.stringify(value) : String(value);
    dl.append(el("dt", {}, key), el("dd", {}, shown));
  }
  return dl;
}

function neighbourList(label, items, ctx) {
  const list = el("ul", { class: "neighbours" });
  for (const item of items) {
    const link = el("a", { href: ctx.hrefFor(item.path), class: "neighbour", dataset: { path: item.path } }, item.title || item.path);
    link.addEventListener("click", (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
      ev.preventDefault();
      ctx.openNote(item.path, "");
    });
    list.append(el("li", {}, link, " ", el("span", { class: "muted" }, item.kind + (item.depth > 1 ? ` · ${item.depth} hops` : ""))));
  }
  return el("section", { class: "related" }, el("h2", {}, `${label} (${items.length})`), items.length ? list : el("p", { class: "muted" }, "none"));
}

async function loadRelated(section, path, ctx, signal) {
  try {
    const rel = await api("related", { path }, signal);
    clear(section).append(neighbourList("Links", rel.links, ctx), neighbourList("Backlinks", rel.backlinks, ctx));
    if (rel.unresolved.length) {
      section.append(el("p", { class: "muted" }, "Unresolved: ", rel.unresolved.map((u) => u.target).join(", ")));
    }
  } catch (error) {
    if (error.name !== "AbortError") clear(section).append(el("p", { class: "muted" }, "Links unavailable: " + (error.info?.reason || error.message)));
  }
}

function header(note, ctx) {
  const close = el("button", { type: "button", class: "link-button back", id: "note-close", title: "Back to the results (Esc)" }, "← Results");
  close.addEventListener("click", () => ctx.closeNote());
  const meta = el("p", { class: "meta" }, el("span", { class: "path" }, note.path));
  const fm = note.frontmatter || {};
  const type = fm.type || fm.kind;
  if (type) meta.append(" ", el("span", { class: "type" }, String(type)));
  const tags = Array.isArray(fm.tags) ? fm.tags : [];
  for (const tag of tags) meta.append(" ", tagChips(String(tag), ctx.filterTag));
  const open = el(
    "p",
    { class: "open-links" },
    el("a", { href: obsidianHref(ctx.vaultName(), note.path), class: "obsidian" }, "Open in Obsidian"),
    " · ",
    el("a", { href: fileHref(ctx.vaultDir(), note.path), class: "file", title: "a file:// link (copy it: browsers do not follow file links from a web page)" }, "File"),
  );
  return [close, el("h1", { class: "note-title" }, note.title || note.path), meta, open];
}

/** Render the note `path` into `container`, marking the file lines `lines` ("A-B"), scrolled into view. */
export async function renderNote(container, path, lines, ctx, signal) {
  container.hidden = false;
  container.dataset.state = "loading";
  container.dataset.path = path;
  const range = parseLines(lines);
  let note;
  try {
    note = await api("read_note", { path, ...READ }, signal);
  } catch (error) {
    if (error.name === "AbortError") return;
    const back = el("button", { type: "button", class: "link-button back", id: "note-close" }, "← Results");
    back.addEventListener("click", () => ctx.closeNote());
    const info = error.info || { reason: "network", message: error.message };
    clear(container).append(back, el("p", { class: "error-text", dataset: { reason: info.reason } }, `${info.message} (${info.reason})`));
    container.dataset.state = "error";
    if (error.status === 401) ctx.needToken();
    return;
  }
  ctx.freshness(note.freshness);
  document.title = `${note.title || note.path} · vaultsearch`;
  const body = el("div", { class: "lines", role: "document" }, lineNodes(note.text, range, ctx.terms()));
  const related = el("section", { class: "related-wrap" }, el("p", { class: "muted" }, "Loading links…"));
  clear(container).append(...header(note, ctx));
  if (note.changed_since_index) {
    container.append(el("p", { class: "warning" }, "This note changed since the index was built: the marked lines may have moved."));
  }
  container.append(body);
  if (note.truncated && note.next_from_line) container.append(el("p", { class: "muted" }, `Shown up to line ${note.line_end} of ${note.total_lines}.`));
  append(container, [related, el("details", { class: "fm" }, el("summary", {}, "Frontmatter"), frontmatterList(note.frontmatter))]);
  container.dataset.state = "done";
  const first = range && container.querySelector(`#L${range[0]}`);
  if (!first) container.scrollTop = 0;
  else if (container.scrollHeight > container.clientHeight) container.scrollTop = first.offsetTop - container.clientHeight / 3;
  else first.scrollIntoView({ block: "center" }); // the phone layout: the page scrolls, not the note
  await loadRelated(related, note.path, ctx, signal);
}
