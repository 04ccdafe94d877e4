"""A rank of an elastic job on Ray: `python -m hvrun.ray.elastic_worker`, started by hvrun's
agent as any rank. Fetches the function from the driver (HVRUN_RAY_CONTROL_ADDR, with the token
of HVRUN_RAY_CONTROL_TOKEN), runs it, and sends the driver its result with its final rank."""
import os
import sys

import cloudpickle

from hvrun.ray import control_channel


def main():
    address = os.environ[control_channel.ADDRESS_VARIABLE]
    token = os.environ.pop(control_channel.TOKEN_VARIABLE)
    with control_channel.connect(address, "fn", token) as sock:
        fn = cloudpickle.loads(control_channel.recv_blob(sock))
    result = fn()
    basics = sys.modules.get("hvrun.basics")
    rank = basics.rank() if basics and basics.is_initialized() else int(os.environ["HVRUN_RANK"])
    with control_channel.connect(address, "result", token, str(rank)) as sock:
        control_channel.send_blob(sock, cloudpickle.dumps(result))
        sock.recv(1)  # the driver's acknowledgement: the result is stored


if __name__ == "__main__":
    main()
