"""``gitops-ray delete``: stop managing apps, like ``argocd app delete``.

The Application itself lives in git, so deleting it there is the real deletion (and the
controller then follows its resources finalizer). This command is for the apps the CLI
synced without a controller, or a controller whose source is gone: with ``--cascade``
(the default, as in argocd) the app's objects are deleted by inventory with prune's
safety (tracking id, ``uid`` precondition, ``Delete=false``), with ``--no-cascade`` they
are orphaned; either way the app's record goes, so ``status`` stops listing it. Exit 0 when
every app was deleted, 2 otherwise (what could not be deleted stays in the record).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
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
from gitops_ray.reconcile.destinations import ClusterUnavailable
from gitops_ray.sync.teardown import Teardown, delete_app


@click.command("delete", cls=CliCommand)
@kube_options
@argocd_options
@click.option("--cascade/--no-cascade", default=True, show_default=True,
              help="Delete the apps' objects too (else leave them running, orphaned).")
@click.option("--propagation-policy", type=click.Choice(["foreground", "background"]),
              default="foreground", show_default=True,
              help="How dependents of deleted objects go (when cascading).")
@click.argument("apps", nargs=-1, required=True)
def delete_command(cascade: bool, propagation_policy: str, apps: tuple[str, ...],
                   **opts: Any) -> None:
    """Delete apps as argocd app delete does: their objects too, unless --no-cascade.

    Cascading is the default: the app's objects are deleted by inventory and tracking id
    (prune's safety), then its record. --no-cascade forgets the app and leaves its
    objects running, orphaned.
    """
    destinations = Destinations(opts)
    records = destinations.store.list_apps()
    check_known(apps, records)
    policy = propagation_policy.capitalize() if cascade else None
    failed = False
    for app in apps:
        try:
            teardown, cascaded = delete_recorded(destinations, app, records[app].status,
                                                 policy=policy)
        except ClusterUnavailable as e:
            click.secho(f"app {app}: not deleted: {e}", fg="red", err=True)
            failed = True
            continue
        report_teardown(teardown, cascade=cascaded)
        failed |= not teardown.ok
    sys.exit(EXIT_ERROR if failed else 0)


def delete_recorded(destinations: Destinations, app: str, status: Mapping[str, Any], *,
                    policy: str | None) -> tuple[Teardown, bool]:
    """Delete the app's objects in the cluster its record names; whether they were.

    A destination that resolves to no cluster cannot be cascaded: its objects are
    orphaned, never looked for in another cluster (as the controller does).
    :class:`ClusterUnavailable` when that cluster does not answer.
    """
    dest = recorded_destination(status)
    if policy is None or isinstance(destinations.resolve(dest), str):
        return delete_app(destinations.store.kube, destinations.store, app, policy=None), False
    return delete_app(destinations.kube(dest), destinations.store, app, policy=policy), True


def report_teardown(teardown: Teardown, *, cascade: bool) -> None:
    for res in teardown.resources:
        click.echo(f"{teardown.app}\t{res.key}\t{res.action}"
                   + (f"\t{res.message}" if res.message else ""))
    if teardown.ok:
        how = "objects deleted" if cascade else "objects orphaned"
        click.secho(f"app {teardown.app}: deleted ({how})", fg="green", err=True)
    else:
        click.secho(f"app {teardown.app}: not fully deleted: {teardown.message}", fg="red",
                    err=True)


COMMANDS = [delete_command]
