#!/usr/bin/env bash
# GPU check: runs the GPU-tier test binaries (optionally under compute-sanitizer memcheck), the
# benchmarks from an existing build directory and their PyTorch anchors (bench/*/*.py, when PyTorch
# with CUDA is importable), and writes one log. Runs the binaries directly, never
# through ctest, so a build made on another machine of the same CPU architecture and copied over works
# (ctest files hold the build machine's absolute paths).
#
#   scripts/gpu-check.sh [--memcheck] [--no-bench] [--jobs N] [--log FILE] BUILD_DIR
#
# --jobs N runs each of the long correctness binaries (test_gpu_gemm, test_gpu_attention,
# test_gpu_membound: ~15 min in a row, mostly NVRTC and the CPU reference) as N processes at once, its
# test cases dealt among them (Catch2 2 has no sharding), on one GPU: on the H200 machine's 16 cores
# the longest shard took 333 s (2026-12-04). The binaries that time things (runtime, autotune) and
# the rest stay one process.
#
# Exit status: 0 all passed; 77 skipped (no CUDA driver or GPU: never a pass); 1 something failed.
set -uo pipefail

memcheck=0
bench=1
jobs=1
log=""
build=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --memcheck) memcheck=1 ;;
    --no-bench) bench=0 ;;
    --jobs) jobs="$2"; shift ;;
    --log) log="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    *) build="$1" ;;
  esac
  shift
done
if [[ -z "$build" || ! -d "$build" ]]; then
  echo "gpu-check: usage: $0 [--memcheck] [--no-bench] [--jobs N] [--log FILE] BUILD_DIR" >&2
  exit 2
fi
build="$(cd "$build" && pwd)"
log="${log:-$build/gpu-check.log}"
: >"$log"
say() { echo "$*" | tee -a "$log"; }

# The GPU-tier binaries: every test binary under tests/gpu (one per module as the tier grows).
mapfile -t tests < <(find "$build/tests/gpu" -maxdepth 1 -type f -perm -u+x -name 'test_*' | sort)
# test_gpu_tp2 needs two GPUs (it skips with fewer, which here would read as "no driver"): only where
# the machine has them.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ ${gpus:-0} -lt 2 ]]; then
  mapfile -t tests < <(printf '%s\n' "${tests[@]}" | grep -v '/test_gpu_tp2$')
fi
mapfile -t benches < <(find "$build/bench" -type f -perm -u+x -name 'bench_*' 2>/dev/null | sort)
if [[ ${#tests[@]} -eq 0 ]]; then
  say "gpu-check: no GPU test binaries under $build/tests/gpu: build first"
  exit 1
fi

# The compile worker of this build: bench_compile and test_gpu_autotune otherwise start the one at the
# path they were built with, which a build copied from another machine does not have.
if [[ -z "${LAYERJIT_COMPILE_WORKER:-}" && -x "$build/tools/layerjit-compile-worker" ]]; then
  export LAYERJIT_COMPILE_WORKER="$build/tools/layerjit-compile-worker"
fi

say "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
say "build: $build"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$log"
  # Clocks and power every 100 ms while the checks run: kernels that run under a power cap (the SM
  # clock drops, reason bit 0x4 "SW power cap") are slower than the same kernels on a cool GPU, and the
  # timings alone cannot say so. Summarised at the end; the samples stay beside the log.
  clocks="${log%.log}.clocks.csv"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 100 >"$clocks" 2>/dev/null &
  smi_pid=$!
  trap 'kill $smi_pid 2>/dev/null' EXIT
else
  say "nvidia-smi: not found"
fi
clock_summary() {  # the SM clock range seen and how often the power cap held it down
  [[ -n "${smi_pid:-}" ]] || return 0
  kill "$smi_pid" 2>/dev/null
  wait "$smi_pid" 2>/dev/null
  awk -F', *' 'NF >= 5 { n++; c = $2 + 0; if (min == "" || c < min) min = c; if (c > max) max = c;
                 d = index("0123456789abcdef", tolower(substr($5, length($5), 1))) - 1;
                 if (int(d / 4) % 2) capped++ }
               END { if (n) printf "SM clock %d-%d MHz over %d samples; power cap active in %d (%.0f %%)\n",
                                  min, max, n, capped, 100 * capped / n }' "$clocks" | tee -a "$log"
  say "clock samples: $clocks"
}

status=0
skipped=0
run() {  # run NAME CMD...: logs output and records the outcome
  local name="$1"; shift
  say "-- $name: $*"
  local t0=$SECONDS
  "$@" >>"$log" 2>&1
  local rc=$?
  case $rc in
    0) say "-- $name: PASS ($((SECONDS - t0)) s)" ;;
    77) say "-- $name: SKIPPED (no CUDA driver)"; skipped=1 ;;
    *) say "-- $name: FAIL (exit $rc)"; status=1 ;;
  esac
}

# run_sharded NAME BIN: BIN's test cases dealt round-robin among $jobs processes (each name escaped
# for a Catch2 test spec), run at once; their logs appended in order; one outcome for the binary.
run_sharded() {
  local name="$1" bin="$2"
  local names=() pids=() i j spec e rc failed=0 nodriver=0 t0=$SECONDS dir
  mapfile -t names < <("$bin" --list-test-names-only | grep -v '^$')
  dir=$(mktemp -d)
  say "-- $name: $bin, ${#names[@]} cases in $jobs processes"
  for ((i = 0; i < jobs && i < ${#names[@]}; i++)); do
    spec=""
    for ((j = i; j < ${#names[@]}; j += jobs)); do
      e=$(printf '%s' "${names[$j]}" | sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/\[/\\[/g' -e 's/\]/\\]/g')
      spec="${spec:+$spec,}$e"
    done
    "$bin" "$spec" --durations yes >"$dir/$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < ${#pids[@]}; i++)); do
    wait "${pids[$i]}"
    rc=$?
    cat "$dir/$i.log" >>"$log"
    case $rc in 0) ;; 77) nodriver=1 ;; *) failed=1 ;; esac
  done
  rm -rf "$dir"
  if [[ $failed -eq 1 ]]; then say "-- $name: FAIL ($((SECONDS - t0)) s)"; status=1
  elif [[ $nodriver -eq 1 ]]; then say "-- $name: SKIPPED (no CUDA driver)"; skipped=1
  else say "-- $name: PASS ($((SECONDS - t0)) s)"; fi
}
for t in "${tests[@]}"; do
  case "$(basename "$t")" in
    test_gpu_gemm|test_gpu_attention|test_gpu_membound)
      if [[ $jobs -gt 1 ]]; then run_sharded "$(basename "$t")" "$t"; continue; fi ;;
  esac
  run "$(basename "$t")" "$t" --durations yes
done
# Without a driver the test binaries skip; the runs and benchmarks below would each fail for the
# same reason and turn "skipped" into "failed".
if [[ $skipped -ne 0 && $status -eq 0 ]]; then
  clock_summary
  say "== gpu-check: SKIPPED, no CUDA driver: nothing was tested (log: $log)"
  exit 77
fi
# Whole layers end to end (`layerjit run`): the small layer against the CPU reference, the
# Llama-3-8B prefill and decode cases fused against unfused.
lj="$build/tools/layerjit"
if [[ -x "$lj" ]]; then
  run "run small prefill" "$lj" run --small --graph llama_small_prefill --bind T=33
  run "run small decode" "$lj" run --small --graph llama_small_decode --bind B=2,C=9
  run "run 8B prefill T=4096" "$lj" run --graph llama3_8b_prefill --bind T=4096
  run "run 8B decode B=1" "$lj" run --graph llama3_8b_decode --bind B=1,C=4096
  run "run 8B decode B=32" "$lj" run --graph llama3_8b_decode --bind B=32,C=4096
  # Where the time goes: ceilings, each kernel against the roofline, unfused / fused / CUDA graph.
  # Each also as JSON, CSV and a roofline picture beside the log.
  out_dir=$(dirname "$log")
  run "bench 8B prefill T=4096" "$lj" bench --graph llama3_8b_prefill --bind T=4096 --json "$out_dir/bench_prefill.json" \
    --csv "$out_dir/bench_prefill.csv" --roofline "$out_dir/roofline_prefill.svg"
  run "bench 8B decode B=1" "$lj" bench --graph llama3_8b_decode --bind B=1,C=4096 --json "$out_dir/bench_decode.json" \
    --csv "$out_dir/bench_decode.csv" --roofline "$out_dir/roofline_decode.svg"
  # LAYERJIT_LOG=dispatch names every launch's kernel, config and where they came from.
  # (The output is captured first: `grep -q` on a pipe would stop reading and, under pipefail, fail the
  # writer with SIGPIPE.)
  dispatch_log() {
    local out
    out=$(LAYERJIT_LOG=dispatch "$lj" run --small --graph llama_small_decode --bind B=2,C=9 2>&1) || { echo "$out"; return 1; }
    echo "$out"
    grep -q "layerjit dispatch @llama_small_decode" <<<"$out"
  }
  run "LAYERJIT_LOG=dispatch" dispatch_log
  # --weights: the weights a run saved, loaded back from the file, give the same outputs bit for bit
  # (the other inputs come from the same seed).
  weights_round_trip() {
    local d
    d=$(mktemp -d)
    "$lj" run --small --graph llama_small_prefill --bind T=33 --save "$d/a" &&
      "$lj" run --small --graph llama_small_prefill --bind T=33 --weights "$d/a/inputs.safetensors" --save "$d/b" &&
      cmp "$d/a/outputs.safetensors" "$d/b/outputs.safetensors"
    local rc=$?
    rm -rf "$d"
    return $rc
  }
  run "run --weights round trip" weights_round_trip
fi
[[ -x "$build/examples/run_mlp" ]] && run "example run_mlp" "$build/examples/run_mlp"
# The Python module as built beside the library (<build>/python): its unit tests (the GPU ones run
# here, skipped without a driver elsewhere) and the decoder layer from PyTorch tensors, checked
# against the same layer in PyTorch (examples/torch_layer.py: Executable.run, the custom op eagerly,
# in torch.compile, in PyTorch's CUDA graph; --time against layerjit's own graph).
src_dir="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -d "$build/python/layerjit" ]]; then
  run "python unittest" env PYTHONPATH="$build/python" LAYERJIT_MAKE_HF_MODEL="$build/tests/models/make_hf_model" \
    python3 -m unittest discover -s "$src_dir/python/tests"
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    run "torch_layer.py --small" env PYTHONPATH="$build/python" python3 "$src_dir/examples/torch_layer.py" --small
    run "torch_layer.py 8B B=1" env PYTHONPATH="$build/python" python3 "$src_dir/examples/torch_layer.py" --time
    run "torch_layer.py 8B B=32" env PYTHONPATH="$build/python" python3 "$src_dir/examples/torch_layer.py" --batch 32 --time
  else
    say "-- torch_layer.py: not run, PyTorch with CUDA not importable"
  fi
fi
# On Hopper the prefill matmuls and the prefill attention take the wgmma path: their SASS must hold
# HGMMA instructions (a kernel with only HMMA would be on the slower mma.sync path). Needs the
# toolkit's cuobjdump. Groups of @llama3_8b_prefill: 1 is the QKV projection, 3 the attention.
hgmma() {
  local n group=$1 what=$2
  n=$("$lj" inspect --graph llama3_8b_prefill --bind T=4096 --arch sm_90a --group "$group" --sass | grep -c HGMMA)
  echo "HGMMA instructions in the sm_90a $what: $n"
  [[ $n -gt 0 ]]
}
# The fp8 GEMM (examples/fp8_projection.lj, group 1) multiplies with QGMMA, the fp8 wgmma.
qgmma() {
  local n
  n=$("$lj" inspect "$(cd "$(dirname "$0")/.." && pwd)/examples/fp8_projection.lj" --bind T=4096 --arch sm_90a --group 1 --sass | grep -c QGMMA)
  echo "QGMMA instructions in the sm_90a fp8 GEMM: $n"
  [[ $n -gt 0 ]]
}
if [[ -x "$lj" ]] && command -v cuobjdump >/dev/null && nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -q '^9\.0'; then
  run "Hopper GEMM SASS has HGMMA" hgmma 1 "QKV projection"
  run "Hopper attention SASS has HGMMA" hgmma 3 "attention"
  run "Hopper fp8 GEMM SASS has QGMMA" qgmma
fi
# Under compute-sanitizer memcheck: the small configs, each case a few seconds uninstrumented (the
# instrumented run is 10-100x slower, so the whole tier would take hours: test_gpu_attention alone
# runs 400 s unchecked). The timer test measures speed, which instrumentation distorts. API errors
# are not reported: the tests provoke some on purpose (bad launches) and the runtime probes parameter
# lists until the driver says "invalid value"; the tests check those results.
memcheck_cases=(
  "test_gpu_runtime|~the timer scales*"
  "test_gpu_models|a tiny*"
  "test_gpu_models|[int4]"
  "test_gpu_exec|the small Llama layer*,folded norms*,a captured CUDA graph*,row tails*,decode attention streams*"
  "test_gpu_membound|small llama*,the model families*,dynamic per-row*"
  "test_gpu_attention|decode of two new tokens*,paged decode*"
  "test_gpu_gemm|the defaults for 2-32 rows*"
  "test_gpu_w8a8|*"
)
if [[ $memcheck -eq 1 ]]; then
  if command -v compute-sanitizer >/dev/null; then
    sanitize=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1)
    for c in "${memcheck_cases[@]}"; do
      t="$build/tests/gpu/${c%%|*}"
      [[ -x "$t" ]] && run "memcheck ${c%%|*} ${c#*|}" "${sanitize[@]}" "$t" "${c#*|}"
    done
    if [[ -x "$lj" ]]; then
      run "memcheck run small prefill" "${sanitize[@]}" "$lj" run --small --graph llama_small_prefill --bind T=33
      run "memcheck run small decode" "${sanitize[@]}" "$lj" run --small --graph llama_small_decode --bind B=2,C=9
      # The quantized 8B layers at decode sizes over a short cache (30-50 s each instrumented, H100).
      run "memcheck run INT4 decode" "${sanitize[@]}" "$lj" run "$src_dir/examples/llama3_8b_int4.lj" --graph llama3_8b_int4_decode --bind B=3,C=37 --quiet
      run "memcheck run INT4 decode one row" "${sanitize[@]}" "$lj" run "$src_dir/examples/llama3_8b_int4.lj" --graph llama3_8b_int4_decode --bind B=1,C=37 --quiet
      run "memcheck run W8A8 decode one row" "${sanitize[@]}" "$lj" run "$src_dir/examples/llama3_8b_w8a8.lj" --graph llama3_8b_w8a8_decode --bind B=1,C=37 --quiet
      run "memcheck run FP8 decode one row, row tails" "${sanitize[@]}" "$lj" run "$src_dir/examples/llama3_8b_fp8.lj" --graph llama3_8b_fp8_decode --bind B=1,C=37 --row-tails --quiet
    fi
  else
    say "-- memcheck: compute-sanitizer not found"
    status=1
  fi
fi
if [[ $bench -eq 1 && $skipped -eq 0 ]]; then
  for b in "${benches[@]}"; do
    run "$(basename "$b")" "$b"
  done
  # The Llama layers under each launch variant (programmatic dependent launch off / marked kernels /
  # every kernel, each instruction order), timed as CUDA graphs by `layerjit run`.
  [[ -x "$lj" ]] && run "decode_launch.sh" "$src_dir/bench/exec/decode_launch.sh" "$lj" 1
  # The INT4, FP8 and W8A8 layers against the bf16 one (`layerjit bench`, one CUDA graph per call).
  [[ -x "$lj" ]] && run "quant layers.sh" "$src_dir/bench/quant/layers.sh" "$lj"
  # The 4-bit projections against bf16 ones at 1, 16, 32 and 4096 rows (GEMV and GEMMs on codes).
  [[ -x "$lj" ]] && run "quant int4.sh" "$src_dir/bench/quant/int4.sh" "$lj"
  # The FP8 and W8A8 decode layers tuned, with the row kernels and with the quantize prologues
  # (the bulk-fed GEMV among the candidates).
  [[ -x "$lj" ]] && run "quant prologues.sh" "$src_dir/bench/quant/prologues.sh" "$lj"
  # Tensor parallelism: the 8B layer at tp = 1 and 2 (decode B = 1, 32; prefill), the all_reduces alone,
  # and the tp = 2 outputs against tp = 1 (`layerjit run --tp 2`): where the machine has two GPUs.
  if [[ -x "$lj" && ${gpus:-0} -ge 2 ]]; then
    run "tp run decode" "$lj" run --tp 2 --graph llama3_8b_decode --bind B=32,C=4096
    run "tp run prefill" "$lj" run --tp 2 --graph llama3_8b_prefill --bind T=4096
    run "tp tp.sh" "$src_dir/bench/tp/tp.sh" "$lj" 2
    [[ -x "$build/tests/models/make_hf_model" ]] && run "tp model.sh (32-layer 8B model)" "$src_dir/bench/tp/model.sh" "$lj" "$build/tests/models/make_hf_model" 2
  fi
  # PyTorch anchors of the benchmarks (bench/*/*.py, e.g. SDPA for bench_attention), timed in the same
  # session: from the source tree next to this script, or copied into the build tree.
  mapfile -t anchors < <( { find "$src_dir/bench" "$build/bench" -mindepth 2 -name '*.py' 2>/dev/null; } | awk -F/ '!seen[$NF]++' | sort)
  if [[ ${#anchors[@]} -gt 0 ]]; then
    if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
      for a in "${anchors[@]}"; do
        run "$(basename "$a")" python3 "$a"
      done
      # The whole layer against PyTorch eager / torch.compile / reduce-overhead on the same weights.
      for c in "$src_dir/bench/compare_torch.py" "$build/bench/compare_torch.py"; do
        if [[ -f "$c" && -x "$lj" ]]; then
          run "compare_torch.py" python3 "$c" --layerjit "$lj" --case "${LAYERJIT_COMPARE_CASES:-prefill,decode1,decode32}"
          break
        fi
      done
      # A whole 32-layer Llama-3-8B-shaped model (random weights, 15 GB written to a temporary
      # directory and removed after) generated by layerjit and by Hugging Face transformers.
      mk="$build/tests/models/make_hf_model"
      if [[ -x "$mk" && -x "$lj" ]] && python3 -c "import transformers" 2>/dev/null; then
        compare_hf() {
          local d rc
          d=$(mktemp -d)
          "$mk" "$d/l8b" llama --8b --layers 32 --shards 4 &&
            python3 "$src_dir/bench/compare_hf.py" --layerjit "$lj" --model "$d/l8b" --json "$out_dir/compare_hf.json"
          rc=$?
          rm -rf "$d"
          return $rc
        }
        run "compare_hf.py (32-layer 8B model)" compare_hf
      else
        say "-- compare_hf.py: not run (needs transformers and $mk)"
      fi
    else
      say "-- PyTorch anchors (${#anchors[@]} scripts): not run, PyTorch with CUDA not importable"
    fi
  fi
fi

clock_summary
if [[ $status -ne 0 ]]; then
  say "== gpu-check: FAILED (log: $log)"
  exit 1
fi
if [[ $skipped -ne 0 ]]; then
  say "== gpu-check: SKIPPED, no CUDA driver: nothing was tested (log: $log)"
  exit 77
fi
say "== gpu-check: all passed (log: $log)"
exit 0
