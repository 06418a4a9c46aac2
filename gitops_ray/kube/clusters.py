"""Argo CD cluster Secrets: what another cluster is, and a client that talks to it.

Why here: a destination cluster is a second API server, and only :mod:`gitops_ray.kube`
talks to API servers. Argo CD keeps its clusters in Secrets labelled
``argocd.argoproj.io/secret-type: cluster`` (v3.2.11 ``util/db/cluster.go``
``SecretToCluster``; the JSON of ``config`` is ``pkg/apis/application/v1alpha1``
``ClusterConfig``), so a cluster added with ``argocd cluster add`` or declaratively is
read here as it is there:

* ``data.name``, ``data.server`` (a trailing ``/`` is not significant), ``data.namespaces``
  (comma-separated; empty: every namespace), ``data.clusterResources`` (``"true"``: the
  cluster-scoped kinds may be managed when ``namespaces`` is set);
* ``data.config``: ``bearerToken`` and ``tlsClientConfig`` (``insecure``, ``serverName``,
  ``caData``, ``certData``, ``keyData``, each ``[]byte``, i.e. base64 in the JSON).

What we do not support makes the cluster unusable with a :class:`ClusterSecretError` that
names the field, never its value: ``username``/``password`` (basic auth, gone from
kube-apiserver since 1.19), ``execProviderConfig``, ``awsAuthConfig``, ``proxyUrl``, a
missing bearer token, or a client certificate without its key.

**Credentials stay in memory.** The CA goes to the TLS stack as data (``cadata``). A
client certificate and key have to be files for :meth:`ssl.SSLContext.load_cert_chain`:
they are written into a fresh private directory (mode 0700, on ``/dev/shm`` when it
exists, so never on disk), loaded once into the connection's :class:`ssl.SSLContext`, and
deleted before :func:`connect_cluster` returns. Nothing of a Secret is ever put in a
message, a ``repr`` or a log line: :class:`ClusterConfig` hides its credentials.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s_client

from gitops_ray.errors import ConfigError
from gitops_ray.kube.client import Kube
from gitops_ray.types import MANAGED_ANNOTATION, SKIP_RECONCILE_ANNOTATION, Manifest

SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"
CLUSTER_SECRET_SELECTOR = f"{SECRET_TYPE_LABEL}=cluster"
UNSUPPORTED = ("username", "password", "execProviderConfig", "awsAuthConfig", "proxyUrl")
"""Fields of ``config`` that would need what we do not do (see the module docstring)."""
POOL_SIZE = 16  # connections per destination cluster
_PRIVATE_DIRS = ("/dev/shm",)  # tmpfs: client certificates never reach a disk


class ClusterSecretError(ConfigError):
    """A cluster Secret we cannot use; the message names the Secret and field only."""


@dataclass(frozen=True)
class TLSConfig:
    """``tlsClientConfig`` (PEM bytes; hidden from ``repr``)."""

    insecure: bool = False
    server_name: str = ""
    ca_data: bytes = field(default=b"", repr=False)
    cert_data: bytes = field(default=b"", repr=False)
    key_data: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class ClusterConfig:
    """One destination cluster, as its Secret describes it."""

    name: str
    server: str
    secret: str  # the Secret's name, for messages
    bearer_token: str = field(default="", repr=False)
    tls: TLSConfig = field(default=TLSConfig(), repr=False)
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    cluster_resources: bool = True

    @property
    def digest(self) -> str:
        """Changes whenever anything that a connection depends on changes."""
        parts = [self.name, self.server, self.bearer_token, str(self.tls.insecure),
                 self.tls.server_name, ",".join(self.namespaces), str(self.cluster_resources)]
        text = "\0".join(parts).encode() + self.tls.ca_data + self.tls.cert_data + \
            self.tls.key_data
        return hashlib.sha256(text).hexdigest()


def normalize_server(server: str) -> str:
    """A server URL as clusters are matched (Argo CD: a trailing ``/`` does not count)."""
    return server.strip().rstrip("/")


def parse_cluster_secret(secret: Manifest) -> ClusterConfig:
    """The cluster a Secret describes; :class:`ClusterSecretError` naming what is wrong."""
    meta = secret.get("metadata") or {}
    where = f"cluster Secret '{meta.get('name', '')}'"
    data = _decoded(secret.get("data") or {}, where)
    server = normalize_server(data.get("server", ""))
    if not server.startswith("https://"):
        raise ClusterSecretError(f"{where}: data.server must be an https:// URL")
    config = _config(data.get("config", ""), where)
    namespaces = tuple(n.strip() for n in data.get("namespaces", "").split(",") if n.strip())
    cluster_resources = data.get("clusterResources", "").strip().lower() == "true"
    return ClusterConfig(
        name=data.get("name", "").strip(), server=server,
        secret=str(meta.get("name", "")), bearer_token=_token(config, where),
        tls=_tls(config.get("tlsClientConfig"), where), namespaces=namespaces,
        cluster_resources=cluster_resources or not namespaces)


_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # strconv.ParseBool


def hand_over(annotations: object) -> tuple[bool, bool]:
    """``(managed, skipped)``: a cluster Secret's two hand-over annotations.

    Argo CD >= 3.4 skips every app of a cluster whose Secret says
    ``argocd.argoproj.io/skip-reconcile`` (``strconv.ParseBool``: ``true``, ``1``, ``t``
    ...); gitops-ray takes them only when the Secret also says ``gitops-ray.io/managed:
    "true"``, as it takes one Application only with both.
    """
    if not isinstance(annotations, Mapping):
        return False, False
    return (str(annotations.get(MANAGED_ANNOTATION, "")).lower() == "true",
            annotations.get(SKIP_RECONCILE_ANNOTATION) in _GO_TRUE)


def _decoded(data: Mapping[str, Any], where: str) -> dict[str, str]:
    out = {}
    for key, value in data.items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as e:
            raise ClusterSecretError(f"{where}: data.{key} is not base64 UTF-8 text") from e
    return out


def _config(text: str, where: str) -> Mapping[str, Any]:
    try:
        config = json.loads(text or "{}")
    except ValueError as e:  # the message would quote the document: not kept
        raise ClusterSecretError(f"{where}: data.config is not JSON") from e
    if not isinstance(config, Mapping):
        raise ClusterSecretError(f"{where}: data.config must be a JSON object")
    for key in UNSUPPORTED:
        if config.get(key):
            raise ClusterSecretError(f"{where}: data.config.{key} is not supported "
                                     "(bearerToken and tlsClientConfig are)")
    return config


def _token(config: Mapping[str, Any], where: str) -> str:
    token = config.get("bearerToken") or ""
    if not isinstance(token, str):
        raise ClusterSecretError(f"{where}: data.config.bearerToken must be a string")
    tls = config.get("tlsClientConfig") or {}
    if not token and not (isinstance(tls, Mapping) and tls.get("certData")):
        raise ClusterSecretError(f"{where}: data.config has no bearerToken and no "
                                 "tlsClientConfig.certData")
    return token


def _tls(raw: object, where: str) -> TLSConfig:
    if raw is None:
        return TLSConfig()
    if not isinstance(raw, Mapping):
        raise ClusterSecretError(f"{where}: data.config.tlsClientConfig must be an object")
    pem = {key: _pem(raw.get(key), f"{where}: data.config.tlsClientConfig.{key}")
           for key in ("caData", "certData", "keyData")}
    if bool(pem["certData"]) != bool(pem["keyData"]):
        raise ClusterSecretError(f"{where}: data.config.tlsClientConfig needs both certData "
                                 "and keyData, or neither")
    insecure, server_name = raw.get("insecure", False), raw.get("serverName") or ""
    if not isinstance(insecure, bool) or not isinstance(server_name, str):
        raise ClusterSecretError(f"{where}: data.config.tlsClientConfig.insecure must be a "
                                 "boolean and serverName a string")
    return TLSConfig(insecure, server_name, pem["caData"], pem["certData"], pem["keyData"])


def _pem(value: object, where: str) -> bytes:
    if not value:
        return b""
    try:
        return base64.b64decode(str(value), validate=True)
    except binascii.Error as e:
        raise ClusterSecretError(f"{where} is not base64") from e


# -- connecting ---------------------------------------------------------------------------

def connect_cluster(config: ClusterConfig) -> Kube:
    """A :class:`Kube` for the cluster (no request is made yet).

    :class:`ClusterSecretError` when the TLS material does not load (a CA or a key that is
    not PEM): the message says which, not what it contained.
    """
    cfg = k8s_client.Configuration()
    cfg.host = config.server
    if config.bearer_token:
        cfg.api_key = {"BearerToken": f"Bearer {config.bearer_token}"}
    cfg.connection_pool_maxsize = POOL_SIZE
    api = k8s_client.ApiClient(cfg)
    api.rest_client.pool_manager = _pool(config)
    return Kube(api)


def _pool(config: ClusterConfig) -> urllib3.PoolManager:
    tls = config.tls
    context = ssl.create_default_context()
    where = f"cluster Secret '{config.secret}'"
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif tls.ca_data:
        try:
            context.load_verify_locations(cadata=tls.ca_data.decode())
        except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
            raise ClusterSecretError(f"{where}: tlsClientConfig.caData is not a PEM "
                                     "certificate") from e
    if tls.cert_data:
        _load_client_cert(context, tls, where)
    extra: dict[str, Any] = {}
    if tls.server_name and not tls.insecure:
        extra = {"server_hostname": tls.server_name, "assert_hostname": tls.server_name}
    return urllib3.PoolManager(num_pools=4, maxsize=POOL_SIZE, ssl_context=context,
                               cert_reqs=context.verify_mode, **extra)


def _load_client_cert(context: ssl.SSLContext, tls: TLSConfig, where: str) -> None:
    """Load the client certificate and key into ``context`` through short-lived files."""
    with _private_dir() as directory:
        cert, key = directory / "tls.crt", directory / "tls.key"
        for path, data in ((cert, tls.cert_data), (key, tls.key_data)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        try:
            context.load_cert_chain(cert, key)
        except (ssl.SSLError, ValueError) as e:
            raise ClusterSecretError(f"{where}: tlsClientConfig.certData/keyData are not a "
                                     "PEM certificate and its key") from e


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    """A 0700 directory on tmpfs when there is one, removed on exit."""
    base = next((d for d in _PRIVATE_DIRS if os.access(d, os.W_OK)), None)
    directory = Path(tempfile.mkdtemp(prefix="gitops-ray-tls-", dir=base))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
