"""Argo CD cluster Secrets parsed, refused with the field named, and connected to.

Pure parsing, plus :func:`connect_cluster` building a client (no request is made): a
client certificate goes through a private directory that is gone when it returns.
"""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.kube.clusters import (
    ClusterConfig,
    ClusterSecretError,
    connect_cluster,
    normalize_server,
    parse_cluster_secret,
)
from gitops_ray.reconcile.destinations import (
    Broken,
    find_cluster,
    is_local,
    read_secret,
    resolve_destination,
    unreachable,
)
from gitops_ray.reconcile.project import (
    IN_CLUSTER,
    Cluster,
    cluster_conditions,
    cluster_forbidden,
    in_cluster_only,
)
from gitops_ray.render.apps import Application, AppSource, Destination
from gitops_ray.types import ResourceKey
from localcluster.pki import write_pki

TOKEN = "s3cret-bearer-token"


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def secret(config: dict[str, Any] | str, **data: str) -> dict[str, Any]:
    text = config if isinstance(config, str) else json.dumps(config)
    fields = {"name": "far", "server": "https://far.example:6443/", "config": text, **data}
    return {"metadata": {"name": "cluster-far"},
            "data": {k: b64(v) for k, v in fields.items()}}


def test_a_cluster_secret_is_read_as_argo_cd_reads_it() -> None:
    config = {"bearerToken": TOKEN, "tlsClientConfig": {
        "caData": b64("PEM"), "serverName": "far.internal", "insecure": False}}
    parsed = parse_cluster_secret(secret(config, namespaces="a, b", clusterResources="true"))
    assert (parsed.name, parsed.server, parsed.secret) == (
        "far", "https://far.example:6443", "cluster-far")
    assert (parsed.bearer_token, parsed.tls.ca_data, parsed.tls.server_name) == (
        TOKEN, b"PEM", "far.internal")
    assert (parsed.namespaces, parsed.cluster_resources) == (("a", "b"), True)
    assert TOKEN not in repr(parsed) and "PEM" not in repr(parsed)


def test_cluster_resources_only_restrict_a_namespaced_cluster() -> None:
    assert parse_cluster_secret(secret({"bearerToken": TOKEN})).cluster_resources
    assert not parse_cluster_secret(secret({"bearerToken": TOKEN}, namespaces="a")
                                    ).cluster_resources


def test_the_digest_changes_with_the_credentials() -> None:
    one = parse_cluster_secret(secret({"bearerToken": TOKEN}))
    two = parse_cluster_secret(secret({"bearerToken": TOKEN + "2"}))
    assert one.digest != two.digest


@pytest.mark.parametrize(("config", "field"), [
    ({"bearerToken": TOKEN, "execProviderConfig": {"command": "x"}}, "execProviderConfig"),
    ({"bearerToken": TOKEN, "awsAuthConfig": {"clusterName": "x"}}, "awsAuthConfig"),
    ({"username": "admin", "password": TOKEN}, "username"),
    ({"bearerToken": TOKEN, "proxyUrl": "http://proxy"}, "proxyUrl"),
    ({}, "bearerToken"),
    ({"bearerToken": TOKEN, "tlsClientConfig": {"certData": b64("C")}}, "keyData"),
    ({"bearerToken": TOKEN, "tlsClientConfig": {"caData": "%%%"}}, "caData"),
    ({"bearerToken": TOKEN, "tlsClientConfig": {"insecure": "yes"}}, "insecure"),
    ({"bearerToken": 7}, "bearerToken"),
    (f'{{"bearerToken": "{TOKEN}"', "data.config is not JSON"),
    ("[]", "JSON object"),
])
def test_what_we_do_not_support_is_named_never_quoted(config: dict[str, Any] | str,
                                                      field: str) -> None:
    with pytest.raises(ClusterSecretError) as err:
        parse_cluster_secret(secret(config))
    assert field in str(err.value) and "cluster-far" in str(err.value)
    assert TOKEN not in str(err.value)


def test_a_server_must_be_https() -> None:
    with pytest.raises(ClusterSecretError, match=r"data\.server"):
        parse_cluster_secret(secret({"bearerToken": TOKEN}, server="http://far"))
    with pytest.raises(ClusterSecretError, match=r"data\.name is not base64"):
        parse_cluster_secret({"metadata": {"name": "x"}, "data": {"name": "%%"}})
    assert normalize_server(" https://a:1/ ") == "https://a:1"


def test_a_client_certificate_is_loaded_and_its_files_are_gone(tmp_path: Path) -> None:
    write_pki(tmp_path)
    tls = {"caData": b64((tmp_path / "ca.crt").read_bytes()),
           "certData": b64((tmp_path / "serving.crt").read_bytes()),
           "keyData": b64((tmp_path / "serving.key").read_bytes())}
    before = set(_tls_dirs())
    kube = connect_cluster(parse_cluster_secret(secret({"tlsClientConfig": tls})))
    assert kube.host == "https://far.example:6443"
    assert set(_tls_dirs()) == before


def test_tls_material_that_does_not_load_is_named(tmp_path: Path) -> None:
    bad_ca = secret({"bearerToken": TOKEN, "tlsClientConfig": {"caData": b64("not a cert")}})
    with pytest.raises(ClusterSecretError, match="caData is not a PEM certificate"):
        connect_cluster(parse_cluster_secret(bad_ca))
    bad_key = secret({"tlsClientConfig": {"certData": b64("x"), "keyData": b64(TOKEN)}})
    with pytest.raises(ClusterSecretError, match="certData/keyData") as err:
        connect_cluster(parse_cluster_secret(bad_key))
    assert TOKEN not in str(err.value)


def _tls_dirs() -> list[Path]:
    return [p for base in (Path("/dev/shm"), Path(tempfile.gettempdir())) if base.is_dir()
            for p in base.glob("gitops-ray-tls-*")]


# -- destinations and the rules (reconcile.project) -------------------------------------

FAR = Cluster("far", "https://far.example:6443", ("team",), cluster_resources=False)


def app(**destination: str) -> Application:
    return Application(name="a", source=AppSource(repo_url="https://git/r", path="p"),
                       destination=Destination(**destination))


def resolve(dest: Destination) -> Cluster | str:
    return FAR if dest.name == "far" else in_cluster_only(dest)


def test_a_destination_resolves_or_is_refused_with_the_resolvers_words() -> None:
    assert in_cluster_only(Destination()) == IN_CLUSTER
    assert cluster_conditions(app(name="far", namespace="team"), resolve) == ()
    (refused,) = cluster_conditions(app(name="far"))
    assert "is not the cluster gitops-ray syncs to" in refused.message
    (outside,) = cluster_conditions(app(name="far", namespace="other"), resolve)
    assert outside.message.startswith("application destination namespace 'other' is not "
                                      "managed by cluster 'far'")


def test_a_namespaced_cluster_forbids_objects_outside_it() -> None:
    role = ResourceKey("rbac.authorization.k8s.io", "ClusterRole", "", "r")
    assert cluster_forbidden(FAR, role, False) == \
        'Cluster level ClusterRole "r" can not be managed when in namespaced mode'
    assert cluster_forbidden(FAR, ResourceKey("", "ConfigMap", "x", "c"), True) == \
        'namespace "x" for ConfigMap "c" is not managed'
    assert cluster_forbidden(FAR, ResourceKey("", "ConfigMap", "team", "c"), True) == ""
    assert cluster_forbidden(IN_CLUSTER, role, False) == ""


# -- resolution (reconcile.destinations) ------------------------------------------------

def config(name: str, server: str) -> ClusterConfig:
    return ClusterConfig(name, server, f"cluster-{name}", bearer_token=TOKEN)


def test_a_destination_is_found_by_name_or_server_as_argo_cd_finds_it() -> None:
    configs = [config("far", "https://far:6443"), config("twin", "https://a:1"),
               config("twin", "https://b:1")]
    broken = [Broken("odd", "https://odd:1", "cluster Secret 'cluster-odd': data.config.x")]
    assert find_cluster(Destination(name="far"), configs, broken) == \
        Cluster("far", "https://far:6443")
    assert find_cluster(Destination(server="https://far:6443/"), configs, broken) == \
        Cluster("far", "https://far:6443")
    assert find_cluster(Destination(name="near"), configs, broken) == \
        "there are no clusters with this name: near"
    assert find_cluster(Destination(name="twin"), configs, broken) == \
        "there are 2 clusters with the same name: [https://a:1 https://b:1]"
    assert find_cluster(Destination(server="https://u:p@x:1"), configs, broken) == \
        'error getting cluster by server "https://***@x:1": cluster "https://***@x:1" not found'
    assert find_cluster(Destination(name="odd"), configs, broken) == broken[0].error
    assert find_cluster(Destination(server="https://odd:1"), configs, broken) == broken[0].error


def test_our_own_cluster_needs_no_secret() -> None:
    assert is_local(Destination()) and is_local(Destination(name="in-cluster"))
    assert is_local(Destination(server="https://kubernetes.default.svc/"))
    assert not is_local(Destination(name="far"))


def test_a_destination_is_resolved_with_what_listing_the_secrets_said() -> None:
    configs = [config("far", "https://far:6443")]
    assert resolve_destination(Destination(name="far"), configs, []) == \
        Cluster("far", "https://far:6443")
    assert resolve_destination(Destination(name="in-cluster"), [], [],
                               forbidden_in="argocd") == IN_CLUSTER
    assert resolve_destination(Destination(name="far", server="https://far:6443"),
                               configs, []) == ("application destination can't have both "
                                                "name and server defined: far https://far:6443")
    assert resolve_destination(Destination(name="far"), [], [], forbidden_in="argocd") == (
        "there are no clusters with this name: far (gitops-ray may not list the cluster "
        "Secrets in argocd)")


def test_an_unreachable_cluster_is_named_never_its_credentials() -> None:
    message = str(unreachable(Cluster("far", "https://u:p@far:6443")))
    assert message.startswith("destination cluster 'far' (https://***@far:6443) is "
                              "unreachable") and "u:p" not in message


def test_an_unusable_secret_is_read_as_who_it_claims_to_be() -> None:
    read = read_secret(secret({"bearerToken": TOKEN, "execProviderConfig": {"args": [TOKEN]}}))
    assert isinstance(read, Broken)
    assert (read.name, read.server) == ("far", "https://far.example:6443")
    assert "execProviderConfig" in read.error and TOKEN not in read.error
    assert isinstance(read_secret(secret({"bearerToken": TOKEN})), ClusterConfig)
