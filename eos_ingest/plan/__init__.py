"""Planning, pure: offsets in, ranges out; which cluster and topic incarnation offsets belong to; data lost to retention.

No I/O: imports only the package root (errors). Everything that plans imports this folder."""
