#!/usr/bin/env bash
# A new user's path from `npub keygen` to a released, deployed and rolled-back model, against a
# running npub-server (docs/keys.md, "From key creation to a released, deployed, rolled-back
# model"; docs/release.md). Every step is a command a person would type; the script stops at the
# first one that does not answer as the docs say.
#
#   NPUB_URL=http://127.0.0.1:8080 NPUB_TOKEN=npub_op_… \
#       sh docs/examples/release-walkthrough.sh MODEL_A_vela.tflite MODEL_B_vela.tflite
#
# Two Vela outputs compiled for ethos-u55-256 (versions 1.0.0 and 1.1.0). Needs `npub` (or
# NPUB=/path/to/npub), curl and jq; works in a fresh temporary directory. The server must be new
# enough to have a keyring sequence of its own only (the release records take the next numbers).
# cli/tests/release_walkthrough.rs runs it against a real server, so it cannot rot.
set -eu

: "${NPUB_URL:?the server, e.g. http://127.0.0.1:8080}"
: "${NPUB_TOKEN:?an admin token}"
NPUB=${NPUB:-npub}
TFLITE_1=$(realpath "$1")
TFLITE_2=$(realpath "$2")
MODEL=${MODEL:-person-detect}
GROUP=${GROUP:-lab}
WORK=$(mktemp -d)
cd "$WORK"

api() { # METHOD PATH [curl args…]: the body on stdout; fails on any status but 2xx
    method=$1 path=$2
    shift 2
    curl -sS --fail-with-body -X "$method" -H "Authorization: Bearer $NPUB_TOKEN" "$@" "$NPUB_URL$path"
}
status() { # METHOD PATH [curl args…]: the HTTP status only (the body goes to body.json)
    method=$1 path=$2
    shift 2
    curl -sS -o body.json -w '%{http_code}' -X "$method" -H "Authorization: Bearer $NPUB_TOKEN" "$@" "$NPUB_URL$path"
}
say() { printf '\n== %s\n' "$*"; }

say "1. The release root, once, offline (release-root.key.pub goes into device firmware)"
"$NPUB" keygen -o release-root.key

say "2. One release key per person who releases"
"$NPUB" keygen -o alice.key
"$NPUB" keygen -o bob.key

say "3. Trust them on the devices: root-signed records, uploaded in the keyring sequence"
seq=$(api GET /api/v1/keys | jq '[.keyring_updates[].sequence] | max // 0')
"$NPUB" keyring release-add alice.key.pub --seq $((seq + 1)) --key release-root.key -o 1.npk
"$NPUB" keyring release-add bob.key.pub --seq $((seq + 2)) --key release-root.key -o 2.npk
"$NPUB" keyring release-policy --model "$MODEL" --threshold 2 \
    --release-key alice.key.pub --release-key bob.key.pub \
    --seq $((seq + 3)) --key release-root.key -o 3.npk
"$NPUB" keyring show 1.npk 2.npk 3.npk --root release-root.key.pub
for n in 1 2 3; do
    api POST /api/v1/keys/updates --data-binary @$n.npk -H 'content-type: application/octet-stream' | jq -c '{sequence, action, adds, policy}'
done

say "4. Release 1.0.0: pack it and its self-test, Alice and Bob sign into one file, check it"
"$NPUB" pack "$TFLITE_1" -o "$MODEL-1.0.0.npub"
# The golden vector the device's self-test runs; the server computes the same record at upload
# and signs its SHA-256 into the version-2 manifests, so the release names it too.
"$NPUB" golden "$MODEL-1.0.0.npub" -o "$MODEL-1.0.0.selftest"
for who in alice bob; do
    "$NPUB" release sign "$MODEL-1.0.0.npub" --model "$MODEL" --version 1.0.0 \
        --selftest "$MODEL-1.0.0.selftest" --key $who.key -o "$MODEL-1.0.0.npub.release"
done
"$NPUB" release verify "$MODEL-1.0.0.npub" --release "$MODEL-1.0.0.npub.release" \
    --selftest "$MODEL-1.0.0.selftest" \
    --pubkey alice.key.pub --pubkey bob.key.pub --threshold 2 --model "$MODEL" --version 1.0.0

say "5. Upload the pack, then its release signatures; require releases for the model"
api POST /api/v1/models -H 'content-type: application/json' -d "{\"name\": \"$MODEL\"}" | jq -c '{name}'
api POST "/api/v1/models/$MODEL/versions/1.0.0" \
    -F "pack=@$MODEL-1.0.0.npub" -F "io=@$MODEL-1.0.0.io.json" | jq -c '{version, sha256}'
api POST "/api/v1/models/$MODEL/versions/1.0.0/release-signatures" \
    --data-binary "@$MODEL-1.0.0.npub.release" -H 'content-type: application/octet-stream' \
    | jq -c '{signatures: [.signatures[].key_id], threshold, meets_rule}'
api PATCH "/api/v1/models/$MODEL" -H 'content-type: application/json' \
    -d '{"release_required": true}' | jq -c '{name, release_required}'

say "6. Deploy 1.0.0 to a group (one device provisioned for it here)"
device=$(api POST /api/v1/devices -H 'content-type: application/json' \
    -d "{\"devices\": [{\"id\": \"$GROUP-1\", \"accelerator\": \"ethos-u55-256\", \"group\": \"$GROUP\"}]}")
device_token=$(printf '%s' "$device" | jq -r '.[0].token')
api POST /api/v1/deployments -H 'content-type: application/json' \
    -d "{\"model\": \"$MODEL\", \"version\": \"1.0.0\", \"group\": \"$GROUP\"}" | jq -c '{id, sequence, version}'
# What the device is served beside the manifest: the bundle, byte for byte.
sha=$(sha256sum "$MODEL-1.0.0.npub" | cut -d' ' -f1)
curl -sS --fail-with-body -H "Authorization: Bearer $device_token" \
    -o served.release "$NPUB_URL/api/v1/device/packs/$sha/release"
cmp served.release "$MODEL-1.0.0.npub.release"

say "7. 1.1.0: uploaded with Alice's signature only, the deployment is refused (409)"
"$NPUB" pack "$TFLITE_2" -o "$MODEL-1.1.0.npub"
"$NPUB" golden "$MODEL-1.1.0.npub" -o "$MODEL-1.1.0.selftest"
"$NPUB" release sign "$MODEL-1.1.0.npub" --model "$MODEL" --version 1.1.0 \
    --selftest "$MODEL-1.1.0.selftest" --key alice.key -o "$MODEL-1.1.0.npub.release"
api POST "/api/v1/models/$MODEL/versions/1.1.0" -F "pack=@$MODEL-1.1.0.npub" \
    -F "io=@$MODEL-1.1.0.io.json" -F "release=@$MODEL-1.1.0.npub.release" | jq -c '{version, release_key_ids}'
code=$(status POST /api/v1/deployments -H 'content-type: application/json' \
    -d "{\"model\": \"$MODEL\", \"version\": \"1.1.0\", \"group\": \"$GROUP\"}")
jq -r .detail body.json
[ "$code" = 409 ]

say "   Bob signs too; the second signature is merged and 1.1.0 deploys"
"$NPUB" release sign "$MODEL-1.1.0.npub" --model "$MODEL" --version 1.1.0 \
    --selftest "$MODEL-1.1.0.selftest" --key bob.key -o bob-1.1.0.release
api POST "/api/v1/models/$MODEL/versions/1.1.0/release-signatures" \
    --data-binary @bob-1.1.0.release -H 'content-type: application/octet-stream' \
    | jq -c '{signatures: [.signatures[].key_id], meets_rule}'
api POST /api/v1/deployments -H 'content-type: application/json' \
    -d "{\"model\": \"$MODEL\", \"version\": \"1.1.0\", \"group\": \"$GROUP\"}" | jq -c '{id, sequence, version}'

say "8. Roll back to 1.0.0: a new deployment of a released version"
api POST "/api/v1/groups/$GROUP/rollback" -H 'content-type: application/json' \
    -d "{\"model\": \"$MODEL\", \"version\": \"1.0.0\"}" | jq -c '{id, kind, version}'

say "Who released what"
for v in 1.0.0 1.1.0; do
    api GET "/api/v1/models/$MODEL/versions/$v/release-signatures" -H 'accept: application/json' \
        | jq -c '{version, signatures: [.signatures[].key_id], rule, meets_rule}'
done
echo "released, deployed and rolled back: $WORK"
