#!/usr/bin/env bash
# Checks the cluster-mode deployment recipes without a cluster, so that they cannot rot unseen.
# Five parts, each with the tool it needs:
#   k8s      deploy/k8s: every manifest parses and they agree with each other (check_k8s.py;
#            python3 with PyYAML). `kubectl kustomize` also renders them when kubectl is at hand:
#            an extra, named in the output either way, that the part does not depend on.
#   shell    shellcheck on the Slurm script, the TLS script, the scripts inside the manifests
#            (extracted by check_k8s.py, so python3 with PyYAML too) and this file.
#   systemd  the unit runs `kvactor node` with its environment file, whose example sets every
#            variable the unit uses, and passes `systemd-analyze verify` (without the tool only
#            its sections are checked, and verify counts as skipped).
#   certs    deploy/tls/make-test-certs.sh makes certificates that verify against their CA, a
#            rogue one that does not, and keeps a current set when run again (openssl).
#   image    the Dockerfile and the recipes agree on the image name, binary, user, ports and
#            models path (check_image.py; python3 with PyYAML). `docker build` also runs when
#            docker is at hand and KVACTOR_DOCKER_BUILD=1: an extra, named in the output.
# Outcome: any failure exits 1 (after every check ran). Otherwise, when a missing tool left a
# check undone, the summary line names each part as passed, partly skipped or skipped, the lines
# after it name every check not done, and the script exits 77, which ctest reports as skipped;
# otherwise it exits 0. Skipped rather than passed-with-a-note because ctest's summary is what
# gets read: a pass there would claim, say, that the recipes pass shellcheck on a machine that
# has no shellcheck. CMake runs one ctest test per part, so a missing tool skips only its part
# and the parts that did run still show as passed.
# Usage: recipes_check.sh REPO_ROOT [PART...]   (PART: k8s shell systemd certs image; default: all)
set -euo pipefail

all_parts=(k8s shell systemd certs image)
if [[ $# -lt 1 || ! -d $1/deploy ]]; then
  echo "usage: $(basename "$0") REPO_ROOT [PART...] (PART: ${all_parts[*]})" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
shift
parts=("$@")
((${#parts[@]} > 0)) || parts=("${all_parts[@]}")
for part in "${parts[@]}"; do
  [[ " ${all_parts[*]} " == *" $part "* ]] || {
    echo "$(basename "$0"): unknown part '$part' (expected one of: ${all_parts[*]})" >&2
    exit 2
  }
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
passes=0
skipped=()
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
skip() {
  echo "SKIP: $*"
  skipped+=("$*")
}
ok() {
  echo "ok:   $*"
  passes=$((passes + 1))
}

k8s=$root/deploy/k8s
# Why python3 with PyYAML cannot run, or nothing when it can.
no_yaml() {
  if ! command -v python3 >/dev/null; then
    echo "python3 is not installed"
  elif ! python3 -c "import yaml" 2>/dev/null; then
    echo "python3 has no yaml module (Debian: apt-get install python3-yaml)"
  fi
}

check_k8s() {
  local why out
  why=$(no_yaml)
  if [[ -n $why ]]; then
    skip "deploy/k8s: $why"
  elif out=$(python3 "$here/check_k8s.py" "$k8s" 2>&1); then
    ok "deploy/k8s: $(find "$k8s" -name '*.yaml' | wc -l) manifests parse and agree"
  else
    fail "deploy/k8s:"$'\n'"$out"
  fi
  # Offline render, an extra: kustomize accepts the directory.
  if ! command -v kubectl >/dev/null; then
    echo "note: deploy/k8s: kubectl is not installed, so \`kubectl kustomize\` did not render (an extra)"
  elif [[ -f $k8s/kustomization.yaml ]]; then
    if out=$(kubectl kustomize "$k8s" 2>&1 >/dev/null); then
      ok "deploy/k8s: kubectl kustomize renders"
    else
      fail "deploy/k8s/kustomization.yaml: kubectl kustomize: $out"
    fi
  fi
}

check_shell() {
  local scripts=("$root"/deploy/slurm/*.sbatch "$root"/deploy/tls/*.sh "$root"/deploy/docker/*.sh
    "$here/recipes_check.sh")
  local why f name out
  why=$(no_yaml)
  if ! command -v shellcheck >/dev/null; then
    skip "shell scripts: shellcheck is not installed (Debian: apt-get install shellcheck)"
    return
  fi
  if [[ -n $why ]]; then
    skip "deploy/k8s embedded bash -c scripts: not extracted, $why"
  else
    # The manifests' own problems are the k8s part's to report; here only their scripts matter.
    mkdir -p "$work/k8s-scripts"
    python3 "$here/check_k8s.py" "$k8s" "$work/k8s-scripts" >/dev/null 2>&1 || true
    local extracted=0
    for f in "$work"/k8s-scripts/*.sh; do
      [[ -e $f ]] || continue
      scripts+=("$f")
      extracted=$((extracted + 1))
    done
    ((extracted > 0)) ||
      skip "deploy/k8s embedded bash -c scripts: none extracted (check_k8s.py failed: see k8s)"
  fi
  for f in "${scripts[@]}"; do
    name=${f#"$root"/}
    [[ $f == "$work"/* ]] && name="deploy/k8s/${f##*/} (embedded bash -c script)"
    if [[ ! -f $f ]]; then
      fail "$name: missing"
    elif out=$(shellcheck --shell=bash "$f" 2>&1); then
      ok "$name: shellcheck"
    else
      fail "$name: shellcheck:"$'\n'"$out"
    fi
  done
}

check_systemd() {
  local unit=$root/deploy/systemd/kvactor-node.service
  local unit_vars var out rc section before=$failures
  if [[ ! -f $unit ]]; then
    fail "deploy/systemd/kvactor-node.service: missing"
    return
  fi
  grep -q '^ExecStart=/usr/bin/kvactor node ' "$unit" ||
    fail "deploy/systemd/kvactor-node.service: ExecStart does not run /usr/bin/kvactor node"
  grep -q '^EnvironmentFile=/etc/kvactor/node.env$' "$unit" ||
    fail "deploy/systemd/kvactor-node.service: no EnvironmentFile=/etc/kvactor/node.env"
  # Every KVACTOR_ variable the unit's settings use is set in the example environment file.
  mapfile -t unit_vars < <(grep -v '^#' "$unit" | grep -oE 'KVACTOR_[A-Z_]+' | sort -u)
  for var in "${unit_vars[@]}"; do
    grep -q "^$var=" "$root/deploy/systemd/node.env.example" ||
      fail "deploy/systemd/node.env.example: does not set $var, which the unit uses"
  done
  if ((failures == before)); then
    ok "deploy/systemd/kvactor-node.service: runs kvactor node with node.env, whose example sets its ${#unit_vars[@]} variables"
  fi
  if command -v systemd-analyze >/dev/null; then
    # verify insists that the ExecStart binary exists; kvactor is not installed here, so check a
    # copy whose ExecStart runs /bin/true instead (everything else unchanged). Verify reports
    # unknown keys and bad values as warnings with status 0, so any output is a failure.
    mkdir -p "$work/unit"
    sed 's#^ExecStart=/usr/bin/kvactor #ExecStart=/bin/true #' "$unit" \
      >"$work/unit/kvactor-node.service"
    out=$(systemd-analyze verify "$work/unit/kvactor-node.service" 2>&1) && rc=0 || rc=$?
    if [[ $rc -ne 0 || -n $out ]]; then
      fail "deploy/systemd/kvactor-node.service: systemd-analyze verify (status $rc):"$'\n'"$out"
    else
      ok "deploy/systemd/kvactor-node.service: systemd-analyze verify"
    fi
  else
    skip "deploy/systemd/kvactor-node.service: systemd-analyze is not installed, so not verified (its sections are checked)"
    before=$failures
    for section in '[Unit]' '[Service]' '[Install]'; do
      grep -qxF "$section" "$unit" ||
        fail "deploy/systemd/kvactor-node.service: no $section section"
    done
    if ((failures == before)); then
      ok "deploy/systemd/kvactor-node.service: has its [Unit], [Service] and [Install] sections"
    fi
  fi
}

check_certs() {
  local certs_script=$root/deploy/tls/make-test-certs.sh
  local c=$work/certs certs_ok=1 out sans name key before
  if ! command -v openssl >/dev/null; then
    skip "deploy/tls/make-test-certs.sh: openssl is not installed"
    return
  fi
  if ! out=$(KVACTOR_CERT_NAMES="node-a.example 10.1.2.3" bash "$certs_script" "$c" 2>&1); then
    fail "deploy/tls/make-test-certs.sh: failed:"$'\n'"$out"
    return
  fi
  if ! out=$(openssl verify -CAfile "$c/ca.crt" "$c/node.crt" "$c/driver.crt" 2>&1); then
    fail "deploy/tls/make-test-certs.sh: node.crt/driver.crt do not verify against ca.crt: $out"
    certs_ok=0
  fi
  if openssl verify -CAfile "$c/ca.crt" "$c/rogue.crt" >/dev/null 2>&1; then
    fail "deploy/tls/make-test-certs.sh: rogue.crt verifies against ca.crt (it must not)"
    certs_ok=0
  fi
  sans=$(openssl x509 -in "$c/node.crt" -noout -ext subjectAltName 2>&1)
  for name in DNS:localhost "IP Address:127.0.0.1" DNS:node-a.example "IP Address:10.1.2.3"; do
    if [[ $sans != *"$name"* ]]; then
      fail "deploy/tls/make-test-certs.sh: node.crt lacks subjectAltName $name ($sans)"
      certs_ok=0
    fi
  done
  for key in ca node driver rogue; do
    # Keys must not be readable by others: stat prints the mode in octal.
    [[ $(stat -c %a "$c/$key.key") == 600 ]] || {
      fail "deploy/tls/make-test-certs.sh: $key.key has mode $(stat -c %a "$c/$key.key"), not 600"
      certs_ok=0
    }
  done
  # Idempotent: a second run keeps the set (same CA), it does not mix old and new.
  before=$(openssl x509 -in "$c/ca.crt" -noout -fingerprint -sha256)
  KVACTOR_CERT_NAMES="node-a.example,10.1.2.3" bash "$certs_script" "$c" >/dev/null 2>&1 ||
    { fail "deploy/tls/make-test-certs.sh: a second run failed"; certs_ok=0; }
  [[ $(openssl x509 -in "$c/ca.crt" -noout -fingerprint -sha256) == "$before" ]] ||
    { fail "deploy/tls/make-test-certs.sh: a second run replaced a current set"; certs_ok=0; }
  if bash "$certs_script" >/dev/null 2>&1; then
    fail "deploy/tls/make-test-certs.sh: runs without its DIR argument (expected a usage error)"
    certs_ok=0
  fi
  if ((certs_ok)); then
    ok "deploy/tls/make-test-certs.sh: node and driver verify, rogue does not, rerun keeps the set"
  fi
}

check_image() {
  local why out
  why=$(no_yaml)
  if [[ -n $why ]]; then
    skip "Dockerfile: $why"
  elif out=$(python3 "$here/check_image.py" "$root" 2>&1); then
    ok "Dockerfile: the recipes use its image name, binary, user, ports and models path"
  else
    fail "Dockerfile:"$'\n'"$out"
  fi
  if ! command -v docker >/dev/null; then
    echo "note: Dockerfile: docker is not installed, so the image was not built (an extra)"
  elif [[ ${KVACTOR_DOCKER_BUILD:-0} != 1 ]]; then
    echo "note: Dockerfile: set KVACTOR_DOCKER_BUILD=1 to build the image too (an extra)"
  elif out=$(docker build -q -t kvactor:check "$root" 2>&1); then
    ok "Dockerfile: docker build"
  else
    fail "Dockerfile: docker build:"$'\n'"$out"
  fi
}

# Run the parts; each one's outcome goes into the summary line.
outcomes=()
for part in "${parts[@]}"; do
  failed_before=$failures passed_before=$passes skipped_before=${#skipped[@]}
  "check_$part"
  if ((failures > failed_before)); then
    outcomes+=("$part FAILED ($((failures - failed_before)))")
  elif ((${#skipped[@]} > skipped_before && passes > passed_before)); then
    outcomes+=("$part partly skipped")
  elif ((${#skipped[@]} > skipped_before)); then
    outcomes+=("$part skipped")
  else
    outcomes+=("$part passed")
  fi
done
summary=$(IFS=,; echo "${outcomes[*]}")
summary=${summary//,/, }
if ((failures > 0)); then
  echo "recipes_check: $failures failure(s): $summary"
  exit 1
fi
if ((${#skipped[@]} > 0)); then
  echo "recipes_check: SKIPPED (a missing tool left checks undone): $summary"
  for s in "${skipped[@]}"; do echo "  not checked: $s"; done
  exit 77
fi
echo "recipes_check: all checks passed: $summary"
