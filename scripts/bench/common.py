"""Helpers shared by the benchmark scripts."""
import statistics
import time


def median_ms(body, runs):
    """Median wall-clock time of `body()` over `runs` runs, in milliseconds."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        body()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000
