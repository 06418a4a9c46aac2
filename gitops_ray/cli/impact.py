"""How ``diff``, ``sync --dry-run`` and ``get`` say what the operator will do with a change.

One wording for the three commands (:mod:`gitops_ray.health.impact` decides what it is):
a line per changed Ray object, ``impact: ray.io/RayCluster:ns/name: recreates 49 Pods
(1 head, 48 workers of gpu-a100), ...``. ``diff`` prints it on stderr after the diff
(stdout stays a diff) and as ``impact`` on each resource in ``-o json``; ``sync
--dry-run`` after each app's results; ``get`` as ``Impact`` rows of the summary, from the
record the controller wrote (``impact`` in ``-o json``/``yaml``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

from gitops_ray.health.impact import Effect, Impact

LOUD = frozenset({Effect.RECREATES, Effect.NEW_CLUSTER, Effect.REPLACES_PENDING,
                  Effect.SUSPENDS})
"""Effects that delete running Pods (or start a second cluster): said in red, not yellow."""
PREFIX = "impact: "


def impact_text(impact: Impact) -> str:
    return PREFIX + impact.line()


def print_impacts(impacts: Iterable[Impact]) -> None:
    """On stderr, a line each."""
    for impact in impacts:
        click.secho(impact_text(impact), fg="red" if impact.effect in LOUD else "yellow",
                    err=True)


def with_impacts(records: list[dict[str, Any]],
                 impacts: Sequence[Impact]) -> list[dict[str, Any]]:
    """``-o json``: each Ray resource's record with its ``impact`` (when there is one)."""
    by_key = {i.key: i for i in impacts}
    for record in records:
        impact = by_key.get(str(record.get("key")))
        if impact is not None:
            record["impact"] = impact.as_dict()
    return records


def recorded_lines(impacts: Iterable[Mapping[str, Any]]) -> list[str]:
    """``key: message`` of each impact an app's record holds (:attr:`AppStatus.impacts`)."""
    out = []
    for entry in impacts:
        if entry.get("key") and entry.get("message"):
            out.append(f"{entry['key']}: {entry['message']}")
    return out
