"""The serving harness: real nginx, `rpp fake-runpod`, `rpp run`, `rpp nginx-reloader` and
inference-shaped client traffic, all on 127.0.0.1 (tests/serving/test_serving.py asserts the
targets on short runs; benchmarks/bench_serving.py runs them long and writes the figures).
"""
