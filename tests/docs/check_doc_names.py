#!/usr/bin/env python3
"""Fails when a file or a function that a document names is no longer in the tree.

Reads the `code spans` of a Markdown document (fenced blocks aside) and checks
two kinds of them against the source tree:

- file paths (`src/server/control/control_jobs.cc`, `server/view_store.h`,
  `log_hub.{h,cc}`, `http/dashboard/`): some file or directory of the tree
  must end with the path (brace lists expanded); a bare file name with a
  source extension must be some file's name. Placeholders in capitals
  (`DATA/logs/JOB/...`), routes (`/metrics`), media types (`text/plain`) and
  build outputs (`build/...`) are not paths of the tree and are skipped; a
  path with no extension may name a program built from a source of that
  name (`bench/control_plane_bench`), and a file the build generates counts
  when a CMake file of the tree names it (`dashboard_assets.cc`).
- qualified names (`ControlState::RunRound`, `api::BuildTaskEnv`,
  `v1::JobSpec`): a namespace-qualified name must be declared in its room
  (src/api for api::, ...; proto/ for v1::); a class-qualified one must be a
  member of a class or struct of that name (mentioned in the file that
  declares it) or be defined as Owner::Member.
- bare CamelCase names (`RecordingBackend`, `TaskRecord`, `ScoresNodes()`):
  the word must occur in some source of the tree (C++, proto, the dashboard's
  JavaScript and HTML, tests included), unless it is a name of gRPC, HTTP or
  the browser (`FailedPrecondition`, `ETag`, `EventSource`).

Comments do not count, so a name that lives on only in a comment is reported.

A document with the layering table (a table whose header is "| room | may
depend on ...") must also give each room of cmake/Layering.cmake (proto
aside) one row that allows exactly what the room's ty_room line allows.

Prints each name that is missing (and each row of the layering table that is
wrong) with its line and exits 1 if there is any.

Usage: check_doc_names.py ROOT DOC.md...
"""
import fnmatch
import os
import re
import sys

SKIP_DIRS = {".git", "build", "node_modules", "__pycache__", ".trainyard"}
SOURCE_EXT = (".h", ".cc", ".proto", ".cmake", ".py", ".sh", ".js", ".mjs", ".css", ".html", ".yaml", ".md")
# Namespaces of ours and where they live; others (grpc::, absl::, std::) are not checked.
ROOMS = {"api": ["src/api"], "core": ["src/core"], "http": ["src/server/http"], "httpd": ["src/httpd"],
         "security": ["src/security"], "jobmaster": ["src/jobmaster"], "server": ["src/server"],
         "agent": ["src/agent"], "sim": ["src/sim"], "cli": ["src/cli"], "store": ["src/store"],
         "common": ["src/common"], "v1": ["proto"], "sqlite": ["src/store"], "fuzz": ["fuzz"]}
EXTERNAL = {"grpc", "absl", "std", "google", "httplib", "nlohmann"}
# Bare names that are not ours: gRPC status codes, HTTP headers, browser APIs.
EXTERNAL_NAMES = {"Ok", "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
                  "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
                  "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
                  "Authorization", "ETag", "Location", "EventSource"}
SPAN = re.compile(r"`([^`]+)`")
QUALIFIED = re.compile(r"^(?:\w+::)+~?\w+(?:\(\))?$")
CAMEL = re.compile(r"^~?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*(?:\(\))?$")
PATH = re.compile(r"^[\w.{},*/-]+$")
MEDIA_TYPE = re.compile(r"^(text|application|image|audio|video|multipart|font)/[\w.+-]+$")
CODE_EXT = (".h", ".cc", ".proto", ".js", ".mjs", ".html")
PROGRAM_EXT = (".cc", ".py", ".sh", ".mjs")


class Tree:
    def __init__(self, root):
        self.root = root
        self.paths = set()  # every file and directory, relative to root
        self.names = set()  # every file's base name
        self.sources = {}  # relative path -> text without comments, for non-test sources
        self.words = set()  # every word of every source without comments, tests and scripts included
        self.generated = set()  # file names the CMake files name (generated sources)
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            rel_dir = os.path.relpath(dirpath, root)
            if rel_dir != ".":
                self.paths.add(rel_dir)
            for name in files:
                rel = os.path.normpath(os.path.join(rel_dir, name))
                self.paths.add(rel)
                self.names.add(name)
                if name.endswith(CODE_EXT):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                        text = strip_comments(f.read())
                    self.words.update(re.findall(r"\w+", text))
                    if name.endswith((".h", ".cc", ".proto")) and not name.endswith("_test.cc"):
                        self.sources[rel] = text
                elif name == "CMakeLists.txt" or name.endswith(".cmake"):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                        self.generated.update(re.findall(r"\$\{CMAKE_CURRENT_BINARY_DIR\}/([\w.-]+)", f.read()))

    def has_path(self, path):
        path = path.rstrip("/")
        if "*" in path:  # a glob: some path of the tree matches it
            return any(fnmatch.fnmatch(p, path) or fnmatch.fnmatch(p, "*/" + path) for p in self.paths)
        if "/" not in path:
            return path in self.names or path in self.paths or path in self.generated
        if any(p == path or p.endswith("/" + path) for p in self.paths):
            return True
        # A program built from one source (bench/control_plane_bench from its .cc).
        return "." not in path.split("/")[-1] and any(self.has_path(path + ext) for ext in PROGRAM_EXT)

    def in_dirs(self, dirs):
        return [(p, t) for p, t in self.sources.items() if any(p.startswith(d + "/") for d in dirs)]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    return re.sub(r"(?<![:\\])//[^\n]*", " ", text)  # not the // of a URL (https://) or a regex


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for choice in m.group(1).split(","):
        out += expand_braces(path[:m.start()] + choice + path[m.end():])
    return out


def is_path(span):
    if not PATH.match(span) or "::" in span or span.startswith(("-", ".", "*", "/", "build/")):
        return False  # not a path, a route (/metrics) or a build output
    if MEDIA_TYPE.match(span):
        return False
    if any("." in part for part in span.split("/")[:-1]):
        return False  # fields (Options.a/b/c), not directories
    first = span.split("/")[0]
    if re.search(r"(^|/)[A-Z][A-Z_-]*(/|$)", span) or first.isupper():
        return False  # a placeholder such as DATA/ or JOB/
    if "/" in span:
        return True
    return span[:1] != "{" and all(p.endswith(SOURCE_EXT) for p in expand_braces(span))


def qualified_exists(tree, name):
    parts = name.rstrip("()").split("::")
    if parts[0] in EXTERNAL:
        return True
    member = parts[-1].lstrip("~")
    word = re.compile(r"\b%s\b" % re.escape(member))
    if len(parts) >= 2 and parts[-2] in ROOMS:
        dirs = ROOMS[parts[-2]]
        if parts[-2] == "v1":
            decl = re.compile(r"\b(message|enum|service|rpc)\s+%s\b" % re.escape(member))
            return any(decl.search(t) for _, t in tree.in_dirs(dirs))
        return any(word.search(t) for _, t in tree.in_dirs(dirs))
    owner = parts[-2]
    if owner.islower():  # a namespace of no one room (testing::): declared anywhere
        return any(word.search(t) for t in tree.sources.values())
    defined = re.compile(r"\b%s::%s\b" % (re.escape(owner), re.escape(member)))
    if any(defined.search(t) for t in tree.sources.values()):
        return True
    declares = re.compile(r"\b(class|struct|enum class|enum)\s+(\w+::)*%s\b(?!;)" % re.escape(owner))
    return any(declares.search(t) and word.search(t) for t in tree.sources.values())


def bare_name_exists(tree, name):
    name = name.rstrip("()").lstrip("~")
    return name in EXTERNAL_NAMES or name in tree.words


def spans(text):
    """(line, span) for every code span outside fenced blocks; a span may wrap a line,
    and one with a space in it (a command line) keeps its spaces."""
    out = []
    fenced = False
    kept = []
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            kept.append("")
            continue
        kept.append("" if fenced else line)
    body = "\n".join(kept)
    for m in SPAN.finditer(body):
        line = body.count("\n", 0, m.start()) + 1
        span = m.group(1).strip()
        joined = re.sub(r"\s*\n\s*", "", span)
        out.append((line, re.sub(r"\s+", " ", span) if re.search(r"\s", joined) else joined))
    return out


def layering_rules(root):
    """{room: set of what it may depend on} from cmake/Layering.cmake's ty_room lines."""
    path = os.path.join(root, "cmake", "Layering.cmake")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"#[^\n]*", "", f.read())
    return {m.group(1): set(m.group(2).split()) for m in re.finditer(r"^ty_room\(\s*(\w[\w/]*)([^)]*)\)", text, re.M)}


def layering_problems(rules, doc, text):
    """Where the document's layering table and cmake/Layering.cmake differ."""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if re.match(r"\|\s*room\s*\|\s*may depend on", l)), None)
    if start is None:
        return []
    problems = []
    rows = {}
    for i in range(start + 2, len(lines)):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        if not lines[i].startswith("|") or len(cells) < 2:
            break
        room = cells[0].strip("`")
        allowed = {w for w in re.findall(r"[\w/]+\.h|[\w/]+", cells[1]) if w in rules or w.endswith(".h")}
        rows[room] = (i + 1, allowed)
    for room, (line, allowed) in sorted(rows.items()):
        if room not in rules:
            problems.append(f"{doc}:{line}: room `{room}` is not in cmake/Layering.cmake")
        elif allowed != rules[room]:
            detail = "; ".join(x for x in (
                "the table adds " + ", ".join(sorted(allowed - rules[room])) if allowed - rules[room] else "",
                "cmake/Layering.cmake also allows " + ", ".join(sorted(rules[room] - allowed))
                if rules[room] - allowed else "") if x)
            problems.append(f"{doc}:{line}: the row of `{room}` differs from cmake/Layering.cmake: {detail}")
    for room in sorted(set(rules) - set(rows) - {"proto"}):
        problems.append(f"{doc}:{start + 1}: the layering table has no row for room `{room}` of cmake/Layering.cmake")
    return problems


def check(tree, doc):
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    missing = layering_problems(layering_rules(tree.root), doc, text)
    checked = 0
    for line, span in spans(text):
        if QUALIFIED.match(span):
            checked += 1
            if not qualified_exists(tree, span):
                missing.append(f"{doc}:{line}: `{span}` is not in the tree (no such class member or function)")
        elif CAMEL.match(span):
            checked += 1
            if not bare_name_exists(tree, span):
                missing.append(f"{doc}:{line}: `{span}` is not in the tree (no source uses that name)")
        elif is_path(span):
            checked += 1
            for path in expand_braces(span):
                if not tree.has_path(path):
                    missing.append(f"{doc}:{line}: `{span}`: {path} is not a file or directory of the tree")
    return missing, checked


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    tree = Tree(argv[1])
    failed = False
    for doc in argv[2:]:
        missing, checked = check(tree, doc)
        for m in missing:
            print(m)
        print(f"{doc}: {checked} names checked, {len(missing)} problems")
        failed = failed or bool(missing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
