"""Stage requests: the small dicts a cycle hands to Dagster (or the local runner) round-trip and are validated."""

from __future__ import annotations

import pytest

from ra_agent.agent.stages import STAGE_ASSETS, StageRequest, after_new_papers, expansion_key


def test_requests_round_trip_through_their_dict_form():
    for request in [StageRequest("pico", "c0003", "run_pico"), *after_new_papers("new search results")]:
        assert StageRequest.from_dict(request.to_dict()) == request
    assert StageRequest("pico", "c0003").assets == STAGE_ASSETS["pico"] == ("pico_extractions",)
    assert StageRequest("expand", expansion_key("c0003", "ripple")).label() == "expand[c0003.ripple]"


def test_unknown_stage_and_missing_partition_are_refused():
    with pytest.raises(ValueError, match="unknown stage 'embedd'"):
        StageRequest("embedd")
    with pytest.raises(ValueError, match="'pico' needs a partition key"):
        StageRequest.from_dict({"stage": "pico"})
    with pytest.raises(ValueError, match="'organise' has no partition key"):
        _ = StageRequest("organise").key
