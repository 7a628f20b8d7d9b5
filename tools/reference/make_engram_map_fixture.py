"""Writes tests/data/engram/tokenizer-map.json.gz: the compressed token map that
tokenizer_compress.py (the Python normaliser) derives from tests/data/tokenizer/tokenizer.json (the
128,815-token DeepSeek byte-level BPE vocabulary), plus the ids of the tokens whose text NFD changes
after NFKC and of those where str.lower() applies the final-sigma rule, so that the C++ derivation
(src/model/deepseek_v41/engram_token_map.cpp) is checked on exactly the cases where the steps matter.

Run from the repository root: python3 tools/reference/make_engram_map_fixture.py
"""

import gzip
import json
import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_compress as tc  # noqa: E402

SRC = "tests/data/tokenizer/tokenizer.json"
DST = "tests/data/engram/tokenizer-map.json.gz"


def main():
    lookup, n = tc.build_compressed_token_map(SRC)
    with open(SRC, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a["content"] for a in tok.get("added_tokens", [])}
    bd = tc._byte_decoder()
    nfd_differs, final_sigma, lower_special = [], [], []
    for i in range(len(lookup)):
        if i in added:
            text = added[i]
        else:
            text = bytes(bd[ch] for ch in vocab[i]).decode("utf-8", errors="replace")
        if "\ufffd" in text:
            continue
        k = unicodedata.normalize("NFKC", text)
        if unicodedata.normalize("NFD", k) != k:
            nfd_differs.append(i)
        if "\u03a3" in k:
            final_sigma.append(i)
        if any(len(ch.lower()) > 1 for ch in k):
            lower_special.append(i)
    out = {
        "source": SRC,
        "generator": "tools/reference/make_engram_map_fixture.py (tokenizer_compress.py, Python %s, Unicode %s)"
                     % (sys.version.split()[0], unicodedata.unidata_version),
        "compressed_vocab_size": n,
        "token_map": lookup,
        "nfd_differs_ids": nfd_differs,
        "capital_sigma_ids": final_sigma,
        "full_lowercase_ids": lower_special,
    }
    os.makedirs(os.path.dirname(DST), exist_ok=True)
    with gzip.GzipFile(DST, "wb", mtime=0) as f:
        f.write(json.dumps(out, separators=(",", ":")).encode())
    print(DST, len(lookup), "tokens,", n, "keys,", len(nfd_differs), "NFD-differs,", len(final_sigma), "sigma,",
          len(lower_special), "full-lowercase")


if __name__ == "__main__":
    main()
