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

/** Link syntax shown as the text it stands for: [[target|label]] -> label, [[target]] -> target. */
export function plainLinks(text) {
  return String(text ?? "").replace(/\[\[([^\]|]*)(?:\|([^\]]*))?\]\]/g, (_, target, label) => label || target);
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
