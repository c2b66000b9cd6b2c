"""Sentence-parallel decoding: one process, a process pool and a Dask LocalCluster give the same output."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import synthetic_system
from minismt.decode import DecoderSettings
from minismt.parallel import DecodeJob, decode_corpus


@pytest.fixture(scope="module")
def model_and_sentences(tmp_path_factory):
    data, model = synthetic_system(tmp_path_factory, n_pairs=800, seed=9, dev=12, test=12)
    sentences = (data / "test.src").read_text().splitlines()
    # bad-input cases the decoder must survive: an empty line and an all-unknown-words sentence
    return str(model), sentences + ["", "zzqx yyqv xxqw"]


def outputs_key(outputs):
    return [(o.index, o.best, o.score, o.features.tolist(), list(zip(o.kbest.texts(), o.kbest.scores.tolist())))
            for o in outputs]


def assert_pool_and_dask_agree(job, sentences, serial):
    """A process pool and a Dask LocalCluster decode ``sentences`` as one process did (``serial``)."""
    pooled = decode_corpus(job, sentences, jobs=2, chunk_size=3)
    assert outputs_key(pooled) == outputs_key(serial)
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        distributed = decode_corpus(job, sentences, executor=client.get_executor(), chunk_size=5)
    assert outputs_key(distributed) == outputs_key(serial)


def test_process_pool_and_dask_cluster_equal_one_process(model_and_sentences):
    model, sentences = model_and_sentences
    job = DecodeJob(model, DecoderSettings(stack_size=30, kbest=5))
    serial = decode_corpus(job, sentences, chunk_size=4)
    assert [o.index for o in serial] == list(range(len(sentences)))
    assert serial[-2].best == ""
    assert serial[-1].best == "zzqx yyqv xxqw"                 # unknown words pass through
    assert serial[-1].features[-1] == -300.0                 # UnknownWordPenalty0_0: -100 per word
    assert_pool_and_dask_agree(job, sentences, serial)
    assert np.isfinite([o.score for o in serial]).all()


def test_hiero_decoding_and_forced_decoding_in_processes_and_on_dask(hiero_system):
    """A Hiero model's test set (its grammar's sentences) decoded in one process, a process pool and a
    Dask LocalCluster: the same translations, scores, features and k-best lists; forced decoding of
    the 1-best translations in a pool reaches every one with its decoded score or better."""
    from minismt.decode.hiero import grammar_for
    from minismt.parallel import force_corpus
    data, model = hiero_system
    sentences = (data / "test.src").read_text().splitlines()[:24]
    grammar = grammar_for(str(model), (data / "test.src").read_text().splitlines())
    job = DecodeJob(str(model), DecoderSettings(kbest=5), grammar=grammar)
    serial = decode_corpus(job, sentences, chunk_size=4)
    assert_pool_and_dask_agree(job, sentences, serial)
    forced = force_corpus(job, sentences, [o.best for o in serial], jobs=2, chunk_size=5)
    assert all(rows is not None and rows.texts() == [o.best] and rows.scores[0] >= o.score - 1e-9
               for rows, o in zip(forced, serial))


def _interrupt_handling() -> tuple[bool, bool]:
    """In a worker: (SIGINT ignored, SIGINT blocked)."""
    import signal
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.SIGINT in signal.pthread_sigmask(
        signal.SIG_BLOCK, [])


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="POSIX signal masks")
def test_pool_workers_ignore_ctrl_c_and_the_parent_still_takes_it():
    """Workers start with SIGINT blocked (a Ctrl-C while they import is held back) and then ignore it,
    unblocked; the parent's mask is as it was, so its own Ctrl-C still arrives."""
    import signal
    from minismt.parallel import process_pool
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with process_pool(2) as pool:
        assert [f.result() for f in [pool.submit(_interrupt_handling) for _ in range(4)]] == [(True, False)] * 4
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before and signal.SIGINT not in before


def _models_loaded() -> list:
    from minismt import parallel
    return list(parallel._MODELS)


def test_prepared_executor_loads_the_model_before_any_input_and_changes_no_output(model_and_sentences,
                                                                                   monkeypatch):
    """`minismt decode` loads its model (and the search kernels) before it reads a line, as Moses does: after
    :func:`prepared_executor` no chunk loads a model, here or in each worker of the pool it makes, and the
    translations and k-best lists are those of a decoder that loaded at its first chunk."""
    from minismt import parallel
    from minismt.decode import PhraseModel
    from minismt.parallel import prepared_executor, stop_pool
    model, sentences = model_and_sentences
    job = DecodeJob(model, DecoderSettings(stack_size=30, kbest=5))
    lazy = decode_corpus(job, sentences, chunk_size=4)
    monkeypatch.setattr(parallel, "_MODELS", {})
    monkeypatch.setattr(parallel, "_DECODERS", {})
    assert prepared_executor(job) is None and _models_loaded() == [model]

    def no_loading(*args, **kwargs):
        raise AssertionError("a model loaded after prepare")

    monkeypatch.setattr(PhraseModel, "load", no_loading)
    assert outputs_key(decode_corpus(job, sentences, chunk_size=4)) == outputs_key(lazy)
    monkeypatch.undo()
    pool = prepared_executor(job, jobs=2)
    try:
        loaded = {tuple(pool.submit(_models_loaded).result()) for _ in range(8)}
        assert loaded == {(model,)}  # every worker has the model before its first chunk
        assert outputs_key(decode_corpus(job, sentences, executor=pool, chunk_size=3)) == outputs_key(lazy)
    finally:
        stop_pool(pool)
