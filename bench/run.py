#!/usr/bin/env python3
"""Run the benchmarks and write bench/results.json.

Every timing is a ratio against a baseline measured in the same run (the
machines are noisy); absolute times are kept beside the ratios for reference.
Usage: ``python bench/run.py [--only rigid ...] [--out bench/results.json]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SUITES = ["rigid", "constrained", "simulate", "speed", "controllers", "inversion",
          "ros_loop", "scenarios", "flexible",
          "elastic_joints", "flexible_parallel", "design", "flexible_design", "peers",
          "ros_memory", "design_tracking", "design_studies", "flexible_cart_design",
          "flexible_cart_readings", "flexible_shape", "batch",
          "flexible_cart_shape", "ros_launch", "flexible_closed_sampling",
          "flexible_scale", "live_viewer",
          "animation"]  # bench/bench_<name>.py, each with run() -> entries


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=SUITES, help="run only these suites")
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args(argv)

    import numpy
    import pinocchio

    results = {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"python": platform.python_version(), "processor": platform.machine(),
                    "pinocchio": pinocchio.__version__, "numpy": numpy.__version__},
        "suites": {},
    }
    out = Path(args.out)
    if out.exists() and args.only:  # keep the other suites' last figures
        results["suites"] = json.loads(out.read_text()).get("suites", {})
    failed = []
    for name in args.only or SUITES:
        module = importlib.import_module(f"bench.bench_{name}")
        print(f"[{name}]", flush=True)
        entries = module.run()
        results["suites"][name] = entries
        for e in entries:
            if "ratio" in e:
                flag = "" if "target_ratio" not in e else (
                    "  ok" if e["meets_target"] else f"  ABOVE TARGET {e['target_ratio']}")
                print(f"  {e['name']:40s} {e['ratio']:7.2f}x {e['baseline']:28s} "
                      f"({e['time_us']:.2f} us vs {e['baseline_time_us']:.2f} us){flag}")
                if e.get("meets_target") is False:
                    failed.append(e["name"])
            else:
                print(f"  {e['name']:40s} "
                      + ", ".join(f"{k}={v}" for k, v in e.items() if k != "name"))
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    if out.resolve() == (HERE / "results.json").resolve():  # README's tables (bench/report.py)
        from bench import report

        readme = HERE.parent / "README.md"
        try:
            readme.write_text(report.refresh(readme.read_text(), results))
        except report.ReportError as exc:
            print(f"README.md tables not refreshed: {exc}")
    if failed:
        print(f"{len(failed)} figure(s) above target: {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
