"""Fixture files read at collection time."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def load_yaml(path: Path) -> Any:
    """One YAML document, parsed by libyaml: every xdist worker collects the health
    modules' ~300 fixture documents, and the pure-Python parser cost each ~2 s of CPU."""
    return yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
