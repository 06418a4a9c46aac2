"""Kept for tests written before :mod:`tests.harness`: import ``eventually`` from there."""

from tests.harness.waiting import eventually

__all__ = ["eventually"]
