"""The pipeline file: its model, loading and defaults, a pipeline name's rule and length limit, where a table lives (a folder or an s3a:// URI), the expectation types it may name, the network-file-system warning.

Imports schema/, plan/ and the package root."""
