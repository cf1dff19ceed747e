"""Timing shared by the Python peers of `make bench`: a warmed-up median over repetitions."""

import statistics
import time


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
