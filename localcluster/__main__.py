"""``python -m localcluster [build | --kuberay [--kueue] | --argocd]``: build, or run a cluster.

``--kuberay`` adds the Ray stack (kube-scheduler, kwok fake nodes, the KubeRay operator),
``--kueue`` Kueue v0.17.0 on it (:mod:`localcluster.kueue`);
``--argocd`` adds argocd-server (:mod:`localcluster.argocd`) and prints how to use its CLI.
"""

import sys

from localcluster.build import build_all
from localcluster.controlplane import main

if sys.argv[1:] == ["build"]:
    print("\n".join(build_all()))
else:
    main(sys.argv[1:])
