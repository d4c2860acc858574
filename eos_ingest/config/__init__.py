"""The pipeline file and the config it is: PipelineConfig (model.py), one frozen pydantic model
with a module per section (kafka, value, output, optional_dags; checks.py holds what they share),
loading with ${VAR} expansion and every problem in one ConfigError (pipeline.py), the pipelines
folder's files, a pipeline name's rule and length limit, where a table lives (a folder or an s3a://
URI), the expectation types it may name, the network-file-system warning.

Imports schema/ and the package root."""
