"""The control DB: its tables (schema), the engine, the queries, its rows as plain data (batches: Batch, RangeRecord, importable without the store), and ControlStore, the one door to batches, offsets, fences, the VACUUM lock and the lag history.

Imports plan/ and the package root."""
