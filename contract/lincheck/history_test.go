package lincheck_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/protocol"
)

// Two processes record into JSON lines; one of them dies with an operation
// in flight, its last line torn. Reading both gives one history, and the
// lost process closes its pending operation.
func TestRecorderJSONLines(t *testing.T) {
	t.Parallel()
	var a, b bytes.Buffer
	ra, rb := lincheck.NewRecorder("a", &a), lincheck.NewRecorder("b", &b)
	req := lincheck.Request{Op: protocol.OpAcquire, Namespace: "ns", Key: "k", Owner: "a/c0", TTL: time.Minute, RequestID: "r1"}
	ra.Begin(0, req).End(lincheck.Outcome{Status: protocol.StatusAcquired, Attempts: 1,
		Lease: &lincheck.Lease{Owner: "a/c0", Token: 1, ExpiresAt: time.Now().Add(time.Minute).UnixNano()}})
	ra.Begin(1, lincheck.Request{Op: protocol.OpGet, Namespace: "ns", Key: "k", RequestID: "r2"}) // in flight
	rb.Begin(0, lincheck.Request{Op: protocol.OpGet, Namespace: "ns", Key: "k", RequestID: "r3"}).
		End(lincheck.Outcome{Status: protocol.StatusFound, Attempts: 1, Lease: &lincheck.Lease{Owner: "a/c0", Token: 1}})
	for _, r := range []*lincheck.Recorder{ra, rb} {
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	torn := a.String() + `{"ev":"call","proc":"a","id":3,"t":1` // killed mid-line

	h, err := lincheck.ReadHistory(strings.NewReader(torn), &b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 3 {
		t.Fatalf("%d operations, want 3", h.Len())
	}
	if !reflect.DeepEqual(h.Ops[0], ra.History().Ops[0]) {
		t.Fatalf("read %+v, recorded %+v", h.Ops[0], ra.History().Ops[0])
	}
	if !h.Ops[1].Unknown() || h.Ops[1].Outcome != nil {
		t.Fatalf("the in-flight operation reads as %+v", h.Ops[1])
	}
	h.Lost("a", time.Now())
	res, err := lincheck.Check(h, &lincheck.CheckOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Operations != 3 || res.Unknown != 1 || res.Clients != 3 || res.Keys != 1 {
		t.Fatalf("result %+v", res)
	}

	// Written and read again, with the lost process.
	var all bytes.Buffer
	if err := h.WriteJSON(&all); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.String(), `"ev":"lost"`) {
		t.Fatalf("the lost process is not written:\n%s", all.String())
	}
	back, err := lincheck.ReadHistory(&all)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Ops, h.Ops) {
		t.Fatalf("round trip:\n%+v\n%+v", back.Ops, h.Ops)
	}
}

func TestReadHistoryRefusesBrokenInput(t *testing.T) {
	t.Parallel()
	call := `{"ev":"call","proc":"a","id":1,"t":1,"req":{"op":"get","namespace":"ns","key":"k"}}` + "\n"
	for name, in := range map[string]string{
		"a malformed line before the end": "{nope\n" + call,
		"a call twice":                    call + call,
		"a return without its call":       `{"ev":"return","proc":"a","id":1,"t":2,"out":{"status":"found"}}` + "\n",
		"an unknown event":                `{"ev":"hello","proc":"a","t":2}` + "\n",
	} {
		if _, err := lincheck.ReadHistory(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
