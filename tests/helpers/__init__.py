"""The test suite's shared helpers: plain functions, classes and data that more than one test file
uses, one module per subject (kafka: producing and reading test records; processes: a job stopped
at a fault point; ports, avro, gx, s3a, batches, ...). No pytest fixture lives here: those are in
tests/fixtures/ (one module per component, registered in tests/conftest.py), beside the helpers
that only serve their own fixture. A test file never imports another test file: what two of them
share comes here."""
