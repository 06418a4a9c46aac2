"""Runtime: the long-running controller (scheduler, watches, webhook, leader election)."""
