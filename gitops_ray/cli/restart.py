"""``gitops-ray restart``: restart an app's Ray Pods without a git commit.

The old Ray operator's "add an annotation and re-apply" becomes one command that needs no
git access: the app's RayClusters come from its record's inventory (in
``--control-namespace``, as ``status`` reads it), the chosen Pods are deleted and the
KubeRay operator recreates them (see :mod:`gitops_ray.sync.restart` for why that is the
mechanism and why the controller never reverts it). All selected Pods of a RayCluster go
at once, head first, as KubeRay's own ``upgradeStrategy: Recreate`` deletes them; there
is no rolling mode, because a Ray worker group is not a set of interchangeable replicas:
the tasks and actors of a deleted worker fail whenever it goes.

``--wait`` then waits until every restarted group is back (none of the deleted Pods left,
as many Ready Pods as KubeRay wants; :func:`gitops_ray.sync.restartplan.replaced`).

Exit 0 when every chosen Pod was deleted (or was already gone) and, with ``--wait``, came
back within ``--timeout``; 2 otherwise; a name that
matches no app, RayCluster or worker group is a one-line error (exit 2) suggesting the
closest one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import click

from gitops_ray.cli.common import (
    EXIT_ERROR,
    CliCommand,
    argocd_options,
    check_known,
    kube_options,
)
from gitops_ray.cli.destinations import Destinations, recorded_destination
from gitops_ray.kube import Kube
from gitops_ray.sync.restart import (
    RestartResult,
    cluster_pods,
    dry_run,
    is_replaced,
    load_clusters,
    restart,
)
from gitops_ray.sync.restartplan import (
    RestartPlan,
    check_groups,
    plan_restart,
    select_clusters,
)
from gitops_ray.types import Manifest

POLL_SECONDS = 1.0
HELP = """Restart the Ray Pods of APP's RayClusters (all of them, or the RAYCLUSTERs named).

\b
How: the chosen Pods are deleted and the KubeRay operator creates them again from
the group's current template, to the same replicas. Nothing in git or in the
RayCluster's spec changes (no commit, no replicas change, so the autoscaler is not
fought); the request is recorded as the annotation gitops-ray.io/restartedAt
(field manager gitops-ray-restart), which gitops-ray never treats as drift, and as an
Event on the RayCluster.

\b
Without --group every worker group and the head restart; --group G (repeatable)
restarts only those groups' workers, --head adds the head. The head goes first, then
the workers, all at once (no rolling restart). Pods the autoscaler is already
removing (workersToDelete) are left alone. RayJobs and RayServices own their
RayClusters and are refused. --wait waits until the restarted groups have their
Ready Pods again (as many as KubeRay wants now).

Needs: pods list and delete, rayclusters get and patch, events create (in the
RayClusters' namespaces), and list of ConfigMaps in --control-namespace.
"""


@click.command("restart", cls=CliCommand, help=HELP)
@kube_options
@argocd_options
@click.option("--group", "groups", multiple=True, metavar="G",
              help="Only this worker group's Pods (repeatable).")
@click.option("--head/--no-head", default=None,
              help="Restart the head Pod too  [default: --head without --group, "
                   "--no-head with it].")
@click.option("--dry-run", "dry", is_flag=True, help="Print the Pods that would be deleted; "
                                              "change nothing.")
@click.option("--wait", is_flag=True, help="Wait until the restarted groups have their Ready "
                                           "Pods again.")
@click.option("--timeout", default=300.0, show_default=True, type=float,
              help="Seconds to --wait.")
@click.argument("app")
@click.argument("clusters", nargs=-1, metavar="[RAYCLUSTER]...")
def restart_command(app: str, clusters: tuple[str, ...], *, groups: tuple[str, ...],
                    head: bool | None, dry: bool, wait: bool, timeout: float,
                    **opts: Any) -> None:
    destinations = Destinations(opts)
    records = destinations.store.list_apps()
    check_known([app], records)
    kube = destinations.kube(recorded_destination(records[app].app_status))  # the app's cluster
    entries = select_clusters(app, records[app].inventory, clusters)
    live = load_clusters(kube, app, entries)
    check_groups(groups, live)
    with_head = head if head is not None else not groups
    plans = [p for p in (_plan(kube, c, groups=groups, head=with_head) for c in live) if p]
    results: list[RestartResult] = []  # every refusal above came before the first write
    for cluster, plan in plans:
        results.append(dry_run(plan) if dry else restart(kube, plan, cluster))
        _report(app, results[-1], dry=dry)
    failed = not all(r.ok for r in results)
    if wait and not dry and not failed:
        failed = not _wait(kube, results, timeout)
    sys.exit(EXIT_ERROR if failed else 0)


def _plan(kube: Kube, cluster: Manifest, *, groups: tuple[str, ...],
          head: bool) -> tuple[Manifest, RestartPlan] | None:
    """One RayCluster's plan; ``None`` when it has none of the groups and no head was asked."""
    plan = plan_restart(cluster, cluster_pods(kube, cluster), groups=groups, head=head)
    if not plan.groups and not plan.head:
        key = plan.cluster
        click.secho(f"RayCluster {key.namespace}/{key.name}: none of the groups; skipped",
                    err=True)
        return None
    return cluster, plan


def _wait(kube: Kube, results: Sequence[RestartResult], timeout: float) -> bool:
    """Poll until every restart is over; ``False`` (and a message) on timeout."""
    deadline = time.monotonic() + timeout
    pending = list(results)
    while pending := [r for r in pending if not is_replaced(kube, r.plan)]:
        if time.monotonic() > deadline:
            names = ", ".join(f"{r.plan.cluster.namespace}/{r.plan.cluster.name}"
                              for r in pending)
            click.secho(f"timed out after {timeout:.0f}s waiting for RayCluster {names} "
                        "to have its Ready Pods again", fg="red", err=True)
            return False
        time.sleep(POLL_SECONDS)
    click.secho("every restarted group has its Ready Pods again", fg="green", err=True)
    return True


def _report(app: str, result: RestartResult, *, dry: bool) -> None:
    key = result.plan.cluster
    where = f"RayCluster {key.namespace}/{key.name}"
    for outcome in result.outcomes:
        click.echo("\t".join([app, f"{key.namespace}/{key.name}", outcome.pod.group,
                              outcome.pod.name, outcome.action.value,
                              *([outcome.message] if outcome.message else [])]))
    if result.error:
        click.secho(f"{where}: not restarted: {result.error}", fg="red", err=True)
    elif not result.ok:
        click.secho(f"{where}: restart incomplete: {result.plan.summary()}", fg="red",
                    err=True)
    else:
        done = "would restart" if dry else "restarted"
        click.secho(f"{where}: {done} {result.plan.summary()}", fg="green", err=True)


COMMANDS = [restart_command]
