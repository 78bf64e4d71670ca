#!/usr/bin/env python3
"""Renders packaging/kubernetes/kustomization.yaml without kubectl.

check_manifests.sh uses it where kubectl is not installed (a plain Debian
12 machine has no kubectl that fits), and, where kubectl is, checks that it
renders the same objects as `kubectl kustomize`. It implements only what the
kustomization uses: `resources` (files), `namespace`, `images` (name,
newName, newTag) and `components` (directories of a Component whose
`patches` are JSON patches, RFC 6902: test, add, replace, remove, on a
target named by group, version, kind and name), and refuses any other
field, so that a new kustomize feature cannot be silently ignored.

  render_kustomization.py DIR > rendered.yaml
"""
import os
import sys

import yaml

KNOWN = {"apiVersion", "kind", "namespace", "resources", "images",
         "components"}
KNOWN_COMPONENT = {"apiVersion", "kind", "patches"}
# Kinds without a namespace (kustomize leaves them alone).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                  "CustomResourceDefinition", "PersistentVolume",
                  "StorageClass", "PriorityClass"}


def containers(obj):
    spec = obj.get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec")) or (
        spec if obj.get("kind") == "Pod" else {})
    for key in ("initContainers", "containers"):
        for c in pod.get(key) or []:
            yield c


def split_image(image):
    """name, tag-or-digest suffix ("" if none)."""
    at = image.find("@")
    if at >= 0:
        return image[:at], image[at:]
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def pointer(path):
    """A JSON pointer's reference tokens (RFC 6901)."""
    if not path.startswith("/"):
        sys.exit(f"render_kustomization: JSON pointer {path!r} does not "
                 "start with /")
    return [t.replace("~1", "/").replace("~0", "~")
            for t in path[1:].split("/")]


def json_patch(doc, ops, where):
    """Applies RFC 6902 operations (test, add, replace, remove) in place."""
    for op in ops:
        tokens = pointer(op["path"])
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            i = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(i, op["value"])
                continue
            current = parent[i]
        else:
            if kind == "add":
                parent[last] = op["value"]
                continue
            if last not in parent:
                sys.exit(f"render_kustomization: {where}: {op['path']} "
                         "does not exist")
            current = parent[last]
        if kind == "test":
            if current != op["value"]:
                sys.exit(f"render_kustomization: {where}: test of "
                         f"{op['path']} failed: {current!r} is not "
                         f"{op['value']!r}")
        elif kind == "replace":
            parent[i if isinstance(parent, list) else last] = op["value"]
        elif kind == "remove":
            del parent[i if isinstance(parent, list) else last]
        else:
            sys.exit(f"render_kustomization: {where}: unsupported op {kind}")


def matches(doc, target):
    group, _, version = doc.get("apiVersion", "").rpartition("/")
    return all(((target.get("group") is None or target["group"] == group),
                (target.get("version") is None or target["version"] == version),
                (target.get("kind") is None or target["kind"] == doc.get("kind")),
                (target.get("name") is None or
                 target["name"] == (doc.get("metadata") or {}).get("name"))))


def apply_component(directory, docs):
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    unknown = set(k) - KNOWN_COMPONENT
    if k.get("kind") != "Component" or unknown:
        sys.exit(f"render_kustomization: {directory}: a Component with only "
                 f"{sorted(KNOWN_COMPONENT)} is supported")
    for p in k.get("patches") or []:
        if "path" not in p or "target" not in p:
            sys.exit(f"render_kustomization: {directory}: a patch needs a "
                     "path and a target")
        with open(os.path.join(directory, p["path"])) as f:
            ops = yaml.safe_load(f)
        if not isinstance(ops, list):
            sys.exit(f"render_kustomization: {p['path']}: only JSON patches "
                     "(a list of operations) are supported")
        hit = [d for d in docs if matches(d, p["target"])]
        if not hit:
            sys.exit(f"render_kustomization: {p['path']}: no object matches "
                     f"its target {p['target']}")
        for d in hit:
            json_patch(d, ops, p["path"])


def render(directory):
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    unknown = set(k) - KNOWN
    if unknown:
        sys.exit(f"render_kustomization: unsupported fields {sorted(unknown)}; "
                 "extend this renderer or install kubectl")
    images = {i["name"]: i for i in k.get("images") or []}
    docs = []
    for res in k.get("resources") or []:
        path = os.path.join(directory, res)
        if not os.path.isfile(path):
            sys.exit(f"render_kustomization: resource {res} is not a file")
        with open(path) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    # Components after the resources, before this kustomization's own
    # transformers, as kustomize orders them.
    for comp in k.get("components") or []:
        apply_component(os.path.join(directory, comp), docs)
    for doc in docs:
        if "namespace" in k and doc.get("kind") not in CLUSTER_SCOPED:
            doc.setdefault("metadata", {})["namespace"] = k["namespace"]
        for c in containers(doc):
            name, suffix = split_image(c.get("image", ""))
            if name in images:
                i = images[name]
                new = i.get("newName", name)
                if "newTag" in i:
                    suffix = ":" + str(i["newTag"])
                c["image"] = new + suffix
    return docs


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: render_kustomization.py DIR")
    yaml.safe_dump_all(render(sys.argv[1]), sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
