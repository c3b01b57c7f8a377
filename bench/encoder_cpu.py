"""CPU seconds per 1,000 of bench/million.py's short records through the int8 ONNX encoder, this checkout
against another (`--code`), in paired processes that alternate so that both see the same load; and how
close their vectors are, to each other and to the fp32 encoder's.

    python bench/encoder_cpu.py --code /path/to/other/checkout [--records 3000] [--rounds 2]

The texts are what ingest embeds (each record's text, as `Engine.ingest` builds it from bench/fleet.py's
synthetic events), captured once through a hash encoder. Each process loads the model, warms it up, and
times one `encode` of every text (process CPU: both encoder threads).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from common import RESULTS, machine, write_json  # noqa: E402


def record_texts(n: int, folder: Path) -> list[str]:
    """The texts ingest embeds for `n` synthetic records."""
    from fleet import synthetic_logs
    from million import HashEmbedder

    from expengine import Engine

    captured: list[str] = []

    class Capture(HashEmbedder):
        def encode(self, texts: list[str]) -> Any:
            captured.extend(texts)
            return super().encode(texts)

    files = synthetic_logs(folder / "logs", n, files=1)
    with Engine(store=folder / "store", embedder=Capture()) as engine:
        engine.ingest([str(files[0])])
    return captured


def child(code: str, texts_file: str, out: str, encoder: str) -> None:
    """In a fresh process with `code` first on the path: time one encode of the texts, save the vectors."""
    sys.path.insert(0, code)
    import numpy as np

    from expengine.models.embedder import get_embedder

    texts = pickle.loads(Path(texts_file).read_bytes())
    embedder = get_embedder(encoder=encoder)
    embedder.encode(["warm up the model once"] * 8)
    cpu = time.process_time()
    vectors = embedder.encode(texts)
    cpu = time.process_time() - cpu
    np.save(out, vectors)
    print(json.dumps({"cpu_s_per_1k": round(cpu / len(texts) * 1000, 2), "load": round(os.getloadavg()[0], 2)}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, help="the other checkout (e.g. main's worktree)")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "encoder-cpu.json")
    parser.add_argument("--child", nargs=4, metavar=("CODE", "TEXTS", "OUT", "ENCODER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if args.code is None:
        parser.error("--code is required")
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="bench-encoder-cpu-") as tmp:
        folder = Path(tmp)
        texts = folder / "texts.pkl"
        texts.write_bytes(pickle.dumps(record_texts(args.records, folder)))
        codes = {"other": str(args.code.resolve()), "this": str(REPO)}

        def run(code: str, out: Path, encoder: str = "onnx-int8") -> dict[str, Any]:
            done = subprocess.run(
                [sys.executable, __file__, "--child", code, str(texts), str(out), encoder],
                check=True,
                capture_output=True,
                text=True,
            )
            return json.loads(done.stdout.strip().splitlines()[-1])

        timed: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
        for _ in range(args.rounds):
            for name, code in codes.items():
                timed[name].append(run(code, folder / f"{name}.npy"))
                print(name, timed[name][-1], file=sys.stderr, flush=True)
        run(codes["other"], folder / "fp32.npy", "onnx")
        vectors = {name: np.load(folder / f"{name}.npy") for name in (*codes, "fp32")}

    def cosine(a: str, b: str) -> dict[str, float]:
        both = (vectors[a] * vectors[b]).sum(axis=1)
        return {"mean": round(float(both.mean()), 4), "min": round(float(both.min()), 4)}

    report = {
        "machine": machine(),
        "argv": sys.argv[1:],
        "records": args.records,
        "cpu_s_per_1k": timed,
        "cosine_this_other": cosine("this", "other"),
        "cosine_to_fp32": {name: cosine(name, "fp32") for name in codes},
    }
    write_json(args.out, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
