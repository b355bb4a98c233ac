#!/usr/bin/env bash
# Round trips against the real lerobot (0.4.4, the newest for Python 3.11) in its own venv.
# Idempotent: the venv is built once (torch/torchvision come from this machine's wheel cache).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-lerobot
LEROBOT=0.4.4
started=$(date +%s)

pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
printf 'torch==2.14.1\ntorchvision==0.29.1\n' > "$pins"
pip_install() { "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-warn-conflicts -c "$pins" "$@"; }

# lerobot decodes video with torchcodec, which loads FFmpeg's shared libraries (Debian's ffmpeg);
# without them the video tests skip and say why.
if ! command -v ffmpeg >/dev/null && command -v apt-get >/dev/null; then
  (apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null 2>&1 \
    || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null 2>&1)) \
    || echo "lerobot_compat: could not install ffmpeg; lerobot's video decode tests will skip"
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
if ! "$VENV/bin/python" -c "import lerobot, torch, torchcodec, datasets, accelerate, av, pytest, imageio, serial, deepdiff, diffusers, caliper_jax" 2>/dev/null \
   || [ "$("$VENV/bin/python" -c 'import lerobot; print(lerobot.__version__)')" != "$LEROBOT" ]; then
  pip_install torch==2.14.1 torchvision==0.29.1
  pip_install --no-deps "lerobot==$LEROBOT"
  # What LeRobotDataset imports (lerobot's full dependency list pulls robots, sim and logging stacks).
  pip_install 'datasets<5' 'huggingface-hub<0.36' 'pandas<3' pyarrow numpy pillow 'av>=15,<16' \
    accelerate jsonlines 'draccus==0.10.0' einops 'packaging>=24.2,<26' pytest \
    imageio pyserial deepdiff  # what lerobot's ACT training imports (benchmarks/bench_learn.py)
  # lerobot's diffusion policy (its noise schedulers; benchmarks/bench_learn.py --part speed)
  pip_install 'diffusers>=0.27.2,<0.36'
  # lerobot 0.4.4 pins torchcodec<0.11, built for older torch; 0.17 is the release for torch 2.14
  pip_install --no-deps torchcodec==0.17.0
  pip_install --no-deps -e .
fi

export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
HF_HOME=$(mktemp -d)
export HF_HOME
"$VENV/bin/python" -c "import lerobot, torch; print(f'lerobot {lerobot.__version__} (torch {torch.__version__})')"
status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --noconftest tests/lerobot_compat -rs || status=$?
rm -rf "$HF_HOME"
echo "lerobot_compat: $(( $(date +%s) - started )) s, exit $status"
exit $status
