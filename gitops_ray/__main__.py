"""Allow ``python -m gitops_ray`` (the same entry point as the ``gitops-ray`` script)."""

from gitops_ray.entry import main

main()
