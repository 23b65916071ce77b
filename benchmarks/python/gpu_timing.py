# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""How the Python benchmarks time a call on the GPU and on the host, one way for all."""

import statistics
import time

import torch

LAUNCHES = 100  # calls captured in one graph (graph100)
TIMINGS = 15  # replays of that graph timed
CALLS = 300  # eager calls a host timing


def warm_up():
    """About 20 ms of a GPU spin before a timing, so that the clocks are up when it
    starts, as idxplan_bench_prepare spins its SMs before each of its timings."""
    torch.cuda._sleep(40 << 20)


def graph_us(launch):
    """Median microseconds a launch: LAUNCHES captured in one graph, replayed TIMINGS times."""
    launch()  # compiles and warms outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(LAUNCHES):
            launch()
    graph.replay()
    warm_up()
    times = []
    for _ in range(TIMINGS):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(1000.0 * start.elapsed_time(stop) / LAUNCHES)
    return statistics.median(times)


def host_us(call):
    """Mean host microseconds a call: CALLS eager calls back to back, then a sync."""
    call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return 1e6 * elapsed / CALLS
