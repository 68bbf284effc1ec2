"""Run one command and report its wall time and peak RSS: ``_trampoline.py FD ARGV...``.

Started as ``python -I -S _trampoline.py`` by ``bench.run``. It exists because a child's
``ru_maxrss`` also covers the memory of whoever spawned it: Linux records the old address space's
high-water mark at ``exec`` (with ``vfork``, which ``subprocess`` uses, that is the *parent's*).
Spawning from the benchmark process, which holds the generator's state, reported ~400 MiB for
``/bin/true``. This small fresh process forks the command instead, so the number is the command's
own peak (floor: ~5 MiB, this process's size at fork). It writes
``"<seconds> <maxrss KiB> <exit code>"`` to FD, and stays importable from the stdlib alone.
"""

import os
import sys
import time


def main() -> int:
    result_fd = int(sys.argv[1])
    argv = sys.argv[2:]
    os.set_inheritable(result_fd, False)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: become the command
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"cannot run {argv[0]}: {exc}\n".encode())
        os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    os.write(result_fd, f"{seconds:.6f} {usage.ru_maxrss} {code}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
