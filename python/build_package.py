#!/usr/bin/python3
"""Builds the importable `trainyard` Python package in an output directory.

Copies the package's sources (python/trainyard) and generates the protobuf
and gRPC stubs of proto/ (with .pyi type stubs) into trainyard/_pb with Debian's protoc and
grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc). protoc names
the generated modules after the files' paths (`from proto import
trainyard_pb2`), which would make `proto` a top-level package of its own; the
imports are rewritten to `trainyard._pb`, so the one package holds it all.

Usage: build_package.py REPO_ROOT OUT_DIR   (then PYTHONPATH=OUT_DIR)
"""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

PROTOS = ["trainyard.proto", "service.proto", "jobmaster.proto"]


def generate_stubs(repo: pathlib.Path, pb_dir: pathlib.Path) -> None:
    plugin = shutil.which("grpc_python_plugin")
    if plugin is None:
        sys.exit("build_package: grpc_python_plugin not found (Debian: protobuf-compiler-grpc)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["protoc", f"-I{repo}", f"--python_out={tmp}", f"--pyi_out={tmp}",
               f"--grpc_python_out={tmp}",
               f"--plugin=protoc-gen-grpc_python={plugin}"]
        subprocess.run(cmd + [f"proto/{p}" for p in PROTOS], check=True)
        pb_dir.mkdir(parents=True, exist_ok=True)
        for src in sorted(pathlib.Path(tmp, "proto").glob("*.py*")):
            if src.name.endswith("_pb2_grpc.py") and "Stub(" not in src.read_text():
                continue  # a file that declares no service
            text = re.sub(r"^from proto import ", "from trainyard._pb import ", src.read_text(),
                          flags=re.MULTILINE)
            (pb_dir / src.name).write_text(text)
    (pb_dir / "__init__.py").write_text('"""Generated protobuf and gRPC stubs of proto/."""\n')


def main() -> None:
    repo, out = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    package = out / "trainyard"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(repo / "python" / "trainyard", package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    generate_stubs(repo, package / "_pb")


if __name__ == "__main__":
    main()
