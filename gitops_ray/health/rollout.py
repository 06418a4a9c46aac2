"""Pods of a RayCluster that still run an older template ("Synced, rollout pending").

Why this exists: KubeRay does not replace running Pods when a group's pod template
changes unless ``spec.upgradeStrategy.type: Recreate`` (v1.6+); by default a template
edit reaches only Pods created later. Argo CD and the RayCluster's status both look
converged (Synced, Healthy) while the Pods run the old template.

What KubeRay marks (checked in the v1.6.1 source and on the e2e stack): only the *head*
Pod gets ``ray.io/upgrade-strategy-recreate-hash``, a SHA-1 of Go's JSON encoding of the
whole typed ``RayClusterSpec`` without replicas, min/max, ``workersToDelete``,
tolerations and scheduling gates. Worker Pods carry no hash, and the one hash covers all
groups at once, so it cannot say which group is behind; reproducing Go's typed encoding
(field order, ``omitempty``) from the untyped object is not feasible either. So this
module computes its own comparable fingerprint per group instead.

The fingerprint: for each template field that matters and that the operator and the
API server leave as written, the value the template asks for, compared with the Pod's
value at the same place. Fields: each container's (matched by name) ``image`` and
``resources`` (quantities compared by amount, since the API server canonicalises Pod
quantities), the template's ``env`` entries with a plain ``value`` (the operator adds
its own variables, so the template's must be a subset), the template's labels and
annotations (a subset: the operator adds its own), and ``nodeSelector``,
``serviceAccountName`` and ``priorityClassName`` where the template sets them (the
operator gives an autoscaling head its own ServiceAccount, the API server ``default``).
Left out on purpose: ``command`` and ``args`` (the operator rewrites the Ray
container's into ``ray start``), tolerations and scheduling gates (Kueue injects them;
KubeRay's own hash leaves them out too), and the group's replicas, min/max and
``workersToDelete`` (not part of the template), so an autoscaler-only change never shows
as a pending rollout. A removed env var, label, annotation or Pod-level field is not
detected (the subset rule cannot tell it from one the operator or API server added).

Pure and total like the rest of ``gitops_ray.health``: Pods come from the caller (the
controller's watch cache); malformed input is ignored, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from gitops_ray.health.fields import dig, mapping, objects, text
from gitops_ray.types import Manifest

CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"
HEAD_GROUP = "headgroup"
"""The ``ray.io/group`` value KubeRay gives the head Pod."""

_POD_FIELDS = ("nodeSelector", "serviceAccountName", "priorityClassName")


@dataclass(frozen=True)
class GroupRollout:
    """A group with Pods on an older template: ``stale`` of its ``total`` live Pods."""

    group: str
    stale: int
    total: int

    def describe(self) -> str:
        return f"group {self.group} {self.stale}/{self.total} pods on an older template"


def pending_rollouts(cluster: Manifest, pods: Sequence[Manifest]) -> list[GroupRollout]:
    """Groups of ``cluster`` whose live Pods do not match the group's template.

    ``pods`` may be any Pods; only those labelled ``ray.io/cluster=<name>`` in the
    cluster's namespace and not being deleted count. Groups in spec order, head first;
    groups without stale Pods are left out.
    """
    meta = mapping(cluster.get("metadata"))
    name, namespace = text(meta.get("name")), text(meta.get("namespace"))
    templates: dict[str, Manifest] = {}
    head = mapping(dig(cluster, "spec", "headGroupSpec", "template"))
    if head:
        templates[HEAD_GROUP] = head
    for group in objects(dig(cluster, "spec", "workerGroupSpecs")):
        group_name = text(group.get("groupName"))
        if group_name and group_name not in templates:
            templates[group_name] = mapping(group.get("template"))
    counts: dict[str, list[int]] = {g: [0, 0] for g in templates}
    for pod in pods:
        labels = mapping(dig(pod, "metadata", "labels"))
        if (text(labels.get(CLUSTER_LABEL)) != name or dig(pod, "metadata", "deletionTimestamp")
                or text(dig(pod, "metadata", "namespace")) not in ("", namespace)):
            continue
        group_name = _group_of(labels)
        if group_name not in templates:
            continue
        counts[group_name][1] += 1
        if not matches_template(templates[group_name], pod):
            counts[group_name][0] += 1
    return [GroupRollout(g, stale, total) for g, (stale, total) in counts.items() if stale]


def _group_of(labels: Manifest) -> str:
    if text(labels.get(NODE_TYPE_LABEL)) == "head":
        return HEAD_GROUP
    return text(labels.get(GROUP_LABEL))


PENDING = "rollout pending: "
"""How a health message introduces the groups behind their template."""


def rollout_message(rollouts: Sequence[GroupRollout]) -> str:
    """``"rollout pending: group gpu 2/3 pods on an older template; ..."`` or ``""``."""
    if not rollouts:
        return ""
    return PENDING + "; ".join(r.describe() for r in rollouts)


def pending_part(message: str) -> str:
    """The groups a health message reports behind their template (after ``PENDING``)."""
    _, found, rest = message.partition(PENDING)
    return rest if found else ""


def matches_template(template: Manifest, pod: Manifest) -> bool:
    """Whether ``pod`` carries every value of ``template`` that the fingerprint covers."""
    return template_fingerprint(template) == pod_fingerprint(template, pod)


def template_fingerprint(template: Manifest) -> Manifest:
    """The values of the fields that matter, as the template asks for them."""
    return _fingerprint(template, template)


def pod_fingerprint(template: Manifest, pod: Manifest) -> Manifest:
    """The Pod's values at the places :func:`template_fingerprint` reads."""
    return _fingerprint(template, pod)


def _fingerprint(template: Manifest, source: Manifest) -> Manifest:
    t_meta, s_meta = mapping(template.get("metadata")), mapping(source.get("metadata"))
    t_spec, s_spec = mapping(template.get("spec")), mapping(source.get("spec"))
    result: dict[str, object] = {}
    for key in ("labels", "annotations"):
        wanted, have = mapping(t_meta.get(key)), mapping(s_meta.get(key))
        result[key] = {k: have.get(k) for k in sorted(wanted)}
    for key in _POD_FIELDS:  # only where the template sets them: the operator and the
        if t_spec.get(key):  # API server fill them in (the head's autoscaler account)
            result[key] = s_spec.get(key)
    for kind in ("initContainers", "containers"):
        have_by_name = {text(c.get("name")): c for c in objects(s_spec.get(kind))}
        result[kind] = [_container(c, have_by_name.get(text(c.get("name")), {}))
                        for c in objects(t_spec.get(kind))]
    return result


def _container(wanted: Manifest, have: Manifest) -> Manifest:
    env = {text(e.get("name")): e.get("value") for e in objects(have.get("env"))}
    plain = sorted(text(e.get("name")) for e in objects(wanted.get("env")) if "value" in e)
    resources = mapping(have.get("resources"))
    return {
        "name": text(wanted.get("name")),
        "image": have.get("image"),
        "env": {n: env.get(n) for n in plain},
        "resources": {kind: _amounts(mapping(resources.get(kind)))
                      for kind in ("limits", "requests")},
    }


def _amounts(values: Manifest) -> dict[str, str]:
    return {k: _amount(v) for k, v in sorted(values.items())}


_SUFFIXES: dict[str, Decimal | int] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def _amount(value: object) -> str:
    """A resource quantity as a canonical number ("1000m", "1" → "1"); else as written."""
    raw = str(value).strip()
    match = _QUANTITY.match(raw)
    if not match:
        return raw
    try:
        amount = Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2) or ""])
    except InvalidOperation:
        return raw
    return format(amount.normalize(), "f")
