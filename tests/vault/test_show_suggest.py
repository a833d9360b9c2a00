"""``show`` a note that is not there: the closest notes the caller may see, never a hidden one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import cli
from core.errors import NoteNotFoundError
from core.vault.show import show_note
from core.vault.suggest import suggest_notes
from tests.conftest import note, write_files

FILES = {
    "decisions/adr-001-use-postgres.md": note('"ADR-001: Use PostgreSQL"', "We use Postgres.", classification="public"),
    "reference/postgres-tuning-notes.md": note("Postgres tuning notes", "shared_buffers and work_mem."),
    "reference/security-policy.md": note("Security policy", "Who may log in.", classification="secret"),
    "reference/glossary.md": note("Glossary", "Words we use."),
    "people/alice.md": "# Alice\n\nNo frontmatter: named by her file.\n",
}


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    return write_files(tmp_path / "vault", FILES)


def _not_found(vault: Path, asked: str, **kw: object) -> NoteNotFoundError:
    with pytest.raises(NoteNotFoundError) as exc:
        show_note(vault, asked, **kw)  # type: ignore[arg-type]
    assert exc.value.reason == "note_not_found"
    return exc.value


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("adr-001", "decisions/adr-001-use-postgres.md"),  # part of the file name
        ("decisions/adr-001", "decisions/adr-001-use-postgres.md"),  # part of the path
        ("adr-01-use-postgres", "decisions/adr-001-use-postgres.md"),  # a typo in the file name
        ("Postgres tuning", "reference/postgres-tuning-notes.md"),  # the title, nearly
        ("Security polcy", "reference/security-policy.md"),  # a typo in the title
        ("ALICE.md", "people/alice.md"),  # another case, in another folder
    ],
)
def test_a_missing_note_suggests_the_closest_by_name_title_or_path(vault, asked, expected):
    exc = _not_found(vault, asked)
    assert exc.evidence["suggestions"][0] == expected
    assert expected in (exc.hint or "")


def test_nothing_close_is_said_and_nothing_is_suggested(vault):
    exc = _not_found(vault, "zzzz")
    assert exc.evidence["suggestions"] == [] and "vaultsearch search" in (exc.hint or "")
    assert suggest_notes(vault, "reference/x") == []  # a shared folder alone makes no two notes alike


def test_a_hidden_note_is_never_suggested_and_shows_as_missing(vault):
    """With --classification public the secret note is not there: not shown, not suggested, and its
    refusal is word for word that of a note that never existed."""
    visible = ["public"]
    assert "reference/security-policy.md" in _not_found(vault, "security polcy").evidence["suggestions"]
    assert _not_found(vault, "security polcy", classifications=visible).evidence["suggestions"] == []
    hidden = _not_found(vault, "reference/security-policy", classifications=visible)
    missing = _not_found(vault, "reference/security-policx", classifications=visible)
    assert hidden.evidence["suggestions"] == missing.evidence["suggestions"] == []
    assert hidden.message == missing.message.replace("policx", "policy")
    assert hidden.hint == missing.hint
    assert show_note(vault, "reference/security-policy", classifications=["secret"]).title == "Security policy"
    assert show_note(vault, "decisions/adr-001-use-postgres", classifications=visible).rel_path.startswith("decisions")


def test_the_cli_says_did_you_mean_with_the_usage_exit_code(vault, capsys):
    assert cli.main(["show", str(vault), "adr-001"]) == 2
    err = capsys.readouterr().err
    assert (
        "[note_not_found]" in err and "did you mean: decisions/adr-001-use-postgres.md (ADR-001: Use PostgreSQL)" in err
    )
    assert cli.main(["show", str(vault), "security polcy", "--classification", "public", "--json"]) == 2
    out = json.loads(capsys.readouterr().err)
    assert out["reason"] == "note_not_found" and out["evidence"]["suggestions"] == []
    assert "security" not in json.dumps(out).replace("security polcy", "")
    assert cli.main(["show", str(vault), "reference/security-policy", "--classification", "public"]) == 2
    assert "security-policy.md' in the vault" in capsys.readouterr().err


def test_a_file_the_build_would_not_serve_is_not_there_for_a_restricted_caller(tmp_path):
    """A binary ``.md`` (the build skips it) has no classification to read: a restricted caller gets the
    answer for a missing note; an unrestricted one still sees the file, as before."""
    vault = write_files(tmp_path / "vault", {"blob.md": b"\x00\x01binary\x00" * 10, "keep.md": note("Keep", "x")})
    hidden = _not_found(vault, "blob", classifications=["public"])
    assert hidden.message == _not_found(vault, "blub", classifications=["public"]).message.replace("blub", "blob")
    assert show_note(vault, "blob").rel_path == "blob.md"
