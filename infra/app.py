"""Builds the CDK app: reads the stage from the context, adds the stack and the cdk-nag packs.

``app.py`` and the infra tests share this function, so the tests check the very app that
``cdk synth`` runs, cdk-nag included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.stack import OnceStack
from infra.stages import CONTEXT_OVERRIDES, DEFAULT_STAGE, settings_for


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, OnceStack]:
    """The app with one stack, ``Once-<stage>``; the stage comes from context ``stage``."""
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    stage = app.node.try_get_context("stage") or DEFAULT_STAGE
    overrides = {key: app.node.try_get_context(key) for key in CONTEXT_OVERRIDES}
    stack = OnceStack(app, settings=settings_for(stage, overrides))
    add_compliance_checks(app)
    return app, stack


def add_compliance_checks(app: cdk.App) -> None:
    """cdk-nag 3 runs as policy validation plugins: an unacknowledged finding stops synth.

    Findings are acknowledged next to their resource (``Validations.of(construct)``), each
    with its reason; the report lands in ``<outdir>/validation-report.json``.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
