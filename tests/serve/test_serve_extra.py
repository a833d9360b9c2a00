"""The serving commands need the optional `serve` extra: without it, a typed error names it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core import cli


@pytest.mark.parametrize(("command", "module"), [("mcp", "mcp"), ("serve", "uvicorn"), ("watch", "watchfiles")])
def test_a_serving_command_without_the_serve_extra_names_it(tmp_path: Path, capsys, monkeypatch, command, module):
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    assert cli.main([command, str(tmp_path), "--json"]) == 5
    err = json.loads(capsys.readouterr().err)
    assert err["reason"] == "serve_extra_missing" and module in err["evidence"]["missing"] and "serve" in err["hint"]
