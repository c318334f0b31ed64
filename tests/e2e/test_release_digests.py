"""Releases of Adult for every model stay what they were (issue 13: the restructuring must not change a release).

``tests/fixtures/release_digests.json`` holds, per model, the SHA-256 of every published table (its rows as CSV, in
published order) and the manifest's counts and gate figures (times left out), as main published them before the
restructuring of issue 13 (home secret of tests/conftest.py). It is a regression pin, not a golden truth: the
privacy and utility figures themselves are checked against the SPEC elsewhere. When a change is *meant* to change a
release, regenerate it with ``MSA_RELEASE_UPDATE_DIGESTS=1 pytest tests/e2e/test_release_digests.py`` and say why in the
commit."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from pipeline.release.publish import list_releases, read_latest
from tests.jobs import run_job

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "release_digests.json"
MODELS = {
    "mixed": ("release", {}),
    "rating": ("rating_release", {"model": "rating", "allow_disclosure": True}),
    "kl": ("kl_release", {"model": "kl"}),
}


def release_digest(release_dir: Path) -> dict:
    """Table digests and the manifest's figures of one published release (no time, no id)."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    tables = {
        path.stem: hashlib.sha256(pd.read_parquet(path).to_csv(index=False).encode()).hexdigest()
        for path in sorted(release_dir.glob("*.parquet"))
        if path.stem != "release_manifest"
    }
    figures = {key: manifest[key] for key in sorted(manifest) if key.startswith("n_")}
    checks = {
        check["name"]: {
            "status": check["status"],
            **{k: v for k, v in sorted((check.get("observed") or {}).items()) if "seconds" not in k},
        }
        for check in manifest["checks"]
    }
    return {"tables": tables, "figures": figures, "checks": checks}


@pytest.fixture(scope="module")
def digests(tmp_path_factory) -> dict:
    import pipeline.release.home_secret
    from tests.conftest import TEST_HOME_SECRET

    out = {}
    with pytest.MonkeyPatch.context() as patch:  # module scope: the autouse per-test patch is not active yet
        patch.setattr(pipeline.release.home_secret, "_new_secret", lambda: TEST_HOME_SECRET)
        for model, (job, settings) in MODELS.items():
            home = tmp_path_factory.mktemp(f"digest-{model}") / "home"
            result = run_job(home, job, settings)
            assert result.success, model
            # Rating with allow_disclosure is a comparison (issue 15): same files, under comparisons/
            published = list_releases(home / "comparisons")[-1] if model == "rating" else read_latest(home / "releases")
            out[model] = json.loads(json.dumps(release_digest(published)))
    if os.environ.get("MSA_RELEASE_UPDATE_DIGESTS") == "1":
        FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_adult_release_is_unchanged(digests, model):
    expected = json.loads(FIXTURE.read_text())[model]
    assert digests[model]["tables"] == expected["tables"]
    assert digests[model]["figures"] == expected["figures"]
    assert digests[model]["checks"] == expected["checks"]
