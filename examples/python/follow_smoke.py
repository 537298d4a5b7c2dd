"""Follows a served store's audit trail through the Python client while the
test in cmd/leasectl/python_test.go (TestPythonFollowAcrossRestarts) stops
`leasectl serve` and starts it again at the same address: the follow goes on
from where it was, also when the records it passed were pruned meanwhile, and
gives up with a clear error once the server stays away; against a server
that sends an event it cannot read, it ends with an error naming the event,
and audit() refuses that server's records it cannot read as the follow does;
both, and list(), ignore a field they do not know (a newer server's).

Environment: LEASESTORE_URL, WRITER_TOKEN (a writer of namespace "py").
When the server is to stop it prints a line of its own: RESTART (stop it and
start it again), RESTART-PRUNE (prune every audit record so far while it is
down) or STOP (leave it stopped), then reads a line from stdin once that is
done. Prints one line per step; exits 1 at the first step that fails.
"""

import http.server
import os
import queue
import sys
import threading

from leasestore import Client, LeaseError, Record
from smokecheck import check

URL = os.environ["LEASESTORE_URL"]
writer = Client(URL, os.environ["WRITER_TOKEN"])
follower = Client(URL, os.environ["WRITER_TOKEN"])
NS = "py"


def follow_into(q, **kw):
    """Follows the records of NS/mine in a thread, putting each on q, then
    the error that ended the follow (None when it ended without one)."""

    def run():
        try:
            for rec in follower.follow(NS, key="mine", **kw):
                q.put(rec)
        except Exception as e:  # a LeaseError, or a bug: the step reports it
            q.put(e)
        else:
            q.put(None)

    threading.Thread(target=run, daemon=True).start()


def next_of(q, what):
    """The next item of a follow's queue within a minute."""
    try:
        return q.get(timeout=60)
    except queue.Empty:
        check(False, what, "nothing within 60s")


def next_record(q, what):
    got = next_of(q, what)
    check(isinstance(got, Record), what, got)
    return got


def server(command):
    print(command, flush=True)
    check(sys.stdin.readline().strip() == "done", "the test did " + command)


def cursor_id(cursor):
    return int(cursor.removeprefix("a1."))


# A server that sends an event the client cannot read speaks another
# protocol: the follow raises unavailable naming the event, and does not
# reconnect (it would read the same event again). Its GET /v1/audit answers
# a page holding Hostile.record.
class Hostile(http.server.BaseHTTPRequestHandler):
    event, data, follows, record, lease, paths = "", "", 0, "", "", []

    def do_GET(self):
        Hostile.paths.append(self.path)
        if not self.path.startswith("/v1/audit/follow"):
            body = ('{"status":"found","records":[%s],"next_cursor":""}' % Hostile.record).encode()
            if self.path.startswith("/v1/leases/"):
                body = ('{"status":"found","leases":[%s],"next_cursor":""}' % Hostile.lease).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        Hostile.follows += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(('event: subscribed\ndata: {"status":"subscribed","message":"following the audit trail '
                          'after cursor \\"a1.0\\"","keep_alive":"15s"}\n\n'
                          'event: %s\ndata: %s\n\n' % (Hostile.event, Hostile.data)).encode())
        self.close_connection = True

    def log_message(self, *args):
        pass


hostile = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
threading.Thread(target=hostile.serve_forever, daemon=True).start()
for event, data, says in [("position", '{"cursor":', "position event"), ("position", '{"cursor":"b7.x"}', "'b7.x'"),
                          ("record", '{"id":', "record event"), ("record", '{"id":7,"op":"acquire"}', "record event")]:
    Hostile.event, Hostile.data, Hostile.follows = event, data, 0
    try:
        got = list(Client("http://%s:%d" % hostile.server_address).follow(cursor="a1.0"))
    except Exception as e:  # the step reports which
        got = e
    check(isinstance(got, LeaseError) and got.status == "unavailable" and says in got.message and Hostile.follows == 1,
          "a %s event %s ends the follow with an error naming it, without a reconnect" % (event, data),
          repr(got), "follow requests:", Hostile.follows)

# audit() reads its records as the follow does: a record of a format
# version it does not know, or without a field it needs, raises unavailable
# naming the record and what is wrong; a record it knows reads, and so does
# one with a field it does not know (a newer server's), which it ignores,
# as the Go client does.
GOOD = ('{"id":7,"at":"2030-01-02T03:04:05.000000Z","op":"acquire","namespace":"py","key":"k","owner":"w",'
        '"token":1,"request_id":"r","actor":"","reason":"","status":"acquired","version":1}')
NEWER = GOOD.replace('"version":1', '"version":1,"colour":"blue"')
for record, says in [(GOOD.replace('"version":1', '"version":99'), "format version 99"),
                     (GOOD.replace(',"version":1', ''), "version"),
                     ('[7]', "not a JSON object")]:
    Hostile.record = record
    try:
        got = Client("http://%s:%d" % hostile.server_address).audit("py")
    except Exception as e:  # the step reports which
        got = e
    check(isinstance(got, LeaseError) and got.status == "unavailable" and "audit record" in got.message
          and says in got.message, "audit() refuses the record %s, naming %r" % (record, says), repr(got))
Hostile.record = GOOD
page = Client("http://%s:%d" % hostile.server_address).audit("py")
check([(r.id, r.version) for r in page.items] == [(7, 1)], "audit() reads a record of format version 1", page)
Hostile.record = NEWER
try:
    got = Client("http://%s:%d" % hostile.server_address).audit("py").items
except Exception as e:  # the step reports which
    got = e
check(isinstance(got, list) and [(r.id, r.op, r.version) for r in got] == [(7, "acquire", 1)],
      "audit() reads a record with a field it does not know, ignoring the field", repr(got))
Hostile.event, Hostile.data = "record", NEWER
follow = Client("http://%s:%d" % hostile.server_address).follow(cursor="a1.0")
try:
    got = next(follow)
except Exception as e:  # the step reports which
    got = e
finally:
    follow.close()
check(isinstance(got, Record) and (got.id, got.op) == (7, "acquire"),
      "follow() reads a record event with a field it does not know, ignoring the field", repr(got))
# So does a lease: a newer server's field is ignored.
Hostile.lease = ('{"namespace":"py","key":"k","owner":"w","token":1,"acquired_at":"2030-01-02T03:04:05.000000Z",'
                 '"renewed_at":"2030-01-02T03:04:05.000000Z","expires_at":"2030-01-02T03:05:05.000000Z","version":1,'
                 '"colour":"blue"}')
try:
    got = Client("http://%s:%d" % hostile.server_address).list("py").items
except Exception as e:  # the step reports which
    got = e
check(isinstance(got, list) and [(l.key, l.token) for l in got] == [("k", 1)],
      "list() reads a lease with a field it does not know, ignoring the field", repr(got))
# The follow takes the op and owner filters of GET /v1/audit/follow.
Hostile.paths = []
follow = Client("http://%s:%d" % hostile.server_address).follow("py", key="k", op="acquire,release", owner="w", cursor="a1.0")
try:
    got = next(follow)
except Exception as e:  # the step reports which
    got = e
finally:
    follow.close()
sent = Hostile.paths[0] if Hostile.paths else ""
check(isinstance(got, Record) and "op=acquire%2Crelease" in sent and "owner=w" in sent and "namespace=py" in sent,
      "follow() sends its op and owner filters", repr(got), sent)
hostile.shutdown()

# A restart: the follow reconnects after the last record it yielded, and
# yields the next one, once.
mine = writer.acquire(NS, "mine", owner="w", ttl="1h")
check(mine.status == "acquired", "acquire mine", mine)
first = queue.Queue()
follow_into(first, cursor="a1.0")
rec = next_record(first, "the follow yields mine's acquire")
check(rec.op == "acquire" and rec.request_id == mine.request_id, "the first record is mine's acquire", rec)
server("RESTART")
renewed = writer.renew(NS, "mine", owner="w", token=mine.lease.token)
rec = next_record(first, "across a restart the follow yields mine's renew")
check(rec.op == "renew" and rec.request_id == renewed.request_id, "the record after the restart is mine's renew, once", rec)

# A restart with a prune of the records the follow passed (other keys')
# while the server is down: it resumes from the position the stream told,
# not after its last record, which is behind the prune.
second, positions = queue.Queue(), queue.Queue()
follow_into(second, cursor="a1.%d" % rec.id, on_position=positions.put)
for name in ("other1", "other2"):
    check(writer.acquire(NS, name, owner="w", ttl="1h").status == "acquired", "acquire " + name)
other2 = writer.audit(NS, key="other2").items[0].id
told = 0
while told < other2:
    try:
        told = max(told, cursor_id(positions.get(timeout=30)))
    except queue.Empty:
        check(False, "a position past other2's record (id %d) within 30s" % other2, "told", told)
check(True, "the follow's on_position heard a position past other2's record")
server("RESTART-PRUNE")
released = writer.release(NS, "mine", owner="w", token=mine.lease.token)
rec = next_record(second, "across a restart and a prune of the records it passed the follow yields mine's release")
check(rec.op == "release" and rec.request_id == released.request_id, "the record after the prune is mine's release", rec)

# A server that stays away: after its reconnects the follow raises
# unavailable, naming the cursor to follow again from.
third = queue.Queue()
follow_into(third, cursor="a1.%d" % (rec.id - 1), retries=2)
check(next_record(third, "a follow with two reconnects yields mine's release").id == rec.id, "a follow from before the release")
server("STOP")
err = next_of(third, "the follow gives up once the server stays away")
check(isinstance(err, LeaseError) and err.status == "unavailable" and err.cursor == "a1.%d" % rec.id
      and "2 reconnects" in err.message and err.cursor in err.message,
      "after two failed reconnects the follow raises unavailable, naming the cursor to resume from", repr(err))
