#!/usr/bin/env python3
"""pg_delay_proxy.py - a unix-socket proxy in front of PostgreSQL that, while
the file DELAY_FLAG exists, holds every message a client sends for DELAY_S
seconds before passing it on (in order): the database "answers every query
after DELAY_S". Used by bench/dbstall_bench.sh (docs/runner.md, "A slow or
silent database"). Loopback only: unix sockets in directories the bench made.

usage: pg_delay_proxy.py LISTEN_SOCKET SERVER_SOCKET DELAY_FLAG DELAY_S
"""
import sys as _sys

if len(_sys.argv) > 1 and _sys.argv[1] in ("-h", "--help"):
    print(__doc__ if __doc__ else open(__file__).read().split("\n\n")[0])
    _sys.exit(0)
import os
import socket
import sys
import threading
import time

listen_path, server_path, flag, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])


def pump(src, dst, delayed):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if delayed and os.path.exists(flag):
                time.sleep(delay)
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.connect(server_path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(client, server, True), daemon=True).start()
    threading.Thread(target=pump, args=(server, client, False), daemon=True).start()


try:
    os.unlink(listen_path)
except FileNotFoundError:
    pass
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(listen_path)
ls.listen(64)
while True:
    c, _ = ls.accept()
    serve(c)
