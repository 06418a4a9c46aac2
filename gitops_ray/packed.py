"""Objects at rest, packed: what the controller keeps between passes, at a tenth the memory.

Why: a RayCluster decoded from JSON is a tree of about 1,500 Python objects, some 100 KB
for 20 KB of JSON. The controller keeps two per managed object for as long as it runs
(git's, rendered once per commit, and the live one from the watch), so at 1,000
RayClusters the decoded trees alone were over 200 MB. ``marshal`` packs one into about
12 KB (a string repeated inside the object is stored once), packs in tens of
microseconds and unpacks faster than ``json.loads``.

Callers unpack only where a whole object is needed: a diff the memo cannot answer, a
sync, the health of a new resourceVersion. A no-op pass reads keys, digests and
resourceVersions, which sit next to the blob unpacked. Every unpack is a private copy, so
the caller may change it. Argo CD's cluster cache makes the same trade: it keeps a little
of each live object and reads the rest when it needs it.
"""

from __future__ import annotations

import json
import marshal
from typing import cast

from gitops_ray.types import Manifest


def pack(obj: Manifest) -> bytes:
    """``obj`` as bytes. Manifests hold JSON types; anything else goes through JSON first."""
    try:
        return marshal.dumps(obj)
    except ValueError:  # a dict subclass, a datetime: what the API server would get
        return marshal.dumps(json.loads(json.dumps(obj, default=str)))


def unpack(blob: bytes) -> Manifest:
    """A fresh copy of the packed object."""
    return cast(Manifest, marshal.loads(blob))
