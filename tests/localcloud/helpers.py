"""What the local cloud tests share: the synth context, a mapping for a local cloud, and a
team's project written in a temporary directory."""

from __future__ import annotations

import textwrap
from pathlib import Path

from oncecli.localcloud.cloud import LocalCloud
from oncecli.localcloud.mapping import Mapping
from oncecli.project import BUILD_DIR

#: Every test here uses the same synthesized template (one synth, cached in build/): a
#: 2 s function timeout makes the visibility timeout 12 s, so redeliveries take seconds.
CONTEXT = {"function_timeout_s": "2"}


def mapping_for(cloud: LocalCloud) -> Mapping:
    return Mapping(
        cloud.mapping_config(),
        cloud.function_config(),
        sqs_factory=lambda: cloud.client("sqs"),
        workers=2,
        env=cloud.worker_env(),
        log_path=str(BUILD_DIR / "workers-test.log"),
    )


def write_project(root: Path, files: dict[str, str]) -> Path:
    """A team's project in a temporary directory: each file's text, dedented, at its path
    under ``root`` (folders made as needed)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root
