"""Reconcile: run the pipeline stages for one app, one pass, and record the outcome."""
