#!/usr/bin/env python3
"""The benchmark scripts' host-side logic (no GPU, no torch): bench/peer_transformers.py's config,
argument lists and row order, tools/device/collect_bench.py's merge of bench files and peer rows
into the results format (bench/results/*.json), and tools/device/results_table.py's table of one
(docs/performance.md) with the issue's targets judged per row; tools/device/loops.sh's reading of
compute-sanitizer output and its before / after bench configs; tools/device/kernel_timeline.py's
step, gaps and names from a kernel trace."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "bench", "peer_transformers.py")
COLLECT = os.path.join(ROOT, "tools", "device", "collect_bench.py")
TABLE = os.path.join(ROOT, "tools", "device", "results_table.py")
LOOPS = os.path.join(ROOT, "tools", "device", "loops.sh")
TIMELINE = os.path.join(ROOT, "tools", "device", "kernel_timeline.py")
RACECHECK_LOG = os.path.join(ROOT, "bench", "results", "logs", "twentyfourth-h100-racecheck-route.txt")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer = load(PEER, "peer_transformers")
results_table = load(TABLE, "results_table")


class PeerScript(unittest.TestCase):
    def test_config_is_consistent_and_uses_saved_field_names(self):
        cfg = peer.flash_config_dict(4)
        self.assertEqual(peer.check_config_dict(cfg), [])
        saved = os.path.join(ROOT, "tests", "data", "tiny-v4-a", "config.json")
        self.assertEqual(peer.check_field_names(cfg, saved), [])
        self.assertEqual(cfg["layer_types"], ["sliding_attention", "sliding_attention",
                                              "compressed_sparse_attention", "heavily_compressed_attention"])
        self.assertEqual(cfg["mlp_layer_types"], ["hash_moe"] * 3 + ["moe"])

    def test_layer_count_out_of_range_is_refused(self):
        with self.assertRaises(ValueError):
            peer.flash_config_dict(44)

    def test_rows_run_cheapest_first_without_repeats(self):
        args = peer.parse_args(["--batches", "32,1,256,1", "--contexts", "32768,4096",
                                "--prefill-tokens", "8192,1024"])
        rows = [(r["phase"], r["batch"], r["context"]) for r in peer.planned_rows("v4-flash-4", args)]
        # 32 x 32768 and 256 x 4096 fill the same tokens: the smaller batch first
        self.assertEqual(rows, [("prefill", 1, 1024), ("prefill", 1, 8192),
                                ("decode", 1, 4096), ("decode", 1, 32768), ("decode", 32, 4096),
                                ("decode", 32, 32768), ("decode", 256, 4096), ("decode", 256, 32768)])

    def test_defaults_are_the_published_peer_shapes(self):
        args = peer.parse_args([])
        rows = [(r["phase"], r["batch"], r["context"]) for r in peer.planned_rows("v4-flash-4", args)]
        self.assertEqual(rows, [("prefill", 1, 2048), ("decode", 1, 4096), ("decode", 32, 4096)])

    def test_bad_lists_are_usage_errors(self):
        for argv in (["--batches", "0"], ["--contexts", "4k"], ["--prefill-tokens", ""], ["--steps", "3"]):
            with self.subTest(argv=argv), self.assertRaises(SystemExit) as cm:
                with open(os.devnull, "w") as devnull:
                    stderr, sys.stderr = sys.stderr, devnull
                    try:
                        peer.parse_args(argv)
                    finally:
                        sys.stderr = stderr
            self.assertEqual(cm.exception.code, 2)

    def test_plan_prints_rows_without_torch(self):
        out = subprocess.run([sys.executable, PEER, "--plan", "--batches", "8", "--contexts", "4096"],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual([json.loads(line) for line in out.splitlines()],
                         [{"model": "v4-flash-4", "phase": "prefill", "batch": 1, "context": 2048},
                          {"model": "v4-flash-4", "phase": "decode", "batch": 8, "context": 4096}])


def bench_file(batch, prompt, gen, prefill_tps, step_ms=2.0, floor_ms=1.0, **extra):
    doc = {"synthetic": {"spec": "v4-flash", "layers": 4, "experts": 256}, "batch": batch,
           "prompt_len": prompt, "gen_len": gen, "prefill_tokens_per_s": prefill_tps,
           "decode_step_ms": step_ms, "decode_floor_ms": floor_ms,
           "decode_tokens_per_s": batch * 1e3 / step_ms}
    doc.update(extra)
    return doc


class CollectBench(unittest.TestCase):
    def collect(self, benches, peer_doc):
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for i, b in enumerate(benches):
                files.append(os.path.join(tmp, f"bench-{i}.json"))
                with open(files[-1], "w") as f:
                    json.dump(b, f)
            peer_path = os.path.join(tmp, "peer.json")
            with open(peer_path, "w") as f:
                json.dump(peer_doc, f)
            out = subprocess.run([sys.executable, COLLECT, "--machine", "m", "--git-rev", "r", "--command", "c",
                                  "--peer", peer_path] + files, capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    def test_rows_floors_and_peers_by_shape(self):
        peer_doc = {"model": "v4-flash-4", "rows": [
            {"phase": "decode", "batch": 32, "context": 4096, "tokens_per_s": 800.0},
            {"phase": "decode", "batch": 32, "context": 32768, "tokens_per_s": 500.0},
            {"phase": "prefill", "batch": 1, "context": 8192, "tokens_per_s": 20000.0}]}
        doc = self.collect([
            bench_file(32, 32768, 8, None, step_ms=4.0, floor_ms=2.0, fill_state=True),
            bench_file(1, 8192, 2, 100000.0, prefill_floor_ms=40.0),
        ], peer_doc)
        self.assertEqual(doc["machine"], "m")
        rows = [(r["phase"], r["batch"], r["context"], r["floor_ratio"], (r["peer"] or {}).get("tokens_per_s"))
                for r in doc["rows"]]
        # the filled state has no prefill row; its decode row's peer is the 32k one
        self.assertEqual(rows, [("decode", 32, 32772, 2.0, 500.0),
                                ("prefill", 1, 8192, 2.05, 20000.0),
                                ("decode", 1, 8193, 2.0, None)])
        self.assertAlmostEqual(doc["rows"][1]["step_ms"], 81.92)
        self.assertEqual(doc["rows"][0]["tokens_per_s"], 8000.0)


class ResultsTable(unittest.TestCase):
    ROWS = [
        {"model": "v4-flash-4", "phase": "decode", "batch": 32, "context": 4100, "tokens_per_s": 8000.0,
         "step_ms": 4.0, "floor_ms": 3.2, "floor_ratio": 1.25, "peer": {"name": "transformers", "tokens_per_s": 800.0}},
        {"model": "v4-flash-4", "phase": "decode", "batch": 1, "context": 4100, "tokens_per_s": 800.0,
         "step_ms": 1.25, "floor_ms": 0.625, "floor_ratio": 2.0, "peer": {"name": "transformers", "tokens_per_s": 28.0}},
        {"model": "v4-flash-4", "phase": "prefill", "batch": 1, "context": 8192, "tokens_per_s": 150000.0,
         "step_ms": 54.6, "floor_ms": 15.0, "floor_ratio": 3.64, "peer": None},
        {"model": "v4-flash-ep8", "phase": "decode", "batch": 256, "context": 4098, "tokens_per_s": 26000.0,
         "step_ms": 9.8, "floor_ms": 7.0, "floor_ratio": 1.4, "peer": None},
        {"model": "v4-flash-4", "phase": "decode", "batch": 128, "context": 4100, "tokens_per_s": 20000.0,
         "step_ms": 6.4, "floor_ms": 4.0, "floor_ratio": 1.6, "peer": None},
    ]

    def test_targets_per_row(self):
        verdicts = [results_table.target(r) for r in self.ROWS]
        self.assertEqual(verdicts[0], "<= 1.3x floor: met; >= 5x peer: met")
        self.assertEqual(verdicts[1], "<= 1.3x floor: missed; >= 40x peer: missed")  # 28.6x
        self.assertEqual(verdicts[2], ">= 50% FP8: missed")
        self.assertEqual(verdicts[3], ">= 25,000 tok/s: met")
        self.assertEqual(verdicts[4], "", "no target at batch 128")

    def test_table_rows_sorted_with_peer_ratio(self):
        text = results_table.table({"rows": self.ROWS}, with_targets=True)
        lines = text.splitlines()
        self.assertEqual(len(lines), 2 + len(self.ROWS))
        self.assertTrue(lines[2].startswith("| v4-flash-4 | decode | 1 | 4100 | 800 | 1.250 | 0.625 | 2.00 | 28.0 | 28.6 |"),
                        lines[2])
        self.assertIn("| v4-flash-4 | decode | 32 | 4100 | 8,000 |", lines[3])
        self.assertTrue(lines[-1].startswith("| v4-flash-ep8 | decode | 256 |"), lines[-1])
        self.assertEqual(lines[0].count("|"), lines[1].count("|"))


class SanitizerReading(unittest.TestCase):
    """san_library_only: a sanitizer run counts clean only when every report is in NVIDIA's kernels."""

    def library_only(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        try:
            cmd = f'source "{LOOPS}" >/dev/null && san_library_only "{f.name}"'
            return subprocess.run(["bash", "-c", cmd], capture_output=True).returncode == 0
        finally:
            os.unlink(f.name)

    def test_reports_in_cublas_kernels_only(self):
        with open(RACECHECK_LOG) as f:
            log = f.read()
        self.assertTrue(self.library_only(log))
        # one report in a kernel of ours, the tests failing, or no report at all: not exempt
        self.assertFalse(self.library_only(log.replace("nvjet_sm90_tss_64x8", "router_logits_staged_kernel", 1)))
        self.assertFalse(self.library_only(log.replace("[  PASSED  ]", "[  FAILED  ]")))
        self.assertFalse(self.library_only("========= ERROR SUMMARY: 0 errors\n[  PASSED  ] 3 tests.\n"))


class BeforeTwins(unittest.TestCase):
    """ab_pairs: each bench config, then its before- twin (run with the build before the change);
    ab_sets: a twin per named build."""

    def pairs(self, text):
        cmd = f'source "{LOOPS}" >/dev/null && ab_pairs "$1"'
        return subprocess.run(["bash", "-c", cmd, "x", text], capture_output=True, text=True, check=True).stdout

    def test_each_line_then_its_twin(self):
        out = self.pairs("p8k --synthetic v4-flash:4 --prompt-len 8192\n\nb32 --batch 32 --fill-state")
        self.assertEqual(out.splitlines(), [
            "p8k --synthetic v4-flash:4 --prompt-len 8192", "before-p8k --synthetic v4-flash:4 --prompt-len 8192",
            "b32 --batch 32 --fill-state", "before-b32 --batch 32 --fill-state"])
        self.assertEqual(self.pairs(""), "")

    def test_sets_of_stacked_builds(self):
        """ab_sets: each config, then one twin per carried build, in the order named."""
        cmd = f'source "{LOOPS}" >/dev/null && ab_sets "$1" "$2"'
        out = subprocess.run(["bash", "-c", cmd, "x", "mid before", "b1 --batch 1\n\nep256 --batch 256"],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(out.splitlines(), ["b1 --batch 1", "mid-b1 --batch 1", "before-b1 --batch 1",
                                            "ep256 --batch 256", "mid-ep256 --batch 256", "before-ep256 --batch 256"])

    def test_decode_rows_by_name(self):
        """decode_ab_configs: bN / epN names (a letter suffix for repeats) to their bench rows, paired."""
        cmd = f'source "{LOOPS}" >/dev/null && decode_ab_configs "$1"'
        out = subprocess.run(["bash", "-c", cmd, "x", "b1 ep256 b8b"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        f4 = "--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
        ep = "--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
        self.assertEqual(out, [f"b1 {f4} --batch 1", f"before-b1 {f4} --batch 1", f"ep256 {ep}", f"before-ep256 {ep}",
                               f"b8b {f4} --batch 8", f"before-b8b {f4} --batch 8"])


class TestSpecs(unittest.TestCase):
    """run_test_specs: each "BOX:TEST[:FILTER]" run with its filter; TEST_RC 1 when any failed."""

    def run_specs(self, *specs):
        with tempfile.TemporaryDirectory() as d:
            for name, rc in (("good", 0), ("bad", 1)):  # gtest-like: prints its filter, exits rc
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(f'#!/bin/sh\necho "[       OK ] $GTEST_FILTER"\nexit {rc}\n')
                os.chmod(path, 0o755)
            cmd = (f'source "{LOOPS}" >/dev/null && BIN="{d}" OUT="{d}" && run_test_specs "$@" && '
                   f'echo "rc=$TEST_RC" && cat "{d}"/test-good.txt')
            return subprocess.run(["bash", "-c", cmd, "x", *specs], capture_output=True, text=True,
                                  check=True).stdout

    def test_rc_and_filters(self):
        out = self.run_specs("20:good:Suite.One*")
        self.assertIn("rc=0", out)
        self.assertIn("[       OK ] Suite.One*", out)
        self.assertIn("rc=1", self.run_specs("20:bad", "20:good"))
        self.assertIn("[       OK ] *", self.run_specs("20:good"))  # no filter: every test


class KernelTimeline(unittest.TestCase):
    def test_last_step_span_gaps_and_names(self):
        rows = [  # start_ns, end_ns, stream, channel, name
            (0, 1000, 7, 1, "deepinfer::(anonymous namespace)::sample_kernel(deepinfer::GpuSampleArgs)"),
            (2000, 3000, 7, 1, "deepinfer::(anonymous namespace)::embed_kernel(int const*)"),
            (3500, 6000, 7, 1, "void deepinfer::(anonymous namespace)::fp8_wgmma_kernel<16>(Args)"),
            (4000, 5000, 9, 2, "nvjet_sm90_tss_64x16"),
            (8000, 9000, 7, 1, "deepinfer::(anonymous namespace)::sample_kernel(deepinfer::GpuSampleArgs)"),
            (10000, 11000, 7, 1, "deepinfer::(anonymous namespace)::embed_kernel(int const*)"),
        ]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.csv")
            with open(path, "w") as f:
                f.write("start_ns,end_ns,stream,channel,graph,name\n")
                for a, b, st, ch, n in reversed(rows):  # any order: the script sorts by start
                    f.write(f"{a},{b},{st},{ch},0,{n}\n")
            out = subprocess.run([sys.executable, TIMELINE, path], capture_output=True, text=True, check=True).stdout
        # The step: embed .. the second sample_kernel (4 kernels), 2000 -> 9000 ns.
        self.assertIn("step: 4 kernels, span 7.0 us, kernels' own times summed 5.5 us", out)
        # Idle: 3000-3500 and 6000-8000.
        self.assertIn("no kernel running 2.5 us in 2 gaps", out)
        self.assertIn("fp8_wgmma_kernel<16>", out)
        self.assertNotIn("deepinfer::", out.split("kernel\n", 1)[1])
        self.assertIn("widest gaps (us at, us long): 4.0: 2.00, 1.0: 0.50", out)


if __name__ == "__main__":
    unittest.main()
