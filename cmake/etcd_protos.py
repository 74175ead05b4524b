#!/usr/bin/env python3
"""Prepares etcd's v3 API .proto files for protoc.

etcd's own files (Debian's golang-etcd-server-dev ships them) carry options of
gogoproto and of grpc-gateway's google.api annotations, which Debian's protoc
does not have. This copies kv.proto, auth.proto, rpc.proto and
v3election.proto into OUT_DIR/proto/etcd/ with those options and imports
removed and the imports between them renamed, so the generated code is
included as "proto/etcd/rpc.grpc.pb.h". Package and service names are kept:
the wire API is etcd's own.

usage: etcd_protos.py ETCD_SOURCE_DIR OUT_DIR
"""
import os
import re
import sys

FILES = {
    "mvcc/mvccpb/kv.proto": "kv.proto",
    "auth/authpb/auth.proto": "auth.proto",
    "etcdserver/etcdserverpb/rpc.proto": "rpc.proto",
    "etcdserver/api/v3election/v3electionpb/v3election.proto": "v3election.proto",
}
IMPORTS = {"etcd/" + src: "proto/etcd/" + dst for src, dst in FILES.items()}


def strip(text):
    text = re.sub(r'import\s+"(gogoproto/gogo|google/api/annotations)\.proto";\n', "", text)
    text = re.sub(r"option\s+\(gogoproto\.[^;]*;\n?", "", text)
    text = re.sub(r"option\s+\(google\.api\.http\)\s*=\s*\{.*?\};", "", text, flags=re.S)
    text = re.sub(r"\s*\[\s*\(gogoproto\.[^\]]*\]", "", text)
    for old, new in IMPORTS.items():
        text = text.replace('"%s"' % old, '"%s"' % new)
    if "gogoproto" in text or "google.api" in text:
        raise SystemExit("etcd_protos.py: an option was left behind")
    return text


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    source, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "proto", "etcd"), exist_ok=True)
    for src, dst in FILES.items():
        path = os.path.join(source, src)
        try:
            with open(path, encoding="utf-8") as f:
                text = strip(f.read())
        except FileNotFoundError:
            raise SystemExit("etcd_protos.py: %s not found (Debian package golang-etcd-server-dev; "
                             "scripts/setup installs it)" % path)
        target = os.path.join(out, "proto", "etcd", dst)
        # Written only when changed, so protoc and the compiler do not run again.
        try:
            with open(target, encoding="utf-8") as f:
                if f.read() == text:
                    continue
        except FileNotFoundError:
            pass
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
