"""Issue 27: embedding can be stopped (Ctrl-C or a kill) and resumed without redoing finished notes.

A real ``vaultsearch index VAULT --embed-only`` runs in a child process with the real MiniLM
model, publishing every 6 chunks (the child slows each model call down so the test can
interrupt it between batches; it sets nothing else). Ctrl-C exits 130 with a one-line status
and no traceback; a SIGKILL loses only the batch in flight; the next run embeds exactly the
chunks still without a vector and keeps every earlier vector byte for byte.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import note, write_files

from core import generations as gen
from core.build.builder import build_index
from core.build.embed import embed_index
from core.dense import clear_model_cache
from tests.minilm_fixture import FP32

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import functools, sys, time
from core.dense import Embedder
from core.build import embed

real = Embedder.embed_passages


def slow(self, texts, batch_size=32):
    time.sleep(0.4)
    return real(self, texts, batch_size)


Embedder.embed_passages = slow
embed.embed_index = functools.partial(embed.embed_index, publish_every=6)
from core.cli import main

sys.exit(main(sys.argv[1:]))
"""
WORDS = "river mountain engine garden violin harbor market winter planet doctor".split()


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    notes = {
        f"n{i:02d}.md": note(f"Note {i}", f"A short note about the {WORDS[i % 10]} number {i}.") for i in range(48)
    }
    root = write_files(tmp_path / "vault", notes)
    build_index(root)
    return root


def vectors(vault: Path) -> dict[int, bytes]:
    """chunk id -> stored vector bytes of the active generation."""
    gen.clear_verify_cache()
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(vault)))
    try:
        return dict(conn.execute("SELECT chunk_id, vector FROM chunk_vectors").fetchall())
    finally:
        conn.close()


def start_and_stop(vault: Path, model: Path, sig: int, after: int) -> subprocess.CompletedProcess[str]:
    """Run the child, send ``sig`` once the active generation holds more than ``after`` vectors."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", CHILD, "index", str(vault), "--embed-only", "--model", str(model)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    layout = gen.layout_for(vault)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        record = gen.active_record(layout)
        if record is not None and record["dense_chunks"] > after:
            proc.send_signal(sig)
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_ctrl_c_and_kill_keep_published_batches_and_the_next_run_continues(vault, model_dirs):
    model = model_dirs[FP32]
    stopped = start_and_stop(vault, model, signal.SIGINT, after=0)
    assert stopped.returncode == 130, stopped.stderr
    assert "interrupted:" in stopped.stderr and "--embed-only" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    first = vectors(vault)
    assert 6 <= len(first) < 48  # published batches kept, not all of them done

    killed = start_and_stop(vault, model, signal.SIGKILL, after=len(first))
    assert killed.returncode == -signal.SIGKILL
    second = vectors(vault)
    assert len(first) < len(second) < 48
    assert {cid: second[cid] for cid in first} == first  # the rerun did not redo (or change) finished chunks
    gen.verify_full(gen.layout_for(vault))  # the killed run left a verified, serving index

    clear_model_cache()
    report = embed_index(vault, model=model)
    assert report.embedded == 48 - len(second) and report.complete  # only what was still missing
    final = vectors(vault)
    assert len(final) == 48 and {cid: final[cid] for cid in second} == second
