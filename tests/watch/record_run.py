"""A stand-in for `onboard new-model` in the watch tests: records each invocation, exits as told.

`python record_run.py LOG [ARGS…]` appends {"argv": ARGS, "job": $ONBOARD_JOB_ID, "t": time} as one JSON line to LOG.
$RECORD_EXITS="3,3,0": exit code of the 1st, 2nd, 3rd… call on this LOG (the last one repeats); default 0.
$RECORD_SLEEP: seconds to sleep before exiting (timeouts).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

log_path, args = sys.argv[1], sys.argv[2:]
with open(log_path, "a+") as log:
    fcntl.flock(log, fcntl.LOCK_EX)  # concurrent workers append whole lines
    log.seek(0)
    calls = sum(1 for _ in log)
    log.write(json.dumps({"argv": args, "job": os.environ.get("ONBOARD_JOB_ID"), "t": time.time()}) + "\n")
exits = [int(x) for x in os.environ.get("RECORD_EXITS", "0").split(",")]
print(f"recorded call {calls + 1}: {' '.join(args)}")
time.sleep(float(os.environ.get("RECORD_SLEEP", "0")))
sys.exit(exits[min(calls, len(exits) - 1)])
