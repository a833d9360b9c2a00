"""The search page: plain HTML, CSS and JavaScript shipped beside this module, served at ``/``.

No build step and no CDN: the files in this folder are the page. It calls the same JSON
endpoints as any other client (``/search``, ``/read_note``, ``/related``, ``/status``,
``/modes``), so its data passes the same Host, Origin and token checks. The files themselves
hold no vault data, and a browser cannot send a bearer header when it navigates, so they are
served without the token (:data:`PUBLIC_PATHS`), still behind the Host and Origin checks; with
a token configured the page asks for it and sends it as ``Authorization: Bearer``.

Every page response carries a strict Content-Security-Policy: scripts and styles only from
these files (no inline script, no ``eval``), requests only to this origin, no plugins, no
framing. The page builds its DOM with ``textContent``: note text is never parsed as markup.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
ASSETS = ("app.js", "api.js", "dom.js", "note.js", "theme.js", "style.css", "icon.svg")
PUBLIC_PATHS = frozenset({"/", *(f"/page/{name}" for name in ASSETS)})


def page_routes() -> list[Route]:
    """``GET /`` (the page, whatever its query string) and ``GET /page/NAME`` for each asset,
    read once from the package."""
    routes = []
    for path, name in (("/", "index.html"), *((f"/page/{n}", n) for n in ASSETS)):
        body = (files(__package__) / name).read_bytes()
        media_type = _TYPES[name[name.rindex(".") :]]

        async def send(request: Request, body: bytes = body, media_type: str = media_type) -> Response:
            return Response(body, media_type=media_type, headers=HEADERS)

        routes.append(Route(path, send, methods=["GET"]))
    return routes
