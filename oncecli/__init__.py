"""Tooling around the once layer: the demo, the local cloud and the `once` command."""
