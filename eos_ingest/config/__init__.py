"""The pipeline file: its model, loading and defaults, the expectation types it may name, the network-file-system warning.

Imports schema/, plan/ and the package root."""
