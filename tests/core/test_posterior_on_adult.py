"""The learned-model gate's deliberately leaky candidate on real data (issue 12): P1's grouping on Adult.

P1 groups rule holders without looking at their quasi-identifiers; on Adult relationship is almost a
function of sex × marital-status, so the adversary tells SAC~ partners apart. The QI-aware grouping
(same quasi-identifiers first, the rest generalized) leaves it nothing inside the groups."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.hierarchies import load_available_hierarchies
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
import numpy as np
import pandas as pd
import pytest

from pipeline.core.posterior import release_posteriors
from tests.core.reference_algorithms import reference_fold_em_path, reference_posterior_bound_summary
from pipeline.core.rules import mine_strong_rules

QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE = ["education", "occupation", "age", "relationship"]
HIERARCHIES = Path(__file__).resolve().parents[2] / "data" / "adult" / "hierarchies"
SECRET = bytes(range(32))


def _release_tables(records, grouping: str):
    """The mixed release of ``records`` with ``grouping`` (``p1``: the leaky candidate; ``qi_aware``: generalized)."""
    rules = mine_strong_rules(records, SENSITIVE, min_confidence=0.8, min_support=5)
    result = run_mixed_model(
        records,
        SENSITIVE,
        ell=3,
        min_confidence=0.8,
        seed=0,
        rules=rules,
        secret=SECRET,
        quasi_identifiers=QUASI_IDENTIFIERS,
        grouping=grouping,
    )
    return assemble_release_tables(
        records,
        QUASI_IDENTIFIERS,
        SENSITIVE,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
        secret=SECRET,
        generalize=grouping == "qi_aware",
        hierarchies=load_available_hierarchies(HIERARCHIES, QUASI_IDENTIFIERS),
    )


def _posteriors(records, tables, **options):
    """The learned-model adversary (gate 9) on the release ``tables`` of ``records`` at ℓ = 3."""
    return release_posteriors(
        records,
        tables.row_map,
        QUASI_IDENTIFIERS,
        SENSITIVE,
        ell=3,
        **_release_arguments(tables),
        **options,
    )


def _sac_cells_above(records, grouping: str) -> tuple[int, int]:
    tables = _release_tables(records, grouping)
    posterior = _posteriors(records, tables)
    return int(posterior.summary["n_sac_cells_above_bound"]), len(tables.sac_released) * len(SENSITIVE)


def test_p1_grouping_on_adult_is_caught_and_qi_aware_grouping_passes_inside_groups(adult_records):
    records = adult_records.iloc[:8000].reset_index(drop=True)
    above_p1, cells_p1 = _sac_cells_above(records, "p1")
    above_aware, cells_aware = _sac_cells_above(records, "qi_aware")
    assert cells_p1 > 0 and cells_aware > 0
    assert above_p1 > 0.1 * cells_p1  # a large share of SAC~ cells above max(1/ℓ, population) + 0.05
    assert above_aware == 0


def test_fitting_on_a_sample_of_whole_groups_finds_the_same_leak(adult_records):
    """Above ``fit_max_records`` the adversary fits its model on a fixed sample of whole groups and SIDs
    and still computes every record's exact posterior. On the leaky candidate (P1 grouping, 8,000 Adult
    records) a model fitted on about a quarter of the records must find nearly the same cells above the
    bound and nearly the same mean posterior as the model fitted on all of them (within 10 % and 0.02)."""
    records = adult_records.iloc[:8000].reset_index(drop=True)
    tables = _release_tables(records, "p1")
    full = _posteriors(records, tables, fit_max_records=None)
    sampled = _posteriors(records, tables, fit_max_records=2_000)
    assert len(sampled.frame) == len(full.frame)  # every record is still scored
    above_full, above_sampled = full.summary["n_sac_cells_above_bound"], sampled.summary["n_sac_cells_above_bound"]
    assert above_full > 0.1 * len(tables.sac_released) * len(SENSITIVE)
    assert abs(above_sampled - above_full) <= 0.1 * above_full
    # measured: 0.550 against 0.563 (a 2,000-record fit is slightly weaker; at the default 1,000,000 the gap vanishes)
    assert abs(sampled.summary["mean_posterior"] - full.summary["mean_posterior"]) <= 0.02


def test_the_figures_computed_attribute_by_attribute_equal_those_of_the_per_cell_frame(adult_records):
    """The gate reads ``bound`` and ``summary``, computed one attribute at a time without the frame of every cell
    (32 million rows at 10M records); both must equal what the per-cell frame gives, on a release with cells
    above the bound in both parts (the leaky P1 candidate)."""
    records = adult_records.iloc[:6000].reset_index(drop=True)
    tables = _release_tables(records, "p1")
    result = _posteriors(records, tables)
    frame = result.frame
    pd.testing.assert_frame_equal(result.bound, reference_posterior_bound_summary(frame))
    above = frame[frame["above_bound"]]
    assert len(above) > 0
    assert result.summary["n_cells"] == len(frame) == len(SENSITIVE) * (len(tables.sac_released) + len(tables.attribute_table))
    assert result.summary["n_cells_above_bound"] == len(above)
    assert result.summary["n_records_above_bound"] == above["row_id"].nunique()
    assert result.summary["n_sac_cells_above_bound"] == int((above["part"] == "sac").sum())
    assert result.summary["max_excess"] == pytest.approx(frame["excess"].max())
    assert result.summary["mean_posterior"] == pytest.approx(frame["posterior"].mean())
    assert result.summary["mean_population_posterior"] == pytest.approx(frame["population_posterior"].mean())
    assert result.summary["mean_self_expected_posterior"] == pytest.approx(frame["self_expected_posterior"].mean())
    assert result.histogram.sum() == len(frame)


def test_the_held_out_folds_paths_are_those_of_weighting_every_pair_by_its_fold(adult_records):
    """Each held-out fold's EM path updates and counts only its own half of the release (half the work); the models
    must be those of the definition, bit for bit: every responsibility updated, every pair counted with weight 0 outside
    the fold (adding 0.0 changes no sum). On the leaky P1 candidate (EM learns a dependence), with SAC~ groups, exact
    SIDs and attribute-table SIDs."""
    from pipeline.core import posterior as module

    records = adult_records.iloc[:6000].reset_index(drop=True)
    tables = _release_tables(records, "p1")

    def release_data():
        data, _ = module._release_data(QUASI_IDENTIFIERS, SENSITIVE, **_release_arguments(tables))
        return data

    probe = release_data()
    assert {block.kind for block in probe.groups} == {"sac", "sid"} and probe.sids  # every kind of block is exercised
    for fold in (0, 1):
        path = module._em_path(release_data(), 1.0, 6, fold)[1:]  # rounds 1..6 (round 0 is the no-association model)
        reference = reference_fold_em_path(release_data(), 1.0, 6, fold)
        assert len(path) == len(reference) == 6
        for model, expected in zip(path, reference):
            for attribute in SENSITIVE:
                np.testing.assert_array_equal(model.log_prior[attribute], expected.log_prior[attribute])
                for table, expected_table in zip(model.log_conditional[attribute], expected.log_conditional[attribute]):
                    np.testing.assert_array_equal(table, expected_table)
        # the rounds differ from one another: EM learned something on the leaky candidate
        assert not np.array_equal(path[0].log_conditional["relationship"][0], path[-1].log_conditional["relationship"][0])


def _release_arguments(tables) -> dict:
    """The release ``tables`` as the posterior functions' keyword arguments."""
    return {
        "sac_released": tables.sac_released,
        "attribute_table": tables.attribute_table,
        "id_table": tables.id_table,
        "attribute_clusters": tables.attribute_clusters,
    }


def _fit_on(tables, **options):
    """The learned-model adversary's fit (gate 9) on the release ``tables`` of Adult's columns."""
    from pipeline.core.posterior import fit_naive_bayes_on_release

    return fit_naive_bayes_on_release(QUASI_IDENTIFIERS, SENSITIVE, **_release_arguments(tables), **options)


def test_the_two_held_out_folds_on_two_threads_give_the_fit_of_one_thread(adult_records, monkeypatch):
    """Gate 9's fit with ``threads=2`` runs fold 1's EM path on a second thread while fold 0's runs on this one; the
    held-out scores, the chosen number of rounds, the model and every responsibility must be those of one thread, bit
    for bit (the leaky P1 candidate: EM learns a dependence, so the rounds' scores differ). The progress reports come
    one at a time, counting up to the rounds done."""
    import threading

    from pipeline.core import posterior as module

    records = adult_records.iloc[:6000].reset_index(drop=True)
    tables = _release_tables(records, "p1")
    real_fold_scores = module._fold_scores
    threads_of_fold: dict[int, str] = {}

    def recording_fold_scores(data, smoothing, n_iterations, fold, on_round=None):
        threads_of_fold[fold] = threading.current_thread().name
        return real_fold_scores(data, smoothing, n_iterations, fold, on_round)

    monkeypatch.setattr(module, "_fold_scores", recording_fold_scores)
    fits = {}
    for threads in (1, 2):
        reports: list[int] = []
        fits[threads] = _fit_on(
            tables,
            n_iterations=8,
            progress=lambda done, total, reports=reports: reports.append(done),
            threads=threads,
        )
        assert reports == list(range(1, len(reports) + 1)) and len(reports) >= 2 * 8 + 1
        if threads == 2:
            assert threads_of_fold[0] != threads_of_fold[1]  # the folds did run on two threads
        else:
            assert threads_of_fold[0] == threads_of_fold[1]
    (model_1, data_1, rows_1), (model_2, data_2, rows_2) = fits[1], fits[2]
    assert len(set(data_1.held_out_scores.tolist())) > 2  # the scores of the rounds differ
    np.testing.assert_array_equal(data_2.held_out_scores, data_1.held_out_scores)
    assert data_2.selected_iterations == data_1.selected_iterations
    np.testing.assert_array_equal(rows_2, rows_1)
    for attribute in SENSITIVE:
        np.testing.assert_array_equal(model_2.log_prior[attribute], model_1.log_prior[attribute])
        for table_2, table_1 in zip(model_2.log_conditional[attribute], model_1.log_conditional[attribute], strict=True):
            np.testing.assert_array_equal(table_2, table_1)
    for block_2, block_1 in zip(data_2.groups, data_1.groups, strict=True):
        np.testing.assert_array_equal(block_2.marginals, block_1.marginals)
    for attribute, sid in data_1.sids.items():
        np.testing.assert_array_equal(data_2.sids[attribute].responsibility, sid.responsibility)


def test_an_error_in_the_second_threads_fold_is_raised(adult_records, monkeypatch):
    from pipeline.core import posterior as module

    records = adult_records.iloc[:3000].reset_index(drop=True)
    tables = _release_tables(records, "p1")
    real_fold_scores = module._fold_scores

    def failing_fold_scores(data, smoothing, n_iterations, fold, on_round=None):
        if fold == 1:
            raise MemoryError("fold 1 ran out of memory")
        return real_fold_scores(data, smoothing, n_iterations, fold, on_round)

    monkeypatch.setattr(module, "_fold_scores", failing_fold_scores)
    with pytest.raises(MemoryError, match="fold 1"):
        _fit_on(tables, n_iterations=3, threads=2)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        _fit_on(tables, threads=0)
