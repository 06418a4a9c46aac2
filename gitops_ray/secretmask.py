"""Secret values become masks before any code an app's authors wrote can see them.

Why first, not last: ignore rules are the app's own (its repository's committers write
``ignoreDifferences``), and a ``jqPathExpressions`` entry is any jq program (Argo CD builds
``del(<expr>)`` by concatenation, so ``.x) | .metadata.annotations.x = .data.token | (.y``
is a valid rule). Masking only what the diff finally shows (``data`` and ``stringData``)
let such a rule copy a live Secret's token into an annotation, unmasked, onto the
diff, ``-o json`` and the web page. So every comparison, every ignore rule, the jq worker
and a custom Lua health check see a Secret whose values are masks; sync takes the values
it writes from the real objects, at the paths the rules chose on the masked ones (the
structure is the same, only the leaf strings differ).

The masks are Argo CD's (``++++++++``, then ``++++++++++++``, ...): within one call,
per key, equal values get equal masks across all the objects given, so a comparison
still sees *whether* a value changed, never what it is. A ``stringData`` value gets the
mask of its base64 form, the one it has once stored in ``data``
(:func:`merge_string_data` moves masks without encoding them again). The
``last-applied-configuration`` annotation (``kubectl apply`` puts the whole Secret in it)
becomes a mask too.
"""

from __future__ import annotations

import base64
from typing import Any

from gitops_ray.types import Manifest, ResourceKey

MASK, MASK_STEP = "+" * 8, "+" * 4
SECTIONS = ("data", "stringData")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def is_secret(key: ResourceKey) -> bool:
    return key.group == "" and key.kind == "Secret"


def masked(*docs: Manifest | None) -> tuple[Manifest | None, ...]:
    """Copies of ``docs`` (Secrets) with every value masked; the same object, one copy.

    Only the top level, ``metadata``, its annotations and the two sections are copied;
    the rest is shared with the originals (nothing downstream edits it in place: the
    comparison copies what it normalises).
    """
    copies: dict[int, Manifest] = {}
    for doc in docs:
        if doc is not None and id(doc) not in copies:
            copies[id(doc)] = _own_parts(doc)
    numbers: dict[str, dict[str, str]] = {}  # key name -> stored form -> mask
    for doc in copies.values():
        for section in SECTIONS:
            values = doc.get(section)
            if isinstance(values, dict):
                doc[section] = {name: _mask(numbers.setdefault(str(name), {}),
                                            _stored(section, value))
                                for name, value in values.items()}
    return tuple(None if d is None else copies[id(d)] for d in docs)


def merge_string_data(secret: Manifest) -> None:
    """A masked Secret's ``stringData`` masks moved into ``data`` (in place).

    As the API server stores them: ``stringData`` wins over ``data`` for a key in both.
    """
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data")
        data = secret["data"] = dict(data) if isinstance(data, dict) else {}
        data.update(string_data)
    if "data" in secret and not secret["data"]:
        del secret["data"]


def _mask(known: dict[str, str], stored: str) -> str:
    return known.setdefault(stored, MASK + MASK_STEP * len(known))


def _stored(section: str, value: Any) -> str:
    """The value as ``data`` holds it: ``stringData`` is stored base64-encoded."""
    text = str(value)
    return base64.b64encode(text.encode()).decode() if section == "stringData" else text


def _own_parts(doc: Manifest) -> Manifest:
    out = dict(doc)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = meta = dict(meta)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {**annotations, LAST_APPLIED: MASK}
    return out
