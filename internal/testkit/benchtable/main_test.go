package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const sample = `goos: linux
pkg: github.com/leasestore/leasestore/sqlstore/postgres
BenchmarkAcquire/goroutines=8/backend-2         	   10000	    200000 ns/op	  4000 B/op	  60 allocs/op
BenchmarkAcquire/goroutines=8/raw-2             	   10000	    100000 ns/op	  1000 B/op	  20 allocs/op
BenchmarkWritePath/goroutines=1/current-2       	    6000	    625000 ns/op
pkg: github.com/leasestore/leasestore/sqlstore/sqlite
BenchmarkAcquire/g=1/backend-2   	    3000	    400000 ns/op	   2500 ops/s	0.3 p50-ms	1.5 p99-ms	 900 B/op	  30 allocs/op
BenchmarkAcquire/g=1/raw-2       	    3000	    300000 ns/op	   3300 ops/s	0.25 p50-ms	1.0 p99-ms	 500 B/op	  10 allocs/op
PASS
`

// Each subject is set beside the raw baseline of its own package and
// benchmark; the ratio is raw ns/op over the subject's; benchmarks without
// a raw sibling are listed apart; the input is echoed.
func TestTable(t *testing.T) {
	var out, echo bytes.Buffer
	if err := run(strings.NewReader(sample), &out, &echo); err != nil {
		t.Fatal(err)
	}
	if echo.String() != sample {
		t.Fatalf("echo differs:\n%s", echo.String())
	}
	lines := strings.Split(out.String(), "\n")
	find := func(parts ...string) string {
		t.Helper()
		for _, l := range lines {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return l
			}
		}
		t.Fatalf("no line with %q in:\n%s", parts, out.String())
		return ""
	}
	pgBackend := strings.Fields(find("sqlstore/postgres", "goroutines=8", "backend"))
	if pgBackend[3] != "200000" || pgBackend[4] != "0.50×" || pgBackend[7] != "4000" || pgBackend[8] != "60" {
		t.Fatalf("postgres backend row: %q", pgBackend)
	}
	sqliteBackend := find("sqlstore/sqlite", "g=1", "backend")
	for _, want := range []string{"0.75×", "0.3 ms", "1.5 ms", "900", "30"} {
		if !strings.Contains(sqliteBackend, want) {
			t.Fatalf("sqlite backend row lacks %q: %q", want, sqliteBackend)
		}
	}
	find("sqlstore/sqlite", "g=1", "raw", "1 (baseline)")
	if !strings.Contains(out.String(), "without a raw baseline") || !strings.Contains(find("WritePath"), "625000 ns/op") {
		t.Fatalf("unpaired benchmark not listed:\n%s", out.String())
	}
}

// Lines that are not benchmark results are ignored.
func TestParseLine(t *testing.T) {
	for _, l := range []string{"PASS", "ok  	x	1.2s", "BenchmarkX-2  	 10	 notanumber ns/op", "Benchmark 1 2"} {
		if _, ok := parseLine(l); ok {
			t.Errorf("parsed %q", l)
		}
	}
	r, ok := parseLine("BenchmarkX/a/b-16  	 10	 5.5 ns/op	 3 B/op")
	if !ok || r.group != "BenchmarkX/a" || r.subject != "b" || r.nsPerOp != 5.5 || r.metrics["B/op"] != 3 {
		t.Fatalf("%+v %v", r, ok)
	}
}

// A failure reported by go test fails the table too, after printing it.
func TestFailure(t *testing.T) {
	var out, echo bytes.Buffer
	err := run(strings.NewReader(sample+"--- FAIL: BenchmarkX\nFAIL\n"), &out, &echo)
	if !errors.Is(err, errFailed) || !strings.Contains(out.String(), "0.50×") {
		t.Fatalf("err %v, table:\n%s", err, out.String())
	}
}
