#!/usr/bin/env python3
"""The orders app: one FIFO queue of orders, shipped once each, in order per customer.

Producers send each order with ``MessageGroupId`` = the customer id, so that one customer's
orders ship in the order they were placed. ``cdk deploy -c carrier_url=https://...`` names
the carrier's API.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from once_cdk import OnceConsumer, add_cli_outputs

HERE = Path(__file__).resolve().parent
STACK_NAME = "Orders"


def build_app(outdir: str | None = None, context: dict[str, str] | None = None) -> cdk.App:
    """The app with its one stack, cdk-nag's checks on."""
    app = cdk.App(outdir=outdir, context=context)
    stack = cdk.Stack(app, STACK_NAME, description="Orders: shipped once each, in order.")
    orders = OnceConsumer(
        stack,
        "Orders",
        code_dir=HERE / "src",
        handler="orders.handler.lambda_handler",
        service_name="orders",
        fifo=True,
        timeout=cdk.Duration.seconds(30),
        environment={
            "CARRIER_URL": app.node.try_get_context("carrier_url") or "https://carrier.example.com",
        },
    )
    add_cli_outputs(orders)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
