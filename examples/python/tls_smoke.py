"""The Python client against a served store whose TLS certificate a private
CA signed: the test in cmd/leasectl/python_test.go (TestPythonCacert) runs
it against `leasectl serve --tls-cert`.

Environment: LEASESTORE_URL (https://HOST:PORT), LEASESTORE_CA (the CA's
certificate, PEM), WRITER_TOKEN (a writer of namespace "py"), BAD_URL (a
plain TCP port that counts the connections it takes: the test checks it
took none). The base URL names the CA as leasectl's DSN does,
https://HOST:PORT?cacert=FILE; without it the certificate is not trusted
(LeaseError unavailable); a cacert that cannot serve is refused by Client
(ValueError naming cacert) before anything is sent.
Prints one line per step; exits 1 at the first step that fails.
"""

import os
import tempfile
import urllib.parse

from leasestore import Client, LeaseError
from smokecheck import check

URL, CA, TOKEN, BAD = os.environ["LEASESTORE_URL"], os.environ["LEASESTORE_CA"], os.environ["WRITER_TOKEN"], os.environ["BAD_URL"]
q = urllib.parse.quote

try:
    got = Client(URL, TOKEN).acquire("py", "tls", owner="w")
except Exception as e:  # the step reports which
    got = e
check(isinstance(got, LeaseError) and got.status == "unavailable" and "certificate is not trusted" in got.message
      and "cacert" in got.message, "without cacert the private CA's certificate is not trusted, naming cacert", repr(got))

c = Client(URL + "?cacert=" + q(CA, safe=""), TOKEN)
a = c.acquire("py", "tls", owner="w")
check(a.status == "acquired", "with ?cacert= naming the private CA, acquire", a)
check(c.get("py", "tls").lease.token == a.lease.token, "get")
check(c.release("py", "tls", owner="w", token=a.lease.token).status == "released", "release")
check(c.health(), "health")

with tempfile.TemporaryDirectory() as d:
    not_pem = os.path.join(d, "not.pem")
    with open(not_pem, "w") as f:
        f.write("not a certificate\n")
    for url, says in [(BAD + "?cacert=" + q(os.path.join(d, "none.pem"), safe=""), "none.pem"),
                      (BAD + "?cacert=" + q(d, safe=""), d),
                      (BAD + "?cacert=" + q(not_pem, safe=""), "not.pem"),
                      (BAD + "?cacert=", "empty"),
                      (BAD + "?cacert=" + q(CA, safe="") + "&cacert=" + q(CA, safe=""), "twice"),
                      (BAD.replace("https://", "http://") + "?cacert=" + q(CA, safe=""), "https://"),
                      (BAD + "?insecure=1", "insecure")]:
        try:
            got = Client(url, TOKEN)
            got = got.acquire("py", "tls", owner="w")
        except Exception as e:  # the step reports which
            got = e
        check(isinstance(got, ValueError) and "cacert" in str(got) and says in str(got),
              "Client(%r) is refused naming cacert and %r" % (url, says), repr(got))
print("all steps passed", flush=True)
