"""Regenerate llm_connect/ledger/data/t_quantiles.json.gz from scipy.

The ledger's confidence intervals need Student-t critical values. scipy
computes them; importing scipy costs about a second per process, so the
values for the common confidence levels are tabulated here once, by scipy,
and scipy is imported at run time only for other levels or larger samples.
``tests/ledger/test_stats.py`` checks the table against scipy.

    python scripts/gen_t_quantiles.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from scipy.special import stdtrit

CONFIDENCES = ("0.8", "0.9", "0.95", "0.98", "0.99", "0.999")
MAX_DF = 2000
OUT = Path(__file__).resolve().parent.parent / "llm_connect" / "ledger" / "data" / "t_quantiles.json.gz"


def main() -> None:
    table = {
        "max_df": MAX_DF,
        "source": "scipy.special.stdtrit(df, 1 - (1 - confidence) / 2), df = 1..max_df",
        "quantiles": {
            c: [float(stdtrit(df, 1.0 - (1.0 - float(c)) / 2.0)) for df in range(1, MAX_DF + 1)]
            for c in CONFIDENCES
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as fh:
        fh.write(json.dumps(table, separators=(",", ":")).encode())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
