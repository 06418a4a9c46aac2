"""Changes git makes that the API server or the KubeRay operator will refuse, said before a sync.

Two places refuse a Ray object, and neither tells a GitOps engine in time:

* **The API server**, by the CRD's CEL rules. KubeRay's ``spec.managedBy`` carries
  ``self == oldSelf`` ("the managedBy field is immutable", a ``+kubebuilder:validation:
  XValidation`` marker in ``ray-operator/apis/ray/v1/*_types.go``, compiled into
  ``config/crd/bases``); the operator and its optional webhook do not check it. A rule of
  this kind is a transition rule: it runs only when both the old and the new object set the
  field, so adding or removing ``managedBy`` is accepted. The comparison's server-side dry
  run meets these rules first; :func:`server_refusals` turns that 422 answer into
  refusals (the API server's own words, values cut by
  :func:`gitops_ray.redact.without_values`).
* **The operator**, which accepts every write and then refuses to act on it: a Warning Event
  (``InvalidRayClusterSpec``, ...) or a RayJob/RayService ``ValidationFailed`` status, nothing
  else (``ray-operator/controllers/ray/utils/validation.go``). :func:`operator_refusals`
  checks the rules of :data:`RULES_VERSION` that concern a field git sets, in a pure function:
  ``upgradeStrategy`` on a RayCluster a RayJob or RayService creates (the operator copies
  ``spec.rayClusterSpec`` / ``spec.rayClusterConfig`` into it and labels it
  ``ray.io/originated-from-crd``; ``ValidateRayClusterUpgradeOptions`` refuses it), a
  RayService upgrade type outside its three, a suspended RayJob that does not shut down
  after its job, a RayService head Service with a name, a suspended worker group under the
  autoscaler, ``idleTimeoutSeconds`` without autoscaler v2. A RayCronJob's job template is
  checked as the RayJob it becomes (``ValidateRayCronJobSpec``).

An operator rule counts only where git changes the field it is about (or creates the
object): a value live already has was refused already, and health says so (the Event).
Messages name the object and the field, never a value of git's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitops_ray.redact import without_values
from gitops_ray.types import Manifest, ResourceKey

if TYPE_CHECKING:
    from gitops_ray.diff.compare import ResourceDiff

RULES_VERSION = "v1.6.2"
"""The KubeRay release whose ``validation.go`` :func:`operator_refusals` follows."""

API_SERVER = "the API server"
OPERATOR = f"the KubeRay operator ({RULES_VERSION} rules)"
ORIGIN_LABEL = "ray.io/originated-from-crd"  # utils.RayOriginatedFromCRDLabelKey
SERVICE_UPGRADES = ("NewClusterWithIncrementalUpgrade", "NewCluster", "None")
MAX_CAUSES = 8
_LEAD_IN = re.compile(r"^\w+(?: \w+)? value \(withheld\): ")

Steps = tuple[str, ...]


@dataclass(frozen=True)
class Refusal:
    """One field of one object that a sync would have refused, and by whom."""

    key: ResourceKey
    field: str  # e.g. "spec.managedBy"
    why: str
    by: str  # API_SERVER or OPERATOR

    def __str__(self) -> str:
        return f"{self.key}: {self.field}: {self.why} (refused by {self.by})"

    def as_dict(self) -> dict[str, str]:
        """``diff -o json``'s record of it."""
        return {"field": self.field, "message": self.why, "by": self.by}


def server_refusals(key: ResourceKey, details: Mapping[str, Any], message: str
                    ) -> tuple[Refusal, ...]:
    """The refusals in a 422 ``Status`` of a dry run (``details.causes``, else its message).

    ``message`` and the causes' messages are the value-free ones
    (:func:`gitops_ray.redact.without_values` has run on ``message``).
    """
    causes = [c for c in details.get("causes") or [] if isinstance(c, Mapping)]
    out = [Refusal(key, str(c.get("field") or "-"),
                   _plain(without_values(str(c.get("message") or ""))), API_SERVER)
           for c in causes[:MAX_CAUSES]]
    return tuple(out) or (Refusal(key, "-", message, API_SERVER),)


def _plain(text: str) -> str:
    """A cause's message without the ``Invalid value (withheld): `` lead-in."""
    return _LEAD_IN.sub("", text, count=1)


def operator_refusals(desired: Manifest, live: Manifest | None) -> tuple[Refusal, ...]:
    """What the operator (:data:`RULES_VERSION`) will refuse of ``desired`` that git changes."""
    group, _, _ = str(desired.get("apiVersion", "")).partition("/")
    check = _BY_KIND.get(str(desired.get("kind", ""))) if group == "ray.io" else None
    if check is None:
        return ()
    key = ResourceKey.of(desired)
    return tuple(Refusal(key, _dotted(path), why, OPERATOR)
                 for path, why in check(desired, live)
                 if live is None or _at(desired, path) != _at(live, path))


def with_refusals(diff: ResourceDiff, refused: tuple[Refusal, ...]) -> ResourceDiff:
    """``diff`` carrying ``refused`` (the same object when there are none)."""
    return dataclasses.replace(diff, refused=refused) if refused else diff


Found = Iterator[tuple[Steps, str]]


def _raycluster(obj: Manifest, live: Manifest | None) -> Found:
    labels = {**((live or {}).get("metadata") or {}).get("labels", {}),
              **(obj.get("metadata") or {}).get("labels", {})}
    creator = str(labels.get(ORIGIN_LABEL, ""))
    if creator in ("RayJob", "RayService"):
        yield from _upgrade_in_child(obj, ("spec",), creator)
    yield from _cluster_spec(obj, ("spec",))


def _rayjob(obj: Manifest, live: Manifest | None, root: Steps = ("spec",)) -> Found:
    spec = _at(obj, root) or {}
    if spec.get("suspend") is True and not spec.get("shutdownAfterJobFinishes"):
        yield (*root, "suspend"), ("a RayJob with shutdownAfterJobFinishes false is not "
                                   "allowed to be suspended")
    if isinstance(spec.get("rayClusterSpec"), Mapping):
        yield from _upgrade_in_child(obj, (*root, "rayClusterSpec"), "RayJob")
        yield from _cluster_spec(obj, (*root, "rayClusterSpec"))


def _raycronjob(obj: Manifest, live: Manifest | None) -> Found:
    for path, why in _rayjob(obj, live, ("spec", "jobTemplate")):
        yield path, f"invalid RayJob template: {why}"


def _rayservice(obj: Manifest, live: Manifest | None) -> Found:
    kind = _at(obj, ("spec", "upgradeStrategy", "type"))
    if kind is not None and kind not in SERVICE_UPGRADES:
        yield ("spec", "upgradeStrategy", "type"), ("valid options are "
                                                    + ", ".join(SERVICE_UPGRADES))
    cluster = ("spec", "rayClusterConfig")
    if _at(obj, (*cluster, "headGroupSpec", "headService", "metadata", "name")):
        yield (*cluster, "headGroupSpec", "headService", "metadata", "name"), "should not be set"
    if isinstance(_at(obj, cluster), Mapping):
        yield from _upgrade_in_child(obj, cluster, "RayService")
        yield from _cluster_spec(obj, cluster)


def _upgrade_in_child(obj: Manifest, cluster: Steps, creator: str) -> Found:
    if _at(obj, (*cluster, "upgradeStrategy", "type")) is not None:
        yield (*cluster, "upgradeStrategy"), (f"upgradeStrategy cannot be set when RayCluster "
                                              f"is created by {creator}")


def _cluster_spec(obj: Manifest, cluster: Steps) -> Found:
    """``ValidateRayClusterSpec``'s rules about the autoscaler and worker groups."""
    spec = _at(obj, cluster) or {}
    autoscaling = spec.get("enableInTreeAutoscaling") is True
    v2 = _at(spec, ("autoscalerOptions", "version")) == "v2" or _v2_env(spec)
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        if not isinstance(group, Mapping):
            continue
        here = (*cluster, "workerGroupSpecs", f"[{index}]")
        name = str(group.get("groupName", index))
        if autoscaling and group.get("suspend") is True:
            yield (*here, "suspend"), (f"worker group {name} cannot be suspended with "
                                       "Autoscaler enabled")
        if group.get("idleTimeoutSeconds") is not None and not v2:
            yield (*here, "idleTimeoutSeconds"), (f"worker group {name}: idleTimeoutSeconds "
                                                  "is set, but autoscaler v2 is not enabled")


def _v2_env(spec: Mapping[str, Any]) -> bool:
    containers = _at(spec, ("headGroupSpec", "template", "spec", "containers")) or [{}]
    env = containers[0].get("env") or [] if isinstance(containers[0], Mapping) else []
    return any(isinstance(e, Mapping) and e.get("name") == "RAY_enable_autoscaler_v2"
               and e.get("value") in ("1", "true") for e in env)


def _dotted(steps: Steps) -> str:
    """``spec.workerGroupSpecs[0].suspend`` from its steps."""
    return ".".join(steps).replace(".[", "[")


def _at(node: Any, steps: Steps) -> Any:
    for step in steps:
        if step.startswith("[") and isinstance(node, list):
            index = int(step[1:-1])
            node = node[index] if index < len(node) else None
        elif isinstance(node, Mapping):
            node = node.get(step)
        else:
            return None
    return node


_BY_KIND = {"RayCluster": _raycluster, "RayJob": _rayjob, "RayService": _rayservice,
            "RayCronJob": _raycronjob}
