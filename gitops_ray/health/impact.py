"""What the KubeRay operator will do to running Ray when a change lands, said before it does.

Why this exists: a sync changes a Ray object, but the Pods are the operator's, and what it
does with a change depends on the kind, the change and the object's upgrade strategy. A
platform team must read "this commit recreates 48 workers of gpu-a100" before the commit
lands, not find it in the operator's Events after. So each changed Ray object gets an
:class:`Impact`: what the operator does (:class:`Effect`), to which RayCluster, and the
Pods it deletes, creates or leaves on an older template, per group.

The rules are KubeRay v1.6.1's own (``ray-operator/controllers/ray``), read from its source:

* RayCluster (``raycluster_controller.go``): a spec change reaches running Pods only with
  ``upgradeStrategy.type: Recreate`` (no feature gate): ``shouldRecreatePodsForUpgrade``
  compares the head Pod's ``ray.io/upgrade-strategy-recreate-hash`` with
  ``GenerateHashWithoutReplicasAndWorkersToDelete(spec)`` (the whole spec without each
  group's replicas, min/max, ``workersToDelete``, tolerations and scheduling gates, and
  without ``upgradeStrategy``) and, when they differ, deletes *every* Pod of the cluster;
  the next passes create the head and each group's desired replicas
  (``GetWorkerGroupDesiredReplicas``: replicas clamped to min/max, times ``numOfHosts``,
  0 for a suspended group) from the new spec. Without it (unset or ``None``) running Pods
  keep the old template ("rollout pending", :mod:`gitops_ray.health.rollout`); replica
  changes add or remove Pods either way. A suspended cluster has no Pods to change.
* RayService (``rayservice_controller.go``): ``isClusterSpecHashEqual`` compares the same
  hash of ``rayClusterConfig`` with the one the RayCluster was made from. Equal (only
  replicas, min/max, ``workersToDelete``, tolerations or scheduling gates changed): the
  running cluster is *not* updated (``shouldUpdateCluster``). Equal but for worker groups
  appended at the end: the cluster is updated in place (the new groups get Pods).
  Otherwise ``shouldPrepareNewCluster`` starts a new RayCluster beside the active one
  (zero-downtime upgrade; the old one is deleted once the new one serves, after
  ``rayClusterDeletionDelaySeconds``, default 60) when ``isZeroDowntimeUpgradeEnabled``:
  ``upgradeStrategy.type`` unset or ``NewCluster`` (``NewClusterWithIncrementalUpgrade``
  only with the ``RayServiceIncrementalUpgrade`` gate, off by default in v1.6.1); ``None``
  leaves the cluster as it is. A pending cluster (an upgrade not finished, or a first
  cluster not serving yet) is what the change is compared with, and it is replaced.
  ``suspend`` toggles are applied in place; ``serveConfigV2`` goes to the Serve
  applications of the cluster that stays.
* RayJob (``rayjob_controller.go``): once started (``Initializing``, ``Running``,
  ``Waiting``), changes are disregarded ("Disregard changes in RayClusterSpec of RayJob"):
  the RayCluster and the submitted job keep the spec they were made from; only
  ``suspend: true`` acts (``Suspending``: the cluster and submitter are deleted). A
  ``Suspended`` job set ``suspend: false`` starts again from the new spec (``New``). A
  finished job (``Complete``, ``Failed``) never runs again. A job not started yet (``New``,
  no status), or ``Retrying`` (its cluster deleted, ``backoffLimit``), is made from the
  new spec.

What is not modelled: the operator's ``ENABLE_ZERO_DOWNTIME=false`` environment variable
and its feature gates other than their v1.6.1 defaults, an operator upgrade (a head Pod of
another KubeRay version is re-annotated instead of recreated), and fields the operator or
the API server refuses (those stop the change before any of this). The comparison is of
the untyped objects git's server-side dry run predicts and live, not of Go's typed JSON
hash, so a field set to the value Go leaves out may count as a change here and not there.

Pure and total like the rest of ``gitops_ray.health``: objects and Pods come from the
caller, malformed input reads as absent.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gitops_ray.health.fields import dig, mapping, number, objects, text
from gitops_ray.health.rollout import GROUP_LABEL, HEAD_GROUP, NODE_TYPE_LABEL
from gitops_ray.types import Manifest

KUBERAY_VERSION = "v1.6.1"
"""The operator version whose source these rules were read from (``operatorVersion`` of
each prediction). The functions named in the module docstring are unchanged in v1.6.2."""
RECREATE_HASH = "ray.io/upgrade-strategy-recreate-hash"
"""The head Pod's annotation ``shouldRecreatePodsForUpgrade`` compares (none: no recreate)."""
DELETION_DELAY = 60
"""``RayClusterDeletionDelayDuration``: seconds an old RayService cluster outlives its use."""
RAY_KINDS = ("RayCluster", "RayService", "RayJob")

_MUTED_POD = ("tolerations", "schedulingGates")
_MUTED_GROUP = ("replicas", "minReplicas", "maxReplicas")
_STARTED = ("Initializing", "Running", "Waiting", "Suspending")
_FINISHED = ("Complete", "Failed")
_LATER_JOB_FIELDS = ("activeDeadlineSeconds", "preRunningDeadlineSeconds", "backoffLimit",
                     "shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "deletionStrategy")
"""RayJob fields the operator reads at later steps of a started job, not only at its start."""


class Effect(StrEnum):
    """What the operator does to running Ray with one object's change."""

    CREATES = "Creates"  # a new object: its RayCluster and Pods are created
    RECREATES = "Recreates"  # RayCluster Recreate: every Pod deleted, then created anew
    ROLLOUT_PENDING = "RolloutPending"  # running Pods stay on the old template
    SCALES = "Scales"  # replicas changed: Pods added or removed, none replaced
    NEW_CLUSTER = "NewCluster"  # RayService: a new RayCluster beside the old one
    REPLACES_PENDING = "ReplacesPending"  # RayService: its pending RayCluster replaced
    IN_PLACE = "InPlace"  # applied to the running object without replacing Pods
    SUSPENDS = "Suspends"  # Pods (a RayJob's cluster) deleted by a suspension
    RESUMES = "Resumes"  # a suspended object starts again, from the new spec
    IGNORED = "Ignored"  # the operator does not act on this change: running Ray keeps it
    NOTHING = "Nothing"  # no running Ray is touched (no Pods yet, or a field Pods lack)


@dataclass(frozen=True)
class GroupPods:
    """``pods`` Pods of ``group`` (``headgroup`` for the head)."""

    group: str
    pods: int

    def describe(self) -> str:
        if self.group == HEAD_GROUP:
            return "1 head" if self.pods == 1 else f"{self.pods} heads"
        return f"{self.pods} worker{'s' if self.pods != 1 else ''} of {self.group}"


@dataclass(frozen=True)
class Impact:
    """What the operator will do with one Ray object's change (see the module docstring)."""

    kind: str
    namespace: str
    name: str
    effect: Effect
    message: str
    cluster: str = ""  # the RayCluster acted on or replaced ("": a new one, named later)
    deletes: tuple[GroupPods, ...] = ()  # Pods the operator deletes
    creates: tuple[GroupPods, ...] = ()  # Pods the operator creates
    stale: tuple[GroupPods, ...] = ()  # Pods left running on the old template
    changed: tuple[str, ...] = ()  # the groups (and spec fields) whose change it is

    @property
    def key(self) -> str:
        """As :class:`~gitops_ray.types.ResourceKey` prints it: ``ray.io/Kind:ns/name``."""
        return f"ray.io/{self.kind}:{self.namespace}/{self.name}"

    def line(self) -> str:
        """``ray.io/RayCluster:ns/name: recreates 49 Pods: ...``."""
        return f"{self.key}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``-o json``, the status record)."""
        def groups(pods: tuple[GroupPods, ...]) -> list[dict[str, Any]]:
            return [{"group": g.group, "pods": g.pods} for g in pods]
        return {"key": self.key, "kind": self.kind, "namespace": self.namespace,
                "name": self.name, "effect": self.effect.value, "message": self.message,
                "cluster": self.cluster, "deletes": groups(self.deletes),
                "creates": groups(self.creates), "stale": groups(self.stale),
                "changed": list(self.changed), "operatorVersion": KUBERAY_VERSION}


Pods = Mapping[str, Sequence[Manifest]]
"""Live Pods by RayCluster name (those labelled ``ray.io/cluster=<name>``)."""


def clusters_of(live: Manifest | None) -> tuple[str, ...]:
    """The RayClusters whose Pods :func:`predict` needs for ``live`` (read them for it)."""
    if live is None:
        return ()
    kind, status = text(live.get("kind")), mapping(live.get("status"))
    if kind == "RayCluster":
        return (text(dig(live, "metadata", "name")),)
    if kind == "RayService":
        names = (text(dig(status, "activeServiceStatus", "rayClusterName")),
                 text(dig(status, "pendingServiceStatus", "rayClusterName")))
        return tuple(n for n in names if n)
    if kind == "RayJob":
        name = text(status.get("rayClusterName"))
        return (name,) if name else ()
    return ()


def predict(desired: Manifest | None, live: Manifest | None, pods: Pods, *,
            full: Manifest | None = None) -> Impact | None:
    """What the operator will do when ``live`` (with its ``status``) becomes ``desired``.

    ``desired``: the object as the sync will leave it (the server-side dry run's
    prediction); ``None`` (a prune) and kinds other than Ray's are not predicted.
    ``desired`` and ``live`` may both lack fields an ignore rule removed (the autoscaler's
    ``replicas``): ``full``, the whole live object, then gives the counts the sync keeps.
    """
    if desired is None:
        return None
    desired = with_kept_replicas(desired, full or live)
    live = with_kept_replicas(live, full) if live is not None else None
    kind = text(desired.get("kind"))
    if kind == "RayCluster":
        return _raycluster(desired, live, pods)
    if kind == "RayService":
        return _rayservice(desired, live, pods)
    if kind == "RayJob":
        return _rayjob(desired, live, pods)
    return None


CLUSTER_SPECS = {"RayCluster": ("spec",), "RayService": ("spec", "rayClusterConfig"),
                 "RayJob": ("spec", "rayClusterSpec")}
"""Where each Ray kind holds its RayClusterSpec."""


def with_kept_replicas(desired: Manifest, full: Manifest | None) -> Manifest:
    """``desired`` with live's ``replicas`` in each worker group that has none.

    A group without them in the prediction is one whose replicas an ignore rule removed
    (the sync keeps live's): the operator counts with live's.
    """
    path = CLUSTER_SPECS.get(text(desired.get("kind")), ())
    have = _groups(mapping(dig(full, *path))) if path and full is not None else {}
    if not have:
        return desired
    out = copy.deepcopy(desired)
    for group in objects(dig(out, *path, "workerGroupSpecs")):
        kept = have.get(text(group.get("groupName")), {}).get("replicas")
        if "replicas" not in group and kept is not None:
            group["replicas"] = kept
    return out


def _impact(desired: Manifest, effect: Effect, message: str, **parts: Any) -> Impact:
    meta = mapping(desired.get("metadata"))
    return Impact(text(desired.get("kind")), text(meta.get("namespace")),
                  text(meta.get("name")), effect, message, **parts)


# -- counting Pods -------------------------------------------------------------------------

def live_pods(pods: Iterable[Manifest]) -> tuple[GroupPods, ...]:
    """Pods not being deleted, by group (head first, then groups by name)."""
    counts: dict[str, int] = {}
    for pod in pods:
        meta = mapping(pod.get("metadata"))
        if meta.get("deletionTimestamp"):
            continue
        labels = mapping(meta.get("labels"))
        group = HEAD_GROUP if text(labels.get(NODE_TYPE_LABEL)) == "head" \
            else text(labels.get(GROUP_LABEL))
        if group:
            counts[group] = counts.get(group, 0) + 1
    return tuple(GroupPods(g, counts[g]) for g in sorted(counts, key=_head_first))


def _head_first(group: str) -> tuple[bool, str]:
    return group != HEAD_GROUP, group


def desired_pods(spec: Manifest) -> tuple[GroupPods, ...]:
    """The Pods the operator creates for ``spec``: the head and each group's desired count.

    ``GetWorkerGroupDesiredReplicas``: 0 for a suspended group, replicas (min when unset)
    clamped to min/max, times ``numOfHosts``. Groups with none are left out.
    """
    out = [GroupPods(HEAD_GROUP, 1)] if mapping(spec.get("headGroupSpec")) else []
    for group in objects(spec.get("workerGroupSpecs")):
        count = worker_count(group)
        if count:
            out.append(GroupPods(text(group.get("groupName")), count))
    return tuple(out)


def worker_count(group: Manifest) -> int:
    """``GetWorkerGroupDesiredReplicas`` of one worker group spec."""
    if group.get("suspend") is True:
        return 0
    low = number(group.get("minReplicas")) or 0
    high = number(group.get("maxReplicas"))
    replicas = number(group.get("replicas"))
    wanted = low if replicas is None or replicas < low else replicas
    if high is not None and wanted > high:
        wanted = high
    return max(wanted, 0) * max(number(group.get("numOfHosts")) or 1, 1)


def total(pods: Iterable[GroupPods]) -> int:
    return sum(g.pods for g in pods)


def said(pods: Sequence[GroupPods]) -> str:
    """``"49 Pods (1 head, 48 workers of gpu-a100)"``."""
    count = total(pods)
    noun = "Pod" if count == 1 else "Pods"
    return f"{count} {noun} ({', '.join(g.describe() for g in pods)})" if pods \
        else "no Pods"


# -- what changed, as the operator's hash sees it ------------------------------------------

def muted(spec: Manifest) -> Manifest:
    """``spec`` without what ``GenerateHashWithoutReplicasAndWorkersToDelete`` leaves out."""
    out = copy.deepcopy(mapping(spec))
    out.pop("upgradeStrategy", None)
    _mute_pod(mapping(out.get("headGroupSpec")))
    for group in objects(out.get("workerGroupSpecs")):
        for key in _MUTED_GROUP:
            group.pop(key, None)
        strategy = mapping(group.get("scaleStrategy"))
        strategy.pop("workersToDelete", None)
        if "scaleStrategy" in group and not strategy:
            group.pop("scaleStrategy")
        _mute_pod(group)
    return out


def _mute_pod(group: Manifest) -> None:
    pod_spec = mapping(dig(group, "template", "spec"))
    for key in _MUTED_POD:
        pod_spec.pop(key, None)


def changed_parts(desired: Manifest, live: Manifest) -> tuple[str, ...]:
    """Groups (``headgroup``, worker groups by name) and other spec fields that differ.

    Both are cluster specs, compared as :func:`muted` sees them: an empty result is a
    change the operator's hash does not see.
    """
    want, have = muted(desired), muted(live)
    out = []
    if want.get("headGroupSpec") != have.get("headGroupSpec"):
        out.append(HEAD_GROUP)
    wanted, had = _groups(want), _groups(have)
    out += [g for g in wanted if wanted[g] != had.get(g)]
    out += [g for g in had if g not in wanted]
    others = (set(want) | set(have)) - {"headGroupSpec", "workerGroupSpecs"}
    out += [f"spec.{k}" for k in sorted(others) if want.get(k) != have.get(k)]
    return tuple(out)


def _groups(spec: Manifest) -> dict[str, Manifest]:
    return {text(g.get("groupName")): g for g in objects(spec.get("workerGroupSpecs"))}


def _scaling(desired: Manifest, live: Manifest) -> list[str]:
    """``"gpu 3 → 5 workers"`` for each group both sides have whose desired count moves."""
    had = {text(g.get("groupName")): g for g in objects(live.get("workerGroupSpecs"))}
    out = []
    for group in objects(desired.get("workerGroupSpecs")):
        name = text(group.get("groupName"))
        if name in had and worker_count(group) != worker_count(had[name]):
            out.append(f"{name} {worker_count(had[name])} → {worker_count(group)} workers")
    return out


def _names(parts: Iterable[str]) -> str:
    return ", ".join(parts)


# -- RayCluster ----------------------------------------------------------------------------

def recreates(spec: Manifest) -> bool:
    """``upgradeStrategy.type: Recreate``: a spec change deletes every Pod."""
    return text(dig(spec, "upgradeStrategy", "type")) == "Recreate"


def _raycluster(desired: Manifest, live: Manifest | None, pods: Pods) -> Impact | None:
    want = mapping(desired.get("spec"))
    if live is None:
        made = desired_pods(want) if want.get("suspend") is not True else ()
        return _impact(desired, Effect.CREATES, f"creates {said(made)}", creates=made)
    name = text(dig(live, "metadata", "name"))
    have, running = mapping(live.get("spec")), live_pods(pods.get(name, ()))
    suspension = _suspension(desired, want, have, running, name)
    if suspension is not None:
        return suspension
    changed = changed_parts(want, have)
    if changed and recreates(want) and _has_recreate_hash(pods.get(name, ())):
        made = desired_pods(want)
        running = _in_order(running, made)
        what = f"all {said(made)}" if running == made else \
            f"{said(running)}, then {said(made)},"
        return _impact(desired, Effect.RECREATES,
                       f"recreates {what} from the new spec (upgradeStrategy Recreate; "
                       f"changed: {_names(changed)})",
                       cluster=name, deletes=running, creates=made, changed=changed)
    return _kept(desired, want, have, running=running, changed=changed, name=name)


def _in_order(pods: tuple[GroupPods, ...], spec_order: Sequence[GroupPods]
              ) -> tuple[GroupPods, ...]:
    """``pods`` in the order of ``spec_order``'s groups (others after, as they were)."""
    rank = {g.group: i for i, g in enumerate(spec_order)}
    return tuple(sorted(pods, key=lambda g: rank.get(g.group, len(rank))))


def _has_recreate_hash(pods: Sequence[Manifest]) -> bool:
    """Whether the head Pod carries the hash the operator compares (else: nothing to do)."""
    return any(text(dig(p, "metadata", "labels", NODE_TYPE_LABEL)) == "head"
               and text(dig(p, "metadata", "annotations", RECREATE_HASH))
               and not dig(p, "metadata", "deletionTimestamp") for p in pods)


def _suspension(desired: Manifest, want: Manifest, have: Manifest,
                running: tuple[GroupPods, ...], name: str) -> Impact | None:
    """A cluster suspended or resumed by the change, or one that stays suspended."""
    was, will = have.get("suspend") is True, want.get("suspend") is True
    if will and not was:
        return _impact(desired, Effect.SUSPENDS, f"suspends it: deletes {said(running)}",
                       cluster=name, deletes=running)
    if was and not will:
        made = desired_pods(want)
        return _impact(desired, Effect.RESUMES, f"resumes it: creates {said(made)}",
                       cluster=name, creates=made)
    if was:
        return _impact(desired, Effect.NOTHING,
                       "suspended: no Pods run; the change applies when it resumes",
                       cluster=name)
    return None


def _kept(desired: Manifest, want: Manifest, have: Manifest, *,
          running: tuple[GroupPods, ...], changed: tuple[str, ...], name: str) -> Impact:
    """No recreation: groups' running Pods keep their template; replica changes land."""
    by_group = {g.group: g for g in running}
    stale = tuple(by_group[g] for g in changed if g in by_group)
    scaling = _scaling(want, have)
    parts = []
    if stale:
        parts.append(f"leaves {said(stale)} on the old template (rollout pending: without "
                     "upgradeStrategy Recreate KubeRay replaces no running Pod)")
    new = set(_groups(want)) - set(_groups(have))
    added = [g for g in desired_pods(want) if g.group in new]
    if added:
        parts.append(f"creates {said(added)}")
    if scaling:
        parts.append(f"scales {_names(scaling)}")
    rest = [c for c in changed if c not in by_group and c not in {g.group for g in added}]
    if rest:
        parts.append(f"no running Pod changes for {_names(rest)}")
    effect = Effect.ROLLOUT_PENDING if stale else Effect.SCALES if scaling or added \
        else Effect.NOTHING
    message = "; ".join(parts) or "no running Pod changes (metadata or ignored fields)"
    return _impact(desired, effect, message, cluster=name, stale=stale,
                   creates=tuple(added), changed=changed)


# -- RayService ----------------------------------------------------------------------------

def zero_downtime(spec: Manifest) -> bool:
    """``isZeroDowntimeUpgradeEnabled`` with v1.6.1's defaults (gate off, env unset)."""
    kind = dig(spec, "upgradeStrategy", "type")
    return kind is None or text(kind) == "NewCluster"


def _rayservice(desired: Manifest, live: Manifest | None, pods: Pods) -> Impact:
    want = mapping(desired.get("spec"))
    config = mapping(want.get("rayClusterConfig"))
    if live is None:
        made = desired_pods(config)
        return _impact(desired, Effect.CREATES, f"creates a RayCluster with {said(made)}",
                       creates=made)
    status, have = mapping(live.get("status")), mapping(live.get("spec"))
    active = text(dig(status, "activeServiceStatus", "rayClusterName"))
    pending = text(dig(status, "pendingServiceStatus", "rayClusterName"))
    target = pending or active
    old = mapping(have.get("rayClusterConfig"))
    running = _in_order(live_pods(pods.get(target, ())), desired_pods(old)) if target else ()
    if not target:
        return _impact(desired, Effect.NOTHING, "no RayCluster yet: the operator makes its "
                       "first one from the new spec")
    if (config.get("suspend") is True) != (old.get("suspend") is True):
        effect = Effect.SUSPENDS if config.get("suspend") is True else Effect.RESUMES
        return _impact(desired, effect, f"{effect.value.lower()} RayCluster {target} in "
                       f"place ({said(running)} now)", cluster=target,
                       deletes=running if effect == Effect.SUSPENDS else ())
    changed = changed_parts(config, old)
    if not changed:
        return _service_in_place(desired, want, have, config=config, old=old, target=target)
    appended = _appended(config, old)
    if appended is not None:
        return _impact(desired, Effect.IN_PLACE,
                       f"updates RayCluster {target} in place: worker groups added at the "
                       f"end, creates {said(appended)}", cluster=target, creates=appended,
                       changed=changed)
    return _upgrade(desired, want, config, target=target, is_pending=bool(pending),
                    running=running, changed=changed)


def _upgrade(desired: Manifest, want: Manifest, config: Manifest, *, target: str,
             is_pending: bool, running: tuple[GroupPods, ...],
             changed: tuple[str, ...]) -> Impact:
    strategy = text(dig(want, "upgradeStrategy", "type")) or "unset"
    if not zero_downtime(want):
        why = ("needs the operator's RayServiceIncrementalUpgrade feature gate (off by "
               "default)") if strategy == "NewClusterWithIncrementalUpgrade" else "says so"
        return _impact(desired, Effect.IGNORED,
                       f"no upgrade (upgradeStrategy {strategy} {why}): RayCluster {target} "
                       f"keeps its {said(running)} on the old config (changed: "
                       f"{_names(changed)})", cluster=target, changed=changed)
    made = desired_pods(config)
    delay = number(want.get("rayClusterDeletionDelaySeconds"))
    later = f"{DELETION_DELAY if delay is None else delay}s"
    if is_pending:
        message = (f"replaces pending RayCluster {target} (not serving yet) with a new one: "
                   f"creates {said(made)}; {target}'s {said(running)} are deleted after "
                   f"{later} (changed: {_names(changed)})")
        effect = Effect.REPLACES_PENDING
    else:
        message = (f"starts a new RayCluster beside {target} (zero-downtime upgrade, "
                   f"upgradeStrategy {strategy}): creates {said(made)}; {target}'s "
                   f"{said(running)} are deleted {later} after the new one serves "
                   f"(changed: {_names(changed)})")
        effect = Effect.NEW_CLUSTER
    return _impact(desired, effect, message, cluster=target, creates=made, deletes=running,
                   changed=changed)


def _appended(config: Manifest, old: Manifest) -> tuple[GroupPods, ...] | None:
    """The new groups' Pods when the change only appends worker groups, else ``None``."""
    groups, had = objects(config.get("workerGroupSpecs")), objects(old.get("workerGroupSpecs"))
    if len(groups) <= len(had):
        return None
    prefix = {**config, "workerGroupSpecs": groups[:len(had)]}
    if changed_parts(prefix, old):
        return None
    return tuple(GroupPods(text(g.get("groupName")), worker_count(g))
                 for g in groups[len(had):] if worker_count(g))


def _service_in_place(desired: Manifest, want: Manifest, have: Manifest, *,
                      config: Manifest, old: Manifest, target: str) -> Impact:
    """The cluster's hash is unchanged: no Pod changes; Serve's config may move."""
    parts = []
    if want.get("serveConfigV2") != have.get("serveConfigV2"):
        parts.append(f"deploys the new serveConfigV2 to RayCluster {target}'s Serve "
                     "applications (no Pod changes)")
    if _scaling(config, old):
        parts.append(f"ignores the replica changes ({_names(_scaling(config, old))}): "
                     f"KubeRay does not update RayCluster {target} when only replicas, "
                     "min/max, tolerations or scheduling gates change")
    effect = Effect.IN_PLACE if want.get("serveConfigV2") != have.get("serveConfigV2") \
        else Effect.IGNORED if parts else Effect.NOTHING
    return _impact(desired, effect, "; ".join(parts) or "no running Pod changes",
                   cluster=target)


# -- RayJob --------------------------------------------------------------------------------

def _rayjob(desired: Manifest, live: Manifest | None, pods: Pods) -> Impact:
    want = mapping(desired.get("spec"))
    config = mapping(want.get("rayClusterSpec"))
    made = desired_pods(config) if config and not want.get("clusterSelector") else ()
    if live is None:
        return _impact(desired, Effect.CREATES, f"creates a RayCluster with {said(made)} "
                       "and runs the job", creates=made)
    status, have = mapping(live.get("status")), mapping(live.get("spec"))
    phase = text(status.get("jobDeploymentStatus"))
    cluster = text(status.get("rayClusterName"))
    running = live_pods(pods.get(cluster, ())) if cluster else ()
    suspend, was = want.get("suspend") is True, have.get("suspend") is True
    if phase in _STARTED and suspend and not was:
        return _impact(desired, Effect.SUSPENDS,
                       f"suspends the job: deletes RayCluster {cluster} ({said(running)}) "
                       "and its submitter", cluster=cluster, deletes=running)
    if phase == "Suspended" and was and not suspend:
        return _impact(desired, Effect.RESUMES,
                       f"runs the job again from the new spec: creates a RayCluster with "
                       f"{said(made)}", creates=made)
    if phase in ("", "New", "Retrying"):
        what = "retrying: its next attempt" if phase == "Retrying" else "not started yet: it"
        return _impact(desired, Effect.NOTHING, f"{what} is made from the new spec")
    return _job_kept(desired, want, have, phase=phase, cluster=cluster, running=running)


def _job_kept(desired: Manifest, want: Manifest, have: Manifest, *, phase: str,
              cluster: str, running: tuple[GroupPods, ...]) -> Impact:
    changed = tuple(k for k in sorted(set(want) | set(have)) if want.get(k) != have.get(k))
    later = tuple(k for k in changed if k in _LATER_JOB_FIELDS)
    if phase in _FINISHED:
        message = (f"the job is {phase}: KubeRay does not run it again (a new run needs a "
                   "new RayJob: delete it, or sync with Replace=true)")
    else:
        message = (f"the job is {phase}: KubeRay disregards spec changes of a started job; "
                   f"RayCluster {cluster} ({said(running)}) and the job keep the old spec")
    if later:
        message += f"; read at its next step: {_names(later)}"
    return _impact(desired, Effect.IGNORED, message, cluster=cluster,
                   changed=tuple(f"spec.{k}" for k in changed))
