#!/usr/bin/env python3
"""Makes the tokenizers kvactor's C++ tokenizers are checked against, and their goldens, with the
Hugging Face `tokenizers` library (run where it is installed; the H200 machine has it).

  make_goldens.py OUTDIR      writes OUTDIR/tokenizers/{llama3_bpe,gpt2_bpe,qwen2_bpe}/tokenizer.json,
                              OUTDIR/transformers/qwen2/tokenizer.json and
                              OUTDIR/tokenizers/goldens.json

Byte-level BPE: three small tokenizers trained by `tokenizers` itself on corpus.txt:
  llama3_bpe  Split(Llama 3 regex) + ByteLevel(use_regex=False), ignore_merges, TemplateProcessing
              adding <|begin_of_text|>, merges saved as ["a", "b"] lists
  gpt2_bpe    ByteLevel(use_regex=True) (the GPT-2 pattern), merges saved as "a b" strings
  qwen2_bpe   NFC + Split(Qwen2 regex) + ByteLevel(use_regex=False), ChatML special tokens and a
              non-special added token
and a fourth whose ids fit the transformers fixtures' vocab_size of 256 (<|pad|> 0,
<|begin_of_text|> 1, <|endoftext|> 2 as their config.json says), saved into the qwen2 fixture.

SentencePiece: make_spm.sh trains the models here with Debian's spm_train. Their goldens come
from a Hugging Face `tokenizers` Unigram built from the model's pieces and scores (read from the
protobuf by the small reader below, not by libsentencepiece) with the Llama converter's pipeline
(Prepend "▁", Replace " " -> "▁"; decoder Replace, ByteFallback, Fuse, Strip), so the encoder
that makes them is HF's Viterbi, not SentencePiece's. When transformers can also convert the
model itself (it needs the `sentencepiece` or `protobuf` package), its ids are recorded beside
them with whether they agree. On the H200 machine (tokenizers 0.23.2, transformers 5.17.0,
sentencepiece 0.2.2) they do not: transformers 5's LlamaTokenizer reads every tokenizer.model as a
BPE (vocabulary plus merges extracted from the pieces), which is not what a unigram model means;
its ids are kept in goldens.json for the record and not tested against.
"""
import json
import os
import platform
import struct
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = open(os.path.join(HERE, "corpus.txt"), encoding="utf-8").read().splitlines()

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

HARD = [
    "",
    "x",
    "Hello world",
    "Hello, world! How's it going? I'LL be there; they'RE here, we've, she'd, I'm, it'S",
    "   leading spaces and trailing spaces   ",
    "tabs\tand\nnewlines\r\n\n\nand  double  spaces \t\n",
    " \n \t\t \n",
    "digits 1234567 and 3.14159 and 2024-12-03 and ١٢٣ and ４２ and 00000000",
    "Grüße, naïve café, Ça va; déjà vu, SEÑOR",
    "combining: e\u0301 a\u0300 n\u0303 o\u0308\u0301 (decomposed) vs é à ñ",
    "Привет, мир! Γειά σου κόσμε. Ωμέγα",
    "中文测试：你好，世界！日本語のテキスト。한국어 텍스트",
    "مرحبا بالعالم नमस्ते दुनिया",
    "emoji 🙂😀 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🇩🇪 ❤️ 🤖",
    "<|begin_of_text|>Hello<|eot_id|> world<|end_of_text|>",
    "text with a special token <|eot_id|>in the middle",
    "<|begin_of_text|><|begin_of_text|>",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<s>Hello</s> world <unk>",
    "nbsp\u00a0and\u3000ideographic space and zero\u200bwidth",
    "code: def f(x):\n    return x**2  # square\n",
    "MiXeD CaSe 'S 'T 'Re 'VE 'M 'LL 'D",
    "a" * 50,
    "The model ends its answer here.",
]


def train_bpe(pre_tokenizer, normalizer=None, vocab_size=256 + 240, special=(),
              alphabet=True, ignore_merges=False):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if alphabet else [])
    tok.train_from_iterator(CORPUS, trainer)
    if ignore_merges:
        spec = json.loads(tok.to_str())
        spec["model"]["ignore_merges"] = True
        tok = Tokenizer.from_str(json.dumps(spec))
    return tok


def llama3_bpe():
    tok = train_bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
        ignore_merges=True)
    tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def gpt2_bpe():
    tok = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                    special=["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    return tok


def qwen2_bpe():
    tok = train_bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        normalizer=normalizers.NFC(), special=["<|endoftext|>"])
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken("kvactor", special=False, normalized=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def fixture_bpe():
    # Only the bytes the corpus holds are in the alphabet, so that 3 special tokens, the
    # alphabet and the merges fit in 256 ids; a byte outside it is dropped, as tokenizers does
    # for a BPE without unk_token.
    tok = train_bpe(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
        normalizer=normalizers.NFC(), vocab_size=256, alphabet=False,
        special=["<|pad|>", "<|begin_of_text|>", "<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    assert tok.get_vocab_size() <= 256, tok.get_vocab_size()
    assert [tok.token_to_id(t) for t in ("<|pad|>", "<|begin_of_text|>", "<|endoftext|>")] == [
        0, 1, 2]
    return tok


# --- SentencePiece: the model's protobuf, read without libsentencepiece ---------------------

def varint(b, i):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(b, i)
        elif wire == 1:
            value, i = b[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(b, i)
            value, i = b[i:i + n], i + n
        elif wire == 5:
            value, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


def read_spm(path):
    data = open(path, "rb").read()
    pieces, trainer, norm = [], {}, {}
    for number, value in fields(data):
        if number == 1:
            p = {"type": 1}
            for n, v in fields(value):
                if n == 1:
                    p["piece"] = v.decode("utf-8")
                elif n == 2:
                    p["score"] = struct.unpack("<f", v)[0]
                elif n == 3:
                    p["type"] = v
            pieces.append(p)
        elif number == 2:
            trainer = dict(fields(value))
        elif number == 3:
            norm = dict(fields(value))
    name = norm.get(1, b"").decode()
    assert name == "identity" and norm.get(4, 1) == 0 and norm.get(3, 1) == 1, (
        "make_spm.sh's models: identity rules, whitespace kept, dummy prefix")
    assert trainer.get(3, 1) == 1, "a unigram model"
    return pieces, bool(trainer.get(35, 0)), trainer.get(40, 0)


def spm_via_tokenizers(path, add_bos):
    pieces, byte_fallback, unk_id = read_spm(path)
    vocab = [(p["piece"], p.get("score", 0.0)) for p in pieces]
    tok = Tokenizer(models.Unigram(vocab, unk_id, byte_fallback))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    # unknown (2) and control (3) pieces are special, as the Llama converter makes them
    tok.add_special_tokens([AddedToken(p["piece"], special=True, normalized=False)
                            for p in pieces if p["type"] in (2, 3)])
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return tok


def spm_via_transformers(path):
    # transformers converts a directory's tokenizer.model itself when it loads it
    import shutil
    import tempfile
    import transformers
    d = tempfile.mkdtemp()
    shutil.copy(path, os.path.join(d, "tokenizer.model"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "legacy": True, "add_bos_token": True,
                   "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>"}, f)
    return transformers.AutoTokenizer.from_pretrained(d)


# --- goldens --------------------------------------------------------------------------------

def cases_of(tok):
    out = []
    for text in HARD:
        with_special = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        out.append({
            "text": text,
            "ids_with_special": with_special,
            "ids": plain,
            "decoded": tok.decode(with_special, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(with_special, skip_special_tokens=True),
            # each id alone: a multi-byte character split across tokens decodes to U+FFFD
            "decoded_each": [tok.decode([i], skip_special_tokens=False) for i in plain],
        })
    return out


def transformers_check(path, reference):
    try:
        t = spm_via_transformers(path)
        got = [t.encode(c["text"], add_special_tokens=True) for c in reference]
        agree = all(g == c["ids_with_special"] for g, c in zip(got, reference))
        import transformers
        return {"transformers": transformers.__version__, "class": type(t).__name__,
                "vocab_size": len(t),
                "agrees_on_ids_with_special": agree,
                "ids_with_special": got}
    except Exception as e:  # noqa: BLE001 - recorded, not hidden
        return {"unavailable": f"{type(e).__name__}: {e}"[:400]}


def compact(g):
    """goldens.json with one case per line, small and still readable in a diff."""
    one = lambda x: json.dumps(x, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
    lines = ['{"made_with": ' + one(g["made_with"]) + ",", ' "tokenizers": {']
    names = list(g["tokenizers"])
    for n, name in enumerate(names):
        t = g["tokenizers"][name]
        head = {k: v for k, v in t.items() if k != "cases"}
        lines.append("  " + json.dumps(name) + ": " + one(head)[:-1] + ', "cases": [')
        for i, c in enumerate(t["cases"]):
            lines.append("   " + one(c) + ("," if i + 1 < len(t["cases"]) else ""))
        lines.append("  ]}" + ("," if n + 1 < len(names) else ""))
    lines.append(" }}")
    return "\n".join(lines) + "\n"


def main():
    out = sys.argv[1]
    try:
        import sentencepiece  # noqa: F401
        has_spm = True
    except ImportError:
        has_spm = False
    made = {"llama3_bpe": llama3_bpe(), "gpt2_bpe": gpt2_bpe(), "qwen2_bpe": qwen2_bpe()}
    goldens = {"made_with": {"tokenizers": tokenizers.__version__,
                             "python": platform.python_version(),
                             "python_sentencepiece_installed": has_spm,
                             "script": "tests/data/tokenizers/make_goldens.py"},
               "tokenizers": {}}
    for name, tok in made.items():
        os.makedirs(os.path.join(out, "tokenizers", name), exist_ok=True)
        path = os.path.join(out, "tokenizers", name, "tokenizer.json")
        tok.save(path)
        if name == "gpt2_bpe":  # save() writes lists: keep the "a b" form in the file
            spec = json.load(open(path, encoding="utf-8"))
            spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(spec, f, ensure_ascii=False, indent=2)
        goldens["tokenizers"][name] = {"dir": f"tests/data/tokenizers/{name}",
                                       "cases": cases_of(tok)}
    fixture = fixture_bpe()
    os.makedirs(os.path.join(out, "transformers", "qwen2"), exist_ok=True)
    fixture.save(os.path.join(out, "transformers", "qwen2", "tokenizer.json"))
    goldens["tokenizers"]["qwen2_fixture"] = {"dir": "tests/data/transformers/qwen2",
                                              "cases": cases_of(fixture)}
    for name, path, bos in (
            ("spm_unigram", os.path.join(HERE, "spm_unigram", "tokenizer.model"), True),
            ("mistral_fixture", os.path.join(HERE, "..", "transformers", "mistral",
                                             "tokenizer.model"), True)):
        cases = cases_of(spm_via_tokenizers(path, bos))
        goldens["tokenizers"][name] = {
            "dir": os.path.relpath(os.path.dirname(path), os.path.join(HERE, "..", "..", "..")),
            "made_with": "tokenizers Unigram from the model's pieces (make_goldens.py read_spm), "
                         "Llama converter pipeline",
            "transformers_conversion": transformers_check(path, cases),
            "cases": cases}
    with open(os.path.join(out, "tokenizers", "goldens.json"), "w", encoding="utf-8") as f:
        f.write(compact(goldens))
    print("make_goldens: wrote", out, {k: len(v["cases"]) for k, v in
                                        goldens["tokenizers"].items()})


if __name__ == "__main__":
    main()
