#!/usr/bin/env bash
# Copy the runtime jars a pom names, with their dependencies, from Maven Central into HOME/lib (git-ignored):
#   tools/maven_jars.sh POM HOME JAR WHAT WHY
# JAR must be among the jars copied; WHAT names what is installed and WHY what needs it (for the messages). A stamp
# holding the pom's checksum makes a rerun instant; a changed pom installs again. Maven comes from apt-get when
# missing. With CI set a failed install fails (exit 1); on a dev box it only warns. Called by tools/kafka/install.sh
# (`make kafka`), tools/kafka-mirror/install.sh (`make kafka-mirror`) and tools/spark-kafka/install.sh
# (`make spark-kafka`).
set -euo pipefail
cd "$(dirname "$0")/.."

pom=$1 home=$2 jar=$3 what=$4 why=$5
stamp=$home/.installed
want=$(sha256sum "$pom" | cut -d' ' -f1)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$home/lib/$jar" ]; then
  exit 0
fi

fail() {
  if [ -n "${CI:-}" ]; then
    echo "error: could not install $what: $1 (required in CI: $why)" >&2
    exit 1
  fi
  echo "warning: could not install $what: $1; $why needs it" >&2
  exit 0
}

if ! command -v mvn >/dev/null 2>&1; then
  tools/apt_install.sh "$what" maven || true
  command -v mvn >/dev/null 2>&1 || fail "mvn is missing"
fi

echo "installing $what into $home with mvn (from Maven Central)"
mkdir -p "$home"
rm -rf "$home/lib.new"
# Into lib.new, then renamed: an interrupted copy never leaves a half-filled lib behind the stamp.
# (jansi.noreset: Maven 3.8 prints colour resets even in batch mode.)
if ! MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn --batch-mode --no-transfer-progress --quiet \
    -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$PWD/$home/lib.new"; then
  rm -rf "$home/lib.new"
  fail "mvn dependency:copy-dependencies failed"
fi
[ -f "$home/lib.new/$jar" ] || fail "$jar is not among the copied jars"
rm -rf "$home/lib"
mv "$home/lib.new" "$home/lib"
echo "$want" > "$stamp"
echo "$what: $(find "$home/lib" -name '*.jar' | wc -l) jars in $home/lib"
