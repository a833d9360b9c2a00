"""The README's command reference is the parser's own help, regenerated, never hand-written (drift test)."""

from __future__ import annotations

import pytest

from core import cli
from core.cli import reference
from core.errors import UsageError
from tests.paths import REPO

README = REPO / "README.md"


def test_the_readme_reference_is_what_the_parser_renders() -> None:
    text = README.read_text(encoding="utf-8")
    held, generated = reference.current_block(text), reference.generated_block()
    assert held == generated, f"README.md's command reference is out of date; run: {reference.REGENERATE}"


def test_every_command_and_option_is_in_the_reference() -> None:
    parser = cli.build_parser()
    text = reference.reference_markdown()
    for name, sub in reference._subparsers(parser).items():
        assert sub.description and f"$ vaultsearch {name} --help" in text
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, (name, flag)
    assert "--version" in text


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.reference_markdown()
    monkeypatch.setenv("COLUMNS", "300")
    assert reference.reference_markdown() == narrow
    assert max(len(line) for line in narrow.splitlines() if not line.startswith("<")) <= reference.WIDTH


def test_write_replaces_only_the_block_and_check_reports_drift(tmp_path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# Title\n\nbefore\n\n{reference.BEGIN}\nstale text\n{reference.END}\n\nafter\n", encoding="utf-8"
    )
    assert reference.main(["--check", str(readme)]) == 1
    assert reference.REGENERATE in capsys.readouterr().err
    assert reference.main(["--write", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith(f"{reference.END}\n\nafter\n")
    assert "stale text" not in text and reference.main(["--check", str(readme)]) == 0


def test_a_file_without_exactly_one_block_is_refused(tmp_path) -> None:
    for text in ("no markers", f"{reference.BEGIN}\n{reference.END}\n{reference.BEGIN}\n{reference.END}"):
        with pytest.raises(UsageError):
            reference.with_reference(text)
        readme = tmp_path / "R.md"
        readme.write_text(text, encoding="utf-8")
        assert reference.main(["--check", str(readme)]) == 2
