"""Resource tracking: which app owns an object, in Argo CD's annotation format.

Every object we apply carries ``gitops-ray.io/tracking-id: <app>:<group>/<kind>:<ns>/<name>``
(Argo CD's ``argocd.argoproj.io/tracking-id`` format, under our own key so both tools can
coexist) and a label for listing. Prune trusts an object only when its tracking id names
this app *and* the object itself (Argo's ``isSelfReferencedObj``): a copied annotation or
another app's object is never deleted.

An object of git's whose live tracking id names another app is *shared*
(:func:`claimed_by`, :func:`shared_message`): Argo CD's ``SharedResourceWarning``, whose
check reads only the app name in the id (``GetAppName``), as ours does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from gitops_ray.types import Manifest, ResourceKey

TRACKING_ANNOTATION = "gitops-ray.io/tracking-id"
APP_LABEL = "gitops-ray.io/app"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class TrackingId:
    """A parsed tracking id."""

    app: str
    key: ResourceKey

    def __str__(self) -> str:
        k = self.key
        return f"{self.app}:{k.group}/{k.kind}:{k.namespace}/{k.name}"


def parse_tracking_id(value: str) -> TrackingId | None:
    """Parse ``app:group/kind:ns/name``; ``None`` when malformed. Names may contain ``:``."""
    parts = value.split(":", 2)
    if len(parts) != 3 or "/" not in parts[1] or "/" not in parts[2]:
        return None
    group, kind = parts[1].split("/", 1)
    namespace, name = parts[2].split("/", 1)
    return TrackingId(parts[0], ResourceKey(group, kind, namespace, name))


def app_label_value(app: str) -> str:
    """A valid label value for the app name (hashed suffix when it is too long)."""
    if _LABEL_VALUE.match(app):
        return app
    digest = hashlib.sha256(app.encode()).hexdigest()[:10]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]", "-", app)[:50].strip("-_.") or "app"
    return f"{cleaned}-{digest}"


def tracking_id_of(app: str, obj: Manifest) -> TrackingId:
    return TrackingId(app, ResourceKey.of(obj))


def with_tracking(app: str, obj: Manifest) -> Manifest:
    """``obj`` carrying our tracking annotation and app label.

    Only the top level and ``metadata`` are copied; ``spec`` and the rest are shared with
    ``obj`` (nothing downstream mutates objects in place: normalisation and the keyed
    merge work on copies), which halves the memory of every rendered object we hold.
    """
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           TRACKING_ANNOTATION: str(tracking_id_of(app, obj))}
    meta["labels"] = {**(meta.get("labels") or {}), APP_LABEL: app_label_value(app)}
    return {**obj, "metadata": meta}


def is_tracked_by(app: str, live: Manifest) -> bool:
    """True when ``live`` says it belongs to ``app`` and the id refers to itself.

    As in Argo CD, a cluster-scoped object accepts any namespace in the id.
    """
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    parsed = parse_tracking_id(str(annotations.get(TRACKING_ANNOTATION, "")))
    if parsed is None or parsed.app != app:
        return False
    key = ResourceKey.of(live)
    same_ns = not key.namespace or parsed.key.namespace == key.namespace
    return (parsed.key.group, parsed.key.kind, parsed.key.name) == (
        key.group, key.kind, key.name) and same_ns


def claimed_by(obj: Manifest | None) -> str:
    """The app ``obj``'s tracking id names (``""``: none, or not a tracking id)."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    parsed = parse_tracking_id(str(annotations.get(TRACKING_ANNOTATION, "")))
    return parsed.app if parsed is not None else ""


def shared_with(desired: Manifest, live: Manifest | None) -> str:
    """The other app whose object ``live`` is, by its tracking id, or ``""``.

    ``desired`` is git's object as we apply it (its tracking id names our app).
    """
    other = claimed_by(live)
    return other if other and other != claimed_by(desired) else ""


def shared_message(key: ResourceKey, app: str, other: str) -> str:
    """Argo CD's ``SharedResourceWarning`` message."""
    return f"{key.kind}/{key.name} is part of applications {app} and {other}"
