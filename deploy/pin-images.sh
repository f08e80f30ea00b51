#!/usr/bin/env bash
# Prints the `--build-arg`s that pin deploy/Containerfile's base images by digest: each image is
# resolved through your builder's own configuration (podman or docker), pulled, and named as
# `<fully qualified name>@sha256:<digest>`. Use it in the build command:
#
#   podman build -f deploy/Containerfile $(deploy/pin-images.sh) -t npub-server .
#
# Give fully qualified names to resolve instead of the Containerfile's defaults with
# BUILD_IMAGE=…, BUSYBOX_IMAGE=…, RUNTIME_IMAGE=… in the environment.
set -euo pipefail
cd "$(dirname "$0")"
tool=$(command -v podman || command -v docker || true)
[ -n "$tool" ] || { echo "pin-images.sh: needs podman or docker" >&2; exit 2; }
default() { sed -n "s/^ARG $1=//p" Containerfile; }
for arg in BUILD_IMAGE BUSYBOX_IMAGE RUNTIME_IMAGE; do
    image=${!arg:-$(default "$arg")}
    "$tool" pull -q "$image" >/dev/null
    # RepoDigests holds the fully qualified name with its digest, as the registry served it.
    pinned=$("$tool" image inspect --format '{{index .RepoDigests 0}}' "$image")
    case "$pinned" in
        *@sha256:*) printf -- '--build-arg %s=%s ' "$arg" "$pinned" ;;
        *) echo "pin-images.sh: $image has no digest ($pinned)" >&2; exit 1 ;;
    esac
done
echo
