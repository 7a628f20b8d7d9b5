"""Engram's compressed token map, from a byte-level BPE `tokenizer.json`, standard library only.

The official `build_compressed_token_map` (inference/engram.py) decodes every token id alone with
the raw Rust tokenizer, normalises the text with the `tokenizers` normalizer sequence
    NFKC, NFD, StripAccents, Lowercase, Replace([ \\t\\r\\n]+ -> " "), Replace(^ $ -> U+E000),
    Strip, Replace(U+E000 -> " ")
and numbers the distinct keys in id order (first occurrence gets the next id). A token whose
decoded text contains U+FFFD (a partial UTF-8 byte token) is keyed by its raw token string; an
empty normalisation falls back to the decoded text.

Here: decoding = added tokens give their content, others map byte-level characters back to bytes
and decode UTF-8 with replacement; StripAccents = drop code points of category Mn (what the Rust
normalizer does); Lowercase = str.lower(); Strip = str.strip(). These match `tokenizers` on the
tiny vocabularies used by the fixtures; on the full 129,280-token vocabulary they must give
`engram_compressed_vocab_size` = 99,092 (not checked here: the full tokenizer is not used).
"""

import json
import re
import unicodedata


def _byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def normalize(text):
    s = unicodedata.normalize("NFKC", text)
    s = unicodedata.normalize("NFD", s)
    s = "".join(ch for ch in s if unicodedata.category(ch) != "Mn")
    s = s.lower()
    s = re.sub(r"[ \t\r\n]+", " ", s)
    if s == " ":
        s = "\ue000"
    s = s.strip()
    return s.replace("\ue000", " ")


def build_compressed_token_map(tokenizer_json_path):
    with open(tokenizer_json_path, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a["content"] for a in tok.get("added_tokens", [])}
    n = max(list(vocab) + list(added)) + 1
    bd = _byte_decoder()
    key_to_new, lookup = {}, [0] * n
    for i in range(n):
        if i in added:
            raw, text = added[i], added[i]
        else:
            raw = vocab[i]
            text = bytes(bd[ch] for ch in raw).decode("utf-8", errors="replace")
        if "\ufffd" in text:
            key = raw
        else:
            key = normalize(text) or text
        if key not in key_to_new:
            key_to_new[key] = len(key_to_new)
        lookup[i] = key_to_new[key]
    return lookup, len(key_to_new)
