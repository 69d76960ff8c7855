"""The retry times the harness and the retry benchmark report, row by row."""

from __future__ import annotations

from proof.chaos.retrytimes import Mark, summarize, waits


def test_a_busy_delivery_is_timed_to_the_first_done_after_it() -> None:
    marks = [Mark("m1", 10.0, "busy"), Mark("m1", 11.5, "busy"), Mark("m1", 13.0, "done")]
    assert waits(marks)["busy"] == [3.0]


def test_a_message_is_timed_from_its_first_not_done_delivery_and_kind() -> None:
    marks = [Mark("m1", 5.0, "failed"), Mark("m1", 6.0, "busy"), Mark("m1", 9.0, "done")]
    found = waits(marks)
    assert found["failed"] == [4.0]
    assert found["busy"] == []


def test_a_done_before_the_not_done_delivery_does_not_end_it() -> None:
    # An earlier copy's ack, or a mark out of order: only a done after the start counts.
    marks = [Mark("m1", 9.0, "done"), Mark("m1", 2.0, "failed"), Mark("m2", 1.0, "done")]
    assert waits(marks)["failed"] == [7.0]
    marks = [Mark("m1", 3.0, "done"), Mark("m1", 4.0, "failed")]
    assert waits(marks)["unfinished_failed"] == [0.0]


def test_a_message_never_done_is_unfinished_not_timed() -> None:
    summary = summarize([Mark("m1", 1.0, "failed"), Mark("m2", 1.0, "busy")])
    assert summary["failed"] == {"count": 0, "median_s": None, "p90_s": None, "unfinished": 1}
    assert summary["busy"]["unfinished"] == 1


def test_the_summary_gives_the_median_and_the_ninetieth_percentile() -> None:
    marks = [Mark(f"m{i}", 0.0, "busy") for i in range(10)]
    marks += [Mark(f"m{i}", float(i + 1), "done") for i in range(10)]
    busy = summarize(marks)["busy"]
    assert busy == {"count": 10, "median_s": 5.5, "p90_s": 10.0, "unfinished": 0}


def test_messages_that_were_done_at_once_are_not_counted() -> None:
    summary = summarize([Mark("m1", 1.0, "done")])
    assert summary["busy"]["count"] == summary["failed"]["count"] == 0
