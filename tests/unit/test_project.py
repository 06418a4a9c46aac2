"""AppProject rules as Argo CD v3.2.11 applies them (cases from its ``types_test.go``),
the conditions and sync messages in Argo CD's words, and a broken project reported by field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gitops_ray.diff import AppDiff, ResourceDiff
from gitops_ray.errors import ConfigError
from gitops_ray.kube import Forbidden
from gitops_ray.reconcile.project import (
    Project,
    app_conditions,
    destination_permitted,
    forbidden_reason,
    forbidden_resources,
    format_conditions,
    live_permitted,
    load,
    namespace_permitted,
    normalize_git_url,
    resource_permitted,
    source_permitted,
    stops_sync,
)
from gitops_ray.render.apps import Application, AppSource, Destination
from gitops_ray.types import AppCondition, ConditionType, Manifest, ResourceKey, SyncStatus

IN_CLUSTER = "https://kubernetes.default.svc"
INVALID, UNKNOWN = ConditionType.INVALID_SPEC, ConditionType.UNKNOWN


def project(name: str = "team", **spec: Any) -> Project:
    return Project.parse({"metadata": {"name": name}, "spec": spec})


def app(**fields: Any) -> Application:
    base = Application("ray", AppSource("https://github.com/org/ray.git"),
                       Destination("team-a", IN_CLUSTER), project="team")
    return replace(base, **fields)


OPEN = {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
        "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}


# -- sourceRepos ---------------------------------------------------------------------------

@pytest.mark.parametrize(("repos", "url", "permitted"), [
    (["*"], "https://github.com/argoproj/test.git", True),
    (["https://github.com/argoproj/test.git"], "https://github.com/argoproj/test.git", True),
    (["ssh://git@GITHUB.com:argoproj/test"], "ssh://git@github.com:argoproj/test", True),
    (["https://github.com/argoproj/*"], "https://github.com/argoproj/argoproj.git", True),
    (["https://github.com/test1/test.git", "https://github.com/test2/test.git"],
     "https://github.com/test2/test.git", True),
    (["https://github.com/argoproj/test1.git"], "https://github.com/argoproj/test2.git", False),
    (["https://github.com/argoproj/*.git"], "https://github.com/argoproj1/test2.git", False),
    (["https://github.com/argoproj/foo"], "https://github.com/argoproj/foo1", False),
    (["https://gitlab.com/group/*"], "https://gitlab.com/group/repo/owner", False),  # `/`
    (["https://gitlab.com/group/*/*"], "https://gitlab.com/group/repo/owner", True),
    (["https://gitlab.com/group/**"], "https://gitlab.com/group/sub-group/repo/owner", True),
    (["https://GitHub.com/Org/Ray"], "https://github.com/org/ray.git", True),  # normalized
    (["git@github.com:org/ray.git"], "git@github.com:org/ray", True),
    ([], "https://github.com/org/ray.git", False),  # nothing listed: nothing permitted
])
def test_source_repos(repos: list[str], url: str, permitted: bool) -> None:
    assert source_permitted(project(sourceRepos=repos), url) is permitted


@pytest.mark.parametrize(("repos", "url", "permitted"), [
    (["!https://github.com/argoproj/test.git"], "https://github.com/argoproj/test.git", False),
    (["!https://github.com/argoproj/*"], "https://github.com/argoproj/argoproj.git", False),
    (["https://github.com/test1/test.git", "!https://github.com/test2/test.git"],
     "https://github.com/test2/test.git", False),
    (["!https://gitlab.com/group/**"], "https://gitlab.com/group/sub-group/repo/owner", False),
    (["https://github.com/argoproj/test1.git", "*"], "https://github.com/argoproj/test2.git",
     True),
    (["!https://github.com/argoproj/*.git", "*"], "https://github.com/argoproj1/test2.git",
     True),
    # Argo CD: a deny entry that does not match counts as a match on its own
    (["!https://github.com/other/x"], "https://github.com/org/ray", True),
])
def test_negated_source_repos(repos: list[str], url: str, permitted: bool) -> None:
    assert source_permitted(project(sourceRepos=repos), url) is permitted


def test_git_urls_are_normalized_as_argo_cd_does() -> None:
    assert normalize_git_url(" HTTPS://GitHub.com/Org/Ray.git ") == "https://github.com/org/ray"
    assert normalize_git_url("git@github.com:org/ray.git") == "git@github.com/org/ray"
    assert normalize_git_url("ssh://git@github.com/org/ray") == "git@github.com/org/ray"


# -- destinations --------------------------------------------------------------------------

D = dict[str, str]


@pytest.mark.parametrize(("destinations", "dest", "permitted"), [
    ([{"server": IN_CLUSTER, "namespace": "default"}], {"server": IN_CLUSTER,
                                                      "namespace": "default"}, True),
    ([{"server": IN_CLUSTER, "namespace": "default"}], {"server": IN_CLUSTER,
                                                      "namespace": "kube-system"}, False),
    ([{"server": "https://my-cluster", "namespace": "default"}],
     {"server": IN_CLUSTER, "namespace": "default"}, False),
    ([{"server": IN_CLUSTER, "namespace": "*"}], {"server": IN_CLUSTER, "namespace": "x"},
     True),
    ([{"server": "https://*.default.svc", "namespace": "default"}],
     {"server": IN_CLUSTER, "namespace": "default"}, True),
    ([{"server": IN_CLUSTER, "namespace": "test-*"}], {"server": IN_CLUSTER,
                                                     "namespace": "test"}, False),
    ([{"namespace": "*", "name": "test"}], {"name": "test", "namespace": "test"}, True),
    ([{"namespace": "*", "name": "test2"}], {"name": "test", "namespace": "test"}, False),
    ([{"name": "host", "server": IN_CLUSTER, "namespace": "!{kube-system,argocd}"},
      {"name": "eks", "server": "https://eks", "namespace": "*"}],
     {"server": "https://eks", "namespace": "kube-system"}, True),
])
def test_destinations(destinations: list[D], dest: D, permitted: bool) -> None:
    found = destination_permitted(project(destinations=destinations), dest["namespace"],
                                  server=dest.get("server", ""), name=dest.get("name", ""))
    assert found is permitted


@pytest.mark.parametrize(("destinations", "dest", "permitted"), [
    ([{"server": "!" + IN_CLUSTER, "namespace": "default"}],
     {"server": IN_CLUSTER, "namespace": "default"}, False),
    ([{"server": IN_CLUSTER, "namespace": "!default"}],
     {"server": IN_CLUSTER, "namespace": "kube-system"}, True),
    ([{"server": "!https://my-cluster", "namespace": "default"}],
     {"server": IN_CLUSTER, "namespace": "default"}, True),
    ([{"server": IN_CLUSTER, "namespace": "!test-*"}],
     {"server": IN_CLUSTER, "namespace": "test-foo"}, False),
    ([{"namespace": "*", "name": "!test"}], {"name": "test", "namespace": "test"}, False),
    ([{"server": "*", "namespace": "kube-system"}, {"server": "*", "namespace": "!kube-system"}],
     {"server": IN_CLUSTER, "namespace": "kube-system"}, False),
    ([{"server": "*", "namespace": "*"}, {"server": "*", "namespace": "!kube-system"}],
     {"server": IN_CLUSTER, "namespace": "kube-system"}, False),
    ([{"server": "*", "namespace": "test"}, {"server": "!https://t", "namespace": "other"}],
     {"server": "https://t", "namespace": "test"}, True),
    ([{"server": "*", "namespace": "*"}, {"server": "https://t", "namespace": "!other"}],
     {"server": "https://u", "namespace": "other"}, True),
])
def test_negated_destinations(destinations: list[D], dest: D, permitted: bool) -> None:
    found = destination_permitted(project(destinations=destinations), dest["namespace"],
                                  server=dest.get("server", ""), name=dest.get("name", ""))
    assert found is permitted


def test_our_cluster_matches_by_its_server_or_its_name() -> None:
    by_name = project(destinations=[{"name": "in-cluster", "namespace": "team-*"}])
    assert destination_permitted(by_name, "team-a")
    assert not destination_permitted(by_name, "other")


# -- sourceNamespaces ----------------------------------------------------------------------

@pytest.mark.parametrize(("allowed", "namespace", "permitted"), [
    ([], "", True),  # an Application of the config repo: Argo CD's own namespace
    ([], "argocd", True),  # Argo CD's namespace always is
    ([], "team-a", False),
    (["team-*"], "team-a", True),
    (["/^team-[a-z]$/"], "team-a", True),
    (["/^((?!secret).)*$/"], "secret-ns", False),  # a lookahead, as regexp2 has
    (["other"], "team-a", False),
])
def test_source_namespaces(allowed: list[str], namespace: str, permitted: bool) -> None:
    assert namespace_permitted(project(sourceNamespaces=allowed), namespace,
                               argocd_namespace="argocd") is permitted


# -- resource white- and blacklists ---------------------------------------------------------

def test_group_kinds_as_argo_cd_tests_them() -> None:
    empty_ns_whitelist = project(namespaceResourceWhitelist=[],
                                 namespaceResourceBlacklist=[{"group": "apps",
                                                              "kind": "Deployment"}])
    assert not resource_permitted(empty_ns_whitelist, "apps", "ReplicaSet", True)
    some = project(namespaceResourceWhitelist=[{"group": "apps", "kind": "ReplicaSet"}],
                   namespaceResourceBlacklist=[{"group": "apps", "kind": "Deployment"}])
    assert resource_permitted(some, "apps", "ReplicaSet", True)
    assert not resource_permitted(some, "apps", "Action", True)
    both = project(clusterResourceWhitelist=[{"group": "*", "kind": "*"}],
                   clusterResourceBlacklist=[{"group": "*", "kind": "*"}])
    assert not resource_permitted(both, "", "Namespace", False)
    assert resource_permitted(both, "apps", "Action", True)
    defaults = project()
    assert not resource_permitted(defaults, "", "Namespace", False)  # no cluster kinds
    assert resource_permitted(defaults, "ray.io", "RayCluster", True)  # every namespaced kind


def test_group_kind_patterns_are_filepath_match() -> None:
    proj = project(clusterResourceWhitelist=[{"group": "rbac.*", "kind": "Cluster?ole"}],
                   namespaceResourceBlacklist=[{"group": "ray.io", "kind": "Ray[^J]*"}])
    assert resource_permitted(proj, "rbac.authorization.k8s.io", "ClusterRole", False)
    assert not resource_permitted(proj, "", "Namespace", False)
    assert not resource_permitted(proj, "ray.io", "RayCluster", True)
    assert resource_permitted(proj, "ray.io", "RayJob", True)
    assert resource_permitted(proj, "", "ConfigMap", True)  # core group is ""


def test_forbidden_resources_carry_argo_cds_sync_messages() -> None:
    proj = project(destinations=[{"server": IN_CLUSTER, "namespace": "team-*"}],
                   namespaceResourceBlacklist=[{"group": "ray.io", "kind": "RayCluster"}])
    rc = ResourceKey("ray.io", "RayCluster", "team-a", "rc")
    cm = ResourceKey("", "ConfigMap", "team-a", "cm")
    elsewhere = ResourceKey("", "ConfigMap", "kube-system", "cm")
    role = ResourceKey("rbac.authorization.k8s.io", "ClusterRole", "", "r")
    assert forbidden_resources(proj, [(rc, True), (cm, True), (elsewhere, True),
                                      (role, False)]) == {
        rc: "resource ray.io:RayCluster is not permitted in project team",
        elsewhere: "namespace kube-system is not permitted in project 'team'",
        role: "resource rbac.authorization.k8s.io:ClusterRole is not permitted in project team",
    }
    assert forbidden_reason(proj, cm, True) == ""
    assert live_permitted(proj, cm) and not live_permitted(proj, rc)
    assert not live_permitted(proj, role)  # live with no namespace: cluster-scoped


# -- the app's conditions -------------------------------------------------------------------

def test_a_permitted_app_has_no_conditions() -> None:
    assert app_conditions(app(), project(**OPEN), argocd_namespace="argocd") == ()


def test_a_missing_project_is_argo_cds_invalid_spec() -> None:
    assert app_conditions(app(), None, argocd_namespace="argocd") == (
        AppCondition(INVALID, "Application referencing project team which does not exist"),)


def test_a_forbidden_repo_is_named_redacted() -> None:
    proj = project(**{**OPEN, "sourceRepos": ["https://github.com/other/*"]})
    token_app = app(source=AppSource("https://user:s3cret@github.com/org/ray.git"))
    (condition,) = app_conditions(token_app, proj, argocd_namespace="argocd")
    assert condition == AppCondition(
        INVALID, "application repo https://***@github.com/org/ray.git is not permitted in "
                 "project 'team'")


def test_a_forbidden_destination_is_argo_cds_message() -> None:
    proj = project(**{**OPEN, "destinations": [{"server": IN_CLUSTER, "namespace": "b-*"}]})
    assert app_conditions(app(), proj, argocd_namespace="argocd") == (AppCondition(
        INVALID, f"application destination server '{IN_CLUSTER}' and namespace 'team-a' do "
                 "not match any of the allowed destinations in project 'team'"),)
    by_name = app(destination=Destination("team-a", name="in-cluster"))
    (condition,) = app_conditions(by_name, proj, argocd_namespace="argocd")
    assert "destination server 'in-cluster' and namespace 'team-a'" in condition.message


def test_repo_and_destination_are_both_reported() -> None:
    proj = project(sourceRepos=["https://x/*"],
                   destinations=[{"server": "*", "namespace": "other"}])
    conditions = app_conditions(app(), proj, argocd_namespace="argocd")
    assert [c.type for c in conditions] == [INVALID, INVALID]
    assert format_conditions(conditions).count(";InvalidSpecError: ") == 1
    assert app_conditions(app(), proj, argocd_namespace="argocd", check_source=False) \
        == conditions[1:]


def test_another_cluster_is_not_ours_to_sync() -> None:
    other = app(destination=Destination("team-a", "https://prod.example.com"))
    (condition,) = app_conditions(other, project(**OPEN), argocd_namespace="argocd")
    assert condition.type == INVALID
    assert condition.message.startswith(
        "application destination server 'https://prod.example.com' is not the cluster "
        "gitops-ray syncs to")
    named = app(destination=Destination("team-a", name="prod"))
    (condition,) = app_conditions(named, project(**OPEN), argocd_namespace="argocd")
    assert "destination name 'prod' is not the cluster" in condition.message


def test_a_forbidden_source_namespace_is_argo_cds_unknown_error() -> None:
    outside = app(namespace="team-apps")
    assert app_conditions(outside, project(**OPEN), argocd_namespace="argocd") == (
        AppCondition(UNKNOWN, "application 'ray' in namespace 'team-apps' is not permitted "
                              "to use project 'team'"),)
    allowed = project(**OPEN, sourceNamespaces=["team-*"])
    assert app_conditions(outside, allowed, argocd_namespace="argocd") == ()


def test_conditions_that_stop_a_sync() -> None:
    warning = AppCondition(ConditionType.SHARED_RESOURCE, "shared")
    spec = AppCondition(INVALID, "a")
    assert stops_sync([warning, spec]) == (spec,)
    assert format_conditions([spec, AppCondition(UNKNOWN, "b")]) == \
        "InvalidSpecError: a;UnknownError: b"


# -- a broken project -----------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "field"), [
    ({"sourceRepos": "https://x"}, "spec.sourceRepos: must be a list"),
    ({"sourceRepos": [1]}, "spec.sourceRepos[0]: must be a string"),
    ({"sourceRepos": ["https://x/[a"]}, "spec.sourceRepos[0]: not a valid glob"),
    ({"destinations": ["x"]}, "spec.destinations[0]: must be a mapping"),
    ({"destinations": [{"namespace": 3}]}, "spec.destinations[0].namespace: must be a string"),
    ({"destinations": [{"server": "!{a"}]}, "spec.destinations[0].server: not a valid glob"),
    ({"clusterResourceWhitelist": {"group": "*"}},
     "spec.clusterResourceWhitelist: must be a list"),
    ({"namespaceResourceBlacklist": [{"group": "ray.io", "kind": "Ray["}]},
     "spec.namespaceResourceBlacklist[0].kind: not a valid pattern"),
    ({"sourceNamespaces": [None, 2]}, "spec.sourceNamespaces[1]: must be a string"),
])
def test_a_malformed_spec_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match="AppProject 'team': " + field.replace("[", r"\[")):
        project(**spec)


def test_a_spec_that_is_not_a_mapping_or_a_project_without_name() -> None:
    with pytest.raises(ConfigError, match="AppProject 'p': spec: must be a mapping"):
        Project.parse({"metadata": {"name": "p"}, "spec": ["x"]})
    with pytest.raises(ConfigError, match=r"metadata\.name must be a non-empty string"):
        Project.parse({"metadata": {}})


class Stored:
    """AppProjects kept in a dict: the lookup's contract without a cluster."""

    namespace = "argocd"

    def __init__(self, **projects: Manifest | Exception) -> None:
        self.projects = projects

    def get(self, name: str) -> Manifest | None:
        found = self.projects.get(name)
        if isinstance(found, Exception):
            raise found
        return found


def test_load_never_raises() -> None:
    broken = {"metadata": {"name": "team"}, "spec": {"destinations": "everywhere"}}
    assert load(app(), Stored(team=broken)) == (None, (AppCondition(
        UNKNOWN, "AppProject 'team': spec.destinations: must be a list, not str"),))
    denied = load(app(), Stored(team=Forbidden("appprojects is forbidden", status=403)))
    assert denied[1][0].type == UNKNOWN
    assert denied[1][0].message.startswith("could not retrieve AppProject 'team': ")
    assert load(app(), Stored())[1][0].message.endswith("which does not exist")
    good = {"metadata": {"name": "team"}, "spec": OPEN}
    loaded, conditions = load(app(), Stored(team=good))
    assert loaded is not None and loaded.name == "team" and conditions == ()


def test_an_app_or_resource_the_project_forbids_is_unknown_unless_something_drifted() -> None:
    key = ResourceKey("ray.io", "RayCluster", "team-a", "rc")
    forbidden = ResourceDiff(key, SyncStatus.UNKNOWN, "resource ray.io:RayCluster is not "
                             "permitted in project team", None, None)
    drifted = ResourceDiff(replace(key, name="b"), SyncStatus.OUT_OF_SYNC, "missing", None, None)
    assert AppDiff([forbidden]).status == SyncStatus.UNKNOWN
    assert AppDiff([forbidden, drifted]).status == SyncStatus.OUT_OF_SYNC
    assert AppDiff(unknown=True).status == SyncStatus.UNKNOWN
    assert AppDiff().status == SyncStatus.SYNCED


def test_source_repos_govern_helm_oci_and_every_source_of_a_multi_source_app() -> None:
    proj = project(**{**OPEN, "sourceRepos": ["https://charts.example/*",
                                              "oci://registry.example/charts/*",
                                              "https://github.com/org/*"]})
    chart = AppSource("https://charts.example/ray", chart="ray-cluster")
    assert app_conditions(app(source=chart), proj, argocd_namespace="argocd") == ()
    oci = AppSource("oci://registry.example/charts/ray", chart="ray-cluster")
    assert app_conditions(app(source=oci), proj, argocd_namespace="argocd") == ()
    elsewhere = AppSource("oci://other.example/charts/ray", chart="ray-cluster")
    assert app_conditions(app(source=elsewhere), proj, argocd_namespace="argocd") != ()
    values = AppSource("https://gitlab.com/team/values.git", ref="values", path="")
    multi = app(source=chart, sources=(chart, values))
    (condition,) = app_conditions(multi, proj, argocd_namespace="argocd")
    assert "https://gitlab.com/team/values.git is not permitted" in condition.message
