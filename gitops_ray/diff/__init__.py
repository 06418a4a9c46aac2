"""Stage 3, diff: compare desired with live, ignoring what other writers own.

Pure functions only. ``ignoreDifferences`` follows Argo CD exactly; built-in rules keep
the Ray autoscaler's fields out of the comparison.
"""
