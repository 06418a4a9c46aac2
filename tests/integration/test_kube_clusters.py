"""A client built from a cluster Secret talks TLS as the Secret says, to a real API server.

The session's control plane serves a certificate for ``127.0.0.1`` and ``localhost``
signed by its own CA: the Secret's ``caData`` verifies it, ``serverName`` is checked
against it, ``insecure`` skips verification, and the bearer token is what authenticates.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gitops_ray.kube import KubeError, Unauthorized
from gitops_ray.kube.clusters import connect_cluster, parse_cluster_secret
from localcluster import LocalControlPlane


def secret(cp: LocalControlPlane, *, token: str | None = None,
           **tls: Any) -> dict[str, Any]:
    config = {"bearerToken": token or cp.token, "tlsClientConfig": tls}
    data = {"name": "here", "server": cp.url, "config": json.dumps(config)}
    return {"metadata": {"name": "cluster-here"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def ca(cp: LocalControlPlane) -> str:
    return base64.b64encode((cp.workdir / "ca.crt").read_bytes()).decode()


def version(doc: dict[str, Any]) -> str:
    kube = connect_cluster(parse_cluster_secret(doc))
    return str(kube.call("GET", "/version", timeout=10)["gitVersion"])


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_ca_and_server_name_are_verified(control_plane: LocalControlPlane) -> None:
    assert version(secret(control_plane, caData=ca(control_plane))).startswith("v1.")
    assert version(secret(control_plane, caData=ca(control_plane), serverName="localhost"))
    with pytest.raises(KubeError):
        version(secret(control_plane, caData=ca(control_plane), serverName="far.example"))
    with pytest.raises(KubeError):  # the system's CAs do not know the local one
        version(secret(control_plane))
    assert version(secret(control_plane, insecure=True))


def test_the_bearer_token_authenticates(control_plane: LocalControlPlane) -> None:
    with pytest.raises(Unauthorized) as err:
        version(secret(control_plane, token="not-the-token", caData=ca(control_plane)))
    assert "not-the-token" not in str(err.value)
