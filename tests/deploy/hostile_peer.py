#!/usr/bin/env python3
"""A hostile peer for kvactor's listening ports (node, --inject-port).

  hostile_peer.py PORT burst [COOKIE_FILE]
                               every crafted frame, garbage and an oversized frame, one
                               connection each; checks that the listener closes each one, and
                               exits 0 when it did (1 with the reason otherwise). Without a
                               cookie the listener refuses at the greeting; with the cluster
                               cookie the attacker proves it first (like a peer of the same
                               user), so the frames reach the BASP frame guard.
  hostile_peer.py PORT stepburst [COOKIE_FILE]
                               the same against a node's step channel (its frames:
                               net/step_frame.hpp): garbage without the cookie,
                               malformed step frames behind a valid proof.
  hostile_peer.py PORT typed COOKIE_FILE
                               a peer that holds the cookie and completes CAF's BASP handshake:
                               a well-formed message to the listener's published actor keeps
                               its connection open; then, on a new connection, a message holding
                               a caf::config_value with a variant index CAF 0.17 throws on (the
                               process terminated, unguarded) must be cut by the listener.
  hostile_peer.py PORT flood N keeps N connections open (half of them with half a header),
                               reconnecting each one the listener cuts, until killed; prints
                               "flooding" once the first N are open.
"""
import hashlib
import hmac
import os
import random
import select
import socket
import struct
import sys
import time


def header(op, payload_len, op_data=0, src=0, dst=0, flags=0, pad=0):
    return struct.pack(">BBBBIQQQ", op, pad, 0, flags, payload_len, op_data, src, dst)


CRAFTED = {
    "server handshake without payload (CAF 0.17 segfaults)": header(0, 0, op_data=1),
    "client handshake without payload (CAF 0.17 segfaults)": header(1, 0),
    "a 4 GiB payload claimed": header(2, 0xFFFFFFFF, dst=1),
    "a payload over the bound": header(1, 70 << 20),
    "no such operation": header(0x42, 0),
    "non-zero padding": header(1, 40, pad=7),
    "a message before the handshake": header(2, 8, dst=1) + b"\0" * 8,
}


def step_header(length, kind=1, version=1):
    return struct.pack(">IBB", length, kind, version)


STEP_CRAFTED = {
    "a 4 GiB step frame claimed": step_header(0xFFFFFFF0),
    "a step frame over the bound": step_header(70 << 20),
    "no such frame kind": step_header(2, kind=9),
    "another frame version": step_header(2, version=7),
    "an answer sent to a node": step_header(2, kind=2),
    "a step whose slot count overruns it": step_header(22) + struct.pack(">QIq", 1, 1000, 0),
}


def closed_by_listener(sock, wait_s=5.0):
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            continue
        try:
            if not sock.recv(4096):
                return True
        except ConnectionResetError:
            return True
    return False


def prove_cookie(sock, cookie):
    """The connecting side of kvactor's cookie proof (net/peer_auth.hpp)."""
    greeting = b""
    while len(greeting) < 40:
        greeting += sock.recv(40 - len(greeting))
    assert greeting[:8] == b"kvauth/1", greeting[:8]
    mine = os.urandom(32)
    mac = hmac.new(cookie, b"kvactor-client" + greeting[8:] + mine, hashlib.sha256).digest()
    sock.sendall(b"kvauth/1" + mine + mac)
    proof = b""
    while len(proof) < 32:
        proof += sock.recv(32 - len(proof))


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        got = sock.recv(n - len(data))
        if not got:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += got
    return data


def varbyte(data, at):
    value, shift = 0, 0
    while True:
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def published_actor(server_handshake):
    """The actor id in CAF 0.17's server handshake: after the node id and the app identifiers."""
    at = 8 + 24  # a default node id: its kind (an atom), process id and host id
    count, at = varbyte(server_handshake, at)
    for _ in range(count):
        length, at = varbyte(server_handshake, at)
        at += length
    return struct.unpack(">Q", server_handshake[at:at + 8])[0]


def basp_peer(port, cookie):
    """A connection that proved the cookie and answered the listener's BASP handshake."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    prove_cookie(sock, cookie)
    head = read_exactly(sock, 32)
    aid = published_actor(read_exactly(sock, struct.unpack(">I", head[4:8])[0]))
    node = struct.pack(">Q", 0x00003E9AAB9BAC79) + struct.pack(">I", os.getpid()) + os.urandom(20)
    sock.sendall(header(1, len(node)) + node)
    return sock, aid


def message(names, body):
    """A direct message's payload: no forwarding stack, type number 0, the type names, the body."""
    return b"\0" + struct.pack(">HB", 0, len(names)) + names + body


def typed(port, cookie):
    sock, aid = basp_peer(port, cookie)
    benign = message(b"@<>+@str", b"\x05hello")
    sock.sendall(header(2, len(benign), dst=aid) + benign)
    if closed_by_listener(sock, 2.0):
        print("hostile_peer: the listener cut a well-formed message: the attack below would prove "
              "nothing")
        return 1
    sock.close()
    sock, aid = basp_peer(port, cookie)
    attack = message(b"@<>+@config_value", b"\x20")
    sock.sendall(header(2, len(attack), dst=aid) + attack)
    if not closed_by_listener(sock):
        print("hostile_peer: the listener kept a connection open after a malformed config_value")
        return 1
    print(f"hostile_peer: a well-formed message to actor {aid} kept its connection; a malformed "
          "config_value was cut")
    return 0


def burst(port, cookie=None, crafted=CRAFTED, shortest=32):
    rng = random.Random(5)
    attacks = list(crafted.items())
    # At least a header (or a cookie proof) long: shorter garbage is a half-open connection (cut
    # at its deadline).
    attacks += [(f"garbage #{i}",
                 bytes(rng.getrandbits(8) for _ in range(rng.randint(shortest, 4096))))
                for i in range(30)]
    for name, data in attacks:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            if cookie:
                prove_cookie(s, cookie)
            s.sendall(data)
            if not closed_by_listener(s):
                print(f"hostile_peer: the listener kept a connection open after: {name}")
                return 1
    how = "behind a valid cookie proof" if cookie else "without the cookie"
    print(f"hostile_peer: {len(attacks)} attacks {how}, every connection closed by the listener")
    return 0


def flood(port, n):
    conns = []

    def open_one(i):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(header(1, 40)[:13])  # half a header, then silence
        s.setblocking(False)
        return s

    def open_retrying(i):
        # A loaded machine (or the listener cutting the flood's oldest) may refuse or time out
        # a connect: the flood keeps trying, it never dies of it.
        while True:
            try:
                return open_one(i)
            except OSError:
                time.sleep(0.01)

    conns = [open_retrying(i) for i in range(n)]
    print("flooding", flush=True)
    while True:
        ready, _, _ = select.select(conns, [], [], 1.0)
        for s in ready:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue  # the listener's own handshake
            i = conns.index(s)
            s.close()
            conns[i] = open_retrying(i)


if __name__ == "__main__":
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "typed":
        sys.exit(typed(port, open(sys.argv[3], "rb").read().strip()))
    if mode in ("burst", "stepburst"):
        secret = open(sys.argv[3], "rb").read().strip() if len(sys.argv) > 3 else None
        if mode == "burst":
            sys.exit(burst(port, secret))
        # The step channel's proof owes 72 bytes before the node judges it: without the cookie
        # the crafted frames are padded to that.
        crafted = {k: v if secret else v.ljust(72, b"\0") for k, v in STEP_CRAFTED.items()}
        sys.exit(burst(port, secret, crafted, 72))
    flood(port, int(sys.argv[3]))
