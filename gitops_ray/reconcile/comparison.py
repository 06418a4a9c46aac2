"""What one pass of the pipeline says of an app: :class:`Comparison`.

Split from the pipeline (issue 35): the views, the sync and the status read this type
and none of the machinery that builds it (:mod:`gitops_ray.reconcile.pipeline`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from gitops_ray.diff import AppDiff
from gitops_ray.diff.compare import DELETING
from gitops_ray.health import Health
from gitops_ray.health.impact import Impact
from gitops_ray.reconcile.desired import DesiredObject
from gitops_ray.reconcile.project import Project
from gitops_ray.render.apps import Application
from gitops_ray.types import AppCondition, Manifest, ResourceKey


@dataclass
class Comparison:
    """The state of one app after a pass: what git wants and how the cluster differs."""

    app: Application
    revision: str
    desired: list[DesiredObject]
    diff: AppDiff
    health: Health | None = None
    warnings: list[str] = field(default_factory=list)
    render_problems: tuple[str, ...] = ()  # tolerated by the render: see render.notes
    shapes: str = ""  # version of the in-cluster pod shapes the render depends on, if any
    rollouts: tuple[str, ...] = ()  # "<key>: group g 2/3 pods on an older template; ..."
    conditions: tuple[AppCondition, ...] = ()  # e.g. an AppProject's InvalidSpecError
    project: Project | None = None  # the app's AppProject, when projects are enforced
    forbidden: dict[ResourceKey, str] = field(default_factory=dict)  # by the project: why
    resource_health: dict[ResourceKey, Health] = field(default_factory=dict)  # None: no check
    live: dict[ResourceKey, Manifest | None] = field(default_factory=dict, repr=False)
    """Live objects this comparison read (None: absent): by LIST (no cache), and those of
    the OutOfSync resources, so the sync that follows looks none of them up again."""
    settled: frozenset[ResourceKey] = frozenset()
    """In sync and live as our last apply of the same content left them (pipeline doc)."""
    applied: dict[ResourceKey, tuple[str, str]] = field(default_factory=dict, repr=False)
    """(content, live ``resourceVersion``) of the objects whose live version our last apply
    of that content left, in sync or not: their applied marks
    (:func:`~gitops_ray.sync.records.applied_mark`), digested only when a sync's status is
    saved, not on every refresh."""
    proven: frozenset[ResourceKey] = frozenset()
    """Of :attr:`applied`: those a no-op dry run proved and the record has no mark for
    yet (pipeline doc): a refresh records their marks (:func:`~gitops_ray.reconcile.status.
    proven_marks`)."""
    shared: dict[ResourceKey, str] = field(default_factory=dict)
    """Git's objects whose live tracking id names another app, and that app: each is a
    ``SharedResourceWarning`` condition and a warning (``FailOnSharedResource=true``
    refuses the sync, :mod:`gitops_ray.reconcile.reconciler`)."""
    hooks: tuple[DesiredObject, ...] = ()
    """git's resource hooks (:mod:`gitops_ray.sync.hooks`): not compared, run by a sync."""
    impacts: tuple[Impact, ...] = ()
    """What the KubeRay operator will do with each changed Ray object
    (:mod:`gitops_ray.health.impact`)."""

    @functools.cached_property
    def out_of_sync(self) -> frozenset[ResourceKey]:
        """Once per comparison: a no-op refresh may be handed the same one back."""
        return frozenset(r.key for r in self.diff.resources if r.out_of_sync)

    @property
    def deleting(self) -> frozenset[ResourceKey]:
        """Pruned objects whose deletion was accepted but which are not gone yet."""
        return frozenset(r.key for r in self.diff.resources if r.reason == DELETING)

    def manifests(self, *, outlined: frozenset[ResourceKey] = frozenset()) -> list[Manifest]:
        """Git's objects, unpacked (what a sync applies); ``outlined`` ones only outlined.

        See :meth:`DesiredObject.outline`: for the objects a sync will not apply.
        """
        return [d.outline() if d.key in outlined else d.manifest() for d in self.desired]
