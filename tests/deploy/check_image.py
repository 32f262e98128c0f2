#!/usr/bin/env python3
"""Checks that the Dockerfile and the deployment recipes agree on names, ports and paths.

Usage: check_image.py REPO_ROOT

From the Dockerfile's runtime (last) stage: the ENTRYPOINT binary, the USER id, the EXPOSEd ports
and KVACTOR_MODELS_PATH. Then:
  - the Dockerfile has a `build` stage, installs the Debian package in the last one, and its
    default CUDA_ARCHITECTURES is the one CMakeLists.txt defaults to;
  - KVACTOR_MODELS_PATH is where the package puts the models (its prefix + share/kvactor/models);
  - deploy/k8s: every container runs the image `kvactor` (kustomization.yaml's name), with the
    ENTRYPOINT binary as its command when it runs kvactor, as the Dockerfile's USER, and its
    ports are exposed by the image (node: cluster port and metrics port);
  - deploy/systemd: ExecStart runs the same binary; node.env's listen and metrics ports are the
    exposed ones;
  - deploy/slurm: the default binary and port are the same.
Prints one line per problem, naming the file, and exits 1 if there is any.
"""
import json
import os
import re
import sys

import yaml

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def dockerfile_facts(path):
    """Instructions of the last stage, with line continuations joined."""
    text = re.sub(r"\\\n", " ", read(path))
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    stages = [i for i, l in enumerate(lines) if l.upper().startswith("FROM ")]
    if not stages:
        problem(path, "has no FROM")
        return None
    if not any(re.search(r"\bAS\s+build\b", lines[i], re.I) for i in stages):
        problem(path, "has no `build` stage")
    last = lines[stages[-1]:]
    facts = {"args": {}, "env": {}, "expose": set(), "user": None, "entrypoint": None}
    for l in lines[: stages[0]]:
        m = re.match(r"ARG\s+(\w+)=(\S+)", l)
        if m:
            facts["args"][m.group(1)] = m.group(2)
    for l in last:
        word, _, rest = l.partition(" ")
        word = word.upper()
        if word == "ENV":
            for k, v in re.findall(r"(\w+)=(\S+)", rest):
                facts["env"][k] = v
        elif word == "EXPOSE":
            facts["expose"] |= {int(p.split("/")[0]) for p in rest.split()}
        elif word == "USER":
            facts["user"] = rest.split(":")[0].strip()
        elif word == "ENTRYPOINT":
            try:
                facts["entrypoint"] = json.loads(rest)[0]
            except (ValueError, IndexError):
                problem(path, f"ENTRYPOINT is not an exec-form list: {rest}")
    facts["installs_deb"] = any("apt-get install" in l and ".deb" in l for l in last)
    return facts


def check_dockerfile(root, f):
    path = os.path.join(root, "Dockerfile")
    if not f["installs_deb"]:
        problem(path, "the runtime stage does not install the Debian package (apt-get install ./...deb)")
    for key in ("entrypoint", "user"):
        if not f[key]:
            problem(path, f"the runtime stage has no {key.upper()}")
    if not f["expose"]:
        problem(path, "the runtime stage EXPOSEs no port")
    cmake = read(os.path.join(root, "CMakeLists.txt"))
    m = re.search(r"set\(CMAKE_CUDA_ARCHITECTURES\s+(\S+)", cmake)
    if m and f["args"].get("CUDA_ARCHITECTURES") != m.group(1):
        problem(path, f"CUDA_ARCHITECTURES={f['args'].get('CUDA_ARCHITECTURES')} but "
                      f"CMakeLists.txt defaults to {m.group(1)}")
    package = read(os.path.join(root, "cmake", "kvactor_package.cmake"))
    m = re.search(r"CPACK_PACKAGING_INSTALL_PREFIX\s+(\S+)\)", package)
    prefix = m.group(1) if m else "?"
    if f["entrypoint"] and f["entrypoint"] != f"{prefix}/bin/kvactor":
        problem(path, f"ENTRYPOINT {f['entrypoint']} is not the package's {prefix}/bin/kvactor")
    models = f["env"].get("KVACTOR_MODELS_PATH")
    if models != f"{prefix}/share/kvactor/models":
        problem(path, f"KVACTOR_MODELS_PATH={models} is not the package's "
                      f"{prefix}/share/kvactor/models")


def containers(doc):
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {}) or spec.get("jobTemplate", {}).get(
        "spec", {}).get("template", {}).get("spec", {})
    return pod, (pod.get("initContainers") or []) + (pod.get("containers") or [])


def check_k8s(root, f):
    k8s = os.path.join(root, "deploy", "k8s")
    kustom = yaml.safe_load(read(os.path.join(k8s, "kustomization.yaml")))
    names = {i.get("name") for i in kustom.get("images", [])}
    if names != {"kvactor"}:
        problem(f"{k8s}/kustomization.yaml", f"images name {sorted(names)}, expected ['kvactor']")
    for name in sorted(os.listdir(k8s)):
        if not name.endswith(".yaml") or name == "kustomization.yaml":
            continue
        path = os.path.join(k8s, name)
        for doc in yaml.safe_load_all(read(path)):
            if not isinstance(doc, dict):
                continue
            pod, cs = containers(doc)
            user = str((pod.get("securityContext") or {}).get("runAsUser", ""))
            if cs and user != f["user"]:
                problem(path, f"runAsUser {user or 'unset'} is not the image's USER {f['user']}")
            for c in cs:
                image = str(c.get("image", ""))
                if image.split(":")[0] != "kvactor":
                    problem(path, f"container {c.get('name')} runs image {image}, not kvactor")
                cmd = (c.get("command") or [None])[0]
                if cmd and cmd.endswith("kvactor") and cmd != f["entrypoint"]:
                    problem(path, f"container {c.get('name')} runs {cmd}, the image's binary is "
                                  f"{f['entrypoint']}")
                for p in c.get("ports") or []:
                    if p.get("containerPort") not in f["expose"]:
                        problem(path, f"container {c.get('name')} port {p.get('containerPort')} "
                                      f"is not EXPOSEd by the image ({sorted(f['expose'])})")


def check_hosts(root, f):
    unit = os.path.join(root, "deploy", "systemd", "kvactor-node.service")
    m = re.search(r"^ExecStart=(\S+)", read(unit), re.M)
    if not m or m.group(1) != f["entrypoint"]:
        problem(unit, f"ExecStart runs {m.group(1) if m else 'nothing'}, the image and the "
                      f"package install {f['entrypoint']}")
    env_path = os.path.join(root, "deploy", "systemd", "node.env.example")
    env = dict(re.findall(r"^(\w+)=(.*)$", read(env_path), re.M))
    listen_port = env.get("KVACTOR_LISTEN", "").rpartition(":")[2]
    for key, port in (("KVACTOR_LISTEN", listen_port), ("KVACTOR_METRICS_PORT",
                                                        env.get("KVACTOR_METRICS_PORT", ""))):
        if not port.isdigit() or int(port) not in f["expose"]:
            problem(env_path, f"{key} uses port {port or 'none'}, not one the image EXPOSEs "
                              f"({sorted(f['expose'])})")
    sbatch = os.path.join(root, "deploy", "slurm", "kvactor.sbatch")
    text = read(sbatch)
    m = re.search(r"^bin=\$\{KVACTOR_BIN:-(\S+)\}", text, re.M)
    if not m or m.group(1) != f["entrypoint"]:
        problem(sbatch, f"the default binary is {m.group(1) if m else 'unset'}, the image and the "
                        f"package install {f['entrypoint']}")
    m = re.search(r"^port=\$\{KVACTOR_PORT:-(\d+)\}", text, re.M)
    if not m or int(m.group(1)) not in f["expose"]:
        problem(sbatch, f"the default port {m.group(1) if m else 'unset'} is not EXPOSEd by the "
                        f"image ({sorted(f['expose'])})")


def main():
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    root = sys.argv[1]
    path = os.path.join(root, "Dockerfile")
    if not os.path.isfile(path):
        problem(path, "missing")
    else:
        facts = dockerfile_facts(path)
        if facts:
            check_dockerfile(root, facts)
            check_k8s(root, facts)
            check_hosts(root, facts)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
