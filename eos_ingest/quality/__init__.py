"""Great Expectations: the gate a batch passes before it is published, the audit of a committed batch, the suite, GX's file context, Data Docs, and GX's import (its speed-ups live here and nowhere else).

Imports storage/ (the staged rows), kafka/ (the independent count), control/, config/, schema/, plan/ and the package root."""
