# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's get_compressed_slot_mapping, recording its calls: a compressed key's slot
at each token that completes one, -1 elsewhere."""

calls = []


def get_compressed_slot_mapping(num_tokens, query_start_loc, seq_lens, block_table, num_states, compress_ratio,
                                out=None):
    calls.append(dict(num_tokens=num_tokens, block_table=block_table, num_states=num_states,
                      compress_ratio=compress_ratio, out=out))
    qsl = [int(x) for x in query_start_loc]
    out[:] = -1
    for r in range(len(qsl) - 1):
        for t in range(qsl[r], min(qsl[r + 1], num_tokens)):
            position = int(seq_lens[r]) - (qsl[r + 1] - t)
            if (position + 1) % compress_ratio == 0:
                key = position // compress_ratio
                out[t] = int(block_table[r, key // num_states]) * num_states + key % num_states
    return out[:num_tokens]
