#!/usr/bin/env python3
"""An endless request header against the runner's TCP API (docs/api.md,
"Limits before authentication").

usage: bench/api_endless_header.py PID PORT [SECONDS]

Connects to 127.0.0.1:PORT (a `sbx serve` with runner.listen = "tcp:..." whose
process is PID), sends a request line and `X-Endless: aaaa...` as fast as the
server takes it for SECONDS (default 20) or until the server closes, and prints
how much was sent, when the server closed, the server's CPU share over the run
and its RSS before, at the end and 3 s after the client closed (from /proc).
Loopback only.
"""
import sys as _sys

if len(_sys.argv) > 1 and _sys.argv[1] in ("-h", "--help"):
    print(__doc__ if __doc__ else open(__file__).read().split("\n\n")[0])
    _sys.exit(0)
import os
import socket
import sys
import time


def main():
    pid, port = int(sys.argv[1]), int(sys.argv[2])
    duration = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    tck = os.sysconf('SC_CLK_TCK')

    def cpu():
        f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
        return (int(f[11]) + int(f[12])) / tck

    def mem(key):
        for line in open(f'/proc/{pid}/status'):
            if line.startswith(key):
                return int(line.split()[1]) // 1024
        return -1

    rss0, c0, t0 = mem('VmRSS'), cpu(), time.time()
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'GET /v1/queue HTTP/1.1\r\nHost: x\r\nX-Endless: ')
    chunk = b'a' * 65536
    sent, closed_after = 0, None
    s.settimeout(1.0)
    while time.time() - t0 < duration:
        try:
            sent += s.send(chunk)
        except socket.timeout:
            continue
        except OSError:
            closed_after = time.time() - t0
            break
    c1, t1, rss1, hwm = cpu(), time.time(), mem('VmRSS'), mem('VmHWM')
    s.close()
    time.sleep(3)
    rss2 = mem('VmRSS')
    closed = f'after {closed_after:.2f} s' if closed_after else 'never'
    print(f'sent {sent / 2**20:.1f} MiB; server closed {closed}; '
          f'server CPU {100 * (c1 - c0) / (t1 - t0):.0f}% over {t1 - t0:.1f} s; '
          f'RSS {rss0} -> {rss1} MiB (peak {hwm}), 3 s after close {rss2} MiB')


if __name__ == '__main__':
    main()
