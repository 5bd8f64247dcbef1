#!/usr/bin/env python3
"""mcp_start.py [RUNS] - how long an MCP client waits for `sbx mcp`: from
starting the process to the answer of `initialize`, and from closing its stdin
(nothing held) to its exit, against `sbx version` (a process start that reads
no configuration), alternated. With no runner configured `sbx mcp` starts its
private runner (docs/mcp.md) before it answers.

Prints medians and the ratio to the peer. Needs DOCKER_HOST (the engine the
configured provider uses) and SBX (default build/sbx); PEER (an older sbx,
optional) is measured the same way beside it. Talks only to the sbx processes
it starts."""
import sys as _sys

if len(_sys.argv) > 1 and _sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    _sys.exit(0)
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
sbx = os.path.abspath(os.environ.get("SBX", "build/sbx"))
peer = os.environ.get("PEER")
state = tempfile.mkdtemp(prefix="sbx-bench-mcpstart-")
project = tempfile.mkdtemp(prefix="sbx-bench-mcpproj-")
env = dict(os.environ, SBX_STATE_DIR=state)


def mcp_once(binary):
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=project, text=True)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "bench", "version": "0"}}}) + "\n")
    p.stdin.flush()
    r = json.loads(p.stdout.readline())
    t1 = time.monotonic()
    if "error" in r:
        sys.exit(f"mcp_start: initialize failed: {r}")
    p.stdin.close()
    p.wait()
    t2 = time.monotonic()
    return t1 - t0, t2 - t1


def version_once(binary):
    t0 = time.monotonic()
    subprocess.run([binary, "version"], stdout=subprocess.DEVNULL, env=env, check=True)
    return time.monotonic() - t0


try:
    res = {"init": [], "exit": [], "version": [], "peer_init": [], "peer_exit": []}
    for _ in range(runs):
        i, e = mcp_once(sbx)
        res["init"].append(i)
        res["exit"].append(e)
        res["version"].append(version_once(sbx))
        if peer:
            i, e = mcp_once(peer)
            res["peer_init"].append(i)
            res["peer_exit"].append(e)
    med = {k: statistics.median(v) * 1000 for k, v in res.items() if v}
    print(f"runs {runs}")
    print(f"initialize answered   {med['init']:8.1f} ms (median)")
    print(f"exit after stdin EOF  {med['exit']:8.1f} ms")
    print(f"sbx version           {med['version']:8.1f} ms")
    print(f"ratio initialize / sbx version: {med['init'] / med['version']:.2f}")
    if peer:
        print(f"peer initialize       {med['peer_init']:8.1f} ms")
        print(f"peer exit             {med['peer_exit']:8.1f} ms")
        print(f"ratio initialize / peer initialize: {med['init'] / med['peer_init']:.2f}")
finally:
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(project, ignore_errors=True)
