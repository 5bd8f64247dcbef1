#!/usr/bin/env python3
"""A local stand-in for the Infisical endpoints cred_infisical uses.

Reproduces, from shared/reference/infisical-egress-docker-api.md part A:
  POST /api/v1/auth/universal-auth/login   (form-encoded or JSON)
  POST /api/v1/auth/token/renew            {"accessToken"} -> new token
  POST /api/v1/auth/token/revoke           {"accessToken"}
  GET  /api/v4/secrets?projectId&environment&secretPath
  GET  /api/v3/secrets/raw?workspaceId&environment&secretPath
with their error cases: bad credentials (401), lockout after N failed logins
in a window (401 "locked out"), expired token, renew past the Max TTL,
malformed JSON, v4 missing (404, so the client falls back to v3 raw).

Test control (never part of Infisical):
  GET  /_test/calls   -> {"calls": [{"method", "path", "status"[, "secret_path"]}, ...]}
                         in order (secret_path: the secretPath a secrets call asked for)
  GET  /_test/tokens  -> {"live": n, "revoked": n}
  POST /_test/reset   -> forget calls, tokens and lockouts; default settings
  POST /_test/config  -> merge JSON settings: ttl, max_ttl, v4 (bool),
       malformed (list of "login", "renew", "revoke", "secrets"),
       lockout_threshold, lockout_window, lockout_duration, hidden (bool),
       advertised_max_ttl (accessTokenMaxTTL to announce, if not max_ttl),
       client_id, client_secret, project, secrets {env: {path: {NAME: VALUE}}},
       imports {env: {path: {NAME: VALUE}}}, expire_tokens (true: every
       current token is expired now)

Standalone: python3 tests/contract/infisical_server.py --port 0
It listens on 127.0.0.1 only and prints its port on stdout. Request bodies
(credentials, tokens) are never logged or recorded.
"""

import argparse
import copy
import json
import secrets as rnd
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULTS = {
    "client_id": "test-client-id",
    "client_secret": "test-client-secret",
    "project": "proj-1",
    "ttl": 600,
    "max_ttl": 3600,
    "v4": True,
    "malformed": [],
    "hidden": False,
    "advertised_max_ttl": None,
    "lockout_threshold": 3,
    "lockout_window": 30,
    "lockout_duration": 300,
    "secrets": {
        "dev": {
            "/tasks/T1": {"API_KEY": "sk-test-abc123xyz", "DB_PASSWORD": "hunter2-long"},
        }
    },
    "imports": {},
}


class State:
    def __init__(self):
        self.lock = threading.RLock()
        self.reset()

    def reset(self):
        self.settings = copy.deepcopy(DEFAULTS)
        self.calls = []
        self.tokens = {}  # token -> dict(created, renewed, ttl, max_ttl, revoked, expired)
        self.failures = {}  # client id -> [times of failed logins]
        self.locked_until = {}  # client id -> time


STATE = State()


def new_token():
    # shaped like a JWT; random, so a renew always returns a new string
    return "eyJhbGciOiJIUzI1NiJ9." + rnd.token_urlsafe(24) + "." + rnd.token_urlsafe(16)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "infisical-test/1"

    def log_message(self, fmt, *args):  # quiet: nothing about requests is printed
        pass

    # -- helpers -------------------------------------------------------
    def reply(self, status, obj=None, raw=None):
        body = raw if raw is not None else json.dumps(obj if obj is not None else {}).encode()
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        # recorded before the reply is sent: the client's next call cannot
        # overtake this one in the log; a secrets call also records its
        # secretPath (which client's secrets were asked for)
        if not path.startswith("/_test/"):
            call = {"method": self.command, "path": path, "status": status}
            sp = urllib.parse.parse_qs(url.query).get("secretPath")
            if sp:
                call["secret_path"] = sp[0]
            with STATE.lock:
                STATE.calls.append(call)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, message, name="Error"):
        self.reply(status, {"statusCode": status, "message": message, "error": name})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def body_fields(self):
        raw = self.body()
        ctype = self.headers.get("Content-Type", "")
        try:
            if ctype.startswith("application/x-www-form-urlencoded"):
                return {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
            return json.loads(raw.decode() or "{}")
        except (ValueError, UnicodeDecodeError):
            return None

    def malformed(self, what):
        return what in STATE.settings["malformed"]

    def token_reply(self, kind, tok, rec):
        if self.malformed(kind):
            self.reply(200, raw=b'{"accessToken": "' + tok.encode()[:8] + b'", "expiresIn": ')
            return
        adv = STATE.settings.get("advertised_max_ttl")
        self.reply(200, {"accessToken": tok, "expiresIn": rec["ttl"],
                         "accessTokenMaxTTL": rec["max_ttl"] if adv is None else adv,
                         "tokenType": "Bearer"})

    def live(self, tok):
        """The token's record when it may be used now, else an error string."""
        rec = STATE.tokens.get(tok)
        if rec is None or rec["revoked"]:
            return None, "Token not found or revoked"
        if rec["expired"] or time.time() > rec["renewed"] + rec["ttl"]:
            return None, "Access token expired"
        return rec, None

    # -- routes --------------------------------------------------------
    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_test/reset":
            self.body()
            with STATE.lock:
                STATE.reset()
            return self.reply(200, {"ok": True})
        if path == "/_test/config":
            fields = self.body_fields() or {}
            with STATE.lock:
                for k, v in fields.items():
                    if k == "expire_tokens":
                        for rec in STATE.tokens.values():
                            rec["expired"] = True
                    else:
                        STATE.settings[k] = v
            return self.reply(200, {"ok": True})
        if path == "/api/v1/auth/universal-auth/login":
            return self.login()
        if path == "/api/v1/auth/token/renew":
            return self.renew()
        if path == "/api/v1/auth/token/revoke":
            return self.revoke()
        self.body()
        self.error(404, "Route POST:%s not found" % path, "Not Found")

    def login(self):
        fields = self.body_fields()
        now = time.time()
        s = STATE.settings
        if fields is None or "clientId" not in fields or "clientSecret" not in fields:
            return self.error(400, "clientId and clientSecret are required", "BadRequestError")
        cid = fields["clientId"]
        with STATE.lock:
            if STATE.locked_until.get(cid, 0) > now:
                return self.error(401, "Failed to authenticate: identity is locked out after "
                                  "too many failed login attempts", "UnauthorizedError")
            if cid != s["client_id"] or fields["clientSecret"] != s["client_secret"]:
                recent = [t for t in STATE.failures.get(cid, []) if now - t < s["lockout_window"]]
                recent.append(now)
                STATE.failures[cid] = recent
                if len(recent) >= s["lockout_threshold"]:
                    STATE.locked_until[cid] = now + s["lockout_duration"]
                return self.error(401, "Invalid credentials", "UnauthorizedError")
            STATE.failures.pop(cid, None)
            tok = new_token()
            rec = {"created": now, "renewed": now, "ttl": s["ttl"], "max_ttl": s["max_ttl"],
                   "revoked": False, "expired": False}
            STATE.tokens[tok] = rec
        self.token_reply("login", tok, rec)

    def renew(self):
        fields = self.body_fields() or {}
        now = time.time()
        with STATE.lock:
            rec, why = self.live(fields.get("accessToken", ""))
            if rec is None:
                if why == "Access token expired":
                    STATE.tokens.pop(fields.get("accessToken"), None)
                    why = "Failed to renew MI access token due to TTL expiration"
                return self.error(401, why, "UnauthorizedError")
            if rec["max_ttl"] > 0 and now + rec["ttl"] > rec["created"] + rec["max_ttl"]:
                STATE.tokens.pop(fields["accessToken"])
                return self.error(401, "Failed to renew MI access token past its Max TTL "
                                  "expiration", "UnauthorizedError")
            # current Infisical signs a new token on renew: the old one is gone
            STATE.tokens.pop(fields["accessToken"])
            tok = new_token()
            rec = dict(rec, renewed=now)
            STATE.tokens[tok] = rec
        self.token_reply("renew", tok, rec)

    def revoke(self):
        fields = self.body_fields() or {}
        with STATE.lock:
            rec = STATE.tokens.get(fields.get("accessToken", ""))
            if rec is None or rec["revoked"]:
                return self.error(401, "Token not found or revoked", "UnauthorizedError")
            rec["revoked"] = True
        if self.malformed("revoke"):
            return self.reply(200, raw=b"<html>not json")
        self.reply(200, {"message": "Successfully revoked access token"})

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        if url.path == "/_test/calls":
            with STATE.lock:
                return self.reply(200, {"calls": list(STATE.calls)})
        if url.path == "/_test/tokens":
            with STATE.lock:
                live = sum(1 for r in STATE.tokens.values() if not r["revoked"])
                revoked = sum(1 for r in STATE.tokens.values() if r["revoked"])
            return self.reply(200, {"live": live, "revoked": revoked})
        if url.path == "/api/v4/secrets":
            if not STATE.settings["v4"]:
                return self.error(404, "Route GET:/api/v4/secrets not found", "Not Found")
            return self.secrets(q, q.get("projectId"))
        if url.path == "/api/v3/secrets/raw":
            return self.secrets(q, q.get("workspaceId"))
        self.error(404, "Route GET:%s not found" % url.path, "Not Found")

    def secrets(self, q, project):
        auth = self.headers.get("Authorization", "")
        s = STATE.settings
        with STATE.lock:
            rec, why = self.live(auth[7:] if auth.startswith("Bearer ") else "")
        if rec is None:
            return self.error(401, why, "UnauthorizedError")
        env = q.get("environment")
        path = (q.get("secretPath") or "/").rstrip("/") or "/"
        if not project or not env:
            return self.error(400, "Missing project id or environment", "BadRequestError")
        if project != s["project"]:
            return self.error(404, "Project not found", "NotFoundError")
        folder = s["secrets"].get(env, {}).get(path)
        if folder is None:
            return self.error(404, "Folder with path '%s' in environment '%s' was not found"
                              % (path, env), "NotFoundError")
        if self.malformed("secrets"):
            return self.reply(200, raw=b'{"secrets": [ {"secretKey": "API_KEY", "secretValue"')

        def item(name, value):
            hidden = bool(s["hidden"])
            return {"id": rnd.token_hex(8), "_id": rnd.token_hex(8), "workspace": project,
                    "environment": env, "version": 1, "type": "shared", "secretKey": name,
                    "secretValue": "<hidden-by-infisical>" if hidden else value,
                    "secretValueHidden": hidden, "secretComment": "", "secretPath": path}

        imports = []
        imp = s["imports"].get(env, {}).get(path)
        if imp and q.get("include_imports") == "true":
            imports.append({"secretPath": "/shared", "environment": env,
                            "secrets": [item(k, v) for k, v in imp.items()]})
        self.reply(200, {"secrets": [item(k, v) for k, v in folder.items()],
                         "imports": imports})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    ap.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    ap.add_argument("--client-id")
    ap.add_argument("--client-secret")
    ap.add_argument("--ttl", type=int)
    ap.add_argument("--max-ttl", type=int)
    ap.add_argument("--secret", action="append", default=[],
                    help="ENV:PATH:NAME=VALUE, repeatable (replaces the default secrets)")
    args = ap.parse_args()
    for key in ("client_id", "client_secret", "ttl", "max_ttl"):
        if getattr(args, key) is not None:
            DEFAULTS[key] = getattr(args, key)
    if args.secret:
        DEFAULTS["secrets"] = {}
        for spec in args.secret:
            env, path, kv = spec.split(":", 2)
            name, value = kv.split("=", 1)
            DEFAULTS["secrets"].setdefault(env, {}).setdefault(path, {})[name] = value
    STATE.reset()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        if args.host == "::1":
            import socket
            address_family = socket.AF_INET6

    srv = Server((args.host, args.port), Handler)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
