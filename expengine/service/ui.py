"""`serve --ui`: a read-only memory browser, server-rendered HTML behind the API's token.

The pages call the same read operations as the API (`ops`: query, units, trace, show, history), through
the service's read views, and render their JSON with Jinja2 (autoescaped: memory text is data). A
browser proves it holds the token once, through a login form; a session id of its own (`Sessions`, ended
by logout) then travels in an HttpOnly, SameSite=Strict cookie scoped to /ui. No token is taken from a URL
(one there is refused: URLs end up in history, logs and Referer headers). No page writes: queries run with touch=False, and only read ops are reachable.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from typing import Any, Awaitable, Callable, Protocol
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..charts import growth_svg
from ..errors import ExpengineError, InputError, NotFoundError
from . import ops

log = logging.getLogger("expengine.serve")
PREFIX = "/ui"
COOKIE = "expengine_ui"
TOKEN_PARAMS = frozenset({"token", "access_token", "bearer", "auth", "authorization"})
LOGIN_BODY_BYTES = 4096
SESSION_AGE_S = 12 * 3600.0
SESSIONS_MAX = 1000
PER_KIND = 50  # units of each kind on the overview page (a big table is slow to lay out)
HEADERS = {
    # no script runs on these pages at all: a text that slipped past escaping still could not execute
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
Page = Callable[[Request], Awaitable[Response]]


class Executes(Protocol):
    """What the pages need of the service: to run an operation on its read views."""

    async def execute(self, name: str, op: ops.Op, args: ops.Args) -> Any: ...


class UiGate:
    """Paths under /ui go to the browser app (cookie login); all others to the API (bearer token)."""

    def __init__(self, ui: ASGIApp, api: ASGIApp):
        self.ui, self.api = ui, api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.ui(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def build_ui(service: Executes, token: str) -> ASGIApp:
    """The browser app; `token` is the API's bearer token, the one secret the login form accepts."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("expengine.service", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = lambda value, width=16: _short(str(value or ""), width)
    env.filters["when"] = lambda value: str(value or "")[:19].replace("T", " ")
    expected = token.encode()
    sessions = Sessions()

    def render(name: str, code: int = 200, **values: Any) -> Response:
        html = env.get_template(name).render(prefix=PREFIX, **values)
        return Response(html, status_code=code, media_type="text/html", headers=HEADERS)

    def logged_in(request: Request) -> bool:
        return sessions.valid(request.cookies.get(COOKIE, ""))

    def token_in_url(request: Request) -> bool:
        pairs = parse_qsl(request.url.query, keep_blank_values=True)
        return any(k.lower() in TOKEN_PARAMS or token in v for k, v in pairs) or token in request.url.path

    def refuse_url_token() -> Response:
        return render(
            "error.html",
            400,
            title="token in the URL refused",
            message="A token in the address is refused: it would stay in the browser history and in logs.",
            hint="Log in with the form instead; the browser then keeps the token in a cookie.",
        )

    def page(handler: Page) -> Page:
        """Login first; an operation's error becomes an HTML page with its status."""

        async def guarded(request: Request) -> Response:
            if token_in_url(request):
                return refuse_url_token()
            if not logged_in(request):
                return render("login.html", 401, error=None, next=_local(request.url.path))
            try:
                return await handler(request)
            except ExpengineError as exc:
                code = 404 if isinstance(exc, NotFoundError) else 400 if isinstance(exc, InputError) else 500
                return render("error.html", code, title=type(exc).__name__, message=exc.message, hint=exc.hint)
            except Exception:
                log.exception("page failed", extra={"path": request.url.path})
                return render("error.html", 500, title="server error", message="the page failed", hint="see the log")

        return guarded

    async def read(name: str, **payload: Any) -> Any:
        op = ops.lookup(name)
        if op.mode != "read":  # the browser is read-only, whatever a page asks for
            raise InputError(f"{name} is not a read operation", hint="the memory browser only reads")
        return json.loads(ops.dumps(op, await service.execute(name, op, ops.parse(op, payload))))

    async def login_form(request: Request) -> Response:
        if token_in_url(request):
            return refuse_url_token()
        return render("login.html", error=None, next=_local(request.query_params.get("next", "")))

    async def login(request: Request) -> Response:
        if token_in_url(request):
            return refuse_url_token()
        body = b""
        async for chunk in request.stream():  # read no more than a login form can hold
            body += chunk
            if len(body) > LOGIN_BODY_BYTES:
                return render("login.html", 413, error="the form is too large", next=f"{PREFIX}/search")
        form = dict(parse_qsl(body.decode("utf-8", "replace")))
        target = _local(form.get("next", ""))
        if not hmac.compare_digest(form.get("token", "").strip().encode(), expected):
            return render("login.html", 401, error="wrong token", next=target)
        response = RedirectResponse(target, status_code=303, headers=HEADERS)
        response.set_cookie(COOKIE, sessions.start(), path=PREFIX, httponly=True, samesite="strict")
        return response

    async def logout(request: Request) -> Response:
        sessions.end(request.cookies.get(COOKIE, ""))
        response = RedirectResponse(f"{PREFIX}/login", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/search", status_code=303, headers=HEADERS)

    @page
    async def search(request: Request) -> Response:
        form = _search_form(request)
        result = None
        if form["text"]:
            args = {k: v for k, v in form.items() if v not in ("", None, False)}
            result = await read("query", **args, touch=False)
        return render("search.html", form=form, result=result)

    @page
    async def units(request: Request) -> Response:
        filters = {name: request.query_params.get(name) or None for name in ("agent", "user", "kind", "status")}
        found = (await read("units", **filters))["units"]
        groups: dict[str, list[dict[str, Any]]] = {}
        for unit in found:
            groups.setdefault(unit["kind"], []).append(unit)
        # the overview shows each kind's best; one kind's page shows all of it
        shown = PER_KIND if filters["kind"] is None else None
        return render("units.html", groups=groups, total=len(found), filters=filters, shown=shown)

    @page
    async def trace(request: Request) -> Response:
        return render("trace.html", trace=await read("trace", id=request.path_params["id"]))

    @page
    async def item(request: Request) -> Response:
        return render("item.html", item=await read("show", id=request.path_params["id"]))

    @page
    async def growth(request: Request) -> Response:
        from ..charts import series

        runs = (await read("history"))["runs"]
        curve = series(runs)
        return render("growth.html", runs=runs, series=curve, chart=growth_svg(curve))

    async def style(request: Request) -> Response:
        css = env.loader.get_source(env, "style.css")[0]  # type: ignore[union-attr]
        return Response(css, media_type="text/css", headers={**HEADERS, "cache-control": "max-age=3600"})

    return Starlette(
        routes=[
            Route(PREFIX, home),
            Route(f"{PREFIX}/", home),
            Route(f"{PREFIX}/login", login_form, methods=["GET"]),
            Route(f"{PREFIX}/login", login, methods=["POST"]),
            Route(f"{PREFIX}/logout", logout, methods=["POST"]),
            Route(f"{PREFIX}/search", search),
            Route(f"{PREFIX}/units", units),
            Route(f"{PREFIX}/trace/{{id:path}}", trace),
            Route(f"{PREFIX}/item/{{id:path}}", item),
            Route(f"{PREFIX}/growth", growth),
            Route(f"{PREFIX}/style.css", style),
        ]
    )


class Sessions:
    """The browser's logins: a random id per login, never the API's token (a stolen cookie does not open
    the API), held in this process only, ended by logout or after `max_age_s`, the oldest dropped past
    `max_open`. A restart logs every browser out."""

    def __init__(self, *, max_age_s: float = SESSION_AGE_S, max_open: int = SESSIONS_MAX):
        self.max_age_s, self.max_open = max_age_s, max_open
        self._started: dict[str, float] = {}  # sha256 of the id -> when it was made

    @staticmethod
    def _key(session: str) -> str:
        return hashlib.sha256(session.encode()).hexdigest()

    def start(self) -> str:
        session = secrets.token_urlsafe(32)
        self._started[self._key(session)] = time.monotonic()
        while len(self._started) > self.max_open:
            del self._started[next(iter(self._started))]
        return session

    def valid(self, session: str) -> bool:
        started = self._started.get(self._key(session)) if session else None
        return started is not None and time.monotonic() - started < self.max_age_s

    def end(self, session: str) -> None:
        self._started.pop(self._key(session), None)


def _search_form(request: Request) -> dict[str, Any]:
    """The search box's fields, as QueryArgs spells them (bad values come back as a 400 page)."""
    params = request.query_params
    k = params.get("k") or "10"
    if not k.isdigit():
        raise InputError(f"k must be a whole number, got {k!r}", hint="e.g. 10")
    return {
        "text": params.get("q", "").strip(),
        "k": int(k),
        "agent": params.get("agent", "").strip(),
        "user": params.get("user", "").strip(),
        "kind": params.get("kind", "").strip(),
        "include_dormant": params.get("dormant") == "on",
    }


def _local(path: str) -> str:
    """Where to go after login: a page of this browser only (never another site: no open redirect)."""
    if path.startswith(PREFIX + "/") and not path.startswith("//") and "\\" not in path and "login" not in path:
        return path
    return f"{PREFIX}/search"


def _short(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
