"""Delta Lake, the default table format: a batch's staged replaceWhere (format, over writer and
staged_write), the table features that replace refuses (table_features), the published tables read
with delta-rs (reader) and their figures (figures), OPTIMIZE and VACUUM (maintenance), and the
files killed attempts left (dead_attempts).

Imports storage/'s shared modules, control/, config/, plan/ and the package root; never
storage/iceberg/ (a lint-imports contract keeps the two formats independent)."""
