"""The commands that index, search, show and report: each parses nothing, makes one library call, renders."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.cli.output import EXIT_INTERRUPTED, EXIT_STALE, emit, emit_stderr, env_index_dir, print_json, read_layout
from core.errors import UsageError


def cmd_index(args: argparse.Namespace) -> int:
    """Build (unless --embed-only), then embed (with --embed / --embed-only)."""
    embed = args.embed or args.embed_only
    if (args.embed_limit is not None or args.model) and not embed:
        raise UsageError("--embed-limit and --model apply with --embed or --embed-only")
    if args.one_segment and not args.optimize:
        raise UsageError("--one-segment applies with --optimize")
    if args.optimize and args.in_place:
        raise UsageError("--optimize merges the segments of a generation index, not --in-place's index.db")
    progress = not args.json and sys.stderr.isatty()
    out: dict[str, Any] = {}
    model = _load_model_first(args) if embed else None
    if not args.embed_only:
        with _fewer_collections():
            out["build"] = _build(args, model, progress)
    if embed:
        from core.build.embed import embed_index  # the dense side: loaded only to embed

        try:
            out["embed"] = embed_index(
                Path(args.vault),
                model=model,
                index_dir=env_index_dir(args),
                limit=args.embed_limit,
                progress=progress,
                keep=args.keep,
                wait_seconds=args.wait,
            ).to_dict()
        except KeyboardInterrupt:
            return _embed_interrupted(args)
    if args.optimize:
        out["optimize"] = _optimize(args)
    if args.json:
        print_json(out["build"] if list(out) == ["build"] else out)
        return 0
    if "build" in out:
        from core.render import format_build

        emit(format_build(out["build"]))
    if "embed" in out:
        _print_embed(out["embed"])
    if "optimize" in out:
        _print_optimize(out["optimize"])
    return 0


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic garbage collector runs every 50,000 allocations instead of 700 during a build, the objects
    alive before it (the imported modules) frozen out of its passes; both restored after. A build allocates a
    tuple or more per file of the vault (the scan, the plan's stat set, the rows it hashes): at 100,000 notes
    the default threshold made the collector traverse them over and over, 0.3-0.5 s of CPU of an edit's
    `vaultsearch index` (bench/edit_reuse.py); cycles are rare in a build, so memory is not its cost."""
    threshold, froze = gc.get_threshold(), gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if froze:
            gc.unfreeze()


def _optimize(args: argparse.Namespace) -> dict[str, Any]:
    from core.build.optimize import optimize_index

    return optimize_index(
        Path(args.vault), index_dir=env_index_dir(args), one_segment=args.one_segment, keep=args.keep,
        wait_seconds=args.wait,
    ).to_dict()  # fmt: skip


def _print_optimize(report: dict[str, Any]) -> None:
    if report["outcome"] != "merged":
        emit(f"optimize: {report['outcome']}" + (f" ({report['detail']})" if report["detail"] else ""))
        return
    emit(
        f"optimize: {report['segments_before']} -> {report['segments_after']} segments, "
        f"{report['bytes_before']} -> {report['bytes_after']} bytes ({report['bytes_written']} written), "
        f"{report['seconds']:.2f} s; active {report['generation_after']}"
    )


def _load_model_first(args: argparse.Namespace) -> str:
    """The embedding model's reference, found, verified and loaded before any lexical work: a missing or
    broken model fails here, with nothing built."""
    from core.build.embed import choose_embedding_model
    from core.dense import load_embedder

    model = choose_embedding_model(Path(args.vault), args.model, env_index_dir(args))
    load_embedder(model)
    return model


def _build(args: argparse.Namespace, model: str | None, progress: bool) -> dict[str, Any]:
    from core.build.builder import build_index

    changes = {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "tokenizer": args.tokenizer,
        "language": args.language,
        "include_dot_paths": None if args.dot_paths is None else args.dot_paths == "index",
    }
    return build_index(
        Path(args.vault),
        index_dir=env_index_dir(args),
        changes=changes,
        in_place=args.in_place,
        progress=progress,
        keep=args.keep,
        wait_seconds=args.wait,
        source=args.source,
        rev=args.rev,
        # --embed: a small change's vectors go into the same generation as its text
        before_publish=_embed_in_staging(args, model, progress),
    ).to_dict()


def _embed_in_staging(args: argparse.Namespace, model: str | None, progress: bool) -> Any:
    """The build's ``before_publish`` hook with --embed (not in place), else None (the dense side not loaded)."""
    if not args.embed or args.in_place:
        return None
    from core.build.build_embed import EmbedInStaging

    return EmbedInStaging(model, batch=args.embed_limit, progress=progress)


def _embed_interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C during the embedding: the published batches stay; say how far it got and how to go on."""
    from core.build.embed import dense_coverage

    done, chunks = dense_coverage(Path(args.vault), env_index_dir(args))
    emit_stderr(
        f"interrupted: {done}/{chunks} chunks have vectors (every published batch is kept); "
        f"run `vaultsearch index {args.vault} --embed-only` to continue where it stopped"
    )
    return EXIT_INTERRUPTED


def _print_embed(report: dict[str, Any]) -> None:
    published = report["generations_published"]
    where = f"{len(published)} generation(s), active {report['generation_id']}" if published else report["index_kind"]
    if report["dropped"]:
        emit(f"dropped {report['dropped']} vectors of model {report['dropped_model'].get('name')!r}")
    emit(
        f"embedded {report['embedded']} chunks with {report['model_name']} ({where}); "
        f"{report['chunks'] - report['remaining']}/{report['chunks']} chunks have vectors; {report['seconds']:.2f} s"
    )


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "note_types": args.type or None,
        "tags_all": args.tag or None,
        "tags_any": args.any_tag or None,
        "path_prefixes": args.path or None,
        "namespaces": args.namespace or None,
        "since": args.since,
        "until": args.until,
        "date_field": args.date_field,
        "include_superseded": args.include_superseded or None,
        "classifications": args.classification or None,
        "status": args.status or None,
        "volatility": args.volatility or None,
    }


def cmd_search(args: argparse.Namespace) -> int:
    from core.modes.decay import AgeDecay
    from core.render import format_search_results
    from core.searcher import search_vault

    kw = {k: v for k, v in _filters(args).items() if v is not None}
    results = search_vault(
        Path(args.vault),
        args.query,
        mode=args.mode,
        limit=args.n,
        raw=args.raw,
        allow_fallback=args.allow_fallback,
        model=args.model,
        index_dir=env_index_dir(args),
        options={"reranker": args.reranker} if args.reranker else None,
        decay=AgeDecay() if args.age_decay else None,
        freshness=freshness_options(args),
        **kw,
    )
    if args.json:
        print_json(results.to_dict())
    else:
        warning = freshness_warning(results.freshness)
        if warning:
            emit(warning)
        emit(format_search_results(results, args.query, args.mode))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from core.render import format_note
    from core.searcher import obsidian_uri
    from core.vault.show import parse_line_range, show_note

    lines = parse_line_range(args.lines) if args.lines is not None else None
    view = show_note(
        Path(args.vault), args.path, section=args.section, lines=lines, classifications=args.classification
    )
    uri = obsidian_uri(Path(args.vault).resolve().name, view.rel_path)
    if args.json:
        print_json({**view.to_dict(), "obsidian_uri": uri})
    else:
        emit(format_note(view))
    return 0


def freshness_warning(fresh: Mapping[str, Any]) -> str | None:
    """The one line text output shows when the index is behind the vault (or a watch build failed)."""
    failure = fresh.get("last_build_failure")
    fail = f"; the last watch build failed [{failure.get('reason')}]" if failure else ""
    if fresh.get("stale"):
        sample = ", ".join(fresh.get("sample_paths") or [])
        return (
            f"warning: STALE index: {fresh['added']} added, {fresh['modified']} modified, {fresh['removed']} removed "
            f"since it was built ({sample}){fail}; run: vaultsearch index VAULT"
        )
    if fresh.get("reason") in UNCHECKED_WARNINGS:
        return f"warning: index freshness NOT checked: {UNCHECKED_WARNINGS[fresh['reason']].format(**fresh)}{fail}"
    return f"warning: {fail[2:]}" if fail else None


UNCHECKED_WARNINGS = {  # unchecked for a reason the user did not choose: said in text output too
    "walk_over_budget": "the vault walk took longer than its {walk_budget_seconds:g} s budget "
    "(run `vaultsearch watch VAULT` beside it for exact freshness at any size)",
    "vault_too_large": "{notes} notes are more than max_notes {max_notes}",
}


def freshness_options(args: argparse.Namespace) -> Any:
    """The freshness check a search (or a server's searches) runs, from --no-freshness and the budgets."""
    from core.index.freshness import FreshnessOptions

    return FreshnessOptions(
        enabled=not args.no_freshness,
        window_seconds=getattr(args, "freshness_window", 2.0),  # a one-shot search walks at most once anyway
        walk_budget_seconds=args.freshness_budget or None,
    )


def cmd_status(args: argparse.Namespace) -> int:
    from core.index.status import index_status
    from core.render import format_status

    status = index_status(Path(args.vault), env_index_dir(args), classifications=args.classification)
    if args.json:
        print_json(status)
    else:
        emit(format_status(status))
        emit(f"visibility {_visibility_line(args.classification)}")
    return EXIT_STALE if (args.check and status["staleness"]["stale"]) else 0


def _visibility_line(classifications: list[str] | None) -> str:
    if classifications is None:
        return "every note (no --classification given: secret ones included)"
    named = sorted({c.strip().lower() for c in classifications if c.strip()})
    return f"only classifications {', '.join(named)}" if named else "no note (--classification '': nothing visible)"


def cmd_verify(args: argparse.Namespace) -> int:
    from core.index.verify import verify_full

    report = verify_full(read_layout(args))
    if args.json:
        print_json(report)
    else:
        emit(f"ok: generation {report.get('generation_id')} manifest sha256 {report.get('sha256')} verified")
        for part in report.get("parts", []):
            emit(f"  {part['kind']} {part['path']}: {part['size']} bytes, sha256 ok, integrity_check ok")
    return 0


def cmd_modes(args: argparse.Namespace) -> int:
    from core.registry import markdown_table, modes_json

    if args.markdown:
        sys.stdout.write(markdown_table())
    elif args.json:
        print_json(modes_json())
    else:
        for m in modes_json():
            emit(f"{m['name']:<15} {'(default) ' if m['default'] else ''}{m['summary']}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from core.eval.cli import run_eval

    read_layout(args)
    report = run_eval(
        Path(args.vault),
        queries=Path(args.queries),
        qrels=Path(args.qrels),
        modes=args.mode or ["fts"],
        k=args.k,
        failures=args.failures,
        index_dir=env_index_dir(args),
        model=args.model,
        reranker=args.reranker,
        classifications=args.classification,
    )
    if args.json:
        print_json(report.to_dict())
    else:
        emit(report.format_table())
        if args.failures:
            emit(report.format_failures())
    return 0
