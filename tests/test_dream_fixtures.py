"""A small vault with known structure for the dream tests (a real git repository, old mtimes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

OLD = 1_700_000_000  # 2023-11: nothing here is "being edited right now"
TODAY_ISO = "2026-05-20"


def cap(title: str, body: str, created: str = "2026-04-01", extra: str = "") -> str:
    return (f"---\ntitle: \"{title}\"\ndescription: \"{title}\"\nkind: capture\nscope: work\ntags: [{extra}]\n"
            f"created: {created}\n---\n# {title}\n\n{body}\n")


def know(title: str, body: str, extra: str = "") -> str:
    return f"---\ntitle: \"{title}\"\nkind: knowledge\ntags: [{extra}]\ncreated: 2026-01-10\n---\n# {title}\n\n{body}\n"


FILES: dict[str, str] = {
    ".gitignore": ".memory_hub/\n",
    "templates/daily.md": "---\ntitle: \"{{date}}\"\nkind: template\n---\n# {{date}}\n\n## Captured today\n\n- \n",
    "daily/2026-04-01.md": "---\ntitle: 2026-04-01\nkind: daily\n---\n# 2026-04-01\n\n- [[cdn-purge-1]]\n- [[tls-rotation]]\n",
    "home.md": know("Home", "Start: [[postgres-failover]], [[go-style]], [[tls-rotation]], [[go-error-handling]], "
                            "[[go-error-wrapping]], [[recipes]], [[mixed]]"),
    # cluster A: three captures about the CDN purge order (no knowledge note yet → a new note)
    "inbox/cdn-purge-1.md": cap("CDN purge runs before traffic switch",
                                "The CDN purge job runs before the blue green traffic switch, so CloudFront caches the "
                                "old index.html again. Purge must run after the traffic switch."),
    "inbox/cdn-purge-2.md": cap("CDN purge order after traffic switch",
                                "Old JS bundle served after release: the CloudFront purge happened before the traffic "
                                "switch. Move the purge job after switch-traffic in the pipeline."),
    "inbox/cdn-purge-3.md": cap("CloudFront purge timing and traffic switch",
                                "Checked the pipeline log: cdn purge finished before the traffic switch; CloudFront "
                                "refetched index.html from the old color. Purge after switching."),
    # cluster B: two captures about failover connection pools (→ folded into postgres-failover)
    "inbox/pool-1.md": cap("pgxpool keeps connections after postgres failover",
                           "After the postgres failover pgxpool keeps connections to the old writer until "
                           "MaxConnLifetime; writes fail with read-only transaction errors."),
    "inbox/pool-2.md": cap("Postgres failover read-only errors from connection pool",
                           "Postgres failover drill: pods kept the pool connections to the demoted writer and got "
                           "read-only transaction errors. Drop the connection on SQLSTATE 25006 after failover."),
    "postgres-failover.md": know("Postgres failover", "How postgres failover works: the cluster endpoint moves to "
                                 "the new writer; connection pool settings decide how fast pods follow the failover. "
                                 "Check replication lag before a planned failover.", "postgres"),
    # gate: too young, link-only, and a lone capture with substance
    "inbox/young.md": cap("CDN purge young capture", "CDN purge after the traffic switch, CloudFront again.",
                          created="2026-05-18"),
    "inbox/link-only.md": cap("link", "- [[postgres-failover]]\n- https://example.com/x"),
    "inbox/sourdough.md": cap("Sourdough starter feeding", "Feed the sourdough starter twice a day with rye flour "
                              "and water; keep it warm so the levain doubles before baking bread."),
    # provenance: processed earlier into postgres-failover, which never cited it
    "inbox/old-processed.md": "---\ntitle: Old failover note\nkind: capture\nstatus: processed\n"
                              "processed_into: \"[[postgres-failover]]\"\ncreated: 2026-02-01\n---\nold raw material\n",
    # near-duplicates; the loser is linked from certs-overview
    "tls-rotation.md": know("TLS certificate rotation", "Rotate the TLS certificate with cert-manager: renew the "
                            "certificate, reload nginx, then verify the served chain with openssl s_client. "
                            "Intermediate certificates must be bundled in the chain file.", "tls"),
    "tls-rotation-copy.md": know("TLS certificate rotation steps", "Rotate the TLS certificate with cert-manager: "
                                 "renew the certificate, reload nginx, then verify the served chain with openssl "
                                 "s_client. Intermediate certificates must be bundled in the chain file."),
    "certs-overview.md": know("Certificates overview", "We run internal PKI. For rotation see "
                              "[[tls-rotation-copy|the rotation steps]] and the expiry dashboard.", "tls"),
    # link discovery: two Go notes with shared vocabulary AND shared neighbours
    "go-error-handling.md": know("Go error handling", "Go error handling: return errors, wrap errors with "
                                 "fmt.Errorf and %w, check errors with errors.Is and errors.As. See [[go-style]] and "
                                 "[[go-testing]].", "go"),
    "go-error-wrapping.md": know("Go error wrapping", "Wrapping errors in Go: fmt.Errorf with %w keeps the error "
                                 "chain; errors.Is and errors.As unwrap errors. See [[go-style]] and [[go-testing]].",
                                 "go"),
    "go-style.md": know("Go style", "Go style guide: gofmt, short names, small interfaces, table driven tests.\n\n"
                        "## Related\n\n- [[go-testing]]\n- [[recipes]]\n- [[island]]"),
    "go-testing.md": know("Go testing", "Go testing: table driven tests, t.Run subtests, httptest servers, "
                          "go test -race.\n\n## Related\n\n- [[go-style]]\n- [[sourdough-notes]]"),
    # weak links: go-testing → sourdough-notes is weak and NOT a bridge (recipes also links it) → pruned;
    # go-style → island is weak but the island's only connection (a bridge) → kept
    "recipes.md": know("Recipes", "Bread recipes and baking notes: [[sourdough-notes]]."),
    "sourdough-notes.md": know("Sourdough notes", "Sourdough bread: levain, rye flour, long cold fermentation, "
                               "bake in a dutch oven."),
    "island.md": know("Knitting patterns", "Knitting patterns: cable knit sweater, merino wool yarn, circular "
                      "needles and a gauge swatch."),
    # atomicity: one note, two topics
    "mixed.md": know("Mixed notes", "Kubernetes horizontal pod autoscaler scales deployment replicas on CPU "
                     "utilisation targets and custom metrics from the metrics server.\n\n"
                     "The autoscaler needs resource requests on every container; without CPU requests the "
                     "kubernetes HPA cannot compute utilisation for the replicas.\n\n"
                     "Japanese tea ceremony: matcha is whisked with a bamboo chasen in a chawan bowl, "
                     "served with wagashi sweets in the tea room.\n\n"
                     "The tea ceremony host prepares matcha for guests; the chawan bowl is turned before "
                     "drinking the tea and the wagashi are eaten first."),
}


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=vault,
                          capture_output=True, text=True, check=True).stdout


def build(root: Path, files: dict[str, str] | None = None) -> Path:
    vault = root / "dream-vault"
    for rel, text in (files or FILES).items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (OLD, OLD))
    git(vault, "init", "-q")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "initial vault")
    return vault


def snapshot(vault: Path) -> dict[str, str]:
    """Every file's text (dot-folders excluded)."""
    return {str(p.relative_to(vault)): p.read_text(encoding="utf-8") for p in sorted(vault.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(vault).parts)}
