"""Every numeric option says the same range in its help and in its error (one source: its NumberRange)."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from core import cli
from core.cli.argtypes import RESULTS, NumberRange


def _ranged_options() -> list[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """(command, its parser, the option) for every option of every command whose type is a NumberRange."""
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (name, sub, action)
        for name, sub in subs.choices.items()
        for action in sub._actions
        if isinstance(action.type, NumberRange)
    ]


def _error(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        parser.parse_args(argv)
    assert exc.value.code == 2, argv
    return err.getvalue()


def _outside(bounds: NumberRange) -> list[str]:
    step = 1 if bounds.whole else 0.5
    return [str(bounds.low - step), str(bounds.high + step), "x", "nan"]


RANGED = _ranged_options()


def test_the_numeric_options_are_ranged() -> None:
    """-n and -k, the chunk sizes, counts, seconds, the debounce and the port all carry their range."""
    found = {(name, action.option_strings[0]) for name, _, action in RANGED}
    for expected in [("search", "-n"), ("eval", "-k"), ("index", "--chunk-size"), ("index", "--wait")]:
        assert expected in found
    for name in ("watch", "mcp", "serve", "open"):
        assert (name, "--debounce-ms") in found
    assert ("serve", "--port") in found and ("search", "--freshness-budget") in found


@pytest.mark.parametrize(
    ("command", "parser", "action"), RANGED, ids=[f"{c}{a.option_strings[0]}" for c, _, a in RANGED]
)
def test_help_and_error_say_the_same_range(command, parser, action) -> None:
    bounds: NumberRange = action.type
    assert bounds.text in (action.help or ""), (command, action.option_strings)
    for value in _outside(bounds):
        err = _error(parser, [action.option_strings[0], value])
        assert bounds.text in err, (command, action.option_strings, value, err)


@pytest.mark.parametrize("command", ["search", "eval"])
def test_n_range_in_the_rendered_help_and_the_cli_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Through main: `search -n 0` / `eval -k 10001` name the range the command's --help shows."""
    flag, argv = ("-n", ["search", "v", "q"]) if command == "search" else ("-k", ["eval", "v", "--queries", "q"])
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    assert f"({RESULTS.text}; default 10)" in " ".join(capsys.readouterr().out.split())
    for bad in ("0", "10001"):
        with pytest.raises(SystemExit) as exc:
            cli.main([*argv, flag, bad])
        assert exc.value.code == 2
        assert f"argument {flag}: must be {RESULTS.text}, not {bad}" in capsys.readouterr().err


def test_the_bounds_themselves_are_accepted() -> None:
    assert RESULTS("1") == 1 and RESULTS("10000") == 10_000
    seconds = NumberRange(0, 86_400, whole=False, unit="seconds")
    assert seconds("1e-9") == 1e-9 and seconds.text == "0 to 86400 seconds"
