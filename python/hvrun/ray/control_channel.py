"""The elastic driver's one TCP listener, and the small framing its peers speak.

Every connection opens with one line, `KIND CREDENTIAL ARG`:
- `relay TOKEN HOST`: the remote shell hvrun's launcher runs for HOST (agent_relay.py); the
  driver starts HOST's agent actor and splices this connection to the actor's;
- `actor ONE_TIME_KEY -`: that actor, with the key the driver sealed for it;
- `fn TOKEN -`: a rank asks for the function to run (a length-prefixed pickle comes back);
- `result TOKEN RANK`: a rank sends its result (a length-prefixed pickle).
TOKEN is the driver's control token: hvrun's launcher and its ranks have it in their
environment (forwarded over the agents' channels, as hvrun forwards the launch environment),
never in a Ray argument or a command line.
"""
import hmac
import socket
import struct
import threading

TOKEN_VARIABLE = "HVRUN_RAY_CONTROL_TOKEN"
ADDRESS_VARIABLE = "HVRUN_RAY_CONTROL_ADDR"


def connect(address, kind, credential, arg="-", timeout_s=30):
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    sock.sendall(("%s %s %s\n" % (kind, credential, arg)).encode())
    sock.settimeout(None)
    return sock


def send_blob(sock, data):
    sock.sendall(struct.pack("!Q", len(data)) + data)


def recv_blob(sock):
    (length,) = struct.unpack("!Q", _recv_exact(sock, 8))
    return _recv_exact(sock, length)


def _recv_exact(sock, count):
    chunks = []
    while count:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            raise ConnectionError("the driver's control channel closed")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def read_line(sock, limit=4096):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk or len(data) > limit:
            raise ConnectionError("no opening line")
        data += chunk
    return data.decode().split()


def same(a, b):
    return hmac.compare_digest(a.encode(), b.encode())


def splice(a, b):
    """Copies bytes both ways between two sockets until both directions ended; closes both."""
    def pump(source, sink):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    threads = [threading.Thread(target=pump, args=pair, daemon=True, name="hvrun-ray-splice")
               for pair in ((a, b), (b, a))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.close()
    b.close()
