"""A snapshot of each variant's template, asset hashes masked.

A change to the stack shows up here as a diff to review. Regenerate after a deliberate
change with ``UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/infra``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "snapshots"
_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def masked(template: dict) -> dict:
    """The template with every asset hash replaced by a fixed marker."""
    return json.loads(_ASSET_HASH.sub("<asset-hash>", json.dumps(template)))


def test_template_matches_its_snapshot(synth):
    path = SNAPSHOTS / f"Once-{synth.name}.json"
    current = masked(synth.template)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    assert path.exists(), f"no snapshot {path.name}: run with UPDATE_SNAPSHOTS=1"
    assert json.loads(path.read_text()) == current, (
        f"{path.name} differs from the synthesized template; if the change is deliberate, "
        "regenerate with UPDATE_SNAPSHOTS=1"
    )


def test_snapshots_hold_no_asset_hash():
    for path in SNAPSHOTS.glob("*.json"):
        assert not _ASSET_HASH.search(path.read_text()), path.name
