"""``gitops-ray get APP``: one app in full, like ``argocd app get``, plus what KubeRay made.

``status`` answers "which apps are not fine"; ``get`` answers "what is this one doing":
where it comes from, its sync policy, why it is out of sync (the resources' reasons, the
conditions, the error), its health and the last operation with human times, then the
resource tree: every object of the app with its sync status and health, and under each
RayCluster the Pods and Services the operator made (under a RayJob or RayService its
RayCluster and that cluster's Pods), each Pod with its worker group. Each Ray object
ends with its worker-group view (:mod:`gitops_ray.health.workergroups`): git's
``replicas`` next to live's and who set them, which is what a Ray team asks first and
what Argo CD, hiding ``replicas`` under ``ignoreDifferences``, never shows.
An app that is OutOfSync shows, as ``Impact`` rows, what the KubeRay operator will do
with each changed Ray object once it is synced (:mod:`gitops_ray.health.impact`).

The state comes from the app's record (what the controller or the last ``sync`` /
``status --refresh`` compared); ``--refresh`` compares now and records it first (it needs
the app options, as ``status --refresh`` does). The tree is read live with a bounded
number of requests (:mod:`gitops_ray.cli.live`). Output: a table fitted to the terminal
(plain text when piped), ``-o wide`` (namespaces, full messages, the workers to delete by
name), ``-o json`` / ``-o yaml`` (the summary and the tree, times in RFC 3339).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import click
import yaml
from rich.console import Console
from rich.text import Text

from gitops_ray.cli.common import (
    CliCommand,
    app_options,
    check_known,
    kube_options,
    select_apps,
    shapes_options,
)
from gitops_ray.cli.destinations import Destinations, recorded_destination
from gitops_ray.cli.impact import recorded_lines
from gitops_ray.cli.live import LiveTree, read_tree
from gitops_ray.cli.sync import refresh
from gitops_ray.cli.table import Cell, Column, Table, show
from gitops_ray.cli.views import console, duration, human_time, iso, print_groups
from gitops_ray.health import HealthStatus
from gitops_ray.kube import Kube
from gitops_ray.reconcile.tree import TreeNode
from gitops_ray.render.apps import short_revision
from gitops_ray.sync.appstatus import AppStatus, Operation, encode, encode_operation
from gitops_ray.sync.records import AppRecord
from gitops_ray.types import OperationPhase, SyncStatus

HEALTH_STYLES: dict[str, str] = {HealthStatus.HEALTHY: "green", HealthStatus.DEGRADED: "red",
                 HealthStatus.PROGRESSING: "cyan", HealthStatus.MISSING: "yellow",
                 HealthStatus.SUSPENDED: "magenta"}
SYNC_STYLES: dict[str, str] = {SyncStatus.SYNCED: "green", SyncStatus.OUT_OF_SYNC: "yellow"}


@click.command("get", cls=CliCommand)
@kube_options
@app_options
@shapes_options
@click.option("--refresh", "refresh_now", is_flag=True,
              help="Compare with git and the cluster now (needs --repo/--apps or --local) "
                   "and record the result before showing it.")
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]),
              default="table", show_default=True)
@click.argument("app")
def get_command(refresh_now: bool, output: str, app: str, **opts: Any) -> None:
    """Show one app: summary, resource tree and each Ray object's worker groups."""
    kube, record = _load(app, refresh_now, opts)
    status = record.app_status
    tree = read_tree(kube, status.rows)
    for what in tree.unreadable:
        click.secho(f"warning: not shown, no right to read {what}", fg="yellow", err=True)
    if output in ("json", "yaml"):
        doc = {**summary(app, status), "tree": [n.as_dict() for n in tree.nodes]}
        click.echo(json.dumps(doc, indent=2) if output == "json"
                   else yaml.safe_dump(doc, sort_keys=False), nl=output == "json")
        return
    print_app(console(), app, status, tree, wide=output == "wide")


def _load(app: str, refresh_now: bool, opts: dict[str, Any]) -> tuple[Kube, AppRecord]:
    """The app's record (compared now first with ``--refresh``) and its cluster's client.

    The cluster is the one the record says the app names (:mod:`gitops_ray.cli.destinations`);
    fails on an unknown app, and on a destination cluster that does not answer.
    """
    destinations = Destinations(opts)
    if refresh_now:
        selection = select_apps(destinations.source, {**opts, "app_names": (app,)})
        refresh(destinations, destinations.store, selection, record=True)
        record = destinations.store.read(app)
    else:
        records = destinations.store.list_apps()
        check_known((app,), records)
        record = records[app]
    return destinations.kube(recorded_destination(record.app_status)), record



# -- the summary ----------------------------------------------------------------------------

def summary(name: str, status: AppStatus) -> dict[str, Any]:
    """The app's summary, JSON-ready (times in RFC 3339, never epoch seconds).

    The one place ``get``'s JSON and YAML are built from the typed status; the table
    (:func:`summary_lines`) reads it too. A field the record lacks reads as its empty value.
    """
    return {"name": name, "repoURL": _str(status.repo_url), "path": _str(status.path),
            "chart": _str(status.chart), "targetRevision": _str(status.target_revision),
            "revision": _str(status.revision),
            "destinationNamespace": _str(status.destination_namespace),
            "syncPolicy": _str(status.sync_policy), "selfHeal": bool(status.self_heal),
            "sync": _str(status.sync, SyncStatus.UNKNOWN.value),
            "syncReason": sync_reason(status),
            "conditions": [encode(c) for c in status.conditions or ()],
            "error": _str(status.error), "errorReason": _str(status.error_reason),
            "health": _str(status.health, HealthStatus.UNKNOWN.value),
            "healthMessage": _str(status.health_message),
            "rolloutPending": list(status.rollout_pending or ()),
            "impact": list(status.impacts),
            "renderWarnings": list(status.render_warnings or ()),
            "conflicts": list(status.conflicts or ()),
            "refusals": list(status.refusals or ()),
            "lastOperation": last_operation(status.current),
            "hooks": hooks_of(status.current),
            "comparedAt": iso(status.compared_at)}


def _str(value: str | None, default: str = "") -> str:
    return default if value is None else value


HOOK_FIELDS = ("hookType", "hookPhase", "kind", "namespace", "name", "message")


def hooks_of(op: Operation | None) -> list[dict[str, str]]:
    """The resource hooks an operation ran, as Argo CD lists them."""
    return [{k: str(r.get(k) or "") for k in HOOK_FIELDS}
            for r in (op.resources if op is not None else None) or () if r.get("hookType")]


def sync_reason(status: AppStatus) -> str:
    """Why the app is not Synced, from its resources: ``1 modified, 2 missing``."""
    reasons = Counter(r.reason or "modified" for r in status.resources or ()
                      if r.status == SyncStatus.OUT_OF_SYNC)
    return ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))


def last_operation(op: Operation | None) -> dict[str, Any]:
    """An operation (:attr:`AppStatus.current`), JSON-ready (times in RFC 3339; ``{}``: none)."""
    if op is None or not encode_operation(op):
        return {}
    out: dict[str, Any] = {
        "phase": _str(op.phase), "reason": _str(op.reason), "message": _str(op.message),
        "revision": _str(op.revision), "startedAt": iso(op.started_at),
        "finishedAt": iso(op.finished_at)}
    if op.wave is not None:
        out["wave"] = op.wave
    return out


def _operation_text(op: Operation | None) -> str:
    if op is None or not op.phase:
        return "none recorded"
    phase = op.phase + (f" ({op.reason})" if op.reason else "")
    if op.phase == OperationPhase.RUNNING and op.wave is not None:
        of = f"{op.sync_phase} " if op.sync_phase not in (None, "Sync") else ""
        phase += f", waiting for {of}wave {op.wave}"
    at = f" at {short_revision(op.revision)}" if op.revision else ""
    when = human_time(op.finished_at or op.started_at)
    took = _took(op)
    return (f"{phase}{at}" + (f", {when}" if when else "") + (f", took {took}" if took else "")
            + (f": {op.message}" if op.message else ""))


def _took(op: Operation) -> str:
    start, end = op.started_at, op.finished_at
    if start is None or end is None or end < start:
        return ""
    return duration(float(end) - float(start))


def summary_lines(name: str, status: AppStatus) -> Iterator[tuple[str, str | Text]]:
    """(label, value) pairs of the human summary, in ``argocd app get``'s order."""
    info = summary(name, status)
    yield "Name", name
    yield "Repo", info["repoURL"] or "-"
    if info["chart"]:
        yield "Chart", info["chart"]  # Argo CD's `argocd app get` shows it in Path's place
    else:
        yield "Path", info["path"] or "-"
    yield "Target", info["targetRevision"] or "-"
    yield "Revision", short_revision(info["revision"]) or "-"
    yield "Namespace", info["destinationNamespace"] or "-"
    yield "Sync Policy", (info["syncPolicy"] or "-") + (" (self-heal)" if info["selfHeal"]
                                                          else "")
    sync = Text(info["sync"], style=SYNC_STYLES.get(info["sync"], "red"))
    yield "Sync Status", sync + (f" ({info['syncReason']})" if info["syncReason"] else "")
    for condition in info["conditions"]:
        yield "Condition", f"{condition.get('type', '')}: {condition.get('message', '')}"
    if info["error"]:
        yield "Error", Text(info["error"], style="red")
    for refusal in info["refusals"]:  # a sync of this would fail: diff/refusals.py
        yield "Refused", Text(refusal, style="red")
    health = Text(info["health"], style=HEALTH_STYLES.get(info["health"], ""))
    yield "Health Status", health + (f": {info['healthMessage']}" if info["healthMessage"]
                                     else "")
    for conflict in info["conflicts"]:
        yield "Conflict", Text(conflict, style="yellow")
    for line in recorded_lines(status.impacts):
        yield "Impact", Text(line, style="yellow")
    yield "Last Operation", _operation_text(status.current)
    yield "Compared", human_time(status.compared_at) or "never"
    if info["renderWarnings"]:
        yield "Render Warnings", f"{len(info['renderWarnings'])} (-o yaml lists them)"


SUMMARY_COLUMNS = (Column("", style="bold"), Column("", shrink=1, wrap=True))
"""``get``'s summary: bold labels, then values that wrap on a narrow terminal."""


def print_app(out: Console, name: str, status: AppStatus, tree: LiveTree, *,
              wide: bool = False) -> None:
    """Summary, resource tree, then the worker-group view of each Ray object."""
    show(out, Table(SUMMARY_COLUMNS, [(f"{label}:", value)
                                      for label, value in summary_lines(name, status)],
                    show_header=False))
    out.print()
    if not tree.nodes:
        out.print("No resources recorded (never compared: try --refresh).")
        return
    show(out, tree_table(tree.nodes, status.destination_namespace or "", wide=wide))
    hooks = hooks_of(status.current)
    if hooks:
        out.print()
        show(out, hooks_table(hooks, wide=wide))
    for node in tree.nodes:
        if node.worker_groups:
            out.print()
            print_groups(out, _groups_title(node), node.worker_groups, wide=wide)


def hooks_table(hooks: list[dict[str, str]], *, wide: bool = False) -> Table:
    """The last operation's hooks: type, kind, name, phase, message."""
    columns = (Column("HOOK"), Column("KIND"), Column("NAME", shrink=2, minimum=16),
               Column("PHASE"), _message_column(wide))
    rows = [(hook["hookType"], hook["kind"], hook["name"],
             Text(hook["hookPhase"], style=_PHASE_STYLES.get(hook["hookPhase"], "")),
             hook["message"]) for hook in hooks]
    return Table(columns, rows, title="Hooks of the last operation")


def _message_column(wide: bool) -> Column:
    """MESSAGE gives way first: cut to the terminal (``-o wide``: whole, wrapped)."""
    return Column("MESSAGE", shrink=1, wrap=wide)


_PHASE_STYLES = {OperationPhase.SUCCEEDED.value: "green", OperationPhase.FAILED.value: "red",
                 OperationPhase.RUNNING.value: "cyan"}


def _groups_title(node: TreeNode) -> str:
    made = next((c for c in node.children if c.kind == "RayCluster"), None)
    via = f" (RayCluster {made.name})" if node.kind != "RayCluster" and made else ""
    return f"{node.kind} {_where(node.namespace, node.name)} worker groups{via}:"


# -- the tree -------------------------------------------------------------------------------

def tree_table(nodes: list[TreeNode], namespace: str, *, wide: bool = False) -> Table:
    """One row per object, children indented under their owner (``├─``, ``└─``)."""
    columns = (Column("KIND", shrink=4, minimum=12),
               *((Column("NAMESPACE", shrink=3, minimum=10),) if wide else ()),
               Column("NAME", shrink=2, minimum=16), Column("GROUP", shrink=5, minimum=8),
               Column("SYNC"), Column("HEALTH"), _message_column(wide))
    rows: list[list[Cell]] = []
    for prefix, node in tree_rows(nodes):
        name = node.name if wide or node.namespace in ("", namespace) \
            else _where(node.namespace, node.name)
        rows.append([prefix + node.kind, *([node.namespace] if wide else []), name,
                     node.ray_group, _sync(node), _health(node), node.message])
    return Table(columns, rows)


def tree_rows(nodes: tuple[TreeNode, ...] | list[TreeNode],
              indent: str = "") -> Iterator[tuple[str, TreeNode]]:
    """(prefix, node) depth first: top nodes bare, children with tree connectors."""
    for node in nodes:
        yield indent, node
        yield from _children(node, indent)


def _children(node: TreeNode, indent: str) -> Iterator[tuple[str, TreeNode]]:
    base = indent.replace("├─ ", "│  ").replace("└─ ", "   ")
    children = list(node.children)
    for i, child in enumerate(children):
        last = i == len(children) - 1 and not node.hidden_children
        yield from tree_rows([child], base + ("└─ " if last else "├─ "))
    if node.hidden_children:
        more = TreeNode("", f"… {node.hidden_children} more", "", "", "", "", "")
        yield base + "└─ ", more


def _sync(node: TreeNode) -> Text:
    return Text(node.sync, style=SYNC_STYLES.get(node.sync, "red") if node.sync else "")


def _health(node: TreeNode) -> Text:
    return Text(node.health, style=HEALTH_STYLES.get(node.health, ""))


def _where(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


COMMANDS = [get_command]
