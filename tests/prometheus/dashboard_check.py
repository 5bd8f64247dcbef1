#!/usr/bin/env python3
"""dashboard_check.py - every panel of docs/prometheus/sbx-dashboard.json
against a real Prometheus (ctest: prometheus_dashboard).

Starts `sbx serve` with the fake provider of tests/plugin_abi on a TCP
listener on 127.0.0.1, with a submit client and a metrics-only client, and
Debian's `prometheus` (loopback only, a temporary directory, 1 s scrape and
evaluation intervals) scraping it with the metrics-only token and loading
docs/prometheus/sbx-rules.yml. It runs a few jobs in both pools (one failing,
one refused), waits until Prometheus has seen them end, then checks through
Prometheus's HTTP API that every panel's every query (Grafana's variables
substituted) is valid and returns at least one series with a finite value,
that every template variable has values, and that every rule evaluates
without error.

Needs SBX_BIN, SBX_PLUGIN_DIR and PROMETHEUS (the binary). Talks only to
127.0.0.1 and the processes it starts."""
import json
import math
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "docs", "prometheus", "sbx-dashboard.json")
RULES = os.path.join(ROOT, "docs", "prometheus", "sbx-rules.yml")
# Grafana's variables as a query is sent for "All" over the last minute
SUBST = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1m",
         "$pool": ".*", "$job": ".*"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url, data=None, headers=None, timeout=10):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def until(what, fn, seconds=60):
    end = time.monotonic() + seconds
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def exprs(panels):
    """(panel title, expr) of every target, rows' nested panels too."""
    for p in panels:
        yield from exprs(p.get("panels", []))
        for t in p.get("targets", []):
            yield p["title"], t["expr"]


def substitute(expr):
    for k in sorted(SUBST, key=len, reverse=True):
        expr = expr.replace(k, SUBST[k])
    assert "$" not in expr, f"an unknown variable in {expr}"
    return expr


def main():
    sbx, plugins, prom = (os.environ.get(k) for k in ("SBX_BIN", "SBX_PLUGIN_DIR", "PROMETHEUS"))
    if not (sbx and plugins and prom):
        print("prometheus_dashboard: needs SBX_BIN, SBX_PLUGIN_DIR and PROMETHEUS", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="sbx-prom-test-")
    procs = []
    logs = {}
    try:
        port, pport = free_port(), free_port()
        base, pbase = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{pport}"
        ci_token, prom_token = secrets.token_hex(24), secrets.token_hex(24)
        token_file = os.path.join(tmp, "prom.token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, prom_token.encode() + b"\n")
        os.close(fd)
        with open(os.path.join(tmp, "sbx.conf"), "w") as f:
            f.write(f"""plugin_dir = "{plugins}";
state_dir = "{tmp}/state";
provider = "fake";
providers = {{ fake = {{ plugin = "provider_good"; }}; }};
limits = {{ cpus = 0.5; memory = "256M"; }};
runner = {{
  listen = "tcp:127.0.0.1:{port}";
  clients = (
    {{ name = "ci";   token_env  = "SBX_PROM_TEST_CI"; scopes = ["submit", "read-all"]; }},
    {{ name = "prom"; token_file = "{token_file}";     scopes = ["metrics"]; }}
  );
}};
""")
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: sbx
    authorization: {{type: Bearer, credentials_file: "{token_file}"}}
    static_configs: [{{targets: ["127.0.0.1:{port}"]}}]
""")
        env = dict(os.environ, SBX_CONFIG=os.path.join(tmp, "sbx.conf"), SBX_PROM_TEST_CI=ci_token)
        logs["sbx serve"] = open(os.path.join(tmp, "serve.log"), "w+")
        procs.append(subprocess.Popen([sbx, "--log-level", "info", "serve"], env=env,
                                      stdout=logs["sbx serve"], stderr=subprocess.STDOUT))
        logs["prometheus"] = open(os.path.join(tmp, "prometheus.log"), "w+")
        procs.append(subprocess.Popen(
            [prom, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
             f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
            cwd=tmp, stdout=logs["prometheus"], stderr=subprocess.STDOUT))
        auth = {"Authorization": f"Bearer {ci_token}"}

        def up(url, headers=None):
            try:
                return request(url, headers=headers)[0] == 200
            except OSError:
                return False
        until("sbx serve", lambda: up(f"{base}/healthz", auth))
        until("prometheus", lambda: up(f"{pbase}/-/ready"))

        def query(expr):
            st, out = request(f"{pbase}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
            body = json.loads(out)
            if st != 200 or body.get("status") != "success":
                raise AssertionError(f"{expr}: {st} {body.get('error', body)}")
            return body["data"]["result"]
        # a scrape before the jobs, so that rates and increases see them
        until("the first scrape", lambda: query('up{job="sbx"} == 1'))

        def submit(body, want=201):
            st, out = request(f"{base}/v1/jobs", json.dumps(body).encode(), auth)
            assert st == want, f"submit {body}: {st} {out!r}"
            return json.loads(out).get("id")
        ids = [submit({"argv": ["exit", "0"]}), submit({"argv": ["exit", "3"]}),
               submit({"argv": ["sleep", "1500"]}), submit({"argv": ["exit", "0"], "pool": "agent"})]
        submit({"argv": []}, 400)

        def ended():
            st, out = request(f"{base}/v1/jobs?state=finished", headers=auth)
            return st == 200 and len(json.loads(out)["jobs"]) == len(ids)
        until("the jobs to end", ended)

        def seen():
            r = query("sum(sbx_jobs_finished_total)")
            return (r and float(r[0]["value"][1]) >= len(ids) and
                    query("sum(increase(sbx_jobs_finished_total[1m])) > 0"))
        until("prometheus to scrape the jobs' end", seen)

        dash = json.load(open(DASHBOARD))
        failed = []
        checked = 0
        for title, expr in exprs(dash["panels"]):
            checked += 1
            try:
                result = query(substitute(expr))
                values = [float(s["value"][1]) for s in result]
                if not values:
                    failed.append(f"panel '{title}': {expr}: no data")
                elif not any(math.isfinite(v) for v in values):
                    failed.append(f"panel '{title}': {expr}: only NaN/Inf")
            except AssertionError as e:
                failed.append(f"panel '{title}': {e}")
        for var in dash["templating"]["list"]:
            if var["type"] != "query":
                continue
            q = var["definition"]  # label_values(METRIC, LABEL)
            metric, label = (x.strip() for x in q[q.index("(") + 1:q.rindex(")")].split(","))
            st, out = request(f"{pbase}/api/v1/label/{label}/values?" +
                              urllib.parse.urlencode({"match[]": metric}))
            if st != 200 or not json.loads(out)["data"]:
                failed.append(f"variable '{var['name']}': {q}: no values")

        def rules():
            st, out = request(f"{pbase}/api/v1/rules")
            groups = json.loads(out)["data"]["groups"]
            rs = [r for g in groups for r in g["rules"]]
            return rs if rs and all(r.get("lastEvaluation", "").startswith("20") for r in rs) else None
        for r in until("the rules to be evaluated", rules):
            if r.get("health") != "ok":
                failed.append(f"rule {r['name']}: {r.get('health')} {r.get('lastError', '')}")
        if failed:
            raise AssertionError("\n".join(failed))
        print(f"prometheus_dashboard: {checked} panel queries, the variables and the rules "
              "return data")
        print("1 passed, 0 failed")
        return 0
    except AssertionError as e:
        print(f"prometheus_dashboard: {e}", file=sys.stderr)
        for name, f in logs.items():
            f.seek(0)
            print(f"--- {name} ---\n{f.read()[-4000:]}", file=sys.stderr)
        return 1
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if procs and procs[0].returncode != 0:
            print(f"prometheus_dashboard: sbx serve exited {procs[0].returncode} on SIGTERM",
                  file=sys.stderr)
        for f in logs.values():
            f.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
