#!/usr/bin/env bash
# Checks the cluster-mode deployment recipes without a cluster, so that they cannot rot unseen:
#   (a) deploy/k8s: every manifest parses and they agree with each other (check_k8s.py);
#   (b) shellcheck on the Slurm script, the TLS script, the scripts inside the manifests and this
#       file;
#   (c) the systemd unit passes `systemd-analyze verify` (or, without it, has its sections);
#   (d) deploy/tls/make-test-certs.sh makes certificates that verify against their CA, a rogue
#       one that does not, and keeps a current set when run again.
# A missing tool (shellcheck, systemd-analyze, python3 with PyYAML) skips its part with a
# message; any failure is reported with its file, and the script exits 1 after all checks ran.
# Usage: recipes_check.sh REPO_ROOT
set -euo pipefail

if [[ $# -ne 1 || ! -d $1/deploy ]]; then
  echo "usage: $(basename "$0") REPO_ROOT (the directory holding deploy/)" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
skip() { echo "SKIP: $*"; }
ok() { echo "ok:   $*"; }

# (a) Kubernetes manifests.
k8s=$root/deploy/k8s
mkdir -p "$work/k8s-scripts"
if ! command -v python3 >/dev/null; then
  skip "deploy/k8s: python3 is not installed"
elif ! python3 -c "import yaml" 2>/dev/null; then
  skip "deploy/k8s: python3 has no yaml module (Debian: apt-get install python3-yaml)"
elif out=$(python3 "$here/check_k8s.py" "$k8s" "$work/k8s-scripts" 2>&1); then
  ok "deploy/k8s: $(find "$k8s" -name '*.yaml' | wc -l) manifests parse and agree"
else
  fail "deploy/k8s:"$'\n'"$out"
fi
# Offline render, when kubectl is at hand: kustomize accepts the directory.
if command -v kubectl >/dev/null && [[ -f $k8s/kustomization.yaml ]]; then
  if out=$(kubectl kustomize "$k8s" 2>&1 >/dev/null); then
    ok "deploy/k8s: kubectl kustomize renders"
  else
    fail "deploy/k8s/kustomization.yaml: kubectl kustomize: $out"
  fi
fi

# (b) Shell scripts.
scripts=("$root"/deploy/slurm/*.sbatch "$root"/deploy/tls/*.sh "$here/recipes_check.sh")
for f in "$work"/k8s-scripts/*.sh; do [[ -e $f ]] && scripts+=("$f"); done
if ! command -v shellcheck >/dev/null; then
  skip "shellcheck is not installed (Debian: apt-get install shellcheck)"
else
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
fi

# (c) systemd unit.
unit=$root/deploy/systemd/kvactor-node.service
if [[ ! -f $unit ]]; then
  fail "deploy/systemd/kvactor-node.service: missing"
else
  grep -q '^ExecStart=/usr/local/bin/kvactor node ' "$unit" ||
    fail "deploy/systemd/kvactor-node.service: ExecStart does not run /usr/local/bin/kvactor node"
  grep -q '^EnvironmentFile=/etc/kvactor/node.env$' "$unit" ||
    fail "deploy/systemd/kvactor-node.service: no EnvironmentFile=/etc/kvactor/node.env"
  # Every KVACTOR_ variable the unit's settings use is set in the example environment file.
  mapfile -t unit_vars < <(grep -v '^#' "$unit" | grep -oE 'KVACTOR_[A-Z_]+' | sort -u)
  for var in "${unit_vars[@]}"; do
    grep -q "^$var=" "$root/deploy/systemd/node.env.example" ||
      fail "deploy/systemd/node.env.example: does not set $var, which the unit uses"
  done
  if command -v systemd-analyze >/dev/null; then
    # verify insists that the ExecStart binary exists; kvactor is not installed here, so check a
    # copy whose ExecStart runs /bin/true instead (everything else unchanged). Verify reports
    # unknown keys and bad values as warnings with status 0, so any output is a failure.
    mkdir -p "$work/unit"
    sed 's#^ExecStart=/usr/local/bin/kvactor #ExecStart=/bin/true #' "$unit" \
      >"$work/unit/kvactor-node.service"
    out=$(systemd-analyze verify "$work/unit/kvactor-node.service" 2>&1) && rc=0 || rc=$?
    if [[ $rc -ne 0 || -n $out ]]; then
      fail "deploy/systemd/kvactor-node.service: systemd-analyze verify (status $rc):"$'\n'"$out"
    else
      ok "deploy/systemd/kvactor-node.service: systemd-analyze verify"
    fi
  else
    skip "systemd-analyze is not installed; checking the unit's sections only"
    for section in '[Unit]' '[Service]' '[Install]'; do
      grep -qxF "$section" "$unit" ||
        fail "deploy/systemd/kvactor-node.service: no $section section"
    done
  fi
fi

# (d) Test certificates.
certs_script=$root/deploy/tls/make-test-certs.sh
if ! command -v openssl >/dev/null; then
  skip "deploy/tls/make-test-certs.sh: openssl is not installed"
elif ! out=$(KVACTOR_CERT_NAMES="node-a.example 10.1.2.3" \
  bash "$certs_script" "$work/certs" 2>&1); then
  fail "deploy/tls/make-test-certs.sh: failed:"$'\n'"$out"
else
  certs_ok=1
  c=$work/certs
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
  ((certs_ok)) &&
    ok "deploy/tls/make-test-certs.sh: node and driver verify, rogue does not, rerun keeps the set"
fi

if ((failures > 0)); then
  echo "recipes_check: $failures failure(s)"
  exit 1
fi
echo "recipes_check: all deployment recipe checks passed"
