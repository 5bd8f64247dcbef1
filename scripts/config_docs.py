#!/usr/bin/env python3
"""Puts the key tables of the core's configuration into docs/configuration.md.

The tables come from the key table (core/src/config/keys.c) through
`sbx config keys --markdown`: each is a block between
"<!-- keys NAME: ... -->" and "<!-- /keys -->", and replaces the block of the
same NAME in the doc. A block that the doc lacks is an error: place its marker
lines where the table belongs, then run this again. test_config_keys fails
when the doc and the table differ.

usage: scripts/config_docs.py [--check] [SBX [DOC]]
  SBX defaults to build/sbx, DOC to docs/configuration.md.
"""
import re
import subprocess
import sys

BLOCK = re.compile(r"<!-- keys (\S+):.*?-->\n.*?<!-- /keys -->\n", re.S)


def blocks(text):
    return {m.group(1): m.group(0) for m in BLOCK.finditer(text)}


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    sbx = args[0] if args else "build/sbx"
    doc_path = args[1] if len(args) > 1 else "docs/configuration.md"
    generated = subprocess.run([sbx, "config", "keys", "--markdown"], check=True,
                               capture_output=True, text=True).stdout
    want = blocks(generated)
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    have = blocks(doc)
    missing = [n for n in want if n not in have]
    stale = [n for n in have if n not in want]
    if missing or stale:
        for n in missing:
            print(f"{doc_path}: no block for keys '{n}' (add its marker lines)", file=sys.stderr)
        for n in stale:
            print(f"{doc_path}: block '{n}' is not in the key table", file=sys.stderr)
        return 1
    new = BLOCK.sub(lambda m: want[m.group(1)], doc)
    if check:
        if new != doc:
            print(f"{doc_path}: key tables differ from the key table; run scripts/config_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != doc:
        with open(doc_path, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"{doc_path}: updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
