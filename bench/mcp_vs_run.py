#!/usr/bin/env python3
"""mcp_vs_run.py [RUNS] - latency of sandbox_run through `sbx mcp` against
`sbx run` on the same engine, alternated:

  fresh:  sandbox_run {argv: [true]} (a fresh sandbox per call)  vs  `sbx run -- true`
  task:   sandbox_run {task, argv: [true]} in a running task      vs  `sbx exec TASK -- true`

Prints medians and ratios (MCP / CLI). Needs DOCKER_HOST, the warm image,
and SBX (default build/sbx). Talks only to the sbx processes it starts."""
import sys as _sys

if len(_sys.argv) > 1 and _sys.argv[1] in ("-h", "--help"):
    print(__doc__ if __doc__ else open(__file__).read().split("\n\n")[0])
    _sys.exit(0)
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
sbx = os.environ.get("SBX", "build/sbx")
state = tempfile.mkdtemp(prefix="sbx-bench-mcp-")
env = dict(os.environ, SBX_STATE_DIR=state)


class Mcp:
    def __init__(self):
        self.p = subprocess.Popen([sbx, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, text=True)
        self.n = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "0"}})

    def call(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                       "params": params}) + "\n")
        self.p.stdin.flush()
        r = json.loads(self.p.stdout.readline())
        if "error" in r or r["result"].get("isError"):
            sys.exit(f"mcp_vs_run: {method} failed: {r}")
        return r

    def run(self, args):
        return self.call("tools/call", {"name": "sandbox_run", "arguments": args})

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def cli(*args):
    subprocess.run([sbx, *args], env=env, check=True, stdout=subprocess.DEVNULL)


m = Mcp()
fresh_mcp, fresh_cli, task_mcp, task_cli = [], [], [], []
task = subprocess.run([sbx, "task", "start"], env=env, check=True, capture_output=True,
                      text=True).stdout.strip()
m.run({"task": "bench", "argv": ["true"]})
for _ in range(runs):
    fresh_mcp.append(timed(lambda: m.run({"argv": ["true"]})))
    fresh_cli.append(timed(lambda: cli("run", "--", "true")))
    task_mcp.append(timed(lambda: m.run({"task": "bench", "argv": ["true"]})))
    task_cli.append(timed(lambda: cli("exec", task, "--", "true")))
m.call("tools/call", {"name": "sandbox_end", "arguments": {"task": "bench"}})
m.close()
cli("task", "end", task)
for name, a, b, peer in (("fresh sandbox", fresh_mcp, fresh_cli, "sbx run -- true"),
                         ("in a task", task_mcp, task_cli, "sbx exec TASK -- true")):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{name}: sandbox_run median {ma * 1000:.0f} ms, {peer} median {mb * 1000:.0f} ms, "
          f"ratio {ma / mb:.2f} ({runs} runs each)")
subprocess.run(["rm", "-rf", state])
