#!/usr/bin/env python3
"""A local test double of an OpenSandbox server (lifecycle API + execd).

It reproduces the wire format of shared/reference/opensandbox-api.md,
quirks included, so provider_opensandbox can be tested without Docker:

  * POST /v1/sandboxes answers 202; validation failures answer FastAPI's
    422 {"detail": [...]}, other errors {"code", "message"};
  * null fields are omitted; DELETE answers 204, then 404 for that id;
  * GET /v1/sandboxes/{id}/endpoints/44772 gives "host:port/path" (no
    scheme) and a header the execd requests must carry;
  * execd's POST /command streams raw JSON events separated by blank lines
    (init, stdout, stderr, ping, then execution_complete or error with the
    exit status in error.evalue), sleeps after the terminal event and ends
    WITHOUT the terminating zero-length chunk (upstream issue #1277).

Commands really run, with /bin/sh on this host, inside a per-sandbox
temporary directory: this is a local test double, not a sandbox.

Quirks are switched on with POST /_test/quirks {...} (replaces the set):
  create_delay: seconds      sleep before answering create (a slow create)
  pending_polls: n           create says Pending; the next n GETs too
  create_state: "Failed"     state reached after the Pending polls
  create_status: 422|400|... answer create with that error instead
  drop_create: true          close the connection without any reply to create
  fail_gets: n               answer the next n GETs with 503
  page_size_cap: n           serve at most n items per list page
  data_prefix: true          send events as SSE "data: {...}"
  split_events: true         send each event in two chunks, split mid-JSON
  drop_midstream: true       close the stream after the first output event,
                             without a terminal event or final chunk
  tail_seconds: s            sleep after the terminal event (default 1.0)
  command_error: true        answer POST /command with 400 {code, message}
  command_garbage: true      stream a block that is not JSON
  ping_interval: s           seconds between ping events (default 0.5)
  zulu_times: true           timestamps as 2026-06-15T10:30:00Z (default:
                             fractional seconds and +00:00)
GET /_test/calls lists the calls seen ({method, path, api_key, body});
POST /_test/reset forgets them.

Usage: opensandbox_server.py [--port 0] [--api-key KEY] [--keep-running]
Prints the port on its first stdout line, then serves on 127.0.0.1 only.
It exits on SIGTERM, and when its parent process exits (unless
--keep-running), removing the sandboxes' temporary directories.
"""
import argparse
import datetime
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LABEL_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
ROUTE_HEADER = "X-Test-Route"

LOCK = threading.RLock()
SANDBOXES = {}   # id -> dict
COMMANDS = {}    # command id -> dict(proc, exit_code, sandbox)
CALLS = []
QUIRKS = {}
API_KEY = None


def now_iso(t=None):
    t = time.time() if t is None else t
    fmt = "%Y-%m-%dT%H:%M:%SZ" if quirk("zulu_times") else "%Y-%m-%dT%H:%M:%S.%f+00:00"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(fmt)


def parse_iso(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def quirk(name, default=None):
    with LOCK:
        return QUIRKS.get(name, default)


def sandbox_view(sb):
    out = {
        "id": sb["id"],
        "status": {"state": sb["state"], "reason": sb["reason"],
                   "lastTransitionAt": now_iso(sb["created"])},
        "metadata": sb["metadata"],
        "createdAt": now_iso(sb["created"]),
        "entrypoint": sb["entrypoint"],
        "image": {"uri": sb["image"]} if sb["image"] else None,
        "expiresAt": now_iso(sb["expires"]) if sb["expires"] else None,
    }
    return {k: v for k, v in out.items() if v is not None}


def validation_errors(body):
    """FastAPI-style 422 items for what the real schema rejects."""
    errs = []
    if not isinstance(body, dict):
        return [{"type": "dict_type", "loc": ["body"], "msg": "Input should be a valid dictionary"}]
    if ("image" in body) == ("snapshotId" in body):
        errs.append({"type": "value_error", "loc": ["body"],
                     "msg": "Value error, exactly one of image or snapshotId is required"})
    if "image" in body and not body.get("entrypoint"):
        errs.append({"type": "missing", "loc": ["body", "entrypoint"], "msg": "Field required"})
    if "resourceLimits" not in body:
        errs.append({"type": "missing", "loc": ["body", "resourceLimits"],
                     "msg": "Field required"})
    t = body.get("timeout")
    if t is not None and (not isinstance(t, int) or t < 60):
        errs.append({"type": "greater_than_equal", "loc": ["body", "timeout"],
                     "msg": "Input should be greater than or equal to 60", "input": t,
                     "ctx": {"ge": 60}})
    return errs


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"

    def log_message(self, fmt, *args):  # quiet
        pass

    # --- plumbing ---------------------------------------------------------
    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return "<not json>"

    def send_json(self, status, obj=None):
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("X-Request-ID", uuid.uuid4().hex)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, message):
        self.send_json(status, {"code": code, "message": message})

    def record(self, body):
        with LOCK:
            CALLS.append({"method": self.command, "path": self.path,
                          "api_key": self.headers.get("OPEN-SANDBOX-API-KEY") is not None,
                          "body": body})

    def dispatch(self):
        body = self.read_body() if self.command in ("POST", "PUT", "PATCH") else None
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/_test/"):
            return self.test_control(path, body)
        self.record(body)
        if path.startswith("/execd/"):
            return self.execd(path, body)
        if path == "/health":
            # says it is a test double, so `sbx spike` never reports its
            # timings as OpenSandbox's
            return self.send_json(200, {"status": "healthy", "test_double": True})
        if path.startswith("/v1/"):
            path = path[3:]
        if API_KEY is not None:
            got = self.headers.get("OPEN-SANDBOX-API-KEY")
            if got is None:
                return self.error(401, "MISSING_API_KEY", "Authentication credentials were "
                                  "not provided. Please include OPEN-SANDBOX-API-KEY header.")
            if got != API_KEY:
                return self.error(401, "INVALID_API_KEY", "Invalid API key")
        return self.lifecycle(path, body)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = lambda self: self.dispatch()

    # --- test control -----------------------------------------------------
    def test_control(self, path, body):
        global QUIRKS
        if path == "/_test/calls":
            with LOCK:
                return self.send_json(200, list(CALLS))
        if path == "/_test/reset":
            with LOCK:
                CALLS.clear()
            return self.send_json(200, {})
        if path == "/_test/quirks":
            with LOCK:
                QUIRKS = dict(body or {})
            return self.send_json(200, QUIRKS)
        return self.error(404, "NOT_FOUND", path)

    # --- lifecycle --------------------------------------------------------
    def lifecycle(self, path, body):
        parts = [p for p in path.split("/") if p]
        if parts == ["sandboxes"] and self.command == "POST":
            return self.create(body)
        if parts == ["sandboxes"] and self.command == "GET":
            return self.list()
        if len(parts) >= 2 and parts[0] == "sandboxes":
            with LOCK:
                sb = SANDBOXES.get(parts[1])
            if sb is None:
                return self.error(404, "DOCKER::SANDBOX_NOT_FOUND",
                                  "Sandbox %s not found." % parts[1])
            if len(parts) == 2 and self.command == "GET":
                if quirk("fail_gets", 0) > 0:
                    with LOCK:
                        QUIRKS["fail_gets"] -= 1
                    return self.error(503, "GENERAL::UNAVAILABLE", "try again")
                with LOCK:
                    if sb["pending"] > 0:
                        sb["pending"] -= 1
                    elif sb["state"] == "Pending":
                        sb["state"] = quirk("create_state", "Running")
                        sb["reason"] = ("CONTAINER_RUNNING" if sb["state"] == "Running"
                                        else "CONTAINER_EXITED_ERROR")
                    view = sandbox_view(sb)
                return self.send_json(200, view)
            if len(parts) == 2 and self.command == "DELETE":
                with LOCK:
                    del SANDBOXES[parts[1]]
                for cid, cmd in list(COMMANDS.items()):
                    if cmd["sandbox"] == parts[1] and cmd["proc"].poll() is None:
                        os.killpg(cmd["proc"].pid, signal.SIGKILL)
                shutil.rmtree(sb["dir"], ignore_errors=True)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if len(parts) == 4 and parts[2] == "endpoints" and self.command == "GET":
                if sb["state"] != "Running":
                    return self.error(409, "DOCKER::SANDBOX_NOT_RUNNING", "not running")
                host, port = self.server.server_address[:2]
                return self.send_json(200, {
                    "endpoint": "%s:%d/execd/%s/proxy/%s" % (host, port, sb["id"], parts[3]),
                    "headers": {ROUTE_HEADER: sb["id"]}})
            if len(parts) == 3 and parts[2] == "renew-expiration" and self.command == "POST":
                try:
                    want = parse_iso(body["expiresAt"])
                except (KeyError, TypeError, ValueError):
                    return self.send_json(422, {"detail": [{"type": "missing",
                                                            "loc": ["body", "expiresAt"],
                                                            "msg": "Field required"}]})
                if not sb["expires"] or want <= sb["expires"]:
                    return self.error(409, "DOCKER::INVALID_EXPIRATION",
                                      "New expiration must be later than the current one.")
                with LOCK:
                    sb["expires"] = want
                return self.send_json(200, {"expiresAt": now_iso(want)})
        return self.error(404, "GENERAL::NOT_FOUND", "no route %s %s" % (self.command, path))

    def create(self, body):
        if quirk("drop_create"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        delay = quirk("create_delay", 0)
        if delay:
            time.sleep(delay)
        st = quirk("create_status")
        if st == 422:
            return self.send_json(422, {"detail": [
                {"type": "greater_than_equal", "loc": ["body", "timeout"],
                 "msg": "Input should be greater than or equal to 60", "input": 5},
                {"type": "missing", "loc": ["body", "resourceLimits"], "msg": "Field required"}]})
        if st:
            return self.error(st, "SANDBOX::INVALID_PARAMETER",
                              "timeout exceeds max_sandbox_timeout_seconds (86400)")
        errs = validation_errors(body)
        if errs:
            return self.send_json(422, {"detail": errs})
        for k, v in (body.get("metadata") or {}).items():
            name = k.split("/", 1)[-1]
            if (k.startswith("opensandbox.io/") or not LABEL_RE.match(name) or len(name) > 63
                    or not isinstance(v, str) or len(v) > 63 or (v and not LABEL_RE.match(v))):
                return self.error(400, "SANDBOX::INVALID_METADATA_LABEL",
                                  "invalid metadata label %r=%r" % (k, v))
        sid = str(uuid.uuid4())
        d = tempfile.mkdtemp(prefix="osb-test-sandbox-")
        os.makedirs(os.path.join(d, "workspace"))
        pending = quirk("pending_polls", 0)
        now = time.time()
        sb = {"id": sid, "dir": d, "created": now,
              "state": "Pending" if pending else "Running",
              "reason": "CONTAINER_STARTING" if pending else "CONTAINER_RUNNING",
              "pending": pending, "metadata": body.get("metadata") or {},
              "env": {k: v for k, v in (body.get("env") or {}).items() if v is not None},
              "entrypoint": body.get("entrypoint") or ["tail", "-f", "/dev/null"],
              "image": (body.get("image") or {}).get("uri"),
              "expires": now + body["timeout"] if body.get("timeout") else None}
        with LOCK:
            SANDBOXES[sid] = sb
            view = sandbox_view(sb)
        return self.send_json(202, view)

    def list(self):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        want = dict(urllib.parse.parse_qsl(q.get("metadata", [""])[0]))
        page = int(q.get("page", ["1"])[0])
        size = int(q.get("pageSize", ["20"])[0])
        if page < 1 or not 1 <= size <= 200:
            return self.send_json(422, {"detail": [{"type": "value_error",
                                                    "loc": ["query", "pageSize"],
                                                    "msg": "out of range"}]})
        size = min(size, quirk("page_size_cap", size))
        with LOCK:
            items = [sandbox_view(s) for s in SANDBOXES.values()
                     if all(s["metadata"].get(k) == v for k, v in want.items())]
        items.sort(key=lambda s: s["id"])
        total = len(items)
        chunk = items[(page - 1) * size:page * size]
        pages = (total + size - 1) // size
        return self.send_json(200, {"items": chunk, "pagination": {
            "page": page, "pageSize": size, "totalItems": total, "totalPages": pages,
            "hasNextPage": page < pages}})

    # --- execd ------------------------------------------------------------
    def execd(self, path, body):
        parts = [p for p in path.split("/") if p]   # execd, id, proxy, 44772, route...
        if len(parts) < 5 or parts[2] != "proxy" or parts[3] != "44772":
            return self.error(404, "NOT_FOUND", path)
        with LOCK:
            sb = SANDBOXES.get(parts[1])
        if sb is None:
            return self.error(502, "RUNTIME_ERROR", "sandbox %s is gone" % parts[1])
        if self.headers.get(ROUTE_HEADER) != sb["id"]:
            return self.error(400, "MISSING_ROUTE_HEADER", "endpoint header missing")
        route = parts[4:]
        if route == ["ping"]:
            return self.send_json(200, None)
        if route == ["command"] and self.command == "POST":
            if quirk("command_error"):
                return self.error(400, "INVALID_REQUEST_BODY", "error parsing request: "
                                  "json: cannot unmarshal number into Go struct field")
            if quirk("command_garbage"):
                return self.stream_raw(b"this is not json\n\n")
            return self.run_command(sb, body)
        if route == ["command"] and self.command == "DELETE":
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            cmd = COMMANDS.get(q.get("id", [""])[0])
            if cmd is None:
                return self.error(404, "UNKNOWN", "no such command")
            if cmd["proc"].poll() is None:
                os.killpg(cmd["proc"].pid, signal.SIGKILL)
            return self.send_json(200, None)
        if len(route) == 3 and route[:2] == ["command", "status"]:
            cmd = COMMANDS.get(route[2])
            if cmd is None:
                return self.error(404, "UNKNOWN", "no such command")
            rc = cmd["proc"].poll()
            out = {"id": route[2], "content": cmd["command"], "running": rc is None,
                   "started_at": now_iso(cmd["started"])}
            if rc is not None:
                out["exit_code"] = -1 if rc < 0 else rc
                out["finished_at"] = now_iso()
            return self.send_json(200, out)
        return self.error(404, "UNKNOWN", "no execd route %s" % "/".join(route))

    def stream_raw(self, data):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        self.chunk(data)
        self.chunk(b"")
        return None

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, obj):
        ev = dict(obj, timestamp=int(time.time() * 1000))
        data = json.dumps(ev).encode()
        if quirk("data_prefix"):
            data = b"data: " + data
        data += b"\n\n"
        if quirk("split_events") and len(data) > 4:
            half = len(data) // 2
            self.chunk(data[:half])
            time.sleep(0.01)
            self.chunk(data[half:])
        else:
            self.chunk(data)

    def run_command(self, sb, body):
        if not isinstance(body, dict) or not isinstance(body.get("command"), str):
            return self.error(400, "INVALID_REQUEST_BODY", "command is required")
        cwd = sb["dir"]
        if body.get("cwd"):
            cwd = os.path.join(sb["dir"], body["cwd"].lstrip("/"))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sb["dir"]}
        env.update(sb["env"])
        env.update(body.get("envs") or {})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        cid = uuid.uuid4().hex
        try:
            self.event({"type": "init", "text": cid})
            try:
                proc = subprocess.Popen(["/bin/sh", "-c", body["command"]], cwd=cwd, env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True)
            except OSError as e:  # like Go: the error text, not a number
                self.event({"type": "error", "error": {
                    "ename": "CommandExecError", "evalue": "fork/exec /bin/sh: %s" % e,
                    "traceback": [str(e)]}})
                return None
            COMMANDS[cid] = {"proc": proc, "sandbox": sb["id"], "command": body["command"],
                             "started": time.time()}
            self.stream(proc)
        except OSError:
            pass  # the client stopped reading (as it should after the terminal event)
        return None

    def stream(self, proc):
        q = queue.Queue()

        def pump(pipe, kind):
            for block in iter(lambda: os.read(pipe.fileno(), 4096), b""):
                q.put((kind, block.decode("utf-8", "replace")))
            q.put((kind, None))

        for pipe, kind in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            threading.Thread(target=pump, args=(pipe, kind), daemon=True).start()
        interval = quirk("ping_interval", 0.5)
        self.event({"type": "ping", "text": "pong"})
        last_ping, open_pipes, outputs = time.time(), 2, 0
        while open_pipes:
            try:
                kind, text = q.get(timeout=interval)
            except queue.Empty:
                kind = None
            if kind is not None and text is None:
                open_pipes -= 1
            elif kind is not None:
                self.event({"type": kind, "text": text})
                outputs += 1
                if quirk("drop_midstream"):
                    # cut the connection: no terminal event, no final chunk
                    self.connection.shutdown(socket.SHUT_RDWR)
                    threading.Thread(target=proc.wait, daemon=True).start()
                    return
            if time.time() - last_ping >= interval:
                self.event({"type": "ping", "text": "pong"})
                last_ping = time.time()
        rc = proc.wait()
        if rc == 0:
            self.event({"type": "execution_complete", "execution_time": 1})
        else:
            code = -1 if rc < 0 else rc
            self.event({"type": "error", "error": {"ename": "CommandExecError",
                                                   "evalue": str(code),
                                                   "traceback": ["exit status %d" % code]}})
        # execd sleeps, then returns without the terminating zero-length chunk
        time.sleep(quirk("tail_seconds", 1.0))
        self.connection.shutdown(socket.SHUT_RDWR)


def main():
    global API_KEY
    parent = os.getppid()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--keep-running", action="store_true",
                    help="keep serving after the parent process exits")
    args = ap.parse_args()
    API_KEY = args.api_key
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    if not args.keep_running:
        # never outlive the test that started us (a killed test leaves no server)

        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
    try:
        srv.serve_forever()
    finally:
        for sb in list(SANDBOXES.values()):
            shutil.rmtree(sb["dir"], ignore_errors=True)
        for cmd in COMMANDS.values():
            if cmd["proc"].poll() is None:
                os.killpg(cmd["proc"].pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
