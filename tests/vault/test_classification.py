"""Classification fails closed: a frontmatter that mentions a classification it does not state exactly
makes the note ``unreadable`` (restricted), listed in the build report; one test per case."""

from __future__ import annotations

import pytest

from core.build.builder import build_index
from core.searcher import search_vault
from core.vault.notes import UNREADABLE_CLASSIFICATION, parse_note
from tests.conftest import write_files

MARK = "zyzzogeton"  # a word only the malformed notes hold

MALFORMED = {
    "yaml_error": f"---\nclassification: secret\ntitle: [unclosed\n---\n{MARK} one\n",
    "unclosed_fence": f"---\nclassification: secret\ntitle: Plans\n\n{MARK} two\n",
    "indented_fence": f"  ---\nclassification: secret\n  ---\n{MARK} three\n",
    "blank_line_before_fence": f"\n---\nclassification: secret\n---\n{MARK} four\n",
    "list_value": f"---\nclassification: [secret]\n---\n{MARK} five\n",
    "mapping_value": f"---\nclassification: {{level: secret}}\n---\n{MARK} six\n",
    "differently_cased_key": f"---\nClassification: secret\n---\n{MARK} seven\n",
    "upper_cased_key": f"---\nCLASSIFICATION: secret\n---\n{MARK} eight\n",
    "duplicated_key": f"---\nclassification: secret\nclassification: public\n---\n{MARK} nine\n",
    "cased_and_plain_keys": f"---\nclassification: public\nClassification: secret\n---\n{MARK} ten\n",
    "nested_key": f"---\nmeta:\n  classification: secret\n---\n{MARK} eleven\n",
    "empty_value": f"---\nclassification:\n---\n{MARK} twelve\n",
    "non_string_value": f"---\nclassification: 3\n---\n{MARK} thirteen\n",
    "not_a_mapping": f"---\n- classification: secret\n---\n{MARK} fourteen\n",
    "bare_key_without_fence": f"classification: secret\n\n{MARK} fifteen\n",
    # a control character: no classification name holds one (the dead rows' class of a segmented generation,
    # core.ranking.classes.DELETED, is a NUL-led name no caller may be given)
    "nul_in_value": f'---\nclassification: "\\0deleted"\n---\n{MARK} seventeen\n',
    "control_in_value": f'---\nclassification: "lan\\x1b[31m"\n---\n{MARK} eighteen\n',
    "yaml_bomb": "---\nclassification: secret\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: [*d, *d, *d, *d, *d, *d, *d, *d]\n---\n" + f"{MARK} sixteen\n",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_classification_is_unreadable(case):
    parsed = parse_note(f"{case}.md", MALFORMED[case].encode())
    assert parsed.classification == UNREADABLE_CLASSIFICATION
    assert "classification_unreadable" in {p.reason for p in parsed.problems}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\nclassification: Secret\n---\nbody\n", "secret"),
        ("---\nclassification: ' lan '\n---\nbody\n", "lan"),
        ("---\n{classification: secret, title: t}\n---\nbody\n", "secret"),
        ("---\ntitle: t\n---\nthe classification of birds\n", None),  # the body is not frontmatter
        ("# no frontmatter\nclassification: secret\n", None),  # not the first line
        ("---\ntitle: t\n---\n", None),
    ],
)
def test_exact_classifications_are_read(text, expected):
    parsed = parse_note("n.md", text.encode())
    assert parsed.classification == expected
    assert "classification_unreadable" not in {p.reason for p in parsed.problems}


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    files = {f"bad/{case}.md": text for case, text in MALFORMED.items()}
    files["ok/public.md"] = f"---\nclassification: public\n---\nan ordinary note, not {MARK[:-1]}\n"
    root = write_files(tmp_path_factory.mktemp("cls"), files)
    report = build_index(root)
    return root, report


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_unreadable_note_is_hidden_from_a_restricted_caller(vault, case):
    root, _ = vault
    for mode in ("fts", "vector", "hybrid", "graph_assisted"):
        for classifications in (("public",), ("public", "secret", "lan")):
            found = {r.rel_path for r in search_vault(root, MARK, mode=mode, classifications=classifications)}
            assert f"bad/{case}.md" not in found


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_unreadable_note_is_visible_when_asked_for_explicitly(vault, case):
    root, _ = vault
    found = {r.rel_path for r in search_vault(root, MARK, mode="fts", limit=50, classifications=("unreadable",))}
    assert f"bad/{case}.md" in found


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_build_report_lists_the_unreadable_classification(vault, case):
    _, report = vault
    listed = {(p["path"], p["reason"]) for p in report.problems}
    assert (f"bad/{case}.md", "classification_unreadable") in listed
