#!/usr/bin/env python3
"""term_vs_docker.py - a terminal's round trip: `sbx exec -it TASK -- cat`
against `docker exec -it CONTAINER cat` into the same running sandbox, each
driven through a pty of this script's, alternated in one run (issue 30).

Two numbers per side:
  open   from starting the client to the first output of the command inside
         (`sh -c 'echo ready; exec cat'`): allocating the terminal and starting
  echo   one keystroke written to the client's terminal until its echo comes
         back: the byte travels to the terminal inside (whose line discipline
         echoes it) and back; p50 and p95 over ROUNDS keystrokes per session

  bench/term_vs_docker.py [SESSIONS] [ROUNDS]   (default 5 and 200;
  DOCKER_HOST picks the engine, SBX the binary, default build/sbx)
"""
import sys as _sys

if len(_sys.argv) > 1 and _sys.argv[1] in ("-h", "--help"):
    print(__doc__ if __doc__ else open(__file__).read().split("\n\n")[0])
    _sys.exit(0)
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
os.chdir(os.path.join(here, ".."))
sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 5
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
sbx = os.environ.get("SBX", "build/sbx")
if shutil.which("docker") is None:
    sys.exit("bench: the docker CLI is needed (apt-get install docker.io)")
own_state = "SBX_STATE_DIR" not in os.environ
os.environ.setdefault("SBX_STATE_DIR", tempfile.mkdtemp(prefix="sbx-bench-"))
task = "bench-term-%d" % os.getpid()
subprocess.run([sbx, "task", "start", "--task", task], check=True, stdout=subprocess.DEVNULL)
container = "sbx-" + task
CMD = ["sh", "-c", "echo ready; exec cat"]


def read_until(fd, text, secs=60.0):
    buf = b""
    end = time.monotonic() + secs
    while text not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise RuntimeError("no %r within %.0f s; got %r" % (text, secs, buf[-200:]))
        r, _, _ = select.select([fd], [], [], left)
        if r:
            data = os.read(fd, 4096)
            if not data:
                raise RuntimeError("the client ended; got %r" % buf[-200:])
            buf += data
    return buf


def session(argv):
    """One session: (open seconds, [echo seconds...])."""
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    try:
        read_until(fd, b"ready")
        opened = time.monotonic() - t0
        echoes = []
        for i in range(rounds):
            c = b"abcdefghijklmnopqrstuvwxyz"[i % 26 : i % 26 + 1]
            a = time.monotonic()
            os.write(fd, c)
            read_until(fd, c, 10)
            echoes.append(time.monotonic() - a)
        os.write(fd, b"\r\x04")  # Ctrl-D at the start of a line: cat ends
        return opened, echoes
    finally:
        end = time.monotonic() + 10
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > end:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                break
            try:
                os.read(fd, 4096)  # drain, so the client is never blocked writing
            except OSError:
                time.sleep(0.01)
        os.close(fd)


def pct(p, xs):
    s = sorted(xs)
    r = max(1, int((p * len(s) + 99) / 100))
    return s[r - 1] * 1000.0


sides = {
    "sbx": [sbx, "exec", "-it", task, "--"] + CMD,
    "docker": ["docker", "exec", "-it", container] + CMD,
}
res = {k: ([], []) for k in sides}
try:
    for k, argv in sides.items():  # one warm-up each, not counted
        session(argv)
    for _ in range(sessions):
        for k, argv in sides.items():
            o, e = session(argv)
            res[k][0].append(o)
            res[k][1].extend(e)
finally:
    subprocess.run([sbx, "task", "end", task], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if own_state:
        shutil.rmtree(os.environ["SBX_STATE_DIR"], ignore_errors=True)

for k, label in (("sbx", "sbx exec -it TASK"), ("docker", "docker exec -it CONTAINER")):
    o, e = res[k]
    print("%-26s open p50 %6.1f ms  p95 %6.1f ms (%d sessions); echo p50 %5.2f ms  p95 %5.2f ms (%d keys)"
          % (label, pct(50, o), pct(95, o), len(o), pct(50, e), pct(95, e), len(e)))
print("ratio sbx/docker (p50): open %.2f, echo %.2f"
      % (pct(50, res["sbx"][0]) / pct(50, res["docker"][0]),
         pct(50, res["sbx"][1]) / pct(50, res["docker"][1])))
