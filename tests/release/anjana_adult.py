"""Run anjana (https://github.com/IFCA-Advanced-Computing/anjana) on a table, in anjana's own environment.

anjana cannot be installed beside this project's pins (anjana 1.2.3 pins pycanon 1.3.5, which pins scipy 1.15.3;
mlxtend 0.25.0 needs scipy >= 1.16.3), so ``tests/release/test_anjana_audit.py`` runs this script with
``uv run --isolated --no-project --with anjana==1.2.3``: it imports only anjana, pandas and the standard library.

anjana's ``l_diversity`` protects one sensitive attribute per call. Distinct ℓ-diversity of every sensitive attribute
is reached the way a steward would with anjana: one call per attribute, each call generalizing further from the
previous call's output (the quasi-identifiers' ARX hierarchies cut at the level the previous call chose, so that its
labels are the new base values). Suppressed records are removed, as anjana removes them.

Usage: python anjana_adult.py RAW.csv HIERARCHIES_DIR QUASI,IDENTIFIERS SENSITIVE,ATTRIBUTES K ELL SUPPRESSION% OUT.csv
(hierarchy files ``adult_hierarchy_<name>.csv``, ';'-separated, base value first; the output is written as CSV).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from anjana.anonymity import l_diversity


def main(raw: str, hierarchies_dir: str, quasi: str, sensitive: str, k: str, ell: str, suppression: str, out: str) -> None:
    quasi_identifiers = quasi.split(",")
    data = pd.read_csv(raw, dtype=str, keep_default_na=False)
    arx = {
        name: pd.read_csv(
            Path(hierarchies_dir) / f"adult_hierarchy_{name}.csv", sep=";", header=None, dtype=str, keep_default_na=False
        )
        for name in quasi_identifiers
    }
    level = dict.fromkeys(quasi_identifiers, 0)
    for attribute in sensitive.split(","):
        cut = {name: arx[name].iloc[:, level[name] :].drop_duplicates().reset_index(drop=True) for name in quasi_identifiers}
        hierarchies = {name: {i: cut[name].iloc[:, i].to_numpy() for i in range(cut[name].shape[1])} for name in cut}
        data = l_diversity(data, [], quasi_identifiers, attribute, int(k), int(ell), float(suppression), hierarchies)
        data = data.drop(columns=[c for c in data.columns if c == "index"]).reset_index(drop=True)
        for name in quasi_identifiers:  # the level this call chose: the first column of the cut holding every label
            labels = set(data[name])
            level[name] += next(i for i in range(cut[name].shape[1]) if labels <= set(cut[name].iloc[:, i]))
    data.to_csv(out, index=False)
    print(";".join(f"{name}={level[name]}" for name in quasi_identifiers))


if __name__ == "__main__":
    main(*sys.argv[1:])
