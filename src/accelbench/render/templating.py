"""The HTML pages' templates (``render/templates/*.html.j2``, package data) and the one Jinja2
environment that renders them.

Safety by construction: autoescape is on for every template, so every string a page is given (a
machine name like ``<script>...``, an error text with ``<img onerror>``, a device model from a
bundle) is shown as text; only what the templates themselves write is markup. Each page carries a
Content-Security-Policy that allows no script and nothing from the network, which backs this up.

Jinja2 is imported when the first page is rendered, never at import time (``accelbench --help``
stays fast). Templates are written indented for reading; a newline and the indentation after it
are dropped between two tags (or template statements), and become one space inside text, so a
page comes out as compact as it was written by hand.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

#: A newline and its indentation between a tag (or template tag) and the next one.
_BETWEEN_TAGS = re.compile(r"(?<=[>}])\n[ \t]*(?=[<{])")
#: Any other newline with its indentation: inside text, where it reads as one space.
_IN_TEXT = re.compile(r"[ \t]*\n[ \t]*")


def compact(source: str) -> str:
    """A template's source with its layout whitespace removed (see the module's docstring)."""
    return _IN_TEXT.sub(" ", _BETWEEN_TAGS.sub("", source.strip()))


@cache
def _environment() -> Any:
    import jinja2
    import jinja2.ext

    class Compact(jinja2.ext.Extension):
        def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
            return compact(source)

    return jinja2.Environment(loader=jinja2.PackageLoader("accelbench.render", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, extensions=[Compact])


def render(name: str, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return str(_environment().get_template(name).render(**context))
