"""kazoo with SASL DIGEST-MD5 (pure-sasl): python3 kazoo_sasl.py HOSTS

Prints one line per check; the Go test compares them. Users come from the server's JAAS file:
bob/bob-secret and alice/alice-secret.
"""
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.security import make_acl

hosts = sys.argv[1]


def client(user, password):
    return KazooClient(hosts=hosts, timeout=10, connection_retry={"max_tries": 1},
                       sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password})


bob = client("bob", "bob-secret")
bob.start(timeout=20)
bob.create("/kz-bob", b"bobs", acl=[make_acl("sasl", "bob", all=True)])
data, _ = bob.get("/kz-bob")
print("bob read", data.decode())
acl, _ = bob.get_acls("/kz-bob")
print("acl", acl[0].id.scheme, acl[0].id.id, acl[0].perms)
bob.stop()

alice = client("alice", "alice-secret")
alice.start(timeout=20)
try:
    alice.get("/kz-bob")
    print("alice read it")
except NoAuthError:
    print("alice NoAuth")
alice.stop()

wrong = client("bob", "wrong")
# Record the session states kazoo goes through. Not start(): kazoo marks the connection live
# before its SASL exchange, so start() reports a "time-out" when the refusal comes back before it
# looks. Not the client's state alone either: it is CLOSED before the first attempt too.
seen = []
session_callback = wrong._session_callback


def record(state):
    seen.append(str(state))
    session_callback(state)


wrong._session_callback = record
try:
    wrong.start_async()
    for _ in range(100):
        if "AUTH_FAILED" in seen:
            break
        time.sleep(0.1)
    print("wrong password saw", " ".join(seen), "connected", wrong.connected)
except Exception as e:
    print("wrong password", type(e).__name__)
finally:
    wrong.stop()
