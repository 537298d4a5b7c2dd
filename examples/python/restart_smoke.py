"""A served store that must be restarted: the test in
cmd/leasectl/python_test.go (TestPythonRestartRequired) runs it against a
leasectl serve (LEASESTORE_URL) whose SQLite file was put back under it.

Such a store refuses every operation until the server restarts: it answers
503 unavailable, with error_code restart_required in the body (or the end
event of a stream). The client raises LeaseError whose restart_required is
true and which is not retryable, so that a caller stops retrying, and a
follow raises it at once rather than reconnecting.
Prints one line per step; exits 1 at the first step that fails.
"""

import os

from leasestore import Client, LeaseError
from smokecheck import check

client = Client(os.environ["LEASESTORE_URL"], timeout=10)


def raised(fn):
    try:
        fn()
    except LeaseError as e:
        return e
    return None


for name, fn in [("acquire", lambda: client.acquire("py", "k2", owner="w", ttl="1m")),
                 ("get", lambda: client.get("py", "k")),
                 ("list", lambda: client.list("py")),
                 ("audit", lambda: client.audit(namespace="py"))]:
    e = raised(fn)
    check(e is not None and e.status == "unavailable" and e.code == 503, f"{name}: raises LeaseError unavailable (503)", e)
    check(getattr(e, "restart_required", False) and getattr(e, "error_code", None) == "restart_required" and not e.retryable,
          f"{name}: the error says the server must be restarted, and is not retryable",
          e, getattr(e, "error_code", None))

e = raised(lambda: next(client.follow(namespace="py", retries=3)))
check(e is not None and getattr(e, "restart_required", False) and not e.retryable,
      "follow: raises at once that the server must be restarted, not after reconnecting", e)
