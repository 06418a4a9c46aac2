"""Allow ``python -m gitops_ray``."""

from gitops_ray.cli import main

main()
