#!/usr/bin/env python3
"""Checks that an OpenAPI 3.0 document is well formed, without the network.

A structural validator of the parts of OpenAPI 3.0.3 that docs/openapi.yaml
uses: every object's keys are ones the specification defines (or x-
extensions), required fields are present, every $ref resolves to an object
of the kind it stands for, path templates and path parameters agree, schema
types are known and arrays have items, and every security requirement names
a declared scheme. Prints one line per problem (a path into the document and
what is wrong) and exits 1 when there is any.

With --routes DIR, also checks that every route the server registers (a
`Handle("METHOD", pattern, "TEMPLATE", ...)` call in a non-test .cc under DIR)
is documented with that method, and every documented operation is
registered: the document cannot drift from the server. The dashboard's
static files (`/` and `/ui/...`) are pages, not API, and are left out.

Usage: check_openapi.py FILE.yaml [--routes DIR]
"""
import os
import re
import sys

try:
    import yaml
except ImportError:
    sys.exit("check_openapi.py needs PyYAML (Debian's python3-yaml): run scripts/setup")

OPERATIONS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
KEYS = {
    "root": ({"openapi", "info", "servers", "paths", "components", "security", "tags", "externalDocs"},
             {"openapi", "info", "paths"}),
    "info": ({"title", "description", "termsOfService", "contact", "license", "version"}, {"title", "version"}),
    "server": ({"url", "description", "variables"}, {"url"}),
    "server_variable": ({"enum", "default", "description"}, {"default"}),
    "path_item": ({"$ref", "summary", "description", "servers", "parameters"} | OPERATIONS, set()),
    "operation": ({"tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody",
                   "responses", "callbacks", "deprecated", "security", "servers"}, {"responses"}),
    "parameter": ({"name", "in", "description", "required", "deprecated", "allowEmptyValue", "style", "explode",
                   "allowReserved", "schema", "example", "examples", "content"}, {"name", "in"}),
    "header": ({"description", "required", "deprecated", "allowEmptyValue", "style", "explode", "allowReserved",
                "schema", "example", "examples", "content"}, set()),
    "request_body": ({"description", "content", "required"}, {"content"}),
    "response": ({"description", "headers", "content", "links"}, {"description"}),
    "media_type": ({"schema", "example", "examples", "encoding"}, set()),
    "components": ({"schemas", "responses", "parameters", "examples", "requestBodies", "headers",
                    "securitySchemes", "links", "callbacks"}, set()),
    "security_scheme": ({"type", "description", "name", "in", "scheme", "bearerFormat", "flows",
                         "openIdConnectUrl"}, {"type"}),
    "schema": ({"title", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
                "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
                "required", "enum", "type", "allOf", "oneOf", "anyOf", "not", "items", "properties",
                "additionalProperties", "description", "format", "default", "nullable", "discriminator",
                "readOnly", "writeOnly", "xml", "externalDocs", "example", "deprecated"}, set()),
}
# What a $ref in each place may point at.
REF_HOMES = {"schema": "schemas", "parameter": "parameters", "response": "responses", "header": "headers",
             "request_body": "requestBodies", "path_item": None}
SCHEMA_TYPES = {"integer", "number", "string", "boolean", "array", "object"}


class Checker:
    def __init__(self, doc):
        self.doc = doc
        self.problems = []

    def problem(self, where, text):
        self.problems.append(f"{where}: {text}")

    def keys(self, kind, obj, where):
        """Checks obj is a mapping with only the keys of `kind`; False when it is no mapping."""
        if not isinstance(obj, dict):
            self.problem(where, f"must be a mapping ({kind}), is {type(obj).__name__}")
            return False
        allowed, required = KEYS[kind]
        for key in obj:
            if not isinstance(key, str) or not (key in allowed or key.startswith("x-")):
                self.problem(where, f"unknown key {key!r} in a {kind} (a flow mapping's unquoted comma?)")
        for key in sorted(required - obj.keys()):
            self.problem(where, f"a {kind} needs {key!r}")
        return True

    def resolve(self, ref, kind, where):
        """The object a local $ref names, or None (with a problem) when it does not resolve."""
        home = REF_HOMES.get(kind)
        if not isinstance(ref, str) or not ref.startswith("#/"):
            self.problem(where, f"$ref {ref!r} is not a local reference")
            return None
        parts = ref[2:].split("/")
        if home and (len(parts) != 3 or parts[0] != "components" or parts[1] != home):
            self.problem(where, f"$ref {ref} must name #/components/{home}/NAME for a {kind}")
            return None
        node = self.doc
        for part in parts:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                self.problem(where, f"$ref {ref} does not resolve")
                return None
            node = node[part]
        return node

    def ref_or(self, kind, obj, where, check):
        if isinstance(obj, dict) and "$ref" in obj:
            if len(obj) != 1:
                self.problem(where, "a $ref takes no other keys")
            return self.resolve(obj["$ref"], kind, where)
        check(obj, where)
        return obj

    def schema(self, obj, where):
        def check(s, w):
            if not self.keys("schema", s, w):
                return
            t = s.get("type")
            if t is not None and t not in SCHEMA_TYPES:
                self.problem(w, f"type {t!r} is not one of {', '.join(sorted(SCHEMA_TYPES))}")
            if t == "array" and "items" not in s:
                self.problem(w, "an array needs items")
            if "enum" in s and not isinstance(s["enum"], list):
                self.problem(w, "enum must be a list")
            if "required" in s and not isinstance(s["required"], list):
                self.problem(w, "required must be a list")
            for key in ("allOf", "oneOf", "anyOf"):
                if key in s:
                    if not isinstance(s[key], list) or not s[key]:
                        self.problem(w, f"{key} must be a non-empty list")
                    else:
                        for i, sub in enumerate(s[key]):
                            self.schema(sub, f"{w}.{key}[{i}]")
            for key in ("items", "not"):
                if key in s:
                    self.schema(s[key], f"{w}.{key}")
            if isinstance(s.get("additionalProperties"), dict):
                self.schema(s["additionalProperties"], f"{w}.additionalProperties")
            props = s.get("properties", {})
            if not isinstance(props, dict):
                self.problem(w, "properties must be a mapping")
            else:
                for name, sub in props.items():
                    self.schema(sub, f"{w}.properties.{name}")
        self.ref_or("schema", obj, where, check)

    def content(self, obj, where):
        if not isinstance(obj, dict) or not obj:
            self.problem(where, "content must be a non-empty mapping of media types")
            return
        for media, m in obj.items():
            if not re.fullmatch(r"[\w.+-]+/[\w.+*-]+", str(media)):
                self.problem(where, f"{media!r} is not a media type")
            w = f"{where}.{media}"
            if self.keys("media_type", m, w) and "schema" in m:
                self.schema(m["schema"], f"{w}.schema")

    def header(self, obj, where):
        def check(h, w):
            if self.keys("header", h, w):
                self.schema_or_content(h, w)
        self.ref_or("header", obj, where, check)

    def schema_or_content(self, obj, where):
        if ("schema" in obj) == ("content" in obj):
            self.problem(where, "needs exactly one of schema and content")
        if "schema" in obj:
            self.schema(obj["schema"], f"{where}.schema")
        if "content" in obj:
            self.content(obj["content"], f"{where}.content")

    def parameter(self, obj, where):
        def check(p, w):
            if not self.keys("parameter", p, w):
                return
            if p.get("in") not in {"query", "header", "path", "cookie"}:
                self.problem(w, f"in {p.get('in')!r} is not one of query, header, path, cookie")
            if p.get("in") == "path" and p.get("required") is not True:
                self.problem(w, "a path parameter must say required: true")
            self.schema_or_content(p, w)
        return self.ref_or("parameter", obj, where, check)

    def parameters(self, obj, where):
        """Checks a parameter list; returns the names of its path parameters."""
        names = set()
        if not isinstance(obj, list):
            self.problem(where, "parameters must be a list")
            return names
        for i, p in enumerate(obj):
            p = self.parameter(p, f"{where}[{i}]")
            if isinstance(p, dict) and p.get("in") == "path":
                names.add(p.get("name"))
        return names

    def response(self, obj, where):
        def check(r, w):
            if not self.keys("response", r, w):
                return
            if not isinstance(r.get("description", ""), str):
                self.problem(w, "description must be text")
            for name, h in (r.get("headers") or {}).items():
                self.header(h, f"{w}.headers.{name}")
            if "content" in r:
                self.content(r["content"], f"{w}.content")
        self.ref_or("response", obj, where, check)

    def security(self, obj, where):
        schemes = (self.doc.get("components") or {}).get("securitySchemes") or {}
        if not isinstance(obj, list):
            self.problem(where, "security must be a list of requirements")
            return
        for i, req in enumerate(obj):
            if not isinstance(req, dict):
                self.problem(f"{where}[{i}]", "a security requirement must be a mapping")
                continue
            for name, scopes in req.items():
                if name not in schemes:
                    self.problem(f"{where}[{i}]", f"security scheme {name!r} is not in components.securitySchemes")
                if not isinstance(scopes, list):
                    self.problem(f"{where}[{i}]", f"{name}: scopes must be a list")

    def operation(self, obj, where, path_params):
        if not self.keys("operation", obj, where):
            return
        declared = set(path_params)
        if "parameters" in obj:
            declared |= self.parameters(obj["parameters"], f"{where}.parameters")
        template = set(re.findall(r"\{([^}]+)\}", where.split(" ")[0]))
        for name in sorted(template - declared):
            self.problem(where, f"path parameter {{{name}}} is not declared")
        for name in sorted(declared - template):
            self.problem(where, f"path parameter {name!r} is not in the path")
        if "requestBody" in obj:
            def check(b, w):
                if self.keys("request_body", b, w):
                    self.content(b.get("content"), f"{w}.content")
            self.ref_or("request_body", obj["requestBody"], f"{where}.requestBody", check)
        responses = obj.get("responses")
        if not isinstance(responses, dict) or not responses:
            self.problem(where, "responses must be a non-empty mapping")
            return
        for code, r in responses.items():
            if not re.fullmatch(r"default|[1-5](\d\d|XX)", str(code)):
                self.problem(f"{where}.responses", f"{code!r} is not a status code (quote it: \"200\")")
            if not isinstance(code, str):
                self.problem(f"{where}.responses", f"{code!r} must be a string")
            self.response(r, f"{where}.responses.{code}")
        if "security" in obj:
            self.security(obj["security"], f"{where}.security")

    def run(self):
        doc = self.doc
        if not self.keys("root", doc, "(document)"):
            return self.problems
        if not re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi"))):
            self.problem("openapi", f"{doc.get('openapi')!r} is not a 3.0.x version")
        self.keys("info", doc.get("info"), "info")
        for i, s in enumerate(doc.get("servers") or []):
            if self.keys("server", s, f"servers[{i}]"):
                for name, v in (s.get("variables") or {}).items():
                    self.keys("server_variable", v, f"servers[{i}].variables.{name}")
        components = doc.get("components") or {}
        if self.keys("components", components, "components"):
            for name, s in (components.get("schemas") or {}).items():
                self.schema(s, f"components.schemas.{name}")
            for name, p in (components.get("parameters") or {}).items():
                self.parameter(p, f"components.parameters.{name}")
            for name, r in (components.get("responses") or {}).items():
                self.response(r, f"components.responses.{name}")
            for name, s in (components.get("securitySchemes") or {}).items():
                self.security_scheme(s, f"components.securitySchemes.{name}")
        if "security" in doc:
            self.security(doc["security"], "security")
        paths = doc.get("paths")
        if not isinstance(paths, dict):
            self.problem("paths", "must be a mapping")
            return self.problems
        for path, item in paths.items():
            if not str(path).startswith("/"):
                self.problem(f"paths.{path}", "a path must begin with /")
            if not self.keys("path_item", item, path):
                continue
            params = self.parameters(item["parameters"], f"{path}.parameters") if "parameters" in item else set()
            for op in OPERATIONS & item.keys():
                self.operation(item[op], f"{path} {op}", params)
        return self.problems

    def security_scheme(self, obj, where):
        if not self.keys("security_scheme", obj, where):
            return
        kind = obj.get("type")
        if kind not in {"apiKey", "http", "oauth2", "openIdConnect"}:
            self.problem(where, f"type {kind!r} is not one of apiKey, http, oauth2, openIdConnect")
        if kind == "http" and "scheme" not in obj:
            self.problem(where, "an http scheme needs scheme (e.g. bearer)")
        if "bearerFormat" in obj and (kind != "http" or str(obj.get("scheme")).lower() != "bearer"):
            self.problem(where, "bearerFormat goes only with type: http, scheme: bearer")
        if kind == "apiKey" and not {"name", "in"} <= obj.keys():
            self.problem(where, "an apiKey scheme needs name and in")


HANDLE = re.compile(r'\bHandle\(\s*"([A-Z]+)"\s*,[^;]*?,\s*"(/[^"]*)"', re.S)


def is_api(template):
    return template != "/" and not template.startswith("/ui/")


def registered_routes(root):
    """{(METHOD, TEMPLATE)} of the routes registered in non-test sources under root, pages aside."""
    routes = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(".cc") and not name.endswith("_test.cc"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    for method, template in HANDLE.findall(f.read()):
                        if is_api(template):
                            routes.add((method, template))
    return routes


def route_problems(doc, root):
    documented = {(op.upper(), path) for path, item in (doc.get("paths") or {}).items()
                  if is_api(str(path)) and isinstance(item, dict)
                  for op in OPERATIONS & item.keys()}
    served = registered_routes(root)
    if not served:
        return [f"no route is registered under {root} (has Handle( changed?)"]
    return ([f"{m} {p}: served by the server ({root}) but not documented" for m, p in sorted(served - documented)] +
            [f"{m} {p}: documented but not served by the server ({root})" for m, p in sorted(documented - served)])


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--routes"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        try:
            doc = yaml.safe_load(f)
        except yaml.YAMLError as e:
            print(f"{argv[1]}: not YAML: {e}")
            return 1
    problems = Checker(doc).run()
    if len(argv) == 4 and not problems:
        problems = route_problems(doc, argv[3])
    for p in problems:
        print(f"{argv[1]}: {p}")
    if problems:
        print(f"{argv[1]}: {len(problems)} problem(s)")
        return 1
    print(f"{argv[1]}: a valid OpenAPI 3.0 document ({len(doc['paths'])} paths)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
