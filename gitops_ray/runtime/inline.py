"""Applications written directly in the settings file, parsed like the ones in git.

Why: small setups (and tests) should not need an app-of-apps repository just to list
two apps. The manifests go through the same parser as Applications found in git, so an
inline app behaves exactly like one in a repository; a bad one stops start-up with an
error that names its position in the settings.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitops_ray.errors import ConfigError
from gitops_ray.render import parse_application
from gitops_ray.render.apps import Application
from gitops_ray.types import Manifest


def parse_inline(docs: Sequence[Manifest]) -> list[Application]:
    """Parse ``applications:`` entries; names must be unique."""
    apps = [parse_application(doc, origin=f"settings: applications[{i}]")
            for i, doc in enumerate(docs)]
    names = [a.name for a in apps]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"settings: applications: duplicate app name(s) "
                          f"{', '.join(duplicates)}")
    return apps
