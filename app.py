#!/usr/bin/env python3
"""CDK entry point (``cdk.json`` runs it): synthesizes the ``Once-<stage>`` stack.

``functions/`` goes on ``sys.path`` so that the stack imports the same ``once`` and ``payments``
modules as the Lambda code, whether or not the project is installed in the environment.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "functions"))

from infra.app import build_app

if __name__ == "__main__":
    app, _stack = build_app()
    app.synth()
