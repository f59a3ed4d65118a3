"""The web console: server-rendered pages under /console, served by the HTTP API (routes.py).

`mount(app, settings, state)` is all create_app calls. No build step and nothing fetched at run
time: Jinja2 templates in templates.py, one small stylesheet, the graph drawn as SVG on the
server, and no JavaScript.
"""
from __future__ import annotations


def mount(app, settings, state: dict) -> None:
    from memstream.app.console.auth import Refused
    from memstream.app.console.routes import refused, router
    app.include_router(router(settings, state))
    app.add_exception_handler(Refused, refused)
