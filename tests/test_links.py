"""Link extraction (every form Obsidian knows, none inside code or comments) and resolution."""

from __future__ import annotations

from memory_hub.vault.links import EMBED, FRONTMATTER, MARKDOWN, WIKILINK, Resolver, extract_links
from memory_hub.vault.notes import parse_note


def _targets(text: str) -> list[tuple[str, str]]:
    return [(link.target, link.kind) for link in parse_note("src/note.md", text).links]


def test_every_wikilink_form() -> None:
    text = (
        "Plain [[alpha]], aliased [[beta|the beta]], heading [[gamma#Set up]], block [[delta#^b1x]],\n"
        "embed ![[diagram.svg]], embedded note ![[epsilon#Part]], path [[folder/zeta]], "
        "everything [[folder/eta#Head|shown]].\n"
        "| table | [[theta\\|Theta]] |\n"
        "[[#Local heading]] points inside this note.\n"
    )
    links = parse_note("n.md", text).links
    by_target = {link.target: link for link in links}
    assert list(by_target) == ["alpha", "beta", "gamma", "delta", "diagram.svg", "epsilon", "folder/zeta",
                               "folder/eta", "theta"]
    assert by_target["beta"].alias == "the beta"
    assert by_target["gamma"].heading == "Set up" and by_target["gamma"].block is None
    assert by_target["delta"].block == "b1x" and by_target["delta"].heading is None
    assert by_target["diagram.svg"].kind == EMBED
    assert by_target["epsilon"].kind == EMBED and by_target["epsilon"].heading == "Part"
    assert by_target["folder/eta"].heading == "Head" and by_target["folder/eta"].alias == "shown"
    assert by_target["theta"].alias == "Theta" and by_target["theta"].kind == WIKILINK
    assert by_target["alpha"].line == 1 and by_target["theta"].line == 3


def test_line_numbers_count_from_file_start_with_frontmatter() -> None:
    text = "---\ntitle: T\n---\n\nsee [[x]]\n"
    (link,) = parse_note("n.md", text).links
    assert link.line == 5


def test_no_links_in_code_or_comments() -> None:
    text = (
        "real [[kept]]\n"
        "```\n[[in-fence]]\n```\n"
        "~~~python\n[[in-tilde-fence]]\n~~~\n"
        "inline `[[in-inline-code]]` and ``[[double `tick` code]]``\n"
        "%% hidden [[in-comment]] %%\n"
        "%%\nmulti-line [[in-block-comment]]\n%%\n"
        "<!-- [[in-html-comment]] -->\n"
        "[md in code](`x.md`) and [also real](real.md)\n"
    )
    targets = {t for t, _ in _targets(text)}
    assert "kept" in targets and "real.md" in targets
    for hidden in ("in-fence", "in-tilde-fence", "in-inline-code", "double `tick` code", "in-comment",
                   "in-block-comment", "in-html-comment"):
        assert hidden not in targets


def test_fence_with_longer_closing_and_unclosed_fence() -> None:
    text = "````\n```\n[[inside]]\n```\n````\n[[after]]\n"
    assert [t for t, _ in _targets(text)] == ["after"]
    # An unclosed fence hides the rest of the note, as in Obsidian's reading view.
    assert _targets("```\n[[never]]\n") == []


def test_markdown_links_relative_encoded_and_external() -> None:
    text = (
        "[up](../other/Note%20One.md) [here](sibling.md#Heading) [blk](x.md#^abc) "
        "[angle](<with space.md>) [titled](t.md \"Title\") "
        "[web](https://example.com/a.md) [mail](mailto:a@b.c) [anchor](#top) [img](pic.png) "
        "[obs](obsidian://open?file=x.md)\n"
    )
    links = [link for link in parse_note("src/note.md", text).links if link.kind == MARKDOWN]
    got = {link.target: link for link in links}
    assert set(got) == {"../other/Note One.md", "sibling.md", "x.md", "with space.md", "t.md"}
    assert got["sibling.md"].heading == "Heading" and got["x.md"].block == "abc"
    assert got["../other/Note One.md"].alias == "up"


def test_frontmatter_property_links() -> None:
    text = '---\nrelated: ["[[alpha]]", "[[beta|B]]"]\nparent: "[[folder/gamma#h]]"\nplain: alpha\n---\nbody\n'
    links = parse_note("n.md", text).links
    assert [(link.target, link.kind) for link in links] == [
        ("alpha", FRONTMATTER), ("beta", FRONTMATTER), ("folder/gamma", FRONTMATTER)]
    assert links[1].alias == "B" and links[2].heading == "h"


def test_extract_links_without_frontmatter_argument() -> None:
    assert [link.target for link in extract_links("a [[b]] `[[c]]`")] == ["b"]


PATHS = [
    "Home.md", "notes/Alpha.md", "archive/old/alpha.md", "a/b/Deep.md", "x/Deep.md", "img/diagram.svg",
    "other/Note One.md", "src/sibling.md", "sibling.md", "日本語/認証メモ.md",
]


def _resolver() -> Resolver:
    return Resolver(PATHS, {"notes/Alpha.md": ["First Letter", "A"], "Home.md": ["MOC"]})


def test_resolution_order() -> None:
    r = _resolver()
    assert r.resolve("notes/Alpha") == "notes/Alpha.md"  # exact path without extension
    assert r.resolve("notes/Alpha.md") == "notes/Alpha.md"  # with extension
    assert r.resolve("old/alpha") == "archive/old/alpha.md"  # path suffix
    assert r.resolve("ALPHA") == "notes/Alpha.md"  # case-insensitive basename, shortest path wins
    assert r.resolve("deep") == "x/Deep.md"  # ambiguous basename → fewest folders
    assert r.resolve("b/deep") == "a/b/Deep.md"
    assert r.resolve("first letter") == "notes/Alpha.md"  # alias
    assert r.resolve("moc") == "Home.md"
    assert r.resolve("diagram.svg") == "img/diagram.svg"  # attachments resolve by full name
    assert r.resolve("認証メモ") == "日本語/認証メモ.md"
    assert r.resolve("missing-note") is None  # dangling
    assert r.resolve("") is None and r.resolve("   ") is None


def test_basename_beats_alias() -> None:
    r = Resolver(["a.md", "b.md"], {"b.md": ["a"]})
    assert r.resolve("a") == "a.md"


def test_markdown_links_resolve_relative_to_source_folder() -> None:
    r = _resolver()
    assert r.resolve("../other/Note One.md", "src/note.md", MARKDOWN) == "other/Note One.md"
    assert r.resolve("sibling.md", "src/note.md", MARKDOWN) == "src/sibling.md"
    assert r.resolve("sibling.md", "top.md", MARKDOWN) == "sibling.md"
    # a wikilink with the same text is not relative: shortest path wins
    assert r.resolve("sibling", "src/note.md", WIKILINK) == "sibling.md"
    # leaving the vault does not resolve to something outside; it falls back to name resolution
    assert r.resolve("../../../sibling.md", "src/note.md", MARKDOWN) == "sibling.md"


def test_stray_backtick_does_not_hide_later_links() -> None:
    # from the Obsidian Hub: an escaped backtick, then list items with code and links
    text = ("- use a `\\` backslash to escape a backtick ( \\`)?\n"
            "- `@shabegom` talk, see [[buttons]]\n"
            "- one ```schedule codeblock, then [[timeline]]\n"
            "- [[after]] `code [[hidden]]`\n"
            "\nmulti `line\nspan [[also-hidden]]` [[visible]]\n")
    assert [t for t, _ in _targets(text)] == ["buttons", "timeline", "after", "visible"]
