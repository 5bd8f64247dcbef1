#!/usr/bin/env python3
"""oci_token_registry.py CA CERT KEY FEATURE_DIR - a read-only registry on a free
loopback port that asks for a bearer token (the token realm is itself, and
takes basic auth sbxtest:s3cret-pw), serving one feature as
features/greet:1 (the layer: FEATURE_DIR as a tar), for
tests/runtime/image_oci.sh. Prints the port on its first line, then serves
until killed. Loopback only.
"""
import base64
import hashlib
import http.server
import json
import os
import ssl
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OCI_CA", sys.argv[1])  # oci_push reads it at import
os.environ.setdefault("OCI_USER", "x")
os.environ.setdefault("OCI_PASS", "x")
import oci_push  # noqa: E402

TOKEN = "good-token-" + hashlib.sha256(os.urandom(16)).hexdigest()[:16]
LOGIN = "Basic " + base64.b64encode(b"sbxtest:s3cret-pw").decode()
layer = oci_push.tar_of(sys.argv[4])
config = b"{}"


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


manifest = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.devcontainers", "digest": digest(config),
               "size": len(config)},
    "layers": [{"mediaType": "application/vnd.devcontainers.layer.v1+tar",
                "digest": digest(layer), "size": len(layer)}],
}).encode()
BLOBS = {digest(layer): layer, digest(config): config}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        port = self.server.server_address[1]
        if self.path.startswith("/token"):
            if self.headers.get("Authorization") != LOGIN or "service=sbx-test" not in self.path:
                return self.send(401, b"{}")
            return self.send(200, json.dumps({"token": TOKEN}).encode())
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', [(
                "WWW-Authenticate",
                'Bearer realm="https://127.0.0.1:%d/token",service="sbx-test",'
                'scope="repository:features/greet:pull"' % port)])
        if self.path == "/v2/features/greet/manifests/1":
            return self.send(200, manifest, [
                ("Content-Type", "application/vnd.oci.image.manifest.v1+json"),
                ("Docker-Content-Digest", digest(manifest))])
        prefix = "/v2/features/greet/blobs/"
        if self.path.startswith(prefix) and self.path[len(prefix):] in BLOBS:
            return self.send(200, BLOBS[self.path[len(prefix):]])
        return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')


srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
