"""The error hierarchy: every failure names its stage, and where it happened.

Errors carry enough context (file, line, app, resource) for a user to fix the input,
and never carry secrets. The CLI maps them to exit code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest known name, or ``""`` (for error messages)."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class GitOpsRayError(Exception):
    """Base of every error this project raises on purpose."""

    stage = "internal"


class ConfigError(GitOpsRayError):
    """Invalid settings, Application or ignore rule (reported at load time)."""

    stage = "config"


class SourceError(GitOpsRayError):
    """The config repository could not be fetched or read."""

    stage = "source"


class RenderError(GitOpsRayError):
    """Manifests could not be rendered (malformed YAML, helm or kustomize failure)."""

    stage = "render"


class DiffError(GitOpsRayError):
    """Desired and live state could not be compared."""

    stage = "diff"


class SystemSettingsError(DiffError):
    """An ``argocd-cm`` key that could not be read governs an object being compared.

    Its :attr:`reason` is the machine-readable word: the status's ``errorReason`` of the
    ComparisonError, and the ``reason`` of a sync that fails on it
    (:class:`gitops_ray.sync.reasons.Reason`). The message names the key, never its value.
    """

    reason = "SystemSettingsInvalid"


class SyncError(GitOpsRayError):
    """Apply or prune failed, or an object was rejected by validation."""

    stage = "sync"


class LimitExceeded(RenderError):
    """Input over a bound of :mod:`gitops_ray.limits`; always an error of its app.

    Never skipped as "not a manifest": an alias bomb must not vanish silently either.
    """

    stage = "render"


class ChildTimedOut(RenderError):
    """A child process (helm, kustomize) ran past its deadline and was killed."""


class ChildMemoryExceeded(LimitExceeded):
    """A child process (helm, kustomize) went over ``childMemoryLimit`` and was stopped.

    Its message carries ``MemoryLimitExceeded`` (:data:`gitops_ray.childproc.REASON`).
    """
