"""The AWS prices every cost figure of ``docs/performance.md`` is computed with, in one
place, so that a price change is one edit and the page says which list it used.

AWS public prices, us-east-1 (US East, N. Virginia), on-demand, no free tier, as listed on
2026-11-27 (the pages render some rates client-side: re-check them before quoting):

- DynamoDB on-demand, standard table class (https://aws.amazon.com/dynamodb/pricing/on-demand/):
  $0.625 per million write request units, $0.125 per million read request units (since the
  on-demand price cut of November 2024), $0.25 per GB-month stored.
- Lambda, x86 (https://aws.amazon.com/lambda/pricing/): $0.0000166667 per GB-second,
  $0.20 per million requests.
- SQS, standard queue (https://aws.amazon.com/sqs/pricing/): $0.40 per million requests;
  every 64 KB chunk of a request's payload is billed as one request.
"""

from __future__ import annotations

#: The date the list below was read, and where.
AS_OF = "2026-11-27"
REGION = "us-east-1"
SOURCES = {
    "DynamoDB": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "Lambda": "https://aws.amazon.com/lambda/pricing/",
    "SQS": "https://aws.amazon.com/sqs/pricing/",
}
#: DynamoDB on-demand, standard table class: USD per million units, per GB-month.
WRU_PER_MILLION = 0.625
RRU_PER_MILLION = 0.125
GB_MONTH = 0.25
#: Lambda, x86: USD per GB-second of billed duration, per million requests (invocations).
LAMBDA_GB_SECOND = 0.0000166667
LAMBDA_REQUESTS_PER_MILLION = 0.20
#: SQS standard queue: USD per million requests (a request per 64 KB chunk of payload).
SQS_REQUESTS_PER_MILLION = 0.40
SQS_CHUNK_BYTES = 64 * 1024


def note() -> str:
    """The price list as one sentence for the page."""
    return (
        f"AWS public prices, {REGION}, on-demand, no free tier, as listed on {AS_OF}: "
        f"DynamoDB ${WRU_PER_MILLION} per million write request units and "
        f"${RRU_PER_MILLION} per million read request units ({SOURCES['DynamoDB']}); "
        f"Lambda x86 ${LAMBDA_GB_SECOND:.10f} per GB-second and "
        f"${LAMBDA_REQUESTS_PER_MILLION:.2f} per million requests ({SOURCES['Lambda']}); SQS "
        f"standard ${SQS_REQUESTS_PER_MILLION:.2f} per million requests, each 64 KB chunk of "
        f"a payload one request ({SOURCES['SQS']})"
    )
