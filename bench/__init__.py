"""Benchmarks of gitops-ray at scale, side by side with Argo CD's diff (see bench/README.md)."""
