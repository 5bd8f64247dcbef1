#!/usr/bin/python3
"""A local origin server for the egress tests: HTTP or HTTPS on 127.0.0.1.

usage: egress_origin.py http | https CERT KEY | https-dir CERT KEY DIR
Prints its ephemeral port on stdout, then serves until killed.
GET answers "hello from <kind> <Host header>"; POST answers the body's length.
https-dir serves DIR's files over TLS (GET only, query strings ignored): a bare git
repository after `git update-server-info` is then a remote for git's dumb HTTP.
"""
import functools
import http.server
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(("hello from %s %s\n" % (sys.argv[1], self.headers.get("Host"))).encode())

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        self.reply(("got %d bytes\n" % len(data)).encode())

    def log_message(self, *args):
        pass


class DirHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    handler = Handler
    if sys.argv[1] == "https-dir":
        handler = functools.partial(DirHandler, directory=sys.argv[4])
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if sys.argv[1] in ("https", "https-dir"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
