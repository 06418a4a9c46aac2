"""Moved to :mod:`gitops_ray.settings` (one floor down: the one-shot CLI reads it too).

This name is the same module object, so imports written before the move (branches in
flight, scripts) keep working; the product imports :mod:`gitops_ray.settings`. Remove it
once nothing imports this path.
"""

from __future__ import annotations

import sys

from gitops_ray import settings as _settings
from gitops_ray.settings import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _settings
