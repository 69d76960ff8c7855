"""The exact IAM actions an ``OnceConsumer``'s function gets, per resource, in one place.

The construct writes these as explicit statements (never ``grant_*``), and the tests assert
the synthesized policy against the same lists, so widening a permission is a visible change
here. The user's own resources are the user's to grant.
"""

from __future__ import annotations

from typing import Final

#: once/store.py: claim/complete/fail are conditional UpdateItem calls, and the record a
#: refused write finds comes back with it (ReturnValuesOnConditionCheckFailure). GetItem: under
#: ``effects="staged"``, a copy whose staged write was refused (or whose business code raised
#: a PermanentError) reads its record once, strongly consistent, because DynamoDB does not
#: promise to name the record's own failed condition in a canceled transaction (only that
#: the reasons are ordered as the elements: https://docs.aws.amazon.com/amazondynamodb/latest/
#: APIReference/API_CancellationReason.html; ``RecordStore.staged_refusal``). Never
#: DeleteItem (deleting would reset the fence), Scan, Query or Batch*.
IDEMPOTENCY_TABLE_ACTIONS: Final = ("dynamodb:GetItem", "dynamodb:UpdateItem")

#: The event source mapping polls the source queue with the function's role (the actions of
#: AWS's AWSLambdaSQSQueueExecutionRole, on this queue only), and the runtime's retry backoff
#: sets a failed record's visibility with ChangeMessageVisibilityBatch, which IAM authorizes
#: as sqs:ChangeMessageVisibility.
SOURCE_QUEUE_ACTIONS: Final = (
    "sqs:ChangeMessageVisibility",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
)

#: once/quarantine.py sends a permanent failure to the DLQ at once.
DLQ_ACTIONS: Final = ("sqs:SendMessage",)

#: An existing source queue (``queue=``) encrypted with a customer managed KMS key: the
#: mapping receives with the function's role, and a message is decrypted as it is received
#: ("kms:Decrypt" to receive from an encrypted queue; "kms:GenerateDataKey" and "kms:Decrypt"
#: to send to one: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/
#: sqs-key-management.html). On that key only; the queues the construct builds are
#: SQS-managed (SSE-SQS) and need no KMS permission, nor does SQS's AWS managed key.
SOURCE_QUEUE_KEY_ACTIONS: Final = ("kms:Decrypt",)
#: The quarantine sends to the DLQ of such a queue, encrypted with a customer managed key.
DLQ_KEY_ACTIONS: Final = ("kms:Decrypt", "kms:GenerateDataKey")

#: The function writes its logs to its own log group only.
LOG_GROUP_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")

#: Added by CDK for Tracing.ACTIVE; X-Ray has no resource-level permissions.
XRAY_ACTIONS: Final = ("xray:PutTelemetryRecords", "xray:PutTraceSegments")

#: What a business write staged with ``attempt.write`` needs, by its element's operation:
#: once commits it in a TransactWriteItems, and IAM authorizes each element by the action of
#: its operation on its table ("Permissions for Put, Update, Delete, and Get actions are
#: governed by the permissions used for the underlying PutItem, UpdateItem, DeleteItem, and
#: GetItem operations. For the ConditionCheck action, you can use the
#: dynamodb:ConditionCheckItem permission": https://docs.aws.amazon.com/amazondynamodb/latest/
#: developerguide/transaction-apis-iam.html). CDK's ``grant_write_data`` holds no
#: ConditionCheckItem.
STAGED_WRITE_ACTIONS: Final = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}

#: ``make_handler(powertools=...)``: the team's Powertools idempotency table, while it
#: migrates (``once.powertools``). The claim puts the message's record INPROGRESS (PutItem);
#: the commit completes it in once's TransactWriteItems (an Update element under two-phase,
#: a Put under ``effects="staged"``, each authorized as its operation, as above); a staged
#: copy that ended without its commit reads it (GetItem, strongly consistent). Never
#: DeleteItem: a Powertools record is left to its own expiry.
POWERTOOLS_RECORDS_ACTIONS: Final = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)
