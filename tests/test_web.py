"""The web pages of `memory-hub serve` (issue 13) over real HTTP: search, note, timeline, health,
escaping of hostile notes, security headers, and who may write. The browser side is in
test_web_browser.py; these tests read the HTML the server sends."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from web_fixture import PROMPT, SESSION, build_vault, serve

from memory_hub.server.web import markdown, svg

HTML = {"Accept": "text/html"}
TOKEN = "web-token-0123456789abcdef"


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_vault(tmp_path_factory.mktemp("web"))


@pytest.fixture(scope="module")
def base(vault: Path):
    with serve(vault) as url:
        yield url


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text inside <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.script_text.append(data)


def parse(html: str) -> Tags:
    p = Tags()
    p.feed(html)
    return p


def get(base: str, path: str, **kw) -> httpx.Response:
    return httpx.get(base + path, headers={**HTML, **kw.pop("headers", {})}, timeout=30, **kw)


def test_search_page_explains_each_hit(base: str) -> None:
    r = get(base, "/?q=" + quote("rotate TLS certificate") + "&mode=lexical")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    hits = re.findall(r'class="hit-title" href="([^"]+)"', r.text)
    assert hits and hits[0] == "/note/runbooks/tls-certificate-rotation.md"
    assert "by word match" in r.text and "why #1" in r.text  # the reasons, in words
    assert "mode <b>lexical</b>" in r.text


def test_search_page_japanese_and_fragment(base: str) -> None:
    r = get(base, "/?q=" + quote("認証") + "&mode=lexical&fragment=1")
    assert r.status_code == 200 and "<html" not in r.text  # only the results, for app.js
    assert "/note/" + quote("認証エラーの切り分け.md") in r.text


def test_search_bad_input_is_a_clear_page(base: str) -> None:
    r = get(base, "/?q=x&mode=bogus")
    assert r.status_code == 400 and "unknown mode &#39;bogus&#39;" in r.text
    r = get(base, "/?q=x&k=0")
    assert r.status_code == 400 and "k must be between 1 and 50" in r.text


def test_landing_page_counts_notes(base: str) -> None:
    r = get(base, "/")
    assert r.status_code == 200 and "notes indexed" in r.text


def test_note_page_links_backlinks_graph_counters(base: str) -> None:
    r = get(base, "/note/runbooks/tls-certificate-rotation.md")
    assert r.status_code == 200
    page = parse(r.text)
    backlinks = r.text.split('id="backlinks"')[1].split("</ul>")[0]
    assert 'href="/note/hostile.md"' in backlinks  # the hostile note links here
    assert '<svg class="graph"' in r.text and 'href="/note/hostile.md"' in r.text.split('<svg class="graph"')[1]
    counters = r.text.split('id="counters"')[1].split("</aside>")[0]
    assert "1 reads" in counters and "injected into 1 prompt" in counters
    # the prompt it was injected into, redacted
    injections = r.text.split('id="injections"')[1].split("</ul>")[0]
    assert "rotate the TLS certificate" in injections and "ghp_0123456789" not in injections
    assert any(t == "h1" for t, _ in page.tags)


def test_note_wikilinks_resolve_and_dangle(base: str) -> None:
    r = get(base, "/note/hostile.md")
    assert 'href="/note/runbooks/tls-certificate-rotation.md">the TLS runbook</a>' in r.text
    assert 'class="wikilink dangling" href="/?q=no-such-note"' in r.text
    # a frontmatter wikilink is a link too
    props = r.text.split('id="properties"')[1].split("</table>")[0]
    assert 'href="/note/runbooks/tls-certificate-rotation.md"' in props


def test_hostile_note_is_inert(base: str) -> None:
    r = get(base, "/note/hostile.md")
    assert r.status_code == 200
    page = parse(r.text)
    scripts = [a for t, a in page.tags if t == "script"]
    assert scripts == [{"src": "/static/app.js", "defer": None}] and not page.script_text
    for tag, attrs in page.tags:
        assert tag not in ("iframe", "object", "embed"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action") and value:
                assert not re.match(r"\s*(javascript|data|vbscript):", value, re.I), (tag, name, value)
        if tag == "img":
            assert attrs["src"].startswith("/file/"), attrs  # remote images are never fetched
    assert "&lt;script&gt;window.__pwned = 'script'&lt;/script&gt;" in r.text  # shown as text
    assert 'href="https://tracker.invalid/pixel.png"' in r.text and "image: remote pixel" in r.text


def test_unknown_and_escaping_paths(base: str) -> None:
    assert get(base, "/note/nope.md").status_code == 404
    r = get(base, "/note/..%2F..%2Fetc%2Fpasswd")
    assert r.status_code == 404 and "root:" not in r.text
    assert get(base, "/file/hostile.md").status_code == 404  # only image attachments are served


def test_timeline_shows_prompt_block_and_follow_up(base: str) -> None:
    r = get(base, "/timeline")
    assert r.status_code == 200
    recalls = r.text.split('id="recalls"')[1]
    assert "rotate the TLS certificate" in recalls and "ghp_0123456789" not in recalls  # redacted
    assert "&lt;vault-memory&gt;" in recalls  # the injected block, as text
    assert "read after" in recalls and "cold" in recalls
    assert get(base, "/timeline?session=" + SESSION).text.count('class="recall"') == 1
    assert 'id="no-recalls"' in get(base, "/timeline?session=someone-else").text
    assert get(base, "/timeline?day=yesterday").status_code == 400


def test_health_page(base: str) -> None:
    r = get(base, "/health")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert '<svg class="chart"' in r.text  # the eval run made in the fixture
    dangling = r.text.split('id="dangling"')[1].split("</section>")[0]
    assert "no-such-note" in dangling
    never = r.text.split('id="never"')[1].split("</section>")[0]
    assert "tls-certificate-rotation" not in never  # it was injected and read
    assert 'id="no-plan"' in r.text and "Read-only" in r.text
    # scripts still get JSON from the same URL
    j = httpx.get(base + "/health", timeout=30).json()
    assert j["ok"] is True


def test_writes_refused_without_token(base: str) -> None:
    r = httpx.post(base + "/dream/reject", data={"key": "x"}, headers={**HTML, "Origin": base}, timeout=30)
    assert r.status_code == 403 and "read-only" in r.text


def test_token_sign_in_and_same_origin_writes(vault: Path) -> None:
    with serve(vault, token=TOKEN) as url:
        assert get(url, "/").status_code == 401
        assert get(url, "/static/app.css").status_code == 200  # the sign-in page needs its style
        bad = httpx.post(url + "/login", data={"token": "wrong", "next": "/"}, timeout=30)
        assert bad.status_code == 401
        ok = httpx.post(url + "/login", data={"token": TOKEN, "next": "//evil.example/"}, timeout=30)
        assert ok.status_code == 303 and ok.headers["location"] == "/"  # no open redirect
        cookie = ok.cookies.get("memory_hub_session")
        assert cookie and TOKEN not in cookie
        jar = {"memory_hub_session": cookie}
        assert httpx.get(url + "/", headers=HTML, cookies=jar, timeout=30).status_code == 200
        cross = httpx.post(url + "/dream/reject", data={"key": "x"}, cookies=jar, timeout=30,
                           headers={**HTML, "Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403 and "must come from this page" in cross.text
        same = httpx.post(url + "/dream/reject", data={"key": "x"}, cookies=jar, timeout=30,
                          headers={**HTML, "Origin": url, "Sec-Fetch-Site": "same-origin"})
        assert same.status_code == 409 and "not a proposal of the saved plan" in same.text


@pytest.mark.parametrize("url,ok", [
    ("https://example.com/a", True), ("notes/a.md", True), ("mailto:a@b.c", True), ("#x", True),
    ("javascript:alert(1)", False), ("JaVaScRiPt:alert(1)", False), (" javascript:x", False),
    ("java\tscript:x", False), ("jav%61script:x", False), ("data:text/html,x", False),
    ("vbscript:x", False), ("//evil.example/x", False), ("file:///etc/passwd", False),
])
def test_safe_url(url: str, ok: bool) -> None:
    assert markdown.safe_url(url) is ok


def test_svg_labels_escaped() -> None:
    picture, left_out = svg.neighbourhood(svg.Node("a.md", "<b>A</b>", 0),
                                          [svg.Node("b.md", '"><script>x</script>', 1, "out")])
    assert "<script>" not in picture and "&lt;script&gt;" in picture and left_out == 0
    chart = svg.line_chart([svg.Series("pass", [(1.0, 0.5, "<i>")], "s-pass")])
    assert "<i>" not in chart and "&lt;i&gt;" in chart


def test_prompt_kept_redacted_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_hub.eval import telemetry

    kept = telemetry.prompt_fields(tmp_path, PROMPT, "<vault-memory>…</vault-memory>")
    assert "rotate the TLS" in kept["prompt"] and "ghp_0123456789" not in kept["prompt"]
    monkeypatch.setenv("MEMORY_HUB_TELEMETRY_PROMPTS", "off")
    assert telemetry.prompt_fields(tmp_path, PROMPT, "block") == {}


def test_named_tokens_sign_in_read_views_write_applies_as_its_author(tmp_path: Path) -> None:
    """The tokens file's named tokens sign a browser in: a read token views and cannot write; a write
    token applies a dream step and rejects a proposal, each commit naming the token as author."""
    import hashlib
    import subprocess

    from test_dream_fixtures import build
    from test_server_http import server

    from memory_hub.dream import proposals

    vault = build(tmp_path)
    plan = proposals.plan(vault, backend="lexical", use_llm=False)
    step = next(s for s in plan.steps if s.actions)
    key = next(k for s in plan.steps if s is not step for k in s.keys)
    secrets = {"viewer": ("viewer-secret-0123456789ab", "read"), "alice": ("alice-secret-0123456789ab", "write")}
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("".join(f'[tokens.{n}]\nsha256 = "{hashlib.sha256(s.encode()).hexdigest()}"\nscope = "{sc}"\n'
                              for n, (s, sc) in secrets.items()), encoding="utf-8")

    def log(fmt: str) -> str:
        return subprocess.run(["git", "log", "-1", f"--format={fmt}"], cwd=vault, capture_output=True, text=True,
                              check=True).stdout.strip()

    with server(vault, "http", env={"MEMORY_HUB_TOKENS_FILE": str(tokens)}) as (port, _proc):
        url = f"http://127.0.0.1:{port}"
        assert get(url, "/").status_code == 401  # tokens configured: nothing without one
        assert httpx.post(url + "/login", data={"token": "nobody-0123456789abcdef", "next": "/"},
                          timeout=30).status_code == 401

        def sign_in(name: str) -> dict[str, str]:
            r = httpx.post(url + "/login", data={"token": secrets[name][0], "next": "/health"}, timeout=30)
            assert r.status_code == 303, r.text
            cookie = r.cookies.get("memory_hub_session")
            assert cookie and secrets[name][0] not in cookie
            return {"memory_hub_session": cookie}

        same = {**HTML, "Origin": url, "Sec-Fetch-Site": "same-origin"}
        viewer = sign_in("viewer")
        page = httpx.get(url + "/health", headers=HTML, cookies=viewer, timeout=60)
        assert page.status_code == 200 and "signed in as viewer" in page.text and "(read-only)" in page.text
        assert httpx.get(url + "/?q=cdn+purge", headers=HTML, cookies=viewer, timeout=60).status_code == 200
        head = log("%H")
        refused = httpx.post(url + "/dream/apply", data={"step": step.name}, cookies=viewer, headers=same, timeout=60)
        assert refused.status_code == 403 and "read-only" in refused.text
        assert log("%H") == head  # nothing committed
        # a forged cookie naming the write token is refused by the guard itself
        forged = {"memory_hub_session": "alice." + "0" * 64}
        assert httpx.get(url + "/health", headers=HTML, cookies=forged, timeout=30).status_code == 401

        alice = sign_in("alice")
        assert "signed in as alice" in httpx.get(url + "/health", headers=HTML, cookies=alice, timeout=60).text
        applied = httpx.post(url + "/dream/apply", data={"step": step.name}, cookies=alice, headers=same, timeout=120)
        assert applied.status_code == 200, applied.text
        assert log("%H") != head and log("%an <%ae>") == "alice <alice@memory-hub>"
        rejected = httpx.post(url + "/dream/reject", data={"key": key}, cookies=alice, headers=same, timeout=60)
        assert rejected.status_code == 200, rejected.text
        assert log("%s") == "dream: remember rejected proposals" and log("%an") == "alice"
        # a bearer header works as the cookie does, scope and all
        assert httpx.post(url + "/dream/plan", headers={**HTML, "Authorization": f"Bearer {secrets['viewer'][0]}"},
                          timeout=60).status_code == 403
