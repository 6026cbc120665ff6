#!/usr/bin/env bash
# Refreshes the embedded Redoc bundle from the npm registry:
#   apidocs/update.sh [VERSION]
set -euo pipefail
cd "$(dirname "$0")"
version="${1:-2.5.4}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "redoc@$version" >/dev/null && tar xzf redoc-*.tgz)
gzip -9 -n -c "$tmp/package/bundles/redoc.standalone.js" > assets/redoc.standalone.js.gz
cp "$tmp/package/bundles/redoc.standalone.js.LICENSE.txt" assets/
cp "$tmp/package/LICENSE" assets/REDOC-LICENSE
echo "$version" > assets/REDOC-VERSION
ls -l assets
