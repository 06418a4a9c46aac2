"""Stage 1, source: fetch the config repository at a target revision.

Resolves ``targetRevision`` to a commit, keeps a local cache keyed by repository URL and
hands later stages a checkout they can read but never escape.
"""

from gitops_ray.redact import redact
from gitops_ray.source.auth import Credentials, env_lookup, in_scope
from gitops_ray.source.git import (
    Checkout,
    GitSource,
    SourceAuthError,
    SourceTimeout,
    UnknownRevision,
    UnreachableRemote,
)

__all__ = ["Checkout", "Credentials", "GitSource", "SourceAuthError", "SourceTimeout",
           "UnknownRevision", "UnreachableRemote", "env_lookup", "in_scope", "redact"]
