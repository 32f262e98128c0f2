#!/usr/bin/env python3
"""Checks that the Kubernetes manifests in deploy/k8s parse and agree with each other.

Usage: check_k8s.py K8S_DIR [SCRIPT_DIR]

Every document needs apiVersion, kind and metadata.name. Across files: the StatefulSet's
serviceName is the headless Service; the driver Job's --nodes are exactly the StatefulSet's pod
DNS names on the port the nodes listen on; the tensor-parallel size is replicas x GPUs per pod;
every ConfigMap and Secret reference resolves; TLS files are mounted where the flags point;
kustomization.yaml lists every manifest. Container scripts run with `bash -c` are written to
SCRIPT_DIR (when given) so that the caller can shellcheck them.

Prints one line per problem, naming the file, and exits 1 if there is any.
"""
import os
import re
import sys

import yaml

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def load(k8s_dir):
    """Returns [(file, doc)] for every YAML document under k8s_dir."""
    docs = []
    for name in sorted(os.listdir(k8s_dir)):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(k8s_dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                loaded = [d for d in yaml.safe_load_all(f) if d is not None]
        except yaml.YAMLError as e:
            problem(path, f"does not parse: {e}")
            continue
        if not loaded:
            problem(path, "holds no YAML document")
        for doc in loaded:
            if not isinstance(doc, dict):
                problem(path, f"a document is a {type(doc).__name__}, not a mapping")
                continue
            for key in ("apiVersion", "kind"):
                if not doc.get(key):
                    problem(path, f"a document has no {key}")
            if not (doc.get("metadata") or {}).get("name"):
                problem(path, f"the {doc.get('kind', '?')} has no metadata.name")
            docs.append((path, doc))
    return docs


def one(docs, kind, k8s_dir):
    """Returns (file, doc) of the only document of this kind, or (None, {}) after a problem."""
    found = [(p, d) for p, d in docs if d.get("kind") == kind]
    if len(found) != 1:
        problem(k8s_dir, f"expected one {kind}, found {len(found)}")
        return None, {}
    return found[0]


def pod_spec(doc):
    return (((doc.get("spec") or {}).get("template") or {}).get("spec")) or {}


def container_env(where, container, configmaps):
    """Returns {name: value} for a container's env, resolving ConfigMap references."""
    env = {}
    for ref in container.get("envFrom") or []:
        name = (ref.get("configMapRef") or {}).get("name")
        if name is None:
            continue
        if name not in configmaps:
            problem(where, f"envFrom names ConfigMap '{name}', which no manifest defines")
            continue
        env.update(configmaps[name])
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = str(var["value"])
            continue
        field = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field is not None:
            env[var["name"]] = f"<{field}>"  # known only in the running pod
            continue
        ref = (var.get("valueFrom") or {}).get("configMapKeyRef")
        if ref is None:
            continue
        data = configmaps.get(ref.get("name"))
        if data is None:
            problem(where, f"env {var['name']} names ConfigMap '{ref.get('name')}', "
                           "which no manifest defines")
        elif ref.get("key") not in data:
            problem(where, f"env {var['name']}: ConfigMap '{ref['name']}' "
                           f"has no key '{ref.get('key')}'")
        else:
            env[var["name"]] = data[ref["key"]]
    return env


def expand(where, args, env):
    """Kubernetes' $(VAR) expansion of container args; an unknown variable is a problem."""
    out = []
    for arg in args:
        def sub(m):
            if m.group(1) not in env:
                problem(where, f"argument '{arg}' uses $({m.group(1)}), "
                               "which the container does not define")
                return m.group(0)
            return env[m.group(1)]
        out.append(re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, str(arg)))
    return out


def flag(args, name):
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def check_tls(where, spec, container, args):
    """The three TLS flags are given and point into a mounted Secret that carries those files."""
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    secrets = set()
    for name in ("--tls-cert", "--tls-key", "--tls-ca"):
        path = flag(args, name)
        if path is None:
            problem(where, f"{container['name']}: {name} is missing "
                           "(a non-loopback deployment needs all three)")
            continue
        mount = [v for v, p in mounts.items() if os.path.dirname(path) == p.rstrip("/")]
        secret = (volumes.get(mount[0]) or {}).get("secret") if mount else None
        if secret is None:
            problem(where, f"{container['name']}: {name} {path} is not in a mounted Secret volume")
            continue
        secrets.add(secret.get("secretName"))
        items = [i["path"] for i in secret.get("items") or []]
        if items and os.path.basename(path) not in items:
            problem(where, f"{container['name']}: {name} {path}: "
                           f"Secret volume '{mount[0]}' does not carry it")
    return secrets


def main():
    k8s_dir = sys.argv[1]
    script_dir = sys.argv[2] if len(sys.argv) > 2 else None
    docs = load(k8s_dir)
    configmaps = {d["metadata"]["name"]: {k: str(v) for k, v in (d.get("data") or {}).items()}
                  for _, d in docs if d.get("kind") == "ConfigMap" and d.get("metadata")}
    svc_file, svc = one(docs, "Service", k8s_dir)
    sts_file, sts = one(docs, "StatefulSet", k8s_dir)
    job_file, job = one(docs, "Job", k8s_dir)
    if not (svc and sts and job):
        return

    # Headless Service <-> StatefulSet.
    svc_name, sts_name = svc["metadata"].get("name"), sts["metadata"].get("name")
    if (svc.get("spec") or {}).get("clusterIP") != "None":
        problem(svc_file, "the node Service is not headless (spec.clusterIP: None)")
    if sts["spec"].get("serviceName") != svc_name:
        problem(sts_file, f"serviceName '{sts['spec'].get('serviceName')}' "
                          f"is not the headless Service '{svc_name}'")
    labels = (sts["spec"].get("template", {}).get("metadata") or {}).get("labels") or {}
    match_labels = (sts["spec"].get("selector") or {}).get("matchLabels") or {}
    for what, selector in (("the Service's selector", svc["spec"].get("selector") or {}),
                           ("spec.selector.matchLabels", match_labels)):
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            problem(sts_file, f"the pod labels {labels} do not match {what} {selector}")
    replicas = int(sts["spec"].get("replicas", 1))

    # The node container.
    spec = pod_spec(sts)
    node = next((c for c in spec.get("containers") or [] if "node" in (c.get("args") or [])), None)
    if node is None:
        problem(sts_file, "no container runs `kvactor node`")
        return
    node_args = expand(sts_file, node.get("args") or [], container_env(sts_file, node, configmaps))
    listen = flag(node_args, "--listen") or ""
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        problem(sts_file, f"--listen '{listen}' is not HOST:PORT")
    port_names = {p.get("name"): str(p["containerPort"]) for p in node.get("ports") or []}
    if port not in port_names.values():
        problem(sts_file, f"--listen port {port} is not a containerPort "
                          f"({sorted(port_names.values())})")
    metrics_port = flag(node_args, "--metrics-port") or ""
    if metrics_port not in port_names.values():
        problem(sts_file, f"--metrics-port '{metrics_port}' is not a containerPort "
                          f"({sorted(port_names.values())})")
    for kind in ("readinessProbe", "livenessProbe"):
        http = (node.get(kind) or {}).get("httpGet") or {}
        probe = http.get("port")
        if http.get("path") != "/health" or port_names.get(probe, str(probe)) != metrics_port:
            problem(sts_file, f"the {kind} asks {http.get('path')} on port {probe}, not /health "
                              f"on the --metrics-port {metrics_port}")
    svc_ports = [str(port_names.get(p.get("targetPort"), p.get("targetPort", p.get("port"))))
                 for p in svc["spec"].get("ports") or []]
    if port not in svc_ports:
        problem(svc_file, f"no port targets the nodes' port {port} (targets: {svc_ports})")
    node_secrets = set()
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        node_secrets = check_tls(sts_file, spec, node, node_args)
    gpus = [g for g in (flag(node_args, "--gpus") or "").split(",") if g]
    limit = ((node.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
    if gpus and str(limit) != str(len(gpus)):
        problem(sts_file, f"--gpus lists {len(gpus)} GPU(s) "
                          f"but the pod's nvidia.com/gpu limit is {limit}")
    ranks_per_node = len(gpus) if gpus else int(flag(node_args, "--cpu-ranks") or 1)

    # The driver Job.
    jspec = pod_spec(job)
    driver = next((c for c in jspec.get("containers") or [] if "run" in (c.get("args") or [])),
                  None)
    if driver is None:
        problem(job_file, "no container runs `kvactor run`")
        return
    args = expand(job_file, driver.get("args") or [], container_env(job_file, driver, configmaps))
    nodes = [n for n in (flag(args, "--nodes") or "").split(",") if n]
    pod_name = re.compile(rf"^{re.escape(sts_name)}-(\d+)\.{re.escape(svc_name)}"
                          r"(\.[a-z0-9-]+(\.svc(\.cluster\.local)?)?)?$")
    seen = []
    for entry in nodes:
        name, _, nport = entry.rpartition(":")
        m = pod_name.match(name)
        if m is None or int(m.group(1)) >= replicas:
            problem(job_file, f"--nodes entry '{entry}' is not a pod of StatefulSet '{sts_name}' "
                              f"({sts_name}-0..{replicas - 1}.{svc_name})")
        else:
            seen.append(int(m.group(1)))
        if nport != port:
            problem(job_file, f"--nodes entry '{entry}': the nodes listen on port {port}")
    if sorted(seen) != list(range(replicas)) and len(seen) == len(nodes):
        problem(job_file, f"--nodes names pods {sorted(seen)}, "
                          f"but the StatefulSet runs {replicas} (each once)")
    tp = flag(args, "--tensor-parallel-size")
    if tp != str(replicas * ranks_per_node):
        problem(job_file, f"--tensor-parallel-size {tp} is not replicas x ranks per node = "
                          f"{replicas} x {ranks_per_node}")
    for name, allowed in (("--device", {"cpu", "cuda"}),):
        if flag(args, name) is not None and flag(args, name) not in allowed:
            problem(job_file, f"{name} '{flag(args, name)}' is not one of {sorted(allowed)}")
    driver_secrets = check_tls(job_file, jspec, driver, args)
    if node_secrets and driver_secrets and node_secrets != driver_secrets:
        problem(job_file, f"the driver's TLS Secret {driver_secrets} "
                          f"is not the nodes' {node_secrets}")

    # Scripts run by `bash -c`, for shellcheck.
    for path, doc in docs:
        for c in pod_spec(doc).get("initContainers", []) + pod_spec(doc).get("containers", []):
            if c.get("command", [])[-2:] == ["bash", "-c"] and c.get("args"):
                if script_dir:
                    out = os.path.join(script_dir, f"{os.path.basename(path)}.{c['name']}.sh")
                    with open(out, "w", encoding="utf-8") as f:
                        f.write("#!/usr/bin/env bash\n" + c["args"][0])

    # kustomization.yaml lists exactly the manifests.
    kust = [(p, d) for p, d in docs if d.get("kind") == "Kustomization"]
    if kust:
        listed = set(kust[0][1].get("resources") or [])
        present = {os.path.basename(p) for p, d in docs if d.get("kind") != "Kustomization"}
        for name in sorted(present - listed):
            problem(kust[0][0], f"does not list {name}")
        for name in sorted(listed - present):
            problem(kust[0][0], f"lists {name}, which does not exist")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    try:
        main()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        # A shape the checks did not expect (a missing section, a string for a list): still a
        # failure that names the directory.
        problem(sys.argv[1], f"unexpected manifest structure: {type(e).__name__}: {e}")
    for p in problems:
        print(f"FAIL: {p}")
    sys.exit(1 if problems else 0)
