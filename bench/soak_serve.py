"""Soak: the servers under load while a writer changes the vault (issue 28, "must show").

Two copies of a real corpus (default: the Dendron vault). On copy A, ``vaultsearch serve A --watch``
with ``--http-clients`` (8) threads calling ``/search`` and ``/read_note`` over keep-alive
connections; on copy B, ``vaultsearch mcp B --watch`` plus ``--mcp-clients`` - 1 more
``vaultsearch mcp B`` (one watcher per index: a second is refused by design, the others serve what
it publishes), each driven by the official MCP SDK client over stdio. Every ``--interval`` (1 s)
a writer applies one operation to both copies: edit (a line appended to a corpus note or a note
of its own), add (a new note holding a unique marker word), rename or delete (of a note it
added). Corpus notes are never deleted or renamed.

Every answer is judged (``judge``), with the writer's ledger of when each path appeared and
went away (the time the file operation returned):

* **failed**: a transport error, a timeout, an HTTP status or MCP error that is not a correct
  typed answer. The one typed error that is correct is ``note_not_found`` from ``read_note`` of a
  path the writer added (it may be renamed, deleted or not built yet); anything else, for any
  tool, is a failure.
* **wrong**: a deleted note served as fresh. (a) a search hit for a path that was gone (deleted
  or renamed away, the operation returned) before the request was sent, in a response whose
  freshness says ``stale: false``; (b) ``read_note`` content for such a path.

Server RSS (VmRSS of every server process) is sampled every ``--rss-every`` seconds: the curve.
Loopback only. Results: ``bench/results/soak.json``.

    python -m bench.soak_serve [--minutes 20] [--corpus DIR] [--http-clients 8] [--mcp-clients 4]
        [--interval 1.0] [--rss-every 5] [--work-dir DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_serve import ServeProcess
from bench.common import DATA_DIR, RESULTS_DIR, copy_vault, latency_stats, machine_info, write_json

VAULTSEARCH = str(Path(sys.executable).with_name("vaultsearch"))
DENDRON = DATA_DIR / "dendron" / "vault"
CALL_TIMEOUT_S = 60.0  # one request; longer is a failure (a hang), not a slow answer
EXAMPLES = 20
DEFINITIONS = {
    "failed": "transport error, timeout, or an error that is not a correct typed answer (the one correct typed "
    "error: read_note note_not_found for a path the writer added)",
    "wrong": "a search hit for a path deleted or renamed away before the request was sent, in a response whose "
    "freshness says stale: false; or read_note content for such a path",
}


# ---------------------------------------------------------------- the writer's ledger and the judge


@dataclass
class Ledger:
    """When each path the writer touched appeared and went away (file operation returned), per vault."""

    events: dict[str, list[tuple[float, bool]]] = field(default_factory=dict)  # path -> [(t, exists after)]
    added: set[str] = field(default_factory=set)  # every path the writer created
    lock: threading.Lock = field(default_factory=threading.Lock)

    def created(self, path: str, t: float) -> None:
        with self.lock:
            self.events.setdefault(path, []).append((t, True))
            self.added.add(path)

    def gone(self, path: str, t: float) -> None:
        with self.lock:
            self.events.setdefault(path, []).append((t, False))

    def gone_before(self, path: str, t: float) -> float | None:
        """How long before ``t`` the path went away, when the last operation on it that returned
        before ``t`` removed it; else None."""
        with self.lock:
            past = [(at, exists) for at, exists in self.events.get(path, ()) if at < t]
        return t - past[-1][0] if past and not past[-1][1] else None

    def writer_path(self, path: str) -> bool:
        with self.lock:
            return path in self.added


def judge(tool: str, target: str, sent: float, outcome: dict[str, Any], ledger: Ledger) -> tuple[str, str]:
    """("ok" | "failed" | "wrong", why) for one answer; ``outcome`` is {"ok": envelope} or
    {"error": {"reason", ...}} or {"exception": text}."""
    if "exception" in outcome:
        return "failed", f"{tool}: {outcome['exception']}"
    if "error" in outcome:
        error = outcome["error"] or {}
        reason = error.get("reason")
        if tool == "read_note" and reason == "note_not_found" and ledger.writer_path(target):
            return "ok", "typed note_not_found"
        return "failed", f"{tool}: error {reason} | {str(error.get('message'))[:200]} {error.get('evidence') or ''}"
    body = outcome["ok"]
    if tool == "read_note":
        age = ledger.gone_before(target, sent)
        if age is not None:
            return "wrong", f"read_note served {target}, gone {age:.3f} s before the request"
        return "ok", ""
    fresh = (body.get("freshness") or {}).get("stale") is False
    for hit in body.get("hits", ()):
        age = ledger.gone_before(hit["path"], sent) if fresh else None
        if age is not None:
            return "wrong", f"search {target!r} hit {hit['path']}, gone {age:.3f} s before the request, stale: false"
    return "ok", ""


@dataclass
class Tally:
    """Counts and examples of every judged answer (shared by the client threads)."""

    requests: Counter = field(default_factory=Counter)  # (transport, tool)
    failures: Counter = field(default_factory=Counter)  # why
    failure_examples: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, transport: str, tool: str, verdict: tuple[str, str], seconds: float) -> None:
        kind, why = verdict
        why = f"{transport} {why}"
        with self.lock:
            self.requests[f"{transport}.{tool}"] += 1
            self.latencies.setdefault(transport, []).append(seconds)
            if kind == "failed":
                self.failures[why.split(" | ", 1)[0][:120]] += 1  # by kind; the message goes to the examples
                if len(self.failure_examples) < EXAMPLES:
                    self.failure_examples.append(why)
            elif kind == "wrong":
                self.wrong.append(why)

    def summary(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": dict(self.requests),
                "total_requests": sum(self.requests.values()),
                "failed": sum(self.failures.values()),
                "failures": dict(self.failures),
                "failure_examples": list(self.failure_examples),
                "wrong": len(self.wrong),
                "wrong_examples": self.wrong[:EXAMPLES],
                "latency_ms": {t: latency_stats(s) for t, s in self.latencies.items() if s},
            }


# ---------------------------------------------------------------- the writer


def marker(k: int) -> str:
    return f"soakmark{k}q"


class Writer:
    """One operation a tick, applied to every vault copy, recorded in each copy's ledger."""

    def __init__(self, vaults: list[Path], ledgers: list[Ledger], corpus_paths: list[str], seed: int) -> None:
        self.vaults, self.ledgers, self.corpus = vaults, ledgers, corpus_paths
        self.rng = random.Random(seed)
        self.live: list[tuple[str, int]] = []  # (path, marker number) of the writer's notes that exist
        self.dead: list[tuple[str, int]] = []  # ... that were deleted or renamed away, newest last
        self.ops: Counter = Counter()
        self.next = 0
        self.errors: list[str] = []

    def tick(self) -> None:
        roll = self.rng.random()
        if not self.live or roll < 0.25:
            op = "add"
        elif roll < 0.6:
            op = "edit"
        elif roll < 0.75:
            op = "rename"
        else:
            op = "delete"
        try:
            getattr(self, op)()
            self.ops[op] += 1
        except OSError as exc:  # the writer's own failure: reported, never a silent skip
            self.errors.append(f"{op}: {exc}")

    def _each(self, fn: Any) -> None:
        for vault, ledger in zip(self.vaults, self.ledgers):
            fn(vault, ledger)

    def add(self) -> None:
        k = self.next
        self.next += 1
        rel = f"soak/note-{k}.md"
        text = f"---\ntitle: Soak note {k}\n---\n\n# Soak note {k}\n\nThe marker {marker(k)} and lighthouse.\n"

        def write(vault: Path, ledger: Ledger) -> None:
            (vault / "soak").mkdir(exist_ok=True)
            (vault / rel).write_text(text, encoding="utf-8")
            ledger.created(rel, time.time())

        self._each(write)
        self.live.append((rel, k))

    def edit(self) -> None:
        own = self.rng.random() < 0.5 and self.live
        rel = self.rng.choice(self.live)[0] if own else self.rng.choice(self.corpus)
        line = f"\nEdited by the soak at {time.time():.3f}.\n"

        def append(vault: Path, ledger: Ledger) -> None:
            with open(vault / rel, "a", encoding="utf-8") as handle:
                handle.write(line)

        self._each(append)

    def rename(self) -> None:
        i = self.rng.randrange(len(self.live))
        rel, k = self.live[i]
        new = f"soak/renamed-{k}-{self.next}.md"
        self.next += 1

        def move(vault: Path, ledger: Ledger) -> None:
            os.rename(vault / rel, vault / new)
            t = time.time()
            ledger.gone(rel, t)
            ledger.created(new, t)

        self._each(move)
        self.live[i] = (new, k)
        self.dead.append((rel, k))

    def delete(self) -> None:
        rel, k = self.live.pop(self.rng.randrange(len(self.live)))

        def remove(vault: Path, ledger: Ledger) -> None:
            os.unlink(vault / rel)
            ledger.gone(rel, time.time())

        self._each(remove)
        self.dead.append((rel, k))

    def pick(self, rng: random.Random, words: list[str]) -> tuple[str, str]:
        """(tool, argument) for a client: searches for corpus words and for markers of live and dead
        notes (the dead ones are what a stale generation would still serve), reads of both."""
        roll = rng.random()
        dead, live = list(self.dead[-20:]), list(self.live)
        if roll < 0.25:
            return "search", rng.choice(words)
        if roll < 0.45 and dead:
            return "search", marker(rng.choice(dead)[1])
        if roll < 0.6 and live:
            return "search", marker(rng.choice(live)[1])
        if roll < 0.8:
            return "read_note", rng.choice(self.corpus)
        pool = dead + live
        return ("read_note", rng.choice(pool)[0]) if pool else ("search", rng.choice(words))


# ---------------------------------------------------------------- servers and clients


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}


def http_server(vault: Path) -> ServeProcess:
    """``vaultsearch serve VAULT --watch`` on a free loopback port."""
    return ServeProcess([str(vault), "--watch", "--host", "127.0.0.1"], env=_env())


def http_client(
    base: str, writer: Writer, ledger: Ledger, tally: Tally, words: list[str], stop: threading.Event, seed: int
) -> None:
    import httpx

    rng = random.Random(seed)
    with httpx.Client(base_url=base, timeout=CALL_TIMEOUT_S) as client:
        while not stop.is_set():
            tool, target = writer.pick(rng, words)
            args = {"query": target, "mode": "fts", "max_results": 10} if tool == "search" else {"path": target}
            sent = time.time()
            try:
                r = client.post(f"/{tool}", json=args)
                body = r.json()
                outcome = (
                    {"ok": body}
                    if r.status_code == 200
                    else {"error": body.get("error") or {"reason": f"http {r.status_code}"}}
                )
            except (httpx.HTTPError, ValueError) as exc:
                outcome = {"exception": f"{type(exc).__name__}: {exc}"}
            tally.record("http", tool, judge(tool, target, sent, outcome, ledger), time.time() - sent)


async def mcp_client(
    vault: Path,
    watch: bool,
    writer: Writer,
    ledger: Ledger,
    tally: Tally,
    words: list[str],
    stop: threading.Event,
    seed: int,
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    rng = random.Random(seed)
    args = ["mcp", str(vault), *(["--watch"] if watch else [])]
    params = StdioServerParameters(command=VAULTSEARCH, args=args, env=_env())
    async with Client(params, read_timeout_seconds=CALL_TIMEOUT_S) as client:
        while not stop.is_set():
            tool, target = writer.pick(rng, words)
            arguments = {"query": target, "mode": "fts", "max_results": 10} if tool == "search" else {"path": target}
            sent = time.time()
            try:
                result = await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)
                text = json.loads(getattr(result.content[0], "text", "") or "{}")
                outcome = {"error": text.get("error")} if result.is_error else {"ok": text}
            except Exception as exc:  # every failure of the SDK client is counted, none is lost
                outcome = {"exception": f"{type(exc).__name__}: {exc}"}
            tally.record("mcp", tool, judge(tool, target, sent, outcome, ledger), time.time() - sent)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def server_pids() -> dict[str, int]:
    """The vaultsearch server processes this process started (its children), by a short name."""
    found: dict[str, int] = {}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and any(a.endswith(b"vaultsearch") for a in argv[:2]):
            words = [a.decode(errors="replace") for a in argv]
            name = "serve" if "serve" in words else ("mcp_watch" if "--watch" in words else "mcp")
            found[f"{name}_{entry.name}"] = int(entry.name)
    return found


def sample_rss(stop: threading.Event, every: float, curve: list[dict[str, Any]], started: float) -> None:
    while not stop.wait(every):
        curve.append({"t": round(time.time() - started, 1), **{k: rss_mb(p) for k, p in server_pids().items()}})


def rss_summary(curve: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per server: the first, highest and last sample (MB)."""
    out: dict[str, dict[str, float]] = {}
    for name in sorted({k for row in curve for k in row if k != "t"}):
        values = [row[name] for row in curve if row.get(name) is not None]
        if values:
            out[name] = {"first": values[0], "max": max(values), "last": values[-1]}
    return out


def corpus_words(vault: Path, paths: list[str], rng: random.Random, count: int = 200) -> list[str]:
    words: set[str] = set()
    for rel in rng.sample(paths, min(len(paths), 300)):
        words |= set(re.findall(r"[A-Za-z]{5,12}", (vault / rel).read_text(encoding="utf-8", errors="replace"))[:40])
    return sorted(words)[:count] or ["note"]


# ---------------------------------------------------------------- the run


def run(
    corpus: Path,
    minutes: float,
    http_clients: int,
    mcp_clients: int,
    interval: float,
    rss_every: float,
    work: Path,
    seed: int,
) -> dict[str, Any]:
    from core.build.builder import build_index

    vaults = [copy_vault(corpus, work / "vault_http"), copy_vault(corpus, work / "vault_mcp")]
    for v in vaults:
        build_index(v)
    rng = random.Random(seed)
    paths = sorted(str(p.relative_to(vaults[0])) for p in vaults[0].rglob("*.md") if ".vaultsearch" not in p.parts)
    corpus_paths = rng.sample(paths, min(60, len(paths)))
    words = corpus_words(vaults[0], paths, rng)
    ledgers = [Ledger(), Ledger()]
    writer = Writer(vaults, ledgers, corpus_paths, seed)
    tally = Tally()
    stop = threading.Event()
    curve: list[dict[str, Any]] = []
    started = time.time()
    server = http_server(vaults[0])
    threads = [
        threading.Thread(
            target=http_client, args=(server.base, writer, ledgers[0], tally, words, stop, seed + i), daemon=True
        )
        for i in range(http_clients)
    ]

    async def mcp_all() -> None:
        await asyncio.gather(
            *(
                mcp_client(vaults[1], i == 0, writer, ledgers[1], tally, words, stop, seed + 100 + i)
                for i in range(mcp_clients)
            )
        )

    mcp_errors: list[str] = []

    def mcp_thread() -> None:
        try:
            asyncio.run(mcp_all())
        except BaseException as exc:  # a client that could not run at all: reported as a failure of the run
            mcp_errors.append(f"{type(exc).__name__}: {exc}")

    threads.append(threading.Thread(target=mcp_thread, daemon=True))
    threads.append(threading.Thread(target=sample_rss, args=(stop, rss_every, curve, started), daemon=True))
    try:
        for t in threads:
            t.start()
        end = time.monotonic() + minutes * 60
        while time.monotonic() < end:
            tick = time.monotonic()
            writer.tick()
            stop.wait(max(0.0, interval - (time.monotonic() - tick)))
    finally:
        stop.set()
        for t in threads:
            t.join(CALL_TIMEOUT_S + 30)
        server.close()
    result = tally.summary()
    result["failed"] += len(mcp_errors) + len(writer.errors)
    return {
        "machine": machine_info(),
        "corpus": str(corpus),
        "notes": len(paths),
        "minutes": minutes,
        "seconds": round(time.time() - started, 1),
        "clients": {"http": http_clients, "mcp": mcp_clients, "mcp_watch": 1},
        "writer": {"interval_s": interval, "ops": dict(writer.ops), "errors": writer.errors},
        "mcp_client_errors": mcp_errors,
        "definitions": DEFINITIONS,
        **result,
        "rss_mb": {"every_s": rss_every, "curve": curve, "summary": rss_summary(curve)},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--corpus", type=Path, default=DENDRON)
    parser.add_argument("--http-clients", type=int, default=8)
    parser.add_argument("--mcp-clients", type=int, default=4)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--rss-every", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "soak.json")
    a = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="soak-", dir=a.work_dir))
    try:
        result = run(a.corpus, a.minutes, a.http_clients, a.mcp_clients, a.interval, a.rss_every, work, a.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(a.out, result)
    print(
        f"soak: {result['total_requests']} requests, {result['failed']} failed, {result['wrong']} wrong; "
        f"RSS {json.dumps(result['rss_mb']['summary'])} -> {a.out}"
    )


if __name__ == "__main__":
    main()
