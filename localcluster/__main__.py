"""``python -m localcluster [build | --kuberay]``: build the tools, or run a control plane.

``--kuberay`` adds the Ray stack (kube-scheduler, kwok fake nodes, the KubeRay operator).
"""

import sys

from localcluster.build import build_all
from localcluster.controlplane import main

if sys.argv[1:] == ["build"]:
    print("\n".join(build_all()))
else:
    main(sys.argv[1:])
