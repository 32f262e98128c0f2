import os, socket, struct, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../tests/deploy"))
import hostile_peer as hp
def peer(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = hp.read_exactly(s, 32)
    aid = hp.published_actor(hp.read_exactly(s, struct.unpack(">I", head[4:8])[0]))
    node = struct.pack(">Q", 0x00003E9AAB9BAC79) + struct.pack(">I", os.getpid()) + os.urandom(20)
    s.sendall(hp.header(1, len(node)) + node)
    return s, aid
port = int(sys.argv[1])
s, aid = peer(port)
b = hp.message(b"@<>+@str", b"\x05hello")
s.sendall(hp.header(2, len(b), dst=aid) + b)
print("benign sent, closed:", hp.closed_by_listener(s, 1.0))
s2, aid = peer(port)
a = hp.message(b"@<>+@config_value", b"\x20")
s2.sendall(hp.header(2, len(a), dst=aid) + a)
print("attack sent, closed:", hp.closed_by_listener(s2, 3.0))
