"""A pause of automated sync, kept in the app's record: what a rollback leaves behind.

Why: rolling an automated app back to an older revision is pointless if the controller
syncs git's revision again on its next pass. Argo CD refuses ``argocd app rollback``
while auto-sync is on (the user must switch it off in the Application, i.e. in git);
gitops-ray pauses automation for that one app instead, until a given time or until
``gitops-ray resume APP``. The pause lives in the app's record ConfigMap (status key
:data:`PAUSE_KEY`; its type is the record codec's, :class:`gitops_ray.sync.appstatus.Pause`,
written by :mod:`gitops_ray.sync.statuswrites`), which the controller reads from its watch
cache, so no extra request is made and a change of the pause reaches the controller as a
watch event.

While a pause is active, auto-sync neither syncs nor self-heals the app
(:func:`gitops_ray.reconcile.autosync.decide`); requested operations (Argo CD's Sync
button, ``gitops-ray sync``) still run. Once it ends, the controller syncs git's revision
again, because the app's last operation is the rollback's (an older revision).
"""

from __future__ import annotations

from gitops_ray.sync.appstatus import MAX_UNTIL, PAUSE_KEY, Pause

__all__ = ["MAX_UNTIL", "PAUSE_KEY", "Pause"]
