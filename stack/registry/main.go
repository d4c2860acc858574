// Command eos-schema-registry serves the Confluent Schema Registry REST API on one address, for the
// tests and for trying Avro pipelines locally (stack/registry.sh starts and stops it).
//
// It is Conduit's schema registry library (Apache-2.0) behind net/http, with an in-memory store:
// schemas live as long as the process, which is what a test session wants. Conduit implements
// what producers and consumers use (register a schema under a subject, fetch a schema by id,
// versions of a subject), not the admin API (modes, compatibility config, deletes): see
// docs/formats.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/conduitio/conduit-commons/database/inmemory"
	schemaregistry "github.com/conduitio/conduit-schema-registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "host:port to listen on")
	flag.Parse()
	if err := serve(*addr); err != nil {
		fmt.Fprintf(os.Stderr, "eos-schema-registry: %v\n", err)
		os.Exit(1)
	}
}

func serve(addr string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	registry, err := schemaregistry.NewSchemaRegistry(&inmemory.DB{})
	if err != nil {
		return fmt.Errorf("creating the registry: %w", err)
	}
	mux := http.NewServeMux()
	schemaregistry.NewServer(logger, registry).RegisterHandlers(mux)
	server := &http.Server{Addr: addr, Handler: logRequests(logger, mux), ReadHeaderTimeout: 10 * time.Second}

	// SIGTERM (registry.sh down) ends it cleanly: in-flight requests finish, then it exits 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	logger.Info("serving the Confluent Schema Registry REST API", "addr", addr)
	if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// logRequests logs each request's method, path and status: the log is what tells why a
// serializer's call was refused when a test fails.
func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recorder := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(recorder, r)
		logger.Info("request", "method", r.Method, "uri", r.URL.RequestURI(), "status", recorder.status)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}
