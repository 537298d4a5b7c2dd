"""The step check of the Python client's smoke scripts (smoke.py, follow_smoke.py)."""

import sys


def check(cond, what, *detail):
    """Prints "ok: what", or "FAIL: what" and the detail and exits 1 when cond is false."""
    if not cond:
        print("FAIL:", what, *detail, flush=True)
        sys.exit(1)
    print("ok:", what, flush=True)
