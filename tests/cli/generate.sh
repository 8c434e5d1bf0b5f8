#!/usr/bin/env bash
# generate.sh LAYERJIT MAKE_HF_MODEL WORK: `layerjit generate --cpu` on each family's tiny Hugging Face
# model (written by make_hf_model: hidden 72, 3 layers, 6/2 heads, vocab 301, 2 shards), the logits
# file, model directories in check/plan/compile, `--tp`, and the errors of bad requests and bad models.
set -uo pipefail
lj=$1 make=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "generate: FAILED: $*"; exit 1; }
expect_rc() {  # expect_rc CODE REGEX CMD...: the command exits CODE and its output matches REGEX
  local want=$1 re=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, not $want: $out"
  grep -Eq -- "$re" <<<"$out" || fail "'$*' does not print /$re/: $out"
}

for family in llama llama-tied mistral qwen2 qwen3; do
  dir="$work/$family"
  "$make" "$dir" "$family" || fail "make_hf_model $family"
  out=$("$lj" generate "$dir" --ids 5,17,250,3,99,42,7 --new 6 --cpu --logits-out "$work/$family.safetensors" 2>&1) ||
    fail "generate $family exited $?: $out"
  tokens=$(sed -n 's/^tokens: //p' <<<"$out")
  [ "$(tr ',' '\n' <<<"$tokens" | grep -Ec '^[0-9]+$')" -eq 6 ] || fail "$family: not 6 token ids: $out"
  for t in ${tokens//,/ }; do [ "$t" -lt 301 ] || fail "$family: token $t outside the vocabulary"; done
  grep -Eq '^time: prefill [0-9.]+ ms, decode [0-9.]+ ms per step \(median of 5\)$' <<<"$out" || fail "$family: no step times: $out"
  # f32 [6, 301]: 7224 bytes of data after the 8-byte length and the header.
  size=$(stat -c %s "$work/$family.safetensors")
  header=$(head -c 8 "$work/$family.safetensors" | od -An -tu8 | tr -d ' ')
  [ "$size" -eq $((8 + header + 6 * 301 * 4)) ] || fail "$family: logits file of $size bytes (header $header)"
  head -c $((8 + header)) "$work/$family.safetensors" | tail -c "$header" | grep -q '"logits":{"data_offsets":\[0,7224\],"dtype":"F32","shape":\[6,301\]}' ||
    fail "$family: the logits header is not f32 [6, 301]"
  again=$("$lj" generate "$dir" --ids 5,17,250,3,99,42,7 --new 6 --cpu 2>&1 | sed -n 's/^tokens: //p')
  [ "$again" = "$tokens" ] || fail "$family: a second run generated $again, the first $tokens"
done

# A model directory wherever a .lj file goes.
expect_rc 0 "^ok: .*/qwen3: 4 graphs \(@qwen3_embed, @qwen3_prefill, @qwen3_decode, @qwen3_head\)" "$lj" check "$work/qwen3"
expect_rc 0 "plan @qwen2_decode \(B=1, C=32\)" "$lj" plan "$work/qwen2" --graph qwen2_decode --bind B=1,C=32
expect_rc 0 "%attn = attention\(.*\) \{causal = true, lse = false, window = 5\}" "$lj" print "$work/mistral" --graph mistral_prefill
expect_rc 0 "rope_table\(%pos\) \{dim = 12, theta = 10000.0, scaling = \"llama3\", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_pos = 32\}" \
  "$lj" print "$work/llama" --graph llama_decode
# Every kernel of each family's layer compiles, at head_dim 16 and at the tiny models' 12 (padded to
# 16 in the attention tiles); the window reaches the attention kernels as a template argument.
for family in llama mistral qwen2 qwen3; do
  "$make" "$work/$family-16" "$family" --head-dim 16 || fail "make_hf_model $family --head-dim 16"
  name=${family}_16
  for graph in embed:N=3 prefill:T=16 decode:B=1,C=64 head:B=1; do
    expect_rc 0 "kernels for sm_90a" "$lj" compile "$work/$family-16" --graph "${name}_${graph%%:*}" --bind "${graph#*:}" \
      --arch sm_90a --quiet --emit "$work/$family-16-kernels/${graph%%:*}"
  done
done
grep -q "lj_flash_prefill<lj_bf16, 16, 96, 2, 64, 2, 3, true, 5>" "$work"/mistral-16-kernels/prefill/*attention.cu ||
  fail "the Mistral prefill kernel does not take the window"
grep -q "lj_flash_decode<lj_bf16, 16, 3, 3, 16, [0-9]*, 3, [0-9]*, true, false, 5>" "$work"/mistral-16-kernels/decode/*attention.cu ||
  fail "the Mistral decode kernel does not take the window"
for graph in prefill:T=16 decode:B=1,C=64; do
  expect_rc 0 "kernels for sm_90a" "$lj" compile "$work/mistral" --graph "mistral_${graph%%:*}" --bind "${graph#*:}" --arch sm_90a \
    --quiet --emit "$work/mistral-kernels/${graph%%:*}"
done
grep -q "lj_flash_prefill<lj_bf16, 16, 96, 2, 64, 2, 3, true, 5, 12>" "$work"/mistral-kernels/prefill/*attention.cu ||
  fail "the Mistral prefill kernel does not pad head_dim 12 to 16"
grep -q "lj_flash_decode<lj_bf16, 16, 3, 3, 16, [0-9]*, 3, [0-9]*, true, false, 5, 12>" "$work"/mistral-kernels/decode/*attention.cu ||
  fail "the Mistral decode kernel does not pad head_dim 12 to 16"
# Qwen3's per-head q/k norms run in the RoPE kernel: no row kernel of their own.
"$lj" plan "$work/qwen3" --graph qwen3_decode --bind B=1,C=64 > "$work/qwen3-plan.txt" || fail "plan qwen3"
grep -q "absorbed %q_normed = rms_norm (per-head RMSNorm" "$work/qwen3-plan.txt" || fail "the q norm is not in the rope kernel"
! grep -q "row_reduce" "$work/qwen3-plan.txt" || fail "Qwen3's decode layer still has a row kernel"
# Tensor parallelism: every layer sharded over 2 ranks in the CPU reference picks the tokens one rank
# does (the logits agree within bf16 rounding: tests/models); 4 ranks do not divide 6 heads.
tp1=$("$lj" generate "$work/qwen2" --ids 5,17,250,3,99,42,7 --new 4 --cpu 2>&1 | sed -n 's/^tokens: //p')
expect_rc 0 "^tokens: $tp1$" "$lj" generate "$work/qwen2" --ids 5,17,250,3,99,42,7 --new 4 --cpu --tp 2
expect_rc 1 "shard @llama_decode over 4 ranks: .* is not divisible by 4 ranks" "$lj" generate "$work/llama" --ids 1,2 --tp 4
# Without a driver, generate says how to run without one.
if ! "$lj" devices >/dev/null 2>&1; then
  expect_rc 1 "no CUDA driver.*generate --cpu runs the CPU reference without a GPU" "$lj" generate "$work/llama" --ids 1,2
fi
# Bad requests and bad models.
expect_rc 2 "--ids expects comma-separated token ids, got 'x'" "$lj" generate "$work/llama" --ids 1,x --cpu
expect_rc 2 "--ids is required" "$lj" generate "$work/llama" --cpu
expect_rc 2 "--new expects a positive number of tokens, got '0'" "$lj" generate "$work/llama" --ids 1 --new 0 --cpu
expect_rc 1 "token 1 of the prompt is 301, outside the vocabulary \[0, 301\)" "$lj" generate "$work/llama" --ids 1,301 --cpu
expect_rc 1 "more than the model's max_position_embeddings \(512\)" "$lj" generate "$work/llama" --ids 1,2 --new 511 --cpu
expect_rc 1 "no config.json" "$lj" generate "$work" --ids 1 --cpu
rm "$work/qwen2/model-00001-of-00002.safetensors"
expect_rc 1 "shard 'model-00001-of-00002.safetensors' is missing" "$lj" generate "$work/qwen2" --ids 1 --cpu
sed -i 's/"Qwen3ForCausalLM"/"GPTNeoXForCausalLM"/' "$work/qwen3/config.json"
expect_rc 1 "field 'architectures': 'GPTNeoXForCausalLM' is not an architecture layerjit builds" "$lj" check "$work/qwen3"
echo "generate: every family generated on the CPU; every error named"
