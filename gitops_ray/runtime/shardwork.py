"""What this replica does when its shards change hands (``sharding.enabled``).

Why its own room: :class:`~gitops_ray.runtime.shards.ShardCoordinator` decides *which*
shards this replica holds, would inherit or has lost, and says so through callbacks; what
follows for the apps (adopt their records, queue them in an order that spreads the work
over the destination clusters, prepare a silent member's apps on standby, drop what was
published about apps another replica now refreshes) is the controller's side of a
hand-over. It is one rule per callback, read together, apart from the wiring
(:mod:`gitops_ray.runtime.runner`) and from the coordinator's Lease protocol.
"""

from __future__ import annotations

import dataclasses

import structlog

from gitops_ray.runtime.controller import Controller
from gitops_ray.runtime.metrics import Metrics
from gitops_ray.runtime.queue import WorkQueue, across_clusters
from gitops_ray.runtime.shards import ShardCoordinator

log = structlog.get_logger(__name__)


@dataclasses.dataclass(frozen=True, eq=False)
class ShardWork:
    """The coordinator's callbacks (``adopt``, ``on_gained``, ...), for this replica's apps."""

    shards: ShardCoordinator
    controller: Controller
    queue: WorkQueue
    metrics: Metrics

    def busy(self, shard: int) -> bool:
        """Whether a write of ``shard`` is running (its Lease is released after it)."""
        return self.controller.writing(shard)

    def adopt(self, shards: frozenset[int]) -> None:
        shard_of = self.shards.shard_of
        self.controller.adopt(lambda name: shard_of(name) in shards)

    def gained(self, shards: frozenset[int]) -> None:
        self.metrics.shards_held.set(len(self.shards.held()))
        self.metrics.shard_handovers.labels("gained").inc(len(shards))
        gained = [n for n in self.controller.catalog.apps() if self.shards.shard_of(n) in shards]
        for name in across_clusters(gained, self._destination):
            self.queue.submit(name, "shard-gained")

    def heir(self, shards: frozenset[int]) -> None:
        """Shards this replica would now take over: prepare their apps (standby work)."""
        heir = [n for n in self.controller.catalog.apps() if self.shards.shard_of(n) in shards]
        for name in across_clusters(heir, self._destination):
            self.queue.submit(name, "successor")

    def silent(self, member: str) -> None:
        """A replica went silent: prepare the apps this one would take from it, in full.

        Standby passes (:meth:`Controller.refresh`), now dry-running what was left to
        the owner, so its takeover finds every verdict known (runtime.shards).
        """
        mine = [name for name in self.controller.catalog.apps()
                if self.shards.owner_of(name)[0] == member and self.controller.successor(name)]
        log.info("member_silent", member=member, apps=len(mine))
        for name in across_clusters(mine, self._destination):
            self.queue.submit(name, "owner-silent", urgent=True)  # before other standby

    def lost(self, shards: frozenset[int]) -> None:
        """Another replica refreshes these apps now: drop what this one published."""
        self.metrics.shards_held.set(len(self.shards.held()))
        self.metrics.shard_handovers.labels("lost").inc(len(shards))
        for name in self.controller.catalog.apps():
            if self.shards.shard_of(name) in shards:
                self.metrics.forget_app(name)
                self.controller.compared.forget(name)

    def _destination(self, name: str) -> tuple[str, str]:
        app = self.controller.catalog.get(name)
        return (app.destination.server, app.destination.name) if app is not None else ("", "")
