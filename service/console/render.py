"""Server-side HTML: one Jinja2 environment over service/console/templates, strict headers.

Rendered here rather than through Litestar's TemplateConfig so the console needs nothing from the
app factory. Autoescaping is on for every template: ticket text is hostile input.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
from litestar import Response
from litestar.datastructures import Cookie

from .views import human_age

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Pages carry customer text: never cached, never framed, scripts and styles only from us
# (the bars are SVG attributes, so no inline style is needed either).
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def _percent(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value * 100:.{digits}f} %"


def _fixed(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a typo in a template fails the tests, not silently
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = lambda s: "–" if s is None else human_age(s)
    env.filters["percent"] = _percent
    env.filters["fixed"] = _fixed
    env.globals["asset_version"] = asset_version()
    return env


def asset_version() -> str:
    """Changes when console.css or console.js change, so browsers never keep a stale copy."""
    import hashlib

    digest = hashlib.sha256()
    for name in ("console.css", "console.js"):
        digest.update((STATIC / name).read_bytes())
    return digest.hexdigest()[:12]


def page(template: str, status_code: int = 200, cookies: list[Cookie] | None = None, **context: Any) -> Response[str]:
    html = environment().get_template(template).render(**context)
    return Response(
        html,
        status_code=status_code,
        media_type="text/html; charset=utf-8",
        headers=dict(HEADERS),
        cookies=cookies or [],
    )
