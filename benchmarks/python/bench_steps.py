# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""The Python benchmarks' steps, as benchmarks/steps.hpp makes them for the C++ ones:
query_start_loc and seq lengths (host lists) of each step."""


def spread_context(r):
    """Request r's length: contexts spread over 1K to 200K tokens, deterministically."""
    return 1024 + (r * 104729) % (200000 - 1024)


def mtp_decodes(n):
    """`n` MTP decodes of next_n 2."""
    return [2 * r for r in range(n + 1)], [spread_context(r) for r in range(n)]


def mixed_1024():
    """1016 MTP decodes, the 8192-token piece of a 1M-token chunked prefill, and seven
    short prompts: 1024 requests."""
    qsl, lens = mtp_decodes(1016)
    qsl.append(qsl[-1] + 8192)
    lens.append(1048576)
    for r in range(7):
        qsl.append(qsl[-1] + 200 + 300 * r)
        lens.append(200 + 300 * r)
    return qsl, lens
