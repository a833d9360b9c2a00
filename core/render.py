"""Readable reports of results and status for a terminal or a notebook.

Note text is untrusted: it may hold terminal escape sequences, HTML, images or ``javascript:``
links. ``terminal_safe`` makes text safe to print (control characters and bidi overrides are
shown as ``\\xNN`` escapes, never interpreted); the notebook views show snippets as plain
readable text (``readable_text``: wikilinks as their label, Markdown links as their text, HTML
tags dropped) and escape everything they embed, so the only links are the ones added here:
one ``obsidian://`` link per hit.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import Any

from core.ranking.snippets import QueryWords
from core.terminal import UNSAFE_CODEPOINTS, terminal_safe  # noqa: F401 (here since before core.terminal)

# A default user with no dense vectors: ``auto`` runs fts; said in one line, not as an alarm.
QUIET_FALLBACKS = frozenset({"dense_index_unavailable"})
EMBED_HINT = "hint: semantic search is off (no dense vectors); enable it with: vaultsearch index VAULT --embed"

_EMBED = re.compile(r"!\[\[([^\]\n]*)\]\]")
_WIKILINK = re.compile(r"\[\[([^\]\n]*)\]\]")
_URL = r"\((?:[^()\n]|\([^()\n]*\))*\)"  # a link target, one level of parentheses inside
_IMAGE = re.compile(r"!\[([^\]\n]*)\]" + _URL)
_MD_LINK = re.compile(r"\[([^\]\n]*)\]" + _URL)
_HTML_TAG = re.compile(r"</?[A-Za-z!][^<>]*>")
_EMPHASIS = re.compile(r"(\*\*|__|~~|==|`+)")
_HEADING_MARK = re.compile(r"(?:(?<=\s)|^)#{1,6}\s+")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~=-])")


_CODE_SPAN = re.compile(r"(`+)[^`]+?\1")
_EMBED_SIZE = re.compile(r"\d+(?:x\d+)?")  # ![[image.png|300]], ![[image.png|300x200]]: a size, not a label
# a snippet window (core.ranking.snippets: "… " and " …" mark its cuts) that starts inside a wikilink,
# ends inside one, or ends inside a Markdown link's target
_CUT_LINK_START = re.compile(r"^… ([^\[\]\n]*)\]\]")
_CUT_LINK_END = re.compile(r"(!?)\[\[([^\]\n]*?) …$")
_CUT_MD_END = re.compile(r"(!?\[[^\]\n]*\])\([^)\n]*? …$")


def _link_label(inner: str, embed: bool = False) -> str:
    """What a reader sees of ``[[inner]]``: its label, else the note and heading (``note › heading``;
    a block id ``#^id`` is not shown). An embed's ``|300`` is an image size, not a label."""
    target, _, label = inner.partition("|")
    label = label.strip()
    if label and not (embed and _EMBED_SIZE.fullmatch(label)):
        return label
    parts = (part.strip() for part in target.split("#"))
    return " › ".join(part for part in parts if part and not part.startswith("^"))


def _links_as_text(text: str) -> str:
    text = _EMBED.sub(lambda m: _link_label(m.group(1), embed=True), text)
    text = _WIKILINK.sub(lambda m: _link_label(m.group(1)), text)
    text = _IMAGE.sub(lambda m: m.group(1), text)
    return _MD_LINK.sub(lambda m: m.group(1), text)


def snippet_text(markdown: str) -> str:
    """A snippet with its link syntax shown as text, as a reader of the note sees it: ``[[target|alias]]``
    as ``alias``, ``[[target#heading]]`` as ``target › heading``, ``![[x]]`` as ``x``, ``[text](url)``
    and ``![alt](url)`` as ``text``/``alt``; code spans stay literal, and a link cut off at either end
    of the snippet window shows as text too. Everything else is kept (the page does the same)."""
    text = _CUT_LINK_START.sub(lambda m: "… " + _link_label(m.group(1)), markdown)
    text = _CUT_LINK_END.sub(lambda m: _link_label(m.group(2), embed=bool(m.group(1))) + " …", text)
    text = _CUT_MD_END.sub(lambda m: m.group(1) + "() …", text)  # closed: then shown as a link
    out, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_links_as_text(text[at : span.start()]), span.group()]
        at = span.end()
    out.append(_links_as_text(text[at:]))
    return "".join(out)


def readable_text(markdown: str) -> str:
    """Markdown as plain readable text: links as :func:`snippet_text` shows them, no HTML tags, no
    emphasis or heading marks, whitespace collapsed."""
    text = snippet_text(markdown)
    text = _HTML_TAG.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _HEADING_MARK.sub("", text)
    return " ".join(html.unescape(text).split())


def _word_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end].isalnum():  # FTS5 cuts words at '_' and '-' too
        end += 1
    return end


def highlighted_html(text: str, terms: list[str]) -> str:
    """``text`` escaped for HTML, each word that starts with a query term wrapped in ``<mark>``."""
    out, at = [], 0
    for start, _term in QueryWords(list(terms), {}).matches(text):
        if start < at:
            continue
        end = _word_end(text, start)
        out += [html.escape(text[at:start]), "<mark>", html.escape(text[start:end]), "</mark>"]
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def _markdown_escape(text: str) -> str:
    """Text shown literally by a Markdown renderer: no HTML, links, images or emphasis."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _mode_label(results: Any) -> str:
    requested = results.requested_mode
    label = f"mode {results.actual_mode} (requested {requested}; contract {results.retrieval_contract})"
    reason = results.fallback_reason
    if reason and not (requested == "auto" and reason in QUIET_FALLBACKS):
        label += f" - FALLBACK: {reason}"
    return label


def _label(results: Any) -> str:
    idx = results.index
    return f"{_mode_label(results)}; index {idx.generation_id or idx.kind}, {idx.age_seconds:.0f} s old"


def _hint(results: Any) -> str | None:
    if results.requested_mode == "auto" and results.fallback_reason in QUIET_FALLBACKS:
        return EMBED_HINT
    return None


def _date_label(r: Any) -> str:
    return f"{r.date_field} {r.date[:10]}" if getattr(r, "date", None) else ""


def format_search_results(results: Any, query: str, mode: str) -> str:
    """A plain-text report, safe for a terminal: what ran, from which index, one block per hit, a hint."""
    lines = [f"{len(results)} result(s) for {query!r}: {_label(results)}"]
    for i, r in enumerate(results, start=1):
        meta = " · ".join(x for x in (r.note_type or "", " ".join(f"#{t}" for t in r.tags[:6]), _date_label(r)) if x)
        lines.append(f"\n{i:>2}. {r.title}  [{r.rel_path}]  score {r.score:.4g} ({r.score_source})")
        if meta:
            lines.append(f"    {meta}")
        if r.via:
            lines.append(f"    via {r.via.get('edge')} link ({r.via.get('direction')}) from {r.via.get('from')}")
        if r.snippet:
            lines.extend(
                textwrap.wrap(snippet_text(r.snippet), width=96, initial_indent="    ", subsequent_indent="    ")
            )
        if r.obsidian_uri:
            lines.append(f"    {r.obsidian_uri}")
    hint = _hint(results)
    if hint:
        lines.append(f"\n{hint}")
    return terminal_safe("\n".join(lines))


def results_markdown(results: Any) -> str:
    """Markdown for Jupyter: every piece of note text escaped; the only links are the hits' obsidian:// URIs."""
    head = f"**{len(results)} result(s)** for {_markdown_escape(results.query)}: {_markdown_escape(_label(results))}"
    hint = _hint(results)
    rows = ["| # | title | path | score | snippet |", "|---|---|---|---|---|"]
    for i, r in enumerate(results, start=1):
        title = _markdown_escape(r.title)
        link = f"[{title}](<{r.obsidian_uri}>)" if r.obsidian_uri.startswith("obsidian://open?") else title
        snippet = _markdown_escape(readable_text(r.snippet)[:200])
        rows.append(f"| {i} | {link} | {_markdown_escape(r.rel_path)} | {r.score:.4g} | {snippet} |")
    tail = f"\n\n_{_markdown_escape(hint)}_" if hint else ""
    return head + "\n\n" + "\n".join(rows) + tail


_CSS = (
    "<style>.vs-results{font-family:system-ui,sans-serif;max-width:60em}"
    ".vs-prov{color:#555;font-size:.9em;margin:.2em 0 .8em}.vs-hit{margin:0 0 1em}"
    ".vs-title{font-size:1.05em;font-weight:600}.vs-path{color:#666;font-size:.85em}"
    ".vs-meta{color:#777;font-size:.85em}.vs-snip{margin:.2em 0;line-height:1.4}"
    ".vs-snip mark{background:#fde68a;padding:0 .1em}.vs-hint{color:#555;font-style:italic}</style>"
)


def _hit_html(i: int, r: Any, terms: list[str]) -> str:
    esc = html.escape
    title = esc(r.title)
    if r.obsidian_uri.startswith("obsidian://open?"):
        title = f'<a href="{esc(r.obsidian_uri, quote=True)}">{title}</a>'
    meta = " · ".join(
        x for x in (esc(r.note_type or ""), esc(" ".join(f"#{t}" for t in r.tags[:6])), esc(_date_label(r))) if x
    )
    return (
        f'<div class="vs-hit"><div><span class="vs-rank">{i}.</span> <span class="vs-title">{title}</span> '
        f'<span class="vs-path"><code>{esc(r.rel_path)}</code> · score {r.score:.4g} ({esc(r.score_source)})</span></div>'
        + (f'<div class="vs-meta">{meta}</div>' if meta else "")
        + f'<div class="vs-snip">{highlighted_html(readable_text(r.snippet), terms)}</div></div>'
    )


def results_html(results: Any) -> str:
    """HTML for Jupyter: provenance line, one block per hit (title linked to Obsidian, highlighted snippet)."""
    esc = html.escape
    terms = list(getattr(results, "query_terms", ()) or ())
    hits = "".join(_hit_html(i, r, terms) for i, r in enumerate(results, start=1))
    hint = _hint(results)
    return (
        f'{_CSS}<div class="vs-results"><div class="vs-prov"><b>{len(results)} result(s)</b> for '
        f"<code>{esc(results.query)}</code>: {esc(_label(results))}</div>{hits}"
        + (f'<div class="vs-hint">{esc(hint)}</div>' if hint else "")
        + "</div>"
    )


def format_build(report: dict[str, Any], max_listed: int = 20) -> str:
    """The ``index`` text report: what changed since the last build, the problem count, the problems new in it."""
    links = f"{report['links']} links ({report['unresolved_links']} unresolved)"
    problems = f"{len(report['problems'])} problem(s)"
    if report["up_to_date"]:
        where = report["generation_id"] or report["index_kind"]
        lines = [f"up to date ({where}): {report['notes']} notes, {report['chunks']} chunks; {links}; {problems}"]
    else:
        lines = [
            f"published {report['generation_id'] or report['index_kind']}: {report['notes']} notes, "
            f"{report['chunks']} chunks; {report['added']} added, {report['changed'] - report['added']} modified, "
            f"{report['removed']} removed, {report['reused']} unchanged; {links}; {problems}; {report['seconds']:.2f} s"
        ]
    if report.get("full_rebuild_reason") == "index_identity_changed":
        lines.append(
            f"full rebuild, every note re-read: the index identity changed ({report.get('full_rebuild_detail')})"
        )
    elif (report.get("full_rebuild_reason") or "").startswith("active_generation_rejected"):
        lines.append(f"full rebuild: the active generation was rejected ({report['full_rebuild_reason']})")
    new = report.get("new_problems") or []
    for p in new[:max_listed]:
        lines.append(f"  problem: {p['path']}: {p['reason']} {p.get('detail', '')}".rstrip())
    if len(new) > max_listed:
        lines.append(f"  ... {len(new) - max_listed} more")
    if report["problems"] and len(new) < len(report["problems"]):
        lines.append("  (vaultsearch status VAULT lists every problem)")
    return terminal_safe("\n".join(lines))


def format_note(view: Any) -> str:
    """``show``: the lines with their numbers, safe for a terminal."""
    width = len(str(view.line_end))
    head = f"{view.title}  [{view.rel_path}]  lines {view.line_start}-{view.line_end} of {view.total_lines}"
    body = [f"{n:>{width}}  {line}" for n, line in enumerate(view.lines, start=view.line_start)]
    return terminal_safe("\n".join([head, *body]))


def _time_left(dense: dict[str, Any]) -> str:
    left = dense.get("seconds_left")
    if dense.get("estimate") == "last_embed_rate" and left is not None:
        return f"; about {left / 60:.0f} min left at {dense['chunks_per_s']:.1f} chunks/s (last embed run)"
    if dense.get("estimate") == "no_embed_run_measured":
        return "; time left unknown until an embed run has been measured"
    return ""


def _names_lines(names: dict[str, dict[str, int]] | None) -> list[str]:
    """Which rule gave how many notes their shown title, and how many notes have a name of each rule."""
    if not names:
        return []

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{rule} {n}" for rule, n in d.items()) or "none"

    return [f"titles     from {counts(names['shown'])}", f"names      notes named by {counts(names['names'])}"]


def plain_value(value: Any) -> str:
    """A nested status value as words, never a Python repr: ``-`` for None, yes/no, ``a, b`` for a
    list, ``key value; key value`` for a mapping (nested ones in parentheses)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain_value(v) for v in value) or "none"
    if isinstance(value, dict):
        parts = (
            f"{k} ({plain_value(v)})" if isinstance(v, dict) else f"{k} {plain_value(v)}" for k, v in value.items()
        )
        return "; ".join(parts) or "none"
    return str(value)


_MODEL_SHOWN = {"name", "kind", "dim", "pooling", "normalize", "max_length", "revision", "weights_sha256", "model_ref"}
_MODEL_SHOWN |= {"query_prefix", "passage_prefix"}


def _model_lines(model: Any) -> list[str]:
    """The dense model's identity (``core.dense.Embedder.identity``) as lines a person reads."""
    if not isinstance(model, dict):
        return [f"model      {plain_value(model)}"]
    m = model
    sha = str(m.get("weights_sha256") or "-")
    lines = [
        f"model      {m.get('name', '-')} ({m.get('kind', 'embedding')}): {plain_value(m.get('dim'))} dims, "
        f"{plain_value(m.get('pooling'))} pooling, {'normalised' if m.get('normalize') else 'not normalised'}, "
        f"at most {plain_value(m.get('max_length'))} tokens",
        f"           revision {plain_value(m.get('revision'))}, weights sha256 {sha[:16]}{'...' if len(sha) > 16 else ''}",
    ]
    if m.get("model_ref"):
        lines.append(f"           from {m['model_ref']}")
    prefixes = [f"{k.split('_')[0]} prefix {m[k]!r}" for k in ("query_prefix", "passage_prefix") if m.get(k)]
    rest = {k: v for k, v in m.items() if k not in _MODEL_SHOWN}
    if prefixes or rest:
        lines.append("           " + "; ".join([*prefixes, *(f"{k} {plain_value(v)}" for k, v in rest.items())]))
    return lines


def _when(at: Any) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(at))) if at else "at an unknown time"


def _watch_lines(failure: dict[str, Any] | None) -> list[str]:
    """The watcher's last failed build (newer than the served generation), when there is one."""
    if not failure:
        return []
    line = f"watch      last build FAILED [{failure.get('reason')}] {_when(failure.get('at'))}"
    if failure.get("message"):
        line += f": {failure['message']}"
    paths = failure.get("changed_paths") or []
    return [line] + ([f"           changed: {plain_value(paths)}"] if paths else [])


def _generation_line(g: dict[str, Any]) -> str:
    labels = {"notes": "notes", "chunks": "chunks", "dense_chunks": "with vectors"}
    counts = [f"{g[k]} {label}" for k, label in labels.items() if g.get(k) is not None]
    active = ", active" if g.get("active") else ""
    return f"  {g.get('generation_id')} {g.get('status', '')}{active}" + (f": {', '.join(counts)}" if counts else "")


def _settings_line(s: dict[str, Any]) -> str:
    return f"settings   chunker {plain_value(s.get('chunker'))}; tokenizer {plain_value(s.get('tokenizer'))}; " + (
        f"source {plain_value(s.get('source'))}"
    )


def format_status(s: dict[str, Any]) -> str:
    """``status`` as lines a person reads: every nested value in words (``--json`` has the data)."""
    st = s["staleness"]
    dense = s["dense"]
    lines = [
        f"vault      {s['vault']}",
        f"index      {s['index_kind']} {s['generation_id'] or ''} ({s['age_seconds']:.0f} s old)",
        f"notes      {s['notes']} indexed of {s['coverage']['source_files']} source files; {s['chunks']} chunks",
        f"links      {s['links']} ({s['unresolved_links']} unresolved)",
        *_names_lines(s.get("names")),
        _settings_line(s),
        f"dense      {dense['chunks_with_vectors']}/{dense['chunks']} chunks have vectors" + _time_left(dense),
        *(_model_lines(dense["model"]) if dense.get("model") else []),
        f"stale      {'YES' if st['stale'] else 'no'}: {len(st['added'])} added, {len(st['modified'])} modified, "
        f"{len(st['removed'])} removed since the index was built",
        *_watch_lines(s.get("last_build_failure")),
        f"problems   {len(s['problems'])}",
    ]
    if "git" in st:
        g = st["git"]
        since = "an unknown number of" if g.get("commits_since") is None else g["commits_since"]
        moved = "up to date" if g["up_to_date"] else f"{g['rev']} moved {since} commit(s) since"
        lines[-1:-1] = [
            f"source     git {g['rev']}{' (detached HEAD)' if g['detached'] else ''}"
            f"{' (shallow clone)' if g['shallow'] else ''}: watermark {g['watermark'][:12]}, {moved}",
            f"not indexed (uncommitted): {plain_value(st['uncommitted'])}",
        ]
    lines += [f"  {p['path']}: {p['reason']}" for p in s["problems"][:20]]
    if len(s["problems"]) > 20:
        lines.append(f"  ... {len(s['problems']) - 20} more (--json lists every problem)")
    if s["generations"]:
        lines.append("generations")
        lines += [_generation_line(g) for g in s["generations"]]
    return terminal_safe("\n".join(lines))
