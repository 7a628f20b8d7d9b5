#!/usr/bin/env python3
"""Derives a 1024-token tokenizer.json from DeepSeek's, for the tiny fixture models (vocab 1024).

Keeps base ids below FIRST_CONTROL (the 256 byte tokens live at 3..258, so every byte string
stays encodable), the merges whose parts and result all survive (in their original order), and
places the V4 control tokens the chat encoding needs at the top of the range. Usage:
    scripts/make_tiny_tokenizer.py tests/data/tokenizer/tokenizer.json tests/data/tiny-v4-b
"""
import json
import sys

VOCAB = 1024
CONTROL = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>",
           "<｜System｜>", "<|EOT|>"]
FIRST_CONTROL = VOCAB - len(CONTROL)


def main(src, out_dir):
    t = json.load(open(src, encoding="utf-8"))
    model = t["model"]
    vocab = {s: i for s, i in model["vocab"].items() if i < FIRST_CONTROL}
    merges = []
    for m in model["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append(m)
    model["vocab"] = vocab
    model["merges"] = merges
    added = [a for a in t["added_tokens"] if a["id"] < 3]  # BOS, EOS, pad keep their ids
    for i, content in enumerate(CONTROL):
        added.append({"id": FIRST_CONTROL + i, "content": content, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": content == "<|EOT|>"})
    t["added_tokens"] = added
    json.dump(t, open(out_dir + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
    cfg = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
           "pad_token": "<｜▁pad▁｜>", "model_max_length": 65536, "tokenizer_class": "LlamaTokenizerFast"}
    json.dump(cfg, open(out_dir + "/tokenizer_config.json", "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    print(f"{len(vocab)} base tokens, {len(merges)} merges, {len(added)} added tokens -> {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
