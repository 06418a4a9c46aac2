"""Real Kueue v0.17.0 on the Ray stack: queues that suspend, admit and inject into RayClusters.

Kueue is the other writer of a queued RayCluster (it suspends it, and on admission merges
the ResourceFlavor's nodeSelector and tolerations into every pod template), so whether
gitops-ray leaves its fields alone is only known by running it. This runs Kueue's
controller manager (:func:`localcluster.build.ensure_kueue`) out of cluster against a
:class:`~localcluster.controlplane.LocalControlPlane` started with ``kuberay=True``:

* its upstream CRDs (``config/components/crd/bases`` of the module), with the conversion
  webhook that Kueue's own kustomization adds, pointed at the local process;
* **webhooks on**, served on ``127.0.0.1`` and registered with ``clientConfig.url`` and a
  ``caBundle``: the mutating webhook is what suspends a queued RayCluster at creation and
  the validating one is what refuses ``enableInTreeAutoscaling`` without workload slicing,
  both behaviours the tests must see. Only the webhooks of the integrations that run (Ray
  and Kueue's own kinds) are registered: the others (Pods, Jobs, ...) would have nothing
  serving them and would fail every Pod creation.
* Kueue's internal certificate management stays on (it also injects the CRDs' conversion
  CA) but finds a certificate already in its Secret, made here for both the name its
  rotator checks (``kueue-webhook-service.kueue-system.svc``) and ``127.0.0.1`` (the address
  the API server calls): valid, so it is served as is. In a cluster that Secret is mounted
  as the webhook's certificate directory; here the same files are written there. With
  certificate management off,
  Kueue v0.17.0 reads its metrics certificate from a fixed ``/etc/kueue/metrics/certs``.
* the ``ray.io/raycluster`` and ``ray.io/rayjob`` integrations, no leader election, no
  metrics, the visibility API server off (it needs in-cluster delegated authentication);
  feature gates as asked (the tests turn ``ElasticJobsViaWorkloadSlices`` on, and say so).

:func:`queue_objects` makes what a platform team would: ResourceFlavors whose
``nodeLabels`` and ``tolerations`` match the fake nodes, a ClusterQueue with the quota
asked for, and a LocalQueue in a namespace.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import time
from typing import TYPE_CHECKING, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from gitops_ray.kube import Kube
from gitops_ray.types import Manifest
from localcluster.build import ensure_kueue, kueue_manifests
from localcluster.crds import install_crds

if TYPE_CHECKING:
    from localcluster.controlplane import LocalControlPlane

FIELD_MANAGER = "gitops-ray-localcluster"
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
CA_NAME = "kueue-ca"  # pkg/util/cert: the rotator verifies its CA for this name
CONVERTED = ("localqueues", "clusterqueues", "workloads", "resourceflavors", "cohorts",
             "multikueueclusters")
"""CRDs whose conversion webhook Kueue's rotator injects its CA into (it must find one)."""
SERVED_WEBHOOKS = ("-ray-io-", "-kueue-x-k8s-io-")
FRAMEWORKS = ("ray.io/raycluster", "ray.io/rayjob")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"


def start_kueue(cp: LocalControlPlane, *, gates: dict[str, bool] | None = None,
                timeout: float = 120.0) -> None:
    """Install Kueue's CRDs and webhooks on ``cp`` and start it; return once it is ready."""
    binary = ensure_kueue()
    manifests = json.loads(kueue_manifests().read_text())
    kube = Kube.connect(str(cp.kubeconfig))
    webhook, health = cp.free_port(), cp.free_port()
    ca_pem, secret = _certificates()
    certs = cp.workdir / "kueue-certs"  # in a cluster, the Secret mounted as a volume
    certs.mkdir(mode=0o700)
    for name, value in secret["data"].items():
        (certs / name).write_bytes(base64.b64decode(value))
    url = f"https://127.0.0.1:{webhook}"
    crds = [_with_conversion(m, url, ca_pem) for m in manifests
            if m.get("kind") == "CustomResourceDefinition"]
    install_crds(cp.kubeconfig, crds, timeout=timeout)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
               field_manager=FIELD_MANAGER, force=True)
    kube.apply(secret, field_manager=FIELD_MANAGER, force=True)
    config = cp.workdir / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(_configuration(cp, webhook, health)))
    flags = {"VisibilityOnDemand": False, **(gates or {})}
    cp.spawn("kueue", [str(binary), f"--config={config}", "--feature-gates=" + ",".join(
        f"{k}={str(v).lower()}" for k, v in sorted(flags.items()))],
        env={"KUBECONFIG": str(cp.kubeconfig)})
    deadline = time.monotonic() + timeout
    cp.wait_for("kueue", lambda: cp.http_ok(f"http://127.0.0.1:{health}/readyz"), deadline,
                "Kueue /readyz")
    for hook in manifests:  # registered once it serves, so no request finds nobody there
        if hook.get("kind") in ("MutatingWebhookConfiguration",
                                "ValidatingWebhookConfiguration"):
            kube.apply(_served(hook, url, ca_pem), field_manager=FIELD_MANAGER, force=True)


def _configuration(cp: LocalControlPlane, webhook: int, health: int) -> dict[str, Any]:
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``) for one local process."""
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook, "host": "127.0.0.1",
                        "certDir": str(cp.workdir / "kueue-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE,
                                       "webhookSecretName": SECRET},
            "clientConnection": {"qps": 50, "burst": 100},
            "integrations": {"frameworks": list(FRAMEWORKS)}}


def _with_conversion(crd: Manifest, url: str, ca_pem: bytes) -> Manifest:
    """The CRD with the conversion webhook Kueue's kustomization adds, at ``url``."""
    plural = str(crd["metadata"]["name"]).split(".", 1)[0]
    if plural not in CONVERTED:
        return crd
    conversion = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": f"{url}/convert",
                         "caBundle": base64.b64encode(ca_pem).decode()}}}
    return {**crd, "spec": {**crd["spec"], "conversion": conversion}}


def _served(config: Manifest, url: str, ca_pem: bytes) -> Manifest:
    """A webhook configuration with only the webhooks that run, each called at ``url``."""
    hooks = []
    for hook in config.get("webhooks") or []:
        path = str(((hook.get("clientConfig") or {}).get("service") or {}).get("path", ""))
        if any(part in path for part in SERVED_WEBHOOKS):
            hooks.append({**hook, "clientConfig": {
                "url": url + path, "caBundle": base64.b64encode(ca_pem).decode()}})
    kind = "validating" if config["kind"].startswith("Validating") else "mutating"
    return {**config, "metadata": {"name": f"kueue-{kind}-webhook-configuration"},
            "webhooks": hooks}


def _certificates() -> tuple[bytes, Manifest]:
    """A CA named as Kueue's rotator expects and a serving certificate it accepts.

    Valid for a year: the rotator replaces what expires within 90 days. RSA keys in
    PKCS #1: the rotator parses its CA key with ``x509.ParsePKCS1PrivateKey``.
    """
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = (rsa.generate_private_key(public_exponent=65537, key_size=2048)
                   for _ in range(2))
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kueue")])
    ca = (_builder(ca_name, ca_name, ca_key, now)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.SubjectAlternativeName([x509.DNSName(CA_NAME)]), critical=False)
          .sign(ca_key, hashes.SHA256()))
    sans = [x509.DNSName(f"{SERVICE}.{NAMESPACE}.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    serving = (_builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVICE)]),
                        ca_name, key, now)
               .add_extension(x509.SubjectAlternativeName(sans), critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    data = {"ca.crt": ca_pem, "ca.key": _pem(ca_key),
            "tls.crt": serving.public_bytes(serialization.Encoding.PEM), "tls.key": _pem(key)}
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": SECRET, "namespace": NAMESPACE},
              "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
    return ca_pem, secret


def _builder(subject: x509.Name, issuer: x509.Name, key: rsa.RSAPrivateKey,
             now: datetime.datetime) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365)))


def _pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


# -- queues ---------------------------------------------------------------------------


def resource_flavor(name: str, node_labels: dict[str, str],
                    tolerations: list[dict[str, Any]] | None = None) -> Manifest:
    """A ResourceFlavor: admitted pod templates get its nodeLabels and tolerations."""
    spec: dict[str, Any] = {"nodeLabels": node_labels}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name}, "spec": spec}


def cluster_queue(name: str, flavor: str, *, cpu: str, memory: str,
                  gpus: str = "0") -> Manifest:
    """A ClusterQueue with one flavor's quota of cpu, memory and nvidia.com/gpu."""
    resources = [{"name": "cpu", "nominalQuota": cpu},
                 {"name": "memory", "nominalQuota": memory},
                 {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": ["cpu", "memory",
                                                              "nvidia.com/gpu"],
                                         "flavors": [{"name": flavor,
                                                      "resources": resources}]}]}}


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> Manifest:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue_name}}


def queue_objects(namespace: str, *, queue: str, flavor: Manifest, cpu: str, memory: str,
                  gpus: str = "0") -> list[Manifest]:
    """Flavor, ClusterQueue ``<queue>-cq`` and LocalQueue ``queue`` in ``namespace``."""
    name = str(flavor["metadata"]["name"])
    return [flavor, cluster_queue(f"{queue}-cq", name, cpu=cpu, memory=memory, gpus=gpus),
            local_queue(queue, namespace, f"{queue}-cq")]
