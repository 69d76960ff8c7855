"""The orders service: ships each order once, however often SQS delivers it."""
