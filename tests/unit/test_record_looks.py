"""What a look at a record costs (:mod:`gitops_ray.sync.records`): inventory and marks are
decoded once per version of the record and handed out as copies; the status only on demand.

The lookup is a plain function over ConfigMaps held here, standing in for the watch cache
(a dict lookup is all a lookup is); nothing of the API server is involved in a look.
"""

from __future__ import annotations

from typing import Any

from gitops_ray.sync.records import (
    AppRecord,
    InventoryEntry,
    RecordStore,
    _data,
    applied_mark,
    record_name,
)

Manifest = dict[str, Any]
ENTRY = InventoryEntry("ray.io/v1", "RayCluster", "ns", "rc")
KEY = "ray.io/RayCluster:ns/rc"


def configmap(version: str, record: AppRecord) -> Manifest:
    return {"metadata": {"name": record_name("app"), "resourceVersion": version},
            "data": _data("app", record)}


class Held:
    """The one record ConfigMap a lookup finds."""

    def __init__(self, cm: Manifest | None) -> None:
        self.cm = cm

    def __call__(self, api_version: str, kind: str, namespace: str, name: str
                 ) -> Manifest | None:
        return self.cm if self.cm and name == self.cm["metadata"]["name"] else None


def store(held: Held) -> RecordStore:
    return RecordStore(None, "control", lookup=held)  # type: ignore[arg-type]  # no writes


def test_without_status_the_inventory_and_marks_are_those_of_a_full_load() -> None:
    record = AppRecord([ENTRY], {"sync": {"status": "Synced"}}, {KEY: applied_mark("c", "7")})
    records = store(Held(configmap("1", record)))
    full, light = records.load("app"), records.load("app", status=False)
    assert full == record
    assert light == AppRecord(record.inventory, {}, record.applied)


def test_decoded_once_per_version_and_handed_out_as_copies() -> None:
    held = Held(configmap("1", AppRecord([ENTRY], {}, {KEY: "7/aa"})))
    records = store(held)
    first = records.load("app", status=False)
    first.inventory.clear()
    first.applied.clear()  # a caller's copy: the next look is not affected
    assert records.load("app", status=False) == AppRecord([ENTRY], {}, {KEY: "7/aa"})
    # the same version is not decoded again (the API server never changes data under
    # one resourceVersion; here it does, to show the decode was remembered) ...
    held.cm = configmap("1", AppRecord([], {}, {}))
    assert records.load("app", status=False).inventory == [ENTRY]
    # ... and a new version is
    held.cm = configmap("2", AppRecord([], {}, {KEY: "8/bb"}))
    assert records.load("app", status=False) == AppRecord([], {}, {KEY: "8/bb"})


def test_no_record_is_an_empty_one() -> None:
    records = store(Held(None))
    assert records.load("app", status=False) == AppRecord()
    assert records.load_status("app") == {}


def test_a_status_is_decoded_only_when_its_text_names_what_is_asked() -> None:
    status = {"sync": {"status": "Synced"}, "pause": {"until": "2026-01-01T00:00:00Z"}}
    records = store(Held(configmap("1", AppRecord([], status, {}))))
    assert records.load_status("app") == status
    assert records.load_status("app", naming="pause") == status
    assert records.load_status("app", naming="operationState") == {}
