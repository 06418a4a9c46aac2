"""``python -m localcluster [build]``: build the tools, or run a control plane."""

import sys

from localcluster.build import ensure_controlplane, ensure_helm, require_kubectl
from localcluster.controlplane import main

if sys.argv[1:] == ["build"]:
    print(ensure_controlplane())
    print(ensure_helm())
    print(require_kubectl())
else:
    main()
