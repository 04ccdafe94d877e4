"""The remote shell hvrun's launcher runs for an elastic job on Ray:

    python -m hvrun.ray.agent_relay HOST COMMAND

as it would run `ssh HOST COMMAND`. Instead of ssh, the driver (HVRUN_RAY_CONTROL_ADDR, with
its token in HVRUN_RAY_CONTROL_TOKEN) starts an actor on the Ray node HOST names, which runs
COMMAND (`hvrun agent`); this process carries the agent's channel: its stdin to the agent, the
agent's stdout back, until either side closes."""
import os
import socket
import sys
import threading

from hvrun.ray import control_channel


def main(argv):
    if len(argv) < 2:
        print("usage: python -m hvrun.ray.agent_relay HOST COMMAND", file=sys.stderr)
        return 2
    host = argv[0]
    try:
        sock = control_channel.connect(os.environ[control_channel.ADDRESS_VARIABLE], "relay",
                                       os.environ[control_channel.TOKEN_VARIABLE], host)
        control_channel.send_blob(sock, " ".join(argv[1:]).encode())
    except (KeyError, OSError) as error:
        print("hvrun.ray: cannot reach the driver to start %s's agent: %s" % (host, error),
              file=sys.stderr)
        return 255

    def upstream():
        try:
            while True:
                data = os.read(0, 1 << 16)
                if not data:
                    break
                sock.sendall(data)
        except OSError:
            pass
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    threading.Thread(target=upstream, daemon=True).start()
    out = sys.stdout.buffer
    while True:
        data = sock.recv(1 << 16)
        if not data:
            break
        out.write(data)
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
