"""What the tests share: one way to wait, to commit to git, to start a controller, to run the CLI.

Why a package: the tiers grew their own copies (four ``Cli`` classes, two controller-process
harnesses, nine settings dicts) and imported each other's test modules for the rest. The
helpers live here, the fixtures that hand them out in ``tests/conftest.py``:

- :mod:`.waiting`: :func:`eventually`, the only way a test waits.
- :mod:`.git`: :class:`GitRepo`, a bare repository and a work tree (real git).
- :mod:`.settings`: :func:`controller_settings`, the settings a test controller runs with.
- :mod:`.runtime`: :class:`Controller`, an in-process :class:`Runtime` (fixture
  ``start_controller``), and the Application and push payloads it is fed.
- :mod:`.process`: :class:`ControllerProcess`, ``python -m gitops_ray run`` as a separate
  process (fixtures ``controller_process`` and ``processes``).
- :mod:`.cli`: :class:`Cli`, the ``gitops-ray`` commands against the test cluster, and
  :func:`app_yaml`, the Application a CLI test commits.
- :mod:`.pipeline`: :class:`Env`, the sync stages without a controller (fixture ``env``).
- :mod:`.namespaces`: :func:`fresh_namespace`, one per test (fixture ``namespace``).
"""

from tests.harness.waiting import eventually

__all__ = ["eventually"]
