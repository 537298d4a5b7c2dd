"""Answers the Python client cannot read: the test in
cmd/leasectl/python_test.go (TestPythonMalformedAnswers) runs it.

A server of its own, on a free port of 127.0.0.1, answers each request with
the body a step sets (a server of another release, or something in front
of the server rewriting answers). Every lease operation, list, renew_many
and namespaces must raise LeaseError (status unavailable, the HTTP code
kept) naming what is wrong, the missing or mistyped field above all, never
a TypeError, KeyError or AttributeError of the client's insides; a field
the client does not know (a newer server's) is ignored.
Prints one line per step; exits 1 at the first step that fails.
"""

import http.server
import json
import threading

from leasestore import Client, LeaseError
from smokecheck import check


class Canned(http.server.BaseHTTPRequestHandler):
    """Answers every request with Canned.code and Canned.body."""

    code, body = 200, ""

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = Canned.body.encode()
        self.send_response(Canned.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
threading.Thread(target=server.serve_forever, daemon=True).start()
client = Client("http://%s:%d" % server.server_address, token="t")

LEASE = {"namespace": "py", "key": "k", "owner": "w", "token": 7, "acquired_at": "2030-01-02T03:04:05.000000Z",
         "renewed_at": "2030-01-02T03:04:05.000000Z", "expires_at": "2030-01-02T03:05:05.000000Z", "version": 1}


def without(d, name):
    return {k: v for k, v in d.items() if k != name}


def result(lease, status="acquired"):
    return {"status": status, "replayed": False, "request_id": "r", "message": "", "lease": lease}


OPS = {
    "acquire": lambda: client.acquire("py", "k", owner="w"),
    "renew": lambda: client.renew("py", "k", owner="w", token=7),
    "release": lambda: client.release("py", "k", owner="w", token=7),
    "revoke": lambda: client.revoke("py", "k", actor="ops", reason="r"),
    "get": lambda: client.get("py", "k"),
    "list": lambda: client.list("py"),
    "renew_many": lambda: client.renew_many([{"namespace": "py", "key": "k", "owner": "w", "token": 7}]),
    "namespaces": lambda: client.namespaces(),
}


def run(op, code, body):
    """op's outcome (a value, or the exception it raised) when the server answers code and body."""
    Canned.code, Canned.body = code, body if isinstance(body, str) else json.dumps(body)
    try:
        return OPS[op]()
    except Exception as e:  # the step reports which
        return e


def refuses(op, code, body, says, what):
    got = run(op, code, body)
    check(isinstance(got, LeaseError) and got.status == "unavailable" and got.code == code
          and all(s in got.message for s in says),
          "%s: %s raises LeaseError unavailable (HTTP %d) naming %s" % (op, what, code, ", ".join(map(repr, says))),
          repr(got))


# A lease of a result without a field it needs, each field in turn, on
# each operation answering a result, also on a refusal's 409 and a 404.
for field in ("namespace", "key", "owner", "token", "acquired_at", "renewed_at", "expires_at", "version"):
    for op in ("acquire", "renew", "release", "revoke", "get"):
        refuses(op, 200, result(without(LEASE, field)), ["lease", repr(field)], "a lease without %r" % field)
refuses("acquire", 409, result(without(LEASE, "owner"), "conflict"), ["lease", "'owner'"], "a conflict's holder without 'owner'")
refuses("get", 404, result(without(LEASE, "token"), "not_found"), ["lease", "'token'"], "a not_found's ended lease without 'token'")
# ... in a list page and in a renewal's result.
refuses("list", 200, {"status": "found", "leases": [LEASE, without(LEASE, "token")], "next_cursor": ""},
        ["lease", "'token'"], "a page's lease without 'token'")
refuses("renew_many", 200, {"status": "found", "results": [result(without(LEASE, "version"), "renewed")]},
        ["lease", "'version'"], "a renewal's lease without 'version'")
# A lease that is not an object, or whose token or version is not an integer.
refuses("get", 200, result([LEASE]), ["lease", "not a JSON object"], "a lease that is a list")
refuses("get", 200, result(dict(LEASE, token="7")), ["lease", "'token'", "integer"], "a lease whose token is a string")
refuses("list", 200, {"status": "found", "leases": [dict(LEASE, version=None)], "next_cursor": ""},
        ["lease", "'version'", "integer"], "a page's lease whose version is null")
# A result, a page or an answer without a field of its own, or not an object.
refuses("acquire", 200, without(result(LEASE), "status"), ["'status'"], "a result without 'status'")
refuses("get", 200, "[1, 2]", ["not a JSON object"], "an answer that is a list")
refuses("list", 200, {"status": "found", "next_cursor": ""}, ["'leases'"], "a page without 'leases'")
refuses("list", 200, {"status": "found", "leases": []}, ["'next_cursor'"], "a page without 'next_cursor'")
refuses("namespaces", 200, {"status": "found"}, ["'namespaces'"], "a page without 'namespaces'")
refuses("renew_many", 200, {"status": "found"}, ["'results'"], "a page without 'results'")
refuses("renew_many", 200, {"status": "found", "results": []}, ["1 renewal", "0 results"],
        "a page with fewer results than renewals")

# What the client reads still reads: a lease with a field it does not know
# (a newer server's) and one without lock_delay (optional), a null lease.
got = run("get", 200, result(dict(LEASE, colour="blue")))
check(getattr(got, "status", None) == "acquired" and got.lease.token == 7 and got.lease.lock_delay is None,
      "get: a lease with a field the client does not know reads, ignoring the field", repr(got))
got = run("get", 404, result(None, "not_found"))
check(getattr(got, "status", None) == "not_found" and got.lease is None, "get: not_found with a null lease reads", repr(got))
got = run("list", 200, {"status": "found", "leases": [dict(LEASE, lock_delay="15s")], "next_cursor": "c"})
check(getattr(got, "items", None) and got.items[0].lock_delay == "15s" and got.next_cursor == "c",
      "list: a page of a lease with a lock-delay reads", repr(got))
server.shutdown()
print("all steps passed", flush=True)
