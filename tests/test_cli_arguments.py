"""The CLI has nothing to apologise for: no traceback for any bad argument (hypothesis over argument
lists), usage errors with exit 2, a closed pipe ends quietly, note text cannot drive the terminal,
deprecated aliases are accepted but not listed, and --namespace filters."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import cli
from core.build.builder import build_index
from tests.conftest import note, write_vault

FILES = {
    "a.md": note("Lantern guide", "Lanterns light the harbour path.", namespace="work", tags=["tools/light"]),
    "b.md": note("Harbour log", "The lantern in the harbour went out.", namespace="home"),
    "evil.md": note("Evil", "lantern \x1b[2J\x1b]0;pwned\x07 \x9b31m text \u202e reversed"),
}


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    root = write_vault(tmp_path_factory.mktemp("cli-args") / "vault", FILES)
    build_index(root)
    return root


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def test_embed_limit_zero_and_other_bad_numbers_are_usage_errors(vault):
    for argv in (
        ["index", str(vault), "--embed", "--embed-limit", "0"],
        ["index", str(vault), "--chunk-size", "0"],
        ["index", str(vault), "--chunk-size", "100", "--chunk-overlap", "100"],
        ["index", str(vault), "--wait", "nan"],
        ["index", str(vault), "--tokenizer", "trigram"],
        ["search", str(vault), "q", "-n", "0"],
        ["search", str(vault), "q", "-n", str(10**30)],
        ["search", str(vault), "q", "--mode", "nope"],
        ["search", str(vault), "q", "--date-field", "published", "--since", "2024-01-01"],
        ["search", str(vault), "q", "--since", "tomorrow"],
        ["eval", str(vault), "--queries", "missing.jsonl", "--qrels", "missing.tsv"],
    ):
        code, _, err = run(argv)
        assert code == 2 and "Traceback" not in err, argv


def test_deprecated_alias_is_accepted_but_not_listed(vault):
    code, out, _ = run(["search", "--help"])
    assert code == 0 and "hybrid_reranked" not in out and "graph_assisted" in out
    code, _, err = run(["search", str(vault), "lantern", "--mode", "hybrid_reranked", "--json"])
    assert code == 5 and json.loads(err)["reason"] != "unknown_mode"  # accepted; fails closed without a reranker


def test_namespace_filter_is_exposed(vault):
    code, out, _ = run(["search", str(vault), "lantern", "--namespace", "home", "--json"])
    assert code == 0 and [r["rel_path"] for r in json.loads(out)["results"]] == ["b.md"]
    code, out, _ = run(["search", str(vault), "--help"])
    assert "--namespace" in out


def test_note_text_cannot_send_terminal_control_sequences(vault):
    for argv in (["search", str(vault), "lantern", "-n", "5"], ["show", str(vault), "evil.md"]):
        code, out, _ = run(argv)
        assert code == 0 and "\\x1b[2J" in out
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e")
    code, out, _ = run(["search", str(vault), "lantern", "--json"])
    assert code == 0 and "\x1b" not in out and "\x9b" not in out and "\\u001b" in out and "\\u009b" in out
    assert "\x1b[2J" in "".join(r["snippet"] for r in json.loads(out)["results"])  # the data itself is intact


def test_a_closed_pipe_ends_quietly(vault):
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.cli", "search", str(vault), "lantern", "-n", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    proc.stdout.close()  # the reader goes away before anything is written (like `| head` exiting)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == cli.EXIT_BROKEN_PIPE and err == ""


OPTIONS = [
    "--json",
    "--mode",
    "-n",
    "--raw",
    "--allow-fallback",
    "--type",
    "--tag",
    "--any-tag",
    "--path",
    "--namespace",
    "--since",
    "--until",
    "--date-field",
    "--status",
    "--volatility",
    "--include-superseded",
    "--classification",
    "--section",
    "--lines",
    "--check",
    "--chunk-size",
    "--chunk-overlap",
    "--tokenizer",
    "--dot-paths",
    "--keep",
    "--wait",
    "--embed-limit",
    "--queries",
    "--qrels",
    "-k",
    "--failures",
    "--markdown",
    "--help",
]
VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["0", "-1", "1", "2.5", str(10**30), "nan", "inf", "2024-03-01T00:00+05:30", "a:b", "3:1"]),
    st.sampled_from(["fts", "hybrid_reranked", "semantic", "mtime", "updated", "\udcff", "\x1b[2J", "--", "-"]),
    st.sampled_from(["unicode61", "porter", "trigram", "ignore", "index", "a.md", "../x.md", "/etc/passwd"]),
)
COMMANDS = st.sampled_from(["search", "show", "status", "verify", "eval", "modes", "index", "nope", ""])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    command=COMMANDS,
    target=st.sampled_from(["vault", "missing", "file"]),
    rest=st.lists(st.one_of(st.sampled_from(OPTIONS), VALUES), max_size=8),
)
@example(command="show", target="vault", rest=["--", "--"])  # argparse gave the path as [] (found by this test)
@example(command="search", target="vault", rest=["--", "--"])
def test_no_argument_list_gives_a_traceback(vault, tmp_path_factory, command, target, rest):
    paths = {"vault": str(vault), "missing": str(vault.parent / "missing"), "file": str(vault / "a.md")}
    argv = [command, paths[target], *rest] if command not in ("modes", "") else [command, *rest]
    if command == "index":  # parse and check only: no fuzzed build or embedding of the shared vault
        argv = [command, paths["missing"] if target == "vault" else paths[target], *rest]
    code, _, err = run(argv)
    assert isinstance(code, int) and 0 <= code <= 8, (argv, code, err)
    assert "Traceback" not in err, argv
    assert not (vault.parent / "missing").exists()  # a vault is never created


def test_json_output_escapes_del_c1_and_bidi_controls_and_stays_valid_json(tmp_path):
    root = write_vault(tmp_path / "v", {"x.md": note("X", "lantern \x7f del \u2066 isolate \x85 next")})
    build_index(root)
    code, out, _ = run(["search", str(root), "lantern", "--json"])
    assert code == 0 and not any(ch in out for ch in "\x7f\x85\u2066")
    assert "\x7f del \u2066 isolate" in json.loads(out)["results"][0]["snippet"]  # the data itself is intact


def _described(parser: object) -> list[tuple[object, ...]]:
    """Every argument of a parser and of its sub-parsers (their help text too), recursively."""
    import argparse

    out: list[tuple[object, ...]] = []
    for a in parser._actions:  # type: ignore[attr-defined]
        if isinstance(a, argparse._SubParsersAction):
            out += [(name, sub.format_help(), *_described(sub)) for name, sub in a.choices.items()]
        else:
            out.append((tuple(a.option_strings), a.dest, repr(a.default), a.type, a.help, a.choices, a.nargs))
    return out


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_a_command_parser_built_alone_is_the_one_of_the_whole_cli(command: str) -> None:
    """main builds only the sub-parser of the command it runs (a search does not pay for the others):
    its arguments, defaults and help are exactly those of the full parser's."""
    whole = {entry[0]: entry for entry in _described(cli.build_parser()) if isinstance(entry[0], str)}
    alone = [entry for entry in _described(cli.build_parser(command)) if isinstance(entry[0], str)]
    assert set(whole) == set(cli.COMMANDS)
    assert alone == [whole[command]]


def test_an_unknown_or_missing_command_gets_the_whole_clis_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["serach", "v", "q"], [], ["--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr()
        assert "{index,search,watch,mcp,serve,open,show,status,verify,modes,models,eval}" in text.out + text.err
