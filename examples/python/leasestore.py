"""A small client of leasestore's HTTP API (leasectl serve), standard library only.

    from leasestore import Client, LeaseError
    c = Client("http://127.0.0.1:7070", token=os.environ.get("LEASESTORE_API_TOKEN"))
    res = c.acquire("scan", "10.0.0.0/24", owner="worker-1", ttl="30s")
    if res.status == "acquired":
        token = res.lease.token          # pass it to every resource you write to
        c.renew("scan", "10.0.0.0/24", owner="worker-1", token=token)   # keeps the TTL
        c.release("scan", "10.0.0.0/24", owner="worker-1", token=token)

Every lease operation returns a Result whose `status` is the API's (acquired,
renewed, released, revoked, found, or a refusal: conflict, stale_token,
not_owner, expired, not_found, invalid); the lease acted on, or on conflict the
holder's, is in `result.lease`. Judge by `status`, not by `lease`: while the
lock-delay of a revoked or expired lease keeps a key, get answers not_found
carrying that ended lease (expires_at the time it ended, lock_delay set), as
acquire's conflict does. Answers that say the request did not reach the
store raise LeaseError: unauthorized (401) and forbidden (403), which a retry
does not mend, and unavailable, timeout, closed (503, 504), which a retry with
the same request_id may, except an unavailable whose error_code is
restart_required (LeaseError.restart_required: the served store refuses every
operation until the server restarts, so it is not retryable). An answer the client cannot read (not a JSON object;
a result, page, lease or record without a field it needs, or with one of
another type; a format version other than 1: a server of another release,
or something in front of it) raises LeaseError unavailable naming what is
wrong, the field above all, carrying a change's request id; a field it does
not know (a newer server's) is ignored. Durations take the API's grammar
(90s, 15m, 1h30m, 2d) and times RFC 3339 or a duration back from now (since="1h").

Every change (acquire, renew, release, revoke, each renewal of renew_many)
carries a request id: the caller's request_id, else one the client makes
(new_request_id: a UUIDv7 in 32 hex digits, as the Go client's
protocol.NewRequestID). It is on the result (`result.request_id`) and on a
LeaseError (`err.request_id`). The client's timeout (default 10 s) is the
request's deadline, sent in the Request-Timeout header: the server gives up
by then (cut to its --max-timeout) and answers 504; the client waits a
second longer for that answer. An unbounded timeout (float("inf"), or one
of centuries) sends the longest Request-Timeout the server reads, which it
cuts, and waits for the answer without a limit. A timeout (504, or no answer in that time)
or a connection that broke after the request was sent
raises LeaseError status "timeout": the change may or may not have been
made. Retry with the same request id to learn which: the server answers
a change it made with its first outcome (`replayed` true), where a fresh
id could answer conflict against the caller's own lease:

    try:
        res = c.acquire("scan", "10.0.0.0/24", owner="worker-1")
    except LeaseError as err:
        if not err.retryable:
            raise
        res = c.acquire("scan", "10.0.0.0/24", owner="worker-1", request_id=err.request_id)

The shapes follow /openapi.json (components.schemas: Result, Lease, ListPage,
AuditPage, NamespacePage, RenewManyPage, NotifyEvent).
"""

import http.client
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, List, Optional

__all__ = ["Client", "LeaseError", "Lease", "Result", "Record", "new_request_id"]

# Statuses that mean the store did not answer or the server refused the
# request: raised as LeaseError rather than returned.
_FAILURES = {"unauthorized", "forbidden", "unavailable", "timeout", "closed", "too_many_streams", "not_implemented"}

# The limits of one POST /v1/renew-many (httpapi.MaxRenewManyRequest and
# MaxRenewManyBodyBytes); renew_many splits a larger batch.
RENEW_MANY_MAX_RENEWALS = 1000
RENEW_MANY_MAX_BODY_BYTES = 64 << 10

# The audit follow stream: the cursor of a record or position ("a1." and
# the record id), where its subscribed message names its start, and the
# beginning of an end's message for a cursor behind a prune.
_FOLLOW_CURSOR = re.compile(r"a1\.(0|[1-9][0-9]*)")
_SUBSCRIBED_AFTER = re.compile(r'after cursor "(a1\.(?:0|[1-9][0-9]*))"')
_PRUNED_PREFIX = "behind a prune: "


class _Malformed(ValueError):
    """What makes something the server sent unreadable (a field missing, or of another type), raised
    while reading it; the Client turns it into a LeaseError unavailable naming the thing and the why."""


def _object(d, what: str) -> dict:
    """d, which must be a JSON object (what names it in the error)."""
    if not isinstance(d, dict):
        raise _Malformed(f"{what} is not a JSON object")
    return d


# _field's default for a field that must be present; the JSON types of the fields the client
# reads, by the Python types json.loads makes.
# The longest Request-Timeout sent, in milliseconds: the most a Go
# time.Duration holds (the server cuts any to its --max-timeout). A longer
# or infinite client timeout sends this.
_MAX_REQUEST_TIMEOUT_MS = 9_223_372_036_854
# The longest socket timeout set, in seconds (about 31 years): a longer or
# infinite client timeout waits without a limit (Python's socket timeouts
# overflow well before float("inf")).
_MAX_SOCKET_WAIT = 1e9
_REQUIRED = object()
_JSON_TYPES = {str: "a string", int: "an integer", bool: "true or false", list: "an array", dict: "an object"}


def _field(d: dict, name: str, what: str, kind: type, nullable: bool = False, default=_REQUIRED):
    """The field name of the JSON object d (what names d in errors), which must be of kind (or null
    when nullable); an absent field is default when one is given, else an error naming it."""
    if name not in d:
        if default is not _REQUIRED:
            return default
        raise _Malformed(f"{what} has no field {name!r}")
    v = d[name]
    if v is None and nullable:
        return None
    # bool is an int in Python, never in JSON.
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise _Malformed(f"{what}'s field {name!r} is {json.dumps(v)[:40]}, not {_JSON_TYPES[kind]}"
                         + (" or null" if nullable else ""))
    return v


def _known(cls, d: dict) -> dict:
    """The members of the JSON object d that are fields of the dataclass cls: a field a newer
    server added is ignored, as the Go client ignores it (a change of format bumps `version`)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _ops(op) -> str:
    """An op filter as the API takes it: comma-separated ("" for none), from a string or a list."""
    if not op:
        return ""
    return op if isinstance(op, str) else ",".join(op)


def new_request_id() -> str:
    """A new request id: a UUIDv7 (48 bits of Unix milliseconds, then
    random bits) in 32 hex digits, as the Go client's protocol.NewRequestID."""
    b = bytearray((time.time_ns() // 1_000_000).to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70  # version 7
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 9562 variant
    return b.hex()


def _encode(body) -> bytes:
    """A request's body, as sent."""
    return json.dumps(body).encode()


def _renew_many_batches(renewals: List[dict]) -> Iterator[List[dict]]:
    """Splits renewals into the bodies' batches of POST /v1/renew-many: at most
    RENEW_MANY_MAX_RENEWALS whose body, as _encode writes it, fits in
    RENEW_MANY_MAX_BODY_BYTES. A renewal of valid fields always fits alone."""
    envelope = len(_encode({"renewals": []}))
    batch, size = [], envelope
    for r in renewals:
        n = len(_encode(r))
        if batch and (len(batch) == RENEW_MANY_MAX_RENEWALS or size + 2 + n > RENEW_MANY_MAX_BODY_BYTES):
            yield batch
            batch, size = [], envelope
        size += n + (2 if batch else 0)  # ", " before each renewal but the first
        batch.append(r)
    if batch:
        yield batch


class LeaseError(Exception):
    """A request the store did not answer: status is the body's (or timeout,
    unavailable when no answer came), code the HTTP code (0 for none).
    request_id is the change's request id (None for a read, a stream, and
    renew_many, whose renewals' ids are request_ids, in order): retry with
    it after a retryable error to learn the change's outcome. cursor is set
    on the error of a follow that gave up reconnecting: follow again from it.
    error_code is the body's (or end event's) error_code, None without one:
    "restart_required" when the served store refuses every operation until
    the server restarts (restart_required)."""

    def __init__(self, status: str, code: int, message: str, request_id: Optional[str] = None,
                 request_ids: Optional[List[str]] = None, cursor: Optional[str] = None,
                 error_code: Optional[str] = None):
        where = f", request_id {request_id}" if request_id else ""
        super().__init__(f"{status} (HTTP {code}{where}): {message}")
        self.status, self.code, self.message = status, code, message
        self.request_id = request_id
        self.request_ids = request_ids
        self.cursor = cursor
        self.error_code = error_code if isinstance(error_code, str) and error_code else None

    @property
    def restart_required(self) -> bool:
        """True when the served store refuses every operation until the server is restarted
        (error_code restart_required): no retry mends it, so stop retrying (a holder takes its
        lease as lost) and have the server restarted."""
        return self.status == "unavailable" and self.error_code == "restart_required"

    @property
    def retryable(self) -> bool:
        """True for unavailable, timeout and closed; never for a refused token, nor for a store
        that must be restarted (restart_required)."""
        return self.status in ("unavailable", "timeout", "closed") and not self.restart_required


@dataclass
class Lease:
    namespace: str
    key: str
    owner: str
    token: int
    acquired_at: Optional[str]
    renewed_at: Optional[str]
    expires_at: Optional[str]
    version: int
    lock_delay: Optional[str] = None

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["Lease"]:
        """The lease the JSON object d describes (None for null). A field it does not know (a newer
        server's) is ignored; a field missing or of another type, or a format version other than 1,
        raises ValueError naming it (the client raises LeaseError unavailable)."""
        if d is None:
            return None
        what = "the lease"
        d = _object(d, what)
        lease = cls(*(_field(d, name, what, str) for name in ("namespace", "key", "owner")),
                    _field(d, "token", what, int),
                    *(_field(d, name, what, str, nullable=True) for name in ("acquired_at", "renewed_at", "expires_at")),
                    _field(d, "version", what, int),
                    _field(d, "lock_delay", what, str, nullable=True, default=None))
        if lease.version != 1:
            raise _Malformed(f"the lease has format version {lease.version}: this client reads only version 1")
        return lease


@dataclass
class Result:
    status: str
    replayed: bool
    request_id: str
    message: str
    lease: Optional[Lease]

    @classmethod
    def from_json(cls, d: dict, request_id: str = "") -> "Result":
        """The result the JSON object d describes. request_id: the one sent, for an answer that
        carries none. A field missing (status) or of another type, or a lease that does not read,
        raises ValueError naming it (the client raises LeaseError unavailable)."""
        what = "the result"
        d = _object(d, what)
        return cls(_field(d, "status", what, str), _field(d, "replayed", what, bool, default=False),
                   _field(d, "request_id", what, str, default="") or request_id, _field(d, "message", what, str, default=""),
                   Lease.from_json(d.get("lease")))

    @property
    def ok(self) -> bool:
        return self.status in ("acquired", "renewed", "released", "revoked", "found")


@dataclass
class Record:
    id: int
    at: str
    op: str
    namespace: str
    key: str
    owner: str
    token: int
    request_id: str
    actor: str
    reason: str
    status: str
    version: int
    expires_at: Optional[str] = None


@dataclass
class Page:
    items: list
    next_cursor: str = ""
    extra: dict = field(default_factory=dict)


class Client:
    """A client of one server. Not thread-safe per call; create one per thread.

    base_url is leasectl's DSN of the served store: http://HOST:PORT or https://HOST:PORT, with a
    path prefix when a proxy mounts the API under one. An https one may name the CAs to trust for
    the server's certificate instead of the system's, as leasectl's and the Go client's do, in its
    one parameter cacert=FILE (a PEM file; the path escaped as a URL query value): a certificate
    that a private CA signed. The file is read here: one that cannot be read or holds no
    certificate, an empty or repeated cacert, cacert on http://, and any other parameter raise
    ValueError naming it, before anything is sent."""

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 10.0):
        self.base, self._tls = self._parse_base(base_url)
        self.token = token
        self.timeout = timeout

    @staticmethod
    def _parse_base(base_url: str):
        """The base URL without its query, and the TLS context of its cacert (None without one)."""
        parts = urllib.parse.urlsplit(base_url)
        base = urllib.parse.urlunsplit(parts._replace(query="")).rstrip("/")
        if not parts.query:
            return base, None
        want = "the one parameter is cacert=FILE, the PEM file of a private CA's certificate (https only)"
        try:
            params = urllib.parse.parse_qs(parts.query, keep_blank_values=True, strict_parsing=True)
        except ValueError as e:
            raise ValueError(f"base URL: the query does not parse ({e}): {want}") from None
        for name in params:
            if name != "cacert":
                raise ValueError(f"base URL: unknown parameter {name!r}: {want}")
        files = params["cacert"]
        if len(files) > 1:
            raise ValueError("base URL: cacert given twice: give it once (the file may hold several CA certificates)")
        if not files[0]:
            raise ValueError("base URL: cacert is empty: name the PEM file of the CA's certificate")
        if parts.scheme != "https":
            raise ValueError("base URL: cacert names the CA of the server's TLS certificate, which only https:// has: "
                             "write https://")
        try:
            return base, ssl.create_default_context(cafile=files[0])
        except ssl.SSLError as e:
            raise ValueError(f"base URL: cacert={files[0]} holds no PEM certificate that loads ({e.reason or e}): "
                             "name the file of the CA's certificate, not a key") from None
        except OSError as e:  # FileNotFoundError, IsADirectoryError, PermissionError
            why = e.strerror or str(e)
            raise ValueError(f"base URL: cacert={files[0]}: {why}: name a readable PEM file of the CA's "
                             "certificate") from None

    # -- plumbing ---------------------------------------------------------

    def _request(self, method: str, path: str, body: Optional[dict] = None, query: Optional[dict] = None,
                 accept: str = "application/json", stream: bool = False, request_id: Optional[str] = None,
                 request_ids: Optional[List[str]] = None):
        """Sends one request and returns (code, parsed body), or (code, response) for a stream.

        request_id (sent as the Idempotency-Key header too) or request_ids
        (renew_many's, in its body) name a change, whose effect is unknown
        when the request was sent but no answer came: that raises timeout
        carrying them. A request that was never sent (no connection) raises
        unavailable."""
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v not in (None, "")})
        data = None if body is None else _encode(body)
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", accept)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        if request_id:
            req.add_header("Idempotency-Key", request_id)
        if not stream:
            # The server's deadline: it answers 504 by then, within the
            # second more the socket waits, rather than working on after
            # the client stopped waiting.
            ms = self.timeout * 1000
            ms = max(1, round(ms)) if ms < _MAX_REQUEST_TIMEOUT_MS else _MAX_REQUEST_TIMEOUT_MS
            req.add_header("Request-Timeout", f"{ms}ms")
        change = bool(request_id or request_ids)

        def failure(status: str, code: int, message: str) -> LeaseError:
            return LeaseError(status, code, message, request_id, request_ids)

        # A stream is silent between keep-alives (15s): read it with a longer timeout.
        wait = max(self.timeout, 60) if stream else self.timeout + 1
        if not wait < _MAX_SOCKET_WAIT:
            wait = None  # unbounded (inf, or past what a socket timeout holds)
        try:
            resp = urllib.request.urlopen(req, timeout=wait, context=self._tls)
            if stream:
                return resp.status, resp
            with resp:
                raw = resp.read()
            code = resp.status
        except urllib.error.HTTPError as e:
            with e:
                raw = e.read()
            try:
                out = json.loads(raw)
            except ValueError:
                out = None
            if isinstance(out, dict):
                return e.code, out
            # Not the API's answer: a proxy's, say.
            raise failure("timeout" if e.code == 504 else "unavailable", e.code,
                          raw[:200].decode(errors="replace")) from None
        except urllib.error.URLError as e:
            # Raised while connecting or sending: the request did not reach the server whole.
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise failure("timeout", 0, f"the server could not be reached in time: {e.reason}") from None
            if isinstance(e.reason, ssl.SSLCertVerificationError):
                raise failure("unavailable", 0, f"the server's TLS certificate is not trusted ({e.reason.verify_message}): "
                                                "to trust a private CA, name its certificate (PEM) in the https base "
                                                "URL as ?cacert=FILE, as in leasectl's DSN") from None
            raise failure("unavailable", 0, f"the server could not be reached: {e.reason}") from None
        except (TimeoutError, socket.timeout) as e:  # one class since Python 3.10
            # Sent, and no answer within the timeout: the change may have been made.
            raise failure("timeout", 0, f"no answer within {'no limit' if wait is None else f'{wait:g}s'} ({e or 'timed out'})"
                          + ("; the effect is unknown: retry with the same request id to learn it" if change else "")) from None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            # Sent, and the connection broke before the answer.
            if change:
                raise failure("timeout", 0, f"the connection broke before the answer ({e!r}); the effect is "
                                            "unknown: retry with the same request id to learn it") from None
            raise failure("unavailable", 0, f"the connection broke before the answer: {e!r}") from None
        try:
            out = json.loads(raw)
        except ValueError as e:
            raise self._unreadable("an answer", raw.decode(errors="replace"), f"not JSON: {e}", code,
                                   request_id, request_ids) from None
        return code, self._read(code, out, lambda d: _object(d, "the answer"), request_id, request_ids)

    @classmethod
    def _read(cls, code: int, out, read: Callable, request_id: Optional[str] = None,
              request_ids: Optional[List[str]] = None):
        """read(out), out an answer's JSON (a page, a result), or the LeaseError unavailable of an
        answer the client cannot read (read raised _Malformed: a field missing or of another type),
        carrying the change's request_id or request_ids: a retry with them learns its outcome."""
        try:
            return read(out)
        except _Malformed as e:
            raise cls._unreadable("an answer", json.dumps(out), e, code, request_id, request_ids) from None

    @staticmethod
    def _check(code: int, body: dict, request_id: Optional[str] = None,
               request_ids: Optional[List[str]] = None) -> dict:
        if body.get("status") in _FAILURES:
            raise LeaseError(body["status"], code, body.get("message", ""), request_id, request_ids,
                             error_code=body.get("error_code"))
        return body

    def _result(self, path: str, body: dict) -> Result:
        """Runs a change: makes its request id when body has none."""
        body = {k: v for k, v in body.items() if v is not None}
        body["request_id"] = rid = body.get("request_id") or new_request_id()
        code, out = self._request("POST", path, body, request_id=rid)
        self._check(code, out, rid)
        return self._read(code, out, lambda d: Result.from_json(d, rid), rid)

    @staticmethod
    def _segment(s: str) -> str:
        """One path segment, fully percent-encoded; "." and ".." as %2E and %2E%2E, which an
        RFC 3986 client (urllib3, requests, curl) would otherwise remove as dot segments."""
        return {".": "%2E", "..": "%2E%2E"}.get(s) or urllib.parse.quote(s, safe="")

    @staticmethod
    def _leases_path(namespace: str, key: Optional[str] = None) -> str:
        p = "/v1/leases/" + Client._segment(namespace)
        return p if key is None else p + "/" + Client._segment(key)

    # -- lease operations ---------------------------------------------------

    def acquire(self, namespace: str, key: str, owner: str, ttl: str = "30s", request_id: Optional[str] = None,
                lock_delay: Optional[str] = None) -> Result:
        return self._result("/v1/acquire", {"namespace": namespace, "key": key, "owner": owner, "ttl": ttl,
                                            "request_id": request_id, "lock_delay": lock_delay})

    def renew(self, namespace: str, key: str, owner: str, token: int, ttl: Optional[str] = None,
              request_id: Optional[str] = None) -> Result:
        """Without ttl the lease keeps its own TTL."""
        return self._result("/v1/renew", {"namespace": namespace, "key": key, "owner": owner, "token": token,
                                          "ttl": ttl, "request_id": request_id})

    def release(self, namespace: str, key: str, owner: str, token: int, request_id: Optional[str] = None) -> Result:
        return self._result("/v1/release", {"namespace": namespace, "key": key, "owner": owner, "token": token,
                                            "request_id": request_id})

    def revoke(self, namespace: str, key: str, actor: str, reason: str, token: Optional[int] = None,
               request_id: Optional[str] = None) -> Result:
        return self._result("/v1/revoke", {"namespace": namespace, "key": key, "actor": actor, "reason": reason,
                                           "token": token, "request_id": request_id})

    def renew_many(self, renewals: List[dict]) -> List[Result]:
        """Each renewal is a dict as renew's arguments; each gets its own result, in order.

        A renewal without request_id gets one the client makes (the dicts
        given are not changed; each result carries its id). One request for
        up to 1,000 renewals and 64 KiB of body (the route's limits), more one
        after another for a larger batch. A request that fails raises
        LeaseError whose request_ids are every renewal's, in order: the
        renewals of the requests before it took effect, those of the failed
        one may have (timeout), the later ones did not. Retry with the same
        ids, e.g. [dict(r, request_id=i) for r, i in zip(renewals, err.request_ids)],
        to learn their outcomes."""
        sent = [{k: v for k, v in r.items() if v is not None} for r in renewals]
        for r in sent:
            r["request_id"] = r.get("request_id") or new_request_id()
        ids = [r["request_id"] for r in sent]
        results = []
        for batch in _renew_many_batches(sent):
            batch_ids = [r["request_id"] for r in batch]
            try:
                code, out = self._request("POST", "/v1/renew-many", {"renewals": batch}, request_ids=batch_ids)
            except LeaseError as e:
                e.request_ids = ids
                raise
            self._check(code, out, request_ids=ids)
            results.extend(self._read(code, out, lambda d: self._renewals(d, batch_ids, code, ids), request_ids=ids))
        return results

    @staticmethod
    def _renewals(d: dict, ids: List[str], code: int, all_ids: List[str]) -> List[Result]:
        """The results of a renew-many answer d to the renewals of request ids ids, in order."""
        what = "the renew-many page"
        status = _field(d, "status", what, str)
        if status != "found":
            raise LeaseError(status, code, str(d.get("message", "")), request_ids=all_ids, error_code=d.get("error_code"))
        results = _field(d, "results", what, list)
        if len(results) != len(ids):
            raise _Malformed(f"{what} has {len(results)} results for {len(ids)} renewal{'' if len(ids) == 1 else 's'}")
        return [Result.from_json(r, i) for r, i in zip(results, ids)]

    def get(self, namespace: str, key: str) -> Result:
        code, out = self._request("GET", self._leases_path(namespace, key))
        self._check(code, out)
        return self._read(code, out, Result.from_json)

    def list(self, namespace: str, prefix: str = "", owner: str = "", include_expired: bool = False,
             limit: int = 0, cursor: str = "") -> Page:
        code, out = self._request("GET", self._leases_path(namespace), query={
            "prefix": prefix, "owner": owner, "include_expired": "true" if include_expired else "",
            "limit": limit or "", "cursor": cursor})
        self._check(code, out)
        return self._read(code, out, lambda d: self._page(d, code, "the list page", "leases", Lease.from_json))

    @staticmethod
    def _page(d: dict, code: int, what: str, name: str, item: Callable) -> "Page":
        """The page d (what names it) of items in its field name, each read by item; a status other
        than found raises LeaseError of it."""
        status = _field(d, "status", what, str)
        if status != "found":
            raise LeaseError(status, code, str(d.get("message", "")), error_code=d.get("error_code"))
        return Page([item(x) for x in _field(d, name, what, list)], _field(d, "next_cursor", what, str))

    def namespaces(self, after: str = "", limit: int = 0) -> List[str]:
        code, out = self._request("GET", "/v1/namespaces", query={"after": after, "limit": limit or ""})
        self._check(code, out)
        return self._read(code, out, lambda d: self._namespaces(d, code))

    @staticmethod
    def _namespaces(d: dict, code: int) -> List[str]:
        """The namespaces of the namespace page d; a status other than found raises LeaseError of it."""
        what = "the namespace page"
        status = _field(d, "status", what, str)
        if status != "found":
            raise LeaseError(status, code, str(d.get("message", "")), error_code=d.get("error_code"))
        names = _field(d, "namespaces", what, list)
        for n in names:
            if not isinstance(n, str):
                raise _Malformed(f"{what} holds {json.dumps(n)[:40]}, not a namespace (a string)")
        return names

    def audit(self, namespace: str = "", key: str = "", since: str = "", limit: int = 0, cursor: str = "",
              op=None, owner: str = "", order: str = "") -> Page:
        """since: RFC 3339, a date, or a duration back from now ("1h"). op: the operations whose
        records to read (acquire, renew, release, revoke, prune), a list or a comma-separated string;
        owner: one lease owner's records (exact match); order: "newest" pages from the newest record,
        "oldest" (the default) from the oldest. A record the client cannot read (a format version it
        does not know, a field missing) raises LeaseError unavailable naming it, as in follow(); a
        field it does not know is ignored."""
        code, out = self._request("GET", "/v1/audit", query={"namespace": namespace, "key": key, "since": since,
                                                              "limit": limit or "", "cursor": cursor,
                                                              "op": _ops(op), "owner": owner, "order": order})
        self._check(code, out)
        return self._read(code, out, lambda d: self._page(d, code, "the audit page", "records",
                                                          lambda r: self._record(r, "an audit record", json.dumps(r), code)))

    def health(self) -> bool:
        """True when the served store is healthy (GET /readyz). The bearer
        token is checked too, with one GET /v1/namespaces: a refused token
        raises LeaseError (unauthorized or forbidden), as every call does."""
        code, out = self._request("GET", "/readyz")
        if code != 200 or out.get("status") != "healthy":
            return False
        code, out = self._request("GET", "/v1/namespaces", query={"limit": 1})
        if code in (401, 403):
            self._check(code, out)
        return True

    # -- streams (server-sent events) ------------------------------------------

    def _events(self, path: str, query: Optional[dict] = None) -> Iterator[tuple]:
        """Yields (event, data text) of a stream until it ends; raises LeaseError on a refusal,
        and unavailable when the stream breaks (the connection failed, or stayed silent)."""
        code, resp = self._request("GET", path, query=query, accept="text/event-stream", stream=True)
        if code != 200:
            self._check(code, resp)
            raise LeaseError(resp.get("status", "unavailable"), code, resp.get("message", ""))
        with resp:
            name, data = "", []
            while True:
                try:
                    raw = resp.readline()
                except (OSError, http.client.HTTPException) as e:  # timeouts are OSErrors
                    raise LeaseError("unavailable", 200, f"the stream broke: {e!r}") from None
                if not raw:
                    return
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line == "":
                    if name:
                        yield name, "\n".join(data)
                    name, data = "", []
                elif line.startswith(":"):
                    continue  # keep-alive
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())

    @staticmethod
    def _unreadable(what: str, data: str, why, code: int = 200, request_id: Optional[str] = None,
                    request_ids: Optional[List[str]] = None) -> LeaseError:
        """The error of something the server sent (what: "a record event", "an audit record", "an
        answer") that the client cannot read: a protocol error (a server of another release), which
        the server would send again. request_id or request_ids: a change's."""
        snippet = data if len(data) <= 120 else data[:120] + "..."
        return LeaseError("unavailable", code, f"the server sent {what} this client cannot read "
                                               f"(data {snippet!r}), a protocol error: run client and server "
                                               f"of one release: {why}", request_id, request_ids)

    @classmethod
    def _malformed(cls, name: str, data: str, why) -> LeaseError:
        """The error of an event the client cannot read, so the stream ends with it."""
        return cls._unreadable(f"a {name} event", data, why)

    @classmethod
    def _record(cls, d, what: str, data: str, code: int = 200) -> Record:
        """The audit record d (the JSON object of what, data its text), or the error of one the client
        cannot read: a format version other than 1 (as the Go client refuses a version it does not
        know) or a field missing: a record of another release. A field Record does not know (a newer
        server's) is ignored, as the Go client ignores it."""
        if not isinstance(d, dict):
            raise cls._unreadable(what, data, "not a JSON object", code)
        try:
            rec = Record(**_known(Record, d))
        except TypeError as e:  # a field missing
            raise cls._unreadable(what, data, e, code) from None
        if not isinstance(rec.id, int) or rec.id < 1:
            raise cls._unreadable(what, data, f"id {rec.id!r} is not a record id", code)
        if rec.version != 1:
            raise cls._unreadable(what, data, f"format version {rec.version!r}: this client reads only version 1", code)
        return rec

    @classmethod
    def _event_object(cls, name: str, data: str) -> dict:
        """The event's data, a JSON object, or the error of an event the client cannot read."""
        try:
            ev = json.loads(data)
        except ValueError as e:
            raise cls._malformed(name, data, e) from None
        if not isinstance(ev, dict):
            raise cls._malformed(name, data, "not a JSON object")
        return ev

    def signals(self, namespace: str, key: str) -> Iterator[str]:
        """The notification stream of a key: yields "subscribed", then "signal" each time the
        lease may have ended (release or revoke), until the server ends the stream (LeaseError of
        the end's status) or the stream breaks (LeaseError unavailable)."""
        path = "/v1/notify/" + self._segment(namespace) + "/" + self._segment(key)
        for name, data in self._events(path):
            if name == "end":
                ev = self._event_object(name, data)
                raise LeaseError(ev.get("status", "unavailable"), 200, ev.get("message", ""), error_code=ev.get("error_code"))
            yield name

    def follow(self, namespace: str = "", key: str = "", cursor: str = "", since: str = "",
               on_position: Optional[Callable[[str], None]] = None, retries: int = 10,
               op=None, owner: str = "") -> Iterator[Record]:
        """The audit trail's records as they commit (from now, or after cursor, or since), each once;
        op and owner select records as audit()'s do.

        The follow keeps the cursor it would go on from: after the last record, or the stream's
        last position event when that is further (how far the server read past records this
        follow does not select; on_position, when given, is called with each such cursor). When
        the stream breaks (the connection failed or went silent, or the server ended it: a
        shutdown, say) it reconnects from that cursor, pausing 50 ms doubling up to 5 s, at most
        `retries` times in a row; then it raises LeaseError unavailable whose `cursor` is where to
        follow again from. It raises at once when the first request fails, on a refused token, on
        a cursor behind a prune (the message begins "behind a prune: "), on a store that must be
        restarted (restart_required), and on an event it cannot
        read (a protocol error)."""
        resume, tries, opened = cursor, 0, False
        while True:
            query = {"namespace": namespace, "key": key, "cursor": resume, "since": "" if resume else since,
                     "op": _ops(op), "owner": owner}
            events = self._events("/v1/audit/follow", query)
            began, news = time.monotonic(), False
            try:
                while True:
                    try:
                        name, data = next(events)
                    except StopIteration:
                        broke = LeaseError("unavailable", 200, "the stream ended without an end event")
                        break
                    except LeaseError as e:
                        if not opened or not e.retryable or e.message.startswith(_PRUNED_PREFIX):
                            raise
                        broke = e
                        break
                    if name == "subscribed":
                        opened = True
                        m = _SUBSCRIBED_AFTER.search(str(self._event_object(name, data).get("message", "")))
                        resume = resume or (m.group(1) if m else "")
                    elif name == "record":
                        rec = self._follow_record(name, data)
                        resume, news = f"a1.{rec.id}", True
                        yield rec
                    elif name == "position":
                        at = self._event_object(name, data).get("cursor")
                        if not isinstance(at, str) or not _FOLLOW_CURSOR.fullmatch(at):
                            raise self._malformed(name, data, f"cursor {at!r} is not an audit cursor")
                        if int(at[3:]) > (int(resume[3:]) if resume else 0):
                            resume, news = at, True
                            if on_position is not None:
                                on_position(at)
                    elif name == "end":
                        ev = self._event_object(name, data)
                        status, message = str(ev.get("status", "")), str(ev.get("message", ""))
                        if status not in _FAILURES:  # as the Go client: an end without a failure's status
                            status = "unavailable"
                        broke = LeaseError(status, 200, message, error_code=ev.get("error_code"))
                        if not broke.retryable or message.startswith(_PRUNED_PREFIX):
                            raise broke
                        break
            finally:
                events.close()
            if not resume and not since:
                raise LeaseError(broke.status, broke.code, f"{broke.message}; the stream named no cursor to "
                                                           "follow again from")
            if news or time.monotonic() - began > 5:
                tries = 0
            if tries >= retries:
                raise LeaseError(broke.status, broke.code, f"gave up after {retries} reconnects in a row: "
                                                           f"{broke.message}; follow again with cursor={resume!r}",
                                 cursor=resume)
            time.sleep(min(0.05 * 2 ** tries, 5))
            tries += 1

    def _follow_record(self, name: str, data: str) -> Record:
        """The record of a record event, or the error of one the client cannot read."""
        return self._record(self._event_object(name, data), f"a {name} event", data)
