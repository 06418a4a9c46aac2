"""Stage 4, sync: apply, prune and self-heal without fighting the autoscaler."""
