"""Drive the Ray autoscaler's own KubeRay node provider one step at a time.

Used by the e2e tests and the demo. :class:`Autoscaler` runs the steps as the cluster's
autoscaler ServiceAccount (the one the operator creates for ``enableInTreeAutoscaling``).

``python -m localcluster.autoscaler NAMESPACE CLUSTER ACTION [ARGS]`` runs one autoscaler
decision with PyPI ``ray``'s ``KubeRayNodeProvider`` (the code in the head pod's autoscaler
sidecar): it reads the RayCluster and its Pods and writes what the real autoscaler writes
(JSON Patch of ``replicas`` and ``scaleStrategy.workersToDelete`` by list index, as
``python-requests``). It runs as its own process, configured the in-pod way, because the
provider reads the API server address and CA from the environment when it is imported:

* ``KUBERNETES_SERVICE_HOST`` / ``KUBERNETES_SERVICE_PORT_HTTPS``: the API server;
* ``RAY_KUBERAY_CA_CERT_PATH``: its CA;
* ``AUTOSCALER_TOKEN_PATH``: the file holding the bearer token (the provider's
  ``IN_CLUSTER_TOKEN_PATH``, a module constant, is pointed at it).

Actions: ``scale GROUP REPLICAS`` (``create_node``/``terminate_node`` of the newest),
``delete POD`` (``terminate_node`` of that worker) and ``cleanup`` (``safe_to_scale``,
which clears ``workersToDelete`` once the operator has removed those Pods; prints
``True``/``False``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gitops_ray.kube import Kube
from localcluster.controlplane import LocalControlPlane

PROVIDER_CONFIG_KEYS = ("DISABLE_NODE_UPDATERS_KEY", "DISABLE_LAUNCH_CONFIG_CHECK_KEY",
                        "FOREGROUND_NODE_LAUNCH_KEY")


def provider(namespace: str, cluster: str) -> Any:
    from ray.autoscaler._private import constants
    from ray.autoscaler._private.kuberay import node_provider

    node_provider.IN_CLUSTER_TOKEN_PATH = os.environ["AUTOSCALER_TOKEN_PATH"]
    config: dict[str, Any] = {getattr(constants, key): True for key in PROVIDER_CONFIG_KEYS}
    config[constants.WORKER_LIVENESS_CHECK_KEY] = False
    config["namespace"] = namespace
    return node_provider.KubeRayNodeProvider(config, cluster)


def scale(p: Any, group: str, replicas: int) -> None:
    from ray.autoscaler.tags import TAG_RAY_USER_NODE_TYPE

    workers = p.non_terminated_nodes({TAG_RAY_USER_NODE_TYPE: group})
    if replicas > len(workers):
        p.create_node({}, {TAG_RAY_USER_NODE_TYPE: group}, replicas - len(workers))
    for worker in sorted(workers, reverse=True)[:max(0, len(workers) - replicas)]:
        p.terminate_node(worker)
    p.post_process()


def delete(p: Any, pod: str) -> None:
    p.non_terminated_nodes({})
    p.terminate_node(pod)
    p.post_process()


def cleanup(p: Any) -> None:
    p.non_terminated_nodes({})
    print(p.safe_to_scale())


class Autoscaler:
    """Runs this module's steps in a child process as ``cluster``'s autoscaler account."""

    def __init__(self, cp: LocalControlPlane, kube: Kube, namespace: str, cluster: str,
                 workdir: Path) -> None:
        self.namespace, self.cluster = namespace, cluster
        token = kube.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{cluster}"
                          "/token", body={"apiVersion": "authentication.k8s.io/v1",
                                          "kind": "TokenRequest", "spec": {}})
        token_path = workdir / f"{cluster}-autoscaler-token"
        token_path.write_text(token["status"]["token"])
        token_path.chmod(0o600)
        self.env = {**os.environ, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                    "KUBERNETES_SERVICE_PORT_HTTPS": str(cp.port),
                    "RAY_KUBERAY_CA_CERT_PATH": str(cp.workdir / "ca.crt"),
                    "AUTOSCALER_TOKEN_PATH": str(token_path),
                    "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def run(self, *args: str) -> str:
        """One step (``scale GROUP N``, ``delete POD``, ``cleanup``); its output."""
        done = subprocess.run([sys.executable, "-m", "localcluster.autoscaler",
                               self.namespace, self.cluster, *args], env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"autoscaler step {args} failed: {done.stderr[-3000:]}")
        return done.stdout.strip()


def main(argv: list[str]) -> None:
    namespace, cluster, action, *args = argv
    p = provider(namespace, cluster)
    if action == "scale":
        scale(p, args[0], int(args[1]))
    elif action == "delete":
        delete(p, args[0])
    elif action == "cleanup":
        cleanup(p)
    else:
        raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    main(sys.argv[1:])
