"""The fault-injection harness: once, Powertools and the naive pattern under the same faults."""
