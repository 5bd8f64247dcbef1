#!/usr/bin/env python3
"""sbx-image-sbom.py - the SBOM of the final image in the engine (docs/image.md,
"The SBOM"), run by `sbx-image-sbom --image`:

  SPEC=CANONICAL-JSON DOCKER_HOST=unix:///... \
      sbx-image-sbom.py IMAGE HASH TAG UPDATE_UID OUT

The image is untrusted: nothing of it runs. A container of it is created
(never started, no network) and its files are read as data through the
engine's archive API (GET /containers/ID/archive), parsed here with bounds,
and the container is removed. Then the image is labelled by a build FROM it
that only sets labels (and, for an SBOM too large for a label, copies it in
as a file): nothing of the image runs there either. Prints the new image id.
Exit 1 with one line on stderr when the engine fails or a bound is passed.
"""
import hashlib
import http.client
import io
import json
import os
import re
import socket
import sys
import tarfile
import urllib.parse

# the SBOM goes into the label sbx.sbom up to this size (the engine takes the
# labels of a build in its query string, which it bounds at about 1 MiB);
# beyond it, into the image as SBOM_FILE with its sha256 in sbx.sbom.sha256
LABEL_MAX = int(os.environ.get("SBX_SBOM_LABEL_MAX", str(256 * 1024)))
SBOM_FILE = "/opt/sbx-devc/sbom.json"
DPKG_MAX = 64 << 20          # /var/lib/dpkg/status
SMALL_MAX = 1 << 20          # /etc/passwd, /etc/group, one package.json
NPM_STREAM_MAX = 4 << 30     # the archive of one node_modules folder, read and skipped
NPM_MEMBERS_MAX = 2000000    # its entries
NPM_DIRS = ["/opt/sbx-node/node_modules", "/usr/local/lib/node_modules", "/usr/lib/node_modules"]
REMOTE_IDS_LABEL = "dev.sbx.remote-ids"
SBOM_OF_LABEL = "dev.sbx.sbom-of"

image, defhash, tag, update_uid, out = sys.argv[1:6]
spec = os.environ["SPEC"]
host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
if not host.startswith("unix://"):
    print(f"sbx image build: SBOM: DOCKER_HOST {host} is not a unix socket", file=sys.stderr)
    sys.exit(1)
sock_path = host[len("unix://"):]


def die(msg):
    print(f"sbx image build: SBOM of {image}: {msg}", file=sys.stderr)
    sys.exit(1)


class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=600)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(sock_path)
        self.sock = s


def request(method, path, body=None, ctype=None):
    c = Conn()
    try:
        c.request(method, path, body=body, headers={"Content-Type": ctype} if ctype else {})
        return c, c.getresponse()
    except OSError as e:
        die(f"the engine at {sock_path}: {e}")


def api_json(method, path, body=None):
    c, r = request(method, path, json.dumps(body).encode() if body is not None else None,
                   "application/json" if body is not None else None)
    data = r.read(16 << 20)
    c.close()
    try:
        return r.status, (json.loads(data) if data else None)
    except ValueError:
        return r.status, None


class TooBig(Exception):
    pass


class Bounded:
    """A file object that refuses to read past limit bytes."""

    def __init__(self, f, limit):
        self.f, self.left = f, limit

    def read(self, n=-1):
        data = self.f.read(n if n is not None and n >= 0 else self.left + 1)
        self.left -= len(data)
        if self.left < 0:
            raise TooBig()
        return data


def archive(cid, path, limit, want, max_members=1000):
    """The regular files of path's archive whose member name want() accepts
    (each at most SMALL_MAX, or limit for a single file), as {name: bytes};
    None when path is not in the image."""
    q = urllib.parse.urlencode({"path": path})
    c, r = request("GET", f"/containers/{cid}/archive?{q}")
    if r.status == 404:
        c.close()
        return None
    if r.status != 200:
        msg = r.read(4096).decode("utf-8", "replace").strip()
        c.close()
        die(f"reading {path}: HTTP {r.status}: {msg[:200]}")
    got, n = {}, 0
    try:
        with tarfile.open(fileobj=Bounded(r, limit), mode="r|") as t:
            for m in t:
                n += 1
                if n > max_members:
                    die(f"{path}: more than {max_members} entries")
                if m.isfile() and want(m.name) and m.size <= max(SMALL_MAX, limit if n == 1 else 0):
                    got[m.name] = t.extractfile(m).read()
    except TooBig:
        die(f"{path}: more than {limit} bytes")
    except (tarfile.TarError, OSError, EOFError) as e:
        die(f"reading {path}: {e}")
    finally:
        c.close()
    return got


def one_file(cid, path, limit):
    base = os.path.basename(path)
    got = archive(cid, path, limit, lambda name: name == base, max_members=1)
    return None if not got else got.get(base)


def npm_packages(cid, d):
    """{name: version} of the packages directly under the node_modules folder d
    (NAME/package.json and @SCOPE/NAME/package.json)."""
    base = os.path.basename(d)

    def want(name):
        p = name.split("/")
        if p[0] != base or p[-1] != "package.json" or any(x.startswith(".") for x in p[1:-1]):
            return False
        return (len(p) == 3 and not p[1].startswith("@")) or (len(p) == 4 and p[1].startswith("@"))

    got = archive(cid, d, NPM_STREAM_MAX, want, NPM_MEMBERS_MAX) or {}
    pkgs = {}
    for raw in got.values():
        try:
            p = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("version"), str):
            pkgs[p["name"][:214]] = p["version"][:256]
    return pkgs


def dpkg_packages(text):
    deb = {}
    for para in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", para, re.M))
        if fields.get("Package") and "installed" in fields.get("Status", "").split():
            deb[fields["Package"][:256]] = fields.get("Version", "")[:256]
    return deb


def ids_of(user, passwd, group):
    """(uid, gid) of the image's USER from its passwd and group, or None."""
    if user in ("", "root", "0", "0:0"):
        return 0, 0
    name, _, grp = user.partition(":")
    uid = gid = None
    for line in passwd.splitlines():
        f = line.split(":")
        if len(f) >= 4 and (f[0] == name or f[2] == name) and f[2].isdigit() and f[3].isdigit():
            uid, gid = int(f[2]), int(f[3])
            break
    if uid is None and name.isdigit():
        uid, gid = int(name), int(name)
    if grp:
        gid = int(grp) if grp.isdigit() else None
        for line in group.splitlines():
            f = line.split(":")
            if len(f) >= 3 and f[0] == grp and f[2].isdigit():
                gid = int(f[2])
    if uid is None or gid is None:
        return None
    return uid, gid


# the image, and whether its SBOM is already there
status, info = api_json("GET", f"/images/{urllib.parse.quote(image, safe='')}/json")
if status != 200 or not isinstance(info, dict):
    die(f"not in the engine (HTTP {status})")
config = info.get("Config") or {}
labels = config.get("Labels") or {}
user = config.get("User") or ""
if labels.get(SBOM_OF_LABEL) == defhash:
    # labelled by an earlier build: the same SBOM (kept beside it again)
    if labels.get("sbx.sbom"):
        with open(out + ".tmp", "w") as f:
            f.write(labels["sbx.sbom"] + "\n")
        os.replace(out + ".tmp", out)
    print(info["Id"])
    sys.exit(0)

status, made = api_json("POST", "/containers/create", {
    "Image": info["Id"], "Entrypoint": ["/sbx-sbom-never-started"], "Cmd": [],
    "NetworkDisabled": True, "Labels": {"dev.sbx.sbom-reader": "1"},
    "HostConfig": {"NetworkMode": "none"},
})
if status != 201 or not isinstance(made, dict) or "Id" not in made:
    die(f"cannot create a container to read it: HTTP {status}: {(made or {}).get('message', '')}")
cid = made["Id"]
try:
    deb = dpkg_packages((one_file(cid, "/var/lib/dpkg/status", DPKG_MAX) or b"").decode(
        "utf-8", "replace"))
    npm = []
    by_name = {}
    for d in NPM_DIRS:
        for name, version in sorted(npm_packages(cid, d).items()):
            npm.append({"name": name, "version": version, "dir": d})
            by_name.setdefault(name, version)
    passwd = (one_file(cid, "/etc/passwd", SMALL_MAX) or b"").decode("utf-8", "replace")
    group = (one_file(cid, "/etc/group", SMALL_MAX) or b"").decode("utf-8", "replace")
finally:
    api_json("DELETE", f"/containers/{cid}?force=1&v=1")

canon = json.loads(spec)
mise = []
for t in canon.get("mise_tools", []):
    pkg = t["package"].rsplit("@", 1)[0] if t["via"] == "npm" else t["package"]
    mise.append({"tool": t["tool"], "pinned": t["version"], "via": t["via"], "package": pkg,
                 "version": (deb if t["via"] == "debian" else by_name).get(pkg)})
sbom = {
    "format": 1,
    "definition_hash": defhash,
    "debian": [{"name": k, "version": deb[k]} for k in sorted(deb)],
    "npm": sorted(npm, key=lambda p: (p["name"], p["dir"])),
    "mise": mise,
    "user": user or "root",
}
text = json.dumps(sbom, separators=(",", ":"), sort_keys=True)
with open(out + ".tmp", "w") as f:
    f.write(text + "\n")
os.replace(out + ".tmp", out)

# the labels; an inherited one (an image built FROM an sbx image) is blanked
ids = ids_of(user, passwd, group)
remote = ""
if update_uid == "1" and ids is not None and ids[0] != 0:
    remote = f"{ids[0]}:{ids[1]}"
new = {SBOM_OF_LABEL: defhash, REMOTE_IDS_LABEL: remote, "sbx.sbom": "", "sbx.sbom.sha256": ""}
dockerfile = f"FROM {info['Id']}\n"
files = {}
if len(text.encode()) <= LABEL_MAX:
    new["sbx.sbom"] = text
else:
    new["sbx.sbom.sha256"] = hashlib.sha256((text + "\n").encode()).hexdigest()
    files["sbom.json"] = (text + "\n").encode()
    dockerfile += f"COPY sbom.json {SBOM_FILE}\n"
files["Dockerfile"] = dockerfile.encode()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    for name, data in files.items():
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
q = urllib.parse.urlencode({"t": tag, "labels": json.dumps(new), "rm": "1", "forcerm": "1",
                            "q": "1", "networkmode": "none"})
c, r = request("POST", f"/build?{q}", buf.getvalue(), "application/x-tar")
body = r.read(16 << 20).decode("utf-8", "replace")
c.close()
new_id = None
for line in body.splitlines():
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if not isinstance(m, dict):
        continue
    if m.get("error") or m.get("errorDetail"):
        die(f"labelling it: {str(m.get('error') or m.get('errorDetail'))[:300]}")
    aux = m.get("aux")
    if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
        new_id = aux["ID"]
    s = m.get("stream")
    if isinstance(s, str) and s.strip().startswith("sha256:"):
        new_id = new_id or s.strip()
if r.status != 200 or new_id is None:
    die(f"labelling it: HTTP {r.status}: {body[:300]}")
print(new_id)
