"""The note model: title/description fallbacks, tags, aliases, kinds from folders, problems."""

from __future__ import annotations

import pytest

from memory_hub.capture.daily import insert_link
from memory_hub.dream.edits import append_to_section
from memory_hub.index.chunks import chunk_note
from memory_hub.vault.edit import edit_body
from memory_hub.vault.markdown import HEADING, named_section, next_heading
from memory_hub.vault.notes import infer_kind, parse_note


def test_title_fallbacks() -> None:
    assert parse_note("a/b.md", "---\ntitle: From YAML\n---\n# Heading\n").title == "From YAML"
    assert parse_note("a/b.md", "# The **H1** [[x|link]]\n\nintro\n").title == "The H1 link"
    # an H1 further down is a section, not the title (obsidian-hub's footer "# This note in GitHub")
    assert parse_note("a/b.md", "intro\n\n# The **H1** [[x|link]]\n").title == "b"
    footer = "---\ntags: [x]\n---\n%% Add a description %%\n\nSome text.\n\n# This note in GitHub\n\n<span>Edit</span>\n"
    assert parse_note("05 - Concepts/PARA.md", footer).title == "PARA"
    # comments, badges, images and tags may stand above the title heading
    badges = "%% ----- Badges ----- %%\n![Downloads](https://img.shields.io/x)\n<br>\n#theme\n\n# Serenity\n\nText.\n"
    assert parse_note("Themes/x.md", badges).title == "Serenity"
    assert parse_note("a/b.md", "## only h2\n\ntext\n").title == "b"
    assert parse_note("a/b.md", "```\n# not a heading\n```\n").title == "b"


def test_description_fallbacks() -> None:
    assert parse_note("n.md", "---\ndescription: Said so.\n---\nBody para.\n").description == "Said so."
    text = "# T\n\n> a quote\n\n```\ncode only\n```\n\n| t | a |\n\nFirst *real* paragraph with [[link|words]].\n\nSecond.\n"
    assert parse_note("n.md", text).description == "First real paragraph with words."
    long = "# T\n\n" + " ".join(["word"] * 200) + "\n"
    desc = parse_note("n.md", long).description
    assert len(desc) <= 241 and desc.endswith("…")
    assert parse_note("n.md", "# Only a title\n").description == ""


def test_tags_from_list_string_and_inline_outside_code() -> None:
    text = "---\ntags: [alpha, '#beta']\n---\nSee #inline and #nested/tag, #日本語タグ.\n`#incode` #123 a#b\n```\n#fenced\n```\n"
    note = parse_note("n.md", text)
    assert note.tags == ["alpha", "beta", "inline", "nested/tag", "日本語タグ"]
    assert parse_note("n.md", "---\ntags: one, two\n---\n").tags == ["one", "two"]
    assert parse_note("n.md", "---\ntags: solo\n---\n").tags == ["solo"]
    assert parse_note("n.md", "---\ntags: Alpha\n---\n#alpha\n").tags == ["Alpha"]  # deduped, case-insensitive


def test_aliases_scope_and_dates() -> None:
    note = parse_note("n.md", "---\naliases: [One, Two]\nscope: Work\ncreated: 2026-05-01\ndue: 2026-06-01\n---\n")
    assert note.aliases == ["One", "Two"] and note.scope == "work"
    assert note.dates == {"created": "2026-05-01", "due": "2026-06-01"} and note.date == "2026-05-01"
    assert parse_note("n.md", "---\nalias: Single\n---\n").aliases == ["Single"]


@pytest.mark.parametrize("path,declared,kind", [
    ("topic.md", None, "knowledge"),
    ("inbox/x.md", None, "capture"),
    ("learnings/2026-05-02-x.md", None, "capture"),
    ("decisions/dec-1.md", None, "decision"),
    ("runbooks/r.md", None, "runbook"),
    ("trackers/t.md", None, "tracker"),
    ("daily/2026-05-07.md", None, "daily"),
    ("2026-05-07.md", None, "daily"),
    ("templates/knowledge.md", None, "template"),
    ("work/Runbooks/x.md", None, "runbook"),
    ("attachments/pic.svg", None, "attachment"),
    ("inbox/x.md", "decision", "decision"),  # frontmatter wins
    ("x.md", "ADR", "decision"),  # synonyms
    ("x.md", "nonsense", "knowledge"),
])
def test_kinds(path: str, declared: str | None, kind: str) -> None:
    assert infer_kind(path, declared) == kind


def test_broken_yaml_still_a_note_from_its_body() -> None:
    note = parse_note("runbooks/r.md", "---\ntitle: [broken\n---\n# Real title\n\nText with [[link]] and #tag.\n")
    assert note.problems and note.title == "Real title" and note.kind == "runbook"
    assert [link.target for link in note.links] == ["link"] and note.tags == ["tag"]


def test_unranked_kinds() -> None:
    assert not parse_note("daily/2026-01-01.md", "x").ranked
    assert not parse_note("templates/t.md", "x").ranked
    assert parse_note("t.md", "x").ranked


def test_descriptions_keep_snake_case_identifiers() -> None:
    """`_` inside a word is not emphasis (CommonMark): identifiers must survive plain-text cleanup."""
    from memory_hub.vault.markdown import plain_text

    note = parse_note("x.md", "Clients failed with ERR_CERT_AUTHORITY_INVALID and 401 invalid_token.\n")
    assert "ERR_CERT_AUTHORITY_INVALID" in note.description
    assert "invalid_token" in note.description
    assert plain_text("_emphasis_ and __strong__ stay readable") == "emphasis and strong stay readable"


def test_templates_by_placeholder_wherever_they_live() -> None:
    """Handlebars/Templater fields outside code, comments and link texts make a note a template."""
    moc = "---\ntags: [MOC]\n---\n\n# {{title}}\n\n#placeholder/description\n\n## MOC\n"
    note = parse_note("00 - Contribute/01 Templates/T - MOCs.md", moc)
    assert note.kind == "template" and not note.ranked and note.title == "T - MOCs"
    assert parse_note("anywhere/t.md", "Yesterday: <% tp.date.yesterday() %>\n").kind == "template"
    assert parse_note("anywhere/t.md", "---\ncreated: '<% tp.date.now() %>'\n---\nText.\n").kind == "template"
    # naming a placeholder in prose, in code, in a link text or in a comment is not being a template
    for text in ("Use `{{title}}` to insert the title.\n",
                 "```\n<% tp.file.title %>\n```\n",
                 "- [Add {{obsidianTasksCancelledDate}} to the placeholders](https://x/issues/85)\n",
                 "- [[mrj-text-expand|Text {{expand}}]]: search and paste\n",
                 "<!-- - GitHub: [{{title}}](https://github.com/{{title}}/) -->\nA person.\n"):
        assert parse_note("guides/g.md", text).kind == "knowledge", text


def test_template_folders_with_numbering_and_folder_notes() -> None:
    assert infer_kind("00 - Hub/01 Templates/T - Author.md") == "template"
    assert infer_kind("🗂️ Templates/x.md") == "template"
    assert infer_kind("00 - Hub/01 Templates/🗂️ 01 Templates.md") == "knowledge"  # the folder's index note
    assert infer_kind("03 - Showcases & Templates/x.md") == "knowledge"


def test_descriptions_leave_out_comments_html_and_tag_lines() -> None:
    text = ("# PARA\n\n%% Add a description below this line. %%\n\n#placeholder/description\n\n"
            "Plugin ID: nldates <button id=HH>Open in Obsidian</button> by argenos.\n")
    note = parse_note("PARA.md", text)
    assert note.description == "Plugin ID: nldates Open in Obsidian by argenos."
    assert "%%" not in note.description and "<button" not in note.description
    assert parse_note("x.md", "---\ndescription: Said.\n---\nFirst.\n\nSecond.\n").leads == ["Said.", "First.", "Second."]


def test_a_block_of_fields_describes_a_note_only_without_prose() -> None:
    plugin = ("# VaultSync\n\nPlugin ID: `vault-sync`\nLinks: [GitHub repository](https://github.com/x/y) or "
              "[<button id=HH>Open in Obsidian</button>](obsidian://show-plugin?id=vault-sync)\n"
              "Developed by: [[thewordisbird]]\nMobile compatible: [[Mobile-compatible plugins|Yes]]\n\n"
              "Sync vault with cloud storage provider.\n")
    note = parse_note("vault-sync.md", plugin)
    assert note.description == "Sync vault with cloud storage provider."
    assert note.leads[-1].startswith("Plugin ID: vault-sync Links: GitHub repository")
    # inline Dataview fields and a full-width colon are fields too
    assert parse_note("d.md", "status:: done\n作成者： 山田\n\n今日は認証の設計を見直した。\n").description == (
        "今日は認証の設計を見直した。")
    # with no prose, the fields are still the description (better than nothing)
    assert parse_note("f.md", "Author: Ann\nTool: Publish\n").description == "Author: Ann Tool: Publish"
    # a dialogue repeats its speakers, and a label followed by a sentence is prose: neither moves
    talk = "Caroline: Hey Mel!\nMelanie: Hi!\nCaroline: How was it?\n\nLater paragraph.\n"
    assert parse_note("t.md", talk).description == "Caroline: Hey Mel! Melanie: Hi! Caroline: How was it?"
    said = "Note: the sync server keeps every version of a file for twelve months on the paid plan.\n\nNext.\n"
    assert parse_note("s.md", said).description.startswith("Note: the sync server")


def test_a_field_whose_values_are_the_list_under_it() -> None:
    tool = ("Official website:\n- [Template Website](https://a.example)\n- [My french website](https://b.example)\n"
            "Cost: 0 (Free)\nAvailable for: [[Windows]], [[macOS]]\n\n"
            "Converts an Obsidian vault into an MkDocs site.\n")
    assert parse_note("Obsidian2Mkdocs.md", tool).description == "Converts an Obsidian vault into an MkDocs site."
    # each field its own paragraph, and a paragraph of links only, as obsidian-hub's tool notes are
    tool = ("Official website: \n- [Template Website](https://a.example)\n- [French](https://b.example)\n\n"
            "[Documentation](https://c.example)\n[FAQ](https://d.example)\n\nCost: 0 (Free)\n\n"
            "Obsidian2Mkdocs is a script that publishes notes with MkDocs.\n")
    note = parse_note("Obsidian2Mkdocs.md", tool)
    assert note.description == "Obsidian2Mkdocs is a script that publishes notes with MkDocs."
    assert note.leads[1:] == ["Official website: Template Website French", "Documentation FAQ", "Cost: 0 (Free)"]
    # a list under a paragraph that is not a field is prose
    steps = "To set it up:\n- open the settings\n- turn it on\n\nLater.\n"
    assert parse_note("s.md", steps).description.startswith("To set it up")


def test_a_bold_label_keeps_its_text_and_a_bullet_loses_its_marker() -> None:
    assert parse_note("t.md", "**Target audience**: authors of plugins and themes who want one place.\n").description == (
        "Target audience: authors of plugins and themes who want one place.")
    assert parse_note("n.md", "- * Open the settings and choose the vault you want to sync.\n").description == (
        "Open the settings and choose the vault you want to sync.")


def test_one_heading_rule_for_titles_chunks_and_section_edits() -> None:
    """Titles, chunk trails and section edits read a heading the same way (CommonMark's ATX rule):
    up to three spaces before the marks, a closing run of marks only after a space."""
    assert parse_note("lang/c-sharp.md", "# C#\n\nA language.\n").title == "C#"  # was "C": the mark was cut
    assert parse_note("a/b.md", "# Setup #\n\ntext\n").title == "Setup"
    assert parse_note("a/b.md", "  # Indented title\n\ntext\n").title == "Indented title"
    assert parse_note("a/b.md", "    # four spaces is code\n\ntext\n").title == "b"
    body = "# F#\n\nIntro.\n\n## Setup ##\n\nInstall it.\n\n## Use\n\nRun it.\n"
    edited, created = edit_body(body, "Install it twice.", "replace", "## Setup")
    assert not created and edited == body.replace("Install it.", "Install it twice.")
    long = body.replace("Install it.", "Install it with the package manager of your system. " * 12)
    trails = [c.heading for c in chunk_note("F#", long, lambda text: len(text.split()), 40)]
    assert any(h.startswith("F#") and h.endswith("Setup") for h in trails), trails  # "Setup ##" loses its closing marks
    assert [m.group(2) for m in HEADING.finditer(body)] == ["F#", "Setup", "Use"]
    assert next_heading(body, body.index("Intro"), max_level=1) is None
    assert body[next_heading(body, body.index("Intro")):].startswith("## Setup")


def test_named_sections_are_read_outside_code_where_captures_and_dream_write() -> None:
    """The daily note's captures section and dream's ``## Related`` are found by the same rule as
    every other heading, outside code: a quoted ``## Captures`` in a fenced block is not the
    section, a ``# comment`` of a bash block inside it does not end it, and a placeholder ``-``
    inside code is code. Before, the link went into the fenced block."""
    daily = ("# 2026-12-07\n\n```markdown\n## Captures\n-\n```\n\n## Captures\n\n- [[a]]\n\n"
             "```bash\n# install\n-\npip install x\n```\n\n## Notes\n\nkeep\n")
    out = insert_link(daily, "- [[b]]")
    assert out.count("- [[b]]") == 1
    fence_end = out.index("pip install x\n```\n") + len("pip install x\n```\n")
    assert out.index("- [[b]]") >= fence_end and out.index("- [[b]]") < out.index("## Notes")
    assert out.replace("- [[b]]\n", "", 1) == daily  # nothing else changed
    assert named_section(daily, ["captures"], levels=(2, 3)) == (daily.index("- [[a]]") - 1, daily.index("## Notes"))
    assert named_section("##Captures\n\nx\n", ["Captures"]) is None  # no space: not a heading (CommonMark, Obsidian)
    note = "# X\n\n```\n## Related\n```\n\ntext\n"
    added = append_to_section(note, "Related", ["- [[y]]"])
    assert added == note.rstrip("\n") + "\n\n## Related\n\n- [[y]]\n"  # the fenced one is not the section
    with_section = "# X\n\n## Related\n\n- [[a]]\n\n```sh\n# a comment\n```\n\n## Other\n\nz\n"
    out = append_to_section(with_section, "Related", ["- [[y]]"])
    assert out.index("- [[y]]") > out.index("# a comment\n```") and out.index("- [[y]]") < out.index("## Other")


def test_url_end_at_agrees_with_matching_the_whole_text() -> None:
    """``url_end_at`` matches only the stretch that can hold a URL around ``pos``; at every position
    of these texts it gives what matching every URL of the whole text gives (the snippet's rule)."""
    import re

    from memory_hub.vault import markdown

    texts = ["see https://github.com/a/b-sync and [docs](https://x.io/p?q=1) or ftp://h/f.\n"
             "no url here, just words: sync://not-a-scheme? http:/broken\n\thttps://t.co|x",
             "x" * 50 + "https://" + "y" * 3000 + " tail https://z.org",  # a URL longer than the reach
             "日本語のhttps://例え.jp/パス です"]
    for text in texts:
        spans = [m.span() for m in re.compile(markdown._BARE_URL.pattern).finditer(text)]
        for pos in range(len(text)):
            want = next((e for s, e in spans if s <= pos < e and pos - s <= 2048), None)
            assert markdown.url_end_at(text, pos) == want, (text[:30], pos)
