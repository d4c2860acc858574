"""Apache Iceberg tables in the pipeline's catalog: a batch's write-audit-publish (format: a DELETE
and an append on a branch, gated, then main fast-forwarded; branch, markers, schema), the catalog
and its REST credentials (catalog, rest_auth), the table properties a replace refuses (properties),
the published tables read with pyiceberg (reader), and maintain's compaction and expiry
(maintenance).

Imports storage/'s shared modules, control/, config/, plan/ and the package root; never
storage/delta/ (a lint-imports contract keeps the two formats independent)."""
