#!/usr/bin/env bash
# Makes throw-away certificates for kvactor's mutual TLS (cluster mode): a test CA, a node and a
# driver certificate signed by it, and an unrelated "rogue" CA and certificate for negative tests
# (a peer presenting rogue.crt must be refused). Test use only: 2-day validity, unencrypted keys.
#
# Usage: make-test-certs.sh DIR
#   DIR gets ca.crt ca.key node.crt node.key driver.crt driver.key
#            rogue-ca.crt rogue-ca.key rogue.crt rogue.key
#   KVACTOR_CERT_NAMES: extra subjectAltNames for the node and driver certificates, separated by
#   spaces or commas (IP addresses become IP: entries, everything else DNS:), on top of
#   localhost and 127.0.0.1.
#
# Idempotent: a complete set in DIR that verifies, carries every requested name and is valid for
# at least another hour is kept; anything else is replaced by a fresh, consistent set (never a
# mix of old and new, which would not verify).
set -euo pipefail

usage() {
  echo "usage: $(basename "$0") DIR   (extra names for the certificates: KVACTOR_CERT_NAMES)" >&2
  exit 2
}
[[ $# -eq 1 && -n $1 ]] || usage
dir=$1
command -v openssl >/dev/null || { echo "make-test-certs: openssl is not installed" >&2; exit 1; }

files=(ca.crt ca.key node.crt node.key driver.crt driver.key
       rogue-ca.crt rogue-ca.key rogue.crt rogue.key)
days=2

# subjectAltName value: localhost, 127.0.0.1 and every name in KVACTOR_CERT_NAMES.
san="DNS:localhost,IP:127.0.0.1"
names=${KVACTOR_CERT_NAMES:-}
read -r -a extra_names <<<"${names//,/ }"
for name in "${extra_names[@]}"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then
    san+=",IP:$name"
  else
    san+=",DNS:$name"
  fi
done

# The set in $dir is reusable when it is complete, chains correctly, outlives the next hour and
# names everything asked for.
set_is_current() {
  local f entry sans
  for f in "${files[@]}"; do [[ -s $dir/$f ]] || return 1; done
  openssl verify -CAfile "$dir/ca.crt" "$dir/node.crt" "$dir/driver.crt" >/dev/null 2>&1 || return 1
  openssl verify -CAfile "$dir/rogue-ca.crt" "$dir/rogue.crt" >/dev/null 2>&1 || return 1
  for f in ca node driver rogue-ca rogue; do
    openssl x509 -in "$dir/$f.crt" -noout -checkend 3600 >/dev/null || return 1
  done
  # "X509v3 Subject Alternative Name: DNS:a, IP Address:b" -> "DNS:a,IPAddress:b"
  sans=$(openssl x509 -in "$dir/node.crt" -noout -ext subjectAltName | tr -d ' \n')
  sans=${sans#*Name:}
  IFS=, read -r -a wanted <<<"$san"
  for entry in "${wanted[@]}"; do
    entry=",${entry/#IP:/IPAddress:},"
    [[ ",$sans," == *"$entry"* ]] || return 1 # quoted: a wildcard name matches only itself
  done
}

if set_is_current; then
  echo "make-test-certs: $dir already holds a current set; nothing to do"
  exit 0
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.make-test-certs.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 077 # private keys readable by the owner only

# new_ca NAME CN: a self-signed CA, NAME.crt and NAME.key.
new_ca() {
  openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days "$days" \
    -subj "/CN=$2" -keyout "$work/$1.key" -out "$work/$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# new_leaf NAME CN CA: NAME.crt and NAME.key signed by CA. Every leaf is good for both TLS roles:
# a node accepts connections, and CAF may also connect out from it.
new_leaf() {
  cat >"$work/$1.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=$san
EXT
  openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "/CN=$2" \
    -keyout "$work/$1.key" -out "$work/$1.csr" 2>/dev/null
  openssl x509 -req -sha256 -days "$days" -in "$work/$1.csr" \
    -CA "$work/$3.crt" -CAkey "$work/$3.key" -set_serial "0x$(openssl rand -hex 16)" \
    -extfile "$work/$1.ext" -out "$work/$1.crt" 2>/dev/null
}

new_ca ca "kvactor test CA"
new_leaf node kvactor-node ca
new_leaf driver kvactor-driver ca
# Same names as a real node, wrong issuer: only the CA check can tell them apart.
new_ca rogue-ca "kvactor rogue CA"
new_leaf rogue kvactor-node rogue-ca

for f in "${files[@]}"; do mv -f "$work/$f" "$dir/$f"; done
chmod 644 "$dir"/*.crt
echo "make-test-certs: wrote ${files[*]} to $dir (valid $days days; names: $san)"
