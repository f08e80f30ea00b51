#!/usr/bin/env bash
# Regenerates the Vela matrix corpus in this directory (files/, expected.json, versions.txt).
# Needs python3 (3.11.7 was used) and network access to PyPI for the venvs (one per Vela version).
# Usage: bash gen.sh [VENVS_DIR]            the committed SMALL subset, here
#        bash gen.sh VENVS_DIR --all OUT    the whole matrix, into OUT (for NPUB_VELA_MATRIX=OUT)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="$here/../../../../../../shared/fixtures/vela"
venvs="${1:-/tmp/vela-venvs}"
versions="3.10.0 3.12.0 4.0.1 4.4.1 4.5.0 5.0.0 5.1.0 5.2.0"
for v in $versions; do
  [ -x "$venvs/$v/bin/vela" ] && continue
  python3 -m venv "$venvs/$v"
  # Vela 3.x predates numpy 2.
  case "$v" in 3.*) "$venvs/$v/bin/pip" install -q "numpy<2" "ethos-u-vela==$v" ;;
               *) "$venvs/$v/bin/pip" install -q "ethos-u-vela==$v" ;; esac
done
if [ "${2:-}" = "--all" ]; then
  "$venvs/5.2.0/bin/python" "$here/matrix.py" "$venvs" "$shared/models" "$3" --all
else
  "$venvs/5.2.0/bin/python" "$here/matrix.py" "$venvs" "$shared/models" "$here"
  for v in $versions; do
    printf '%s: %s\n' "$v" "$("$venvs/$v/bin/pip" list 2>/dev/null \
      | awk '$1 ~ /^(ethos-u-vela|numpy|flatbuffers)$/ {printf "%s %s  ", $1, $2}')"
  done > "$here/versions.txt"
fi
