"""Every name and default that the Lambda layer and the CDK stack must agree on.

The CDK construct (``once_cdk``) imports this module too, so the TTL attribute it enables,
the environment variables it sets and the metric names it alarms on are the very strings the
code reads and writes. Change a name here and both sides follow.
"""

from typing import Final

# --- Record attributes (one item per business key) -------------------------------------
ATTR_ID: Final = "id"
ATTR_STATUS: Final = "status"
ATTR_FENCE: Final = "fence"
ATTR_OWNER: Final = "owner"
ATTR_LEASE_EXPIRES_AT: Final = "lease_expires_at"
ATTR_EXPIRES_AT: Final = "expires_at"
ATTR_PAYLOAD_HASH: Final = "payload_hash"
ATTR_RESULT: Final = "result"
ATTR_ERROR: Final = "error"
ATTR_MESSAGE_ID: Final = "message_id"
ATTR_UPDATED_AT: Final = "updated_at"
#: On a record FAILED by a quarantined takeover (error ``LEASE_EXPIRED``): the fence of the
#: claim that first quarantined the crashed attempt. Every DLQ message of that crash carries
#: it as ``once.fence``; further copies quarantined before a review keep it.
ATTR_REVIEW_FENCE: Final = "review_fence"
#: On a COMPLETED record: the messages business code staged with ``attempt.send``, committed
#: with the record and owed until sent; removed by a fenced write once all are sent.
ATTR_OUTBOX: Final = "outbox"

#: The idempotency table's TTL attribute (epoch seconds).
TTL_ATTRIBUTE: Final = ATTR_EXPIRES_AT
#: Partition key of the idempotency table.
PARTITION_KEY: Final = ATTR_ID

# --- Record statuses ---------------------------------------------------------------------
STATUS_IN_PROGRESS: Final = "IN_PROGRESS"
STATUS_COMPLETED: Final = "COMPLETED"
STATUS_FAILED: Final = "FAILED"

# --- Environment variables ---------------------------------------------------------------
ENV_TABLE_NAME: Final = "IDEMPOTENCY_TABLE_NAME"
ENV_DLQ_URL: Final = "DLQ_URL"
ENV_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_RETENTION_S: Final = "RECORD_RETENTION_S"
#: The retry backoff the construct derived the DLQ's ``maxReceiveCount`` from, declared once:
#: ``<base_s>,<max_s>`` or ``off`` (``backoff.to_env``); ``make_handler`` without backoff
#: arguments runs it.
ENV_BACKOFF: Final = "ONCE_BACKOFF"

# --- Defaults ------------------------------------------------------------------------------
#: The service of the runtime's own logs and metrics when POWERTOOLS_SERVICE_NAME is unset.
DEFAULT_SERVICE_NAME: Final = "once"
DEFAULT_METRICS_NAMESPACE: Final = "Once"
DEFAULT_LEASE_MARGIN_S: Final = 10
DEFAULT_LOCK_TIMEOUT_S: Final = 900
#: Records (keys, or FIFO groups) of one batch in flight at once; threads start only as a
#: batch needs them, so a batch of 10 uses 10. Batches of 100 and 1,000 got faster up to 32
#: to 64 and no faster beyond (docs/performance.md, max_workers sweep): the consumer's CPU per
#: record is then the bound.
DEFAULT_MAX_WORKERS: Final = 64
DEFAULT_MIN_REMAINING_MS: Final = 500
#: Retry backoff through the visibility timeout: min(max, base * 2**(receives - 1)) s.
DEFAULT_BACKOFF_BASE_S: Final = 2
DEFAULT_BACKOFF_MAX_S: Final = 300
DAY_S: Final = 86_400
#: The most records Lambda hands a FIFO consumer in one batch (the construct refuses more,
#: the testing kit delivers no more).
FIFO_MAX_BATCH_SIZE: Final = 10
#: SQS keeps a message 4 days unless told otherwise.
DEFAULT_SOURCE_RETENTION_S: Final = 4 * DAY_S
#: The DLQ keeps a message 14 days, the most SQS allows and longer than the source queue.
DLQ_RETENTION_S: Final = 14 * DAY_S
#: A record outlives both queues, so that a late redrive is still deduplicated.
DEFAULT_RETENTION_S: Final = DEFAULT_SOURCE_RETENTION_S + DLQ_RETENTION_S + DAY_S
#: Business results larger than this are stored as size and sha256 only.
RESULT_CAP_BYTES: Final = 64 * 1024
#: Longest business key accepted (DynamoDB allows 2048 bytes for the whole record id).
MAX_KEY_BYTES: Final = 1024
#: Stored error text is cut to this many characters.
ERROR_MAX_CHARS: Final = 500

# --- Quarantine (message attributes on a message sent to the DLQ) -------------------------
QUARANTINE_ATTR_MESSAGE_ID: Final = "once.original_message_id"
QUARANTINE_ATTR_REASON: Final = "once.reason"
QUARANTINE_ATTR_ERROR: Final = "once.error"
#: On a quarantine for review only (``REVIEW_REASONS``): the record's review fence
#: (``ATTR_REVIEW_FENCE``). A redriven message counts as reviewed only while the record is
#: still FAILED by that crash.
QUARANTINE_ATTR_FENCE: Final = "once.fence"
#: The record's business key, where the body yielded one (not for ``INVALID_JSON``,
#: ``INVALID_KEY``...): ``once dlq`` lists it, ``once inspect KEY`` takes it. Characters SQS
#: refuses in a String value are written as ``\uXXXX`` (``payload.clean_text``).
QUARANTINE_ATTR_KEY: Final = "once.key"
#: On a DLQ copy that could not keep every attribute of the message: the names it dropped
#: (a JSON list), the team's last ones first; once's own and the identity are never dropped.
QUARANTINE_ATTR_DROPPED: Final = "once.dropped"
#: ``once.reason`` values: why a message was quarantined.
#: A staged write's condition refused at commit, on an element staged with
#: ``refused="quarantine"`` (also the error stored on the FAILED record, whatever the choice).
REASON_WRITE_REFUSED: Final = "WRITE_REFUSED"
REASON_INVALID_JSON: Final = "INVALID_JSON"
REASON_INVALID_ENVELOPE: Final = "INVALID_ENVELOPE"
REASON_INVALID_KEY: Final = "INVALID_KEY"
REASON_INVALID_PAYLOAD: Final = "INVALID_PAYLOAD"
REASON_CONFLICT: Final = "CONFLICT"
#: The error of a claim of once's own record released because the message's Powertools
#: record was not taken with it (``once.powertools``): ``POWERTOOLS_RECORD: <why>``.
REASON_POWERTOOLS: Final = "POWERTOOLS_RECORD"
REASON_PERMANENT_ERROR: Final = "PERMANENT_ERROR"
#: Also the error stored on the record of a quarantined takeover.
REASON_LEASE_EXPIRED: Final = "LEASE_EXPIRED"
#: Under ``on_expired_lease="quarantine"``: business code returned, and its commit certainly
#: landed nothing for a cause other than a staged write's condition (a missing permission, a
#: deleted table, a request DynamoDB does not accept, throttling or conflicts past the retries).
REASON_COMMIT_FAILED: Final = "COMMIT_FAILED"
#: The reasons of a quarantine for review, under ``on_expired_lease="quarantine"``: business
#: code may have had an effect that cannot be fenced, and a person checks it before a redrive
#: (the message carries ``once.fence``).
REVIEW_REASONS: Final = (REASON_LEASE_EXPIRED, REASON_WRITE_REFUSED, REASON_COMMIT_FAILED)

# --- The outbox (message attributes on what ``attempt.send`` sends) ------------------------
#: The operation that sent the message: its record id (``<service>#<key>``, escaped) and a
#: token of its commit (``once.identity.source_of``).
OUTBOX_ATTR_SOURCE: Final = "once.source"
#: The message's index in that operation's outbox.
OUTBOX_ATTR_SEQ: Final = "once.seq"
#: ``make_handler(key=SOURCE_KEY)``: a downstream consumer's business key is the identity of
#: the upstream outbox message, ``<once.source>#<once.seq>`` from its attributes. (``#`` is
#: not JMESPath, so no key expression can mean this.)
SOURCE_KEY: Final = "once.source#once.seq"
#: An event has no message attributes: an event an outbox sends to an EventBridge bus carries
#: the identity in its detail, as ``"once": {"source": <once.source>, "seq": <once.seq>}``
#: (``effects.event_detail``), where a rule's target keeps it (``$.detail.once``).
EVENT_IDENTITY: Final = "once"
EVENT_IDENTITY_SOURCE: Final = "source"
EVENT_IDENTITY_SEQ: Final = "seq"

# --- DynamoDB's limits on one commit ----------------------------------------------------------
#: Elements in one TransactWriteItems, the record's completion included.
TRANSACTION_MAX_ELEMENTS: Final = 100
#: Aggregate size of the items in one transaction.
TRANSACTION_MAX_BYTES: Final = 4 * 1024 * 1024
#: Size of one item.
ITEM_MAX_BYTES: Final = 400 * 1024

# --- Metric names (CloudWatch EMF), one per outcome ------------------------------------------
METRIC_PROCESSED: Final = "Processed"
METRIC_DUPLICATE: Final = "Duplicate"
METRIC_BUSY: Final = "Busy"
METRIC_CONFLICT: Final = "Conflict"
METRIC_FAILED: Final = "Failed"
METRIC_QUARANTINED: Final = "Quarantined"
METRIC_LEASE_LOST: Final = "LeaseLost"
#: A claim took over an expired lease and, by policy, quarantined instead of running.
METRIC_LEASE_EXPIRED: Final = "LeaseExpired"
METRIC_TAKEOVER: Final = "Takeover"
METRIC_DEADLINE: Final = "DeadlineSkipped"
#: once's own code raised while handling a record (a bug in once): that record only is
#: reported failed; counted beside its outcome, like ``Takeover``.
METRIC_INTERNAL_ERROR: Final = "InternalError"
#: COMPLETED, but its outbox is not all sent: the message is redelivered to send it.
METRIC_OWED: Final = "Owed"
#: A delivery found its record COMPLETED with messages owed and sent them.
METRIC_OWED_SENT: Final = "OwedSent"
#: A staged write's condition was refused at commit: nothing landed; counted beside its outcome.
METRIC_WRITE_REFUSED: Final = "WriteRefused"

# --- CDK context the ``once`` command sets ------------------------------------------------
#: Bundles a consumer's dependencies for this machine, not Lambda's: the local cloud sets it
#: when it synthesizes a team's app (``once_cdk.bundling``).
HOST_CONTEXT: Final = "once:bundle-for-host"

# --- Stack outputs (``once_cdk.add_cli_outputs`` writes them, the ``once`` command reads) ---
#: One consumer's outputs. A stack with one consumer holds them under these keys; a stack
#: with several, each consumer's under its construct id first (``RefundsQueueUrl``).
OUTPUT_KEYS: Final = (
    "QueueUrl",
    "DlqUrl",
    "IdempotencyTableName",
    "FunctionName",
    "DashboardUrl",
    # The records' key prefix (``<service>#<key>``): what ``once inspect KEY`` looks up.
    "ServiceName",
)
#: The outputs without which a consumer cannot be operated (the example's ledger is none).
OUTPUT_REQUIRED: Final = ("QueueUrl", "DlqUrl", "IdempotencyTableName")
#: Each output's description begins so, with the consumer's construct id after it: how the
#: command names a consumer whose outputs have the plain keys.
OUTPUT_DESCRIPTION_PREFIX: Final = "once consumer "
