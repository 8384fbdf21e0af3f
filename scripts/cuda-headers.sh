#!/usr/bin/env bash
# Fetches the CUDA Toolkit headers the probe is compiled against (cuda.h, cudaTypedefs.h, nvml.h)
# from NVIDIA's PyPI wheels, checks their sha256, and unpacks the headers into a cache outside
# the repository. Prints the include directory. Idempotent: a complete cache is reused offline.
# The probe loads libcuda.so.1 and libnvidia-ml.so.1 at run time; nothing here is linked.
set -euo pipefail

version=12.9.79
cache=${NCCLGUARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard}/cuda-headers/$version
include=$cache/include
wheels=(
  "nvidia-cuda-runtime-cu12 nvidia_cuda_runtime_cu12-$version-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3 nvidia/cuda_runtime/include"
  "nvidia-nvml-dev-cu12 nvidia_nvml_dev_cu12-$version-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl 8bb367913c62cb65be9ae386c58dbf573f1f9e2f01cae54abb87bf5f63c6069e nvidia/nvml_dev/include"
)

if [ -f "$include/cuda.h" ] && [ -f "$include/cudaTypedefs.h" ] && [ -f "$include/nvml.h" ]; then
  echo "$include"
  exit 0
fi

download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
staging=$cache.partial
rm -rf "$staging"
mkdir -p "$staging/include"
for entry in "${wheels[@]}"; do
  read -r package file sha256 prefix <<<"$entry"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    "$package==$version" -d "$download" >&2
  [ -f "$download/$file" ] || { echo "cuda-headers: pip did not fetch $file" >&2; exit 1; }
  echo "$sha256  $download/$file" | sha256sum --check --quiet - >&2 ||
    { echo "cuda-headers: sha256 mismatch for $file" >&2; exit 1; }
  python3 - "$download/$file" "$prefix" "$staging/include" <<'PY'
import os, sys, zipfile
wheel, prefix, out = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(out, name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
done
rm -rf "$cache"
mv "$staging" "$cache"
echo "cuda-headers: CUDA $version headers in $include" >&2
echo "$include"
