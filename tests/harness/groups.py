"""Which xdist worker runs which tests, and in what order: one start per heavy stack.

``make test`` runs the modules side by side in pytest-xdist workers (``--dist loadgroup``).
Each worker is a pytest session of its own, so a session fixture starts once *per worker
that needs it*: handed out module by module, every worker that got an ``e2e`` module
started its own Ray stack (operator, kwok, scheduler and a second API server), every one
that got an ``argocd`` module its own Argo CD, and kept them running, idle, through the
unit tests it ran after. On 2 cores that overlap was the suite's limit.

So the tests of one heavy stack are one group, run in a row by one worker, and the
stack's fixtures are package-scoped (``tests/e2e/conftest.py``, ``tests/argocd/conftest.py``):
started by the group's first test, stopped when the worker moves on. The ``e2e`` tier is
two groups (two Ray stacks side by side: one would be the whole run's critical path), the
Kueue and RayCronJob tests together since both change their stack for the rest of its
life. Every other module is a group of its own, which is ``--dist loadfile``: a module's
tests and module fixtures stay on one worker.

The order is longest first (the groups above, then the modules that took longest in a
measured run, see DEVELOPMENT.md), so the long ones start at once on separate workers and
the short unit modules fill in at the end. It is only an order: a module missing from
:data:`FIRST` runs after, as collected.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from xdist.scheduler import LoadScopeScheduling

RAY_A, RAY_B, ARGOCD = "ray-a", "ray-b", "argocd"

E2E = {
    "test_kueue.py": RAY_A, "test_kuberay_rules.py": RAY_A, "test_kuberay_guide.py": RAY_A,
    "test_impact.py": RAY_A, "test_hooks_e2e.py": RAY_A, "test_get.py": RAY_A,
    "test_rollout_pending.py": RAY_B, "test_docs_install.py": RAY_B,
    "test_autoscaler.py": RAY_B, "test_web_browser.py": RAY_B,
    "test_rayjob_rayservice.py": RAY_B, "test_raycluster_health.py": RAY_B,
    "test_restart.py": RAY_B,
}
"""The ``e2e`` modules on the Ray stack, balanced by measured time; a new one goes to
``ray-b`` unless named here."""

OWN_STACK = frozenset({"e2e/test_fleet.py", "argocd/test_ui_views.py"})
"""Modules that start their own control planes (their own group, not their tier's)."""

FIRST = (
    RAY_A, RAY_B, ARGOCD, "e2e/test_fleet.py", "integration/test_destinations.py",
    "faults/test_hostile_input.py", "faults/test_chart_rbac.py",
    "faults/test_stale_leader.py", "integration/test_sharding.py",
    "faults/test_webhook_abuse.py", "integration/test_chart.py",
    "unit/test_diff_jq_equivalence.py", "integration/test_controlplane.py",
    "faults/test_readiness.py", "faults/test_failure_contract.py",
    "faults/test_render_escape.py", "argocd/test_ui_views.py",
)
"""Groups and modules, longest first (seconds in the run DEVELOPMENT.md records)."""


def group_of(module: PurePosixPath) -> str:
    """The xdist group of a test module, ``module`` relative to ``tests/``."""
    name = module.as_posix()
    if name in OWN_STACK or module.parts[0] not in ("e2e", "argocd"):
        return name
    if module.parts[0] == "argocd":
        return ARGOCD
    return E2E.get(module.name, RAY_B)


def rank(group: str) -> int:
    """Where a group starts: its place in :data:`FIRST`, else after all of them."""
    return FIRST.index(group) if group in FIRST else len(FIRST)


def group_of_nodeid(nodeid: str) -> str:
    """The group of a test id (``tests/e2e/test_get.py::test_x``, relative to the root)."""
    module = PurePosixPath(nodeid.split("::", 1)[0])
    if module.parts[:1] != ("tests",):
        return module.as_posix()
    return group_of(PurePosixPath(*module.parts[1:]))


class GroupScheduling(LoadScopeScheduling):
    """xdist's ``loadscope`` scheduler with :func:`group_of`'s groups as its scopes.

    Not xdist's own ``loadgroup`` with ``xdist_group`` markers: pytest-xdist 3.8 groups by
    rewriting ``item._nodeid``, which pytest 9 no longer reads (its nodeid is ``_id``), so
    every marked test was dealt out alone, as ``--dist load`` does, and each worker started
    the Ray stack, Argo CD and module fixtures again. The scope of a test is decided here
    from its id, which both pytest versions keep.
    """

    def _split_scope(self, nodeid: str) -> str:
        return group_of_nodeid(nodeid)
