"""Stage 3, diff: compare desired with live, ignoring what other writers own.

Pure functions only. ``ignoreDifferences`` follows Argo CD exactly; built-in rules keep
the Ray autoscaler's fields out of the comparison.

Public API (used by the CLI, sync and the controller):

* :func:`compile_rules` → :class:`RuleSet` (``normalize``, ``ignored_paths``);
* :func:`compare` → :class:`ResourceDiff`, collected in an :class:`AppDiff`;
* :func:`strip_server_fields`;
* :mod:`gitops_ray.diff.format` for ``unified`` and ``to_json`` output;
* :mod:`gitops_ray.diff.groups`: per worker group changes of Ray objects (``-o json``).
"""

from gitops_ray.diff.compare import AppDiff, ResourceDiff, compare, strip_server_fields
from gitops_ray.diff.paths import Path
from gitops_ray.diff.rules import NormalizeResult, RuleSet, compile_rules

__all__ = ["AppDiff", "NormalizeResult", "Path", "ResourceDiff", "RuleSet", "compare",
           "compile_rules", "strip_server_fields"]
