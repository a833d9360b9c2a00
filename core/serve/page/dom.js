// DOM helpers. Note text is data: every string reaches the page through textContent or a
// text node, never through innerHTML, and highlighting splits text nodes around <mark>.

/** An element with attributes (never event-handler attributes) and children (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) throw new Error("no event-handler attributes: " + key);
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

const WORD = /[\p{L}\p{N}_]+/gu;

/** The lower-cased words to highlight: the query's words and what the search widened them to. */
export function highlightTerms(query, expansions = []) {
  const terms = new Set();
  for (const m of (query || "").matchAll(WORD)) if (m[0].length > 1) terms.add(m[0].toLowerCase());
  for (const e of expansions || []) for (const to of e.to || []) terms.add(String(to).toLowerCase());
  return [...terms];
}

function matches(word, terms) {
  const w = word.toLowerCase();
  // a prefix either way: "lamp" marks "lamps", and a stemmed query "harbour" marks "harbours"
  return terms.some((t) => w.startsWith(t) || (w.length >= 4 && t.startsWith(w)));
}

/** A fragment of text nodes and <mark> elements: `text` with the words matching `terms` marked. */
export function highlighted(text, terms) {
  const frag = document.createDocumentFragment();
  const s = String(text ?? "");
  if (!terms.length) {
    frag.append(document.createTextNode(s));
    return frag;
  }
  let last = 0;
  for (const m of s.matchAll(WORD)) {
    if (!matches(m[0], terms)) continue;
    if (m.index > last) frag.append(document.createTextNode(s.slice(last, m.index)));
    frag.append(el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  if (last < s.length) frag.append(document.createTextNode(s.slice(last)));
  return frag;
}

/* Link syntax shown as the text a reader of the note sees: the same rules as core.render.snippet_text
   (tests/serve/test_page_browser.py checks the two agree). */
const EMBED_SIZE = /^\d+(?:x\d+)?$/;
const URL_PART = String.raw`\((?:[^()\n]|\([^()\n]*\))*\)`;
const EMBED = /!\[\[([^\]\n]*)\]\]/g;
const WIKILINK = /\[\[([^\]\n]*)\]\]/g;
const IMAGE = new RegExp(String.raw`!\[([^\]\n]*)\]` + URL_PART, "g");
const MD_LINK = new RegExp(String.raw`\[([^\]\n]*)\]` + URL_PART, "g");
const CODE_SPAN = /(`+)[^`]+?\1/g;
const CUT_LINK_START = /^… ([^\[\]\n]*)\]\]/;
const CUT_LINK_END = /(!?)\[\[([^\]\n]*?) …$/;
const CUT_MD_END = /(!?\[[^\]\n]*\])\([^)\n]*? …$/;

function linkLabel(inner, embed = false) {
  const bar = inner.indexOf("|");
  const target = bar < 0 ? inner : inner.slice(0, bar);
  const label = bar < 0 ? "" : inner.slice(bar + 1).trim();
  if (label && !(embed && EMBED_SIZE.test(label))) return label;
  return target.split("#").map((part) => part.trim()).filter((part) => part && !part.startsWith("^")).join(" › ");
}

function linksAsText(text) {
  return text
    .replace(EMBED, (_, inner) => linkLabel(inner, true))
    .replace(WIKILINK, (_, inner) => linkLabel(inner))
    .replace(IMAGE, (_, alt) => alt)
    .replace(MD_LINK, (_, label) => label);
}

/** [[target|alias]] -> alias, [[target#heading]] -> "target › heading", ![[x]] -> x, [text](url) -> text;
    code spans stay literal, and a link cut off at either end of a snippet shows as text too. */
export function plainLinks(text) {
  let s = String(text ?? "");
  s = s.replace(CUT_LINK_START, (_, inner) => "… " + linkLabel(inner));
  s = s.replace(CUT_LINK_END, (_, bang, inner) => linkLabel(inner, Boolean(bang)) + " …");
  s = s.replace(CUT_MD_END, (_, link) => link + "() …");
  let out = "";
  let at = 0;
  for (const m of s.matchAll(CODE_SPAN)) {
    out += linksAsText(s.slice(at, m.index)) + m[0];
    at = m.index + m[0].length;
  }
  return out + linksAsText(s.slice(at));
}

/** A tag as chips of its nesting: "area/sub" gives "area" and "area/sub", each a filter. */
export function tagChips(tag, onPick) {
  const parts = String(tag).split("/");
  const wrap = el("span", { class: "tag", title: "filter by this tag" });
  parts.forEach((part, i) => {
    const value = parts.slice(0, i + 1).join("/");
    const button = el("button", { type: "button", class: "chip", dataset: { tag: value } }, (i ? "/" : "#") + part);
    button.addEventListener("click", (ev) => {
      ev.stopPropagation();
      onPick(value);
    });
    wrap.append(button);
  });
  return wrap;
}

/** The folder of a vault-relative path ("" for the root). */
export function folderOf(path) {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i + 1);
}

/** A date input's value (YYYY-MM-DD) or "". */
export function isoDay(value) {
  return /^\d{4}-\d{2}-\d{2}$/.test(value || "") ? value : "";
}
