"""Jinja2 templates shipped in the package, autoescaped: one place that turns data into HTML.

Why Jinja2 and not string formatting: every value on these pages (app names, object
names, messages, diffs) may come from git or the cluster, i.e. from whoever can commit or
create a Pod. Autoescaping everything by default (``autoescape=True`` for every template,
``StrictUndefined`` so a typo fails the tests instead of printing nothing) makes
escaping the rule rather than something each line must remember. The templates are
package data (``gitops_ray/runtime/web/templates``), loaded with ``PackageLoader``, so a
wheel needs no build step and no files beside it.
"""

from __future__ import annotations

from typing import Any

import jinja2

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("gitops_ray.runtime.web", "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    auto_reload=False)


def render(template: str, **context: Any) -> bytes:
    """The template rendered with ``context``, as UTF-8."""
    return ENV.get_template(template).render(**context).encode()
