#!/usr/bin/env python3
"""`layerjit plan --format json|dot|svg`: the JSON validates against docs/plan.schema.json and agrees
with the text plan and with itself; the DOT is drawn by Graphviz; the SVG is XML with a cluster per
kernel.

    plan_formats.py LAYERJIT SCHEMA
"""
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

LJ, SCHEMA_PATH = sys.argv[1], sys.argv[2]
SCHEMA = json.load(open(SCHEMA_PATH))
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def fail(msg):
    print(f"plan_formats: FAILED: {msg}")
    sys.exit(1)


def type_ok(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])


def validate(v, s, path="$"):
    """The JSON Schema keywords docs/plan.schema.json uses; an error names the path."""
    if "$ref" in s:
        return validate(v, SCHEMA["$defs"][s["$ref"].split("/")[-1]], path)
    if "const" in s and v != s["const"]:
        fail(f"{path}: {v!r} is not {s['const']!r}")
    if "enum" in s and v not in s["enum"]:
        fail(f"{path}: {v!r} is none of {s['enum']}")
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(type_ok(v, t) for t in ts):
            fail(f"{path}: {v!r} is not of type {ts}")
    if "minimum" in s and type_ok(v, "number") and v < s["minimum"]:
        fail(f"{path}: {v} < {s['minimum']}")
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                fail(f"{path}: missing '{k}'")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                validate(x, props[k], f"{path}.{k}")
            elif extra is False:
                fail(f"{path}: unexpected key '{k}'")
            elif isinstance(extra, dict):
                validate(x, extra, f"{path}.{k}")
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            validate(x, s["items"], f"{path}[{i}]")


def run(*args):
    r = subprocess.run([LJ, *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"layerjit {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def check_plan(doc, bound):
    validate(doc, SCHEMA)
    for g in doc["graphs"]:
        groups = g["groups"]
        if [x["id"] for x in groups] != list(range(len(groups))):
            fail(f"@{g['name']}: group ids are not 0..{len(groups) - 1}")
        per_call = [x for x in groups if not x["prepare"]]
        t = g["totals"]
        if t["kernels"] != len(per_call) or t["prepare_kernels"] != len(groups) - len(per_call):
            fail(f"@{g['name']}: totals count {t['kernels']} + {t['prepare_kernels']} kernels, the groups {len(groups)}")
        for x in groups:
            want = f"lj_{g['name']}_g{x['id']}_{x['kind']}"
            if x["kernel"] != want:
                fail(f"@{g['name']} group {x['id']}: kernel {x['kernel']}, expected {want}")
            if not x["nodes"]:
                fail(f"@{g['name']} group {x['id']} has no nodes")
            stored = {v["name"] for v in x["reads"] + x["writes"]}
            for v in x["on_chip"]:
                if v["name"] in stored:
                    fail(f"@{g['name']} group {x['id']}: %{v['name']} is both on chip and in memory")
        if bound:
            if t["bytes"] != sum(x["bytes"] for x in per_call) or t["flops"] != sum(x["flops"] for x in per_call):
                fail(f"@{g['name']}: the totals are not the sums of the groups")
            if g["fused"] and not (t["unfused_kernels"] > t["kernels"] and t["unfused_bytes"] > t["bytes"]):
                fail(f"@{g['name']}: the fused plan is not smaller than the unfused one")
            for x in groups:
                for v in x["reads"] + x["writes"]:
                    if not v["bytes"]:
                        fail(f"@{g['name']} group {x['id']}: %{v['name']} has no byte count")
        else:
            if any(x["bytes"] is not None for x in groups) or t["bytes"] is not None:
                fail(f"@{g['name']}: bytes counted with unbound symbols")


# Both graphs of the built-in layer at bound sizes, against the text plan's kernel counts.
sizes = "T=4096,B=1,C=4096"
doc = json.loads(run("plan", "--format", "json", "--bind", sizes))
check_plan(doc, bound=True)
names = [g["name"] for g in doc["graphs"]]
if names != ["llama3_8b_prefill", "llama3_8b_decode"]:
    fail(f"graphs {names}")
text = run("plan", "--bind", sizes)
for g in doc["graphs"]:
    m = re.search(rf"^plan @{g['name']} \([^)]*\): (\d+) kernels", text, re.M)
    if not m or int(m.group(1)) != g["totals"]["kernels"]:
        fail(f"@{g['name']}: the JSON has {g['totals']['kernels']} kernels, the text plan says {m and m.group(1)}")
    if g["sizes"] != {s: int(v) for s, v in (kv.split("=") for kv in sizes.split(",")) if s in g["symbols"]}:
        fail(f"@{g['name']}: sizes {g['sizes']}")
# Unbound symbols: no counts; the unfused plan: not fused.
check_plan(json.loads(run("plan", "--format", "json")), bound=False)
unfused = json.loads(run("plan", "--format", "json", "--no-fuse", "--graph", "llama3_8b_decode", "--bind", "B=1,C=4096"))
check_plan(unfused, bound=True)
if unfused["graphs"][0]["fused"] or unfused["graphs"][0]["totals"]["unfused_kernels"] is not None:
    fail("--no-fuse: the plan says it is fused")

# DOT through Graphviz, and --format svg: XML with one cluster per graph and per kernel.
dot = shutil.which("dot")
if not dot:
    fail("Graphviz's dot is not on PATH (scripts/setup.sh installs graphviz)")
dot_text = run("plan", "--format", "dot", "--bind", sizes)
r = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, text=True)
if r.returncode != 0 or r.stderr.strip():
    fail(f"dot -Tsvg on the DOT output: exit {r.returncode}: {r.stderr}")
svg = run("plan", "--format", "svg", "--bind", sizes)
root = ET.fromstring(svg)
clusters = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "cluster"]
want = len(doc["graphs"]) + sum(len(g["groups"]) for g in doc["graphs"])
if len(clusters) != want:
    fail(f"the SVG has {len(clusters)} clusters, expected {want} (graphs and kernels)")
print(f"plan_formats: ok ({len(doc['graphs'])} graphs, {want - len(doc['graphs'])} kernels; JSON valid, DOT drawn, SVG parsed)")
