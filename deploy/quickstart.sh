#!/usr/bin/env bash
# tokentap quick start on Debian 12 (as root, or with sudo).
#
#   deploy/quickstart.sh demo   install what is missing, build, run simulator + proxy + load
#                               (demo --experiment: a benchmark of two proxy configurations)
#   deploy/quickstart.sh test   install what is missing, build, run the whole test suite, replay
#                               the fuzz corpora, then run the suites again under ASan + UBSan
#                               (SANITIZERS=0 skips that; TSAN=1 adds a ThreadSanitizer pass)
#
# Everything comes from Debian packages (and the npm registry for the SDK client tests);
# nothing is downloaded at build time.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
# What the build needs (the test libraries too: the one build directory configures both).
BUILD_PACKAGES=(build-essential cmake ninja-build pkg-config libboost-dev libsimdjson-dev
                prometheus-cpp-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
                libyaml-cpp-dev libjemalloc-dev libhiredis-dev zlib1g-dev curl ca-certificates openssl)
# What only the tests need.
TEST_PACKAGES=(prometheus chromium   # promtool + a real Prometheus, headless Chromium: metrics and dashboard tests
               redis-server         # budgets shared by several instances (each test starts its own)
               protobuf-compiler    # protoc decodes the OTLP bodies the proxy exports
               clang libclang-rt-14-dev   # libFuzzer targets (test/fuzz)
               clang-format)              # the sources' one format (.clang-format), checked first

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# install_deps PACKAGE...: installs those that are missing.
install_deps() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# build DIR [CMAKE_ARGS...]: configures and builds everything, or only the targets named in
# $TARGET (space-separated) when it is set.
build() {
  local dir=${1:-$BUILD_DIR}
  shift || true
  local targets
  read -r -a targets <<<"${TARGET:-}"
  echo "==> building ${TARGET:-everything} in $dir"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
}

# run_suites DIR TIMEOUT: the behaviour tests two at a time, then the `perf` label (allocation
# counts, read scheduling) alone, so another test's load cannot move what those pin.
run_suites() {
  ctest --test-dir "$1" --output-on-failure --timeout "$2" -j "$(nproc)" -LE perf
  ctest --test-dir "$1" --output-on-failure --timeout "$2" -L perf
}

case "${1:-}" in
  demo)
    shift
    install_deps "${BUILD_PACKAGES[@]}"
    TARGET=tokentap build   # the binary alone: the first start does not wait for the tests
    if [ "${1:-}" = --experiment ]; then
      # One benchmark experiment instead of the live demo: two proxy configurations, the same
      # workload through each, `bench compare` and `bench report` (README).
      shift
      exec deploy/experiment/run.sh "$BUILD_DIR/tokentap" "$@"
    fi
    echo "==> demo (or: deploy/quickstart.sh demo --experiment — two proxy configurations" \
         "benchmarked on one workload, compared, and a report page)"
    exec "$BUILD_DIR/tokentap" demo "$@"
    ;;
  test)
    # Node.js runs the official SDK client tests; keep a Node that is already there.
    node_packages=()
    command -v node >/dev/null || node_packages+=(nodejs)
    command -v npm >/dev/null || node_packages+=(npm)
    install_deps "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${node_packages[@]}"
    echo "==> clang-format --dry-run -Werror on every C++ source"
    find app base bench config hooks net parsers proxy replay sim store test -name '*.cpp' -o -name '*.hpp' -o -name '*.h' |
      grep -v '/node_modules/' | xargs clang-format --dry-run -Werror
    build
    echo "==> installing the SDK test clients (npm ci)"
    (cd test/node && npm ci --no-audit --no-fund --loglevel=error)
    echo "==> running the tests"
    run_suites "$BUILD_DIR" 300
    echo "==> fuzz targets: seed corpora and every past crash input (test/fuzz/run.sh 0)"
    test/fuzz/run.sh 0
    if [ "${SANITIZERS:-1}" != 0 ]; then
      # The binary, the unit and the integration suites (not the benchmarks and tools), rebuilt
      # with sanitizers and line tables only (-g1: reports keep file:line), so the build fits CI's
      # time. (Not -O1: GCC 12 with ASan spent over 27 minutes on one test file at -O1, 4.5 at
      # -O2.) A report fails the test that triggered it (halt_on_error), leaks included (the proxy
      # exits cleanly).
      TARGET="tokentap tokentap_unit_tests tokentap_integration_tests" build "$BUILD_DIR-asan" \
        -DTOKENTAP_SANITIZE=address -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
      echo "==> running the tests under AddressSanitizer + UndefinedBehaviorSanitizer"
      ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        run_suites "$BUILD_DIR-asan" 600
      # A third full build does not fit CI's 90 minutes on 2 cores: TSan runs on request.
      if [ "${TSAN:-0}" != 0 ]; then
        TARGET="tokentap tokentap_unit_tests tokentap_integration_tests" build "$BUILD_DIR-tsan" \
          -DTOKENTAP_SANITIZE=thread -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
        echo "==> running the tests under ThreadSanitizer"
        TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_suites "$BUILD_DIR-tsan" 600
      fi
    fi
    ;;
  *)
    echo "usage: deploy/quickstart.sh demo|test" >&2
    exit 2
    ;;
esac
