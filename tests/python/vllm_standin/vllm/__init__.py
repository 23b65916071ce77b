# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""A stand-in for vLLM, holding only what idxplan.vllm_plugin and its builder touch
(tests/python/test_vllm_plugin.py puts it on sys.path). Not vLLM: names and
signatures as vLLM has them, bodies as small as the tests need."""
