"""How gitops-ray writes a moment (epoch seconds, UTC): one format per audience.

Records keep epoch floats (cheap to compare and sort); people and Kubernetes never see
them. Kubernetes-shaped output (Argo CD's status, ``-o json``/``-o yaml``) gets RFC 3339
at second precision, as ``metav1.Time`` serialises (with milliseconds for the two times a
RollingSync compares, :func:`rfc3339_fine`); text for people gets the same moment
with a space and "UTC" spelled out, and how long ago it was in one format everywhere
(:func:`ago`: the CLI's tables and summaries, the web page).
"""

from __future__ import annotations

import datetime


def rfc3339(seconds: float) -> str:
    """``2026-08-20T10:15:03Z``: UTC, second precision (Kubernetes ``metav1.Time``)."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def rfc3339_fine(seconds: float) -> str:
    """RFC 3339 with milliseconds when the moment has them (``...T10:15:03.412Z``).

    For the two times an ApplicationSet's RollingSync compares with its own second-precision
    ``lastTransitionTime``: an Application's ``operationState.startedAt`` and
    ``reconciledAt`` must be strictly *after* the moment the step went Pending (argo-cd
    ``progressivesync``: ``StartedAt.After(LastTransitionTime)``). A sync started within
    that same second would be written equal to it at second precision, and the rollout
    would wait forever (argo-cd #13926). ``metav1.Time`` parses the fraction (Go's RFC 3339
    parser accepts it), so every Go reader sees the true moment.
    """
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    if moment.microsecond < 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def ago(seconds: float) -> str:
    """``42s ago``, ``5m ago``, ``3h ago``, ``2d ago``: the one "how long ago".

    One unit, rounded down. A moment ahead of this clock (another machine's ran ahead)
    reads ``0s ago``.
    """
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{max(int(seconds), 0)}s ago"


def utc_text(seconds: float) -> str:
    """``2026-08-20 10:15:03 UTC``: the same moment, for people."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S UTC")
