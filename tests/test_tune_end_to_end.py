"""minismt tune on a small synthetic model: every n-best tuner runs the real loop with the real decoder."""

from __future__ import annotations

import pytest

from corpora.synthetic import write_synthetic
from minismt.cli import main
from minismt.features import read_weights
from minismt.io import read_lines
from minismt.metrics import corpus_bleu
from minismt.train import Trainer, TrainingConfig


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    write_synthetic(data, n_pairs=1500, seed=5, dev=40, test=40)
    model = tmp_path_factory.mktemp("model")
    Trainer(TrainingConfig(src=str(data / "train.src"), tgt=str(data / "train.tgt"), out=str(model),
                           lm_order=3, progress=False)).run()
    return data, model


@pytest.mark.parametrize("tuner", ["mert", "pro", "apro", "kbmira", "o-oro", "listmle-te", "structsvm"])
def test_tune_runs_and_writes_weights(system, tuner, tmp_path):
    data, model = system
    run_dir = tmp_path / tuner
    args = ["tune", "--model", str(model), "--dev-src", str(data / "dev.src"), "--dev-ref",
            str(data / "dev.tgt"), "--tuner", tuner, "--iterations", "2", "--kbest", "20",
            "--stack", "50", "--run-dir", str(run_dir), "--quiet"]
    assert main(args) == 0
    weights = read_weights(run_dir / "weights.final")
    assert "LM0_0" in weights and len(weights) == 15
    assert read_lines(run_dir / "tune.log")
    # resuming a finished run does nothing and gives the same weights
    assert main(args) == 0
    assert read_weights(run_dir / "weights.final") == weights


@pytest.mark.parametrize("tuner, params, extra", [
    ("hg-mert", [], []), ("hg-bo", ["steps=6"], []), ("chg-bo", ["steps=6"], []), ("hg-rembo", ["steps=6"], []),
    ("nbl-bo", ["steps=6"], []),
    ("hg-rembo", ["steps=10"], ["--sparse-features", "rule-id,word-pair", "--keep", "last"])])
def test_hypergraph_and_bo_tuners_run_on_the_decoders_forests(system, tuner, params, extra, tmp_path):
    """Hypergraph MERT and the BO tuners through the real loop: forests (or k-best lists for NBL-BO) of the
    real decoder, best-dev weights written, a finished run resumes to the same weights. HG-REMBO with the
    decoder's sparse features gets them in its space and never ends an iteration below its start on the
    forests it tuned on; whether 10 BO steps on 40 sentences find a better sparse point depends on the seed
    (and on scikit-learn's floating-point path), so that it moves them is tested where the effect is certain
    (test_tuner_bayesopt.py::test_hg_rembo_moves_sparse_weights_that_decide_the_translations)."""
    data, model = system
    run_dir = tmp_path / tuner
    args = ["tune", "--model", str(model), "--dev-src", str(data / "dev.src"), "--dev-ref",
            str(data / "dev.tgt"), "--tuner", tuner, "--iterations", "2", "--kbest", "20",
            "--stack", "20", "--run-dir", str(run_dir), "--quiet"] + extra
    for item in params:
        args += ["--tuner-param", item]
    assert main(args) == 0
    weights = read_weights(run_dir / "weights.final")
    assert sum("tuned BLEU" in line for line in read_lines(run_dir / "tune.log")) == 2  # and any rejected trials
    if extra:
        sparse = {n: v for n, v in weights.items() if n.startswith(("RuleId_", "WordPair_"))}
        assert len(sparse) > 100 and all(abs(v) <= 2 * 0.1 for v in sparse.values())  # two boxes of +-0.1
        assert all(r["tuned_bleu"] >= r["dev_bleu"] for r in json_history(run_dir))
    else:
        assert len(weights) == 15
    assert main(args) == 0
    assert read_weights(run_dir / "weights.final") == weights


def test_decode_with_tuned_weights_and_kbest(system, tmp_path):
    data, model = system
    out = tmp_path / "out.txt"
    assert main(["decode", "--model", str(model), "--input", str(data / "test.src"), "--output",
                 str(out), "--kbest", "5", "--kbest-out", str(tmp_path / "nbest"), "--stack", "50",
                 "--hypergraph-dir", str(tmp_path / "hg"), "--quiet"]) == 0
    hyps = read_lines(out)
    refs = [[r] for r in read_lines(data / "test.tgt")]
    assert len(hyps) == 40 and corpus_bleu(hyps, refs) > 0.2
    from plugins.moses.nbest import read_nbest
    kbest = read_nbest(tmp_path / "nbest")
    assert kbest.n_instances == 40
    assert len(list((tmp_path / "hg").iterdir())) == 40


def test_tune_init_weights_must_cover_the_model(system, tmp_path, capsys):
    """--init with a dense feature missing, or an unknown name, is one clear error naming the file."""
    data, model = system
    from minismt.manifest import load_manifest
    names = load_manifest(str(model))["features"]
    base = ["tune", "--model", str(model), "--dev-src", str(data / "dev.src"), "--dev-ref",
            str(data / "dev.tgt"), "--tuner", "apro", "--iterations", "1", "--kbest", "5",
            "--stack", "20", "--quiet"]
    missing = tmp_path / "missing.txt"
    missing.write_text("".join(f"{n} 0.1\n" for n in names[1:]))
    assert main(base + ["--run-dir", str(tmp_path / "a"), "--init", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and names[0] in err and "miss 1 dense feature" in err
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("".join(f"{n} 0.1\n" for n in names) + "NoSuchFeature0_0 1\n")
    assert main(base + ["--run-dir", str(tmp_path / "b"), "--init", str(unknown)]) == 2
    assert "unknown feature name 'NoSuchFeature0_0'" in capsys.readouterr().err
    full = tmp_path / "full.txt"
    full.write_text("".join(f"{n} {0.5 if n.startswith('LM') else 0.1}\n" for n in names))
    assert main(base + ["--run-dir", str(tmp_path / "c"), "--init", str(full)]) == 0
    first = json_history(tmp_path / "c")[0]["weights"]
    assert first == [0.5 if n.startswith("LM") else 0.1 for n in names]


def json_history(run_dir):
    import json
    return json.loads((run_dir / "history.json").read_text())


def test_forced_decoding_gives_reference_features(system):
    """The dev decoder's forced decoding: reachable references get the features of a derivation of
    exactly that string, scoring no higher than the free 1-best; unreachable ones an empty instance."""
    data, model = system
    from tuners.devdecoder import MinismtDevDecoder
    sources, references = read_lines(data / "dev.src")[:15], read_lines(data / "dev.tgt")[:15]
    decoder = MinismtDevDecoder(str(model), sources, kbest=5, stack_size=50)
    w = decoder.default_weights
    forced = decoder.force(w, references, iteration=0)
    kbest, _ = decoder.decode(w, 0)
    assert forced.n_instances == 15
    reachable = [i for i in range(15) if forced.offsets[i + 1] > forced.offsets[i]]
    # verb-final to verb-second reordering puts many references beyond the distortion limit
    assert 1 <= len(reachable) < 15
    best_scores = kbest.scores(w)
    for i in reachable:
        row = forced.offsets[i]
        assert forced.hypothesis(row) == references[i]
        assert forced.scores(w)[row] <= best_scores[kbest.offsets[i]] + 1e-9
