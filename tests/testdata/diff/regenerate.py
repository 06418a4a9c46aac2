"""Regenerate the recorded API-server objects used by the diff unit tests.

The diff stage is pure, so its unit tests read recorded objects instead of a cluster. This
script records them from the real local control plane, so that ``managedFields``,
defaults and dry-run predictions in the fixtures are what a real API server produces:

* ``raycluster-desired.yaml``: the RayCluster as git has it (autoscaling on);
* ``raycluster-live.json``: after a server-side apply by ``gitops-ray`` and an
  autoscaler-style JSON patch (``replace`` of ``workerGroupSpecs/0/replicas`` and
  ``/scaleStrategy``) recorded under the manager ``python-requests``, which is what the
  API server derives from the Ray autoscaler's User-Agent;
* ``raycluster-predicted.json``: a server-side dry-run apply of the desired object with
  the live replicas/scaleStrategy kept (what sync would send);
* ``secret-*.json``: a Secret applied with ``stringData``, and its dry-run prediction.

Run: ``.venv/bin/python tests/testdata/diff/regenerate.py`` (needs the control plane
binaries, see DEVELOPMENT.md).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))

from gitops_ray.kube import Kube  # noqa: E402
from localcluster import LocalControlPlane  # noqa: E402
from tests.samples import raycluster  # noqa: E402

NAMESPACE = "ray-demo"


def _save(name: str, obj: Any) -> None:
    (HERE / name).write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")


def _record_raycluster(kube: Kube) -> None:
    desired = raycluster("demo", NAMESPACE)
    (HERE / "raycluster-desired.yaml").write_text(yaml.safe_dump(desired, sort_keys=False))
    kube.apply(desired, field_manager="gitops-ray", force=True)
    live = kube.patch("ray.io/v1", "RayCluster", name="demo", namespace=NAMESPACE, patch=[
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
         "value": {"workersToDelete": ["demo-cpu-worker-abcde"]}},
    ], field_manager="python-requests")
    _save("raycluster-live.json", live)
    body = copy.deepcopy(desired)
    for group, live_group in zip(body["spec"]["workerGroupSpecs"],
                                 live["spec"]["workerGroupSpecs"], strict=True):
        for field in ("replicas", "scaleStrategy"):
            if field in live_group:
                group[field] = live_group[field]
    _save("raycluster-predicted.json",
          kube.apply(body, field_manager="gitops-ray", force=True, dry_run=True))


def _record_secret(kube: Kube) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "creds", "namespace": NAMESPACE},
              "stringData": {"token": "s3cr3t-value", "user": "ray"}}
    _save("secret-desired.json", secret)
    _save("secret-live.json", kube.apply(secret, field_manager="gitops-ray", force=True))
    _save("secret-predicted.json",
          kube.apply(secret, field_manager="gitops-ray", force=True, dry_run=True))


def main() -> None:
    with LocalControlPlane() as cp:
        kube = Kube.connect(str(cp.kubeconfig))
        kube.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": NAMESPACE}}, field_manager="tests")
        _record_raycluster(kube)
        _record_secret(kube)


if __name__ == "__main__":
    main()
