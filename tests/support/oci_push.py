#!/usr/bin/env python3
"""oci_push.py - writes artifacts into a local test registry through the OCI
distribution API, for tests/runtime/image_oci.sh (loopback only).

  oci_push.py feature HOST REPO TAG DIR  a Dev Container feature: DIR as the
                                         layer (application/vnd.devcontainers.layer.v1+tar),
                                         prints "MANIFEST_DIGEST LAYER_DIGEST"
  oci_push.py image HOST REPO TAG CREATED  a tiny image whose config says
                                         created=CREATED; prints its digest
  oci_push.py tags HOST REPO             the repository's tags, one a line

Environment: OCI_CA (the test CA), OCI_USER, OCI_PASS (basic auth).
"""
import base64
import hashlib
import io
import json
import os
import ssl
import sys
import tarfile
import urllib.error
import urllib.request

CTX = ssl.create_default_context(cafile=os.environ["OCI_CA"])
AUTH = "Basic " + base64.b64encode(
    ("%s:%s" % (os.environ["OCI_USER"], os.environ["OCI_PASS"])).encode()).decode()


def call(method, url, data=None, ctype=None):
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", AUTH)
    if ctype:
        req.add_header("Content-Type", ctype)
    with urllib.request.urlopen(req, context=CTX, timeout=30) as r:
        return r.status, r.headers, r.read()


def blob(host, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _, h, _ = call("POST", "https://%s/v2/%s/blobs/uploads/" % (host, repo), b"")
    loc = h["Location"]
    if loc.startswith("/"):
        loc = "https://%s%s" % (host, loc)
    loc += ("&" if "?" in loc else "?") + "digest=" + digest
    call("PUT", loc, data, "application/octet-stream")
    return {"digest": digest, "size": len(data)}


def manifest(host, repo, tag, m):
    body = json.dumps(m).encode()
    call("PUT", "https://%s/v2/%s/manifests/%s" % (host, repo, tag), body,
         "application/vnd.oci.image.manifest.v1+json")
    return "sha256:" + hashlib.sha256(body).hexdigest()


def tar_of(folder):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(folder)):
            t.add(os.path.join(folder, name), arcname="./" + name)
    return buf.getvalue()


def main(argv):
    cmd, host, repo = argv[1], argv[2], argv[3]
    if cmd == "feature":
        tag, folder = argv[4], argv[5]
        layer = blob(host, repo, tar_of(folder))
        config = blob(host, repo, b"{}")
        d = manifest(host, repo, tag, {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": dict(config, mediaType="application/vnd.devcontainers"),
            "layers": [dict(layer, mediaType="application/vnd.devcontainers.layer.v1+tar",
                            annotations={"org.opencontainers.image.title":
                                         "devcontainer-feature-%s.tgz" % repo.split("/")[-1]})],
        })
        print(d, layer["digest"])
    elif cmd == "image":
        tag, created = argv[4], argv[5]
        layer_tar = io.BytesIO()
        with tarfile.open(fileobj=layer_tar, mode="w") as t:
            info = tarfile.TarInfo("tag")
            data = tag.encode()
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        layer_bytes = layer_tar.getvalue()
        layer = blob(host, repo, layer_bytes)
        config = blob(host, repo, json.dumps({
            "created": created, "architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers",
                       "diff_ids": ["sha256:" + hashlib.sha256(layer_bytes).hexdigest()]},
            "config": {}}).encode())
        print(manifest(host, repo, tag, {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
            "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar")],
        }))
    elif cmd == "tags":
        try:
            _, _, body = call("GET", "https://%s/v2/%s/tags/list" % (host, repo))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return 0
            raise
        for t in sorted(json.loads(body).get("tags") or []):
            print(t)
    else:
        print("oci_push.py: unknown command " + cmd, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
