"""Worker of test_verdicts.py, run by every rank of a small hvrun job.

    clean-exit-rank-1   rank 1 leaves with sys.exit(0) (a clean goodbye) while the others wait in
                        an allreduce it never submits; they report what it raised and fail
    torch-name-two-ops  rank 0 allreduce(t, name='m'), rank 1 allgather(t, name='m'): both raise
                        the mismatch, naming both ranks and ops, and say how long it took
    torch-async-orders  two asynchronous ops under one name, submitted in different orders on
                        the two ranks and then synchronized: legal, both succeed
"""
import sys
import time

MODE = sys.argv[1]


def clean_exit_rank_1():
    import torch
    import hvrun.torch as hvd
    hvd.init()
    hvd.allreduce(torch.ones(4), name="warmup", op=hvd.Sum)
    if hvd.rank() == 1:
        sys.exit(0)
    try:
        hvd.allreduce(torch.ones(4), name="after", op=hvd.Sum)
    except hvd.HorovodInternalError as e:
        print("CAUGHT: %s" % e, flush=True)
        raise
    print("NO ERROR", flush=True)


def report_mismatch(call, error_type):
    start = time.monotonic()
    try:
        call()
    except error_type as e:
        print("RAISED after %.1f s: %s" % (time.monotonic() - start, e), flush=True)
        return
    print("NO ERROR", flush=True)


def torch_name_two_ops():
    import torch
    import hvrun.torch as hvd
    hvd.init()
    hvd.allreduce(torch.ones(4), name="warmup", op=hvd.Sum)
    t = torch.ones(4)
    if hvd.rank() == 0:
        report_mismatch(lambda: hvd.allreduce(t, name="m", op=hvd.Sum), hvd.HorovodInternalError)
    else:
        report_mismatch(lambda: hvd.allgather(t, name="m"), hvd.HorovodInternalError)
    # The job goes on: the name is free again.
    assert hvd.allreduce(torch.ones(4), name="m", op=hvd.Sum).tolist() == [2.0] * 4
    print("NEXT STEP OK", flush=True)


def torch_async_orders():
    import torch
    import hvrun.torch as hvd
    hvd.init()
    t = torch.ones(4)
    if hvd.rank() == 0:
        a = hvd.allreduce_async(t, name="m", op=hvd.Sum)
        time.sleep(0.5)
        g = hvd.allgather_async(t, name="m")
    else:
        g = hvd.allgather_async(t, name="m")
        time.sleep(0.5)
        a = hvd.allreduce_async(t, name="m", op=hvd.Sum)
    assert hvd.synchronize(a).tolist() == [2.0] * 4
    assert hvd.synchronize(g).shape[0] == 8
    print("ASYNC OK", flush=True)


{"clean-exit-rank-1": clean_exit_rank_1,
 "torch-name-two-ops": torch_name_two_ops,
 "torch-async-orders": torch_async_orders}[MODE]()
