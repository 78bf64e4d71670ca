#!/usr/bin/env python3
"""Offline checks of walwatch's packaging against the walwatch binary.

Run by check_manifests.sh, which renders packaging/kubernetes first
(render_kustomization.py, and `kubectl kustomize` where kubectl is
installed). Needs PyYAML (python3-yaml), nothing else.

  check_manifests.py --root REPO --binary WALWATCH --rendered FILE
  check_manifests.py --root REPO --scrape METRICS_TEXT [--source mysql]

The second form checks metric names only, against a scrape of a running
walwatch's /metrics (ClaimsTest.PackagingAndDocsNameOnlyScrapedMetrics
starts one against PostgreSQL and runs it); see the end of this docstring.

What it checks, for every pod template that runs walwatch (an image or
command named walwatch, in containers or initContainers; in initContainers
it must be a native sidecar, restartPolicy Always):
  * the container's command and args, expanded as kubelet does ($(VAR),
    $$) and, when they start a shell, run through that shell with a stand-in
    `walwatch` that records its argv, for two pod names;
  * every --flag is a flag of `walwatch --help`, and the real binary accepts
    the values (`walwatch ARGS... --help` parses each flag before --help);
    every WALWATCH_* variable (container env, Dockerfile ENV) names a flag;
    no flag is set both ways;
  * the slot is a valid name and differs between pods when replicas > 1;
  * the socket's directory is an emptyDir mounted at the same path in the
    walwatch container and in every other container of the pod;
  * probes: liveness/startup on /healthz or /livez, readiness on /readyz, all
    on the port of --metrics-address, which must not be loopback; that port
    is a containerPort, the prometheus.io/port annotation (if any), the
    Dockerfile's EXPOSE, and what each ServiceMonitor's endpoint resolves to
    through its Service; the pods are scraped one way, a ServiceMonitor or
    prometheus.io/* annotations, not both;
  * memory limit above --max-log-bytes; non-root, read-only root filesystem,
    no privilege escalation, all capabilities dropped.
And: each alert has severity, summary, description and a runbook whose
README anchors exist, the first its own section; the Grafana dashboard is
valid; the systemd defaults file lists exactly the flags' variables, the
unit's RuntimeDirectory holds the default socket, and the MySQL drop-in
(walwatch-mysql.conf) sets flags whose values the binary accepts.
For --source mysql (--source=mysql in args, or WALWATCH_SOURCE): a server
id per replica (--server-id-from, hashed as walwatch does), the connection
string from a Secret, and no PostgreSQL-only settings left over.

With --scrape: the alerts of the rendered PrometheusRules, the Grafana
dashboard's queries and the metric names in backquotes in README.md and
packaging/kubernetes/README.md (`walwatch_x_bytes` and `_seconds` is read as
walwatch_x_seconds) use only metric names (and reason/status/type label
values) that the scrape has. The few that only a MySQL/MariaDB walwatch
exports (MYSQL_ONLY) are taken as given from a PostgreSQL scrape, which
must not have them; --source mysql checks, on a MariaDB walwatch's scrape
(MariaDbRetentionTest.TheRetentionGaugeIsTheServersSetting), that it has
every one of them.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # check_manifests.sh picks an interpreter that has it
    sys.exit("check_manifests: PyYAML is missing (apt-get install python3-yaml)")

FAILURES = []

# Metrics that only a MySQL/MariaDB walwatch exports
# (cdc/mysql/binlog_monitor.h), which the alerts and the docs name.
MYSQL_ONLY = {"walwatch_binlog_retention_seconds",
              "walwatch_replay_window_seconds"}


def ok(msg):
    print(f"PASS: {msg}")


def fail(msg):
    FAILURES.append(msg)
    print(f"FAIL: {msg}")


def check(cond, msg, why=""):
    if cond:
        ok(msg)
    else:
        fail(msg + (f": {why}" if why else ""))
    return cond


# ---------------------------------------------------------------------------
# The binary's flags (--help).

class Binary:
    def __init__(self, path):
        self.path = path
        r = subprocess.run([path, "--help"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            sys.exit(f"check_manifests: {path} --help exited {r.returncode}: "
                     f"{r.stderr.strip()}")
        self.flags = {}  # name -> {"takes_value", "env", "default"}
        current = None
        for line in r.stdout.splitlines():
            m = re.match(r"^  --([a-z0-9-]+)(?: (\S+))?$", line)
            if m:
                current = m.group(1)
                self.flags[current] = {"takes_value": m.group(2) is not None,
                                       "env": None, "default": None}
                continue
            m = re.match(r"^\s+Default: (.*)\. Env: (WALWATCH_[A-Z0-9_]+)\.$",
                         line)
            if m and current:
                self.flags[current]["default"] = m.group(1)
                self.flags[current]["env"] = m.group(2)
        self.env_to_flag = {f["env"]: n for n, f in self.flags.items()
                            if f["env"]}

    def default(self, flag):
        d = self.flags[flag]["default"]
        if d is None or d.startswith("empty"):
            return ""
        return d


class Scrape:
    """The metric families, sample names and label values of a /metrics
    scrape (Prometheus text format)."""

    def __init__(self, path):
        self.metrics = set()      # family and sample names
        self.labels = {}          # label name -> values seen
        with open(path) as f:
            for line in f:
                m = re.match(r"^# TYPE (\S+) \S+", line)
                if m:
                    self.metrics.add(m.group(1))
                    continue
                m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s", line)
                if not m or line.startswith("#"):
                    continue
                self.metrics.add(m.group(1))
                for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                       m.group(3) or ""):
                    self.labels.setdefault(k, set()).add(v)
        self.walwatch = {n for n in self.metrics if n.startswith("walwatch_")}

    def has_label_value(self, label, value):
        return value in self.labels.get(label, set())

    def has_metric(self, name):
        if name in self.metrics:
            return True
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in self.metrics:
                return True
        return False


# ---------------------------------------------------------------------------
# Sizes: walwatch's (256Mi, 1G, bytes) and Kubernetes quantities.

UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
         "k": 1000, "K": 1000, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMGT]i|[kKMGT]|)", str(text).strip())
    return int(m.group(1)) * UNITS[m.group(2)] if m else None


def parse_port(address):
    m = re.fullmatch(r"(.*):(\d+)", address or "")
    if not m:
        return None, None
    return m.group(1), int(m.group(2))


# ---------------------------------------------------------------------------
# Kubelet's $(VAR) expansion (k8s third_party/forked/golang/expansion).

def kubelet_expand(text, env):
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "$" and i + 1 < len(text):
            n = text[i + 1]
            if n == "$":
                out.append("$")
                i += 2
                continue
            if n == "(":
                close = text.find(")", i + 2)
                if close != -1:
                    name = text[i + 2:close]
                    out.append(env[name] if name in env else f"$({name})")
                    i = close + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append("$" + n)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def container_env(container, pod_name, namespace):
    """Literal values as kubelet sees them; stand-ins for references."""
    env = {}
    sources = {}
    for e in container.get("env") or []:
        name = e["name"]
        if "value" in e:
            env[name] = kubelet_expand(str(e["value"]), env)
            sources[name] = "literal"
        else:
            ref = e.get("valueFrom") or {}
            field = (ref.get("fieldRef") or {}).get("fieldPath")
            if field == "metadata.name":
                env[name] = pod_name
            elif field == "metadata.namespace":
                env[name] = namespace
            elif field == "status.podIP":
                env[name] = "10.0.0.10"
            else:
                env[name] = f"<{name} from a reference>"
            sources[name] = "reference"
    return env, sources


# ---------------------------------------------------------------------------
def slot_name_from(text):
    """walwatch's --slot-from (SlotNameFrom in watchserver/config_values.cc)."""
    name = "".join(ch.lower() if "A" <= ch <= "Z" else ch for ch in text)
    name = "".join(ch if re.fullmatch(r"[a-z0-9_]", ch) else "_" for ch in name)
    if len(name.encode()) <= 63:
        return name
    h = 2166136261
    for b in text.encode():
        h ^= b
        h = (h * 16777619) & 0xFFFFFFFF
    return name[:54] + "_" + format(h, "08x")


# Running a container's command with a stand-in walwatch.

SHIM = """#!/bin/sh
for a in "$@"; do printf '%s\\0' "$a"; done > "$WALWATCH_SHIM_OUT"
"""


def simulate_argv(argv, env, entrypoint, tmp):
    """The argv walwatch would get, or (None, why)."""
    shim_dir = os.path.join(tmp, "bin")
    os.makedirs(shim_dir, exist_ok=True)
    shim = os.path.join(shim_dir, "walwatch")
    if not os.path.exists(shim):
        with open(shim, "w") as f:
            f.write(SHIM)
        os.chmod(shim, 0o755)
    if not argv:
        return None, "empty command"
    base = os.path.basename(argv[0])
    if base == "walwatch" or argv[0] == entrypoint:
        return list(argv[1:]), None
    if base not in ("sh", "bash", "dash"):
        return None, f"cannot follow {argv[0]!r} to walwatch"
    run = [base] + [a.replace(entrypoint, "walwatch") for a in argv[1:]]
    out = os.path.join(tmp, "argv")
    if os.path.exists(out):
        os.remove(out)
    full_env = {"PATH": f"{shim_dir}:/usr/bin:/bin", "WALWATCH_SHIM_OUT": out}
    full_env.update(env)
    r = subprocess.run(run, env=full_env, capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0 or not os.path.exists(out):
        return None, (f"shell exited {r.returncode} without running walwatch: "
                      f"{r.stderr.strip()}")
    with open(out, "rb") as f:
        data = f.read()
    return [a.decode() for a in data.split(b"\0")[:-1]], None


def parse_flags(args, binary):
    """[(flag, value)] in order, and the tokens that are not known flags."""
    flags, unknown = [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and len(a) > 2:
            name, eq, value = a[2:].partition("=")
            spec = binary.flags.get(name)
            if spec is None:
                unknown.append(a)
            elif not eq:
                if spec["takes_value"]:
                    if i + 1 < len(args):
                        value = args[i + 1]
                        i += 1
                else:
                    value = "true"
            flags.append((name, value))
        else:
            unknown.append(a)
        i += 1
    return flags, unknown


# ---------------------------------------------------------------------------
# Dockerfile: ENTRYPOINT, ENV, EXPOSE, USER of the final stage.

def read_dockerfile(path):
    info = {"entrypoint": "/usr/bin/walwatch", "env": {}, "expose": [],
            "user": None, "packages": []}
    if not os.path.exists(path):
        return info
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    stage = []
    for line in text.splitlines():
        if re.match(r"^\s*FROM\s", line, re.I):
            stage = []
        stage.append(line)
    for line in stage:
        m = re.match(r"^\s*ENTRYPOINT\s+(\[.*\])", line)
        if m:
            info["entrypoint"] = json.loads(m.group(1))[0]
        m = re.match(r"^\s*ENV\s+(\S+?)=(\S+)", line)
        if m:
            info["env"][m.group(1)] = m.group(2)
        m = re.match(r"^\s*EXPOSE\s+(.*)", line)
        if m:
            info["expose"] += [int(p.split("/")[0]) for p in m.group(1).split()]
        m = re.match(r"^\s*USER\s+(\S+)", line)
        if m:
            info["user"] = m.group(1)
        # The packages the final stage installs (apt-get install ... &&).
        for m in re.finditer(r"apt-get install\s+(.*?)(?:&&|$)", line):
            info["packages"] += [w for w in m.group(1).split()
                                 if not w.startswith("-")]
    return info


def essential_closure():
    """The installed packages that Essential ones need (Pre-Depends and
    Depends, transitively): what every Debian image, slim ones too, has."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f",
         "${Package}\t${Essential}\t${Pre-Depends}, ${Depends}\n"],
        capture_output=True, text=True, timeout=60).stdout
    deps, todo = {}, []
    for line in out.splitlines():
        name, essential, rel = (line.split("\t") + ["", ""])[:3]
        deps[name] = [re.split(r"[\s:(]", alt.strip())[0]
                      for alt in re.split(r"[,|]", rel) if alt.strip()]
        if essential == "yes":
            todo.append(name)
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in deps:
            continue
        seen.add(name)
        todo += deps[name]
    return seen


def check_image_libraries(binary, docker):
    """Each library the binary links directly (DT_NEEDED) comes, on this
    Debian machine, from a package the Dockerfile's final stage installs,
    or from one that every Debian image has (essential_closure)."""
    base = essential_closure()
    r = subprocess.run(["readelf", "-d", binary], capture_output=True,
                       text=True, timeout=30)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", r.stdout)
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True,
                         timeout=30).stdout
    paths = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    missing = []
    for lib in needed:
        if lib not in paths:
            continue  # the dynamic loader itself, or a vDSO
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(paths[lib])],
                               capture_output=True, text=True, timeout=30)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", paths[lib]],
                                   capture_output=True, text=True, timeout=30)
        if owner.returncode != 0:
            missing.append(f"{lib} (no package owns {paths[lib]})")
            continue
        pkg = owner.stdout.split(":")[0].strip()
        if pkg not in docker["packages"] and pkg not in base:
            missing.append(f"{lib} ({pkg})")
    check(needed and not missing, "Dockerfile: the image installs every "
          f"library walwatch links ({len(needed)})",
          f"not installed: {missing}")


# ---------------------------------------------------------------------------

def pod_templates(docs):
    for d in docs:
        kind, spec = d.get("kind"), d.get("spec") or {}
        meta = d.get("metadata") or {}
        if kind == "Pod":
            yield d, meta, spec, 1
        elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet",
                      "Job"):
            t = spec.get("template") or {}
            yield d, t.get("metadata") or {}, t.get("spec") or {}, \
                spec.get("replicas", 1)
        elif kind == "CronJob":
            t = ((spec.get("jobTemplate") or {}).get("spec") or {}).get(
                "template") or {}
            yield d, t.get("metadata") or {}, t.get("spec") or {}, 1


def is_walwatch(container):
    image = container.get("image", "")
    if re.search(r"(^|/)walwatch([:@]|$)", image):
        return True
    words = " ".join(container.get("command") or [])
    return bool(re.search(r"(^|[\s/])walwatch(\s|$)", words))


def probe_port(probe, container):
    port = (probe.get("httpGet") or {}).get("port")
    if isinstance(port, str) and not port.isdigit():
        for p in container.get("ports") or []:
            if p.get("name") == port:
                return p.get("containerPort")
        return None
    return int(port) if port is not None else None


def derive_server_id(text):
    """walwatch's --server-id-from (DeriveServerId, cdc/mysql/mysql_checks.cc)."""
    h = 2166136261
    for b in text.encode():
        h ^= b
        h = (h * 16777619) & 0xFFFFFFFF
    return 0x80000000 | (h & 0x7FFFFFFF)


# PostgreSQL's own settings, which a MySQL source would ignore.
POSTGRES_ONLY_FLAGS = {"conninfo", "slot", "slot-from", "retained-wal-warn"}


def check_mysql_source(where, runs, binary, replicas, pod_names):
    """--source mysql: the connection string from a Secret, a server id per
    replica, no PostgreSQL settings left over."""
    ids = []
    for rpod, renv, rsources, rargs in runs:
        rflags = dict(parse_flags(rargs, binary)[0])
        conninfo_env = binary.flags["mysql-conninfo"]["env"]
        check("mysql-conninfo" not in rflags and
              rsources.get(conninfo_env) == "reference",
              f"{where}: {conninfo_env} comes from a Secret (pod "
              f"{rpod[:40]})", "set in args or as a literal value: the "
              "password would be in the manifest")
        left = sorted(f for f in POSTGRES_ONLY_FLAGS
                      if f in rflags or binary.flags[f]["env"] in renv)
        check(not left, f"{where}: no PostgreSQL-only settings with --source "
              "mysql", f"{left} would be ignored")
        text = rflags.get("server-id-from") or \
            renv.get("WALWATCH_SERVER_ID_FROM")
        sid = rflags.get("server-id") or renv.get("WALWATCH_SERVER_ID")
        if text:
            sid = derive_server_id(text)
        check(sid is not None, f"{where}: a server id for pod {rpod[:40]}",
              "neither --server-id nor --server-id-from")
        ids.append(sid)
    if replicas and replicas > 1:
        check(len(ids) >= 2 and ids[0] != ids[1],
              f"{where}: each of the {replicas} replicas has its own server "
              "id", f"pods {pod_names[0]} and {pod_names[1]} both use "
              f"{ids[0] if ids else None}")


def check_workload(obj, meta, spec, replicas, binary, docker, services,
                   monitors, tmp):
    wname = f"{obj['kind']}/{obj['metadata']['name']}"
    namespace = obj["metadata"].get("namespace", "default")
    containers = (spec.get("containers") or []) + (
        spec.get("initContainers") or [])
    walwatches = [c for c in containers if is_walwatch(c)]
    init_names = {c.get("name") for c in spec.get("initContainers") or []}
    for c in walwatches:
        where = f"{wname} container {c['name']}"
        print(f"--- {where}")

        # An init container runs alongside the others only as a native
        # sidecar; a plain one would have to exit before the pod starts.
        if c.get("name") in init_names:
            check(c.get("restartPolicy") == "Always",
                  f"{where}: an init container with restartPolicy Always "
                  "(a sidecar)", f"restartPolicy is {c.get('restartPolicy')!r}"
                  ": the pod would wait for walwatch to exit")

        # Environment variables.
        wenv = [e["name"] for e in c.get("env") or []
                if e["name"].startswith("WALWATCH_")]
        bad = [n for n in wenv if n not in binary.env_to_flag]
        check(not bad, f"{where}: WALWATCH_* env vars {wenv} are flags",
              f"not flags: {bad}")
        bad = [n for n in docker["env"]
               if n.startswith("WALWATCH_") and n not in binary.env_to_flag]
        check(not bad, "Dockerfile: ENV WALWATCH_* are flags",
              f"not flags: {bad}")
        if c.get("envFrom"):
            fail(f"{where}: envFrom cannot be checked; list env vars one by one")

        # The command, as run in two pods (and, for PostgreSQL, one with a
        # name too long for a slot, which --slot-from shortens; a MySQL
        # source's --server-id-from takes at most 60 bytes, which a
        # StatefulSet's pod names keep to below).
        argv = (c.get("command") or [docker["entrypoint"]]) + (
            c.get("args") or [])
        literal = {e["name"]: str(e.get("value")) for e in c.get("env") or []
                   if "value" in e}
        mysql_source = bool(re.search(r"--source[= ](mysql|mariadb)\b",
                                      " ".join(argv))) or \
            literal.get("WALWATCH_SOURCE") in ("mysql", "mariadb")
        pod_names = [f"{obj['metadata']['name']}-0",
                     f"{obj['metadata']['name']}-1"]
        if not mysql_source:
            pod_names.append("x" * 60 + ".a-b." + "y" * 40)
        runs = []
        for pod in pod_names:
            env, sources = container_env(c, pod, namespace)
            expanded = [kubelet_expand(a, env) for a in argv]
            args, why = simulate_argv(expanded, env, docker["entrypoint"], tmp)
            if args is None:
                fail(f"{where}: run the command for pod {pod}: {why}")
                continue
            runs.append((pod, env, sources, args))
        if not runs:
            continue
        pod, env, sources, args = runs[0]
        print(f"      walwatch argv in pod {pod}: {shlex.join(args)}")
        flags, unknown = parse_flags(args, binary)
        check(not unknown,
              f"{where}: every argument is a flag of walwatch --help",
              f"unknown: {unknown}")
        by_flag = dict(flags)
        dup = sorted(binary.flags[n]["env"] for n in by_flag
                     if binary.flags[n]["env"] in env)
        check(not dup, f"{where}: no flag set both in args and env",
              f"set twice (the env var is ignored): {dup}")

        # Effective settings: args > container env > image ENV > default.
        def setting(flag):
            if flag in by_flag:
                return by_flag[flag]
            name = binary.flags[flag]["env"]
            if env.get(name):
                return env[name]
            if docker["env"].get(name):
                return docker["env"][name]
            return binary.default(flag)

        # The real binary parses every flag before --help.
        literal_env = [f"--{binary.env_to_flag[n]}={env[n]}"
                       for n in wenv if sources.get(n) == "literal"
                       and binary.env_to_flag[n] not in by_flag]
        for _, _, _, run_args in runs:
            r = subprocess.run([binary.path] + run_args + literal_env +
                               ["--help"], capture_output=True, text=True,
                               timeout=30)
            check(r.returncode == 0,
                  f"{where}: walwatch accepts the values "
                  f"({shlex.join(run_args[:1])}...)", r.stderr.strip())

        if mysql_source:
            check_mysql_source(where, runs, binary, replicas, pod_names)
        # Slot.
        slots = []
        for rpod, renv, _, rargs in (runs if not mysql_source else []):
            rflags = dict(parse_flags(rargs, binary)[0])
            slot = rflags.get("slot") or renv.get("WALWATCH_SLOT") or \
                binary.default("slot")
            slot_from = rflags.get("slot-from") or renv.get("WALWATCH_SLOT_FROM")
            if slot_from:
                slot = slot_name_from(slot_from)
            slots.append(slot)
            check(re.fullmatch(r"[a-z0-9_]{1,63}", slot or "") is not None,
                  f"{where}: slot {slot!r} for pod {rpod[:40]} is valid")
        if replicas and replicas > 1 and not mysql_source:
            check(len(set(slots[:2])) == 2,
                  f"{where}: each of the {replicas} replicas has its own slot",
                  f"pods {pod_names[0]} and {pod_names[1]} both use "
                  f"{slots[0]!r}")

        # Socket on a shared emptyDir.
        socket = setting("socket")
        sock_dir = os.path.dirname(socket)
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        mounts = [m for m in c.get("volumeMounts") or []
                  if (sock_dir + "/").startswith(
                      m["mountPath"].rstrip("/") + "/")]
        mount = max(mounts, key=lambda m: len(m["mountPath"]), default=None)
        if check(mount is not None,
                 f"{where}: socket {socket} is under a volume mount",
                 f"no mount covers {sock_dir}"):
            vol = volumes.get(mount["name"], {})
            check("emptyDir" in vol,
                  f"{where}: the socket volume {mount['name']} is an emptyDir",
                  f"volume is {sorted(vol)}")
            check(not mount.get("readOnly"),
                  f"{where}: the socket mount is writable")
            others = [o for o in containers if o is not c]
            check(bool(others), f"{where}: another container shares the pod",
                  "nobody reads the socket")
            for o in others:
                om = [m for m in o.get("volumeMounts") or []
                      if m["name"] == mount["name"]]
                check(any(m["mountPath"] == mount["mountPath"] for m in om),
                      f"{wname} container {o['name']}: mounts {mount['name']} "
                      f"at {mount['mountPath']}",
                      f"mounts: {[m['mountPath'] for m in om] or 'none'}")

        # Metrics address, probes, ports, annotations.
        host, port = parse_port(setting("metrics-address"))
        if not check(port is not None,
                     f"{where}: --metrics-address has a port",
                     f"{setting('metrics-address')!r}"):
            continue
        check(not (host.startswith("127.") or host in ("[::1]", "::1",
                                                       "localhost")),
              f"{where}: --metrics-address {host}:{port} is reachable from "
              "kubelet and Prometheus", "it is loopback")
        allowed = {"livenessProbe": {"/healthz", "/livez"},
                   "startupProbe": {"/healthz", "/livez", "/readyz"},
                   "readinessProbe": {"/readyz"}}
        for kind, paths in allowed.items():
            probe = c.get(kind)
            if probe is None:
                if kind != "startupProbe":
                    fail(f"{where}: has a {kind}")
                continue
            path = (probe.get("httpGet") or {}).get("path")
            check(path in paths, f"{where}: {kind} path {path} is one of "
                  f"{sorted(paths)}")
            pp = probe_port(probe, c)
            check(pp == port, f"{where}: {kind} port {pp} == metrics port "
                  f"{port}")
        cports = [p.get("containerPort") for p in c.get("ports") or []]
        check(port in cports, f"{where}: containerPort {port} is declared",
              f"ports: {cports}")
        ann = meta.get("annotations") or {}
        annotated = "prometheus.io/port" in ann or \
            "prometheus.io/scrape" in ann
        if annotated:
            check(str(ann.get("prometheus.io/port")) == str(port),
                  f"{wname}: annotation prometheus.io/port "
                  f"{ann.get('prometheus.io/port')} == {port}")
            check(ann.get("prometheus.io/path", "/metrics") == "/metrics",
                  f"{wname}: annotation prometheus.io/path is /metrics")
            check(str(ann.get("prometheus.io/scrape")) == "true",
                  f"{wname}: annotation prometheus.io/scrape is \"true\"")
        if docker["expose"]:
            check(port in docker["expose"],
                  f"Dockerfile: EXPOSE {docker['expose']} has {port}")

        # ServiceMonitors that reach this pod.
        labels = meta.get("labels") or {}
        reached = False
        for sm in monitors:
            sm_name = f"ServiceMonitor/{sm['metadata']['name']}"
            sel = ((sm.get("spec") or {}).get("selector") or {}).get(
                "matchLabels") or {}
            sm_ns = sm["metadata"].get("namespace", "default")
            for svc in services:
                svc_labels = svc["metadata"].get("labels") or {}
                if svc["metadata"].get("namespace", "default") != sm_ns or \
                        any(svc_labels.get(k) != v for k, v in sel.items()):
                    continue
                svc_sel = (svc.get("spec") or {}).get("selector") or {}
                if not svc_sel or any(labels.get(k) != v
                                      for k, v in svc_sel.items()):
                    continue
                for ep in sm["spec"].get("endpoints") or []:
                    reached = True
                    sp = [p for p in svc["spec"].get("ports") or []
                          if p.get("name") == ep.get("port")]
                    if not check(bool(sp), f"{sm_name}: endpoint port "
                                 f"{ep.get('port')!r} is a port of "
                                 f"Service/{svc['metadata']['name']}"):
                        continue
                    target = sp[0].get("targetPort", sp[0].get("port"))
                    if c.get("name") in init_names:
                        # kubernetes/kubernetes#127958: EndpointSlices
                        # resolved a named targetPort in regular containers
                        # only, until #128850.
                        check(not (isinstance(target, str) and
                                   not target.isdigit()),
                              f"Service/{svc['metadata']['name']}: a numeric "
                              "targetPort for a sidecar's port",
                              f"named {target!r}: no port in the "
                              "EndpointSlices of Kubernetes without #128850")
                    if isinstance(target, str) and not target.isdigit():
                        target = next((p.get("containerPort")
                                       for p in c.get("ports") or []
                                       if p.get("name") == target), None)
                    check(target is not None and int(target) == port,
                          f"{sm_name}: scrapes port {target} == metrics "
                          f"port {port}")
                    check(ep.get("path", "/metrics") == "/metrics",
                          f"{sm_name}: path is /metrics")
        if monitors:
            check(reached, f"{wname}: a ServiceMonitor scrapes these pods")
        # Exactly one way of scraping: annotations or a ServiceMonitor.
        check(annotated or reached,
              f"{wname}: scraped (a ServiceMonitor or prometheus.io/* "
              "annotations)", "neither")
        check(not (annotated and reached),
              f"{wname}: scraped once (not both a ServiceMonitor and "
              "prometheus.io/* annotations)", "every sample twice")

        # Resources and security.
        limit = parse_size(((c.get("resources") or {}).get("limits") or {})
                           .get("memory", ""))
        log_bytes = parse_size(setting("max-log-bytes"))
        check(limit is not None and log_bytes is not None and
              limit > log_bytes,
              f"{where}: memory limit {limit} > --max-log-bytes {log_bytes}")
        sc = c.get("securityContext") or {}
        psc = spec.get("securityContext") or {}
        check(sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True,
              f"{where}: runAsNonRoot")
        user = sc.get("runAsUser", psc.get("runAsUser"))
        check(user is not None or (docker["user"] or "").split(":")[0]
              .isdigit(), f"{where}: a numeric user (runAsUser or the "
              "image's USER)")
        check(sc.get("readOnlyRootFilesystem") is True,
              f"{where}: readOnlyRootFilesystem")
        check(sc.get("allowPrivilegeEscalation") is False,
              f"{where}: allowPrivilegeEscalation false")
        check("ALL" in ((sc.get("capabilities") or {}).get("drop") or []),
              f"{where}: capabilities drop ALL")
    return bool(walwatches)


# ---------------------------------------------------------------------------
# Metric names and label values in PromQL.

def check_promql(expr, where, scrape, jobs=None):
    """With a scrape: every walwatch_* name and reason/status/type value is
    in it. Without one (the offline checks): only that the query reads a
    walwatch metric or up{job=...} of a scraped Service."""
    names = sorted(set(re.findall(r"\bwalwatch_[a-z0-9_]+", expr)))
    up_jobs = re.findall(r'\bup\s*\{[^}]*\bjob\s*=\s*"([^"]*)"', expr)
    if up_jobs and jobs is not None:
        # A ServiceMonitor's job label is its Service's name.
        bad = [j for j in up_jobs if j not in jobs]
        check(not bad, f"{where}: up{{job=...}} names a scraped Service",
              f"{bad} not in {sorted(jobs)}")
    if scrape is None:
        check(bool(names or up_jobs), f"{where}: reads a walwatch metric or up",
              "no walwatch metric")
        return
    missing = [n for n in names if not scrape.has_metric(n)]
    check((names or up_jobs) and not missing,
          f"{where}: metrics {names or ['up']} are in the scrape",
          f"not in the scrape: {missing}" if names else "no walwatch metric")
    for label, _, value in re.findall(
            r'\b(reason|status|type)\s*(=~|=|!=|!~)\s*"([^"]*)"', expr):
        if not re.fullmatch(r"[A-Za-z_|]+", value):
            continue
        bad = [v for v in value.split("|")
               if not scrape.has_label_value(label, v)]
        check(not bad, f"{where}: {label} values {value!r} are in the scrape",
              f"not in the scrape: {bad}")


def doc_metric_names(path):
    """The metric names a Markdown file gives in backquotes, outside code
    blocks: `walwatch_a_b{label}`, and `_c` after one of them for a
    sibling (walwatch_a_c, or walwatch_a_b_c). Slot names and prefixes
    (`walwatch_`, `walwatch_$(POD_NAME)`, `walwatch_.*`) are not metrics."""
    found = []  # (line number, [candidate names])
    in_code = False
    with open(path) as f:
        lines = f.readlines()
    last = None
    for no, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if not line.strip():
            last = None
        for span in re.findall(r"`([^`]+)`", line):
            m = re.fullmatch(r"(walwatch_[a-z0-9_]*[a-z0-9])(\{[a-z_,]*\})?",
                             span)
            if m:
                last = m.group(1)
                found.append((no, [last]))
                continue
            m = re.fullmatch(r"_([a-z0-9_]*[a-z0-9])(\{[a-z_,]*\})?", span)
            if m and last:
                parts = last.split("_")
                found.append((no, ["_".join(parts[:len(parts) - k]) + "_" +
                                   m.group(1) for k in range(0, 3)
                                   if len(parts) - k >= 2]))
                continue
            last = None if "walwatch" in span else last
    return found


def check_docs(root, scrape):
    for rel in ("README.md", "packaging/kubernetes/README.md"):
        names = doc_metric_names(os.path.join(root, rel))
        bad = [f"{rel}:{no}: {'|'.join(c)}" for no, c in names
               if not any(scrape.has_metric(n) for n in c)]
        check(bool(names) and not bad,
              f"{rel}: the {len(names)} metric names it gives are in the "
              "scrape", f"not in the scrape: {bad}" if names else "none found")


def scraped_services(services, monitors):
    names = set()
    for sm in monitors:
        sel = ((sm.get("spec") or {}).get("selector") or {}).get(
            "matchLabels") or {}
        for svc in services:
            labels = svc["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in sel.items()):
                names.add(svc["metadata"]["name"])
    return names


def github_anchors(path):
    anchors = set()
    if not os.path.exists(path):
        return anchors
    with open(path) as f:
        for line in f:
            m = re.match(r"^#+\s+(.*?)\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower())
                anchors.add(slug.replace(" ", "-"))
    return anchors


def check_rules(rules_docs, scrape, root, jobs):
    for doc in rules_docs:
        for group in (doc.get("spec") or {}).get("groups") or []:
            for rule in group.get("rules") or []:
                if "alert" not in rule:
                    continue
                where = f"alert {rule['alert']}"
                check_promql(rule.get("expr", ""), where, scrape, jobs)
                check((rule.get("labels") or {}).get("severity") in
                      ("critical", "warning", "info"),
                      f"{where}: has a severity")
                ann = rule.get("annotations") or {}
                check(bool(ann.get("summary")) and
                      bool(ann.get("description")),
                      f"{where}: has summary and description")
                runbook = ann.get("runbook") or ann.get("runbook_url") or ""
                refs = re.findall(r"([\w./-]+\.md)#([\w-]+)", runbook)
                if not check(bool(refs), f"{where}: has a runbook"):
                    continue
                for md, anchor in refs:
                    check(anchor in github_anchors(os.path.join(root, md)),
                          f"{where}: runbook {md}#{anchor} exists")
                # One runbook per alert: the first reference is the
                # alert's own section of packaging/kubernetes/README.md.
                name = rule.get("alert", "")
                check(refs[0] == ("packaging/kubernetes/README.md",
                                  name.lower()),
                      f"{where}: its first runbook is its own section",
                      f"{refs[0][0]}#{refs[0][1]}, expected "
                      f"packaging/kubernetes/README.md#{name.lower()}")


def check_dashboard(path, scrape, root):
    where = os.path.relpath(path, root)
    try:
        with open(path) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{where}: valid JSON: {e}")
        return
    ok(f"{where}: valid JSON")
    panels = list(dash.get("panels") or [])
    for p in list(panels):
        panels += p.get("panels") or []
    ids = [p.get("id") for p in panels]
    check(len(ids) == len(set(ids)), f"{where}: panel ids are unique")
    check(isinstance(dash.get("schemaVersion"), int) and dash.get("uid"),
          f"{where}: has schemaVersion and uid")
    for p in panels:
        for t in p.get("targets") or []:
            check_promql(t.get("expr", ""), f"{where} panel {p.get('title')!r}"
                         f" {t.get('refId')}", scrape)


def check_systemd(root, binary):
    default = os.path.join(root, "packaging/systemd/walwatch.default")
    unit = os.path.join(root, "packaging/systemd/walwatch.service")
    with open(default) as f:
        names = set(re.findall(r"^#?(WALWATCH_[A-Z0-9_]+)=", f.read(), re.M))
    settings = set(binary.env_to_flag)
    check(names <= settings, "walwatch.default: every variable is a flag",
          f"not flags: {sorted(names - settings)}")
    check(settings <= names, "walwatch.default: lists every flag's variable",
          f"missing: {sorted(settings - names)}")
    with open(unit) as f:
        text = f.read()
    rd = re.search(r"^RuntimeDirectory=(\S+)", text, re.M)
    sock_dir = os.path.dirname(binary.default("socket"))
    check(rd is not None and f"/run/{rd.group(1)}" == sock_dir,
          f"walwatch.service: RuntimeDirectory holds the default socket "
          f"directory {sock_dir}")
    ex = re.search(r"^ExecStart=(\S+)", text, re.M)
    check(ex is not None and os.path.basename(ex.group(1)) == "walwatch",
          "walwatch.service: ExecStart runs walwatch")
    check(re.search(r"^EnvironmentFile=-?/etc/default/walwatch$", text, re.M)
          is not None, "walwatch.service: reads /etc/default/walwatch "
          "(EnvironmentFile=), which wins over a drop-in's Environment=")

    # The MySQL/MariaDB drop-in: its variables are flags whose values the
    # binary accepts, with systemd's specifiers filled in.
    dropin = os.path.join(root, "packaging/systemd/walwatch-mysql.conf")
    with open(dropin) as f:
        text = f.read()
    after = " ".join(re.findall(r"^After=(.*)$", text, re.M)).split()
    check({"mariadb.service", "mysql.service"} <= set(after),
          "walwatch-mysql.conf: after mariadb.service and mysql.service",
          f"After={' '.join(after)}")
    env = dict(re.findall(r"^Environment=(WALWATCH_[A-Z0-9_]+)=(.*)$", text,
                          re.M))
    bad = sorted(n for n in env if n not in binary.env_to_flag)
    check(env and not bad, f"walwatch-mysql.conf: Environment= sets flags "
          f"({sorted(env)})", f"not flags: {bad}")
    check(env.get("WALWATCH_SOURCE") == "mysql",
          "walwatch-mysql.conf: WALWATCH_SOURCE=mysql")
    specifiers = {"%H": "db-host-a.example.com", "%%": "%"}
    args = []
    for name, value in env.items():
        for spec, sub in specifiers.items():
            value = value.replace(spec, sub)
        if name in binary.env_to_flag:
            args.append(f"--{binary.env_to_flag[name]}={value}")
    r = subprocess.run([binary.path] + args + ["--help"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, f"walwatch-mysql.conf: walwatch accepts "
          f"{' '.join(args)}", r.stderr.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--binary")
    ap.add_argument("--rendered")
    ap.add_argument("--scrape", help="a /metrics scrape: check metric names "
                    "only, against it")
    ap.add_argument("--source", choices=("postgres", "mysql"),
                    default="postgres", help="the database of the walwatch "
                    "scraped (default postgres)")
    a = ap.parse_args()
    dashboard = os.path.join(a.root,
                             "packaging/grafana/walwatch-dashboard.json")

    if a.scrape and a.source == "mysql":
        scrape = Scrape(a.scrape)
        for name in sorted(MYSQL_ONLY):
            check(scrape.has_metric(name),
                  f"{name} (MySQL/MariaDB only) is in the scrape")
    elif a.scrape:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import render_kustomization
        docs = render_kustomization.render(
            os.path.join(a.root, "packaging/kubernetes"))
        scrape = Scrape(a.scrape)
        check(len(scrape.walwatch) > 10,
              f"the scrape has {len(scrape.walwatch)} walwatch_* names")
        # Checked on a MariaDB walwatch's scrape (--source mysql).
        check(not (MYSQL_ONLY & scrape.metrics),
              f"the MySQL/MariaDB-only metrics {sorted(MYSQL_ONLY)} are not "
              "in this PostgreSQL scrape",
              f"{sorted(MYSQL_ONLY & scrape.metrics)} are: update MYSQL_ONLY")
        scrape.metrics |= MYSQL_ONLY
        rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
        check(bool(rules), "a PrometheusRule is rendered")
        print("--- alerts")
        check_rules(rules, scrape, a.root, None)
        print("--- dashboard")
        check_dashboard(dashboard, scrape, a.root)
        print("--- docs")
        check_docs(a.root, scrape)
    else:
        if not (a.binary and a.rendered):
            ap.error("--binary and --rendered, or --scrape")
        binary = Binary(a.binary)
        ok(f"{a.binary} --help lists {len(binary.flags)} flags")
        docker = read_dockerfile(os.path.join(a.root, "packaging/Dockerfile"))
        if shutil.which("dpkg") and shutil.which("readelf"):
            check_image_libraries(a.binary, docker)
        else:
            print("SKIP: Dockerfile's runtime libraries: no dpkg or readelf "
                  "here to tell which package holds which library")
        with open(a.rendered) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        services = [d for d in docs if d.get("kind") == "Service"]
        monitors = [d for d in docs if d.get("kind") == "ServiceMonitor"]
        rules = [d for d in docs if d.get("kind") == "PrometheusRule"]

        with tempfile.TemporaryDirectory(prefix="walwatch-manifests.") as tmp:
            found = False
            for obj, meta, spec, replicas in pod_templates(docs):
                found |= check_workload(obj, meta, spec, replicas, binary,
                                        docker, services, monitors, tmp)
        check(found, "the manifests run walwatch")
        print("--- alerts (their metric names: with --scrape)")
        check(bool(rules), "a PrometheusRule is rendered")
        check_rules(rules, None, a.root, scraped_services(services, monitors))
        print("--- dashboard (its metric names: with --scrape)")
        check_dashboard(dashboard, None, a.root)
        print("--- systemd")
        check_systemd(a.root, binary)

    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
