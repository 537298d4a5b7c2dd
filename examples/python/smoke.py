"""Drives a served store through the Python client: the test in
cmd/leasectl/python_test.go runs it against `leasectl serve`.

Environment: LEASESTORE_URL, and the bearer tokens WRITER_TOKEN, ADMIN_TOKEN,
READER_TOKEN (a reader of namespace "py") and REMOVED_TOKEN (in no tokens file);
LEASESTORE_SQLITE_PATH, the served SQLite file, whose write lock the smoke
holds to lose an acquire's answer (the step is skipped without it).
Prints one line per step; exits 1 at the first step that fails.
"""

import json
import os
import re
import sqlite3
import threading
from collections import Counter
from datetime import datetime

from leasestore import Client, LeaseError
from smokecheck import check

URL = os.environ["LEASESTORE_URL"]
writer = Client(URL, os.environ["WRITER_TOKEN"])
admin = Client(URL, os.environ["ADMIN_TOKEN"])
reader = Client(URL, os.environ["READER_TOKEN"])
removed = Client(URL, os.environ["REMOVED_TOKEN"])
NS = "py"


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

# a key named "." or "..": its path says %2E / %2E%2E, not a dot segment a client would remove
check(Client._leases_path("..", ".") == "/v1/leases/%2E%2E/%2E", "dot parts are escaped", Client._leases_path("..", "."))
for dots in (".", ".."):
    d = writer.acquire(NS, dots, owner="worker-dots", ttl="30s")
    g = reader.get(NS, dots)
    check(d.status == "acquired" and g.status == "found" and g.lease.key == dots and g.lease.token == d.lease.token,
          f"get of key {dots!r} answers its lease", g)
    check(writer.release(NS, dots, owner="worker-dots", token=d.lease.token).status == "released", f"release {dots!r}")

# renew many past one request's limits (1,000 renewals, a 64 KiB body): the
# client splits them; each renewal keeps its own outcome, in order
def long_key(i):
    return f"long/{i:04d}/" + "\u00e9" * 250  # 510 bytes of UTF-8, 1,510 of JSON (\u00e9 each)


held_long = {i: writer.acquire(NS, long_key(i), owner="worker-b", ttl="30s") for i in (0, 399, 799)}
check(all(h.status == "acquired" for h in held_long.values()), "acquire 3 leases of long keys", held_long)
renewals = [{"namespace": NS, "key": long_key(i), "owner": "worker-b",
             "token": held_long[i].lease.token if i in held_long else 1} for i in range(800)]
check(len(json.dumps({"renewals": renewals}).encode()) > 16 * (64 << 10), "800 renewals of long keys make a body over 16 times the route's 64 KiB")
try:
    many = writer.renew_many(renewals)
except LeaseError as e:
    many = e
want = ["renewed" if i in held_long else "not_found" for i in range(800)]
check(isinstance(many, list) and [m.status for m in many] == want,
      "renew many of 800 long keys (many requests): renewed the 3 held, not_found the others, in order",
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
# ... filtered by op and owner, newest first, as GET /v1/audit takes them
ops = [(rec.op, rec.owner) for rec in reader.audit(namespace=NS, key="job/1", op="acquire,release", owner="worker-b",
                                                  order="newest").items]
check(ops == [("release", "worker-b"), ("acquire", "worker-b")], "audit of job/1: worker-b's acquires and releases, newest first", ops)
ops = [rec.op for rec in reader.audit(namespace=NS, key="job/1", op=["renew", "revoke"], order="oldest").items]
check(ops == ["renew", "renew", "revoke", "renew"], "audit of job/1: renewals and revokes (ops as a list), oldest first", ops)

# refused tokens: 403 for a reader's write, 401 for a removed token; neither retryable
try:
    reader.acquire(NS, "job/3", owner="r")
    check(False, "a reader's acquire is refused")
except LeaseError as e:
    check(e.code == 403 and e.status == "forbidden" and not e.retryable, "a reader's acquire is forbidden (403)", e)
    check(re.fullmatch(r"[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}", e.request_id or ""),
          "the refusal carries the request id the client made (a UUIDv7, 32 hex digits)", e.request_id)
try:
    reader.release(NS, "job/3", owner="r", token=1, request_id="py-given-id-1")
    check(False, "a reader's release is refused")
except LeaseError as e:
    check(e.status == "forbidden" and e.request_id == "py-given-id-1", "the refusal carries the request id given", e)
try:
    removed.get(NS, "job/2")
    check(False, "a removed token is refused")
except LeaseError as e:
    check(e.code == 401 and e.status == "unauthorized" and not e.retryable, "a removed token is unauthorized (401)", e)
# health checks the token too: a refused one is not a healthy store
try:
    removed.health()
    check(False, "health with a removed token is refused")
except LeaseError as e:
    check(e.code == 401 and e.status == "unauthorized", "health with a removed token is unauthorized (401)", e)
check(reader.health(), "health with a reader of one namespace")

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
check(d.status == "acquired" and d.lease.lock_delay == "1h", "acquire with a lock-delay", d)
admin.revoke(NS, "delayed", actor="ops", reason="stuck")
g = reader.get(NS, "delayed")
check(g.status == "not_found" and g.lease is not None and g.lease.owner == "worker-a" and g.lease.token == d.lease.token
      and g.lease.lock_delay == "1h" and "lock-delay until" in g.message,
      "get during the lock-delay: not_found carrying the ended lease", g)
c = writer.acquire(NS, "delayed", owner="worker-b")
check(c.status == "conflict" and c.lease.owner == "worker-a", "acquire during the lock-delay conflicts", c)

# request ids: the client makes one for each change and sends it; a retry
# with it answers the first outcome (replayed), where a retry with a fresh
# id answers conflict against the caller's own lease
first = writer.acquire(NS, "rid", owner="worker-a", ttl="1m")
check(first.status == "acquired" and not first.replayed
      and re.fullmatch(r"[0-9a-f]{12}7[0-9a-f]{19}", first.request_id),
      "an acquire without a request id sends one the client made (a UUIDv7)", first)
again = writer.acquire(NS, "rid", owner="worker-a", ttl="1m", request_id=first.request_id)
check(again.status == "acquired" and again.replayed and again.lease.token == first.lease.token
      and again.request_id == first.request_id, "a retry with the same request id is replayed", again)
fresh = writer.acquire(NS, "rid", owner="worker-a", ttl="1m")
check(fresh.status == "conflict" and fresh.request_id != first.request_id,
      "a retry with a fresh request id answers conflict against the caller's own lease", fresh)
ids = [m.request_id for m in writer.renew_many(
    [{"namespace": NS, "key": "rid", "owner": "worker-a", "token": first.lease.token}] * 2)]
check(len(set(ids)) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids),
      "renew many sends a request id of its own for each renewal", ids)
writer.release(NS, "rid", owner="worker-a", token=first.lease.token)

# a lost answer: while the smoke holds the SQLite file's write lock the
# store cannot commit, so an acquire with a short client timeout gets no
# answer; the outcome is unknown (timeout, retryable) and the error carries
# the request id, whose retry learns the outcome once the lock is let go
db_path = os.environ.get("LEASESTORE_SQLITE_PATH")
if db_path:
    hurried = Client(URL, os.environ["WRITER_TOKEN"], timeout=0.5)
    lock = sqlite3.connect(db_path, timeout=10, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    try:
        lost = hurried.acquire(NS, "lost", owner="worker-a", ttl="1m")
    except LeaseError as e:
        lost = e
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    check(isinstance(lost, LeaseError) and lost.status == "timeout" and lost.retryable
          and re.fullmatch(r"[0-9a-f]{32}", getattr(lost, "request_id", None) or ""),
          "an acquire whose answer is lost is a retryable timeout carrying its request id", lost)
    check(getattr(lost, "code", None) == 504,
          "the server was told the client's timeout (Request-Timeout) and answered 504 by then, "
          "not left working after the client stopped waiting", getattr(lost, "code", None))
    retry = writer.acquire(NS, "lost", owner="worker-a", ttl="1m", request_id=lost.request_id)
    check(retry.status == "acquired" and retry.request_id == lost.request_id,
          "the retry with the lost acquire's request id acquires (made now, or replayed)", retry)
    other = writer.acquire(NS, "lost", owner="worker-a", ttl="1m")
    check(other.status == "conflict", "a fresh request id would have met the caller's own lease", other)
    replay = writer.acquire(NS, "lost", owner="worker-a", ttl="1m", request_id=lost.request_id)
    check(replay.status == "acquired" and replay.replayed and replay.lease.token == retry.lease.token,
          "a second retry with it answers the first outcome (replayed)", replay)
else:
    print("skipped: a lost answer (LEASESTORE_SQLITE_PATH is not set)", flush=True)
# an unbounded timeout: the client sends a Request-Timeout the server takes
# (it cuts it to its --max-timeout) and waits for the answer without limit
for unbounded in (float("inf"), 1e300):
    try:
        got = Client(URL, os.environ["WRITER_TOKEN"], timeout=unbounded).acquire(
            NS, f"unbounded/{unbounded:g}", owner="worker-a", ttl="1m")
    except Exception as e:  # the client's own failure too: an OverflowError building the header
        got = e
    check(getattr(got, "status", None) == "acquired",
          f"a client with timeout={unbounded:g} acquires (a bounded Request-Timeout, no local overflow)", repr(got))
print("all steps passed", flush=True)
