"""The "Languages" section of docs/benchmarks.md, from bench/results/lang.json (bench.bench_lang)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.report_sets import sets_section, sets_target_rows

BASELINES = ("fts5-unicode61", "fts5-porter", "fts5-trigram", "fts5-trigram+like", "bm25s", "vaultsearch-fts")
# Issue 13 targets on the dev sets.
CJK_SUBSTRING_TARGET = 0.90
WORDFORM_TARGET = 0.90
TITLE_HEADING_SLACK = 0.005
ENGLISH_SLACK = 0.005
TYPO_RATIO_TARGET = 0.85
PREFIX_TOP10_TARGET = 0.80
P50_TARGETS_MS = {"scifact": 2.0, "cjk": 5.0}
BUILD_RATIO_TARGET = 1.3
# SciFact fts p50 of the tree before the language work (2a0ba5a) on the machine the issue was filed
# on (docs/benchmarks.md at 2a0ba5a): the 2 ms target is 1.28x it, which the instruction ratio is held to
FILING_P50_MS = 1.56
BEFORE_TREE = "pre_lang"


def _f(v: Any, d: int = 3) -> str:
    return "-" if v is None else f"{v:.{d}f}"


def _cell(r: dict[str, Any] | None) -> str:
    return "-" if not r else f"{r['ndcg10']:.3f} / {100 * r['nohit']:.0f}%"


def _status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _target(kind: str, row: dict[str, Any]) -> tuple[str, bool]:
    """(target text, met) for one multilingual set, judged on fts."""
    got = row["fts"]["ndcg10"]
    if kind == "substring":
        return f">= {CJK_SUBSTRING_TARGET:.2f}, no query without a hit", got >= CJK_SUBSTRING_TARGET and not row["fts"][
            "nohit"
        ]
    if kind == "wordform":
        return f">= {WORDFORM_TARGET:.2f}", got >= WORDFORM_TARGET
    today = row["baselines"]["vaultsearch-fts"]["ndcg10"]
    return f">= {today - TITLE_HEADING_SLACK:.3f} (today {today:.3f} - {TITLE_HEADING_SLACK})", got >= (
        today - TITLE_HEADING_SLACK
    )


def multilingual_rows(ml: dict[str, Any]) -> list[str]:
    head = ["lang", "set", "n", *BASELINES, "fts", "hybrid", "fts p50 ms", "target (fts)", ""]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lang, data in ml.items():
        for kind, row in data["sets"].items():
            target, ok = _target(kind, row)
            cells = [_cell(row["baselines"].get(b)) for b in BASELINES]
            out.append(
                "| "
                + " | ".join(
                    [
                        lang,
                        kind,
                        str(row["fts"]["n"]),
                        *cells,
                        f"**{_cell(row['fts'])}**",
                        _cell(row["hybrid"]),
                        _f(row["fts"]["p50_ms"], 2),
                        target,
                        _status(ok),
                    ]
                )
                + " |"
            )
    return out


def english_rows(en: dict[str, Any]) -> list[str]:
    out = ["| corpus | mode | today | now | target | | fts p50 ms |", "|---|---|---:|---:|---|---|---:|"]
    for name, modes in en.items():
        for mode, r in modes.items():
            ok = r["ndcg10"] >= r["today"] - ENGLISH_SLACK
            p50 = _f(r["p50_ms"], 2) if mode == "fts" else ""
            out.append(
                f"| {name} | {mode} | {r['today']:.4f} | {r['ndcg10']:.4f} | >= {r['today'] - ENGLISH_SLACK:.4f} "
                f"| {_status(ok)} | {p50} |"
            )
    return out


def lang_section(results: dict[str, dict[str, Any]]) -> list[str]:
    lang = results.get("lang")
    out = ["## Languages", ""]
    if not lang:
        return [*out, "Not run: `bench/results/lang.json` is absent (`python -m bench.bench_lang`).", ""]
    out += [
        "Per language and query kind on the multilingual MDN dev sets (`../shared/data/multilingual/`; each",
        "language folder its own vault, default settings, notes' languages detected), beside the",
        "baselines measured with the data set (its `baselines_dev.json`; `vaultsearch-fts` is the engine",
        "before this change). Each cell: nDCG@10 / share of queries with no hit. n = 21-100 per cell, so",
        "differences under ~0.05 are noise; the holdout halves are kept for acceptance. Load average at the",
        f"end of the latest stage's run: {', '.join(f'{x:.1f}' for x in lang.get('loadavg', []))} (each timing",
        "below names its own).",
        "",
        "    python -m bench.bench_lang        # results in bench/results/lang.json",
        "    # build ratio and SciFact p50 against the tree before the language work (a worktree of 2a0ba5a):",
        "    python -m bench.bench_lang --only build_vs,latency,instructions --code pre_lang=DIR --rounds 5",
        "",
    ]
    if "multilingual" in lang:
        out += [*multilingual_rows(lang["multilingual"]), ""]
    if "english" in lang:
        out += ["English holds (dev sets, nDCG@10; `today` = before this change):", "", *english_rows(lang["english"])]
        out.append("")
    if "typo" in lang:
        out += ["Typos (one edit in one word of >= 5 letters of each known-item dev query, seeded), fts:", ""]
        out += ["| corpus | n | unedited | with the typo | ratio | target | |", "|---|---:|---:|---:|---:|---|---|"]
        for name, r in lang["typo"].items():
            ok = (r["ratio"] or 0) >= TYPO_RATIO_TARGET
            out.append(
                f"| {name} | {r['n']} | {r['unedited_ndcg10']:.3f} | {r['typo_ndcg10']:.3f} | {_f(r['ratio'])} | "
                f">= {TYPO_RATIO_TARGET} | {_status(ok)} |"
            )
        out.append("")
    if "prefix" in lang:
        out += [
            "Prefixes (each known-item dev query with its rarest word of >= 6 letters cut to 3-5 letters,",
            "seeded), fts: share of queries whose note is in the top 10, beside the same queries without",
            "that word at all (what the other words find alone):",
            "",
            "| corpus | n | prefix in top 10 | word dropped | target | |",
            "|---|---:|---:|---:|---|---|",
        ]
        for name, r in lang["prefix"].items():
            ok = r["top10_share"] >= PREFIX_TOP10_TARGET
            out.append(
                f"| {name} | {r['n']} | {r['top10_share']:.3f} | {r['without_the_word_top10_share']:.3f} | "
                f">= {PREFIX_TOP10_TARGET} | {_status(ok)} |"
            )
        out.append("")
    out += sets_section(lang)
    out += build_rows(lang)
    out += instruction_rows(lang)
    cpu = lang.get("latency_cpu_interleaved")
    if cpu:
        t = cpu["scifact_fts_p50_ms"]
        series = "; ".join(f"{name} {', '.join(f'{x:.2f}' for x in ms)}" for name, ms in t.items())
        out += [
            f"SciFact fts p50 (warm, limit=10, passages on) as CPU time, code trees alternated: {series} ms"
            f" (target <= {P50_TARGETS_MS['scifact']:.0f} ms). {cpu['how']}.",
            "",
        ]
    return out


def instruction_ratios(lang: dict[str, Any]) -> tuple[float, float] | None:
    """(query, build) instructions now / the tree before the language work, when counted."""
    counted = lang.get("instructions")
    if not counted or BEFORE_TREE not in counted["scifact_fts_per_query"]:
        return None
    q, b = counted["scifact_fts_per_query"], counted["scifact_cold_build"]
    return q["now"] / q[BEFORE_TREE], b["now"] / b[BEFORE_TREE]


def without_arrays_ratio(lang: dict[str, Any]) -> tuple[float, float] | None:
    """(instructions, ratio to the tree before the language work) of this tree's build without the
    arrays it stores for readers (issue 14), when counted."""
    counted = lang.get("instructions") or {}
    without = counted.get("scifact_cold_build_without_stored_arrays", {}).get("now")
    before = counted.get("scifact_cold_build", {}).get(BEFORE_TREE)
    return (without, without / before) if without and before else None


def instruction_rows(lang: dict[str, Any]) -> list[str]:
    counted, ratios = lang.get("instructions"), instruction_ratios(lang)
    if not counted:
        return []
    q, b = counted["scifact_fts_per_query"], counted["scifact_cold_build"]
    out = [
        "Instructions (repeatable, whatever the load):",
        "",
        "| code tree | per SciFact fts query | SciFact cold build |",
    ]
    out.append("|---|---:|---:|")
    out += [f"| {name} | {q[name] / 1e6:.2f} M | {b[name] / 1e9:.2f} G |" for name in q]
    if ratios:
        out += [
            "",
            f"now / {BEFORE_TREE}: {ratios[0]:.3f}x per query (at the filing machine's {FILING_P50_MS} ms for"
            f" {BEFORE_TREE}: {ratios[0] * FILING_P50_MS:.2f} ms), {ratios[1]:.3f}x per cold build. {counted['how']}.",
        ]
    without = without_arrays_ratio(lang)
    if ratios and without:
        out += [
            "",
            f"The same build without the arrays it stores for readers (issue 14: term-major postings, the query"
            f" vocabulary, the default filter mask; {BEFORE_TREE} stores none, and a reader computes them when"
            f" absent): {without[0] / 1e9:.2f} G, {without[1]:.3f}x {BEFORE_TREE}; the stored arrays"
            f" are {1 - without[0] / b['now']:.1%} of the build.",
        ]
    return [*out, ""]


def build_rows(lang: dict[str, Any]) -> list[str]:
    now, today = lang.get("build"), lang.get("build_today")
    if not now:
        return []
    out = ["SciFact cold build (fresh index dir, best of 2 runs) and generation size:", ""]
    out += ["| | cold build s | generation MiB |", "|---|---:|---:|"]
    if today:
        out.append(f"| before | {today['cold_seconds']:.2f} | {today['generation_bytes'] / 2**20:.1f} |")
    out.append(f"| now | {now['cold_seconds']:.2f} | {now['generation_bytes'] / 2**20:.1f} |")
    if today:
        ratio = build_ratio(now, today)
        growth = now["generation_bytes"] / today["generation_bytes"] - 1
        rounds = ", ".join(f"{r:.2f}x" for r in now.get("interleaved_ratios", []))
        cpu = now.get("cpu_seconds_in_process")
        cpu_text = (
            f" CPU time in process (workers=1): before {', '.join(f'{x:.2f}' for x in cpu['before'])} s, now "
            f"{', '.join(f'{x:.2f}' for x in cpu['now'])} s."
            if cpu
            else " One run each, not interleaved (no `build_vs` stage in these results)."
        )
        out += [
            "",
            f"Build time ratio {ratio:.2f}x (target <= {BUILD_RATIO_TARGET}x: {_status(ratio <= BUILD_RATIO_TARGET)},"
            " judged on CPU time where measured: the wall-clock rounds of the same code swing with the machine's load;"
            f" wall-clock interleaved rounds {rounds or 'not run'}).{cpu_text} Index size {100 * growth:+.0f}%"
            " (exact-form terms beside the stems, CJK bigrams).",
        ]
    return [*out, ""]


def lang_target_rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(area, target, measured, status) of issue 13, for the page's one table of targets."""
    lang = results.get("lang")
    if not lang:
        return []
    rows: list[tuple[str, str, str, str]] = []
    for code, data in lang.get("multilingual", {}).items():
        for kind, row in data["sets"].items():
            target, ok = _target(kind, row)
            rows.append(("lang", f"{code} {kind} fts nDCG@10 {target}", _cell(row["fts"]), _status(ok)))
    for name, modes in lang.get("english", {}).items():
        for mode, r in modes.items():
            ok = r["ndcg10"] >= r["today"] - ENGLISH_SLACK
            rows.append(
                ("lang", f"English {name} {mode} >= today - {ENGLISH_SLACK}", f"{r['ndcg10']:.4f}", _status(ok))
            )
    for name, r in lang.get("typo", {}).items():
        ok = (r["ratio"] or 0) >= TYPO_RATIO_TARGET
        rows.append(("lang", f"typo set {name}: >= {TYPO_RATIO_TARGET} of unedited", _f(r["ratio"]), _status(ok)))
    for name, r in lang.get("prefix", {}).items():
        ok = r["top10_share"] >= PREFIX_TOP10_TARGET
        rows.append(("lang", f"prefix set {name}: top 10 >= {PREFIX_TOP10_TARGET}", _f(r["top10_share"]), _status(ok)))
    rows += sets_target_rows(lang)
    now, today = lang.get("build"), lang.get("build_today")
    if now and today:
        ratio = build_ratio(now, today)
        rows.append(
            ("lang", f"SciFact cold build <= {BUILD_RATIO_TARGET}x before", f"{ratio:.2f}x", _status(ratio <= 1.3))
        )
    ratios = instruction_ratios(lang)
    if ratios:
        q, b = ratios
        rows.append(
            (
                "lang",
                f"SciFact fts p50 <= 2 ms, as instructions per query x {BEFORE_TREE}'s {FILING_P50_MS} ms at filing",
                f"{q:.3f}x = {q * FILING_P50_MS:.2f} ms",
                _status(q * FILING_P50_MS <= P50_TARGETS_MS["scifact"]),
            )
        )
        rows.append(
            (
                "lang",
                f"SciFact cold build <= {BUILD_RATIO_TARGET}x before, as instructions (workers=1)",
                f"{b:.3f}x",
                _status(b <= BUILD_RATIO_TARGET),
            )
        )
        without = without_arrays_ratio(lang)
        if without:  # informative: the row above is the target as written (issue 13 asks which counts)
            ratio = without[1]
            rows.append(
                (
                    "lang",
                    f"SciFact cold build <= {BUILD_RATIO_TARGET}x before, as instructions, without the arrays stored"
                    " for readers (issue 14; whether they count is undecided)",
                    f"{ratio:.3f}x",
                    _status(ratio <= BUILD_RATIO_TARGET),
                )
            )
    cpu = lang.get("latency_cpu_interleaved")
    if cpu:
        t = cpu["scifact_fts_p50_ms"]
        now_ms = statistics.median(t["now"])
        ok = now_ms <= P50_TARGETS_MS["scifact"]
        others = ", ".join(f"{name} {statistics.median(ms):.2f}" for name, ms in t.items() if name != "now")
        measured = f"{now_ms:.2f} ms" + (f" ({others} ms, same rounds)" if others else "")
        rows.append(("lang", "SciFact fts p50 <= 2 ms (CPU time, median of rounds)", measured, _status(ok)))
    for code, data in lang.get("multilingual", {}).items():
        row = data["sets"].get("substring")
        if row and row["fts"].get("p50_ms") is not None:
            cpu_ms = row["fts"].get("cpu_p50_ms")  # judged on CPU time where measured, like SciFact's
            ms = cpu_ms if cpu_ms is not None else row["fts"]["p50_ms"]
            ok = ms <= P50_TARGETS_MS["cjk"]
            label = f"{code} substring fts p50 <= 5 ms" + (" (CPU time)" if cpu_ms is not None else "")
            rows.append(("lang", label, f"{ms:.2f} ms", _status(ok)))
    return rows


def build_ratio(now: dict[str, Any], today: dict[str, Any]) -> float:
    """now / before: CPU time in process when measured (wall clock swings with load), else the mean
    of the interleaved wall-clock rounds."""
    cpu = now.get("cpu_seconds_in_process")
    if cpu:
        return min(cpu["now"]) / min(cpu["before"])
    rounds = now.get("interleaved_ratios") or [now["cold_seconds"] / today["cold_seconds"]]
    return sum(rounds) / len(rounds)
