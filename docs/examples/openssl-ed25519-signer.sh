#!/bin/sh
# An external signer for npub's --signer-cmd, around OpenSSL: the ed25519 key stays in a PEM file
# (or, with an engine or provider, in a token) that npub never reads.
#
#   npub release sign model.npub --model person-detect --version 1.2.0 -o model.npub.release \
#       --signer-cmd "sh docs/examples/openssl-ed25519-signer.sh release.pem" --signer-pub release.pub
#
# The protocol: npub writes the exact message to sign on stdin (a domain prefix and the record's
# signed bytes, a few hundred bytes) and reads the 64-byte signature on stdout. ed25519 signs the
# message itself, not a digest of it, hence -rawin. OpenSSL 3.0's pkeyutl cannot read a -rawin
# message from a pipe ("unable to determine file size for oneshot operation"), so it goes through
# a temporary file first.
#
# Making the key and the npub public key file (`npub-ed25519-public-v1 <hex>`) that devices,
# `npub release verify --pubkey` and `npub keyring release-add` take:
#
#   openssl genpkey -algorithm ed25519 -out release.pem        # keep it where releases are signed
#   printf 'npub-ed25519-public-v1 %s\n' \
#       "$(openssl pkey -in release.pem -pubout -outform DER | tail -c 32 | od -An -tx1 | tr -d ' \n')" \
#       > release.pub
set -eu
key=${1:?usage: openssl-ed25519-signer.sh KEY.pem}
message=$(mktemp)
trap 'rm -f "$message"' EXIT
cat > "$message"
openssl pkeyutl -sign -rawin -inkey "$key" -in "$message"
