module github.com/eos-ingest/eos-ingest/stack/registry

go 1.24.2

require (
	github.com/conduitio/conduit-commons v0.6.0
	github.com/conduitio/conduit-schema-registry v0.2.6
)

require (
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/matryer/is v1.4.1 // indirect
	github.com/twmb/franz-go/pkg/sr v1.4.0 // indirect
	github.com/twmb/go-cache v1.2.1 // indirect
)
