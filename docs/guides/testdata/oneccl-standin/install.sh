#!/bin/bash
# install.sh VERSION: installs the stand-in for oneccl_bind_pt VERSION into
# the Python environment of python3 on PATH (a venv), as
# "pip install oneccl_bind_pt==VERSION" would install the real one.
set -euo pipefail
version=${1:?usage: install.sh VERSION}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site"/oneccl_bindings_for_pytorch "$site"/oneccl_bind_pt-*.dist-info
cp -r "$here/oneccl_bindings_for_pytorch" "$site/"
mkdir "$site/oneccl_bind_pt-$version.dist-info"
printf 'Metadata-Version: 2.1\nName: oneccl_bind_pt\nVersion: %s\n' "$version" >"$site/oneccl_bind_pt-$version.dist-info/METADATA"
printf 'oneccl_bindings_for_pytorch\n' >"$site/oneccl_bind_pt-$version.dist-info/top_level.txt"
echo "installed the oneccl_bind_pt $version stand-in in $site"
