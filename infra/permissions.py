"""The exact IAM actions the consumer gets, per resource, in one place.

The stack writes these as explicit statements (never ``grant_*``), and the tests assert the
synthesized policy against the same lists, so widening a permission is a visible change here.
"""

from __future__ import annotations

from typing import Final

#: store.py: claim/complete/fail are conditional UpdateItem calls; GetItem reads a record.
#: Never DeleteItem (deleting would reset the fence), Scan, Query or Batch*.
IDEMPOTENCY_TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:UpdateItem")

#: payments/ledger.py: one TransactWriteItems with a conditional Put (the entry) and an
#: Update (the balance). IAM authorizes a transaction by its per-item actions; GetItem reads
#: the entry that refused the put, and the balance.
LEDGER_TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")

#: The event source mapping polls the source queue with the function's role (the actions of
#: AWS's AWSLambdaSQSQueueExecutionRole, on this queue only).
SOURCE_QUEUE_ACTIONS: Final = (
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
)

#: once/quarantine.py sends a permanent failure to the DLQ at once.
DLQ_ACTIONS: Final = ("sqs:SendMessage",)

#: The function writes its logs to its own log group only.
LOG_GROUP_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")

#: Added by CDK for Tracing.ACTIVE; X-Ray has no resource-level permissions.
XRAY_ACTIONS: Final = ("xray:PutTelemetryRecords", "xray:PutTraceSegments")
