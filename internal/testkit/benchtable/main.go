// Command benchtable reads `go test -bench` output on stdin, copies it to
// stderr, and prints on stdout one table of every benchmark that has a raw
// baseline beside it: sub-benchmarks that differ only in their last name
// element, where one of them is "raw". Each row gives the subject's ns/op,
// its throughput relative to the raw baseline of the same run (raw ns/op /
// subject ns/op: above 1 is faster than raw), its memory per operation
// (-benchmem) and the latency quantiles the benchmark reports (metrics
// named p50-* and p99-*). Benchmarks without a raw sibling are listed
// after the table with their ns/op. A "FAIL" line in the input (go test
// failed) makes it exit 1 after printing, so that a pipeline from go test
// still fails.
//
//	go test -run '^$' -bench . -benchmem ./... | go run ./internal/testkit/benchtable
//
// It imports nothing but the standard library (make bench runs it).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	if err := run(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// result is one benchmark line.
type result struct {
	pkg     string
	group   string // the name without its last element (and without -GOMAXPROCS)
	subject string // the last element
	nsPerOp float64
	metrics map[string]float64 // by unit: B/op, allocs/op, p50-ms, ...
}

// errFailed reports a FAIL line in the input.
var errFailed = errors.New("the benchmarks failed (a FAIL line in the input)")

// parse reads benchmark lines, noting the package each belongs to; failed
// is true when go test reported a failure.
func parse(r io.Reader, echo io.Writer) (out []result, failed bool, err error) {
	var pkg string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(echo, line)
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(strings.TrimSpace(line), "--- FAIL") {
			failed = true
		}
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if res, ok := parseLine(line); ok {
			res.pkg = pkg
			out = append(out, res)
		}
	}
	return out, failed, sc.Err()
}

// parseLine reads "BenchmarkX/a/b-2  N  V ns/op  V unit ...".
func parseLine(line string) (result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
		return result{}, false
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 && isDigits(name[i+1:]) {
		name = name[:i]
	}
	res := result{metrics: map[string]float64{}}
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		res.group, res.subject = name[:i], name[i+1:]
	} else {
		res.group = name
	}
	if _, err := fmt.Sscan(f[2], &res.nsPerOp); err != nil {
		return result{}, false
	}
	for i := 4; i+1 < len(f); i += 2 {
		var v float64
		if _, err := fmt.Sscan(f[i], &v); err == nil {
			res.metrics[f[i+1]] = v
		}
	}
	return res, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// quantile returns the first metric whose unit starts with prefix, as text.
func quantile(m map[string]float64, prefix string) string {
	for unit, v := range m {
		if strings.HasPrefix(unit, prefix) {
			return fmt.Sprintf("%.3g %s", v, strings.TrimPrefix(unit, prefix))
		}
	}
	return "-"
}

func metric(m map[string]float64, unit string) string {
	if v, ok := m[unit]; ok {
		return fmt.Sprintf("%.0f", v)
	}
	return "-"
}

func run(in io.Reader, stdout, echo io.Writer) error {
	results, failed, err := parse(in, echo)
	if err != nil {
		return err
	}
	if err := table(results, stdout); err != nil {
		return err
	}
	if failed {
		return errFailed
	}
	return nil
}

// table prints the results.
func table(results []result, stdout io.Writer) error {
	raw := map[string]result{}
	for _, r := range results {
		if r.subject == "raw" {
			raw[r.pkg+" "+r.group] = r
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tsubject\tns/op\tvs raw\tp50\tp99\tB/op\tallocs/op")
	var alone []result
	for _, r := range results {
		base, ok := raw[r.pkg+" "+r.group]
		if !ok {
			alone = append(alone, r)
			continue
		}
		ratio := "1 (baseline)"
		if r.subject != "raw" {
			ratio = fmt.Sprintf("%.2f×", base.nsPerOp/r.nsPerOp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\n", shortPkg(r.pkg), r.group, r.subject, r.nsPerOp, ratio,
			quantile(r.metrics, "p50-"), quantile(r.metrics, "p99-"), metric(r.metrics, "B/op"), metric(r.metrics, "allocs/op"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(alone) > 0 {
		fmt.Fprintln(stdout, "\nwithout a raw baseline:")
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, r := range alone {
			name := r.group
			if r.subject != "" {
				name += "/" + r.subject
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f ns/op\t%s B/op\t%s allocs/op\n", shortPkg(r.pkg), name, r.nsPerOp,
				metric(r.metrics, "B/op"), metric(r.metrics, "allocs/op"))
		}
		return tw.Flush()
	}
	return nil
}

// shortPkg drops the module path.
func shortPkg(p string) string {
	return strings.TrimPrefix(p, "github.com/leasestore/leasestore/")
}
