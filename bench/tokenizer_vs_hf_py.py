#!/usr/bin/env python3
"""Ours against HF tokenizers' Python package (e.g. 0.23 on the GPU machine) in one command.

  python3 bench/tokenizer_vs_hf_py.py TOKENIZER_BENCH TOKENIZER_JSON CORPUS_JSONL [REPEATS] > report.json

Runs our tokenizer_bench (single thread: encode parse/text, decode; it writes our ids), then HF
tokenizers in this process on one thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false,
Tokenizer.encode(doc, add_special_tokens=False) per document, best of REPEATS), the same for the
"text" mode (a copy of tokenizer.json with no added tokens), encode_batch on one thread, and decode.
Prints one JSON report with both results, the ratios and the identical-ids check on every document
(exit 1 if any document differs). The same protocol as bench/tokenizer_vs_hf.sh, whose peer is the
npm binding of the same Rust code.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    bench, tok_path, corpus = sys.argv[1:4]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    import tokenizers  # imported after the thread settings

    texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8") if l.strip()]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ours_ids.jsonl")
        out = subprocess.run([bench, tok_path, corpus, str(repeats), ids_path], check=True, capture_output=True,
                             text=True).stdout
        ours = json.loads(out)
        ours_ids = [json.loads(l) for l in open(ids_path, encoding="utf-8") if l.strip()]
    raw = open(tok_path, encoding="utf-8").read()
    parse_tok = tokenizers.Tokenizer.from_str(raw)
    plain = json.loads(raw)
    plain["added_tokens"] = []
    text_tok = tokenizers.Tokenizer.from_str(json.dumps(plain))
    hf = {"package": f"tokenizers {tokenizers.__version__} (Python)",
          "call": "Tokenizer.encode(doc, add_special_tokens=False) per document, best of repeats",
          "threads": 1, "repeats": repeats, "docs": len(texts), "bytes": nbytes}
    hf_ids = {}
    for name, tok in (("parse", parse_tok), ("text", text_tok)):
        best, ids = float("inf"), None
        for _ in range(repeats):
            t0 = time.perf_counter()
            ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
            best = min(best, time.perf_counter() - t0)
        n = sum(len(v) for v in ids)
        hf_ids[name] = ids
        hf[f"encode_{name}"] = {"tokens": n, "seconds": best, "MBps": nbytes / best / 1e6, "Mtokps": n / best / 1e6}
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        encs = parse_tok.encode_batch(texts, add_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
    n = sum(len(e.ids) for e in encs)
    hf["encode_parse_batch_1thread"] = {"tokens": n, "seconds": best, "MBps": nbytes / best / 1e6,
                                        "Mtokps": n / best / 1e6}
    n = sum(len(v) for v in hf_ids["parse"])
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for v in hf_ids["parse"]:
            parse_tok.decode(v, skip_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
    hf["decode_Mtokps"] = n / best / 1e6
    check = {}
    for name, key in (("parse", "ids"), ("text", "ids_text")):
        equal = sum(1 for i, t in enumerate(hf_ids[name]) if i < len(ours_ids) and ours_ids[i][key] == t)
        diff = [i for i, t in enumerate(hf_ids[name]) if i >= len(ours_ids) or ours_ids[i][key] != t][:5]
        check[name] = {"docs": len(texts), "identical": equal, "first_different_docs": diff}
    report = {"ours": ours, "hf": hf, "identical_ids": check,
              "identical": all(c["identical"] == len(texts) for c in check.values())}
    ratios = {}
    for name in ("parse", "text"):
        for kind in ("cold", "warm"):
            ratios[f"encode_{name}_{kind}"] = ours[f"encode_{name}"][f"{kind}_MBps"] / hf[f"encode_{name}"]["MBps"]
    ratios["encode_parse_warm_vs_hf_batch"] = ours["encode_parse"]["warm_MBps"] / hf["encode_parse_batch_1thread"]["MBps"]
    ratios["decode"] = ours["decode_Mtokps"] / hf["decode_Mtokps"]
    report["ratios_ours_over_hf"] = ratios
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
