"""Readable reports of results and status for a terminal or a notebook."""

from __future__ import annotations

import html
import textwrap
from typing import Any


def _label(results: Any) -> str:
    label = f"mode {results.actual_mode} (contract {results.retrieval_contract})"
    if results.fallback_reason:
        label += f" - FALLBACK: {results.fallback_reason}"
    idx = results.index
    gen = idx.get("generation_id") or idx.get("kind")
    return f"{label}; index {gen}, {idx.get('age_seconds', 0):.0f} s old"


def format_search_results(results: Any, query: str, mode: str) -> str:
    """A plain-text report: what ran, from which index, then one block per hit."""
    lines = [f"{len(results)} result(s) for {query!r} (requested {mode}): {_label(results)}"]
    for i, r in enumerate(results, start=1):
        meta = ", ".join(x for x in (r.note_type or "", " ".join(f"#{t}" for t in r.tags[:6])) if x)
        lines.append(f"\n{i:>2}. {r.title}  [{r.rel_path}]  score {r.score:.4g} ({r.score_source})")
        if meta:
            lines.append(f"    {meta}")
        if r.via:
            lines.append(f"    via {r.via.get('edge')} link ({r.via.get('direction')}) from {r.via.get('from')}")
        if r.snippet:
            lines.extend(textwrap.wrap(r.snippet, width=96, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)


def results_markdown(results: Any) -> str:
    head = f"**{len(results)} result(s)** for `{results.query}` - {_label(results)}\n\n"
    rows = ["| # | title | path | score | snippet |", "|---|---|---|---|---|"]
    for i, r in enumerate(results, start=1):
        cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
        rows.append(f"| {i} | {cell(r.title)} | `{cell(r.rel_path)}` | {r.score:.4g} | {cell(r.snippet[:160])} |")
    return head + "\n".join(rows)


def results_html(results: Any) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td>{i}</td><td>{esc(r.title)}</td><td><code>{esc(r.rel_path)}</code></td>"
        f"<td>{r.score:.4g}</td><td>{esc(r.snippet)}</td></tr>"
        for i, r in enumerate(results, start=1)
    )
    return (
        f"<p><b>{len(results)} result(s)</b> for <code>{esc(results.query)}</code>: {esc(_label(results))}</p>"
        f"<table><thead><tr><th>#</th><th>title</th><th>path</th><th>score</th><th>snippet</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _time_left(dense: dict[str, Any]) -> str:
    left = dense.get("seconds_left")
    if dense.get("estimate") == "last_embed_rate" and left is not None:
        return f"; about {left / 60:.0f} min left at {dense['chunks_per_s']:.1f} chunks/s (last embed run)"
    if dense.get("estimate") == "no_embed_run_measured":
        return "; time left unknown until an embed run has been measured"
    return ""


def format_status(s: dict[str, Any]) -> str:
    st = s["staleness"]
    dense = s["dense"]
    lines = [
        f"vault      {s['vault']}",
        f"index      {s['index_kind']} {s['generation_id'] or ''} ({s['age_seconds']:.0f} s old)",
        f"notes      {s['notes']} indexed of {s['coverage']['source_files']} source files; {s['chunks']} chunks",
        f"links      {s['links']} ({s['unresolved_links']} unresolved)",
        f"dense      {dense['chunks_with_vectors']}/{dense['chunks']} chunks"
        + (f" ({dense['model']})" if dense["model"] else "")
        + _time_left(dense),
        f"stale      {'YES' if st['stale'] else 'no'}: {len(st['added'])} added, {len(st['modified'])} modified, "
        f"{len(st['removed'])} removed since the index was built",
        f"problems   {len(s['problems'])}",
    ]
    lines += [f"  {p['path']}: {p['reason']}" for p in s["problems"][:20]]
    if s["generations"]:
        lines.append("generations")
        lines += [f"  {g.get('generation_id')} {g.get('status', '')}" for g in s["generations"]]
    return "\n".join(lines)
