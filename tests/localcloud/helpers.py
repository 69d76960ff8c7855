"""What the local cloud tests share: the synth context and a mapping for a local cloud."""

from __future__ import annotations

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
