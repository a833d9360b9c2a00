"""Frontmatter YAML: the direct build of plain mappings gives exactly what the safe constructor gives."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from core.vault.frontmatter import _load_yaml, _Loader, load_frontmatter


def _reference(text: str) -> object:
    try:
        return ("ok", yaml.load(text, Loader=_Loader))  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__, str(exc))


def _fast(text: str) -> object:
    try:
        return ("ok", _load_yaml(text))
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__, str(exc))


# Scalars as a note's author writes them: plain words, numbers, dates, booleans, nulls, quoted
# strings, tags, anchors and aliases, merge keys, flow and block sequences, nested mappings.
_SCALARS = st.sampled_from(
    [
        "note",
        "Two words",
        "3",
        "-1.5",
        "0x1f",
        "2024-01-31",
        "2024-13-45",
        "2024-01-31T10:00:00Z",
        "yes",
        "true",
        "~",
        "null",
        "''",
        '"quoted: colon"',
        "'single # not a comment'",
        "!!str 12",
        "!!int '7'",
        "=",
        ".nan",
        "[]",
        "{}",
        "[a, b, 3]",
        "[a, [b]]",
        "{x: 1}",
        "&anchor [a, b]",
        "*anchor",
        "&s word",
        "*s",
        "Grüße 東京",
        "a # comment",
        "!!python/object/apply:os.system [echo]",
        "!!python/tuple [a, b]",
        "!!seq [a]",
        "!!set {a, b}",
        "!!omap [a: b]",
        "!local [a]",
        "!!map {a: b}",
        "!!python/name:os.system",
    ]
)
_KEYS = st.sampled_from(["title", "tags", "aliases", "date", "lang", "3", "true", "~", "<<", "? complex", "title"])


@st.composite
def _frontmatter(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        key, value = draw(_KEYS), draw(_SCALARS)
        if draw(st.booleans()):
            items = draw(st.lists(_SCALARS, min_size=0, max_size=3))
            lines.append(f"{key}:" + "".join(f"\n  - {item}" for item in items))
        else:
            lines.append(f"{key}: {value}")
    if lines and draw(st.booleans()):  # a tag on the whole document: !!map is plain, the rest not
        lines.insert(0, draw(st.sampled_from(["--- !!map", "--- !!python/object:os.system", "--- !local"])))
    return "\n".join(lines) + ("\n" if draw(st.booleans()) else "")


@settings(max_examples=400, deadline=None)
@given(_frontmatter())
def test_plain_mappings_load_as_the_safe_constructor_loads_them(text: str) -> None:
    assert _fast(text) == _reference(text)


def test_the_direct_build_covers_strings_and_lists_of_strings_only() -> None:
    assert _load_yaml("title: Note\ntags: [a, b]\naliases:\n  - x\n") == {
        "title": "Note",
        "tags": ["a", "b"],
        "aliases": ["x"],
    }
    # a date stays a string (the loader's timestamp rule), a number is a number, a nested map a map
    assert _load_yaml("date: 2024-01-31\nn: 3\nm: {a: [1]}\n") == {"date": "2024-01-31", "n": 3, "m": {"a": [1]}}
    # the later of two equal keys wins, as in the safe constructor
    assert _load_yaml("title: a\ntitle: b\n") == {"title": "b"}
    assert _load_yaml("") is None
    assert _load_yaml("- a\n- b\n") == ["a", "b"]


def test_a_tagged_list_or_mapping_goes_to_the_safe_constructor_which_refuses_python_tags() -> None:
    # a sequence of plain strings under a !!python tag is not a list: building it directly would
    # turn an attack into data (the hostile-vault test's os.system payload)
    for text in ("x: !!python/object/apply:os.system ['touch /tmp/p']\n", "--- !!python/object:os.system\na: b\n"):
        loaded, problems = load_frontmatter("python.md", text)
        assert loaded == {}
        assert [p.reason for p in problems] == ["yaml_invalid"]
    assert _load_yaml("x: !!set {a, b}\n") == {"x": {"a", "b"}}


def test_an_alias_bomb_is_still_cut_off() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"k{i}: *a" for i in range(3000)]
    loaded, problems = load_frontmatter("bomb.md", "\n".join(lines))
    assert loaded == {}
    assert [p.reason for p in problems] == ["yaml_invalid"]


def test_an_alias_is_left_to_the_constructor_so_it_is_never_expanded() -> None:
    # one list shared by both keys (a direct build would copy it per alias: 20,000 aliases of a
    # long list would be built out in memory before the value budget could cut them off)
    loaded = _load_yaml("a: &x [p, q]\nb: *x\n")
    assert loaded == {"a": ["p", "q"], "b": ["p", "q"]}
    assert loaded["a"] is loaded["b"]
