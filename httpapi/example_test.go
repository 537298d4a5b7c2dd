package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// Serve a store over HTTP on a loopback port, as leasectl serve does, and
// use it from Go: the Client is a protocol.Backend, so protocol.New over it
// is a Store like a local one.
func ExampleNewClient() {
	ctx := context.Background()

	// The server. A service serves its SQLite, PostgreSQL or etcd store
	// (and passes it as the audit.Reader too); the example serves one in memory.
	served := protocol.New(memstore.New(nil), nil)
	defer served.Close(ctx)
	h, err := httpapi.NewHandler(served, nil, &httpapi.Config{
		Logger:       slog.New(slog.DiscardHandler), // the access log
		LoopbackOnly: true,                          // no Tokens: answer only requests addressed to loopback
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(h.CloseStreams) // so that Shutdown is not held up by notification streams
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)

	// The client: a Store over HTTP (Token: the bearer token, for a server with tokens).
	client, err := httpapi.NewClient("http://"+ln.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	store := protocol.New(client, nil) // owns the client: Close closes it
	defer store.Close(ctx)

	key := protocol.Key{Namespace: "billing", Name: "invoice-run"}
	res, err := store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		log.Fatal(err) // timeout or unavailable: retry with res.RequestID to learn the outcome
	}
	fmt.Println(res.Status, key, "token", res.Lease.Token)

	_, err = store.Acquire(ctx, protocol.AcquireRequest{Key: key, Owner: "worker-2", TTL: 30 * time.Second})
	var held *protocol.Error
	if errors.Is(err, protocol.ErrConflict) && errors.As(err, &held) {
		fmt.Println("worker-2:", protocol.StatusOf(err), "held by", held.Lease.Owner)
	}

	res, err = store.Release(ctx, protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: res.Lease.Token})
	fmt.Println(res.Status, err)
	// Output:
	// acquired billing/invoice-run token 1
	// worker-2: conflict held by worker-1
	// released <nil>
}
