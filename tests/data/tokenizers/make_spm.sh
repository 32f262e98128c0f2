#!/usr/bin/env bash
# Trains the two SentencePiece models kvactor's tokenizer tests use, with Debian's spm_train
# (apt package sentencepiece), from corpus.txt. Identity normalisation and whitespace kept as it
# is, so that the Llama-style Hugging Face pipeline make_goldens.py builds from the model
# (prepend "▁", replace " " by "▁", then the unigram model) is the same tokenizer:
#   spm_unigram/tokenizer.model             unigram, 460 pieces with byte fallback (Llama 2 style)
#   ../transformers/mistral/tokenizer.model  unigram, 256 pieces (the fixture's vocab_size), no
#                                           byte pieces: unk 0, <s> 1, </s> 2 as config.json says
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
common=(--input="$here/corpus.txt" --model_type=unigram --normalization_rule_name=identity
  --remove_extra_whitespaces=false --num_threads=1 --minloglevel=2)
spm_train "${common[@]}" --model_prefix="$work/bytes" --vocab_size=460 --character_coverage=0.98 \
  --byte_fallback=true
spm_train "${common[@]}" --model_prefix="$work/fixture" --vocab_size=256 --character_coverage=1.0
mkdir -p "$here/spm_unigram"
cp "$work/bytes.model" "$here/spm_unigram/tokenizer.model"
cp "$work/fixture.model" "$here/../transformers/mistral/tokenizer.model"
echo "make_spm: wrote spm_unigram/tokenizer.model and ../transformers/mistral/tokenizer.model"
