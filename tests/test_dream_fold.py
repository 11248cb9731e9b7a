"""A fold carries a capture's own words, made right for their new place; a rejected proposal stays rejected."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time

import yaml
from test_dream_fixtures import FILES, build, cap, git, know

from memory_hub.cli import main
from memory_hub.dream import run_dream
from memory_hub.vault.frontmatter import split
from memory_hub.vault.links import extract_links
from memory_hub.vault.notes import parse_note

TODAY = dt.date(2026, 5, 20)


def dream(vault, **kw):
    kw.setdefault("backend", "lexical")
    return run_dream(vault, use_llm=False, today=TODAY, **kw)


def raw_fields(text: str) -> dict:
    """Frontmatter as YAML types (dates stay dates), unlike the index's JSON-friendly view."""
    return yaml.safe_load(split(text)[0])


FOLD_FILES = {
    ".gitignore": ".memory_hub/\n",
    "postgres-failover.md": know("Postgres failover", "How postgres failover works: the cluster endpoint moves to "
                                 "the new writer; connection pool settings decide how fast pods follow the failover. "
                                 "Check replication lag before a planned failover.", "postgres").replace(
                                     "created: 2026-01-10\n", "created: 2026-01-10\nupdated: 2026-01-10\n"),
    "pgx-pool-settings.md": know("pgx pool settings", "MaxConnLifetime, MaxConnIdleTime and health checks of pgxpool."),
    "attachments/pool.svg": "<svg xmlns='http://www.w3.org/2000/svg'/>",
    # as `braindump` writes captures: an H1, the text, an action item section, a related section
    "inbox/pool-1.md": cap("pgxpool keeps connections after postgres failover",
                           "After the postgres failover pgxpool keeps connections to the old writer until "
                           "MaxConnLifetime; writes fail with read-only transaction errors. Tune it as in "
                           "[the pool settings](../pgx-pool-settings.md), see ![pool](../attachments/pool.svg).\n\n"
                           "We need to drop the connection on SQLSTATE 25006 after failover.\n\n"
                           "From the session transcript [[2026-03-31-session]].\n\n"
                           "## Action items\n\n- [ ] We need to drop the connection on SQLSTATE 25006 after failover.\n\n"
                           "## Related\n\n- [[postgres-failover]]\n"),
    "inbox/pool-2.md": cap("Postgres failover read-only errors from connection pool",
                           "Postgres failover drill: pods kept the pool connections to the demoted writer and got "
                           "read-only transaction errors; see [[postgres-failover|the failover note]] for the "
                           "basics.\n\n- [ ] page the DBA on the next drill\n\n"
                           "Check replication lag before a planned failover.\n"),  # already in the target
}


def test_fold_rewrites_links_drops_meta_and_what_is_known_and_keeps_date_types(tmp_path):
    vault = build(tmp_path, FOLD_FILES)
    report = dream(vault, steps=("promote",))
    assert report.steps[0].actions and report.steps[0].actions[0].startswith("folded 2 captures into postgres-failover")
    text = (vault / "postgres-failover.md").read_text(encoding="utf-8")
    fold = text.split("## From captures", 1)[1]
    # relative links re-pointed from inbox/ to the vault root: they resolve to the same files as before
    assert "[the pool settings](pgx-pool-settings.md)" in fold and "![pool](attachments/pool.svg)" in fold
    note = parse_note("postgres-failover.md", text)
    targets = {ln.target for ln in note.links}
    assert "../pgx-pool-settings.md" not in targets
    # no link from the note to itself; the sentence that held one still reads
    assert "postgres-failover]]" not in fold and "- [[postgres-failover]]" not in fold
    assert "see the failover note for the basics" in fold
    assert not [ln for ln in extract_links(fold) if ln.target == "postgres-failover"]
    # capture meta is left out: to-do lines, the Action items section, the capture's own headings
    assert "- [ ]" not in fold and "Action items" not in fold and "\n## Related" not in fold
    assert "session transcript" not in fold
    assert "## Related" not in text
    assert fold.count("drop the connection on SQLSTATE 25006") == 1  # the sentence, once; not the to-do copy
    # what the target already says is not appended again
    assert text.count("Check replication lag before a planned failover.") == 1
    assert "[[pool-1]]" in text and "[[pool-2]]" in text  # both captures cited
    # field types: the YAML dates stay dates (not quoted strings), in the target and in the captures
    fields = raw_fields(text)
    assert fields["updated"] == TODAY and fields["created"] == dt.date(2026, 1, 10)
    assert "updated: 2026-05-20\n" in text
    for rel in ("inbox/pool-1.md", "inbox/pool-2.md"):
        data = raw_fields((vault / rel).read_text(encoding="utf-8"))
        assert data["updated"] == TODAY and data["created"] == dt.date(2026, 4, 1)
        assert data["status"] == "processed" and data["processed_into"] == "[[postgres-failover]]"


def test_a_quoted_date_stays_a_string(tmp_path):
    files = dict(FOLD_FILES)
    files["postgres-failover.md"] = files["postgres-failover.md"].replace("updated: 2026-01-10", 'updated: "2026-01-10"')
    vault = build(tmp_path, files)
    dream(vault, steps=("promote",))
    assert raw_fields((vault / "postgres-failover.md").read_text(encoding="utf-8"))["updated"] == "2026-05-20"


def test_a_capture_with_nothing_new_is_only_cited(tmp_path):
    files = dict(FOLD_FILES)
    files["inbox/pool-2.md"] = cap("pgxpool connections after postgres failover",  # said before: by pool-1, by the note
                                   "After the postgres failover pgxpool keeps connections to the old writer until "
                                   "MaxConnLifetime.\n\nCheck replication lag before a planned failover. See "
                                   "[[postgres-failover]].")
    vault = build(tmp_path, files)
    dream(vault, steps=("promote",))
    text = (vault / "postgres-failover.md").read_text(encoding="utf-8")
    assert "### pgxpool connections after" not in text  # no block that repeats what is there already
    assert text.count("Check replication lag") == 1
    assert "- [[pool-2]]" in text.split("## Sources", 1)[1]  # but the raw material is cited


def _hour_later() -> float:
    return time.time() + 3600


def test_a_reverted_link_is_never_proposed_again_even_after_an_index_rebuild(tmp_path):
    vault = build(tmp_path)
    first = dream(vault, steps=("links",))
    link_commit = first.steps[0].commit
    assert link_commit and "go-error-wrapping" in (vault / "go-error-handling.md").read_text(encoding="utf-8")
    git(vault, "revert", "--no-edit", link_commit)  # the person says no
    again = dream(vault, steps=("links",), now=_hour_later())
    assert not [s for s in again.steps if s.name == "links" and s.commit]  # nothing re-linked
    assert "[[go-error-wrapping]]" not in (vault / "go-error-handling.md").read_text(encoding="utf-8")
    assert any("rejected earlier" in s and "reverted in" in s for s in again.steps[0].skipped)
    # remembered in the vault, git-tracked, so it survives a rebuild of the caches
    remembered = git(vault, "ls-files", ".memory-hub/dream/rejected").split()
    assert remembered == [f".memory-hub/dream/rejected/{link_commit}.json"]
    assert git(vault, "status", "--porcelain") == ""
    shutil.rmtree(vault / ".memory_hub")
    third = dream(vault, steps=("links",), now=_hour_later())
    assert third.commits == [] and "[[go-error-wrapping]]" not in (vault / "go-error-handling.md").read_text(
        encoding="utf-8")


def test_a_reverted_promotion_is_not_folded_again(tmp_path):
    vault = build(tmp_path, FOLD_FILES)
    first = dream(vault, steps=("promote",))
    git(vault, "revert", "--no-edit", first.steps[0].commit)
    again = dream(vault, steps=("promote",), now=_hour_later())
    assert again.commits == []
    assert "## From captures" not in (vault / "postgres-failover.md").read_text(encoding="utf-8")
    assert any("rejected earlier" in s for s in again.steps[0].skipped)


def test_a_revert_of_the_revert_lifts_the_rejection(tmp_path):
    vault = build(tmp_path)
    link_commit = dream(vault, steps=("links",)).steps[0].commit
    git(vault, "revert", "--no-edit", link_commit)
    git(vault, "revert", "--no-edit", "HEAD")  # changed their mind: the link is back
    again = dream(vault, steps=("links",), now=_hour_later())
    assert not any("rejected" in s for s in again.steps[0].skipped)


def test_reject_a_dry_run_proposal_by_key(tmp_path, capsys):
    vault = build(tmp_path)
    assert main(["--vault", str(vault), "dream", "--dry-run", "--vectors", "lexical", "--no-llm", "--json"]) == 0
    steps = {s["name"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    key = steps["links"]["keys"][0]
    assert key == "links:go-error-handling.md|go-error-wrapping.md"
    assert main(["--vault", str(vault), "dream", "--reject", key]) == 0
    assert "will not be proposed again" in capsys.readouterr().out
    assert git(vault, "status", "--porcelain") == ""  # the rejection is committed
    report = dream(vault, steps=("links",))
    assert report.commits == [] and any("rejected by a person" in s for s in report.steps[0].skipped)
    assert main(["--vault", str(vault), "dream", "--reject", "not-a-commit-or-key"]) == 1
    assert "neither a commit nor a proposal key" in capsys.readouterr().err


def test_reject_a_dream_commit_by_id_without_reverting_it(tmp_path):
    vault = build(tmp_path, {**FILES, "inbox/young.md": FILES["inbox/young.md"]})
    prune_commit = dream(vault, steps=("prune",)).steps[0].commit
    assert prune_commit
    # the person restores one pruned link by hand and tells dream to leave that alone
    assert main(["--vault", str(vault), "dream", "--reject", prune_commit]) == 0
    git(vault, "revert", "--no-edit", prune_commit)
    again = dream(vault, steps=("prune",), now=_hour_later())
    assert again.commits == []
