"""What the Python peers of `make bench` share: their command line and a warmed-up median over repetitions."""

import argparse
import pathlib
import statistics
import time


def peer_arguments(doc):
    """DATA_DIR (the .npy inputs single_rank_bench wrote), OUT_JSON and --repetitions."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("data_dir", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--repetitions", type=int, default=7)
    return parser.parse_args()


def time_median(fn, repetitions):
    """Median wall time of `fn()` over `repetitions` calls after one untimed warm-up call (first touch of
    the library's temporaries), and the samples."""
    fn()
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples
