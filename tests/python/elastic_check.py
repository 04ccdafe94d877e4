"""Checks an elastic job's output as test_elastic.py does, for tests written in C++ (the
multi-host ones): `elastic_check.py OUTPUT FINAL_SIZE SIZES` where SIZES are the membership sizes
the steps must show, in order ("4,2"). Exit 0 when the final weights equal the replay of the
logged steps, every sample of every epoch was seen and the sizes match; else 1, saying why."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_elastic import check_job  # noqa: E402


def main():
    path, final_size, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
    with open(path) as f:
        out = f.read()
    try:
        result = check_job(out, 0, final_size, sizes)
    except AssertionError as error:
        print("elastic check failed: %s" % (str(error)[:4000],))
        return 1
    print("elastic check passed: %d logged steps, final size %d" % (len(result["log"]), result["size"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
