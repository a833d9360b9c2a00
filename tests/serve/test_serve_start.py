"""Issue 28 cases 12 and 15: how the servers start.

A token that was asked for and cannot be used (an empty or blank ``--token-file``, a missing one,
a set but empty ``VAULTSEARCH_TOKEN``) refuses to start with ``token_invalid`` (exit 2): never a
server with the token off, never a traceback. A vault or index path holding OSC/BEL sequences is
printed escaped in every start-up and watch line.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from core.build.builder import build_index
from core.build.watch import BuildOutcome
from tests.conftest import note, write_vault
from tests.serve.serve_helpers import VAULTSEARCH, _env, serve_refused

OSC = "\x1b]0;pwned\x07"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_vault(tmp_path_factory.mktemp("start") / f"vault{OSC}", {"a.md": note("A", "alpha")})
    build_index(root)
    return root


@pytest.mark.parametrize("content", ["", "  \n\t\n"])
def test_an_empty_or_blank_token_file_refuses_to_start(vault: Path, tmp_path: Path, content: str) -> None:
    token = tmp_path / "token"
    token.write_text(content, encoding="utf-8")
    done = serve_refused(vault, "--token-file", str(token))
    assert done.returncode == 2 and "[token_invalid]" in done.stderr and "Traceback" not in done.stderr


def test_a_missing_token_file_is_a_typed_refusal_not_a_traceback(vault: Path, tmp_path: Path) -> None:
    done = serve_refused(vault, "--token-file", str(tmp_path / "nope"))
    assert done.returncode == 2 and "[token_invalid]" in done.stderr and "Traceback" not in done.stderr


def test_a_set_but_empty_token_variable_refuses_to_start(vault: Path) -> None:
    done = serve_refused(vault, env={"VAULTSEARCH_TOKEN": " "})
    assert done.returncode == 2 and "[token_invalid]" in done.stderr


def test_the_mcp_start_up_line_escapes_a_vault_path_holding_osc_and_bel(vault: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / f"index{OSC}"
    build_index(vault, index_dir=index_dir)
    done = subprocess.run(
        [VAULTSEARCH, "mcp", str(vault), "--index-dir", str(index_dir)],
        stdin=subprocess.DEVNULL,  # the client closes at once: the server prints its start-up line and ends
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert "vaultsearch mcp: vault" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr and "\\x1b]0;pwned\\x07" in done.stderr


def test_a_watch_line_escapes_a_path_in_a_failed_build_message() -> None:
    from core.cli.serving import watch_line

    failed = BuildOutcome(ok=False, at=time.time(), reason="build_io_failed", message=f"cannot read /v{OSC}/a.md")
    for as_json in (False, True):
        line = watch_line(failed, as_json=as_json)
        assert "\x1b" not in line and "\x07" not in line and "pwned" in line
