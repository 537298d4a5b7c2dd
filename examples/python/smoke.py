"""Drives a served store through the Python client: the test in
cmd/leasectl/python_test.go runs it against `leasectl serve`.

Environment: LEASESTORE_URL, and the bearer tokens WRITER_TOKEN, ADMIN_TOKEN,
READER_TOKEN (a reader of namespace "py") and REMOVED_TOKEN (in no tokens file).
Prints one line per step; exits 1 at the first step that fails.
"""

import json
import os
import sys
import threading
from collections import Counter
from datetime import datetime

from leasestore import Client, LeaseError

URL = os.environ["LEASESTORE_URL"]
writer = Client(URL, os.environ["WRITER_TOKEN"])
admin = Client(URL, os.environ["ADMIN_TOKEN"])
reader = Client(URL, os.environ["READER_TOKEN"])
removed = Client(URL, os.environ["REMOVED_TOKEN"])
NS = "py"


def check(cond, what, *detail):
    if not cond:
        print("FAIL:", what, *detail, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)


def ttl_of(lease):
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    return (parse(lease.expires_at) - parse(lease.renewed_at)).total_seconds()


class FencedFile:
    """A resource that takes writes only with a token at least the highest it saw."""

    def __init__(self):
        self.highest, self.lines = 0, []

    def write(self, token, line):
        if token < self.highest:
            return False
        self.highest = token
        self.lines.append(line)
        return True


check(writer.health(), "health")

# acquire, a conflict, renew keeping the TTL, renew with a day
a = writer.acquire(NS, "job/1", owner="worker-a", ttl="20s")
check(a.status == "acquired" and a.lease.token > 0, "acquire", a)
c = writer.acquire(NS, "job/1", owner="worker-b", ttl="20s")
check(c.status == "conflict" and c.lease.owner == "worker-a", "conflict names the holder", c)
r = writer.renew(NS, "job/1", owner="worker-a", token=a.lease.token)
check(r.status == "renewed" and ttl_of(r.lease) == 20, "renew without ttl keeps 20s", r)
r = writer.renew(NS, "job/1", owner="worker-a", token=a.lease.token, ttl="1d")
check(r.status == "renewed" and ttl_of(r.lease) == 86400, "renew with ttl 1d", r)

# a fenced write: worker-a is revoked, worker-b takes the key, worker-a's late write is refused
f = FencedFile()
check(f.write(a.lease.token, "a: first"), "worker-a writes with its token")
rv = admin.revoke(NS, "job/1", actor="ops", reason="stuck worker")
check(rv.status == "revoked", "revoke", rv)
b = writer.acquire(NS, "job/1", owner="worker-b", ttl="30s")
check(b.status == "acquired" and b.lease.token > a.lease.token, "worker-b acquires with a greater token", b)
check(f.write(b.lease.token, "b: takes over"), "worker-b writes")
check(not f.write(a.lease.token, "a: late"), "worker-a's late write is fenced off", f.lines)
stale = writer.renew(NS, "job/1", owner="worker-a", token=a.lease.token)
check(stale.status == "stale_token", "worker-a's renew is stale_token", stale)

# list, namespaces, renew many, release
writer.acquire(NS, "job/2", owner="worker-b", ttl="30s")
page = reader.list(NS)
check(sorted(l.key for l in page.items) == ["job/1", "job/2"], "list", page)
check(NS in reader.namespaces(), "namespaces")
j2 = reader.get(NS, "job/2")
many = writer.renew_many([{"namespace": NS, "key": "job/1", "owner": "worker-b", "token": b.lease.token},
                          {"namespace": NS, "key": "job/2", "owner": "worker-b", "token": j2.lease.token}])
check([m.status for m in many] == ["renewed", "renewed"], "renew many", many)
rel = writer.release(NS, "job/1", owner="worker-b", token=b.lease.token)
check(rel.status == "released", "release", rel)
again = writer.release(NS, "job/1", owner="worker-b", token=b.lease.token)
check(again.status == "not_found", "release again is not_found", again)

# renew many past one request's limits (1,000 renewals, a 1 MiB body): the
# client splits them; each renewal keeps its own outcome, in order
def long_key(i):
    return f"long/{i:04d}/" + "\u00e9" * 250  # 510 bytes of UTF-8, 1,510 of JSON (\u00e9 each)


held_long = {i: writer.acquire(NS, long_key(i), owner="worker-b", ttl="30s") for i in (0, 399, 799)}
check(all(h.status == "acquired" for h in held_long.values()), "acquire 3 leases of long keys", held_long)
renewals = [{"namespace": NS, "key": long_key(i), "owner": "worker-b",
             "token": held_long[i].lease.token if i in held_long else 1} for i in range(800)]
check(len(json.dumps({"renewals": renewals}).encode()) > 1 << 20, "800 renewals of long keys make a body over 1 MiB")
try:
    many = writer.renew_many(renewals)
except LeaseError as e:
    many = e
want = ["renewed" if i in held_long else "not_found" for i in range(800)]
check(isinstance(many, list) and [m.status for m in many] == want,
      "renew many with a body over 1 MiB: renewed the 3 held, not_found the others, in order",
      many if not isinstance(many, list) else Counter(m.status for m in many))
nowhere = [{"namespace": NS, "key": f"none/{i}", "owner": "worker-b", "token": 1} for i in range(1001)]
try:
    many = writer.renew_many(nowhere)
except LeaseError as e:
    many = e
check(isinstance(many, list) and [m.status for m in many] == ["not_found"] * 1001,
      "renew many of 1,001 renewals: each not_found",
      many if not isinstance(many, list) else Counter(m.status for m in many))

# the audit trail, since an hour ago, and of one key
ops = [rec.op for rec in reader.audit(namespace=NS, key="job/1", since="1h").items]
check(ops == ["acquire", "renew", "renew", "revoke", "acquire", "renew", "release"], "audit of job/1", ops)

# refused tokens: 403 for a reader's write, 401 for a removed token; neither retryable
try:
    reader.acquire(NS, "job/3", owner="r")
    check(False, "a reader's acquire is refused")
except LeaseError as e:
    check(e.code == 403 and e.status == "forbidden" and not e.retryable, "a reader's acquire is forbidden (403)", e)
try:
    removed.get(NS, "job/2")
    check(False, "a removed token is refused")
except LeaseError as e:
    check(e.code == 401 and e.status == "unauthorized" and not e.retryable, "a removed token is unauthorized (401)", e)

# a notify wait: a waiter's stream signals when the holder releases
held = writer.acquire(NS, "wait", owner="holder", ttl="1m")
subscribed, signalled = threading.Event(), threading.Event()


def wait():
    for event in reader.signals(NS, "wait"):
        if event == "subscribed":
            subscribed.set()
        elif event == "signal":
            signalled.set()
            return


threading.Thread(target=wait, daemon=True).start()
check(subscribed.wait(10), "the waiter's stream is subscribed")
writer.release(NS, "wait", owner="holder", token=held.lease.token)
check(signalled.wait(10), "the release signals the waiter")
taken = writer.acquire(NS, "wait", owner="waiter", ttl="1m")
check(taken.status == "acquired", "the waiter acquires", taken)

# a lock-delay: after a revoke, get answers not_found (no live lease) and
# carries the ended lease, and acquires answer conflict, until it passes
d = writer.acquire(NS, "delayed", owner="worker-a", ttl="1h", lock_delay="1h")
check(d.status == "acquired" and d.lease.lock_delay == "1h0m0s", "acquire with a lock-delay", d)
admin.revoke(NS, "delayed", actor="ops", reason="stuck")
g = reader.get(NS, "delayed")
check(g.status == "not_found" and g.lease is not None and g.lease.owner == "worker-a" and g.lease.token == d.lease.token
      and g.lease.lock_delay == "1h0m0s" and "lock-delay until" in g.message,
      "get during the lock-delay: not_found carrying the ended lease", g)
c = writer.acquire(NS, "delayed", owner="worker-b")
check(c.status == "conflict" and c.lease.owner == "worker-a", "acquire during the lock-delay conflicts", c)
print("all steps passed", flush=True)
