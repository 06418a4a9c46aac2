"""How much YAML/JSON one app may make the controller read: every bound, in one place.

Why bounds at all: the controller holds every app in one process with a memory limit
(512Mi in the chart). A 462-byte YAML alias bomb (ten aliases per level, six levels)
expands to a million nodes; once built, every later step (digests, packing, the diff)
walks the expansion and the process is killed, taking every other app down with it. So
input is measured *before* it is built into Python objects, and an input over a bound
fails the app it belongs to (a :class:`~gitops_ray.errors.LimitExceeded` naming the file
and the bound) while every other app keeps syncing.

Why these numbers: each is far above what real config repos hold and far below what
hurts. For scale: a large RayCluster is ~18 KB and ~1,700 YAML nodes, a big CRD ~1 MB and
~60,000 nodes nested ~40 deep, a large Helm chart (kube-prometheus-stack) prints ~4 MB,
and the API server refuses any single object over ~1.5 MiB; a million nodes of real
manifests take ~70 MB once built. Real manifests rarely use
aliases at all. The bounds are enforced by ``render.bounds`` (YAML and JSON text),
``render.tools`` (helm and kustomize output) and ``render.pipeline`` (objects per app).
"""

from __future__ import annotations

MIB = 1024 * 1024

MAX_FILE_BYTES = 8 * MIB
"""One YAML/JSON file read from a config repo (manifest, Application, pod-shape file),
and one ``helm.values`` string."""

MAX_RENDER_BYTES = 32 * MIB
"""All the text one app's render decodes: the sum of a plain directory's files, or what
``helm template`` / ``kubectl kustomize`` prints (the tool is stopped past it)."""

MAX_DEPTH = 100
"""Nesting of mappings and sequences in one document."""

MAX_DOCUMENT_NODES = 250_000
"""Nodes (scalars, mappings, sequences) in one document, aliases counted expanded."""

MAX_NODES = 2_000_000
"""Nodes in one app's render (every file and tool output it decodes), or in one config
file, aliases counted expanded. ~1,200 large RayClusters; ~140 MB once built."""

MAX_ALIASES = 10_000
"""Alias uses (``*name``) in one file or tool output."""

MAX_ALIAS_NODES = 100_000
"""Nodes that aliases add to one file or tool output when expanded."""

MAX_ALIAS_BYTES = 8 * MIB
"""Scalar text that aliases add to one file or tool output when expanded."""

MAX_OBJECTS = 10_000
"""Kubernetes objects one app renders to."""

MAX_CHART_INDEX_BYTES = 32 * MIB
"""A Helm repository's ``index.yaml`` (kuberay-helm's is ~0.1 MB; the largest public
indexes are ~20 MB); setting ``sources.maxIndexSize`` lowers or raises it."""

MAX_CHART_BYTES = 16 * MIB
"""One chart archive (``.tgz``) as fetched; setting ``sources.maxChartSize``."""

MAX_CHART_UNPACKED_BYTES = 64 * MIB
"""One chart archive unpacked (a gzip bomb stops here), and at most
:data:`MAX_CHART_FILES` files in it."""

MAX_CHART_FILES = 10_000

MAX_OCI_MANIFEST_BYTES = 4 * MIB
"""An OCI manifest or tag list page."""
