"""Spawns benchmark commands from a small process, so their peak memory is their own.

Linux counts a child's peak RSS (``ru_maxrss``) over its whole life, including the moment between fork and
exec when it is still a copy of its parent: a child of a 600 MiB process reports at least 600 MiB however
little it uses. The harness process grows (it imports PRISM, pandas, Hydra), so it does not spawn commands
itself: it starts this script once, a fresh interpreter of about 10 MiB, and asks it to.

Protocol, one JSON object per line: in ``{"args", "env", "cwd", "stdout", "stderr"}`` (the last two are file
paths); out ``{"seconds", "max_rss_kib", "cpu_seconds", "code"}`` (``cpu_seconds``: the child's user + system time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def main() -> None:
    """Serve requests until stdin closes."""
    for line in sys.stdin:
        request = json.loads(line)
        with open(request["stdout"], "w") as out, open(request["stderr"], "w") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(request["args"], env=request["env"], cwd=request["cwd"], stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait again
        reply = {"seconds": seconds, "max_rss_kib": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime,
                 "code": proc.returncode}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
