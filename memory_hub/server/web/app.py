"""The web pages' HTTP side: routes, who may write, security headers, templates, static files.

Thin on purpose: every page's content comes from ``pages.py`` (which calls the same library
functions as the CLI and the MCP tools), and this module only turns requests into calls and
results into HTML. The routes are plain Starlette routes that ``server/run.py`` adds to the MCP
server's HTTP app, so they sit behind the same ``Guard`` (Host/Origin always, the bearer token
when one is configured) as ``/mcp``.

Who may change anything: reading needs nothing more than the guard lets through. Writing (dream
apply/reject/plan, running the golden eval) is possible only when the server has a write token
(``$MEMORY_HUB_TOKEN``, or a write-scoped named token of the tokens file, ``server/tokens.py``) and
the request presents it: an ``Authorization: Bearer`` header, or the session cookie ``/login`` sets
after the token is typed once (HttpOnly, SameSite=Strict, a keyed hash rather than the token). A
read-scoped token signs in and views; a named token's write is committed with its name as author. A cookie-borne write must also come from this origin
(``Origin`` or ``Sec-Fetch-Site``), so another site cannot make the browser post one. Without a
token the pages are read-only and say how to enable writes.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..guard import ENV_PRINCIPAL, SESSION_COOKIE, session_value
from ..state import ServerState
from ..tokens import Principal, TokenTable
from . import pages

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "no-store",
}
STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
FILE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
              ".webp": "image/webp", ".avif": "image/avif", ".bmp": "image/bmp", ".svg": "image/svg+xml"}
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FORM_BYTES = 64 * 1024


def wants_html(request: Request) -> bool:
    """A browser asking for a page (``Accept: text/html``), not a script asking for JSON."""
    return "text/html" in request.headers.get("accept", "")


class Access:
    """Who a request is, for the pages: ``$MEMORY_HUB_TOKEN`` or a named token of the tokens file
    (``server/tokens.py``), presented as a bearer header or as the session cookie ``/login`` set.
    Reading needs a sign-in only where the guard asks for one; writing needs a write-scoped token."""

    def __init__(self, token: str | None, tokens: TokenTable | None = None) -> None:
        self.token = token
        self.tokens = tokens if tokens else None

    @property
    def writes_possible(self) -> bool:
        return self.token is not None or (self.tokens is not None and any(
            e.principal.can_write for e in self.tokens.entries))

    @property
    def sign_in_possible(self) -> bool:
        return self.token is not None or self.tokens is not None

    def authenticate(self, given: str) -> Principal | None:
        """The principal whose token ``given`` is (both kinds compared in constant time), or None."""
        given = given.strip()
        found = self.tokens.authenticate(given) if self.tokens is not None and given else None
        if self.token is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            found = found or ENV_PRINCIPAL
        return found

    def by_header(self, request: Request) -> Principal | None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return self.authenticate(given) if scheme.lower() == "bearer" else None

    def by_cookie(self, request: Request) -> Principal | None:
        given = request.cookies.get(SESSION_COOKIE, "")
        if not given:
            return None
        if self.token is not None and hmac.compare_digest(given.encode(), session_value(self.token).encode()):
            return ENV_PRINCIPAL
        return self.tokens.session_principal(given) if self.tokens is not None else None

    def who(self, request: Request) -> Principal | None:
        return self.by_header(request) or self.by_cookie(request)

    def signed_in(self, request: Request) -> bool:
        return self.who(request) is not None

    def cookie_for(self, principal: Principal) -> str | None:
        if principal == ENV_PRINCIPAL and self.token is not None:
            return session_value(self.token)
        return self.tokens.session_value(principal) if self.tokens is not None else None

    def write_refusal(self, request: Request) -> str | None:
        """Why this request may not write, or None when it may."""
        if not self.writes_possible:
            return ("this server has no write token, so its pages are read-only: start it with MEMORY_HUB_TOKEN "
                    "set (`MEMORY_HUB_TOKEN=… memory-hub serve --transport http`), or add a write-scoped token "
                    "(`memory-hub token add NAME --scope write`), and sign in with it")
        header = self.by_header(request)
        who = header or self.by_cookie(request)
        if who is None:
            return "sign in with a write token first (/login)"
        if not who.can_write:
            return f"token {who.name!r} is read-only: sign in with a write token to change anything"
        if header is not None:
            return None
        site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin")
        if site not in (None, "same-origin") or (site is None and not origin):
            return "refused: a write must come from this page (no Origin or a cross-site request)"
        return None

    def author(self, request: Request) -> str | None:
        """The commit author of a write this request makes: a named token's name, else None (git's own)."""
        who = self.who(request)
        if who is None or who == ENV_PRINCIPAL:
            return None
        from ...team.authored import author_line

        return author_line(who.name)


class Web:
    """The pages of one running server."""

    def __init__(self, state: ServerState, token: str | None, modes: tuple[str, ...],
                 tokens: TokenTable | None = None) -> None:
        self.state = state
        self.access = Access(token, tokens)
        self.modes = modes
        self.env = Environment(loader=PackageLoader("memory_hub.server.web", "templates"),
                               autoescape=select_autoescape(default=True, default_for_string=True),
                               trim_blocks=True, lstrip_blocks=True)
        self.env.globals.update(ago=pages.ago, when=pages.when, quote=quote, note_href=pages.markdown.note_href)
        self._plan_lock = threading.Lock()

    # -- responses --------------------------------------------------------------------------------

    def html(self, template: str, ctx: dict[str, Any], request: Request, status: int = 200,
             timing: dict[str, float] | None = None) -> Response:
        t0 = time.perf_counter()
        who = self.access.who(request)
        body = self.env.get_template(template).render(
            **ctx, request_path=request.url.path, signed_in=who is not None, can_write=bool(who and who.can_write),
            signed_in_as=who.name if who is not None else None,
            writes_possible=self.access.writes_possible, vault=str(self.state.vault))
        headers = dict(SECURITY_HEADERS)
        spent = dict(timing or {})
        spent["render"] = (time.perf_counter() - t0) * 1000
        headers["server-timing"] = ", ".join(f"{k};dur={v:.1f}" for k, v in spent.items())
        return Response(body, status_code=status, media_type="text/html; charset=utf-8", headers=headers)

    def error(self, request: Request, message: str, status: int) -> Response:
        return self.html("error.html", {"message": message, "status": status}, request, status)

    async def _page(self, request: Request, template: str, build: Callable[[], dict[str, Any]]) -> Response:
        t0 = time.perf_counter()
        try:
            ctx = await run_in_threadpool(build)
        except pages.PageError as exc:
            return self.error(request, str(exc), exc.status)
        return self.html(template, ctx, request, timing={"data": (time.perf_counter() - t0) * 1000})

    # -- pages ------------------------------------------------------------------------------------

    async def search(self, request: Request) -> Response:
        params = dict(request.query_params)
        template = "_results.html" if params.get("fragment") == "1" else "search.html"
        return await self._page(request, template, lambda: pages.search_page(self.state, params, self.modes))

    async def note(self, request: Request) -> Response:
        path = request.path_params["path"]
        return await self._page(request, "note.html", lambda: pages.note_page(self.state, path))

    async def timeline(self, request: Request) -> Response:
        params = dict(request.query_params)
        return await self._page(request, "timeline.html", lambda: pages.timeline_page(self.state, params))

    async def health(self, request: Request) -> Response:
        params = dict(request.query_params)
        doctor = params.get("doctor") == "1"
        return await self._page(request, "health.html",
                                lambda: pages.health_page(self.state, params, doctor=doctor))

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found", 404, media_type="text/plain")
        data = resources.files("memory_hub.server.web").joinpath("static", name).read_bytes()
        return Response(data, media_type=STATIC[name],
                        headers={"x-content-type-options": "nosniff", "cache-control": "max-age=300"})

    async def file(self, request: Request) -> Response:
        """An image attachment of the vault, for notes that embed it (nothing else is served)."""
        rel = request.path_params["path"]
        suffix = "." + rel.rsplit(".", 1)[-1].lower() if "." in rel else ""
        row = self.state.store.conn.execute("SELECT kind FROM notes WHERE path = ?", (rel,)).fetchone()
        if suffix not in FILE_TYPES or row is None or row["kind"] != "attachment":
            return self.error(request, f"no image attachment at {rel!r}", 404)
        from ...vault import safe_io

        try:
            data = await run_in_threadpool(safe_io.read_bytes, self.state.vault, rel, MAX_FILE_BYTES)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote) as exc:
            return self.error(request, f"cannot read {rel}: {exc}", 404)
        # An SVG opened on its own is a document: the sandbox keeps any script in it from running.
        return Response(data, media_type=FILE_TYPES[suffix],
                        headers={"content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
                                 "x-content-type-options": "nosniff", "cache-control": "no-cache"})

    # -- signing in -------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        nxt = _local(request.query_params.get("next"))
        if request.method == "GET":
            return self.html("login.html", {"next": nxt, "failed": False}, request)
        form = await _form(request)
        nxt = _local(form.get("next"))
        if not self.access.sign_in_possible:
            return self.error(request, self.access.write_refusal(request) or "no token", 403)
        who = self.access.authenticate(form.get("token", ""))
        cookie = self.access.cookie_for(who) if who is not None else None
        if cookie is None:
            return self.html("login.html", {"next": nxt, "failed": True}, request, 401)
        response = RedirectResponse(nxt, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(SESSION_COOKIE, cookie, httponly=True, samesite="strict", path="/")
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # -- writes -----------------------------------------------------------------------------------

    async def _write(self, request: Request, title: str, act: Callable[[dict[str, str]], dict[str, Any]],
                     back: str) -> Response:
        refusal = self.access.write_refusal(request)
        if refusal:
            return self.error(request, refusal, 403)
        author = self.access.author(request)

        def as_author(form: dict[str, str]) -> dict[str, Any]:
            from ...vault import git

            with git.author(author):  # a named token's write is committed under its name
                return act(form)

        try:
            form = await _form(request)
            outcome = await run_in_threadpool(as_author, form)
        except pages.PageError as exc:
            return self.error(request, str(exc), exc.status)
        except Exception as exc:  # noqa: BLE001 - a failed action is shown, never a traceback
            return self.error(request, f"{title} failed: {type(exc).__name__}: {exc}", 500)
        return self.html("action.html", {"title": title, "outcome": outcome, "back": back}, request)

    async def dream_apply(self, request: Request) -> Response:
        from ...dream.proposals import ProposalError, apply_step

        def act(form: dict[str, str]) -> dict[str, Any]:
            try:
                return apply_step(self.state.vault, form.get("step", ""))
            except ProposalError as exc:
                raise pages.PageError(str(exc), 409) from None

        return await self._write(request, "apply a dream step", act, "/health#dream")

    async def dream_reject(self, request: Request) -> Response:
        from ...dream.proposals import ProposalError, reject_key
        from ...dream.rejected import RejectError

        def act(form: dict[str, str]) -> dict[str, Any]:
            try:
                return reject_key(self.state.vault, form.get("key", ""))
            except (ProposalError, RejectError) as exc:
                raise pages.PageError(str(exc), 409) from None

        return await self._write(request, "reject a dream proposal", act, "/health#dream")

    async def dream_plan(self, request: Request) -> Response:
        def act(form: dict[str, str]) -> dict[str, Any]:
            return self._start_planning()

        return await self._write(request, "plan a dream pass", act, "/health#dream")

    def _start_planning(self) -> dict[str, Any]:
        """A dry run in a background thread (a minute on a vault of thousands); /health shows progress."""
        from ...dream import proposals

        with self._plan_lock:
            running = self.state.extras.get("web_planning")
            if running and running.get("running"):
                return {"started": False, "message": f"a plan is already being made (since {pages.when(running['since'])})"}
            status: dict[str, Any] = {"running": True, "since": time.time()}
            self.state.extras["web_planning"] = status

        def work() -> None:
            try:
                plan = proposals.plan(self.state.vault)
                status["summary"] = plan.summary
            except Exception as exc:  # noqa: BLE001 - shown on /health
                status["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                status["running"] = False
                status["done"] = time.time()

        threading.Thread(target=work, name="memory-hub-web-plan", daemon=True).start()
        return {"started": True, "message": "planning started; /health shows the plan when it is ready"}

    async def run_eval(self, request: Request) -> Response:
        def act(form: dict[str, str]) -> dict[str, Any]:
            return run_golden(self.state)

        return await self._write(request, "run the golden eval", act, "/health#eval")

    def routes(self) -> list[Route]:
        """Every page route; ``/health`` is registered by ``server/run.py`` (it also answers JSON)."""
        return [
            Route("/", self.search, methods=["GET"]),
            Route("/note/{path:path}", self.note, methods=["GET"]),
            Route("/timeline", self.timeline, methods=["GET"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/file/{path:path}", self.file, methods=["GET"]),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/dream/apply", self.dream_apply, methods=["POST"]),
            Route("/dream/reject", self.dream_reject, methods=["POST"]),
            Route("/dream/plan", self.dream_plan, methods=["POST"]),
            Route("/health/eval", self.run_eval, methods=["POST"]),
        ]


def run_golden(state: ServerState) -> dict[str, Any]:
    """Run the vault's golden suite through the server's searcher and record it in the history."""
    from ...eval.golden import GoldenError, Ranked, load_cases, record_run, run_eval
    from ...retrieval.search import QueryError
    from ...vault.safe_io import safe_path

    try:
        cases, k, threshold = load_cases(safe_path(state.vault, pages.EVAL_CASES))
    except GoldenError as exc:
        raise pages.PageError(str(exc), 409) from None

    def search(query: str, n: int) -> Ranked:
        try:
            result = state.search(query, k=n)
        except QueryError:
            return Ranked([])
        return Ranked.of(result, [h.path for h in result.hits])

    mode = getattr(state.searcher, "mode", None) if state.models_ready.is_set() else "lexical"
    report = run_eval(state.vault, cases, search, k=k, threshold=threshold, mode=mode)
    line = record_run(state.vault, report, pages.EVAL_CASES, source="web")
    return {"summary": f"{report.passed}/{report.evaluable} passed ({report.pass_rate:.0%}), MRR {report.mrr:.3f}",
            **{k2: v for k2, v in line.items() if k2 != "event"}}


def _local(target: str | None) -> str:
    """A redirect target on this server only (``/…`` but never ``//host``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise pages.PageError("form too large", 413)
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


HealthJson = Callable[[Request], Awaitable[Response]]
