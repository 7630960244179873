#!/usr/bin/env bash
# Install Debian packages the test suite needs, with apt-get: tools/apt_install.sh WHAT ALTERNATIVE...
# Each ALTERNATIVE is a space-separated list of packages; the first that installs wins. WHAT names what fails
# without them. With CI set a failed install fails (exit 1); on a dev box it only warns.
set -u
what=$1
shift
if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
echo "installing $1 with apt-get"
if "${sudo[@]}" apt-get update -qq; then
  for packages in "$@"; do
    # shellcheck disable=SC2086 # a list of package names, split on purpose
    if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages; then
      exit 0
    fi
  done
fi
if [ -n "${CI:-}" ]; then
  echo "error: could not install $1 (required in CI: $what)" >&2
  exit 1
fi
echo "warning: could not install $1; $what will fail (apt-get install $1)" >&2
