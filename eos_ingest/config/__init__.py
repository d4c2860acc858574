"""The pipeline file: its model, loading and defaults, a pipeline name's rule and length limit, the expectation types it may name, the network-file-system warning.

Imports schema/, plan/ and the package root."""
