"""Schemas of the output: the columns (their names, the parser's own among them) and DDL of the tables, Avro schemas and their Spark types, the schema registry's client.

Imports the package root (errors) only."""
