#!/usr/bin/env python3
"""Renders packaging/kubernetes/kustomization.yaml without kubectl.

check_manifests.sh uses it where kubectl is not installed (a plain Debian
12 machine has no kubectl that fits), and, where kubectl is, checks that it
renders the same objects as `kubectl kustomize`. It implements only what the
kustomization uses: `resources` (files), `namespace` and `images` (name,
newName, newTag), and refuses any other field, so that a new kustomize
feature cannot be silently ignored.

  render_kustomization.py DIR > rendered.yaml
"""
import os
import sys

import yaml

KNOWN = {"apiVersion", "kind", "namespace", "resources", "images"}
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


def render(directory):
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    unknown = set(k) - KNOWN
    if unknown:
        sys.exit(f"render_kustomization: unsupported fields {sorted(unknown)}; "
                 "extend this renderer or install kubectl")
    images = {i["name"]: i for i in k.get("images") or []}
    out = []
    for res in k.get("resources") or []:
        path = os.path.join(directory, res)
        if not os.path.isfile(path):
            sys.exit(f"render_kustomization: resource {res} is not a file")
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
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
                out.append(doc)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: render_kustomization.py DIR")
    yaml.safe_dump_all(render(sys.argv[1]), sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
