"""How gitops-ray writes a moment (epoch seconds, UTC): one format per audience.

Records keep epoch floats (cheap to compare and sort); people and Kubernetes never see
them. Kubernetes-shaped output (Argo CD's status, ``-o json``/``-o yaml``) gets RFC 3339
at second precision, as ``metav1.Time`` serialises; text for people gets the same moment
with a space and "UTC" spelled out. How long ago it was depends on the view (a table
column, a summary line, a page) and stays with the view.
"""

from __future__ import annotations

import datetime


def rfc3339(seconds: float) -> str:
    """``2026-08-20T10:15:03Z``: UTC, second precision (Kubernetes ``metav1.Time``)."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def utc_text(seconds: float) -> str:
    """``2026-08-20 10:15:03 UTC``: the same moment, for people."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S UTC")
