#!/usr/bin/env bash
# Runs every benchmark one after another (never two at once: they share two cores) and keeps each one's
# JSON in benchmarks/results/<name>.json. Usage: bash benchmarks/run_all.sh [name ...]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
declare -A run=(
  [train_reverse]="benchmarks/train_reverse.py --mode direct"
  [train_reverse_job]="benchmarks/train_reverse.py --mode job"
  [throughput]="benchmarks/throughput.py"
  [threads]="benchmarks/threads.py"
  [decode_speed]="benchmarks/decode_speed.py"
  [step_click]="benchmarks/step_click.py"
  [chart_speed]="benchmarks/chart_speed.py"
  [grid_paint]="benchmarks/grid_paint.py"
  [app_train]="benchmarks/app_train.py"
  [ablation_sweep]="benchmarks/ablation_sweep.py"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(train_reverse train_reverse_job throughput threads decode_speed step_click chart_speed grid_paint app_train ablation_sweep)
for name in "${names[@]}"; do
  [ -n "${run[$name]:-}" ] || { echo "error: no benchmark '$name'" >&2; exit 2; }
  echo "== $name" >&2
  # shellcheck disable=SC2086
  python ${run[$name]} > "benchmarks/results/$name.json"
done
