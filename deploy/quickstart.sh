#!/usr/bin/env bash
# tokentap quick start on Debian 12 (as root, or with sudo).
#
#   deploy/quickstart.sh demo   install what is missing, build, run simulator + proxy + load
#   deploy/quickstart.sh test   install what is missing, build, run the whole test suite
#
# Everything comes from Debian packages (and the npm registry for the SDK client tests);
# nothing is downloaded at build time.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
PACKAGES=(build-essential cmake ninja-build pkg-config libboost-dev libsimdjson-dev
          prometheus-cpp-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
          libyaml-cpp-dev curl ca-certificates openssl
          prometheus chromium)  # promtool + a real Prometheus, headless Chromium: metrics and dashboard tests

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Node.js runs the official SDK client tests; keep a Node that is already there.
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  echo "==> building in $BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)"
}

case "${1:-}" in
  demo)
    shift
    install_deps
    build
    exec "$BUILD_DIR/tokentap" demo "$@"
    ;;
  test)
    install_deps
    build
    echo "==> installing the SDK test clients (npm ci)"
    (cd test/node && npm ci --no-audit --no-fund --loglevel=error)
    echo "==> running the tests"
    ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 300
    ;;
  *)
    echo "usage: deploy/quickstart.sh demo|test" >&2
    exit 2
    ;;
esac
