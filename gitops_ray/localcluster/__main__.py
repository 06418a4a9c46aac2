"""``python -m gitops_ray.localcluster [build]``: build the tools, or run a control plane."""

import sys

from gitops_ray.localcluster.build import ensure_controlplane, ensure_helm, require_kubectl
from gitops_ray.localcluster.controlplane import main

if sys.argv[1:] == ["build"]:
    print(ensure_controlplane())
    print(ensure_helm())
    print(require_kubectl())
else:
    main()
