package etcd

import (
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestRevisionGuardOrdersByWhatPrecededTheCall: answers to concurrent
// calls arrive in any order, so an answer is compared only with the
// revisions answered before its call was sent (a guard comparing with
// everything seen so far raised a false alarm on the second answer
// below); a revision below one answered before the call went out is the
// cluster going back, and every call after it is refused.
func TestRevisionGuardOrdersByWhatPrecededTheCall(t *testing.T) {
	var g revisionGuard
	h := func(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }
	if err := g.observe(0, h(10), true); err != nil {
		t.Fatal(err)
	}
	a, _ := g.begin()
	b, _ := g.begin()
	if err := g.observe(a, h(12), true); err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := g.observe(b, h(11), false); err != nil { // read before a's write committed
		t.Fatalf("b, sent before a's answer came: %v", err)
	}
	if err := g.observe(b, nil, false); err != nil {
		t.Fatalf("an answer without a header: %v", err)
	}
	c, _ := g.begin()
	var back *errRevisionBack
	if err := g.observe(c, h(3), false); !errors.As(err, &back) || back.was != 12 || back.now != 3 || back.change {
		t.Fatalf("c, below an answer received before it was sent: %v; want the revision gone back from 12 to 3", err)
	}
	if _, err := g.begin(); !errors.As(err, &back) {
		t.Fatalf("a call after the revision went back: %v; want it refused", err)
	}
	if err := g.observe(c, h(13), true); !errors.As(err, &back) {
		t.Fatalf("an answer after the revision went back: %v; want it refused", err)
	}
}

// TestRevisionGuardRefusesAChangeNotAboveWhatPrecededIt: a transaction
// that changed something commits at a revision above every revision
// answered before it was sent, so one answered at that revision is the
// revision going back (a quorum that lost the change answered then); a
// read, or a transaction that took a read-only branch, answers at the
// revision it read, which may be that one.
func TestRevisionGuardRefusesAChangeNotAboveWhatPrecededIt(t *testing.T) {
	var g revisionGuard
	h := func(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }
	if err := g.observe(0, h(10), true); err != nil {
		t.Fatal(err)
	}
	a, _ := g.begin()
	if err := g.observe(a, h(10), false); err != nil {
		t.Fatalf("a read at the revision answered before it: %v", err)
	}
	if err := g.observe(a, h(11), true); err != nil {
		t.Fatalf("a change above the revision answered before it: %v", err)
	}
	b, _ := g.begin()
	var back *errRevisionBack
	if err := g.observe(b, h(11), true); !errors.As(err, &back) || back.was != 11 || back.now != 11 || !back.change {
		t.Fatalf("a change at the revision answered before it was sent: %v; want the revision gone back from 11 to 11", err)
	}
	if _, err := g.begin(); !errors.As(err, &back) {
		t.Fatalf("a call after a change was answered at a revision already answered: %v; want it refused", err)
	}
}

// TestChangedIsWhatRaisesTheRevision: etcd raises its revision for a
// transaction that put a key or deleted one, in any nested transaction,
// and not for gets or a delete that found nothing.
func TestChangedIsWhatRaisesTheRevision(t *testing.T) {
	put := &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{}}}
	get := &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}}
	del := func(n int64) *pb.ResponseOp {
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Deleted: n}}}
	}
	txn := func(rs ...*pb.ResponseOp) *pb.ResponseOp {
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Responses: rs}}}
	}
	for _, c := range []struct {
		name string
		rs   []*pb.ResponseOp
		want bool
	}{
		{"nothing", nil, false},
		{"gets", []*pb.ResponseOp{get, get}, false},
		{"a delete that found nothing", []*pb.ResponseOp{get, del(0)}, false},
		{"a delete that found a key", []*pb.ResponseOp{get, del(1)}, true},
		{"a put", []*pb.ResponseOp{get, put}, true},
		{"a nested transaction's read-only branch", []*pb.ResponseOp{txn(get, txn(get, del(0)))}, false},
		{"a put in a nested transaction", []*pb.ResponseOp{txn(get, txn(get, put))}, true},
	} {
		if got := changed(c.rs); got != c.want {
			t.Errorf("%s: changed = %v, want %v", c.name, got, c.want)
		}
	}
}
