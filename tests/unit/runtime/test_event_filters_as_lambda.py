"""Lambda's event filtering on an SQS mapping, held to AWS's pages (``once.event_filters``,
which ``OnceConsumer(filters=)``, ``once_env`` and the local cloud share).

Each case cites the page it comes from:

- EF: "Control which events Lambda sends to your function",
  https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html
- SQS: "Using event filtering with an Amazon SQS event source",
  https://docs.aws.amazon.com/lambda/latest/dg/with-sqs-filtering.html
- API: https://docs.aws.amazon.com/lambda/latest/api/API_Filter.html
- CFN: https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-filtercriteria.html

Then properties, with Hypothesis: filters are ORed, a body is judged by its format, and the
text a pattern deploys as reads back as the same pattern.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from once import event_filters as ef

SQS_EXAMPLE = {"RecordNumber": 1234, "TimeStamp": "yyyy-mm-ddThh:mm:ss", "RequestCode": "AAAA"}


def record(body: Any) -> dict[str, Any]:
    """An SQS event record as Lambda builds it (SQS's example record), with this body."""
    return {
        "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
        "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183"},
        "messageAttributes": {},
        "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-west-2:123456789012:my-queue",
        "awsRegion": "us-west-2",
    }


def kept(patterns: list[dict[str, Any]], body: Any) -> bool:
    return ef.keeps(ef.patterns(patterns), record(body))


# --- SQS's own examples ------------------------------------------------------------------------


def test_sqs_request_code_example_keeps_bbbb_only() -> None:
    """SQS: '{ "body" : { "RequestCode" : [ "BBBB" ] } }'."""
    pattern = {"body": {"RequestCode": ["BBBB"]}}
    assert not kept([pattern], SQS_EXAMPLE)
    assert kept([pattern], {**SQS_EXAMPLE, "RequestCode": "BBBB"})


def test_sqs_record_number_example_keeps_numbers_above_9999() -> None:
    """SQS: '{ "body" : { "RecordNumber" : [ { "numeric": [ ">", 9999 ] } ] } }'."""
    pattern = {"body": {"RecordNumber": [{"numeric": [">", 9999]}]}}
    assert not kept([pattern], SQS_EXAMPLE)
    assert kept([pattern], {**SQS_EXAMPLE, "RecordNumber": 10000})
    assert not kept([pattern], {**SQS_EXAMPLE, "RecordNumber": "10000"})  # a string, no number


# --- EF's table of comparison operators, each on a body ----------------------------------------

#: EF's "summary of all the comparison operators available for Lambda event filtering": its
#: rule syntax, under ``body``, and a body it keeps and one it drops.
OPERATORS = [
    ("Null", {"UserID": [None]}, {"UserID": None}, {"UserID": "u"}),
    ("Empty", {"LastName": [""]}, {"LastName": ""}, {"LastName": "Doe"}),
    ("Equals", {"Name": ["Alice"]}, {"Name": "Alice"}, {"Name": "alice"}),
    ("Equals (ignore case)", {"Name": [{"equals-ignore-case": "alice"}]},
     {"Name": "ALICE"}, {"Name": "Bob"}),
    ("And", {"Location": ["New York"], "Day": ["Monday"]},
     {"Location": "New York", "Day": "Monday"}, {"Location": "New York", "Day": "Sunday"}),
    ("Or", {"PaymentType": ["Credit", "Debit"]}, {"PaymentType": "Debit"},
     {"PaymentType": "Cash"}),
    ("Not", {"Weather": [{"anything-but": ["Raining"]}]}, {"Weather": "Sunny"},
     {"Weather": "Raining"}),
    ("Numeric (equals)", {"Price": [{"numeric": ["=", 100]}]}, {"Price": 100}, {"Price": 101}),
    ("Numeric (range)", {"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 20},
     {"Price": 10}),
    ("Exists", {"ProductName": [{"exists": True}]}, {"ProductName": "x"}, {"Other": "x"}),
    ("Does not exist", {"ProductName": [{"exists": False}]}, {"Other": "x"},
     {"ProductName": "x"}),
    ("Begins with", {"Region": [{"prefix": "us-"}]}, {"Region": "us-east-1"},
     {"Region": "eu-west-1"}),
    ("Ends with", {"FileName": [{"suffix": ".png"}]}, {"FileName": "a.png"},
     {"FileName": "a.jpg"}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "rule", "matching", "other"), OPERATORS)
def test_every_operator_of_lambdas_table_is_taken_and_matches(name, rule, matching, other):
    pattern = {"body": rule}
    assert ef.problems([pattern]) == [], name
    assert kept([pattern], matching), name
    assert not kept([pattern], other), name


def test_or_across_fields_is_taken_inside_the_body() -> None:
    """EF, Or (multiple fields): '"$or": [ { "Location": [ "New York" ] }, { "Day": [
    "Monday" ] } ]'."""
    pattern = {"body": {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}}
    assert kept([pattern], {"Location": "Paris", "Day": "Monday"})
    assert not kept([pattern], {"Location": "Paris", "Day": "Sunday"})


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ({"Path": [{"wildcard": "*/lib/*"}]}, "'wildcard'"),
        ({"Ip": [{"cidr": "10.0.0.0/24"}]}, "'cidr'"),
        ({"Region": [{"anything-but": {"prefix": "us-"}}]}, "'anything-but' of 'prefix'"),
        ({"File": [{"anything-but": {"suffix": ".png"}}]}, "'anything-but' of 'suffix'"),
        ({"State": [{"anything-but": {"equals-ignore-case": "x"}}]},
         "'anything-but' of 'equals-ignore-case'"),
        ({"Path": [{"anything-but": {"wildcard": "*/lib/*"}}]}, "'anything-but' of 'wildcard'"),
        ({"Service": [{"prefix": {"equals-ignore-case": "eventb"}}]},
         "'prefix' of 'equals-ignore-case'"),
        ({"Service": [{"suffix": {"equals-ignore-case": "bridge"}}]},
         "'suffix' of 'equals-ignore-case'"),
    ],
)  # fmt: skip
def test_eventbridge_operators_outside_lambdas_table_are_refused(rule, named) -> None:
    """EventBridge takes each of these; EF's table of Lambda's operators lists none."""
    (problem,) = ef.problems([{"body": rule}])
    assert f"uses {named}, which Lambda's event filtering does not offer" in problem


def test_numbers_match_at_their_text() -> None:
    """EF: 'For numbers, Lambda also uses string representation. For example, 300, 300.0,
    and 3.0e2 are not considered equal.'"""
    pattern = {"body": {"n": [300]}}
    assert kept([pattern], '{"n": 300}')
    assert not kept([pattern], '{"n": 300.0}')


def test_strings_match_character_by_character() -> None:
    """EF: 'for strings, Lambda uses exact character-by-character matching without
    case-folding or any other string normalization'."""
    assert not kept([{"body": {"Name": ["Alice"]}}], {"Name": "ALICE"})


def test_exists_does_not_match_an_intermediate_node() -> None:
    """EF: '{ "person": { "address": [ { "exists": true } ] } }' finds no match when address
    is an object."""
    body = {"person": {"name": "John Doe", "age": 30, "address": {"street": "123 Main St"}}}
    assert not kept([{"body": {"person": {"address": [{"exists": True}]}}}], body)
    assert kept([{"body": {"person": {"address": {"street": [{"exists": True}]}}}}], body)


# --- which records a mapping keeps --------------------------------------------------------------


def test_filters_are_ored() -> None:
    """EF: 'Your filters are logically ORed together. If a record from your event source
    satisfies one or more of your filters, Lambda includes the record ... If none of your
    filters are satisfied, Lambda discards the record.'"""
    filters = [{"body": {"type": ["order"]}}, {"body": {"type": ["refund"]}}]
    assert kept(filters, {"type": "order"}) and kept(filters, {"type": "refund"})
    assert not kept(filters, {"type": "invoice"})


#: SQS's table: (incoming body, pattern for body, kept?) for the rows a mapping can hold (the
#: rows "No filter pattern for data properties" need a pattern on another field, which an
#: SQS mapping does not take: below).
BODY_FORMATS = [
    ("Result: ok", {"body": [{"prefix": "Result: "}]}, True),  # plain string, plain string
    ("Result: ok", {"body": {"Result": [{"exists": False}]}}, False),  # plain string, JSON
    ('{"Result": 1}', {"body": [{"prefix": "{"}]}, False),  # JSON, plain string
    ('{"Result": 1}', {"body": {"Result": [1]}}, True),  # JSON, JSON
]


@pytest.mark.parametrize(("body", "pattern", "expected"), BODY_FORMATS)
def test_a_body_is_filtered_in_its_own_format_and_dropped_on_a_mismatch(body, pattern, expected):
    """SQS: 'Lambda automatically evaluates the format of the incoming message body and of
    your filter pattern for body. If there is a mismatch, Lambda drops the message.' Even a
    pattern that EventBridge would match on the other format (``exists: false`` on a string
    body has no field at all) is a mismatch."""
    assert kept([pattern], body) is expected


def test_a_mismatched_filter_leaves_the_others_to_keep_the_message() -> None:
    """The mismatch is judged filter by filter (SQS speaks of 'your filter pattern for
    body'), and the filters are ORed (EF)."""
    filters = [{"body": {"type": ["order"]}}, {"body": [{"prefix": "ORDER:"}]}]
    assert kept(filters, "ORDER:o-1")
    assert kept(filters, {"type": "order"})
    assert not kept(filters, "REFUND:r-1")


@pytest.mark.parametrize(
    "field", ["messageAttributes", "attributes", "messageId", "eventSource", "awsRegion"]
)
def test_a_pattern_on_another_field_than_the_body_is_refused(field) -> None:
    """SQS: 'Amazon SQS event source mappings only support filtering on the body key.' A
    mapping that deployed one would delete every message the field never matched."""
    (problem,) = ef.problems([{field: {"type": ["order"]}}])
    assert f"names {field!r}" in problem and "'body' only" in problem
    assert ef.problems([{"$or": [{"body": {"a": ["x"]}}, {field: ["y"]}]}]) != []


def test_no_filters_keep_every_record() -> None:
    assert ef.keeps((), record("anything"))


# --- what Lambda refuses ------------------------------------------------------------------------


def test_up_to_ten_filters_are_taken_and_eleven_refused() -> None:
    """EF: 'By default, you can define up to five different filters for a single event
    source mapping ... you can request a quota increase for up to 10 filters ... If you
    attempt to add more filters than your current quota permits, Lambda will return an
    error'."""
    many = [{"body": {"n": [i]}} for i in range(ef.MAX_FILTERS + 1)]
    assert ef.problems(many[: ef.MAX_FILTERS]) == []
    (problem,) = ef.problems(many)
    assert problem.startswith("11 filters: an event source mapping takes at most 10")
    assert (ef.DEFAULT_MAX_FILTERS, ef.MAX_FILTERS) == (5, 10)


def test_a_pattern_of_4096_characters_is_taken_and_one_more_refused() -> None:
    """API: Pattern, 'Maximum length of 4096'; measured on the text deployed."""
    frame = len(ef.pattern_text({"body": {"a": [""]}}))
    longest = {"body": {"a": ["x" * (ef.MAX_PATTERN_CHARS - frame)]}}
    assert len(ef.pattern_text(longest)) == 4096
    assert ef.problems([longest]) == []
    (problem,) = ef.problems([{"body": {"a": ["x" * (ef.MAX_PATTERN_CHARS - frame + 1)]}}])
    assert "is 4097 characters of JSON: Lambda takes a pattern of at most 4096" in problem


def test_no_filter_and_a_repeated_one_are_refused() -> None:
    """CFN: Filters, 'Minimum: 1'; its resource schema holds the items unique."""
    assert "filters=[]: pass at least one pattern" in ef.problems([])[0]
    same = {"body": {"a": ["x"]}}
    assert ef.problems([same, dict(same)]) == [
        "filters[1] repeats filters[0]: CloudFormation takes each pattern once; remove the copy"
    ]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("{}", "pass a list of patterns"),
        ({"body": {"a": ["x"]}}, "pass a list of patterns"),
        (["{\"body\": {}}"], "a pattern is a JSON object"),
        ([{"pattern": '{"body":{"a":["x"]}}'}], "pass the pattern itself"),
        ([{"body": {"a": [float("nan")]}}], "is not JSON"),
        ([{"body": {"a": {1, 2}}}], "is not JSON"),
        ([{"body": {}}], "Empty objects are not allowed"),
        ([{"body": {"a": []}}], "Empty arrays are not allowed"),
        ([{"body": {"a": "x"}}], 'must be an object or an array'),
        ([{"body": {"a": [{"numeric": [">", "10"]}]}}], "must be numeric"),
        ([{"body": {"a": [{"prefx": "x"}]}}], "Unrecognized match type prefx"),
    ],
)  # fmt: skip
def test_what_lambda_cannot_read_is_refused_saying_why(given, says) -> None:
    """EF: 'A pattern is a string representation of a JSON filter rule', in EventBridge's
    syntax ('Lambda supports the Amazon EventBridge rules and uses the same syntax as
    EventBridge')."""
    found = ef.problems(given)
    assert len(found) == 1 and says in found[0], found


def test_refused_filters_raise_with_every_reason() -> None:
    with pytest.raises(ef.FiltersRefused) as refused:
        ef.patterns([{"attributes": {"a": ["x"]}}, {"body": [{"cidr": "10.0.0.0/8"}]}])
    assert str(refused.value).count("\n- ") == 2


def test_a_template_criteria_reads_back_as_its_patterns() -> None:
    criteria = {"Filters": [{"Pattern": '{"body":{"type":["order"]}}'}]}
    assert ef.from_criteria(criteria) == ({"body": {"type": ["order"]}},)
    assert ef.from_criteria(None) == ()
    for broken in ({"Filters": [{"Pattern": {"Fn::Join": []}}]}, {"Filters": []},
                   {"Filters": [{"Pattern": "{not json"}]}):  # fmt: skip
        with pytest.raises(ef.FiltersRefused):
            ef.from_criteria(broken)


# --- properties ---------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([1.5, 300.0]),
    st.sampled_from(["", "a", "order", "ORDER", "o-1"]),
)  # fmt: skip
_rules = st.one_of(
    st.lists(_scalars, min_size=1, max_size=3),
    st.sampled_from([[{"exists": True}], [{"exists": False}], [{"prefix": "o"}],
                     [{"suffix": "r"}], [{"numeric": [">", 0]}], [{"anything-but": ["a"]}],
                     [{"equals-ignore-case": "ORDER"}]]),
)  # fmt: skip
_json_patterns = st.dictionaries(st.sampled_from(["type", "n", "id"]), _rules, min_size=1).map(
    lambda fields: {"body": fields}
)
_string_patterns = _rules.map(lambda rule: {"body": rule})
_patterns = st.one_of(_json_patterns, _string_patterns)
_bodies = st.one_of(
    st.dictionaries(st.sampled_from(["type", "n", "id"]), _scalars, max_size=3).map(json.dumps),
    st.sampled_from(["order", "a", "", "o-1", "not json {", "[1, 2]", "42", '"order"']),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(filters=st.lists(_patterns, min_size=1, max_size=4, unique_by=ef.pattern_text),
       body=_bodies)  # fmt: skip
def test_a_record_is_kept_iff_one_filter_keeps_it(filters, body) -> None:
    """EF: the filters are ORed."""
    checked = ef.patterns(filters)
    assert ef.keeps(checked, record(body)) == any(ef.keeps((p,), record(body)) for p in checked)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pattern=_patterns, body=_bodies)
def test_a_pattern_never_keeps_a_body_of_the_other_format(pattern, body) -> None:
    """SQS's table: a JSON pattern (an object for body) drops a plain-string body, a
    plain-string pattern (a list for body) drops a JSON body."""
    json_pattern = isinstance(pattern["body"], dict)
    if json_pattern != _is_json(body):
        assert not ef.keeps(ef.patterns([pattern]), record(body))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(pattern=_patterns)
def test_the_text_deployed_reads_back_as_the_pattern(pattern) -> None:
    """What the construct deploys (``pattern_text``) is what the local cloud reads back
    from the template and what ``once_env`` matches."""
    text = ef.pattern_text(pattern)
    assert ef.from_criteria({"Filters": [{"Pattern": text}]}) == ef.patterns([pattern])
    assert ef.problems([pattern]) == [] and len(text) <= ef.MAX_PATTERN_CHARS
