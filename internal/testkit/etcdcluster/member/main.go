// Command member runs one member of a test etcd cluster on
// go.etcd.io/etcd/server/v3/embed, the server of the same version as the
// client that kvstore/etcd uses. It is a separate module so that the
// library's go.mod never requires the etcd server; the test harness
// (package etcdcluster) builds it with go build and runs each member as a
// process of its own, so that tests can SIGKILL and restart members.
//
// Usage:
//
//	member -name m0 -dir DIR -client http://127.0.0.1:P -peer http://127.0.0.1:Q \
//	       -cluster m0=http://127.0.0.1:Q,m1=... [-state new|existing] \
//	       [-cert FILE -key FILE [-client-ca FILE]] [-max-txn-ops N]
//
// With -cert and -key the member serves clients over TLS (give an https
// -client URL); with -client-ca too it requires client certificates signed
// by that CA. Peers always speak plain text on loopback.
//
// It prints "ready" on stdout once the member serves clients and runs until
// SIGTERM or SIGINT (a clean stop) or SIGKILL, or, with -exit-with-stdin,
// until its standard input ends: the harness holds that pipe open, so a
// test process killed by its timeout takes its members with it.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	name := flag.String("name", "m0", "member name")
	dir := flag.String("dir", "", "data directory")
	client := flag.String("client", "", "client URL (http://127.0.0.1:PORT)")
	peer := flag.String("peer", "", "peer URL (http://127.0.0.1:PORT)")
	cluster := flag.String("cluster", "", "initial cluster: name=peerURL,...")
	state := flag.String("state", "new", "initial cluster state: new or existing")
	heartbeat := flag.Duration("heartbeat", 50*time.Millisecond, "raft heartbeat interval")
	election := flag.Duration("election", 500*time.Millisecond, "raft election timeout")
	certFile := flag.String("cert", "", "server certificate for client connections (TLS)")
	keyFile := flag.String("key", "", "server key for client connections (TLS)")
	clientCA := flag.String("client-ca", "", "require client certificates signed by this CA")
	withStdin := flag.Bool("exit-with-stdin", false, "exit when standard input ends (the parent died)")
	maxTxnOps := flag.Uint("max-txn-ops", 0, "most operations in a transaction (0: etcd's default, 128)")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.LogLevel = "error"
	cfg.TickMs = uint(heartbeat.Milliseconds())
	cfg.ElectionMs = uint(election.Milliseconds())
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("member: -client: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("member: -peer: %v", err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	if *certFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: *certFile, KeyFile: *keyFile,
			TrustedCAFile: *clientCA, ClientCertAuth: *clientCA != ""}
	}
	if *maxTxnOps > 0 {
		cfg.MaxTxnOps = *maxTxnOps
	}
	cfg.InitialCluster = *cluster
	cfg.ClusterState = *state
	cfg.InitialClusterToken = "leasestore-test"
	// Tests write little; keep the files small and the snapshots frequent
	// enough that a restarted member catches up from the log.
	cfg.QuotaBackendBytes = 512 << 20

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("member: start: %v", err)
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if *withStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			sig <- syscall.SIGTERM
		}()
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		log.Fatalf("member: %v", err)
	case <-sig:
		return
	}
	select {
	case err := <-e.Err():
		log.Fatalf("member: %v", err)
	case <-sig:
	}
}
