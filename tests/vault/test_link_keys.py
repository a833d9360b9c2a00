"""The lookup keys incremental link resolution relies on (``core.vault.links.link_keys``/``note_keys``).

``core.build.link_graph`` re-resolves, when notes appear, only the links that share a lookup key with
them, and, when notes go, only the links that resolved to them. Both rest on two properties of
``LinkResolver`` checked here over generated vaults and links: a note that appears can change a link's
resolution only if they share a key; a note that goes can change it only if the link resolved to it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.vault.links import Link, LinkResolver, link_keys, note_keys

FOLDERS = ("", "a/", "b/", "a/c/", "Ä/")
STEMS = ("x", "X", "y", "x.md", "x.y", "İx", "ä", "index", "c")
ALIASES = ("x", "Y", "alias one", " Alias One ", "a/x", "ä", "x.md", "")
TARGETS = (
    "x",
    "X",
    "y",
    "x.md",
    "X.MD",
    "x.md.md",
    "a/x",
    "b/x",
    "c/x",
    "a/c/x",
    "../x",
    "./y",
    "../../x",
    "x/..",
    "a/..",
    "..",
    ".",
    "/x",
    "a/",
    "x.y",
    "alias one",
    "ALIAS ONE",
    "ä",
    "Ä/x",
    "i̇x",
    "İx",
    "dendron://v/x.y",
    "a\\x",
    "missing",
)

paths = st.builds(lambda f, s: f + s + ".md", st.sampled_from(FOLDERS), st.sampled_from(STEMS))
notes = st.dictionaries(paths, st.lists(st.sampled_from(ALIASES), max_size=2).map(tuple), max_size=8)
links = st.builds(
    Link,
    target=st.sampled_from(TARGETS),
    kind=st.sampled_from(("wikilink", "markdown", "supersedes")),
    alt_target=st.none() | st.sampled_from(TARGETS),
)


def _resolve(vault: dict[str, tuple[str, ...]], link: Link, src: str, label_first: bool) -> str | None:
    return LinkResolver(vault.items(), label_first=label_first).resolve(link, src)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# each key, found where no other one is: the alias (a target with a folder), the path (``a/x.md`` is the
# note ``a/x.md.md``), any name (``x/..`` from ``a/c/`` is the note ``a/c.md``)
@example({}, "b/y.md", ["a/x"], Link("a/x", "wikilink"), "y.md", False)
@example({}, "a/x.md.md", [], Link("a/x.md", "wikilink"), "a/y.md", False)
@example({}, "a/c.md", [], Link("x/..", "markdown"), "a/c/y.md", False)
@given(notes, paths, st.lists(st.sampled_from(ALIASES), max_size=2), links, paths, st.booleans())
def test_a_note_that_appears_changes_only_links_sharing_a_key_with_it(
    vault: dict[str, tuple[str, ...]], new: str, aliases: list[str], link: Link, src: str, label_first: bool
) -> None:
    vault.pop(new, None)
    before = _resolve(vault, link, src, label_first)
    after = _resolve({**vault, new: tuple(aliases)}, link, src, label_first)
    if before != after:
        assert link_keys(link.target, link.alt_target) & note_keys(new, aliases), (before, after)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes, st.data(), links, paths, st.booleans())
def test_a_note_that_goes_changes_only_links_that_resolved_to_it(
    vault: dict[str, tuple[str, ...]], data: st.DataObject, link: Link, src: str, label_first: bool
) -> None:
    if not vault:
        return
    gone = data.draw(st.sampled_from(sorted(vault)))
    before = _resolve(vault, link, src, label_first)
    after = _resolve({k: v for k, v in vault.items() if k != gone}, link, src, label_first)
    assert before == after or before == gone


def test_keys_of_a_link_and_of_the_notes_it_can_name() -> None:
    assert link_keys("a/B.md", None) == {"b.md", "b", "a/b.md"}
    assert link_keys("x", "dendron://v/Y.z") == {"x", "y.z"}
    assert "" in link_keys("x/..", None)  # its path depends on the linking note's folder: any note
    assert note_keys("f/My Note.MD", (" Other ", "")) == {"", "my note.md", "my note", "other"}
